//! Server-sent events. A run's stream sends its journal events as they become durable (the
//! store is the source: other processes append too), each with `id` = its journal seq, so a
//! client that reconnects with `Last-Event-ID` misses nothing and sees nothing twice; the
//! stream ends after the terminal event. The inbox stream sends the whole inbox whenever what
//! waits or what ended changes.

use crate::auth::{revoked, revoked_problem, Caller};
use crate::dto::{Event, InboxBody};
use crate::extract::{ApiPath, QueryMap};
use crate::problem::{ApiError, ApiResult};
use crate::{blocking, AppState};
use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::Extension;
use futures_util::stream::{self, Stream};
use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;
use vouch_core::{RunId, RunState};
use vouch_store::EventKind;

/// Events read from the store per poll at most.
pub const SSE_BATCH_MAX: usize = 1_000;

/// A permit for one open stream, or 503 when `STREAMS_MAX` are open.
fn stream_permit(s: &AppState) -> ApiResult<tokio::sync::OwnedSemaphorePermit> {
    s.streams.clone().try_acquire_owned().map_err(|_| {
        ApiError::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            format!(
                "{} event streams are open, the most this server keeps; close one or retry later",
                crate::STREAMS_MAX
            ),
        )
    })
}

struct RunStream {
    _permit: tokio::sync::OwnedSemaphorePermit,
    state: AppState,
    /// The caller's token; removing it ends the stream.
    token: String,
    run: String,
    after: i64,
    buf: VecDeque<Event>,
    done: bool,
    first: bool,
    woken: tokio::sync::watch::Receiver<u64>,
}

fn last_event_id(headers: &HeaderMap, q: &QueryMap) -> ApiResult<i64> {
    if let Some(v) = headers.get("last-event-id") {
        let text = v.to_str().unwrap_or("");
        return text
            .trim()
            .parse::<i64>()
            .ok()
            .filter(|n| *n >= 0)
            .ok_or_else(|| {
                ApiError::field(
                    "Last-Event-ID",
                    format!(
                        "`{text}`: expected the seq of the last event received (a whole number)"
                    ),
                )
            });
    }
    Ok(q.number("after", 0, 0, i64::MAX as usize)? as i64)
}

/// The run's journal events as they become durable (`event` = kind, `id` = seq, `data` = the
/// event as in GET /api/runs/{id}/journal). Resume with `Last-Event-ID` (or `?after=SEQ`).
#[utoipa::path(get, path = "/api/runs/{id}/events", tag = "runs",
    params(
        ("id" = String, Path, description = "run id"),
        ("Last-Event-ID" = Option<i64>, Header, description = "the seq of the last event received"),
        ("after" = Option<i64>, Query, minimum = 0, description = "like Last-Event-ID, for clients that cannot set headers"),
    ),
    responses(
        (status = 200, description = "text/event-stream of journal events", content_type = "text/event-stream"),
        (status = 401, body = crate::Problem, content_type = "application/problem+json"),
        (status = 404, body = crate::Problem, content_type = "application/problem+json"),
        (status = 422, body = crate::Problem, content_type = "application/problem+json"),
        (status = 503, body = crate::Problem, content_type = "application/problem+json"),
    ))]
