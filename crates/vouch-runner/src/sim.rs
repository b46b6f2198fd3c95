//! The simulated world of scenarios (scenarios.md, `world`): one shared world, seen by the host
//! through a [`SimProvider`] per destination kind. It behaves as the scenario's typed
//! [`World`] says on the first attempt at a destination and counts effects at its side: one
//! effect per distinct idempotency key when the destination deduplicates, else one per
//! applied attempt.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use vouch_core::{Destination, DestinationKind};
use vouch_runtime::provider::{AttemptReply, AttemptRequest, Confirms, Observation, Provider};
use vouch_scenario::{Behavior, World};

/// The world of one scenario and what happened in it.
#[derive(Debug, Default)]
pub struct SimWorld {
    world: World,
    state: Mutex<SimState>,
}

#[derive(Debug, Default, Clone)]
pub struct SimState {
    /// Attempts seen per destination key (the behaviour applies to the first one).
    pub attempts: HashMap<String, u32>,
    /// Effects applied per delivery id.
    pub effects: HashMap<String, u32>,
    /// Effects present per destination key (what observation sees): the payload hash.
    pub present: HashMap<String, String>,
    /// Idempotency keys applied, with the delivery that applied each.
    pub keys: HashMap<String, String>,
}

impl SimWorld {
    pub fn new(world: World) -> Self {
        SimWorld {
            world,
            state: Mutex::new(SimState::default()),
        }
    }

    pub fn snapshot(&self) -> SimState {
        self.state.lock().map(|s| s.clone()).unwrap_or_default()
    }

    /// Effects the world saw for `delivery` (the report's `executions`).
    pub fn executions(&self, delivery: &str) -> u32 {
        self.snapshot().effects.get(delivery).copied().unwrap_or(0)
    }

