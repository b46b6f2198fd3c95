//! The workers' side of the board (§13.2–§13.6), shared by the HTTP routes and the MCP tools:
//! offer, claim-next, heartbeat, submit, fail, abort, artifacts. Each operation checks its
//! input, then calls the board through the signature-verifying seam (`Verified` with the
//! identity store's keys), the task types' schemas and the artifact store; nothing here
//! decides a transition (the core's board machine does).

use crate::problem::{ApiError, ApiResult};
use crate::AppState;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::sync::Arc;
use utoipa::ToSchema;
use vouch_artifacts::{ArtifactError, ArtifactStore};
use vouch_runtime::host::TaskTypes;
use vouch_store::board::{
    artifact_statement, claim_statement, content_id, heartbeat_statement, report_statement,
    AttemptRef, BoardStore, ClaimRequest, Report, ReportKind, SignatureVerifier, Stamp, Usage,
};
use vouch_store::{IdentityStore, StoreError};

/// How far a signed statement's `at_ms` may be from the host's clock (it is signed over it).
pub const CLAIM_SKEW_MS_MAX: i64 = vouch_store::board::STATEMENT_SKEW_MS_MAX;
/// A failure or abort reason's length at most, in characters.
pub const REASON_CHARS_MAX: usize = 4096;

/// What the workers' routes need beside the board.
#[derive(Clone)]
pub struct Work {
    /// The home: the host's key file for signed receipts (§16).
    pub home: Option<PathBuf>,
    /// Public keys of workers (signatures of claims and reports) and of the host.
    pub identities: Option<Arc<dyn IdentityStore>>,
    pub artifacts: Option<Arc<dyn ArtifactStore>>,
    /// Task types whose schemas check inputs and results.
    pub types: Arc<TaskTypes>,
    /// Malformed submissions an attempt may repair (§13.4.1); the count is the board's.
    pub repairs_max: u32,
    /// The largest artifact stored, in bytes (§13.5: 25 MiB by default).
    pub artifact_bytes_max: u64,
}

impl Default for Work {
    fn default() -> Self {
        Work {
            home: None,
            identities: None,
            artifacts: None,
            types: Arc::new(TaskTypes::builtin()),
            repairs_max: vouch_core::board::DEFAULT_REPAIRS_MAX,
            artifact_bytes_max: vouch_artifacts::ARTIFACT_BYTES_MAX_DEFAULT,
        }
    }
}

// ------------------------------------------------------------------------------- bodies

/// A claim of the oldest claimable task matching the filters, signed by the claimant.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ClaimBody {
    /// The worker's identity name (`vouch identity new NAME`).
    pub claimant: String,
    /// The runtime profile it claims under (default `default`).
    #[serde(default = "default_profile")]
    pub profile: String,
    #[serde(default)]
    pub model: Option<String>,
    /// Only these task types (empty: any).
    #[serde(default)]
    pub types: Vec<String>,
    /// Only tasks with one of these tags (empty: any).
    #[serde(default)]
    pub tags: Vec<String>,
    /// The runtime policy it runs under (default `{"profile": PROFILE, "context":
    /// "autonomous"}`); the attempt records its fingerprint.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub policy: Option<Value>,
    /// The claimant's clock, in milliseconds since the epoch; within 60 s of the host's.
    pub at_ms: i64,
    /// Fresh per statement: 16–64 characters of `A–Z a–z 0–9 _ -`; a nonce the claimant used
    /// before is refused (409 `replayed`).
    pub nonce: String,
    /// Ed25519 signature (128 hex digits) over the canonical JSON of `{"claim": {"claimant",
    /// "task": null, "profile", "policy_fingerprint", "at_ms", "nonce"}}` (§13.6.2).
    pub signature: String,
}

fn default_profile() -> String {
    "default".into()
}

/// Names the live attempt as its claimant holds it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct HeartbeatBody {
    pub claimant: String,
    /// The lease epoch the claim answered.
    pub epoch: i64,
    /// The claimant's clock (within 60 s of the host's) and a fresh nonce, as on a claim.
    pub at_ms: i64,
    pub nonce: String,
    /// Signature over the canonical JSON of `{"heartbeat": {"task", "attempt", "claimant",
    /// "epoch", "at_ms", "nonce"}}` (§13.6.2).
    pub signature: String,
}

