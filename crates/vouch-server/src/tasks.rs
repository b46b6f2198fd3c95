//! The task board's routes (§13): offer, list and read tasks with their attempts, cancel one;
//! the workers' claim-next, heartbeat and signed reports; artifacts by content id. Each route
//! parses its input and calls the shared operations in `work` on a blocking thread.

use crate::attempt::{self, CallAnswer, CallBody, ContinueBody, TaskResult};
use crate::auth::Caller;
use crate::extract::{ApiJson, ApiPath, QueryMap};
use crate::problem::{ApiError, ApiResult, Problem};
use crate::work::{
    self, AbortBody, ArtifactPut, ClaimBody, ClaimResult, FailBody, HeartbeatBody, HeartbeatResult,
    ReportResult, SubmitBody,
};
use crate::{blocking, AppState};
use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Extension;
use axum::Json;
use serde::Serialize;
use serde_json::Value;
use std::sync::Arc;
use utoipa::ToSchema;
use vouch_core::board::TaskState;
use vouch_core::TaskId;
use vouch_runtime::offer::TaskOffer;
use vouch_store::board::{AttemptRef, Stamp};
use vouch_store::board::{BoardStore, TaskFilter};

/// Tasks one page lists at most.
pub const PAGE_TASKS_MAX: usize = 500;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaskList {
    /// Oldest first; each as `vouch task show --json` gives it.
    #[schema(value_type = Vec<Object>)]
    pub tasks: Vec<Value>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaskDetail {
    #[schema(value_type = Object)]
    pub task: Value,
    #[schema(value_type = Vec<Object>)]
    pub attempts: Vec<Value>,
}

fn board(s: &AppState) -> ApiResult<Arc<dyn BoardStore>> {
    s.board
        .clone()
        .ok_or_else(|| ApiError::not_found("this server has no task board"))
}

fn json<T: Serialize>(v: &T) -> ApiResult<Value> {
    serde_json::to_value(v).map_err(|e| ApiError::internal(format!("encode a task: {e}")))
}

/// Tasks, oldest first, filtered by state, tag and thread (correlation).
#[utoipa::path(get, path = "/api/tasks", tag = "tasks",
    params(
        ("state" = Option<String>, Query, pattern = "^(waiting|queued|dispatched|running|completed|failed|cancelled|expired)$", description = "waiting, queued, dispatched, running, completed, failed, cancelled, expired"),
        ("tag" = Option<String>, Query, description = "only tasks with this tag"),
        ("correlation" = Option<String>, Query, description = "only the tasks of this thread: its correlation, or the thread's first task's id"),
        ("limit" = Option<usize>, Query, minimum = 1, maximum = 500, description = "1–500 (default 100)"),
    ),
    responses(
        (status = 200, body = TaskList),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_tasks(State(s): State<AppState>, q: QueryMap) -> ApiResult<Json<TaskList>> {
    let limit = q.number("limit", 100, 1, PAGE_TASKS_MAX)?;
    let state = match q.0.get("state") {
        None => None,
        Some(v) => Some(
            serde_json::from_value::<TaskState>(Value::String(v.clone())).map_err(|_| {
                ApiError::field(
                    "state",
                    format!("`{v}` is not a task state; see GET /api/openapi.json"),
                )
            })?,
        ),
    };
    let filter = TaskFilter {
        state,
        tag: q.0.get("tag").cloned(),
        limit,
        correlation: q.0.get("correlation").cloned(),
    };
    let board = board(&s)?;
    blocking(move || {
        let tasks = board.tasks(&filter)?;
        Ok(Json(TaskList {
            tasks: tasks.iter().map(json).collect::<ApiResult<_>>()?,
        }))
    })
    .await
}

/// One task with its attempts.
#[utoipa::path(get, path = "/api/tasks/{id}", tag = "tasks",
    params(("id" = String, Path, description = "task id")),
    responses(
        (status = 200, body = TaskDetail),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_task(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<TaskId>,
) -> ApiResult<Json<TaskDetail>> {
    let board = board(&s)?;
    blocking(move || detail(board.as_ref(), &id).map(Json)).await
}

fn detail(board: &dyn BoardStore, id: &str) -> ApiResult<TaskDetail> {
    let task = board.task(id)?.ok_or_else(|| {
        ApiError::not_found(format!("no task `{id}`; list tasks with GET /api/tasks"))
    })?;
    Ok(TaskDetail {
        task: json(&task)?,
        attempts: board
            .attempts(id)?
            .iter()
            .map(json)
            .collect::<ApiResult<_>>()?,
    })
}

/// Cancel a task; a worker holding an attempt learns at its next heartbeat (§13.3).
#[utoipa::path(post, path = "/api/tasks/{id}/cancel", tag = "tasks",
    params(("id" = String, Path, description = "task id")),
    responses(
        (status = 200, body = TaskDetail),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn cancel_task(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<TaskId>,
) -> ApiResult<Json<TaskDetail>> {
    let board = board(&s)?;
    let host = s.host.clone();
    blocking(move || {
        if board.task(&id)?.is_none() {
            return Err(ApiError::not_found(format!(
                "no task `{id}`; list tasks with GET /api/tasks"
            )));
        }
        // A run the attempt left waiting for a person ends with the task (§13.3).
        host.cancel_task(board.as_ref(), &id)?;
        detail(board.as_ref(), &id).map(Json)
    })
    .await
}

/// A task to offer (§13.1): the CLI's `vouch task offer` with JSON names. Parsed as
/// `vouch_runtime::offer::TaskOffer`; this type documents it (a test keeps them equal).
#[derive(Debug, Clone, Serialize, serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct OfferBody {
    /// `freeform`, `judge`, or a type registered in the home's `types/`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What the task asks for, in words (the worker's prompt).
    pub brief: String,
    /// Validated against the type's input schema (default `{"brief": brief}`).
    #[schema(value_type = Option<Object>)]
    pub input: Option<Value>,
    pub tags: Option<Vec<String>>,
    /// Success criteria; the producer must self-assess against them.
    #[schema(value_type = Option<Object>)]
    pub criteria: Option<Value>,
    /// 1–20 (default 1).
    pub max_attempts: Option<u32>,
    /// Claimable only once each of these tasks has an accepted output.
    pub after: Option<Vec<String>>,
    /// Runtime profiles allowed to claim (default: any).
    pub profiles: Option<Vec<String>>,
    /// Expire the task if nobody claimed it within this many seconds.
    pub deadline_s: Option<i64>,
    /// Default 300000.
    pub lease_ms: Option<i64>,
    /// Default 60000; shorter than the lease.
    pub heartbeat_ms: Option<i64>,
    /// Default 300000.
    pub dispatch_timeout_ms: Option<i64>,
    /// Default 7200000.
    pub running_timeout_ms: Option<i64>,
    /// Tasks this one refers to (a continuation's parent).
    pub references: Option<Vec<String>>,
    /// The thread of related tasks this one belongs to (§13.1); list a thread with
    /// `GET /api/tasks?correlation=…`.
    pub correlation: Option<String>,
    /// Pinned context (§13.1.2): content ids of stored UTF-8 texts (at most 16, 256 KiB
    /// together), given to the attempt's model with the task; an id nothing is stored under is
    /// 422.
    pub context: Option<Vec<String>>,
    /// Input artifacts (§13.1.3): content ids of stored artifacts (at most 32) bound to the
    /// task and pinned; the attempt's model reads them with its `read_input` tool and a judge
    /// of the task sees them; an id nothing is stored under is 422 `input_artifacts`.
    pub input_artifacts: Option<Vec<String>>,
}

/// The offered task and whether this request created it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Offered {
    /// False when the `Idempotency-Key` was used before with the same request.
    pub created: bool,
    #[schema(value_type = Object)]
    pub task: Value,
}

/// Offer a task on the board (§13.1). With `Idempotency-Key`, the same key and the same
/// request return the same task (200); a different request under the key is 409.
#[utoipa::path(post, path = "/api/tasks", tag = "tasks",
    params(("Idempotency-Key" = Option<String>, Header, description = "the same key with the same request returns the same task")),
    request_body = OfferBody,
    responses(
        (status = 201, body = Offered),
        (status = 200, body = Offered, description = "the task this key created before"),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn offer_task(
    State(s): State<AppState>,
    headers: HeaderMap,
    ApiJson(body): ApiJson<TaskOffer>,
) -> ApiResult<Response> {
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => Some(
            v.to_str()
                .map_err(|_| ApiError::field("Idempotency-Key", "the key must be visible ASCII"))?
                .to_string(),
        ),
    };
    blocking(move || {
        let (created, task) = work::offer(&s, &body, key)?;
        let status = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        Ok((status, Json(Offered { created, task })).into_response())
    })
    .await
}

/// The longest a claim-next waits for a task (`?wait_s=`), in seconds: well inside the clock
/// skew a signed claim may have (`CLAIM_SKEW_MS_MAX`), since the claim is signed once.
pub const CLAIM_WAIT_S_MAX: usize = 20;

/// Claim the oldest claimable task matching the worker's filters (§13.2), signed by the
/// worker's identity. `claimed: false` when nothing is claimable — at once, or with
/// `?wait_s=N` after waiting up to N seconds for a task to be offered or freed: the wait is
/// woken by writes through this server and, on PostgreSQL, by every host's (`LISTEN/NOTIFY`).
#[utoipa::path(post, path = "/api/tasks/claim-next", tag = "workers",
    params(("wait_s" = Option<u32>, Query, minimum = 0, maximum = 20, description = "wait up to this many seconds for a claimable task (long poll)")),
    request_body = ClaimBody,
    responses(
        (status = 200, body = ClaimResult),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json", description = "bad_signature: not signed by the claimant's key"),
        (status = 409, body = Problem, content_type = "application/problem+json", description = "replayed: the claimant used this nonce before"),
        (status = 422, body = Problem, content_type = "application/problem+json", description = "at_ms too far from the host's clock, or a malformed nonce"),
    ))]
