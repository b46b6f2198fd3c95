//! Injected time. The runtime never reads the wall clock directly, so tests, the scenario
//! runner and crash sweeps control time and never sleep.

use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;

pub trait Clock: Send + Sync {
    /// Milliseconds since the Unix epoch.
    fn now_ms(&self) -> i64;
    /// Bits that make an id made at this instant unique: random by default; a deterministic
    /// world (the simulator, tests) counts instead, so a seed makes the same ids every time.
    fn id_bits(&self) -> u64 {
        // A UUIDv7's low half is random (its variant bits aside).
        uuid::Uuid::now_v7().as_u64_pair().1
    }
}

#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told; each read advances it by `step_ms` so that events
/// keep distinct, deterministic timestamps.
#[derive(Debug, Clone)]
pub struct ManualClock {
    now: Arc<AtomicI64>,
    step_ms: i64,
    /// Ids made under this clock count up from 0 (see [`Clock::id_bits`]).
    ids: Arc<AtomicU64>,
}

impl ManualClock {
    pub fn new(start_ms: i64, step_ms: i64) -> Self {
        ManualClock {
            now: Arc::new(AtomicI64::new(start_ms)),
            step_ms,
            ids: Arc::new(AtomicU64::new(0)),
        }
    }
    pub fn advance(&self, ms: i64) {
        self.now.fetch_add(ms, Ordering::SeqCst);
    }
    pub fn set(&self, ms: i64) {
        self.now.store(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> i64 {
        self.now.fetch_add(self.step_ms, Ordering::SeqCst)
    }
    fn id_bits(&self) -> u64 {
        self.ids.fetch_add(1, Ordering::SeqCst)
    }
}
