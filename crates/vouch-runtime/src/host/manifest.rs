//! The manifest (§3): declare, preflight and clarify, each a room; the capability/posture
//! decision they read is the `Gate` room. Writes manifest, preflight and clarify events;
//! never calls a provider.

use super::rooms::{Cards, Gate, Journal, Views};
use super::*;

/// A `declare` call (§3): parse and check the manifest, journal it or its rejection, then
/// pre-flight its new items and ask the run's one question where one is needed. Reads the
/// run's view; writes through the journal, `Preflight` and `Clarify` only.
#[derive(Clone, Copy)]
pub(super) struct Declare<'h> {
    views: Views<'h>,
    journal: Journal<'h>,
    preflight: Preflight<'h>,
    clarify: Clarify<'h>,
}

impl Host {
    pub(super) fn declare(&self) -> Declare<'_> {
        Declare {
            views: Views::of(self),
            journal: Journal::of(self),
            preflight: self.preflight(),
            clarify: self.clarify(),
        }
    }
}

impl Declare<'_> {
    // ------------------------------------------------------------------ manifest (§3)

    /// Answer the model's `declare` call.
    pub(super) fn call(&self, run: &RunRecord, args: &Value) -> HostResult<CallResult> {
        let m = match self.parsed_manifest(run, args)? {
            Ok(m) => m,
            Err(res) => return Ok(res),
        };
        // §3.2: ids in the closed alphabet and a bounded manifest, before anything is
        // journaled — a malformed call the model repairs, never a name on disk.
        if let Err(e) = m.check_shape() {
            return Ok(CallResult::repair(format!("invalid `declare`: {e}")));
        }
        let view = self.views.view(&run.id)?;
        let (combined, amendment) = match &view.manifest {
            Some(existing) => {
                // A replayed identical item (a resumed run re-declaring) is not a duplicate.
                let mut am = m.clone();
                am.deliveries
                    .retain(|d| existing.delivery(&d.id) != Some(d));
                (existing.amended(&am), true)
            }
            None => (m.clone(), false),
        };
        if let Err(e) = combined.check_shape() {
            return Ok(CallResult::repair(format!("invalid `declare`: {e}")));
        }
        if let Err(errors) = combined.validate() {
            return self.contradiction(run, &view, &combined, amendment, &errors);
        }
        self.declared(run, &view, &m, &combined, amendment)
    }

    /// The manifest a `declare` call holds; otherwise what the model is answered (a repair
    /// for a malformed call; the run's question when it is outside the vocabulary, §3.3).
    fn parsed_manifest(
        &self,
        run: &RunRecord,
        args: &Value,
    ) -> HostResult<Result<Manifest, CallResult>> {
        let args = crate::schemas::without_nulls(args);
        Ok(match serde_json::from_value(args.clone()) {
            Ok(m) => Ok(m),
            Err(e) if !outside_vocabulary(&args) => {
                // Not a vocabulary problem: a malformed call the model can repair.
                Err(CallResult::repair(format!(
                    "invalid arguments for `declare`: {e}; send {{\"deliveries\": [{{\"id\", \"verb\", \"destination\": {{\"kind\", \"address\"}}}}]}}"
                )))
            }
            Err(e) => {
                // Outside the closed vocabulary (§3.3): the run asks.
                self.journal.append(
                    &run.id,
                    j::ManifestRejected {
                        errors: vec![e.to_string()],
                        declined: vec![],
                        reason: None,
                    },
                )?;
                Err(self.clarify.ask(run, &format!("I could not map the request onto what I can deliver ({e}). What exactly should I deliver, and where?"), None)?)
            }
        })
    }

    /// A manifest that contradicts itself (§5.3): the run asks its one question, or, with it
    /// spent, keeps the manifest, declines the contradicting items and ends.
    fn contradiction(
        &self,
        run: &RunRecord,
        view: &RunView,
        combined: &Manifest,
        amendment: bool,
        errors: &[vouch_core::ManifestError],
    ) -> HostResult<CallResult> {
        let texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
        let ids = contradicting_ids(errors);
        if !view.clarify_used {
            self.journal.append(
                &run.id,
                j::ManifestRejected {
                    errors: texts.clone(),
                    declined: vec![],
                    reason: None,
                },
            )?;
            return self.clarify.ask(
                run,
                &format!(
                    "Your request contradicts itself: {}. What should I do?",
                    texts.join("; ")
                ),
                None,
            );
        }
        // §5.3: the one question is spent. Keep the manifest, decline the contradicting items, end.
        let keep: Manifest = Manifest {
            forbid: combined.forbid.clone(),
            order: vec![],
            deliveries: dedup_items(combined),
        };
        self.journal.append(
            &run.id,
            j::ManifestDeclared {
                manifest: keep.clone(),
                amendment,
                carried_from: None,
            },
        )?;
        self.journal.append(
            &run.id,
            j::ManifestRejected {
                errors: texts.clone(),
                declined: ids.clone(),
                reason: Some(format!(
                    "the request contradicts itself: {}",
                    texts.join("; ")
                )),
            },
        )?;
        let why = format!(
            "the request contradicts itself and its one question was already asked: {}",
            texts.join("; ")
        );
        Ok(CallResult {
            ok: false,
            text: format!("manifest rejected: {why}; the run ends"),
            suspend: None,
            end: Some(why),
            repair: false,
        })
    }

    /// Journal a manifest that holds together, then pre-flight its new items (§4); the first
    /// that needs the person's word asks it.
    fn declared(
        &self,
        run: &RunRecord,
        view: &RunView,
        m: &Manifest,
        combined: &Manifest,
        amendment: bool,
    ) -> HostResult<CallResult> {
        self.journal.append(
            &run.id,
            j::ManifestDeclared {
                manifest: combined.clone(),
                amendment,
                carried_from: None,
            },
        )?;
        self.journal
            .say(&format!("  manifest: {}", summary(combined)));
        let mut lines = vec![];
        let new_ids: Vec<String> = m.deliveries.iter().map(|d| d.id.clone()).collect();
        let mut suspend = None;
        for d in combined
            .deliveries
            .iter()
            .filter(|d| new_ids.contains(&d.id))
        {
            if view
                .items
                .get(&d.id)
                .map(|i| i.posture.is_some())
                .unwrap_or(false)
            {
                continue; // already pre-flighted (replayed declare)
            }
            let p = self.preflight.item(run, combined, d)?;
            lines.push(format!("{}: {}", d.id, p));
            if p == Posture::Clarify && suspend.is_none() {
                let res = self.clarify.ask(
                    run,
                    &format!(
                        "I am not sure about `{}` ({} → {}). Can you confirm what you want?",
                        d.id, d.verb, d.destination
                    ),
                    Some(&d.id),
                )?;
                suspend = res.suspend;
            }
        }
        Ok(CallResult {
            ok: true,
            text: if lines.is_empty() {
                "manifest recorded; it declares no deliveries".to_string()
            } else {
                format!("manifest recorded; postures: {}", lines.join(", "))
            },
            suspend,
            end: None,
            repair: false,
        })
    }
}