/// The attempt's result, validated against the task type's output schema.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SubmitBody {
    pub claimant: String,
    pub epoch: i64,
    #[schema(value_type = Object)]
    pub result: Value,
    /// Required when the task has success criteria (advisory, kept apart from verdicts).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub self_assessment: Option<Value>,
    /// The attempt's run (the claim's `run`; 409 `wrong_run` when it names none or another
    /// for an attempt bound to its run): the submit ends it, and its receipt and usage are
    /// taken from the host's own journal.
    #[serde(default)]
    pub run: Option<String>,
    /// Without `run`: the worker's own count of what the attempt cost (`turns`, `tokens`,
    /// `tool_calls`, `failed_tool_calls`; non-negative). With `run` the run's journal counts
    /// it and this is refused.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub usage: Option<Usage>,
    /// The claimant's clock (within 60 s of the host's) and a fresh nonce, as on a claim.
    pub at_ms: i64,
    pub nonce: String,
    /// Signature over the canonical JSON of `{"report": {"task", "attempt", "claimant",
    /// "epoch", "outcome": "accepted", "output": CID of the result, "run", "at_ms",
    /// "nonce"}}`.
    pub signature: String,
}

/// The attempt failed (retried while attempts remain only if `retryable`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FailBody {
    pub claimant: String,
    pub epoch: i64,
    pub retryable: bool,
    pub reason: String,
    /// The attempt's run, as for a submit (the fail ends it).
    #[serde(default)]
    pub run: Option<String>,
    /// As in `SubmitBody`: the worker's own count when it names no run.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub usage: Option<Usage>,
    /// Why it failed, when the worker knows (§13.3.2): `model_outage`, `tool_error`,
    /// `malformed_output`, `policy_refusal` or `worker_crash`. It never decides the retry.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub class: Option<vouch_core::board::FailureClass>,
    pub at_ms: i64,
    pub nonce: String,
    /// Signature over the report statement with `"outcome": "failed"`, `"output": null`.
    pub signature: String,
}

/// The worker stops (always retryable; does not count against max attempts).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AbortBody {
    pub claimant: String,
    pub epoch: i64,
    pub reason: String,
    pub at_ms: i64,
    pub nonce: String,
    /// Signature over the report statement with `"outcome": "aborted"`, `"output": null`,
    /// `"run": null`.
    pub signature: String,
}

/// What a claim-next found: nothing claimable (`claimed: false`), or the task and its attempt.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ClaimResult {
    pub claimed: bool,
    #[schema(value_type = Option<Object>)]
    pub task: Option<Value>,
    #[schema(value_type = Option<Object>)]
    pub attempt: Option<Value>,
    /// The attempt was suspended (waiting for a person) and continues under a new epoch.
    pub resumption: bool,
    /// The attempt's run on this host (trigger `task`), opened by the claim (a resumption's is
    /// the run it continues). Every tool call of the work goes through
    /// `POST /api/tasks/{id}/attempts/{n}/call`; a submit or fail names this run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run: Option<String>,
    /// The run's conversation as the model goes on from it (system, the task told, every
    /// call and answer so far — for a resumption, the person's decisions too).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub conversation: Option<Value>,
    /// The tools the run's model is offered: `declare`, `clarify`, the verbs and `submit`
    /// (its `result` is the task type's output schema).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Value>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct HeartbeatResult {
    /// The owner cancelled the task: stop working (the attempt is already `cancelled`).
    pub cancelled: bool,
    pub lease_until_ms: Option<i64>,
}

/// The task and the attempt after a report.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ReportResult {
    #[schema(value_type = Object)]
    pub task: Value,
    #[schema(value_type = Object)]
    pub attempt: Value,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ArtifactPut {
    pub cid: String,
    pub size_bytes: u64,
}

// ------------------------------------------------------------------------------- helpers

