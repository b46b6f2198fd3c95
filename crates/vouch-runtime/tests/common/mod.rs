//! A small world for the runtime's own tests: a provider of every kind over one shared
//! record, which applies each attempt (or, when refusing, refuses it with no effect), counts
//! the effects it applied per delivery, and shows the host what it applied when it looks.

use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex};
use vouch_core::{Destination, DestinationKind};
use vouch_runtime::provider::{AttemptReply, AttemptRequest, Confirms, Observation, Provider};

#[derive(Default)]
pub struct FakeWorld {
    refusing: bool,
    /// Effects applied per delivery id.
    effects: Mutex<HashMap<String, u32>>,
    /// The payload hash present at each destination key.
    present: Mutex<HashMap<String, String>>,
}

impl FakeWorld {
    pub fn accepting() -> Arc<Self> {
        Arc::new(FakeWorld::default())
    }

    pub fn refusing() -> Arc<Self> {
        Arc::new(FakeWorld {
            refusing: true,
            ..FakeWorld::default()
        })
    }

    pub fn executions(&self, delivery: &str) -> u32 {
        self.effects
            .lock()
            .map(|e| e.get(delivery).copied().unwrap_or(0))
            .unwrap_or(0)
    }

    pub fn providers(self: &Arc<Self>) -> BTreeMap<DestinationKind, Arc<dyn Provider>> {
        DestinationKind::ALL
            .into_iter()
            .map(|kind| {
                let p: Arc<dyn Provider> = Arc::new(FakeProvider {
                    kind,
                    world: self.clone(),
                });
                (kind, p)
            })
            .collect()
    }
}

struct FakeProvider {
    kind: DestinationKind,
    world: Arc<FakeWorld>,
}

impl Provider for FakeProvider {
    fn kind(&self) -> DestinationKind {
        self.kind
    }
    fn idempotent_by_key(&self, _dest: &Destination) -> bool {
        false
    }
    fn exists(&self, _dest: &Destination) -> bool {
        false
    }
    fn attempt(&self, req: &AttemptRequest) -> AttemptReply {
        if self.world.refusing {
            return AttemptReply::Rejected {
                reason: "the provider refused the request".into(),
            };
        }
        let (Ok(mut effects), Ok(mut present)) =
            (self.world.effects.lock(), self.world.present.lock())
        else {
            return AttemptReply::Rejected {
                reason: "the fake world is poisoned".into(),
            };
        };
        *effects.entry(req.delivery.clone()).or_insert(0) += 1;
        present.insert(req.destination.key(), req.payload_hash.clone());
        AttemptReply::Accepted {
            reference: format!("fake-{}", req.delivery),
            confirms: Confirms::Reference,
        }
    }
    fn observe(&self, req: &AttemptRequest, _reply: Option<&AttemptReply>) -> Observation {
        let there = self
            .world
            .present
            .lock()
            .map(|p| p.get(&req.destination.key()) == Some(&req.payload_hash))
            .unwrap_or(false);
        if there {
            Observation::Present {
                evidence: format!("re-read {}", req.destination.key()),
            }
        } else {
            Observation::Absent {
                reason: "nothing there when the host looked".into(),
            }
        }
    }
}

pub mod recording;
