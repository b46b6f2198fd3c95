//! The JSON routes. Each parses its input, calls the runtime on a blocking thread, and shapes
//! the answer; none decides anything about a run.

use crate::auth::Caller;
use crate::dto::*;
use crate::extract::{ApiJson, ApiPath, QueryMap};
use crate::problem::{ApiError, ApiResult, Problem};
use crate::{blocking, AppState, PAGE_OFFSET_MAX, PAGE_RUNS_MAX};
use axum::extract::State;
use axum::http::{StatusCode, Uri};
use axum::Extension;
use axum::Json;
use vouch_core::RunId;
use vouch_runtime::host::TaskDecision;
use vouch_runtime::RunEnd;
use vouch_store::{CardState, RunRecord, Store, StoreError};

fn run_record(store: &dyn Store, id: &str) -> ApiResult<RunRecord> {
    store
        .run(id)?
        .ok_or_else(|| ApiError::not_found(format!("no run `{id}`; list runs with GET /api/runs")))
}

/// The run's standing after the host drove it: ended with a receipt, or waiting again.
pub(crate) fn run_result(
    store: &dyn Store,
    id: &str,
    end: Option<&RunEnd>,
) -> ApiResult<RunResult> {
    let rec = run_record(store, id)?;
    let receipt = store.receipt(id)?;
    let open_cards = store
        .cards_for_run(id)?
        .iter()
        .filter(|c| c.state == CardState::Open)
        .map(CardBody::from)
        .collect();
    Ok(RunResult {
        run: rec.id.clone(),
        state: word(rec.state),
        outcome: rec.outcome.map(word),
        ended_by: rec.ended_by.map(word),
        waiting_reason: match end {
            Some(RunEnd::Suspended { reason }) => Some(reason.clone()),
            _ => None,
        },
        receipt,
        open_cards,
    })
}

/// Runs, newest first, paged.
#[utoipa::path(get, path = "/api/runs", tag = "runs",
    params(
        ("limit" = Option<usize>, Query, minimum = 1, maximum = 500, description = "runs per page, 1–500 (default 50)"),
        ("offset" = Option<usize>, Query, minimum = 0, maximum = 100_000, description = "runs to skip, newest first (default 0, at most 100000)"),
    ),
    responses(
        (status = 200, body = RunPage),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_runs(State(s): State<AppState>, q: QueryMap) -> ApiResult<Json<RunPage>> {
    let limit = q.number("limit", 50, 1, PAGE_RUNS_MAX)?;
    let offset = q.number("offset", 0, 0, PAGE_OFFSET_MAX)?;
    let store = s.store.clone();
    blocking(move || {
        let mut runs = store.runs(offset + limit + 1)?;
        let more = runs.len() > offset + limit;
        let page: Vec<Run> = runs
            .drain(..)
            .skip(offset)
            .take(limit)
            .map(|r| Run::from(&r))
            .collect();
        Ok(Json(RunPage {
            runs: page,
            next_offset: more.then_some(offset + limit),
        }))
    })
    .await
}

/// Start a run now, as the person's own run: a title and a script of model turns, or a
/// routine. Answers 202 with the run's id as soon as the run exists; the host drives it on
/// the server from then on, and the answer says where to watch it. With `Idempotency-Key`
/// the same key and request answer the run it started (200), never a second run; the key
/// with another request is 409.
#[utoipa::path(post, path = "/api/runs", tag = "runs",
    params(("Idempotency-Key" = Option<String>, Header, description = "1–255 visible ASCII characters: the same key with the same request answers the run it started")),
    request_body = NewRun,
    responses(
        (status = 202, body = RunStarted, description = "the run exists and is being driven"),
        (status = 200, body = RunStarted, description = "the run this key started before"),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json", description = "conflict: the key started a run with another request"),
        (status = 413, body = Problem, content_type = "application/problem+json"),
        (status = 415, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json", description = "invalid_field: the title, script, routine or Idempotency-Key at fault is named"),
    ))]