pub(crate) fn json_of<T: Serialize>(v: &T) -> ApiResult<Value> {
    serde_json::to_value(v).map_err(|e| ApiError::internal(format!("encode: {e}")))
}

pub(crate) fn board_of(s: &AppState) -> ApiResult<Arc<dyn BoardStore>> {
    s.board
        .clone()
        .ok_or_else(|| ApiError::not_found("this server has no task board"))
}

fn identities(s: &AppState) -> ApiResult<Arc<dyn IdentityStore>> {
    s.work.identities.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "this server has no identity store, so it cannot check signatures",
        )
    })
}

/// Checks a signature against the public key the store records for the identity.
struct Keys(Arc<dyn IdentityStore>);

impl SignatureVerifier for Keys {
    fn verify(
        &self,
        identity: &str,
        statement: &str,
        signature: Option<&str>,
    ) -> Result<(), String> {
        let sig = signature.ok_or_else(|| format!("`{identity}` did not sign it"))?;
        let value: Value =
            serde_json::from_str(statement).map_err(|e| format!("unreadable statement: {e}"))?;
        vouch_identity::verify_by(&*self.0, identity, &value, sig).map_err(|e| e.to_string())
    }
}

/// The board and the verifier of its workers' statements. Every operation here checks the
/// signature (`check_signature`) and the stamp (`fresh`) itself before it writes, once.
pub(crate) fn verified(
    s: &AppState,
) -> ApiResult<(Arc<dyn BoardStore>, Arc<dyn SignatureVerifier>)> {
    let verifier: Arc<dyn SignatureVerifier> = Arc::new(Keys(identities(s)?));
    Ok((board_of(s)?, verifier))
}

/// The freshness and replay check of a signed worker statement (§13.6.3), after its
/// signature verified: `at_ms` within 60 s of the host's clock (else 422 naming `at_ms`), a
/// well-formed nonce (else 422 naming `nonce`) the identity never used before (else 409
/// `replayed`). The nonce is spent in the store, so every host on one database agrees.
pub fn fresh(s: &AppState, identity: &str, at_ms: i64, nonce: &str) -> ApiResult<()> {
    let stamp = Stamp {
        at_ms,
        nonce: nonce.to_string(),
    };
    let now = s.host.now_ms();
    vouch_store::board::spend_stamp(&*board_of(s)?, identity, &stamp, now).map_err(stamp_err)
}

fn stamp_err(e: vouch_store::board::StampError) -> ApiError {
    use vouch_store::board::StampError;
    match e {
        StampError::Stale { .. } => ApiError::field("at_ms", e.to_string()),
        StampError::BadNonce => ApiError::field("nonce", e.to_string()),
        StampError::Replayed { .. } => {
            ApiError::new(StatusCode::CONFLICT, "replayed", e.to_string()).with_field("nonce")
        }
        StampError::Store(e) => e.into(),
    }
}

/// A statement's stamp's shape (clock, nonce), its signature, then the nonce spent: an
/// unsigned request spends no nonce.
pub(crate) fn signed_fresh(
    s: &AppState,
    verifier: &dyn SignatureVerifier,
    who: &str,
    statement: &str,
    signature: &str,
    stamp: &Stamp,
) -> ApiResult<()> {
    vouch_store::board::check_stamp(stamp, s.host.now_ms()).map_err(stamp_err)?;
    check_signature(verifier, who, statement, signature)?;
    fresh(s, who, stamp.at_ms, &stamp.nonce)
}

/// A signature that does not verify: 403 `bad_signature`, naming the statement to sign.
pub(crate) fn check_signature(
    verifier: &dyn SignatureVerifier,
    who: &str,
    statement: &str,
    signature: &str,
) -> ApiResult<()> {
    verifier
        .verify(who, statement, Some(signature))
        .map_err(|e| {
            ApiError::new(
                StatusCode::FORBIDDEN,
                "bad_signature",
                format!("{e}; sign the canonical JSON {statement} with `{who}`'s Ed25519 key"),
            )
            .with_field("signature")
        })
}

fn nonempty(field: &'static str, v: &str) -> ApiResult<()> {
    if v.trim().is_empty() {
        return Err(ApiError::field(field, format!("`{field}` is empty")));
    }
    Ok(())
}

