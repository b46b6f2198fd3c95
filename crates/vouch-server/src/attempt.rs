//! A claimed attempt's run on this host (§13.2): opened by the claim, driven by its claimant
//! one call at a time (`POST /api/tasks/{id}/attempts/{n}/call`, and the MCP host tools with
//! a worker token) through the host exactly as any outside agent's run — postures, cards, the
//! ledger, evidence, the receipt — and reported to the board by the host when it ends, as a
//! CLI worker's run is. Also the read-back of a task's accepted output and a completed task's
//! continuation. Parses and renders; the host and the board decide.

use crate::problem::{ApiError, ApiResult};
use crate::work;
use crate::AppState;
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use utoipa::ToSchema;
use vouch_core::board::FailureClass;
use vouch_core::Verb;
use vouch_runtime::host::{is_external, AttemptJob, ExternalReply};
use vouch_runtime::RunEnd;
use vouch_store::board::{
    call_statement, AttemptCall, AttemptRecord, AttemptRef, BoardStore, Claim, Report, ReportKind,
    TaskRecord, Usage,
};
use vouch_store::journal::TokenUsage;

/// One tool call of the attempt's run, signed by its claimant.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CallBody {
    pub claimant: String,
    /// The lease epoch the claim answered.
    pub epoch: i64,
    /// `declare`, a verb (`save`, `send`, …), `clarify`, `submit` or `finish`.
    pub tool: String,
    /// The tool's arguments as the model gave them: `declare` the manifest, a verb
    /// `{delivery, payload}`, `clarify` `{question}`, `submit` `{result, self_assessment}`,
    /// `finish` `{text}`.
    #[serde(default)]
    #[schema(value_type = Object)]
    pub args: Value,
    /// The claimant's clock, in milliseconds since the epoch; within 60 s of the host's.
    pub at_ms: i64,
    /// 16–64 characters of `A–Z a–z 0–9 _ -` the claimant never used before (§13.6.3).
    pub nonce: String,
    /// The tokens the claimant's model spent on the turn that made this call (give it with
    /// the turn's first call, and with `finish` for the final turn): the host cannot see a
    /// remote model, so the run's cost and token budget count what the claimant reports here.
    #[serde(default)]
    pub usage: Option<CallUsage>,
    /// Ed25519 signature (128 hex digits) over the canonical JSON of `{"call": {"task",
    /// "attempt", "claimant", "epoch", "tool", "args", "at_ms", "nonce"}}`, with `"usage":
    /// {"prompt_tokens", "completion_tokens"}` in it when the call gives `usage`.
    pub signature: String,
}

/// Tokens one model turn spent, as the claimant reports them.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CallUsage {
    #[schema(minimum = 0, maximum = 100_000_000)]
    pub prompt_tokens: u64,
    #[schema(minimum = 0, maximum = 100_000_000)]
    pub completion_tokens: u64,
}

/// Tokens one turn may report, each figure: far above any model's context, so a figure past
/// it is a mistake or a lie, refused rather than counted.
pub const TURN_TOKENS_MAX: u64 = 100_000_000;

impl CallUsage {
    fn checked(self) -> ApiResult<TokenUsage> {
        if self.prompt_tokens > TURN_TOKENS_MAX || self.completion_tokens > TURN_TOKENS_MAX {
            return Err(ApiError::field(
                "usage",
                format!("`usage` counts at most {TURN_TOKENS_MAX} tokens of each kind for one turn; report what the model's answer said it spent"),
            ));
        }
        Ok(TokenUsage {
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
        })
    }
}

/// What one call did (the shape an outside agent's call answers, §17).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct CallAnswer {
    /// The tool's answer, as the host's own model would read it.
    pub ok: bool,
    pub text: String,
    /// The attempt's run.
    pub run: String,
    /// Set when the call suspended the run — `{"state": "suspended", "reason"}`: it waits
    /// for the person, the attempt is suspended with it and the worker is free — or ended it
    /// — `{"state": "ended", "outcome", "attempt_state", "task_state", "result"}`: the host
    /// reported the attempt (accepted, or failed without a handoff).
    #[schema(value_type = Option<Object>)]
    pub end: Option<Value>,
    /// For a `turn`: each call's answer in the turn's order, `{call_id, ok, text}` ("not
    /// run" ones included).
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Vec<Object>>)]
    pub results: Option<Vec<Value>>,
}

