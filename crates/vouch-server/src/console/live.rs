//! A run page's live stream (SSE): new journal events as they become durable, then the
//! receipt when the run ends. While the stream is open the page holds the run's `watching`
//! presence (§11.1, §17), renewed well inside its lease and released when the last page of
//! the run closes. The data is already made inert and formatted for the person's zone: each
//! step comes drawn by the same template the page uses (every string escaped there), which
//! the script parses into an inert document and moves into the page, as the inbox's redraw
//! does; everything else it sets as text.

use super::session::Signed;
use super::view::inert;
use super::WATCH_LEASE_MS;
use crate::extract::{ApiPath, QueryMap};
use crate::{blocking, AppState};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use chrono::TimeZone as _;
use futures_util::stream;
use serde_json::json;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::time::Duration;
use vouch_core::RunState;

/// Events read per poll at most.
const LIVE_BATCH_MAX: usize = 500;

/// Ends the watch when the stream is dropped (the page closed or navigated away).
struct Watch {
    s: AppState,
    run: String,
}

impl Drop for Watch {
    fn drop(&mut self) {
        self.s.console.stream_closed(&self.run);
    }
}

struct Live {
    _permit: tokio::sync::OwnedSemaphorePermit,
    watch: Watch,
    /// The signed-in token; removing it ends the stream and with it the watch.
    token: String,
    tz: chrono_tz::Tz,
    after: i64,
    buf: VecDeque<Event>,
    done: bool,
    first: bool,
    renewed_ms: i64,
}

fn stamp(ms: i64, tz: chrono_tz::Tz) -> String {
    tz.timestamp_millis_opt(ms)
        .single()
        .map(|t| t.format("%Y-%m-%d %H:%M:%S %Z").to_string())
        .unwrap_or_default()
}

/// What one poll of a live run page read: the journal after the last event sent, the run,
/// whether it ended, and (when it did) what its page shows at the end.
type LiveRead = (
    Vec<vouch_store::JournalEntry>,
    Option<vouch_store::RunRecord>,
    bool,
    Option<Ended>,
);

impl Live {
    /// The page's next event: buffered events first, then another read after the poll
    /// interval, until the receipt (or a removed token, or a failed read) ends it.
    async fn next(mut self) -> Option<(Result<Event, Infallible>, Self)> {
        loop {
            if let Some(e) = self.buf.pop_front() {
                return Some((Ok(e), self));
            }
            if self.done {
                return None;
            }
            let s = self.watch.s.clone();
            if !self.first {
                tokio::time::sleep(Duration::from_millis(s.poll_ms)).await;
            }
            self.first = false;
            let now = s.host.now_ms();
            if now - self.renewed_ms > WATCH_LEASE_MS / 3 {
                s.console.watch(&self.watch.run, now);
                self.renewed_ms = now;
            }
            match self.read().await {
                // The token was removed: signed out, the page stops watching (§17.1).
                Ok(None) => self.stop("the token you signed in with was removed; sign in again"),
                Ok(Some((entries, rec, ended, end))) => {
                    self.push_entries(&entries);
                    // The receipt once every event before it has been sent.
                    if ended && entries.len() <= LIVE_BATCH_MAX {
                        self.push_receipt(rec.as_ref(), end.unwrap_or_default());
                    }
                }
                Err(e) => {
                    tracing::warn!(run = %self.watch.run, detail = %e.detail, "console live stream: store read failed");
                    self.stop("reading the run failed; reload the page");
                }
            }
        }
    }

    /// Ends the stream after a `failed` event saying why.
    fn stop(&mut self, why: &'static str) {
        self.buf
            .push_back(Event::default().event("failed").data(why));
        self.done = true;
    }

    /// One poll's read; `None` once the signed-in token is removed.
    async fn read(&self) -> crate::ApiResult<Option<LiveRead>> {
        let store = self.watch.s.store.clone();
        let (run, after, token) = (self.watch.run.clone(), self.after, self.token.clone());
        blocking(move || {
            if crate::auth::revoked(store.as_ref(), &token)? {
                return Ok(None);
            }
            let entries = store.journal_since(&run, after)?;
            let rec = store.run(&run)?;
            let ended = rec
                .as_ref()
                .map(|r| r.state == RunState::Ended)
                .unwrap_or(true);
            let end = match (&rec, ended) {
                (Some(r), true) => Some(ended_view(store.as_ref(), r)?),
                _ => None,
            };
            Ok(Some((entries, rec, ended, end)))
        })
        .await
    }

    /// A `journal` event per new step, drawn as the page draws it.
    fn push_entries(&mut self, entries: &[vouch_store::JournalEntry]) {
        for e in entries.iter().take(LIVE_BATCH_MAX) {
            self.after = e.seq;
            let data = json!({
                "seq": e.seq,
                "kind": e.kind.as_str(),
                "delivery": e.delivery.as_deref().map(inert),
                "what": super::pages::event_line(e.kind, &e.body),
                "at": stamp(e.at_ms, self.tz),
                "hash": e.hash,
                // The step in full, drawn as the page draws it (every string
                // inert), so a step that arrives live shows what a reload shows.
                "html": super::pages::timeline_entry(e, self.tz, true).into_string(),
            });
            self.buf.push_back(
                Event::default()
                    .id(e.seq.to_string())
                    .event("journal")
                    .data(data.to_string()),
            );
        }
    }

