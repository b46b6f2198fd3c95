//! Injectable crash points: `VOUCH_CRASH_AFTER=<event>[:<delivery>][@<nth>]` makes the
//! process abort right after that journal event is durable (or, for `provider_effect`,
//! right after the provider applied the effect and before anything about it is journaled).

use std::sync::atomic::{AtomicU32, Ordering};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CrashMode {
    /// Kill the real process (crash tests, `VOUCH_CRASH_AFTER`).
    Abort,
    /// Unwind with `HostError::Crashed`; the caller drops every in-memory state (scenario runner).
    Simulate,
}

#[derive(Debug)]
pub struct CrashPlan {
    pub event: String,
    pub delivery: Option<String>,
    pub nth: u32,
    pub mode: CrashMode,
    /// Crash without committing what is buffered (between two durability points).
    pub volatile: bool,
    seen: AtomicU32,
}

impl CrashPlan {
    pub fn new(event: &str, delivery: Option<&str>, nth: u32, mode: CrashMode) -> Self {
        CrashPlan {
            event: event.to_string(),
            delivery: delivery.map(String::from),
            nth: nth.max(1),
            mode,
            volatile: false,
            seen: AtomicU32::new(0),
        }
    }

    /// Parse `[~]event[:delivery][@nth]`; `~` crashes before the buffered events are durable.
    pub fn parse(spec: &str, mode: CrashMode) -> Option<Self> {
        let spec = spec.trim();
        let (spec, volatile) = match spec.strip_prefix('~') {
            Some(rest) => (rest, true),
            None => (spec, false),
        };
        if spec.is_empty() {
            return None;
        }
        let (rest, nth) = match spec.split_once('@') {
            Some((r, n)) => (r, n.parse().unwrap_or(1)),
            None => (spec, 1),
        };
        let (event, delivery) = match rest.split_once(':') {
            Some((e, d)) => (e, Some(d)),
            None => (rest, None),
        };
        let mut plan = CrashPlan::new(event, delivery, nth, mode);
        plan.volatile = volatile;
        Some(plan)
    }

    /// Does this point trigger the crash? Counts matching points.
    pub fn hit(&self, event: &str, delivery: Option<&str>) -> bool {
        if event != self.event {
            return false;
        }
        if let Some(d) = &self.delivery {
            if delivery != Some(d.as_str()) {
                return false;
            }
        }
        let n = self.seen.fetch_add(1, Ordering::SeqCst) + 1;
        n == self.nth
    }
}
