//! The web console (issue 15, contract §17): server-rendered pages in the same binary, for a
//! person. It decides nothing: reads come from the same runtime and store functions the JSON
//! API reads, and every decision (approve, edit, deny, answer) calls the JSON API's own
//! handler, so the console and the API cannot disagree. No store write of its own.
//!
//! Sign-in trades an API token for a session cookie (`HttpOnly`, `SameSite=Strict`, path
//! `/console`); every form carries the session's CSRF token and a cross-origin `Origin` is
//! refused (§17). Every asset is embedded; the one script only adds live updates (SSE).

mod actions;
mod diff;
pub(crate) mod live;
pub mod measures;
mod pages;
mod plain;
mod runs;
mod session;
mod start;
mod thread;
mod view;

use crate::AppState;
use axum::routing::{get, post};
use axum::Router;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use vouch_artifacts::ArtifactStore;

pub use session::{Session, SESSIONS_MAX, SESSION_TTL_MS};

/// Where the console lives; `/` redirects here.
pub const BASE: &str = "/console";
/// Runs listed as "in progress" on the inbox at most.
pub const INBOX_ACTIVE_MAX: usize = 20;
/// A cohort with fewer tasks than this is marked as a small sample on the measures page.
pub const SMALL_SAMPLE_TASKS: i64 = 20;
/// How long one renewal of a run page's `watching` presence lasts; the live stream renews it
/// well before it runs out, so a closed page stops watching within this time at most.
pub const WATCH_LEASE_MS: i64 = 10_000;
/// Bytes of JSON a payload edited in a form may have (a payload is at most 1 MiB, §limits).
pub const EDIT_PAYLOAD_BYTES_MAX: usize = 1 << 20;

/// Writes the person's `watching` presence for a run (§11.1): the home's presence leases,
/// which the host reads when it routes the run's terminal record.
pub trait WatchPresence: Send + Sync {
    /// The person watches `run` until `until_ms` (renewed while a run page is open).
    fn hold(&self, run: &str, until_ms: i64);
    /// No open page watches `run` any more.
    fn release(&self, run: &str);
}

/// What the console keeps beside the API's state: signed-in sessions, who watches which run,
/// and where artifacts are read from.
#[derive(Clone, Default)]
pub struct Console {
    sessions: Arc<Mutex<HashMap<String, Session>>>,
    /// Open live streams per run, so one closed page never ends another page's watching.
    watchers: Arc<Mutex<HashMap<String, usize>>>,
    pub presence: Option<Arc<dyn WatchPresence>>,
    /// Artifacts by content id (§13.5), downloadable from a task's page.
    pub artifacts: Option<Arc<dyn ArtifactStore>>,
}

impl Console {
    /// A run page opened (or its live stream renewed): the person watches the run.
    fn watch(&self, run: &str, now_ms: i64) {
        if let Some(p) = &self.presence {
            p.hold(run, now_ms + WATCH_LEASE_MS);
        }
    }

    fn stream_opened(&self, run: &str) {
        *self
            .watchers
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(run.to_string())
            .or_default() += 1;
    }

    /// The last open page of a run closed: release its lease now rather than at expiry.
    fn stream_closed(&self, run: &str) {
        let mut w = self.watchers.lock().unwrap_or_else(|p| p.into_inner());
        let last = match w.get_mut(run) {
            Some(n) if *n > 1 => {
                *n -= 1;
                false
            }
            _ => {
                w.remove(run);
                true
            }
        };
        drop(w);
        if last {
            if let Some(p) = &self.presence {
                p.release(run);
            }
        }
    }
}

/// The console's routes (merged beside the API's in `crate::router`).
pub fn router() -> Router<AppState> {
    Router::new()
        .route("/", get(pages::root))
        .route("/console", get(pages::inbox))
        .route("/console/", get(pages::inbox))
        .route("/console/assets/console.js", get(view::script))
        .route("/console/assets/console.css", get(view::style))
        .route("/console/assets/favicon.svg", get(view::favicon))
        .route(
            "/console/signin",
            get(session::signin_page).post(session::signin),
        )
        .route("/console/signout", post(session::signout))
        .route("/console/zone", post(session::set_zone))
        .route("/console/live", get(live::inbox_live))
        .route("/console/runs", get(runs::page))
        .route(
            "/console/runs/new",
            get(start::page).post(actions::start_run),
        )
        .route("/console/runs/{id}", get(pages::run))
        .route("/console/runs/{id}/live", get(live::run_live))
        .route("/console/runs/{id}/answer", post(pages::answer))
        .route("/console/runs/{id}/cancel", post(actions::cancel))
        .route("/console/runs/{id}/resume", post(actions::resume))
        .route("/console/board/offer", post(actions::offer_task))
        .route(
            "/console/schedules/{name}/run",
            post(actions::run_schedule_now),
        )
        .route("/console/board/{id}/retry", post(actions::retry_task))
        .route("/console/runs/{id}/cards/{delivery}", get(pages::card))
        .route(
            "/console/runs/{id}/cards/{delivery}/approve",
            post(pages::approve),
        )
        .route(
            "/console/runs/{id}/cards/{delivery}/deny",
            post(pages::deny),
        )
        .route(
            "/console/runs/{id}/cards/{delivery}/edit",
            post(pages::edit),
        )
        .route("/console/schedules", get(pages::schedules))
        .route("/console/board", get(pages::board))
        .route("/console/board/{id}", get(pages::task))
        .route("/console/artifacts/{cid}", get(pages::artifact))
        .route("/console/measures", get(measures::page))
        .route("/console/threads/{id}", get(thread::page))
        .route("/console/doctor", get(pages::doctor))
        .route("/console/{*rest}", get(pages::not_found))
}
