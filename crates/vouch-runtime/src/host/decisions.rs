//! The person's decisions (§7): approve, deny, edit, answer, cancel. Each applies only to a
//! waiting run and then continues it.

use super::rooms::{Cards, Gate, Journal, Runs};
use super::*;
use vouch_core::Principal;

/// What follows a person's decision once nothing else is open.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// This process drives the run on now.
    Drive,
    /// The run is left, unowned and waiting, for another process to drive (a task attempt
    /// resumed by the board's next claimant).
    Park,
}

/// What a person's decision may touch: the run's row (its lease and state), its cards and its
/// journal. Recording a decision never drives the run: it says whether the run may go on
/// ([`Decisions::go_on`]) and the host's public entry points continue it from there.
pub(super) struct Decisions<'h> {
    runs: Runs<'h>,
    cards: Cards<'h>,
    journal: Journal<'h>,
}

impl Host {
    // ------------------------------------------------------------------ decisions (§7)

    pub(super) fn decisions(&self) -> Decisions<'_> {
        Decisions {
            runs: Runs::of(self),
            cards: Cards::of(self),
            journal: Journal::of(self),
        }
    }

    /// Approve with no principal journaled: the in-process drivers (the scenario runner, the
    /// demo, benches). Interfaces use [`Host::approve_by`].
    pub fn approve(&self, run_id: &str, delivery: &str, hash: &str) -> HostResult<RunEnd> {
        self.approve_as(run_id, delivery, hash, Then::Drive, None)
    }

    /// Approve, journaling who decided (§17.1.1).
    pub fn approve_by(
        &self,
        run_id: &str,
        delivery: &str,
        hash: &str,
        by: &Principal,
    ) -> HostResult<RunEnd> {
        self.approve_as(run_id, delivery, hash, Then::Drive, Some(by))
    }

    pub(super) fn approve_as(
        &self,
        run_id: &str,
        delivery: &str,
        hash: &str,
        then: Then,
        by: Option<&Principal>,
    ) -> HostResult<RunEnd> {
        self.decisions().approve(run_id, delivery, hash, by)?;
        self.continue_if_unblocked(run_id, then)
    }

    pub fn deny(&self, run_id: &str, delivery: &str) -> HostResult<RunEnd> {
        self.deny_as(run_id, delivery, Then::Drive, None)
    }

    /// Deny, journaling who decided (§17.1.1).
    pub fn deny_by(&self, run_id: &str, delivery: &str, by: &Principal) -> HostResult<RunEnd> {
        self.deny_as(run_id, delivery, Then::Drive, Some(by))
    }

    pub(super) fn deny_as(
        &self,
        run_id: &str,
        delivery: &str,
        then: Then,
        by: Option<&Principal>,
    ) -> HostResult<RunEnd> {
        self.decisions().deny(run_id, delivery, by)?;
        self.continue_if_unblocked(run_id, then)
    }

    /// A new payload for a pending approval: new hash, new card; the old one is superseded.
    pub fn edit(&self, run_id: &str, delivery: &str, payload: &Value) -> HostResult<String> {
        self.edit_as(run_id, delivery, payload, None)
    }

    /// Edit, journaling who replaced the payload (§17.1.1).
    pub fn edit_by(
        &self,
        run_id: &str,
        delivery: &str,
        payload: &Value,
        by: &Principal,
    ) -> HostResult<String> {
        self.edit_as(run_id, delivery, payload, Some(by))
    }

    fn edit_as(
        &self,
        run_id: &str,
        delivery: &str,
        payload: &Value,
        by: Option<&Principal>,
    ) -> HostResult<String> {
        let run = self.decisions().waiting(run_id)?;
        let view = self.view(run_id)?;
        let item = view
            .items
            .get(delivery)
            .filter(|i| i.awaiting)
            .ok_or_else(|| {
                HostError::NotWaiting(format!(
                    "run {run_id} has no open approval for `{delivery}`; see `vouch approvals`"
                ))
            })?;
        let d = view
            .manifest
            .as_ref()
            .and_then(|m| m.delivery(delivery))
            .cloned()
            // An item awaiting approval is in the manifest by construction.
            .ok_or_else(|| {
                HostError::Internal(format!(
                    "run {run_id} awaits approval for `{delivery}`, which its manifest lacks"
                ))
            })?;
        if !payload.is_object() {
            return Err(HostError::BadInput(
                "the payload must be a JSON object".into(),
            ));
        }
        // The person's payload takes the kind's shape too (schemas.rs).
        let payload = &crate::schemas::check_payload(&d, payload).map_err(HostError::BadInput)?;
        let hash = payload_hash(payload)
            .map_err(|e| HostError::BadInput(format!("the payload cannot be hashed: {e}")))?;
        if item.card_hash.as_deref() == Some(hash.as_str()) {
            return Ok(hash);
        }
        let old = item.card_hash.as_deref().map(|old| (old, by));
        let facts = Gate::of(self).facts(&d);
        self.proposals()
            .request_approval(&run, &d, payload, &hash, old, facts)?;
        Ok(hash)
    }

    pub fn answer(&self, run_id: &str, text: &str) -> HostResult<RunEnd> {
        self.answer_as(run_id, text, Then::Drive, None)
    }

    /// Answer, journaling who answered (§17.1.1).
    pub fn answer_by(&self, run_id: &str, text: &str, by: &Principal) -> HostResult<RunEnd> {
        self.answer_as(run_id, text, Then::Drive, Some(by))
    }

    pub(super) fn answer_as(
        &self,
        run_id: &str,
        text: &str,
        then: Then,
        by: Option<&Principal>,
    ) -> HostResult<RunEnd> {
        let room = self.decisions();
        room.answer(run_id, text, by)?;
        self.repreflight_clarified(run_id)?;
        room.resumed(run_id, "answer", None)?;
        self.continue_if_unblocked(run_id, then)
    }

    /// After the one question is answered, items that were waiting on it are pre-flighted
    /// again with the question spent (contract §5.3.1): low confidence now drafts.
    pub(super) fn repreflight_clarified(&self, run_id: &str) -> HostResult<()> {
        let run = self.record(run_id)?;
        let view = self.view(run_id)?;
        if let Some(m) = view.manifest.clone() {
            for d in &m.deliveries {
                if view.items.get(&d.id).and_then(|i| i.posture) == Some(Posture::Clarify) {
                    self.preflight().item(&run, &m, d)?;
                }
            }
        }
        Ok(())
    }

    /// §9.4: a person's cancel denies every item not yet attempted or decided (each reads
    /// "Withdrawn at your request"); items with an outcome of their own keep it, and the
    /// outcome follows §9.3 — `withdrawn` when nothing remains. Never a failure by itself.
    pub fn cancel(&self, run_id: &str) -> HostResult<vouch_core::Outcome> {
        let run = self.record(run_id)?;
        if run.state == RunState::Ended {
            return Err(HostError::NotWaiting(format!(
                "run {run_id} has already ended; nothing to cancel (see `vouch receipt {run_id}`)"
            )));
        }
        // A run another live process is driving is that process's to end.
        self.lease(run_id)?;
        self.cancel_owned(run_id)
    }

    /// Drive the run on after a decision, unless it must wait (other cards open, or it goes
    /// on at the board's next claimant).
    pub(super) fn continue_if_unblocked(&self, run_id: &str, then: Then) -> HostResult<RunEnd> {
        match self.decisions().go_on(run_id, then)? {
            Some(waits) => Ok(waits),
            None => self.drive(run_id),
        }
    }
}