/// Calls one posted turn may hold.
pub const TURN_CALLS_MAX: usize = 64;

/// A whole model turn posted as the `turn` tool's arguments (§13.2.2).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnArgs {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    tool_calls: Vec<TurnCall>,
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    exhausted: bool,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TurnCall {
    id: String,
    name: String,
    /// The arguments exactly as the model sent them (text, JSON or not).
    arguments: String,
}

/// A posted turn, checked as a hostile worker's input: ids and names short printable words,
/// at most [`TURN_CALLS_MAX`] calls; the turn's size is the turn machine's to judge.
fn parse_turn(args: &Value, spent: TokenUsage) -> ApiResult<vouch_runtime::host::AgentTurn> {
    let t: TurnArgs = serde_json::from_value(args.clone()).map_err(|e| {
        ApiError::field(
            "args",
            format!("a `turn` takes {{content, tool_calls: [{{id, name, arguments}}], error, exhausted}}: {e}"),
        )
    })?;
    if t.tool_calls.len() > TURN_CALLS_MAX {
        return Err(ApiError::field(
            "args",
            format!(
                "a turn holds at most {TURN_CALLS_MAX} calls; this one has {}",
                t.tool_calls.len()
            ),
        ));
    }
    for c in &t.tool_calls {
        for (what, v, max) in [("id", &c.id, 128), ("name", &c.name, 64)] {
            let bad = v.is_empty() || v.len() > max || v.chars().any(char::is_control);
            if bad {
                return Err(ApiError::field(
                    "args",
                    format!("a call's `{what}` is 1–{max} printable bytes"),
                ));
            }
        }
    }
    let error = t.error.map(|e| e.chars().take(4096).collect());
    Ok(vouch_runtime::host::AgentTurn {
        content: t.content,
        tool_calls: t
            .tool_calls
            .into_iter()
            .map(|c| vouch_runtime::model::ToolCall {
                id: c.id,
                name: c.name,
                arguments: c.arguments,
            })
            .collect(),
        usage: spent,
        error,
        exhausted: t.exhausted,
    })
}

/// A task's accepted output, read back.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaskResult {
    pub task: String,
    /// The content id of the output.
    pub result: String,
    /// The accepted attempt and its run.
    pub attempt: u32,
    pub run: Option<String>,
    #[schema(value_type = Object)]
    pub output: Value,
    /// The producer's self-assessment (advisory, apart from verdicts).
    #[schema(value_type = Option<Object>)]
    pub self_assessment: Option<Value>,
    /// Judges' verdicts on this task: `{judge, passed, scores}`.
    #[schema(value_type = Vec<Object>)]
    pub verdicts: Vec<Value>,
    /// The artifacts the output names (content ids).
    #[schema(value_type = Vec<Object>)]
    pub artifacts: Value,
}

/// A completed task to continue (§13.5).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ContinueBody {
    /// What the continuation asks for.
    pub brief: String,
    /// `extend` (the parent's thread goes on, default) or `fork` (a new thread).
    #[serde(default = "extend")]
    pub mode: String,
}

fn extend() -> String {
    "extend".into()
}

fn attempt_row(board: &dyn BoardStore, at: &AttemptRef) -> ApiResult<AttemptRecord> {
    board
        .attempts(&at.task_id)?
        .into_iter()
        .find(|a| a.n == at.n)
        .ok_or_else(|| {
            ApiError::not_found(format!("task `{}` has no attempt {}", at.task_id, at.n))
        })
}

