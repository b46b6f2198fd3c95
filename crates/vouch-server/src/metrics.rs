//! `GET /metrics` in Prometheus' text format. Run and delivery figures come from the store
//! (other processes run work too), so they are true for the home, not just this process;
//! an ended run never changes, so its facts are read once and kept.

use crate::problem::ApiResult;
use crate::{blocking, AppState};
use axum::extract::{MatchedPath, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::sync::Mutex;
use vouch_core::RunState;
use vouch_runtime::host::RUNS_SCAN_MAX;

/// Tasks counted per state at most (a larger board shows this number).
pub const TASKS_COUNT_MAX: usize = 100_000;

/// What an ended run contributes, read once.
#[derive(Debug, Clone, Default)]
struct EndedFacts {
    outcome: String,
    statuses: Vec<String>,
    notifications: Vec<(String, bool)>,
}

#[derive(Default)]
pub struct Metrics {
    /// (route, status) → requests answered.
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    /// Decisions taken through this server, by kind.
    decisions: Mutex<BTreeMap<&'static str, u64>>,
    ended: Mutex<HashMap<String, EndedFacts>>,
    /// How long the board's claims through this server take (§13.2).
    pub claim_latency: vouch_runtime::latency::Histogram,
}

impl Metrics {
    pub fn decision(&self, kind: &'static str) {
        if let Ok(mut d) = self.decisions.lock() {
            *d.entry(kind).or_default() += 1;
        }
    }
    fn request(&self, route: String, status: u16) {
        if let Ok(mut r) = self.requests.lock() {
            *r.entry((route, status)).or_default() += 1;
        }
    }
}

pub async fn count_requests(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|m| m.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    let res = next.run(req).await;
    s.metrics.request(route, res.status().as_u16());
    res
}

fn escape(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The exposition text.
#[utoipa::path(get, path = "/metrics", tag = "host",
    responses(
        (status = 200, description = "Prometheus text format 0.0.4", content_type = "text/plain"),
        (status = 401, body = crate::Problem, content_type = "application/problem+json"),
    ))]
