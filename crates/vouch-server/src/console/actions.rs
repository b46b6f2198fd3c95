//! What a person does from a page besides deciding cards (issue 28): cancel or resume a run,
//! offer a task, offer a failed task again. Each form calls the JSON API's own handler, so
//! the console decides nothing; a refusal is the API's, said in words.

use super::session::{checked_form, Signed};
use super::view::{self, run_link, seg};
use super::BASE;
use crate::extract::{ApiJson, ApiPath};
use crate::problem::ApiError;
use crate::{api, tasks, AppState};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Redirect, Response};
use serde_json::{json, Value};
use vouch_runtime::offer::TaskOffer;

fn refused(signed: &Signed, e: ApiError) -> Response {
    view::error_page(Some(signed), e.status, &e.detail)
}

pub async fn cancel(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(r) = checked_form(&signed, &headers, &body) {
        return r;
    }
    match api::cancel(State(s), ApiPath(id.clone())).await {
        Ok(_) => Redirect::to(&run_link(&id)).into_response(),
        Err(e) => refused(&signed, e),
    }
}

pub async fn resume(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(r) = checked_form(&signed, &headers, &body) {
        return r;
    }
    match api::resume(State(s), ApiPath(id)).await {
        // The continuation's page: it does what was left.
        Ok(r) => Redirect::to(&run_link(&r.0.run)).into_response(),
        Err(e) => refused(&signed, e),
    }
}

/// A schedule's routine run now, from the schedules page: the run's page opens.
pub async fn run_schedule_now(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath(name): ApiPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(r) = checked_form(&signed, &headers, &body) {
        return r;
    }
    match api::run_schedule_now(State(s), ApiPath(name)).await {
        Ok(r) => Redirect::to(&run_link(&r.0.run)).into_response(),
        Err(e) => refused(&signed, e),
    }
}

/// Offer through the API's handler; the form's key makes a resubmitted form the same offer.
async fn offer(s: AppState, signed: &Signed, key: &str, offer: Value) -> Response {
    let body: TaskOffer = match serde_json::from_value(offer) {
        Ok(b) => b,
        Err(e) => {
            return refused(
                signed,
                ApiError::new(
                    axum::http::StatusCode::UNPROCESSABLE_ENTITY,
                    "invalid_input",
                    format!("The offer cannot be used: {e}"),
                ),
            )
        }
    };
    let mut headers = HeaderMap::new();
    if let Ok(v) = HeaderValue::from_str(key) {
        headers.insert("idempotency-key", v);
    }
    match tasks::offer_task(State(s), headers, ApiJson(body)).await {
        Ok(r) => {
            let bytes = axum::body::to_bytes(r.into_body(), 1 << 20)
                .await
                .unwrap_or_default();
            let v: Value = serde_json::from_slice(&bytes).unwrap_or_default();
            match v["task"]["id"].as_str() {
                Some(t) => Redirect::to(&format!("{BASE}/board/{}", seg(t))).into_response(),
                None => Redirect::to(&format!("{BASE}/board")).into_response(),
            }
        }
        Err(e) => refused(signed, e),
    }
}

/// The board's "Offer a task" form: type, brief, tags (comma-separated), attempts.
pub async fn offer_task(
    State(s): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = match checked_form(&signed, &headers, &body) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let tags: Vec<&str> = form
        .get("tags")
        .split(',')
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .collect();
    let attempts: u32 = match form.get("max_attempts").trim() {
        "" => 1,
        n => match n.parse() {
            Ok(n) => n,
            Err(_) => {
                return refused(
                    &signed,
                    ApiError::field("max_attempts", "Attempts is a whole number from 1 to 20."),
                )
            }
        },
    };
    let o = json!({"type": form.get("type").trim(), "brief": form.get("brief"), "tags": tags, "max_attempts": attempts});
    let key = format!("console-{}", form.get("key"));
    offer(s, &signed, &key, o).await
}

/// Offer a failed (or expired, or cancelled) task again: a new task with the same type,
/// brief, input, criteria, tags and attempts. The old task and its attempts stay as they are.
pub async fn retry_task(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath(id): ApiPath<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = match checked_form(&signed, &headers, &body) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let read = match tasks::get_task(State(s.clone()), ApiPath(id.clone())).await {
        Ok(t) => t.0,
        Err(e) => return refused(&signed, e),
    };
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
    offer(s, &signed, &key, o).await
}