pub(crate) fn attempt_ref(task: &str, n: u32, claimant: &str, epoch: i64) -> ApiResult<AttemptRef> {
    nonempty("claimant", claimant)?;
    Ok(AttemptRef {
        task_id: task.to_string(),
        n,
        claimant: claimant.to_string(),
        epoch,
    })
}

/// A board refusal (the attempt ended, another claimant holds it, a stale epoch) is 409
/// `refused`: the caller is not (or no longer) the live claimant; nothing changed.
pub(crate) fn board_err(e: StoreError) -> ApiError {
    match e {
        StoreError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "refused", m),
        StoreError::NotFound { what, id } => {
            ApiError::not_found(format!("no {what} `{id}`; list tasks with GET /api/tasks"))
        }
        other => other.into(),
    }
}

/// A report's receipt and usage: the host's own journal when it names a run, else the
/// worker's own count (a worker outside vouch, §13.7.2), which must be non-negative.
fn report_facts(
    s: &AppState,
    run: Option<&str>,
    usage: Option<Usage>,
) -> ApiResult<(Option<String>, Usage)> {
    match (run, usage) {
        (Some(_), Some(_)) => Err(ApiError::field(
            "usage",
            "the named run's journal counts this attempt's usage; leave `usage` out or name no run",
        )),
        (None, Some(u)) => {
            if [u.turns, u.tokens, u.tool_calls, u.failed_tool_calls]
                .iter()
                .any(|v| *v < 0)
                || u.failed_tool_calls > u.tool_calls
            {
                return Err(ApiError::field(
                    "usage",
                    "counts are non-negative, and failed_tool_calls at most tool_calls",
                ));
            }
            Ok((None, u))
        }
        (run, None) => run_facts(s, run),
    }
}

/// The run's receipt and the host's own usage counts, for a report naming a run.
fn run_facts(s: &AppState, run: Option<&str>) -> ApiResult<(Option<String>, Usage)> {
    let Some(run) = run else {
        return Ok((None, Usage::default()));
    };
    if s.store.run(run)?.is_none() {
        return Err(ApiError::field(
            "run",
            format!("no run `{run}`; name the run the attempt ran as, or leave it out"),
        ));
    }
    let journal = s.store.journal_events(run)?;
    Ok((
        s.store.receipt(run)?,
        vouch_runtime::host::usage_of(&journal),
    ))
}

pub(crate) fn reported(r: vouch_store::board::Reported) -> ApiResult<ReportResult> {
    Ok(ReportResult {
        task: json_of(&r.task)?,
        attempt: json_of(&r.attempt)?,
    })
}

// ------------------------------------------------------------------------------- operations

/// Offer a task (§13.1); `Ok((created, task))`.
pub fn offer(
    s: &AppState,
    req: &vouch_runtime::offer::TaskOffer,
    key: Option<String>,
) -> ApiResult<(bool, Value)> {
    let board = board_of(s)?;
    let now = s.host.now_ms();
    let id = format!("t{}", s.host.new_id());
    let offered = vouch_runtime::offer::offer(
        board.as_ref(),
        &s.work.types,
        s.work.artifacts.as_deref(),
        req,
        key,
        "api",
        id,
        now,
    )
    .map_err(|e| match e {
        vouch_runtime::offer::OfferError::Field { field, message } => {
            ApiError::field(field, format!("`{field}` {message}"))
        }
        vouch_runtime::offer::OfferError::Store(StoreError::Conflict(m)) => {
            ApiError::new(StatusCode::CONFLICT, "conflict", m).with_field("Idempotency-Key")
        }
        vouch_runtime::offer::OfferError::Store(e) => e.into(),
    })?;
    let created = matches!(offered, vouch_store::board::Offered::Created(_));
    Ok((created, json_of(offered.task())?))
}

/// Claim the oldest claimable task for this worker (§13.2), after a sweep of the board; the
/// claim opens the attempt's run on this host (`via`: `http` or `mcp`), its id on the
/// attempt's row and in the answer.
pub fn claim_next(s: &AppState, b: &ClaimBody, via: &str) -> ApiResult<ClaimResult> {
    let req = signed_claim(s, b)?;
    claim_checked(s, &req, via)
}