/// The attempt's job as the host opens its run: what the board handed the claimant.
fn job_of(c: &Claim, repairs_max: u32) -> AttemptJob {
    let t = &c.task;
    AttemptJob {
        task_id: t.id.clone(),
        attempt: c.attempt.n,
        kind: t.kind.clone(),
        brief: t.spec.brief.clone(),
        input: t.spec.input.clone(),
        criteria: t.spec.criteria.clone(),
        model: Value::Null,
        repairs_max,
        profile: None,
        lease: None,
    }
}

/// Open the run of a fresh claim under the id the claim recorded (`via`: `http` or `mcp`);
/// a resumption's run is carried on — what the person approved is carried out now, before
/// the worker's next call. An attempt whose run cannot be opened fails, retryably, naming why.
pub fn open_run(s: &AppState, c: &Claim, via: &str) -> ApiResult<String> {
    let run = c
        .attempt
        .run_id
        .clone()
        .ok_or_else(|| ApiError::internal("the claim recorded no run for its attempt"))?;
    if c.resumption {
        if let Some(r) = s.store.run(&run)? {
            if r.state != vouch_core::RunState::Ended && is_external(&r.spec) {
                s.host.drive(&run)?;
            }
        }
        return Ok(run);
    }
    let board = work::board_of(s)?;
    let job = job_of(c, s.work.repairs_max);
    let opened = s.host.open_attempt_run(
        &run,
        &job,
        &s.work.types,
        Some(board.as_ref()),
        s.work.artifacts.as_deref(),
        via,
    );
    if let Err(e) = opened {
        let report = Report {
            attempt: AttemptRef {
                task_id: c.task.id.clone(),
                n: c.attempt.n,
                claimant: c.attempt.claimant.clone(),
                epoch: c.attempt.epoch,
            },
            kind: ReportKind::Failed {
                retryable: true,
                reason: format!("the host could not open the attempt's run: {e}"),
                class: Some(FailureClass::ToolError),
            },
            run_id: Some(run.clone()),
            receipt: None,
            usage: Usage::default(),
            signature: None,
            now_ms: s.host.now_ms(),
            stamp: None,
        };
        if let Err(r) = board.report(&report) {
            tracing::warn!(error = %r, "reporting an attempt whose run could not be opened");
        }
        return Err(e.into());
    }
    Ok(run)
}

/// A submit or fail names the attempt's own run when it has one (§13.2): none, or another,
/// is 409 `wrong_run`.
pub fn check_named_run(
    board: &dyn BoardStore,
    at: &AttemptRef,
    named: Option<&str>,
) -> ApiResult<()> {
    let a = attempt_row(board, at)?;
    // An attempt that ended is the board's to refuse (409 `refused`).
    let Some(bound) = a.run_id.filter(|_| a.state.is_leased()) else {
        return Ok(());
    };
    if named == Some(bound.as_str()) {
        return Ok(());
    }
    Err(ApiError::new(
        StatusCode::CONFLICT,
        "wrong_run",
        format!(
            "attempt {} of task {} runs as run {bound} (its claim opened it); name that run in `run`, not {}",
            at.n,
            at.task_id,
            named.map_or("none".to_string(), |n| format!("`{}`", vouch_core::escape_line(n)))
        ),
    )
    .with_field("run"))
}

/// Before a submit or fail names it: the attempt's run ends here, when it has not, so the
/// report carries its receipt (a run waiting for the person stays as it is).
pub fn end_bound_run(
    s: &AppState,
    board: &dyn BoardStore,
    at: &AttemptRef,
    named: Option<&str>,
) -> ApiResult<()> {
    check_named_run(board, at, named)?;
    let Some(run) = named else {
        return Ok(());
    };
    let Some(r) = s.store.run(run)? else {
        return Ok(());
    };
    if r.state == vouch_core::RunState::Ended || !is_external(&r.spec) {
        return Ok(());
    }
    match s.host.external_finish(run, "") {
        Ok(_)
        | Err(vouch_runtime::HostError::NotWaiting(_))
        | Err(vouch_runtime::HostError::OwnedElsewhere(_)) => Ok(()),
        Err(e) => Err(e.into()),
    }
}

