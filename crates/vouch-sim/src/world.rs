//! The simulated providers: one world behind every destination kind, which answers attempts
//! as the seed says (accepted, refused, the answer lost, slow) and counts every effect at its
//! own side — what the invariants compare the store with.

use crate::rng::Rng;
use crate::Faults;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use vouch_core::{Destination, DestinationKind};
use vouch_runtime::clock::ManualClock;
use vouch_runtime::provider::{AttemptReply, AttemptRequest, Confirms, Observation, Provider};

/// Receivers under this prefix (and every payment provider) apply each idempotency key once.
pub const DEDUP_WEBHOOK: &str = "https://idem.example/";
/// How far a slow provider may hold an attempt: past a run's lease.
pub const SLOW_MS_MAX: i64 = 120_000;

/// One effect the world applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Effect {
    pub run_id: String,
    pub delivery: String,
    pub destination: String,
    pub key: Option<String>,
    pub payload_hash: String,
}

#[derive(Debug)]
struct State {
    rng: Rng,
    faults: Faults,
    effects: Vec<Effect>,
    /// What a re-read of a destination sees: the payload hash last applied there.
    present: BTreeMap<String, String>,
    /// Keys a deduplicating receiver has applied.
    dedup_keys: BTreeSet<String>,
    attempts: u64,
}

pub struct World {
    clock: ManualClock,
    state: Mutex<State>,
}

pub fn dedups(dest: &Destination) -> bool {
    dest.kind == DestinationKind::Payment
        || (dest.kind == DestinationKind::Webhook && dest.address.starts_with(DEDUP_WEBHOOK))
}

/// Kinds whose effect the host can read back (§6.2); the others are known by the reply only.
fn observable(kind: DestinationKind) -> bool {
    matches!(
        kind,
        DestinationKind::Folder | DestinationKind::Surface | DestinationKind::Calendar
    )
}

impl World {
    pub fn new(rng: Rng, faults: Faults, clock: ManualClock) -> Arc<World> {
        Arc::new(World {
            clock,
            state: Mutex::new(State {
                rng,
                faults,
                effects: vec![],
                present: BTreeMap::new(),
                dedup_keys: BTreeSet::new(),
                attempts: 0,
            }),
        })
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every effect applied so far, in order.
    pub fn effects(&self) -> Vec<Effect> {
        self.state().effects.clone()
    }

    pub fn attempts(&self) -> u64 {
        self.state().attempts
    }

    pub fn providers(self: &Arc<Self>) -> BTreeMap<DestinationKind, Arc<dyn Provider>> {
        DestinationKind::ALL
            .into_iter()
            .map(|kind| {
                let p: Arc<dyn Provider> = Arc::new(SimProvider {
                    kind,
                    world: self.clone(),
                });
                (kind, p)
            })
            .collect()
    }

    fn attempt(&self, req: &AttemptRequest) -> AttemptReply {
        let mut st = self.state();
        st.attempts += 1;
        let faults = st.faults;
        if faults.slow && st.rng.chance(5) {
            // The provider holds the request: time passes for everyone.
            let ms = 1 + st.rng.below(SLOW_MS_MAX as u64) as i64;
            self.clock.advance(ms);
        }
        let roll = st.rng.below(100);
        if faults.errors && roll < 6 {
            return AttemptReply::Rejected {
                reason: "the provider refused the request (simulated error)".into(),
            };
        }
        let dest = req.destination.key();
        let fresh = match (&req.idempotency_key, dedups(&req.destination)) {
            (Some(k), true) => st.dedup_keys.insert(k.clone()),
            _ => true,
        };
        if fresh {
            st.effects.push(Effect {
                run_id: req.run_id.clone(),
                delivery: req.delivery.clone(),
                destination: dest.clone(),
                key: req.idempotency_key.clone(),
                payload_hash: req.payload_hash.clone(),
            });
            st.present.insert(dest, req.payload_hash.clone());
        }
        if faults.lost && roll < 14 {
            return AttemptReply::Lost {
                reason: "the provider did not answer in time (simulated)".into(),
            };
        }
        AttemptReply::Accepted {
            reference: format!("sim-{}", st.attempts),
            confirms: Confirms::Reference,
        }
    }

    fn observe(&self, req: &AttemptRequest, reply: Option<&AttemptReply>) -> Observation {
        if observable(req.destination.kind) {
            let st = self.state();
            return if st.present.get(&req.destination.key()) == Some(&req.payload_hash) {
                Observation::Present {
                    evidence: format!("re-read {}", req.destination.key()),
                }
            } else {
                Observation::Absent {
                    reason: "nothing there when the host looked".into(),
                }
            };
        }
        match reply {
            Some(AttemptReply::Accepted { reference, .. }) => Observation::Present {
                evidence: format!("accepted by the provider: {reference}"),
            },
            _ => Observation::Unobservable,
        }
    }
}

struct SimProvider {
    kind: DestinationKind,
    world: Arc<World>,
}

impl Provider for SimProvider {
    fn kind(&self) -> DestinationKind {
        self.kind
    }
    fn idempotent_by_key(&self, dest: &Destination) -> bool {
        dedups(dest)
    }
    fn exists(&self, dest: &Destination) -> bool {
        self.world.state().present.contains_key(&dest.key())
    }
    fn attempt(&self, req: &AttemptRequest) -> AttemptReply {
        self.world.attempt(req)
    }
    fn observe(&self, req: &AttemptRequest, reply: Option<&AttemptReply>) -> Observation {
        self.world.observe(req, reply)
    }
}