/// Pre-flighting an item (§4): the posture decision, journaled as the item's `preflight`
/// event. Reads the run's view and the gate; writes only that event.
#[derive(Clone, Copy)]
pub(super) struct Preflight<'h> {
    views: Views<'h>,
    gate: Gate<'h>,
    journal: Journal<'h>,
}

/// The run's one question (§5.3): whether it was asked, its card and its event. Nothing else
/// of the host.
#[derive(Clone, Copy)]
pub(super) struct Clarify<'h> {
    views: Views<'h>,
    cards: Cards<'h>,
    journal: Journal<'h>,
}

impl Host {
    pub(super) fn preflight(&self) -> Preflight<'_> {
        Preflight {
            views: Views::of(self),
            gate: Gate::of(self),
            journal: Journal::of(self),
        }
    }

    pub(super) fn clarify(&self) -> Clarify<'_> {
        Clarify {
            views: Views::of(self),
            cards: Cards::of(self),
            journal: Journal::of(self),
        }
    }
}

impl Preflight<'_> {
    pub(super) fn item(
        &self,
        run: &RunRecord,
        m: &Manifest,
        d: &vouch_core::Delivery,
    ) -> HostResult<Posture> {
        let clarify_used = self.views.view(&run.id)?.clarify_used;
        let (p, rule, cap, irreversible) = self.gate.decide_posture(run, m, d, clarify_used)?;
        let reason = match rule {
            vouch_core::Rule::R1 => "forbidden for this run".to_string(),
            vouch_core::Rule::R2 => format!("{} is not available here", d.destination.kind),
            _ => String::new(),
        };
        self.journal.append_for(
            &run.id,
            &d.id,
            j::Preflight {
                reason: (!reason.is_empty()).then_some(reason),
                ..j::Preflight::of(
                    Some(cap.level),
                    p,
                    Some(rule.as_str().to_string()),
                    irreversible,
                    cap.connect_step.clone(),
                )
            },
        )?;
        Ok(p)
    }
}