/// Whether `run` is an outside-driven run that has not ended (an attempt's open run).
pub fn is_open(s: &AppState, run: &str) -> ApiResult<bool> {
    Ok(s.store
        .run(run)?
        .is_some_and(|r| r.state != vouch_core::RunState::Ended && is_external(&r.spec)))
}

/// A signed submission to an attempt whose run is open goes through that run (§13.2.2): its
/// `submit`, then its end — so what the board accepts is what the run submitted, and the
/// run's receipt says so. A result the run refuses is 422 `invalid_result` (409 `refused`
/// once the repairs are spent), and the attempt goes on.
pub fn submit_through_run(
    s: &AppState,
    at: &AttemptRef,
    b: &work::SubmitBody,
    stamp: &vouch_store::board::Stamp,
) -> ApiResult<work::ReportResult> {
    let run = b.run.as_deref().unwrap_or_default();
    let mut args = json!({"result": b.result});
    if let Some(a) = &b.self_assessment {
        args["self_assessment"] = a.clone();
    }
    let answer = exec(s, at, "submit", &args)?;
    if !answer.ok {
        let code = if answer.text.starts_with("no repairs left") {
            (StatusCode::CONFLICT, "refused")
        } else {
            (StatusCode::UNPROCESSABLE_ENTITY, "invalid_result")
        };
        return Err(ApiError::new(code.0, code.1, answer.text).with_field("result"));
    }
    let board = work::board_of(s)?;
    if answer.end.is_none() {
        // The run ends and the board is told with the worker's own signed report: the same
        // statement it signed (outcome accepted, this result, this run).
        let end = s.host.external_finish(run, "")?;
        let t = work::live_claimant(board.as_ref(), at)?;
        let signed = Some((b.signature.clone(), stamp.clone()));
        s.host
            .report_attempt_step(
                board.as_ref(),
                at,
                &t,
                run,
                Some(&end),
                s.work.repairs_max,
                signed,
            )
            .map_err(|e| match e {
                vouch_runtime::HostError::Store(e) => work::board_err(e),
                e => e.into(),
            })?;
    }
    let task = board.task(&at.task_id)?.ok_or_else(|| {
        ApiError::internal(format!("task {} is gone after its report", at.task_id))
    })?;
    let attempt = attempt_row(board.as_ref(), at)?;
    work::reported(vouch_store::board::Reported { task, attempt })
}

/// One signed call of the attempt's run (the HTTP route).
pub fn call(s: &AppState, task: &str, n: u32, b: &CallBody) -> ApiResult<CallAnswer> {
    let at = work::attempt_ref(task, n, &b.claimant, b.epoch)?;
    let (_, verifier) = work::verified(s)?;
    let usage = b.usage.map(CallUsage::checked).transpose()?;
    let statement = call_statement(&AttemptCall {
        attempt: at.clone(),
        tool: b.tool.clone(),
        args: b.args.clone(),
        at_ms: b.at_ms,
        nonce: b.nonce.clone(),
        usage,
    })?;
    let stamp = vouch_store::board::Stamp {
        at_ms: b.at_ms,
        nonce: b.nonce.clone(),
    };
    // The stamp's shape, the signature, then the nonce spent: a replayed call is 409 `replayed`.
    work::signed_fresh(
        s,
        verifier.as_ref(),
        &b.claimant,
        &statement,
        &b.signature,
        &stamp,
    )?;
    exec_spent(s, &at, &b.tool, &b.args, usage.unwrap_or_default())
}

/// One call of the attempt's run by its live claimant (HTTP, or MCP with a worker token).
pub fn exec(s: &AppState, at: &AttemptRef, tool: &str, args: &Value) -> ApiResult<CallAnswer> {
    exec_spent(s, at, tool, args, TokenUsage::default())
}