pub async fn claim_next(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    q: QueryMap,
    ApiJson(body): ApiJson<ClaimBody>,
) -> ApiResult<Json<ClaimResult>> {
    caller.acts_as(&body.claimant)?;
    let wait = std::time::Duration::from_secs(q.number("wait_s", 0, 0, CLAIM_WAIT_S_MAX)? as u64);
    let until = tokio::time::Instant::now() + wait;
    // Checked once (its nonce is spent once); every look of a long poll claims with it.
    let st = s.clone();
    let req = Arc::new(blocking(move || work::signed_claim(&st, &body)).await?);
    // Subscribed before the first try: an offer between the try and the wait still wakes it.
    let mut woken = s.wakeups.subscribe();
    loop {
        let (st, r) = (s.clone(), req.clone());
        let claimed = blocking(move || work::claim_checked(&st, &r, "http")).await?;
        let left = until.saturating_duration_since(tokio::time::Instant::now());
        if claimed.claimed || left.is_zero() {
            return Ok(Json(claimed));
        }
        // The store is looked at again when woken, or every `poll_ms` as the fallback; a wait
        // that ran out unwoken answers what the last look found.
        let poll = std::time::Duration::from_millis(s.poll_ms.max(1));
        if !s.woken_or(&mut woken, left.min(poll)).await && left <= poll {
            return Ok(Json(claimed));
        }
    }
}