pub async fn render(State(s): State<AppState>) -> ApiResult<Response> {
    let store = s.store.clone();
    let board = s.board.clone();
    let metrics = s.metrics.clone();
    let text = blocking(move || {
        let store = store.as_ref();
        let runs = store.runs(RUNS_SCAN_MAX)?;
        let mut by_state: BTreeMap<String, u64> = BTreeMap::new();
        let mut by_outcome: BTreeMap<String, u64> = BTreeMap::new();
        let mut deliveries: BTreeMap<String, u64> = BTreeMap::new();
        let mut notes: BTreeMap<(String, bool), u64> = BTreeMap::new();
        let mut cache = metrics
            .ended
            .lock()
            .map_err(|_| crate::ApiError::internal("metrics cache poisoned"))?;
        for r in &runs {
            *by_state.entry(crate::dto::word(r.state)).or_default() += 1;
            if r.state != RunState::Ended {
                continue;
            }
            if !cache.contains_key(&r.id) {
                let d = vouch_runtime::runs::detail(store, r.clone())?;
                let facts = EndedFacts {
                    outcome: r.outcome.map(crate::dto::word).unwrap_or_default(),
                    statuses: d.deliveries.iter().map(|x| crate::dto::word(x.status)).collect(),
                    notifications: store
                        .outbox_for_run(&r.id)?
                        .into_iter()
                        .map(|o| (o.route, o.sent_ms.is_some()))
                        .collect(),
                };
                // Only a sent notification is final; an unsent one is read again next time.
                if facts.notifications.iter().all(|(_, sent)| *sent) {
                    cache.insert(r.id.clone(), facts.clone());
                }
                add(&facts, &mut by_outcome, &mut deliveries, &mut notes);
            } else if let Some(f) = cache.get(&r.id) {
                add(f, &mut by_outcome, &mut deliveries, &mut notes);
            }
        }
        drop(cache);
        let waiting = vouch_runtime::inbox::badge(store)?;
        let pending = store.outbox_pending()?.len();
        let mut t = String::new();
        let _ = writeln!(t, "# HELP vouch_runs Runs in the store by state.\n# TYPE vouch_runs gauge");
        for (k, v) in &by_state {
            let _ = writeln!(t, "vouch_runs{{state=\"{}\"}} {v}", escape(k));
        }
        let _ = writeln!(t, "# HELP vouch_runs_ended Ended runs by outcome.\n# TYPE vouch_runs_ended gauge");
        for (k, v) in &by_outcome {
            let _ = writeln!(t, "vouch_runs_ended{{outcome=\"{}\"}} {v}", escape(k));
        }
        let _ = writeln!(t, "# HELP vouch_deliveries Deliveries of ended runs by final status (§6.1).\n# TYPE vouch_deliveries gauge");
        for (k, v) in &deliveries {
            let _ = writeln!(t, "vouch_deliveries{{status=\"{}\"}} {v}", escape(k));
        }
        let _ = writeln!(t, "# HELP vouch_notifications Notifications of ended runs by route and whether sent (§11.4).\n# TYPE vouch_notifications gauge");
        for ((route, sent), v) in &notes {
            let _ = writeln!(t, "vouch_notifications{{route=\"{}\",sent=\"{sent}\"}} {v}", escape(route));
        }
        let _ = writeln!(t, "# HELP vouch_notifications_pending Outbox rows not yet delivered.\n# TYPE vouch_notifications_pending gauge\nvouch_notifications_pending {pending}");
        let _ = writeln!(t, "# HELP vouch_waiting Things waiting for the person (the badge).\n# TYPE vouch_waiting gauge\nvouch_waiting {waiting}");
        if let Some(board) = &board {
            let _ = writeln!(t, "# HELP vouch_tasks Tasks on the board by state (§13.3).\n# TYPE vouch_tasks gauge");
            for st in vouch_core::board::TaskState::ALL {
                let n = board
                    .tasks(&vouch_store::board::TaskFilter {
                        state: Some(*st),
                        tag: None,
                        limit: TASKS_COUNT_MAX,
                    })?
                    .len();
                let _ = writeln!(t, "vouch_tasks{{state=\"{}\"}} {n}", st.as_str());
            }
        }
        t.push_str(&vouch_runtime::latency::COMMIT_LATENCY.render(
            "vouch_commit_latency_seconds",
            "Durability-point commits of this process's host (one batch of journal events: one transaction).",
        ));
        t.push_str(&metrics.claim_latency.render(
            "vouch_claim_latency_seconds",
            "Claims of board tasks through this server (the one conditional update, §13.2).",
        ));
        let _ = writeln!(t, "# HELP vouch_http_decisions_total Decisions taken through this server.\n# TYPE vouch_http_decisions_total counter");
        if let Ok(d) = metrics.decisions.lock() {
            for (k, v) in d.iter() {
                let _ = writeln!(t, "vouch_http_decisions_total{{decision=\"{k}\"}} {v}");
            }
        }
        let _ = writeln!(t, "# HELP vouch_http_requests_total Requests answered, by route and status.\n# TYPE vouch_http_requests_total counter");
        if let Ok(r) = metrics.requests.lock() {
            for ((route, status), v) in r.iter() {
                let _ = writeln!(t, "vouch_http_requests_total{{route=\"{}\",status=\"{status}\"}} {v}", escape(route));
            }
        }
        Ok(t)
    })
    .await?;
    Ok((
        [(CONTENT_TYPE, "text/plain; version=0.0.4; charset=utf-8")],
        text,
    )
        .into_response())
}

fn add(
    f: &EndedFacts,
    by_outcome: &mut BTreeMap<String, u64>,
    deliveries: &mut BTreeMap<String, u64>,
    notes: &mut BTreeMap<(String, bool), u64>,
) {
    *by_outcome.entry(f.outcome.clone()).or_default() += 1;
    for s in &f.statuses {
        *deliveries.entry(s.clone()).or_default() += 1;
    }
    for n in &f.notifications {
        *notes.entry(n.clone()).or_default() += 1;
    }
}