/// [`exec`] with the tokens the claimant reported for the model turn that made the call.
pub fn exec_spent(
    s: &AppState,
    at: &AttemptRef,
    tool: &str,
    args: &Value,
    spent: TokenUsage,
) -> ApiResult<CallAnswer> {
    let board = work::board_of(s)?;
    let t = work::live_claimant(board.as_ref(), at)?;
    let run = attempt_row(board.as_ref(), at)?.run_id.ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "no_run",
            format!(
                "attempt {} of task {} has no run on this host; report it with …/fail",
                at.n, at.task_id
            ),
        )
    })?;
    if tool == "turn" {
        return turn(s, board.as_ref(), at, &t, &run, args, spent);
    }
    s.host.check_external_call(tool, args)?;
    let reply = match tool {
        "declare" | "clarify" => s.host.external_call_spent(&run, tool, args, spent)?,
        v if Verb::parse(v).is_some() => s.host.external_call_spent(&run, v, args, spent)?,
        "submit" => submit(s, board.as_ref(), at, &t, &run, args, spent)?,
        "finish" => {
            let text = args.get("text").and_then(Value::as_str).unwrap_or_default();
            let end = s.host.external_finish_spent(&run, text, spent)?;
            ExternalReply {
                ok: true,
                text: "the run has ended".into(),
                end: Some(end),
            }
        }
        other => {
            return Err(ApiError::field(
                "tool",
                format!(
                    "`{}` is not a tool of an attempt's run; use declare, a verb (save, send, …), clarify, submit or finish, or post a whole model turn as `turn`",
                    vouch_core::escape_line(other)
                ),
            ))
        }
    };
    let end = settle(s, board.as_ref(), at, &t, &run, reply.end.as_ref())?;
    Ok(CallAnswer {
        ok: reply.ok,
        text: reply.text,
        run,
        end,
        results: None,
    })
}

/// A whole model turn of the attempt's run (§13.2.2): the turn machine's rules, each call's
/// answer, and the attempt reported as the run's end says.
fn turn(
    s: &AppState,
    board: &dyn BoardStore,
    at: &AttemptRef,
    t: &TaskRecord,
    run: &str,
    args: &Value,
    spent: TokenUsage,
) -> ApiResult<CallAnswer> {
    let agent_turn = parse_turn(args, spent)?;
    let ty = registered(s, t)?;
    let rules = submit_rules(s, t, ty);
    let budget = vouch_runtime::host::BoardBudget { board, attempt: at };
    let reply = s.host.attempt_turn(run, &agent_turn, &rules, &budget)?;
    let end = settle(s, board, at, t, run, reply.end.as_ref())?;
    Ok(CallAnswer {
        ok: reply.stopped.is_none(),
        text: reply.stopped.unwrap_or_else(|| "the turn was taken".into()),
        run: run.to_string(),
        end,
        results: Some(
            reply
                .results
                .into_iter()
                .map(|a| json!({"call_id": a.call_id, "ok": a.ok, "text": a.text}))
                .collect(),
        ),
    })
}

/// The task's type, as this host registered it.
fn registered<'a>(s: &'a AppState, t: &TaskRecord) -> ApiResult<&'a vouch_runtime::host::TaskType> {
    s.work.types.get(&t.kind).ok_or_else(|| {
        ApiError::new(
            StatusCode::CONFLICT,
            "refused",
            format!(
                "task type `{}` is not registered on this host; add it to the home's types/",
                t.kind
            ),
        )
    })
}

fn submit_rules<'a>(
    s: &'a AppState,
    t: &'a TaskRecord,
    ty: &'a vouch_runtime::host::TaskType,
) -> vouch_runtime::host::SubmitRules<'a> {
    vouch_runtime::host::SubmitRules {
        task: Some((&t.kind, &t.spec.input)),
        output_schema: &ty.output_schema,
        needs_assessment: t.spec.criteria.is_some(),
        artifacts: s.work.artifacts.as_deref(),
        repairs_max: s.work.repairs_max,
    }
}