    /// One provider per destination kind, all over this world.
    pub fn providers(self: &Arc<Self>) -> Vec<(DestinationKind, Arc<dyn Provider>)> {
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
}

/// One kind's view of the shared simulated world.
pub struct SimProvider {
    pub kind: DestinationKind,
    pub world: Arc<SimWorld>,
}

impl Provider for SimProvider {
    fn kind(&self) -> DestinationKind {
        self.kind
    }
    fn idempotent_by_key(&self, dest: &Destination) -> bool {
        self.world.world.is_idempotent_by_key(dest)
    }
    fn exists(&self, dest: &Destination) -> bool {
        self.world.world.exists(dest)
    }
    /// The file holds its scenario `contents` until a save is attempted there.
    fn holds(&self, dest: &Destination, payload: &serde_json::Value) -> Option<String> {
        let text = self.world.world.content_at(dest)?;
        let untouched = self
            .world
            .state
            .lock()
            .map(|st| !st.attempts.contains_key(&dest.key()))
            .unwrap_or(false);
        (untouched && vouch_runtime::provider::payload_text(payload) == text)
            .then(|| "unchanged: the file already holds these bytes".to_string())
    }
    fn attempt(&self, req: &AttemptRequest) -> AttemptReply {
        let dest_key = req.destination.key();
        let dedup = self.idempotent_by_key(&req.destination);
        let Ok(mut st) = self.world.state.lock() else {
            return AttemptReply::Rejected {
                reason: "simulated world poisoned".into(),
            };
        };
        let n = st.attempts.entry(dest_key.clone()).or_insert(0);
        *n += 1;
        let behavior = if *n == 1 {
            self.world.world.behavior_at(&req.destination)
        } else {
            Behavior::Accept
        };
        let reference = format!(
            "sim-{}-{}",
            req.delivery,
            &req.payload_hash[..8.min(req.payload_hash.len())]
        );
        let apply = |st: &mut SimState| {
            if dedup {
                if let Some(k) = &req.idempotency_key {
                    if st.keys.contains_key(k) {
                        return; // deduplicated by key: no second effect
                    }
                    st.keys.insert(k.clone(), req.delivery.clone());
                }
            }
            *st.effects.entry(req.delivery.clone()).or_insert(0) += 1;
            st.present
                .insert(dest_key.clone(), req.payload_hash.clone());
        };
        match behavior {
            Behavior::Accept => {
                apply(&mut st);
                AttemptReply::Accepted {
                    reference,
                    confirms: Confirms::Reference,
                }
            }
            Behavior::AcceptUnverifiable => {
                apply(&mut st);
                AttemptReply::AcceptedUnverifiable { reference }
            }
            Behavior::LoseResponse => {
                apply(&mut st);
                AttemptReply::Lost {
                    reason: "the provider did not answer in time".into(),
                }
            }
            Behavior::Reject => AttemptReply::Rejected {
                reason: "the provider refused the request".into(),
            },
            Behavior::FalseSuccess => AttemptReply::Accepted {
                reference,
                confirms: Confirms::Reference,
            },
        }
    }
    fn observe(&self, req: &AttemptRequest, reply: Option<&AttemptReply>) -> Observation {
        // Folder, surface and calendar effects can be re-read; e-mail, webhook and payment
        // are known only by the provider's reply (§6.2).
        let observable = matches!(
            self.kind,
            DestinationKind::Folder | DestinationKind::Surface | DestinationKind::Calendar
        );
        let st = self.world.snapshot();
        let present = st.present.get(&req.destination.key()) == Some(&req.payload_hash);
        if observable {
            return if present {
                Observation::Present {
                    evidence: format!("re-read {}", req.destination.key()),
                }
            } else {
                Observation::Absent {
                    reason: "nothing there when the host looked".into(),
                }
            };
        }
        // §6.3: where the reply is the only observation, it is the evidence — named as
        // exactly what was observed. A provider that says yes and applies nothing is beyond
        // what the host can see here (no read-back is configured in a scenario world).
        match reply {
            Some(AttemptReply::Accepted { reference, .. }) => Observation::Present {
                evidence: format!("accepted by the provider: {reference}"),
            },
            _ => Observation::Unobservable,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use vouch_core::Verb;

    fn req(delivery: &str, address: &str, key: Option<&str>) -> AttemptRequest {
        AttemptRequest {
            run_id: "r".into(),
            delivery: delivery.into(),
            verb: Verb::Send,
            destination: Destination {
                kind: DestinationKind::Webhook,
                address: address.into(),
            },
            payload: serde_json::json!({"text": "x"}),
            payload_hash: "abcdef0123456789".into(),
            idempotency_key: key.map(String::from),
        }
    }

    fn world(json: serde_json::Value) -> Arc<SimWorld> {
        Arc::new(SimWorld::new(serde_json::from_value(json).unwrap()))
    }

    fn webhook(w: &Arc<SimWorld>) -> Arc<dyn Provider> {
        w.providers()
            .into_iter()
            .find(|(k, _)| *k == DestinationKind::Webhook)
            .map(|(_, p)| p)
            .unwrap()
    }

    #[test]
    fn the_first_matching_behaviour_applies_to_the_first_attempt_only() {
        let w = world(serde_json::json!({"behavior": {
            "webhook:https://a/*": "reject", "webhook:*": "lose_response"}}));
        let p = webhook(&w);
        assert!(matches!(
            p.attempt(&req("d1", "https://a/x", None)),
            AttemptReply::Rejected { .. }
        ));
        assert!(matches!(
            p.attempt(&req("d1", "https://a/x", None)),
            AttemptReply::Accepted { .. }
        ));
        assert!(matches!(
            p.attempt(&req("d2", "https://b/y", None)),
            AttemptReply::Lost { .. }
        ));
        assert_eq!(w.executions("d1"), 1, "a refusal has no effect");
        assert_eq!(w.executions("d2"), 1, "a lost answer still had its effect");
    }

    #[test]
    fn a_deduplicating_destination_applies_one_effect_per_key() {
        let w = world(serde_json::json!({"idempotent_by_key": ["webhook:https://a/*"]}));
        let p = webhook(&w);
        assert!(p.idempotent_by_key(&req("d1", "https://a/x", None).destination));
        assert!(!p.idempotent_by_key(&req("d1", "https://b/x", None).destination));
        for _ in 0..3 {
            p.attempt(&req("d1", "https://a/x", Some("k1")));
            p.attempt(&req("d2", "https://b/x", Some("k2")));
        }
        assert_eq!(w.executions("d1"), 1);
        assert_eq!(
            w.executions("d2"),
            3,
            "without deduplication every attempt applies"
        );
    }

    #[test]
    fn false_success_says_yes_and_applies_nothing() {
        let w = world(
            serde_json::json!({"behavior": {"webhook:*": "false_success"},
            "existing": ["webhook:https://a/*"]}),
        );
        let p = webhook(&w);
        let r = req("d1", "https://a/x", None);
        assert!(p.exists(&r.destination));
        assert!(matches!(p.attempt(&r), AttemptReply::Accepted { .. }));
        assert_eq!(w.executions("d1"), 0);
    }
}