impl Decisions<'_> {
    /// Decisions apply only to a run that is waiting for the person.
    pub(super) fn waiting(&self, run_id: &str) -> HostResult<RunRecord> {
        let run = self.runs.record(run_id)?;
        match run.state {
            RunState::Suspended => Ok(run),
            RunState::Ended => Err(HostError::NotWaiting(format!(
                "run {run_id} has already ended; there is nothing to decide (see `vouch receipt {run_id}`)"
            ))),
            _ => Err(HostError::NotWaiting(format!(
                "run {run_id} is not waiting for a decision (it is {}); see `vouch approvals`",
                run.state.as_str()
            ))),
        }
    }

    /// Record an approval of exactly the card's payload (§7).
    fn approve(
        &self,
        run_id: &str,
        delivery: &str,
        hash: &str,
        by: Option<&Principal>,
    ) -> HostResult<()> {
        self.waiting(run_id)?;
        let hash = &self.cards.resolve_hash(run_id, delivery, hash)?;
        self.runs.lease(run_id)?;
        self.cards
            .decide(run_id, delivery, hash, Decision::Approve)?;
        // From here the run is ours and running: a crash leaves it interrupted, and the
        // continuation carries the approval over (it is never lost).
        self.runs.set_state(run_id, RunState::Running)?;
        self.journal.append_for(
            run_id,
            delivery,
            j::ApprovalGranted {
                payload_hash: hash.to_string(),
                from_card: false,
                carried_from: None,
                by: by.cloned(),
            },
        )?;
        self.resumed(run_id, "approval", Some(delivery))?;
        self.journal
            .say(&format!("✓ approved {delivery} of run {run_id}"));
        Ok(())
    }

    /// Record a denial of the open card of `delivery` (§7).
    fn deny(&self, run_id: &str, delivery: &str, by: Option<&Principal>) -> HostResult<()> {
        self.waiting(run_id)?;
        let cards = self.cards.of_run(run_id)?;
        let Some(card) = cards
            .iter()
            .find(|c| c.state == CardState::Open && c.delivery.as_deref() == Some(delivery))
        else {
            return Err(HostError::NotWaiting(format!(
                "run {run_id} has no open approval for `{delivery}`; see `vouch approvals`"
            )));
        };
        // As for an approval: the run is ours before the decision commits, and running once it
        // has, so a crash in between leaves an orphan that start-up finishes with the denied
        // card as its instruction (§7.1), never a suspended run with nothing left to decide.
        self.runs.lease(run_id)?;
        self.cards
            .decide(run_id, delivery, &card.payload_hash, Decision::Deny)?;
        self.runs.set_state(run_id, RunState::Running)?;
        self.journal.append_for(
            run_id,
            delivery,
            j::ApprovalDenied {
                payload_hash: card.payload_hash.clone(),
                by: by.cloned(),
            },
        )?;
        self.resumed(run_id, "denial", Some(delivery))
    }

    /// Record the answer to the run's one question (§5.3).
    fn answer(&self, run_id: &str, text: &str, by: Option<&Principal>) -> HostResult<()> {
        self.waiting(run_id)?;
        // As for an approval: the run is leased before the answer commits and marked running
        // right after, so a crash anywhere before the run goes on leaves a run whose owner is
        // gone — reconciled at start-up — never a suspended run with nothing to wake it.
        self.runs.lease(run_id)?;
        self.cards.answer(run_id, text)?;
        self.runs.set_state(run_id, RunState::Running)?;
        self.journal.append(
            run_id,
            j::ClarifyAnswered {
                answer: text.to_string(),
                by: by.cloned(),
            },
        )
    }

    /// The run goes on after the person's decision `by`.
    fn resumed(&self, run_id: &str, by: &str, delivery: Option<&str>) -> HostResult<()> {
        self.journal.append(
            run_id,
            j::Resumed {
                by: by.into(),
                delivery: delivery.map(String::from),
                parent: None,
                start_turn: None,
            },
        )
    }

    /// Whether the run goes on here now (`None`), or waits, unowned: for other decisions
    /// still open, or for the board's next claimant (`Then::Park`).
    fn go_on(&self, run_id: &str, then: Then) -> HostResult<Option<RunEnd>> {
        if self.cards.any_open(run_id)? {
            // The decision is journaled; the run waits, unowned, for the others (a decision
            // applies only to a suspended run, §9.2.4).
            self.runs.park(run_id)?;
            return Ok(Some(RunEnd::Suspended {
                reason: "other decisions are still open".into(),
            }));
        }
        if then == Then::Park {
            // A task attempt's run goes on wherever the board's next claimant is (§13.3):
            // the decision is durable in the journal, the run waits unowned for that worker.
            self.runs.park(run_id)?;
            return Ok(Some(RunEnd::Suspended {
                reason: "decided; the task's next claimant continues this run".into(),
            }));
        }
        Ok(None)
    }
}