/// A claim's request once its signature and stamp are checked (its nonce is spent: a long
/// poll claims with the request again, not with the body).
pub fn signed_claim(s: &AppState, b: &ClaimBody) -> ApiResult<ClaimRequest> {
    nonempty("claimant", &b.claimant)?;
    nonempty("profile", &b.profile)?;
    let (_, verifier) = verified(s)?;
    let policy = b
        .policy
        .clone()
        .unwrap_or_else(|| json!({"profile": b.profile, "context": "autonomous"}));
    let mut req = ClaimRequest {
        claimant: b.claimant.clone(),
        profile: b.profile.clone(),
        model: b.model.clone(),
        policy_fingerprint: content_id(&policy)?,
        types: b.types.clone(),
        tags: b.tags.clone(),
        task_id: None,
        signature: None,
        policy,
        now_ms: b.at_ms,
        nonce: Some(b.nonce.clone()),
        run_id: None,
    };
    let stamp = Stamp {
        at_ms: b.at_ms,
        nonce: b.nonce.clone(),
    };
    signed_fresh(
        s,
        verifier.as_ref(),
        &b.claimant,
        &claim_statement(&req)?,
        &b.signature,
        &stamp,
    )?;
    req.signature = Some(b.signature.clone());
    Ok(req)
}

/// Claim with a checked request (`signed_claim`); the claim opens the attempt's run (`via`).
pub fn claim_checked(s: &AppState, req: &ClaimRequest, via: &str) -> ApiResult<ClaimResult> {
    let board = board_of(s)?;
    let now = s.host.now_ms();
    // The run's id is named before the claim, so the attempt's row holds it from the start.
    let mut req = req.clone();
    req.run_id = Some(s.host.new_id());
    let req = &req;
    // Orphaned attempts, passed deadlines and satisfied conditions first, as every worker does;
    // a sweep that loses a race is done by the next one, and one running elsewhere (fenced
    // across hosts) does this one's work.
    let swept = vouch_store::board::sweep_fenced(&*s.store, &*board, now, false);
    if let Err(e) = &swept {
        tracing::warn!(error = %e, "sweep before a claim failed");
    }
    if let Err(e) = vouch_runtime::cost::charge_uncharged(s.store.as_ref(), board.as_ref(), now) {
        tracing::warn!(error = %e, "charging ended attempts failed");
    }
    // The sweep's holder ends the task runs whose attempt ended (a remote worker that died
    // leaves its run idle) and settles the suspended attempts whose run ended (§13.3).
    if matches!(swept, Ok(Some(_))) {
        if let Err(e) = s.host.tend_task_runs(board.as_ref()) {
            tracing::warn!(error = %e, "tending the runs of ended and suspended attempts failed");
        }
    }
    let started = std::time::Instant::now();
    let claim = board.claim(req).map_err(board_err);
    s.metrics.claim_latency.observe(started.elapsed());
    let Some(c) = claim? else {
        return Ok(ClaimResult {
            claimed: false,
            task: None,
            attempt: None,
            resumption: false,
            run: None,
            conversation: None,
            tools: None,
        });
    };
    let run = crate::attempt::open_run(s, &c, via)?;
    let (conversation, _) = s.host.conversation(&run)?;
    Ok(ClaimResult {
        claimed: true,
        task: Some(json_of(&c.task)?),
        attempt: Some(json_of(&c.attempt)?),
        resumption: c.resumption,
        run: Some(run.clone()),
        conversation: Some(conversation),
        tools: Some(json_of(&s.host.attempt_tools(&run)?)?),
    })
}

