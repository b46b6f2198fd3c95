//! `GET /metrics` in Prometheus' text format. Run, delivery and notification figures are the
//! store's own counts (`Store::counts`, a `GROUP BY` each), and tasks by state the board's
//! (`BoardStore::task_counts`): other processes run work too, so they are true for the whole
//! home, and reading them costs the same at any number of runs or tasks.

use crate::problem::ApiResult;
use crate::{blocking, AppState};
use axum::extract::{MatchedPath, Request, State};
use axum::http::header::CONTENT_TYPE;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;

#[derive(Default)]
pub struct Metrics {
    /// (route, status) → requests answered.
    requests: Mutex<BTreeMap<(String, u16), u64>>,
    /// Decisions taken through this server, by kind.
    decisions: Mutex<BTreeMap<&'static str, u64>>,
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
        let counts = store.counts()?;
        let waiting = vouch_runtime::inbox::badge(store)?;
        let mut t = String::new();
        let _ = writeln!(t, "# HELP vouch_runs Runs in the store by state.\n# TYPE vouch_runs gauge");
        for (k, v) in &counts.runs_by_state {
            let _ = writeln!(t, "vouch_runs{{state=\"{}\"}} {v}", escape(k));
        }
        let _ = writeln!(t, "# HELP vouch_runs_ended Ended runs by outcome.\n# TYPE vouch_runs_ended gauge");
        for (k, v) in &counts.ended_by_outcome {
            let _ = writeln!(t, "vouch_runs_ended{{outcome=\"{}\"}} {v}", escape(k));
        }
        let _ = writeln!(t, "# HELP vouch_deliveries Deliveries of ended runs by final status (§6.1).\n# TYPE vouch_deliveries gauge");
        for (k, v) in &counts.deliveries_by_status {
            let _ = writeln!(t, "vouch_deliveries{{status=\"{}\"}} {v}", escape(k));
        }
        let _ = writeln!(t, "# HELP vouch_notifications Notifications of ended runs by route and whether sent (§11.4).\n# TYPE vouch_notifications gauge");
        for ((route, sent), v) in &counts.notifications {
            let _ = writeln!(t, "vouch_notifications{{route=\"{}\",sent=\"{sent}\"}} {v}", escape(route));
        }
        let _ = writeln!(t, "# HELP vouch_notifications_pending Outbox rows not yet delivered.\n# TYPE vouch_notifications_pending gauge\nvouch_notifications_pending {}", counts.notifications_pending);
        let _ = writeln!(t, "# HELP vouch_waiting Things waiting for the person (the badge).\n# TYPE vouch_waiting gauge\nvouch_waiting {waiting}");
        if let Some(board) = &board {
            let _ = writeln!(t, "# HELP vouch_tasks Tasks on the board by state (§13.3).\n# TYPE vouch_tasks gauge");
            for (st, n) in board.task_counts()? {
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
