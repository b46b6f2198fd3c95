//! The doctor (§4): every destination kind with the level the host would answer for it now,
//! and the step that connects what is missing; and every notification route that is stuck
//! (§11.4), with what to do next. Interfaces render this report; `vouch_adapters::doctor`
//! builds it from a home's configuration and providers.

use serde::Serialize;
use std::collections::BTreeMap;
use vouch_core::{Capability, DestinationKind};
use vouch_store::OutboxRow;

/// Failed tries of one notification after which a route that is only unavailable (not set up
/// wrong) is named as stuck. A misconfigured route is named at its first failure: it fails
/// every row alike until it is fixed.
pub const STUCK_FAILURES_MIN: u32 = 3;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DestinationRow {
    pub kind: DestinationKind,
    pub level: Capability,
    pub connect_step: Option<String>,
    /// What to write into vouch.toml to connect it (a kind that needs setting up).
    pub example: Option<&'static str>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DoctorReport {
    /// Where the configuration is read from (the home's `vouch.toml`), when the caller knows.
    pub config_path: Option<String>,
    pub destinations: Vec<DestinationRow>,
    /// Per-destination overrides from `vouch.toml` (pattern → level).
    pub overrides: BTreeMap<String, Capability>,
    /// Trusted automation patterns (R8).
    pub automation: Vec<String>,
    /// Notification routes whose deliveries keep failing, by route.
    pub stuck_routes: Vec<StuckRoute>,
}

/// A notification route whose deliveries keep failing (§11.4): its notifications wait in the
/// outbox until it takes them.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StuckRoute {
    /// The outbox route (`notify`).
    pub route: String,
    /// Notifications on this route not delivered yet.
    pub waiting: usize,
    /// Failed tries of the notification that has failed most.
    pub failures: u32,
    /// The route's own words for its latest failure.
    pub last_error: String,
    pub last_error_ms: i64,
    /// The latest failure said the route is set up wrong, not that it is down for now.
    pub misconfigured: bool,
    /// What the person should do next.
    pub next_step: String,
}

/// The stuck routes among the outbox's undelivered rows, by route name.
pub fn stuck_routes(pending: &[OutboxRow]) -> Vec<StuckRoute> {
    let mut by_route: BTreeMap<&str, Vec<&OutboxRow>> = BTreeMap::new();
    for row in pending.iter().filter(|r| r.sent_ms.is_none()) {
        by_route.entry(&row.route).or_default().push(row);
    }
    by_route
        .into_iter()
        .filter_map(|(route, rows)| {
            let latest = rows
                .iter()
                .filter_map(|r| r.failure.as_ref())
                .max_by_key(|f| f.last_ms)?;
            let failures = rows
                .iter()
                .filter_map(|r| r.failure.as_ref().map(|f| f.failures))
                .max()
                .unwrap_or(0);
            if !latest.misconfigured && failures < STUCK_FAILURES_MIN {
                return None;
            }
            let waiting = rows.len();
            let next_step = if latest.misconfigured {
                format!(
                    "fix what the error names; the next vouch command that opens the home \
                     (e.g. `vouch inbox`) then sends the {waiting} waiting, and the inbox lists \
                     their runs meanwhile"
                )
            } else {
                format!(
                    "the route failed {failures} tries in a row: check that what the error names \
                     is up; the {waiting} waiting stay queued and each vouch command that opens \
                     the home (e.g. `vouch inbox`) tries them again"
                )
            };
            Some(StuckRoute {
                route: route.to_string(),
                waiting,
                failures,
                last_error: latest.last_error.clone(),
                last_error_ms: latest.last_ms,
                misconfigured: latest.misconfigured,
                next_step,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use vouch_store::OutboxFailure;

    fn row(id: i64, route: &str, failure: Option<(u32, bool, i64)>) -> OutboxRow {
        OutboxRow {
            id,
            dedup_key: format!("r{id}:terminal"),
            run_id: format!("r{id}"),
            route: route.into(),
            body: serde_json::json!({}),
            created_ms: id,
            sent_ms: None,
            failure: failure.map(|(failures, misconfigured, last_ms)| OutboxFailure {
                failures,
                last_error: format!("error at {last_ms}"),
                misconfigured,
                last_ms,
            }),
        }
    }

    #[test]
    fn a_misconfigured_route_is_named_at_once_an_unavailable_one_after_repeated_failures() {
        assert_eq!(stuck_routes(&[]), vec![]);
        // Down for now, twice: not yet stuck; a row never tried counts as waiting only.
        let down = [
            row(1, "notify", Some((2, false, 10))),
            row(2, "notify", None),
        ];
        assert_eq!(stuck_routes(&down), vec![]);
        let down = [
            row(1, "notify", Some((STUCK_FAILURES_MIN, false, 10))),
            row(2, "notify", None),
        ];
        let stuck = stuck_routes(&down);
        assert_eq!(stuck.len(), 1);
        assert_eq!(
            (stuck[0].route.as_str(), stuck[0].waiting, stuck[0].failures),
            ("notify", 2, STUCK_FAILURES_MIN)
        );
        assert!(!stuck[0].misconfigured);
        assert!(stuck[0].next_step.contains("tries in a row"), "{stuck:?}");
        // Set up wrong: named at the first failure, with the latest failure's words.
        let wrong = [
            row(1, "notify", Some((1, false, 10))),
            row(2, "notify", Some((1, true, 20))),
            row(3, "other", None),
        ];
        let stuck = stuck_routes(&wrong);
        assert_eq!(stuck.len(), 1, "{stuck:?}");
        assert_eq!(stuck[0].route, "notify");
        assert_eq!(stuck[0].last_error, "error at 20");
        assert_eq!(stuck[0].last_error_ms, 20);
        assert!(stuck[0].misconfigured);
        assert!(stuck[0].next_step.starts_with("fix"), "{stuck:?}");
    }
}