/// Keep the lease; the first heartbeat moves the task to `running`. Answers `cancelled`
/// when the owner cancelled the task.
#[utoipa::path(post, path = "/api/tasks/{id}/attempts/{n}/heartbeat", tag = "workers",
    params(("id" = String, Path, description = "task id"), ("n" = u32, Path, minimum = 1, description = "attempt number")),
    request_body = HeartbeatBody,
    responses(
        (status = 200, body = HeartbeatResult),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json", description = "bad_signature: not signed by the claimant's key"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json", description = "refused: not the live claimant, or the attempt ended; replayed: the claimant used this nonce before"),
        (status = 422, body = Problem, content_type = "application/problem+json", description = "at_ms too far from the host's clock, or a malformed nonce"),
    ))]
pub async fn heartbeat(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, n)): ApiPath<(TaskId, u32)>,
    ApiJson(body): ApiJson<HeartbeatBody>,
) -> ApiResult<Json<HeartbeatResult>> {
    caller.acts_as(&body.claimant)?;
    blocking(move || work::heartbeat(&s, &id, n, &body).map(Json)).await
}

/// Submit the attempt's result, validated against the task type's output schema (§13.4);
/// a malformed result is 422 `invalid_result` naming the path and costs one repair.
#[utoipa::path(post, path = "/api/tasks/{id}/attempts/{n}/submit", tag = "workers",
    params(("id" = String, Path, description = "task id"), ("n" = u32, Path, minimum = 1, description = "attempt number")),
    request_body = SubmitBody,
    responses(
        (status = 200, body = ReportResult),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json", description = "refused: not the live claimant, or the attempt ended; replayed: the claimant used this nonce before"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn submit(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, n)): ApiPath<(TaskId, u32)>,
    ApiJson(body): ApiJson<SubmitBody>,
) -> ApiResult<Json<ReportResult>> {
    caller.acts_as(&body.claimant)?;
    blocking(move || work::submit(&s, &id, n, &body).map(Json)).await
}

/// Report the attempt failed; retried while attempts remain only when `retryable`.
#[utoipa::path(post, path = "/api/tasks/{id}/attempts/{n}/fail", tag = "workers",
    params(("id" = String, Path, description = "task id"), ("n" = u32, Path, minimum = 1, description = "attempt number")),
    request_body = FailBody,
    responses(
        (status = 200, body = ReportResult),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json", description = "refused: not the live claimant, or the attempt ended; replayed: the claimant used this nonce before"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn fail(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, n)): ApiPath<(TaskId, u32)>,
    ApiJson(body): ApiJson<FailBody>,
) -> ApiResult<Json<ReportResult>> {
    caller.acts_as(&body.claimant)?;
    blocking(move || work::fail(&s, &id, n, &body).map(Json)).await
}