impl Clarify<'_> {
    /// Ask the run's one question (§5.3), about an item or the whole request, and suspend the
    /// run for the answer; a second question is refused.
    pub(super) fn ask(
        &self,
        run: &RunRecord,
        question: &str,
        about: Option<&str>,
    ) -> HostResult<CallResult> {
        let view = self.views.view(&run.id)?;
        if view.clarify_used {
            return Ok(CallResult::err("rejected: the one question of this run was already asked; proceed with what you have (low-confidence items are drafted)"));
        }
        self.cards.open(&Card {
            run_id: run.id.clone(),
            delivery: None,
            payload_hash: String::new(),
            summary: question.to_string(),
            state: CardState::Open,
            created_ms: self.journal.now(),
            decided_ms: None,
            answer: None,
            reason: "the run is not sure enough to go on without you (rule R4)".into(),
        })?;
        self.journal.append(
            &run.id,
            j::ClarifyAsked {
                question: question.to_string(),
                about: about.map(String::from),
            },
        )?;
        Ok(CallResult {
            ok: true,
            text: "question asked; the run waits for the answer".into(),
            suspend: Some(format!("question: {question}")),
            end: None,
            repair: false,
        })
    }
}

/// Whether a `declare` call names a word outside the closed vocabulary (§3.3) — a verb, a
/// destination kind or a confidence the host does not know — rather than being malformed.
/// Decided by trying each such word against its type, not by the wording of serde's error.
fn outside_vocabulary(args: &Value) -> bool {
    fn unknown<T: serde::de::DeserializeOwned>(word: Option<&Value>) -> bool {
        match word {
            Some(w @ Value::String(_)) => serde_json::from_value::<T>(w.clone()).is_err(),
            _ => false,
        }
    }
    let list = |key: &str| {
        args.get(key)
            .and_then(Value::as_array)
            .map(|a| a.as_slice())
            .unwrap_or_default()
    };
    list("deliveries").iter().any(|d| {
        unknown::<Verb>(d.get("verb"))
            || unknown::<DestinationKind>(d.pointer("/destination/kind"))
            || unknown::<vouch_core::Confidence>(d.get("confidence"))
    }) || list("forbid")
        .iter()
        .any(|f| unknown::<Verb>(f.get("verb")) || unknown::<DestinationKind>(f.get("kind")))
}

/// The items a contradiction names (declined when the one question is spent).
fn contradicting_ids(errors: &[vouch_core::ManifestError]) -> Vec<String> {
    let mut ids: Vec<String> = vec![];
    for e in errors {
        match e {
            vouch_core::ManifestError::ContradictsForbid { id, .. }
            | vouch_core::ManifestError::DuplicateId { id } => ids.push(id.clone()),
            vouch_core::ManifestError::UnknownOrderId { .. }
            | vouch_core::ManifestError::OrderCycle { .. }
            | vouch_core::ManifestError::EmptyId { .. } => {}
        }
    }
    ids.dedup();
    ids
}

#[cfg(test)]
mod tests {
    use super::outside_vocabulary;
    use serde_json::json;

    #[test]
    fn an_unknown_word_is_a_vocabulary_problem_and_a_malformed_call_is_not() {
        let d = |extra: serde_json::Value| {
            let mut d = json!({"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "a.md"}});
            for (k, v) in extra.as_object().unwrap() {
                d[k] = v.clone();
            }
            json!({"deliveries": [d]})
        };
        assert!(!outside_vocabulary(&d(json!({}))));
        assert!(outside_vocabulary(&d(json!({"verb": "fax"}))));
        assert!(outside_vocabulary(&d(
            json!({"destination": {"kind": "pigeon", "address": "x"}})
        )));
        assert!(outside_vocabulary(&d(json!({"confidence": "certain-ish"}))));
        assert!(outside_vocabulary(&json!({"forbid": [{"verb": "fly"}]})));
        // Malformed, not unknown: the model repairs these.
        assert!(!outside_vocabulary(&d(json!({"verb": 3}))));
        assert!(!outside_vocabulary(&json!({"deliveries": [{"id": "d1"}]})));
        assert!(!outside_vocabulary(&json!({"deliveries": "d1"})));
    }
}