/// Keep the lease of a live attempt, signed by its claimant (§13.3).
pub fn heartbeat(
    s: &AppState,
    task: &str,
    n: u32,
    b: &HeartbeatBody,
) -> ApiResult<HeartbeatResult> {
    let at = attempt_ref(task, n, &b.claimant, b.epoch)?;
    let (board, verifier) = verified(s)?;
    let stamp = Stamp {
        at_ms: b.at_ms,
        nonce: b.nonce.clone(),
    };
    signed_fresh(
        s,
        verifier.as_ref(),
        &b.claimant,
        &heartbeat_statement(&at, &stamp)?,
        &b.signature,
        &stamp,
    )?;
    let h = board.heartbeat(&at, s.host.now_ms()).map_err(board_err)?;
    Ok(HeartbeatResult {
        cancelled: h.cancelled,
        lease_until_ms: h.lease_until_ms,
    })
}

/// The caller must be the live claimant before its malformed submission costs a repair.
pub(crate) fn live_claimant(
    board: &dyn BoardStore,
    at: &AttemptRef,
) -> ApiResult<vouch_store::board::TaskRecord> {
    let t = board.task(&at.task_id)?.ok_or_else(|| {
        ApiError::not_found(format!(
            "no task `{}`; list tasks with GET /api/tasks",
            at.task_id
        ))
    })?;
    let live = board
        .attempts(&at.task_id)?
        .into_iter()
        .find(|a| a.n == at.n)
        .is_some_and(|a| a.state.is_leased() && a.claimant == at.claimant && a.epoch == at.epoch);
    if !live || t.claimant.as_deref() != Some(at.claimant.as_str()) {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "refused",
            format!(
                "attempt {} of task {} is not held by `{}` at epoch {} (it ended, or another claimant holds it); nothing changed",
                at.n, at.task_id, at.claimant, at.epoch
            ),
        ));
    }
    Ok(t)
}

/// Submit the attempt's result (§13.4): validated against the type's output schema; a
/// malformed one costs a repair (422 naming the path) and leaves the attempt running.
pub fn submit(s: &AppState, task: &str, n: u32, b: &SubmitBody) -> ApiResult<ReportResult> {
    let at = attempt_ref(task, n, &b.claimant, b.epoch)?;
    let (board, verifier) = verified(s)?;
    let stamp = submission_signed(s, verifier.as_ref(), &at, b)?;
    let t = live_claimant(board.as_ref(), &at)?;
    // Named before a malformed result costs a repair: the attempt's own run, or nothing.
    crate::attempt::check_named_run(board.as_ref(), &at, b.run.as_deref())?;
    if let Some(run) = b.run.as_deref() {
        if crate::attempt::is_open(s, run)? {
            report_facts(s, b.run.as_deref(), b.usage)?;
            return crate::attempt::submit_through_run(s, &at, b, &stamp);
        }
    }
    let ty = s.work.types.get(&t.kind).ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "refused",
            format!(
                "task type `{}` is not registered on this host; add it to the home's types/",
                t.kind
            ),
        )
    })?;
    let rules = vouch_runtime::host::SubmitRules {
        task: Some((&t.kind, &t.spec.input)),
        output_schema: &ty.output_schema,
        needs_assessment: t.spec.criteria.is_some(),
        artifacts: s.work.artifacts.as_deref(),
        repairs_max: s.work.repairs_max,
    };
    // The attempt row counts the repairs (§13.4.1): the same budget as the run's own
    // `submit` tool, whichever interface or process the submissions come through.
    let budget = vouch_runtime::host::BoardBudget {
        board: board.as_ref(),
        attempt: &at,
    };
    let accepted = vouch_runtime::host::accept_submission(
        &rules,
        &budget,
        &b.result,
        b.self_assessment.as_ref(),
    )
    .map_err(submit_err)?;
    let assessment = accepted.self_assessment;
    crate::attempt::end_bound_run(s, board.as_ref(), &at, b.run.as_deref())?;
    let (receipt, usage) = report_facts(s, b.run.as_deref(), b.usage)?;
    let report = Report {
        attempt: at,
        kind: ReportKind::Accepted {
            result: b.result.clone(),
            self_assessment: assessment,
            verdict: vouch_runtime::host::verdict_of(&t.kind, &t.spec.input, &b.result),
        },
        run_id: b.run.clone(),
        receipt,
        usage,
        signature: Some(b.signature.clone()),
        now_ms: s.host.now_ms(),
        stamp: Some(stamp),
    };
    let done = board.report(&report).map_err(board_err)?;
    // Acceptance is observed, not assumed: read the output back by its content id.
    if let Some(id) = &done.task.result_id {
        if board.result(id)?.as_ref() != Some(&b.result) {
            return Err(ApiError::internal(format!(
                "the board stored {id} but reads back something else"
            )));
        }
    }
    reported(done)
}

