//! What a person does from a page besides deciding cards (issue 28): start a run, cancel or
//! resume one, offer a task, offer a failed task again. Each form calls the JSON API's own
//! handler, so the console decides nothing; a refusal is the API's, said in words.
//!
//! Every action, the card decisions in `pages.rs` included, has one shape ([`act`]): the
//! signed form checked, the API's handler called with what the form says, then the page the
//! answer names — or the refusal, on a page.

use super::session::{checked_form, Form, Signed};
use super::view::{self, run_link, seg};
use super::{BASE, EDIT_PAYLOAD_BYTES_MAX};
use crate::dto::NewRun;
use crate::extract::{ApiJson, ApiPath};
use crate::problem::ApiError;
use crate::{api, tasks, AppState};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use serde_json::{json, Value};
use std::future::Future;
use vouch_core::{RunId, TaskId};
use vouch_runtime::offer::TaskOffer;

/// A console action: check the signed form (same origin, the session's CSRF token), then
/// `call` with it — the API's own handler, its answer turned into the console address the
/// person goes to next. A refusal (the form's or the API's) is a page saying it in words.
pub(super) async fn act<Fut>(
    signed: &Signed,
    headers: &HeaderMap,
    body: &Bytes,
    call: impl FnOnce(Form) -> Fut,
) -> Response
where
    Fut: Future<Output = Result<String, ApiError>>,
{
    let form = match checked_form(signed, headers, body) {
        Ok(f) => f,
        Err(r) => return r,
    };
    match call(form).await {
        Ok(to) => Redirect::to(&to).into_response(),
        Err(e) => view::error_page(Some(signed), e.status, &e.detail),
    }
}

pub async fn cancel(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath(id): ApiPath<RunId>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&signed, &headers, &body, |_| async move {
        let _ = api::cancel(State(s), ApiPath(id.clone())).await?;
        Ok(run_link(&id))
    })
    .await
}

pub async fn resume(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath(id): ApiPath<RunId>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&signed, &headers, &body, |_| async move {
        // The continuation's page: it does what was left.
        Ok(run_link(&api::resume(State(s), ApiPath(id)).await?.0.run))
    })
    .await
}

/// A schedule's routine run now, from the schedules page: the run's page opens.
pub async fn run_schedule_now(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath(name): ApiPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&signed, &headers, &body, |_| async move {
        Ok(run_link(
            &api::run_schedule_now(State(s), ApiPath(name)).await?.0.run,
        ))
    })
    .await
}

/// The "Start a run" form: a title and a script (pasted, or read from a file by the page's
/// script) or a routine, as JSON. The API starts the run; its live page opens.
pub async fn start_run(
    State(s): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let caller = signed.caller();
    act(&signed, &headers, &body, |form| async move {
        let run = new_run(&form)?;
        let mut keyed = HeaderMap::new();
        if let Ok(v) = form.get("key").parse() {
            if !form.get("key").is_empty() {
                keyed.insert("idempotency-key", v);
            }
        }
        let started = api::start_run(State(s), caller, keyed, ApiJson(run))
            .await
            .map_err(|e| match e.field.as_deref() {
                Some("Idempotency-Key") if e.status == StatusCode::CONFLICT => ApiError::new(
                    StatusCode::CONFLICT,
                    "conflict",
                    "This form already started a run with what it held then. Open Start a run again to start another; nothing was started.",
                ),
                _ => e,
            })?
            .1
             .0;
        Ok(run_link(&started.run))
    })
    .await
}

/// What the start form asks for, as the API's body: the JSON read as the API reads a body
/// (NUL refused), under the same bound as an edited payload.
fn new_run(form: &Form) -> Result<NewRun, ApiError> {
    let text = form.get("json");
    if text.len() > EDIT_PAYLOAD_BYTES_MAX {
        return Err(ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "too_large",
            format!(
                "The script or routine is {} bytes; at most {EDIT_PAYLOAD_BYTES_MAX} are accepted. Nothing was started.",
                text.len()
            ),
        ));
    }
    if text.trim().is_empty() {
        return Err(ApiError::field(
            "json",
            "Paste a script (a JSON array of model turns) or a routine, or choose a file. Nothing was started.",
        ));
    }
    let v: Value = crate::extract::parse_json(text.as_bytes()).map_err(|e| {
        ApiError::field(
            "json",
            format!(
                "The script or routine cannot be read ({}). Go back, fix it and start again; nothing was started.",
                e.detail
            ),
        )
    })?;
    let title = Some(form.get("title").trim().to_string()).filter(|t| !t.is_empty());
    match form.get("kind") {
        // A script file may hold `{"script": [...]}`; the API takes the array itself.
        "" | "script" => Ok(NewRun {
            title,
            script: Some(match v {
                Value::Object(mut o) if o.contains_key("script") => {
                    o.remove("script").unwrap_or_default()
                }
                other => other,
            }),
            routine: None,
        }),
        "routine" => Ok(NewRun {
            title,
            script: None,
            routine: Some(v),
        }),
        _ => Err(ApiError::field("kind", "Choose a script or a routine.")),
    }
}

/// Offer through the API's handler; the form's key makes a resubmitted form the same offer.
/// Answers the new task's page.
async fn offer(s: AppState, key: &str, offer: Value) -> Result<String, ApiError> {
    let body: TaskOffer = serde_json::from_value(offer).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_input",
            format!("The offer cannot be used: {e}"),
        )
    })?;
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(key) {
        headers.insert("idempotency-key", v);
    }
    let r = tasks::offer_task(State(s), headers, ApiJson(body)).await?;
    let bytes = axum::body::to_bytes(r.into_body(), 1 << 20)
        .await
        .unwrap_or_default();
    let v: Value = serde_json::from_slice(&bytes).unwrap_or_default();
    Ok(match v["task"]["id"].as_str() {
        Some(t) => format!("{BASE}/board/{}", seg(t)),
        None => format!("{BASE}/board"),
    })
}

/// The board's "Offer a task" form: type, brief, tags (comma-separated), attempts.
pub async fn offer_task(
    State(s): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&signed, &headers, &body, |form| async move {
        let tags: Vec<&str> = form
            .get("tags")
            .split(',')
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .collect();
        let attempts: u32 = match form.get("max_attempts").trim() {
            "" => 1,
            n => n.parse().map_err(|_| {
                ApiError::field("max_attempts", "Attempts is a whole number from 1 to 20.")
            })?,
        };
        let o = json!({"type": form.get("type").trim(), "brief": form.get("brief"), "tags": tags, "max_attempts": attempts});
        let key = format!("console-{}", form.get("key"));
        offer(s, &key, o).await
    })
    .await
}

/// Offer a failed (or expired, or cancelled) task again: a new task with the same type,
/// brief, input, criteria, tags and attempts. The old task and its attempts stay as they are.
pub async fn retry_task(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath(id): ApiPath<TaskId>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    act(&signed, &headers, &body, |form| async move {
        let read = tasks::get_task(State(s.clone()), ApiPath(id.clone()))
            .await?
            .0;
        let task = &read.task;
        let o = json!({
            "type": task["kind"],
            "brief": task["spec"]["brief"],
            "input": task["spec"]["input"],
            "criteria": task["spec"]["criteria"],
            "tags": task["tags"],
            "max_attempts": task["max_attempts"],
        });
        let key = format!("console-retry-{id}-{}", form.get("key"));
        offer(s, &key, o).await
    })
    .await
}