/// The worker stops: the attempt is aborted (always retryable, §13.3.1).
#[utoipa::path(post, path = "/api/tasks/{id}/attempts/{n}/abort", tag = "workers",
    params(("id" = String, Path, description = "task id"), ("n" = u32, Path, minimum = 1, description = "attempt number")),
    request_body = AbortBody,
    responses(
        (status = 200, body = ReportResult),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json", description = "refused: not the live claimant, or the attempt ended; replayed: the claimant used this nonce before"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn abort(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, n)): ApiPath<(TaskId, u32)>,
    ApiJson(body): ApiJson<AbortBody>,
) -> ApiResult<Json<ReportResult>> {
    caller.acts_as(&body.claimant)?;
    blocking(move || work::abort(&s, &id, n, &body).map(Json)).await
}

/// One tool call of the attempt's run (§13.2), signed by its live claimant: `declare`, a verb
/// (`save`, `send`, …), `clarify`, `submit` or `finish`, through the host for the run the
/// claim opened — postures, cards, the ledger, evidence and the receipt apply. A call that
/// leaves the run waiting for the person suspends the attempt; one that ends the run reports
/// the attempt (its accepted output, or a failure without one).
#[utoipa::path(post, path = "/api/tasks/{id}/attempts/{n}/call", tag = "workers",
    params(("id" = String, Path, description = "task id"), ("n" = u32, Path, minimum = 1, description = "attempt number")),
    request_body = CallBody,
    responses(
        (status = 200, body = CallAnswer),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json", description = "bad_signature, or another identity's token"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json", description = "refused: not the live claimant; no_run: the attempt has no run here; replayed: the claimant used this nonce before"),
        (status = 422, body = Problem, content_type = "application/problem+json", description = "an unknown tool, at_ms too far from the host's clock, or a malformed nonce"),
    ))]
pub async fn call(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, n)): ApiPath<(TaskId, u32)>,
    ApiJson(body): ApiJson<CallBody>,
) -> ApiResult<Json<CallAnswer>> {
    caller.acts_as(&body.claimant)?;
    blocking(move || attempt::call(&s, &id, n, &body).map(Json)).await
}

/// A task's accepted output with its self-assessment, the judges' verdicts on it and the
/// artifacts it names; 409 `no_result` while the task has none.
#[utoipa::path(get, path = "/api/tasks/{id}/result", tag = "tasks",
    params(("id" = String, Path, description = "task id")),
    responses(
        (status = 200, body = TaskResult),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json", description = "no_result: no accepted output yet"),
    ))]
pub async fn task_result(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<TaskId>,
) -> ApiResult<Json<TaskResult>> {
    blocking(move || attempt::result(&s, &id).map(Json)).await
}

/// Continue a completed task with new instructions (§13.5): `extend` its thread or `fork` a
/// new one; the new task goes on from the accepted attempt's pinned conversation.
#[utoipa::path(post, path = "/api/tasks/{id}/continue", tag = "tasks",
    params(("id" = String, Path, description = "the completed task")),
    request_body = ContinueBody,
    responses(
        (status = 201, body = Offered),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json", description = "no_result: the task has no accepted output to go on from"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn continue_task(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<TaskId>,
    ApiJson(body): ApiJson<ContinueBody>,
) -> ApiResult<Response> {
    blocking(move || {
        let (created, task) = attempt::continue_task(&s, &id, &body)?;
        let status = if created {
            StatusCode::CREATED
        } else {
            StatusCode::OK
        };
        Ok((status, Json(Offered { created, task })).into_response())
    })
    .await
}