pub async fn start_run(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    headers: axum::http::HeaderMap,
    ApiJson(body): ApiJson<NewRun>,
) -> ApiResult<(StatusCode, Json<RunStarted>)> {
    let key = match headers.get("idempotency-key") {
        None => None,
        Some(v) => Some(v.to_str().map_err(|_| bad_key())?.to_string()),
    };
    let spec = new_run_spec(body)?;
    let s2 = s.clone();
    let begun = blocking(move || begin(&s2, &caller, key.as_deref(), &spec)).await?;
    let id = begun.run.clone();
    if begun.created {
        let (host, run, wake) = (s.host.clone(), id.clone(), s.clone());
        // Driven here, off the request: the answer names the run before its first turn.
        tokio::task::spawn_blocking(move || {
            if let Err(e) = host.drive(&run) {
                tracing::warn!(run = %run, error = %e, "a run started over HTTP stopped");
            }
            wake.wake();
        });
    }
    let status = if begun.created {
        StatusCode::ACCEPTED
    } else {
        StatusCode::OK
    };
    Ok((
        status,
        Json(RunStarted {
            events: format!("/api/runs/{id}/events"),
            detail: format!("/api/runs/{id}"),
            page: format!("{}/runs/{id}", crate::console::BASE),
            created: begun.created,
            run: id,
        }),
    ))
}

fn bad_key() -> ApiError {
    ApiError::field(
        "Idempotency-Key",
        format!(
            "the key must be 1 to {} visible ASCII characters",
            vouch_runtime::runs::REQUEST_KEY_BYTES_MAX
        ),
    )
}

/// The run a start asks for: a new one, or with a key the one the key started (the library's
/// `begin_once`, the key kept per token).
fn begin(
    s: &AppState,
    caller: &Caller,
    key: Option<&str>,
    spec: &vouch_runtime::RunSpec,
) -> ApiResult<vouch_runtime::runs::Begun> {
    use vouch_runtime::runs::BeginError;
    let Some(key) = key else {
        return Ok(vouch_runtime::runs::Begun {
            run: s.host.begin(spec)?,
            created: true,
        });
    };
    let scope = format!("runs:{}", caller.token);
    vouch_runtime::runs::begin_once(&s.host, &scope, key, spec).map_err(|e| match e {
        BeginError::BadKey => bad_key(),
        BeginError::KeyReused { .. } => {
            ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string())
                .with_field("Idempotency-Key")
        }
        BeginError::Host(h) => h.into(),
    })
}

/// The run a `POST /api/runs` body asks for, each field checked by the library that owns it
/// (the title by the host, a script by the script format, a routine as schedules check it).
fn new_run_spec(body: NewRun) -> ApiResult<vouch_runtime::RunSpec> {
    let title = body.title.filter(|t| !t.trim().is_empty());
    let spec = match (body.script, body.routine) {
        (Some(_), Some(_)) => {
            return Err(ApiError::field(
                "script",
                "give either `script` or `routine`, not both",
            ))
        }
        (None, None) => {
            return Err(ApiError::field(
                "script",
                "give `script` (model turns, as `vouch run --script` takes) or `routine` (as a schedule takes)",
            ))
        }
        (Some(script), None) => {
            if script.as_array().is_none_or(|t| t.is_empty()) {
                return Err(ApiError::field(
                    "script",
                    "`script` is a JSON array of at least one model turn (docs/scripts.md)",
                ));
            }
            let turns = vouch_scenario::scenario::script_turns(script)
                .map_err(|e| ApiError::field("script", format!("the script: {e}")))?;
            let Some(title) = title else {
                return Err(ApiError::field(
                    "title",
                    "a run needs a title: say in words what you ask for",
                ));
            };
            vouch_runtime::RunSpec {
                trigger: vouch_core::TriggerKind::Interactive,
                title,
                presence: None,
                quiet: false,
                model: vouch_runtime::host::ModelSpec::script_of(turns),
                scope: None,
            }
        }
        (None, Some(routine)) => {
            let routine = vouch_runtime::scheduler::check_routine(routine)
                .map_err(|e| ApiError::field("routine", format!("the routine: {}", e.message)))?;
            if let Some(turns) = routine.pointer("/model/turns") {
                vouch_scenario::scenario::script_turns(turns.clone())
                    .map_err(|e| ApiError::field("routine", format!("the routine's script: {e}")))?;
            }
            vouch_runtime::scheduler::routine_run_spec(&routine, title.as_deref())
        }
    };
    vouch_runtime::host::check_title(&spec.title).map_err(|e| ApiError::field("title", e))?;
    Ok(spec)
}