    /// The `receipt` event that ends the stream: outcome, end time, chain, receipt, items.
    fn push_receipt(&mut self, rec: Option<&vouch_store::RunRecord>, end: Ended) {
        let outcome = rec
            .and_then(|r| r.outcome)
            .map(crate::dto::word)
            .unwrap_or_default();
        let ended_at = rec
            .and_then(|r| r.ended_ms)
            .map(|t| stamp(t, self.tz))
            .unwrap_or_default();
        let data = json!({
            "outcome": outcome,
            "ended_at": ended_at,
            "chain": end.chain,
            "receipt": vouch_core::escape::escape_text(&end.receipt.unwrap_or_default()),
            "deliveries": end.deliveries,
            "waiting": end.waiting,
        });
        self.buf
            .push_back(Event::default().event("receipt").data(data.to_string()));
        self.done = true;
    }
}

pub async fn run_live(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath(id): ApiPath<String>,
    q: QueryMap,
) -> Response {
    let after = match q.number("after", 0, 0, i64::MAX as usize) {
        Ok(n) => n as i64,
        Err(e) => return e.into_response(),
    };
    let Ok(permit) = s.streams.clone().try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many live pages are open; close one and reload",
        )
            .into_response();
    };
    let store = s.store.clone();
    let rid = id.clone();
    match blocking(move || Ok(store.run(&rid)?)).await {
        Ok(Some(_)) => {}
        Ok(None) => return (StatusCode::NOT_FOUND, "no such run").into_response(),
        Err(e) => return e.into_response(),
    }
    s.console.stream_opened(&id);
    let now = s.host.now_ms();
    s.console.watch(&id, now);
    let st = Live {
        _permit: permit,
        watch: Watch {
            s: s.clone(),
            run: id,
        },
        token: signed.session.token_hash.clone(),
        tz: signed.session.tz,
        after,
        buf: VecDeque::new(),
        done: false,
        first: true,
        renewed_ms: now,
    };
    let events = stream::unfold(st, Live::next);
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}

/// The chain check's sentence on a run page (drawn, and sent again when the run ends).
pub fn chain_words(events: usize) -> String {
    format!(
        "Chain verified: {events} {}, each hash over the one before.",
        if events == 1 { "event" } else { "events" }
    )
}

/// What a run page shows again when the run ends: the receipt, each delivery's status,
/// evidence and reason as the journal's fold states them, the chain check and the badge.
#[derive(Default)]
struct Ended {
    receipt: Option<String>,
    deliveries: Vec<serde_json::Value>,
    chain: String,
    waiting: usize,
}

fn ended_view(
    store: &dyn vouch_store::Store,
    r: &vouch_store::RunRecord,
) -> crate::ApiResult<Ended> {
    let journal = store.journal(&r.id)?;
    let fold = vouch_runtime::view::RunView::from_journal(&journal);
    let d = vouch_runtime::runs::detail(store, r.clone())?;
    let deliveries = d
        .deliveries
        .iter()
        .map(|x| {
            let iv = fold.items.get(&x.id);
            json!({
                "id": inert(&x.id),
                "status": crate::dto::word(x.status),
                "words": super::plain::status(x.status),
                "evidence": iv.map(|i| inert(&i.evidence)).unwrap_or_default(),
                "reason": iv.map(|i| inert(&i.reason)).unwrap_or_default(),
            })
        })
        .collect();
    let chain = match vouch_store::verify_chain(&journal) {
        Ok(()) => chain_words(journal.len()),
        Err(b) => format!(
            "Chain broken at event {}: {}. Run `vouch journal verify`.",
            b.seq,
            inert(&b.reason)
        ),
    };
    Ok(Ended {
        receipt: store.receipt(&r.id)?,
        deliveries,
        chain,
        waiting: vouch_runtime::inbox::badge(store)?,
    })
}

/// What the inbox shows, as a version: open cards and ended runs (and the badge count).
pub fn inbox_version(store: &dyn vouch_store::Store) -> crate::ApiResult<(usize, String)> {
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
    Ok((cards.len(), crate::auth::token_hash(&print)))
}

/// The inbox page's live stream: the badge count and a fingerprint of what waits and what
/// ended, sent at once and whenever either changes (the page then offers to show the new
/// items; it never reloads by itself).
pub async fn inbox_live(State(s): State<AppState>, signed: Signed) -> Response {
    let Ok(permit) = s.streams.clone().try_acquire_owned() else {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many live pages are open; close one and reload",
        )
            .into_response();
    };
    struct St {
        _permit: tokio::sync::OwnedSemaphorePermit,
        s: AppState,
        token: String,
        seen: Option<String>,
    }
    let st = St {
        _permit: permit,
        s,
        token: signed.session.token_hash.clone(),
        seen: None,
    };
    let events = stream::unfold(st, |mut st| async move {
        loop {
            if st.seen.is_some() {
                tokio::time::sleep(Duration::from_millis(st.s.poll_ms)).await;
            }
            let store = st.s.store.clone();
            let token = st.token.clone();
            let read = blocking(move || {
                if crate::auth::revoked(store.as_ref(), &token)? {
                    return Ok(None);
                }
                inbox_version(store.as_ref()).map(Some)
            })
            .await;
            match read {
                // The token was removed: signed out, the stream ends.
                Ok(None) => return None,
                Ok(Some((waiting, digest))) => {
                    if st.seen.as_deref() == Some(digest.as_str()) {
                        continue;
                    }
                    st.seen = Some(digest.clone());
                    let data = json!({"waiting": waiting, "version": digest});
                    return Some((
                        Ok::<_, Infallible>(Event::default().event("inbox").data(data.to_string())),
                        st,
                    ));
                }
                Err(e) => {
                    tracing::warn!(detail = %e.detail, "console inbox stream: store read failed");
                    return None;
                }
            }
        }
    });
    Sse::new(events)
        .keep_alive(KeepAlive::default())
        .into_response()
}