/// Upload an output artifact of a live attempt (§13.5): the body's bytes must hash to `cid`;
/// only the attempt's claimant may upload; 25 MiB at most (413 `too_large`).
#[utoipa::path(put, path = "/api/artifacts/{cid}", tag = "workers",
    params(
        ("cid" = String, Path, pattern = "^sha256:[0-9a-f]{64}$", description = "sha256: and 64 lowercase hex digits of the body's SHA-256"),
        ("task" = String, Query, min_length = 1, description = "the task of the live attempt"),
        ("attempt" = u32, Query, minimum = 1, description = "the attempt number"),
        ("claimant" = String, Query, min_length = 1, description = "the attempt's claimant"),
        ("epoch" = i64, Query, description = "the lease epoch"),
        ("at_ms" = i64, Query, description = "the claimant's clock, within 60 s of the host's"),
        ("nonce" = String, Query, pattern = "^[A-Za-z0-9_-]{16,64}$", description = "fresh per statement; a nonce used before is refused (409 replayed)"),
        ("signature" = String, Query, description = "the claimant's Ed25519 signature over the canonical JSON of {\"artifact\": {\"cid\", \"task\", \"attempt\", \"claimant\", \"epoch\", \"at_ms\", \"nonce\"}}"),
    ),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses(
        (status = 201, body = ArtifactPut),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json", description = "bad_signature: not signed by the claimant's key"),
        (status = 404, body = Problem, content_type = "application/problem+json", description = "no such task or attempt"),
        (status = 409, body = Problem, content_type = "application/problem+json", description = "refused: not the live claimant, or the attempt ended; replayed: the claimant used this nonce before"),
        (status = 413, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn put_artifact(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath(cid): ApiPath<String>,
    q: QueryMap,
    body: Body,
) -> ApiResult<Response> {
    let text = |k: &'static str| {
        q.0.get(k)
            .filter(|v| !v.is_empty())
            .cloned()
            .ok_or_else(|| {
                ApiError::field(k, format!("give `{k}` of the live attempt in the query"))
            })
    };
    let at = AttemptRef {
        task_id: text("task")?,
        n: q.number("attempt", 0, 1, u32::MAX as usize)? as u32,
        claimant: text("claimant")?,
        epoch: text("epoch")?
            .parse()
            .map_err(|_| ApiError::field("epoch", "`epoch` must be a whole number"))?,
    };
    if !q.0.contains_key("attempt") {
        return Err(ApiError::field(
            "attempt",
            "give `attempt` of the live attempt in the query",
        ));
    }
    let stamp = Stamp {
        at_ms: text("at_ms")?
            .parse()
            .map_err(|_| ApiError::field("at_ms", "`at_ms` must be a whole number"))?,
        nonce: text("nonce")?,
    };
    let signature = text("signature")?;
    caller.acts_as(&at.claimant)?;
    let max = work::artifact_bytes_max(&s);
    let bytes = axum::body::to_bytes(body, usize::try_from(max).unwrap_or(usize::MAX))
        .await
        .map_err(|_| {
            ApiError::new(
                StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!(
                    "the artifact is larger than the limit of {max} bytes; store less, or split it"
                ),
            )
        })?;
    blocking(move || {
        let put = work::put_artifact(&s, &cid, &at, (&stamp, &signature), &bytes)?;
        Ok((StatusCode::CREATED, Json(put)).into_response())
    })
    .await
}

/// An artifact's exact bytes, re-hashed on every read (a changed copy is never served).
#[utoipa::path(get, path = "/api/artifacts/{cid}", tag = "workers",
    params(("cid" = String, Path, pattern = "^sha256:[0-9a-f]{64}$", description = "content id: sha256: and 64 lowercase hex digits")),
    responses(
        (status = 200, description = "the bytes", content_type = "application/octet-stream"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_artifact(
    State(s): State<AppState>,
    ApiPath(cid): ApiPath<String>,
) -> ApiResult<Response> {
    blocking(move || {
        let bytes = work::get_artifact(&s, &cid)?;
        Ok(([(header::CONTENT_TYPE, "application/octet-stream")], bytes).into_response())
    })
    .await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// The documented body and the parsed one take the same fields.
    #[test]
    fn the_documented_offer_is_the_parsed_offer() {
        let full = serde_json::json!({
            "type": "freeform", "brief": "b", "input": {"brief": "b"}, "tags": ["x"],
            "criteria": ["c"], "max_attempts": 2, "after": [], "profiles": [],
            "deadline_s": 60, "lease_ms": 1000, "heartbeat_ms": 100,
            "dispatch_timeout_ms": 1000, "running_timeout_ms": 1000,
            "references": ["t0"], "correlation": "thread-1", "context": [], "input_artifacts": [],
        });
        let doc: OfferBody = serde_json::from_value(full.clone()).unwrap();
        let parsed: TaskOffer = serde_json::from_value(full.clone()).unwrap();
        assert_eq!(serde_json::to_value(&doc).unwrap(), full);
        assert_eq!(parsed.max_attempts, 2);
        assert_eq!(parsed.correlation.as_deref(), Some("thread-1"));
        let mut extra = full;
        extra["colour"] = "red".into();
        assert!(serde_json::from_value::<OfferBody>(extra.clone()).is_err());
        assert!(serde_json::from_value::<TaskOffer>(extra).is_err());
    }
}