pub async fn run_events(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    ApiPath(id): ApiPath<RunId>,
    headers: HeaderMap,
    q: QueryMap,
) -> ApiResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    let after = last_event_id(&headers, &q)?;
    let permit = stream_permit(&s)?;
    let store = s.store.clone();
    let run = id.clone();
    blocking(move || {
        store.run(&run)?.map(|_| ()).ok_or_else(|| {
            ApiError::not_found(format!("no run `{run}`; list runs with GET /api/runs"))
        })
    })
    .await?;
    let st = RunStream {
        _permit: permit,
        woken: s.wakeups.subscribe(),
        state: s,
        token: caller.token_hash,
        run: id.into_string(),
        after,
        buf: VecDeque::new(),
        done: false,
        first: true,
    };
    let events = stream::unfold(st, |mut st| async move {
        loop {
            if let Some(e) = st.buf.pop_front() {
                if e.kind == EventKind::Terminal.as_str() {
                    st.done = true;
                    st.buf.clear();
                }
                let ev = SseEvent::default()
                    .id(e.seq.to_string())
                    .event(e.kind.clone())
                    .json_data(&e)
                    .unwrap_or_else(|_| SseEvent::default().comment("unencodable event"));
                return Some((Ok(ev), st));
            }
            if st.done {
                return None;
            }
            if !st.first {
                let fallback = Duration::from_millis(st.state.poll_ms);
                let _woken = st.state.woken_or(&mut st.woken, fallback).await;
            }
            st.first = false;
            let store = st.state.store.clone();
            let (run, after, token) = (st.run.clone(), st.after, st.token.clone());
            let read = blocking(move || {
                if revoked(store.as_ref(), &token)? {
                    return Err(revoked_problem());
                }
                let entries = store.journal_since(&run, after)?;
                let ended = entries.is_empty()
                    && store
                        .run(&run)?
                        .map(|r| r.state == RunState::Ended)
                        .unwrap_or(true);
                Ok((entries, ended))
            })
            .await;
            match read {
                Ok((entries, ended)) => {
                    for e in entries.iter().take(SSE_BATCH_MAX) {
                        st.after = e.seq;
                        st.buf.push_back(Event::from(e));
                    }
                    if ended {
                        st.done = true;
                    }
                }
                Err(e) => {
                    // Logged where handled; the client sees an `error` event and reconnects.
                    tracing::warn!(run = %st.run, detail = %e.detail, "run event stream: store read failed");
                    st.done = true;
                    let ev = SseEvent::default()
                        .event("error")
                        .json_data(e.problem())
                        .unwrap_or_else(|_| SseEvent::default().comment("error"));
                    return Some((Ok(ev), st));
                }
            }
        }
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}

struct InboxStream {
    _permit: tokio::sync::OwnedSemaphorePermit,
    state: AppState,
    /// The caller's token; removing it ends the stream.
    token: String,
    seen: Option<String>,
    n: u64,
    done: bool,
    woken: tokio::sync::watch::Receiver<u64>,
}

/// The inbox (as GET /api/inbox) now, then again whenever an open card or an ended run changes.
#[utoipa::path(get, path = "/api/inbox/events", tag = "attention",
    responses(
        (status = 200, description = "text/event-stream of `inbox` events", content_type = "text/event-stream"),
        (status = 401, body = crate::Problem, content_type = "application/problem+json"),
        (status = 503, body = crate::Problem, content_type = "application/problem+json"),
    ))]
pub async fn inbox_events(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
) -> ApiResult<Sse<impl Stream<Item = Result<SseEvent, Infallible>>>> {
    let st = InboxStream {
        _permit: stream_permit(&s)?,
        woken: s.wakeups.subscribe(),
        state: s,
        token: caller.token_hash,
        seen: None,
        n: 0,
        done: false,
    };
    let events = stream::unfold(st, |mut st| async move {
        loop {
            if st.done {
                return None;
            }
            if st.seen.is_some() {
                let fallback = Duration::from_millis(st.state.poll_ms);
                let _woken = st.state.woken_or(&mut st.woken, fallback).await;
            }
            let store = st.state.store.clone();
            let seen = st.seen.clone();
            let token = st.token.clone();
            let read = blocking(move || {
                if revoked(store.as_ref(), &token)? {
                    return Err(revoked_problem());
                }
                // A cheap fingerprint first; the whole inbox only when it changed.
                let cards = store.open_cards()?;
                let runs = store.runs(vouch_runtime::inbox::INBOX_RUNS_MAX)?;
                let mut print = String::new();
                for c in &cards {
                    print.push_str(&format!(
                        "c{}/{:?}/{};",
                        c.run_id, c.delivery, c.payload_hash
                    ));
                }
                for r in runs.iter().filter(|r| r.state == RunState::Ended) {
                    print.push_str(&format!("r{};", r.id));
                }
                if seen.as_deref() == Some(print.as_str()) {
                    return Ok(None);
                }
                let inbox = vouch_runtime::inbox::inbox(store.as_ref())?;
                Ok(Some((print, InboxBody::from(&inbox))))
            })
            .await;
            match read {
                Ok(None) => continue,
                Ok(Some((print, body))) => {
                    st.seen = Some(print);
                    st.n += 1;
                    let ev = SseEvent::default()
                        .id(st.n.to_string())
                        .event("inbox")
                        .json_data(&body)
                        .unwrap_or_else(|_| SseEvent::default().comment("unencodable inbox"));
                    return Some((Ok(ev), st));
                }
                Err(e) => {
                    // A removed token ends the stream after this event; a failed read does not.
                    st.done = e.status == axum::http::StatusCode::UNAUTHORIZED;
                    if !st.done {
                        tracing::warn!(detail = %e.detail, "inbox event stream: store read failed");
                    }
                    let ev = SseEvent::default()
                        .event("error")
                        .json_data(e.problem())
                        .unwrap_or_else(|_| SseEvent::default().comment("error"));
                    st.seen = Some(String::new());
                    return Some((Ok(ev), st));
                }
            }
        }
    });
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}