/// The run's `submit`: the one rule (`accept_submission`), the repairs counted on the
/// attempt's row.
fn submit(
    s: &AppState,
    board: &dyn BoardStore,
    at: &AttemptRef,
    t: &TaskRecord,
    run: &str,
    args: &Value,
    spent: TokenUsage,
) -> ApiResult<ExternalReply> {
    let ty = registered(s, t)?;
    let rules = submit_rules(s, t, ty);
    let budget = vouch_runtime::host::BoardBudget { board, attempt: at };
    Ok(s.host.external_submit(run, args, spent, &rules, &budget)?)
}

/// After a call or a turn: the library reports the attempt as the run's step says (§13.2.2);
/// this renders it.
fn settle(
    s: &AppState,
    board: &dyn BoardStore,
    at: &AttemptRef,
    t: &TaskRecord,
    run: &str,
    end: Option<&RunEnd>,
) -> ApiResult<Option<Value>> {
    use vouch_runtime::host::AttemptStep;
    let step = s
        .host
        .report_attempt_step(board, at, t, run, end, s.work.repairs_max, None)
        .map_err(|e| match e {
            vouch_runtime::HostError::Store(e) => work::board_err(e),
            e => e.into(),
        })?;
    Ok(step.map(|step| match step {
        AttemptStep::Suspended { reason } => json!({"state": "suspended", "reason": reason}),
        AttemptStep::Ended { outcome, reported } => json!({
            "state": "ended",
            "outcome": outcome,
            "attempt_state": reported.attempt.state,
            "task_state": reported.task.state,
            "result": reported.task.result_id,
        }),
    }))
}

/// The accepted output of a task, its self-assessment, verdicts and artifacts: 404
/// `not_found` for no task, 409 `no_result` while it has no accepted output.
pub fn result(s: &AppState, id: &str) -> ApiResult<TaskResult> {
    let board = work::board_of(s)?;
    let t = board.task(id)?.ok_or_else(|| {
        ApiError::not_found(format!("no task `{id}`; list tasks with GET /api/tasks"))
    })?;
    let (Some(cid), Some(n)) = (t.result_id.clone(), t.accepted_attempt) else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "no_result",
            format!("task `{id}` is {} with no accepted output yet", t.state),
        ));
    };
    let output = board.result(&cid)?.ok_or_else(|| {
        ApiError::internal(format!(
            "task `{id}` names output {cid}, which is not stored"
        ))
    })?;
    let a = attempt_row(
        board.as_ref(),
        &AttemptRef {
            task_id: id.to_string(),
            n,
            claimant: String::new(),
            epoch: 0,
        },
    )?;
    let verdicts = board
        .verdicts(id)?
        .into_iter()
        .map(|(judge, v)| json!({"judge": judge, "passed": v.passed, "scores": v.scores}))
        .collect();
    Ok(TaskResult {
        task: id.to_string(),
        result: cid,
        attempt: n,
        run: a.run_id,
        artifacts: output.get("artifacts").cloned().unwrap_or(json!([])),
        self_assessment: a.detail.get("self_assessment").cloned(),
        output,
        verdicts,
    })
}

/// Continue a completed task (§13.5) with the library call `vouch task continue` uses; the
/// new task as an offer answers it.
pub fn continue_task(s: &AppState, id: &str, b: &ContinueBody) -> ApiResult<(bool, Value)> {
    use vouch_runtime::offer::ContinueError as E;
    let board = work::board_of(s)?;
    let artifacts = s
        .work
        .artifacts
        .clone()
        .ok_or_else(|| ApiError::not_found("this server has no artifact store"))?;
    let req = vouch_runtime::offer::continuation(
        &s.host,
        board.as_ref(),
        artifacts.as_ref(),
        id,
        b.brief.clone(),
        &b.mode,
    )
    .map_err(|e| match e {
        E::NoTask(_) => {
            ApiError::not_found(format!("no task `{id}`; list tasks with GET /api/tasks"))
        }
        E::Refused(m) => ApiError::new(StatusCode::CONFLICT, "no_result", m),
        E::Field { field, message } => ApiError::field(field, format!("`{field}` {message}")),
        E::Host(e) => e.into(),
        E::Artifacts(m) => ApiError::internal(m),
    })?;
    work::offer(s, &req, None)
}