/// A submission is signed and fresh before anything else: an unsigned or replayed one costs
/// no repair. Its statement names the result's content id, not the host's verdict on it.
fn submission_signed(
    s: &AppState,
    verifier: &dyn SignatureVerifier,
    at: &AttemptRef,
    b: &SubmitBody,
) -> ApiResult<Stamp> {
    let stamp = Stamp {
        at_ms: b.at_ms,
        nonce: b.nonce.clone(),
    };
    let statement = report_statement(&Report {
        attempt: at.clone(),
        kind: ReportKind::Accepted {
            result: b.result.clone(),
            self_assessment: None,
            verdict: None,
        },
        run_id: b.run.clone(),
        receipt: None,
        usage: Usage::default(),
        signature: None,
        now_ms: 0,
        stamp: Some(stamp.clone()),
    })?;
    signed_fresh(s, verifier, &b.claimant, &statement, &b.signature, &stamp)?;
    Ok(stamp)
}

/// A malformed result is 422 naming its paths; a submission after the repairs are spent is
/// 409 `refused`, valid or not.
fn submit_err(e: vouch_runtime::host::SubmitError) -> ApiError {
    use vouch_runtime::host::SubmitError;
    match e {
        SubmitError::Invalid { .. } => {
            ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_result", e.to_string())
                .with_field("result")
        }
        SubmitError::NoRepairsLeft { spent } => ApiError::new(
            StatusCode::CONFLICT,
            "refused",
            format!(
                "no repairs left ({spent} malformed submissions); report the attempt failed (POST …/fail)"
            ),
        ),
        SubmitError::Store(e) => board_err(e),
    }
}

fn reason(v: &str) -> ApiResult<String> {
    nonempty("reason", v)?;
    if v.chars().count() > REASON_CHARS_MAX {
        return Err(ApiError::field(
            "reason",
            format!("`reason` is longer than {REASON_CHARS_MAX} characters"),
        ));
    }
    Ok(v.to_string())
}

pub fn fail(s: &AppState, task: &str, n: u32, b: &FailBody) -> ApiResult<ReportResult> {
    let at = attempt_ref(task, n, &b.claimant, b.epoch)?;
    let reason = reason(&b.reason)?;
    let (board, verifier) = verified(s)?;
    crate::attempt::end_bound_run(s, board.as_ref(), &at, b.run.as_deref())?;
    let (receipt, usage) = report_facts(s, b.run.as_deref(), b.usage)?;
    let report = Report {
        attempt: at,
        kind: ReportKind::Failed {
            retryable: b.retryable,
            reason,
            class: b.class,
        },
        run_id: b.run.clone(),
        receipt,
        usage,
        signature: Some(b.signature.clone()),
        now_ms: s.host.now_ms(),
        stamp: Some(Stamp {
            at_ms: b.at_ms,
            nonce: b.nonce.clone(),
        }),
    };
    report_signed(s, board.as_ref(), verifier.as_ref(), &report, &b.signature)
}

pub fn abort(s: &AppState, task: &str, n: u32, b: &AbortBody) -> ApiResult<ReportResult> {
    let at = attempt_ref(task, n, &b.claimant, b.epoch)?;
    let reason = reason(&b.reason)?;
    let (board, verifier) = verified(s)?;
    let report = Report {
        attempt: at,
        kind: ReportKind::Aborted { reason },
        run_id: None,
        receipt: None,
        usage: Usage::default(),
        signature: Some(b.signature.clone()),
        now_ms: s.host.now_ms(),
        stamp: Some(Stamp {
            at_ms: b.at_ms,
            nonce: b.nonce.clone(),
        }),
    };
    report_signed(s, board.as_ref(), verifier.as_ref(), &report, &b.signature)
}