/// One run: state, outcome and each delivery's posture and status.
#[utoipa::path(get, path = "/api/runs/{id}", tag = "runs",
    params(("id" = String, Path, description = "run id")),
    responses(
        (status = 200, body = RunDetailBody),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_run(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<RunId>,
) -> ApiResult<Json<RunDetailBody>> {
    let store = s.store.clone();
    blocking(move || {
        let rec = run_record(store.as_ref(), &id)?;
        let d = vouch_runtime::runs::detail(store.as_ref(), rec)?;
        Ok(Json(RunDetailBody::from(&d)))
    })
    .await
}

/// The run's hash-chained journal, from `after` (a seq, default 0).
#[utoipa::path(get, path = "/api/runs/{id}/journal", tag = "runs",
    params(
        ("id" = String, Path, description = "run id"),
        ("after" = Option<usize>, Query, minimum = 0, description = "only events with a greater seq"),
    ),
    responses(
        (status = 200, body = Vec<Event>),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_journal(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<RunId>,
    q: QueryMap,
) -> ApiResult<Json<Vec<Event>>> {
    let after = q.number("after", 0, 0, i64::MAX as usize)? as i64;
    let store = s.store.clone();
    blocking(move || {
        run_record(store.as_ref(), &id)?;
        let entries = store.journal_since(&id, after)?;
        Ok(Json(entries.iter().map(Event::from).collect()))
    })
    .await
}

/// The run's receipt (null until it has ended); with `?signed=true`, the receipt as a
/// statement signed by the host's Ed25519 key (§16.1, the file `vouch verify` checks).
#[utoipa::path(get, path = "/api/runs/{id}/receipt", tag = "runs",
    params(
        ("id" = String, Path, description = "run id"),
        ("signed" = Option<bool>, Query, description = "true: the signed receipt (vouch-signed-receipt/1) instead"),
    ),
    responses(
        (status = 200, body = ReceiptAnswer, description = "the receipt; with signed=true a vouch-signed-receipt/1 object"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json", description = "not_ended: a signed receipt exists once the run has ended"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_receipt(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<RunId>,
    q: QueryMap,
) -> ApiResult<axum::response::Response> {
    use axum::response::IntoResponse;
    let signed = match q.0.get("signed").map(String::as_str) {
        None | Some("false") => false,
        Some("true") => true,
        Some(v) => {
            return Err(ApiError::field(
                "signed",
                format!("`{v}`: expected true or false"),
            ))
        }
    };
    if signed {
        return blocking(move || Ok(Json(crate::work::signed_receipt(&s, &id)?).into_response()))
            .await;
    }
    let store = s.store.clone();
    blocking(move || {
        let rec = run_record(store.as_ref(), &id)?;
        Ok(Json(ReceiptBody {
            run: rec.id.clone(),
            state: word(rec.state),
            outcome: rec.outcome.map(word),
            receipt: store.receipt(&id)?,
        })
        .into_response())
    })
    .await
}

/// Approve exactly the payload with this hash; the run continues and executes it.
/// Answers when the run has ended or waits again.
#[utoipa::path(post, path = "/api/runs/{id}/deliveries/{delivery}/approve", tag = "decisions",
    params(("id" = String, Path, description = "run id"), ("delivery" = String, Path, description = "delivery id, e.g. d1")),
    request_body = ApproveBody,
    responses(
        (status = 200, body = RunResult),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn approve(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, delivery)): ApiPath<(RunId, String)>,
    ApiJson(body): ApiJson<ApproveBody>,
) -> ApiResult<Json<RunResult>> {
    if body.hash.trim().is_empty() {
        return Err(ApiError::field(
            "hash",
            "give the payload hash shown on the card (GET /api/approvals)",
        ));
    }
    let host = s.host.clone();
    let store = s.store.clone();
    let metrics = s.metrics.clone();
    let board = s.board.clone();
    blocking(move || {
        run_record(store.as_ref(), &id)?;
        let d = TaskDecision::Approve {
            delivery: delivery.clone(),
            hash: body.hash.clone(),
        };
        let by = caller.principal();
        let end = host
            .decide(board.as_deref(), &id, &d, Some(&by))
            .map_err(card_error)?
            .end;
        metrics.decision("approve");
        run_result(store.as_ref(), &id, Some(&end)).map(Json)
    })
    .await
}

/// A card that does not exist (or not with this hash) is 404; a decided one 409.
fn card_error(e: vouch_runtime::HostError) -> ApiError {
    match e {
        vouch_runtime::HostError::Store(StoreError::NotFound { what, id }) => ApiError::not_found(format!(
            "no open {what} `{id}`; the card may be superseded — see GET /api/approvals for the current hash"
        )),
        other => other.into(),
    }
}

/// Refuse a pending delivery; the run continues without it.
#[utoipa::path(post, path = "/api/runs/{id}/deliveries/{delivery}/deny", tag = "decisions",
    params(("id" = String, Path, description = "run id"), ("delivery" = String, Path, description = "delivery id")),
    responses(
        (status = 200, body = RunResult),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn deny(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, delivery)): ApiPath<(RunId, String)>,
) -> ApiResult<Json<RunResult>> {
    let host = s.host.clone();
    let store = s.store.clone();
    let metrics = s.metrics.clone();
    let board = s.board.clone();
    blocking(move || {
        run_record(store.as_ref(), &id)?;
        let d = TaskDecision::Deny {
            delivery: delivery.clone(),
        };
        let by = caller.principal();
        let end = host
            .decide(board.as_deref(), &id, &d, Some(&by))
            .map_err(card_error)?
            .end;
        metrics.decision("deny");
        run_result(store.as_ref(), &id, Some(&end)).map(Json)
    })
    .await
}

/// Replace a pending payload: a new card with a new hash supersedes the old one.
#[utoipa::path(post, path = "/api/runs/{id}/deliveries/{delivery}/edit", tag = "decisions",
    params(("id" = String, Path, description = "run id"), ("delivery" = String, Path, description = "delivery id")),
    request_body = EditBody,
    responses(
        (status = 200, body = EditResult),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn edit(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath((id, delivery)): ApiPath<(RunId, String)>,
    ApiJson(body): ApiJson<EditBody>,
) -> ApiResult<Json<EditResult>> {
    let host = s.host.clone();
    let store = s.store.clone();
    let metrics = s.metrics.clone();
    blocking(move || {
        run_record(store.as_ref(), &id)?;
        let hash = host
            .edit_by(&id, &delivery, &body.payload, &caller.principal())
            .map_err(|e| match e {
                // The payload is the only input of an edit the host can find wrong.
                vouch_runtime::HostError::BadInput(m) => ApiError::field("payload", m),
                other => card_error(other),
            })?;
        metrics.decision("edit");
        Ok(Json(EditResult {
            run: id.into_string(),
            delivery,
            payload_hash: hash,
        }))
    })
    .await
}

/// Answer the run's one question; the run continues.
#[utoipa::path(post, path = "/api/runs/{id}/answer", tag = "decisions",
    params(("id" = String, Path, description = "run id")),
    request_body = AnswerBody,
    responses(
        (status = 200, body = RunResult),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn answer(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<RunId>,
    ApiJson(body): ApiJson<AnswerBody>,
) -> ApiResult<Json<RunResult>> {
    if body.text.trim().is_empty() {
        return Err(ApiError::field(
            "text",
            "the answer is empty; say what the run asked for",
        ));
    }
    let host = s.host.clone();
    let store = s.store.clone();
    let metrics = s.metrics.clone();
    let board = s.board.clone();
    blocking(move || {
        run_record(store.as_ref(), &id)?;
        let d = TaskDecision::Answer {
            text: body.text.clone(),
        };
        let by = caller.principal();
        let end = host
            .decide(board.as_deref(), &id, &d, Some(&by))
            .map_err(card_error)?
            .end;
        metrics.decision("answer");
        run_result(store.as_ref(), &id, Some(&end)).map(Json)
    })
    .await
}

/// Cancel a run that has not ended (§9.4): it ends through the reconciler, `withdrawn` or
/// with what was already done.
#[utoipa::path(post, path = "/api/runs/{id}/cancel", tag = "decisions",
    params(("id" = String, Path, description = "run id")),
    responses(
        (status = 200, body = RunResult),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn cancel(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<RunId>,
) -> ApiResult<Json<RunResult>> {
    let host = s.host.clone();
    let store = s.store.clone();
    let metrics = s.metrics.clone();
    blocking(move || {
        run_record(store.as_ref(), &id)?;
        host.cancel(&id)?;
        metrics.decision("cancel");
        run_result(store.as_ref(), &id, None).map(Json)
    })
    .await
}

/// Start the continuation of an interrupted run (§9.2); answers with the new run.
#[utoipa::path(post, path = "/api/runs/{id}/resume", tag = "decisions",
    params(("id" = String, Path, description = "the interrupted run's id")),
    responses(
        (status = 200, body = RunResult),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn resume(
    State(s): State<AppState>,
    ApiPath(id): ApiPath<RunId>,
) -> ApiResult<Json<RunResult>> {
    let host = s.host.clone();
    let store = s.store.clone();
    let metrics = s.metrics.clone();
    blocking(move || {
        run_record(store.as_ref(), &id)?;
        let (child, end) = host.resume(&id)?;
        metrics.decision("resume");
        run_result(store.as_ref(), &child, Some(&end)).map(Json)
    })
    .await
}

/// Open approval and question cards, newest first, each with its exact payload.
#[utoipa::path(get, path = "/api/approvals", tag = "attention",
    responses(
        (status = 200, body = Vec<CardBody>),
        (status = 401, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn approvals(State(s): State<AppState>) -> ApiResult<Json<Vec<CardBody>>> {
    let store = s.store.clone();
    blocking(move || {
        let cards = vouch_runtime::approvals::open_cards(store.as_ref())?;
        Ok(Json(cards.iter().map(CardBody::from).collect()))
    })
    .await
}

/// Open cards and ended runs with what is left to do, and the badge count.
#[utoipa::path(get, path = "/api/inbox", tag = "attention",
    responses(
        (status = 200, body = InboxBody),
        (status = 401, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn inbox(State(s): State<AppState>) -> ApiResult<Json<InboxBody>> {
    let store = s.store.clone();
    blocking(move || {
        let inbox = vouch_runtime::inbox::inbox(store.as_ref())?;
        Ok(Json(InboxBody::from(&inbox)))
    })
    .await
}

/// Every schedule, by name.
#[utoipa::path(get, path = "/api/schedules", tag = "schedules",
    responses(
        (status = 200, body = Vec<ScheduleBody>),
        (status = 401, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list_schedules(State(s): State<AppState>) -> ApiResult<Json<Vec<ScheduleBody>>> {
    let store = s.store.clone();
    blocking(move || {
        Ok(Json(
            store.schedules()?.iter().map(ScheduleBody::from).collect(),
        ))
    })
    .await
}

/// One schedule.
#[utoipa::path(get, path = "/api/schedules/{name}", tag = "schedules",
    params(("name" = String, Path, description = "schedule name")),
    responses(
        (status = 200, body = ScheduleBody),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn get_schedule(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<ScheduleBody>> {
    let store = s.store.clone();
    blocking(move || {
        store
            .schedules()?
            .iter()
            .find(|x| x.name == name)
            .map(|x| Json(ScheduleBody::from(x)))
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "no schedule `{name}`; list them with GET /api/schedules"
                ))
            })
    })
    .await
}

/// Run a schedule's routine now, as the person's own run (trigger `interactive`, outside the
/// slots: no slot is consumed). Answers when the run ends or first waits, like a decision.
#[utoipa::path(post, path = "/api/schedules/{name}/run", tag = "schedules",
    params(("name" = String, Path, description = "schedule name")),
    responses(
        (status = 200, body = RunResult),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
        (status = 502, body = Problem, content_type = "application/problem+json", description = "model_error: the routine's model did not answer usably"),
    ))]
pub async fn run_schedule_now(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<Json<RunResult>> {
    let host = s.host.clone();
    let store = s.store.clone();
    blocking(move || {
        let sched = store
            .schedules()?
            .into_iter()
            .find(|x| x.name == name)
            .ok_or_else(|| {
                ApiError::not_found(format!(
                    "no schedule `{name}`; list them with GET /api/schedules"
                ))
            })?;
        let (id, end) = host.start(&vouch_runtime::scheduler::run_now_spec(&sched))?;
        run_result(store.as_ref(), &id, Some(&end)).map(Json)
    })
    .await
}

/// Add a schedule (§12.1). It runs while `vouch serve` is running.
#[utoipa::path(post, path = "/api/schedules", tag = "schedules",
    request_body = NewSchedule,
    responses(
        (status = 201, body = ScheduleBody),
        (status = 400, body = Problem, content_type = "application/problem+json"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn add_schedule(
    State(s): State<AppState>,
    ApiJson(body): ApiJson<NewSchedule>,
) -> ApiResult<(StatusCode, Json<ScheduleBody>)> {
    let host = s.host.clone();
    let store = s.store.clone();
    blocking(move || {
        let sched = vouch_runtime::scheduler::new_schedule(
            &body.name,
            &body.cron,
            body.tz.as_deref().unwrap_or("UTC"),
            body.routine,
            body.catch_up.unwrap_or_default(),
            body.overlap.unwrap_or_default(),
            body.grace_ms
                .unwrap_or(vouch_runtime::scheduler::GRACE_MS_DEFAULT),
            host.now_ms(),
        )
        .map_err(|e| ApiError::field(e.field, e.message))?;
        store.put_schedule(&sched)?;
        Ok((StatusCode::CREATED, Json(ScheduleBody::from(&sched))))
    })
    .await
}

/// Remove a schedule; its past runs and receipts stay.
#[utoipa::path(delete, path = "/api/schedules/{name}", tag = "schedules",
    params(("name" = String, Path, description = "schedule name")),
    responses(
        (status = 204, description = "removed"),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn remove_schedule(
    State(s): State<AppState>,
    ApiPath(name): ApiPath<String>,
) -> ApiResult<StatusCode> {
    let store = s.store.clone();
    blocking(move || {
        if store.remove_schedule(&name)? {
            Ok(StatusCode::NO_CONTENT)
        } else {
            Err(ApiError::not_found(format!(
                "no schedule `{name}`; list them with GET /api/schedules"
            )))
        }
    })
    .await
}

/// The host's public key, to pin when checking its signed receipts elsewhere
/// (`vouch verify FILE --host-key KEY`, §16.2). Created on first use, as signing does.
#[utoipa::path(get, path = "/api/host-key", tag = "host",
    responses(
        (status = 200, body = HostKeyBody),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 503, body = Problem, content_type = "application/problem+json", description = "unavailable: this server has no home holding the host's key"),
    ))]
pub async fn host_key(State(s): State<AppState>) -> ApiResult<Json<HostKeyBody>> {
    blocking(move || {
        let host = crate::work::host_identity(&s)?;
        Ok(Json(HostKeyBody {
            name: host.name().to_string(),
            public_key: host.public_key(),
        }))
    })
    .await
}

/// Every destination kind with its capability level, and how to connect what is missing.
#[utoipa::path(get, path = "/api/doctor", tag = "host",
    responses(
        (status = 200, body = DoctorBody),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 500, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn doctor(State(s): State<AppState>) -> ApiResult<Json<DoctorBody>> {
    let f = s.doctor.clone();
    blocking(move || {
        let report = f().map_err(ApiError::internal)?;
        Ok(Json(DoctorBody::from(&report)))
    })
    .await
}

pub async fn no_route(uri: Uri) -> ApiError {
    ApiError::not_found(format!(
        "no route `{}`; the routes are listed in GET /api/openapi.json",
        uri.path()
    ))
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        "this route does not take that method; see GET /api/openapi.json",
    )
}
