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

/// An `error` event carrying the problem; the client reconnects.
fn error_event(e: &ApiError) -> SseEvent {
    SseEvent::default()
        .event("error")
        .json_data(e.problem())
        .unwrap_or_else(|_| SseEvent::default().comment("error"))
}

impl RunStream {
    /// The stream's next event: one read, or the next read after a wake-up, until the
    /// terminal event (or a failed read) ends it.
    async fn next(mut self) -> Option<(Result<SseEvent, Infallible>, Self)> {
        loop {
            if let Some(ev) = self.pop() {
                return Some((Ok(ev), self));
            }
            if self.done {
                return None;
            }
            if !self.first {
                let fallback = Duration::from_millis(self.state.poll_ms);
                let _woken = self.state.woken_or(&mut self.woken, fallback).await;
            }
            self.first = false;
            match self.read().await {
                Ok((entries, ended)) => {
                    for e in entries.iter().take(SSE_BATCH_MAX) {
                        self.after = e.seq;
                        self.buf.push_back(Event::from(e));
                    }
                    self.done |= ended;
                }
                Err(e) => {
                    // Logged where handled; the client sees an `error` event and reconnects.
                    tracing::warn!(run = %self.run, detail = %e.detail, "run event stream: store read failed");
                    self.done = true;
                    return Some((Ok(error_event(&e)), self));
                }
            }
        }
    }

    /// The next buffered event; the terminal one ends the stream after it.
    fn pop(&mut self) -> Option<SseEvent> {
        let e = self.buf.pop_front()?;
        if e.kind == EventKind::Terminal.as_str() {
            self.done = true;
            self.buf.clear();
        }
        Some(
            SseEvent::default()
                .id(e.seq.to_string())
                .event(e.kind.clone())
                .json_data(&e)
                .unwrap_or_else(|_| SseEvent::default().comment("unencodable event")),
        )
    }

    /// The journal after the last event sent, and whether the run has ended with nothing
    /// more to send; refused once the caller's token is removed.
    async fn read(&self) -> ApiResult<(Vec<vouch_store::JournalEntry>, bool)> {
        let store = self.state.store.clone();
        let (run, after, token) = (self.run.clone(), self.after, self.token.clone());
        blocking(move || {
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
        .await
    }
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
    let events = stream::unfold(st, RunStream::next);
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

impl InboxStream {
    /// The inbox when it changed since the last event sent; an `error` event when a read
    /// failed (the stream ends after it only when the caller's token was removed).
    async fn next(mut self) -> Option<(Result<SseEvent, Infallible>, Self)> {
        loop {
            if self.done {
                return None;
            }
            if self.seen.is_some() {
                let fallback = Duration::from_millis(self.state.poll_ms);
                let _woken = self.state.woken_or(&mut self.woken, fallback).await;
            }
            let store = self.state.store.clone();
            let (seen, token) = (self.seen.clone(), self.token.clone());
            match blocking(move || inbox_if_changed(store.as_ref(), &token, seen)).await {
                Ok(None) => continue,
                Ok(Some((print, body))) => {
                    self.seen = Some(print);
                    self.n += 1;
                    let ev = SseEvent::default()
                        .id(self.n.to_string())
                        .event("inbox")
                        .json_data(&body)
                        .unwrap_or_else(|_| SseEvent::default().comment("unencodable inbox"));
                    return Some((Ok(ev), self));
                }
                Err(e) => {
                    // A removed token ends the stream after this event; a failed read does not.
                    self.done = e.status == axum::http::StatusCode::UNAUTHORIZED;
                    if !self.done {
                        tracing::warn!(detail = %e.detail, "inbox event stream: store read failed");
                    }
                    self.seen = Some(String::new());
                    return Some((Ok(error_event(&e)), self));
                }
            }
        }
    }
}

/// The inbox and its fingerprint, or `None` when the fingerprint is `seen`: a cheap
/// fingerprint first (the console's `inbox_version`: open cards, ended runs), the whole inbox
/// only when it changed.
fn inbox_if_changed(
    store: &dyn vouch_store::Store,
    token: &str,
    seen: Option<String>,
) -> ApiResult<Option<(String, InboxBody)>> {
    if revoked(store, token)? {
        return Err(revoked_problem());
    }
    let (_, print) = crate::console::live::inbox_version(store)?;
    if seen.as_deref() == Some(print.as_str()) {
        return Ok(None);
    }
    let inbox = vouch_runtime::inbox::inbox(store)?;
    Ok(Some((print, InboxBody::from(&inbox))))
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
    let events = stream::unfold(st, InboxStream::next);
    Ok(Sse::new(events).keep_alive(KeepAlive::default()))
}