/// A failure or abort: signed and fresh, then reported.
fn report_signed(
    s: &AppState,
    board: &dyn BoardStore,
    verifier: &dyn SignatureVerifier,
    report: &Report,
    signature: &str,
) -> ApiResult<ReportResult> {
    let stamp = report
        .stamp
        .as_ref()
        .ok_or_else(|| ApiError::internal("a worker's report without its stamp"))?;
    let who = &report.attempt.claimant;
    let statement = report_statement(report)?;
    signed_fresh(s, verifier, who, &statement, signature, stamp)?;
    reported(board.report(report).map_err(board_err)?)
}

fn artifacts(s: &AppState) -> ApiResult<Arc<dyn ArtifactStore>> {
    s.work
        .artifacts
        .clone()
        .ok_or_else(|| ApiError::not_found("this server has no artifact store"))
}

fn artifact_err(e: ArtifactError) -> ApiError {
    match e {
        ArtifactError::BadId(_) => ApiError::field("cid", e.to_string()),
        ArtifactError::NotFound(_) => ApiError::not_found(e.to_string()),
        ArtifactError::TooLarge { .. } => {
            ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "too_large", e.to_string())
        }
        other => ApiError::internal(other.to_string()),
    }
}

/// The largest artifact this server stores, in bytes.
pub fn artifact_bytes_max(s: &AppState) -> u64 {
    s.work.artifact_bytes_max
}

/// Store an output artifact of a live attempt (§13.5): only its claimant may, signing the
/// artifact statement, and the bytes must hash to the content id named.
pub fn put_artifact(
    s: &AppState,
    cid: &str,
    at: &AttemptRef,
    signed: (&Stamp, &str),
    bytes: &[u8],
) -> ApiResult<ArtifactPut> {
    vouch_artifacts::parse_cid(cid).map_err(artifact_err)?;
    let store = artifacts(s)?;
    let (board, verifier) = verified(s)?;
    let (stamp, signature) = signed;
    let statement = artifact_statement(cid, at, stamp)?;
    signed_fresh(
        s,
        verifier.as_ref(),
        &at.claimant,
        &statement,
        signature,
        stamp,
    )?;
    live_claimant(board.as_ref(), at)?;
    let found = vouch_artifacts::content_id(bytes);
    if found != cid {
        return Err(ApiError::field(
            "cid",
            format!("the body hashes to {found}, not {cid}; send the bytes the id names"),
        ));
    }
    let stored = store.put(bytes).map_err(artifact_err)?;
    Ok(ArtifactPut {
        cid: stored,
        size_bytes: bytes.len() as u64,
    })
}

pub fn get_artifact(s: &AppState, cid: &str) -> ApiResult<Vec<u8>> {
    vouch_artifacts::parse_cid(cid).map_err(artifact_err)?;
    artifacts(s)?.get(cid).map_err(artifact_err)
}

/// The run's receipt signed by the host (§16.1); 409 while the run has not ended.
/// The host's own identity (§16): loaded from the home, or created there on first use.
pub fn host_identity(s: &AppState) -> ApiResult<vouch_identity::Identity> {
    let home = s.work.home.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "this server has no home with the host's key, so it has no host key",
        )
    })?;
    vouch_identity::host(
        &vouch_identity::KeyDir::in_home(&home),
        identities(s)?.as_ref(),
        s.host.now_ms(),
    )
    .map_err(|e| ApiError::internal(format!("the host's identity: {e}")))
}

pub fn signed_receipt(s: &AppState, run: &str) -> ApiResult<Value> {
    if s.store.run(run)?.is_none() {
        return Err(ApiError::not_found(format!(
            "no run `{run}`; list runs with GET /api/runs"
        )));
    }
    let journal = s.store.journal(run)?;
    if !journal
        .iter()
        .any(|e| e.kind == vouch_store::EventKind::Terminal)
    {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "not_ended",
            format!("run {run} has not ended yet; a signed receipt exists once it has its terminal record"),
        ));
    }
    let host = host_identity(s)?;
    let text = s.store.receipt(run)?;
    vouch_identity::receipt::sign(&host, run, &journal, text.as_deref())
        .map_err(|e| ApiError::internal(format!("sign the receipt: {e}")))
}
