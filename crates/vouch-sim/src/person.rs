//! Runs and the person: interactive runs started, cards decided (the hash shown, a stale one,
//! denied, edited, answered, cancelled), ended runs resumed, schedule slots fired (again).

use crate::check::{self, Violation};
use crate::{story, Sim};
use serde_json::json;
use vouch_core::{EndedBy, RunState, TriggerKind};
use vouch_runtime::clock::Clock;
use vouch_runtime::host::ModelSpec;
use vouch_runtime::RunSpec;
use vouch_store::CardState;

/// Schedules of a world, and the slots each may fire.
const SCHEDULES: u64 = 3;
const SLOT_MS: i64 = 3_600_000;

impl Sim<'_> {
    pub(crate) fn start_run(&mut self) -> Result<(), Violation> {
        let id = self.new_id();
        let clarify = self.rng.chance(15);
        let model = story::script(&mut self.rng, &id, false, clarify);
        let spec = RunSpec {
            trigger: TriggerKind::Interactive,
            title: format!("simulated run {id}"),
            presence: None,
            quiet: self.rng.chance(20),
            model: ModelSpec::from(model.clone()),
            scope: None,
        };
        self.runs += 1;
        self.note(format!("start interactive run {id}: {}", model["turns"]));
        self.touched.insert(id.clone());
        let created = self.host.create(&id, &spec, None, None);
        if self.outcome("create", created)?.is_none() {
            return Ok(());
        }
        self.maybe_crash();
        let end = self.host.drive(&id);
        if let Some(end) = self.outcome("drive", end)? {
            self.note(format!("run {id}: {end:?}"));
        }
        Ok(())
    }

    /// The person decides one open card (or a stale decision on one).
    pub(crate) fn decide(&mut self) -> Result<(), Violation> {
        let mut cards = self.store.open_cards()?;
        cards.sort_by(|a, b| (a.created_ms, &a.run_id).cmp(&(b.created_ms, &b.run_id)));
        let Some(card) = self.rng.pick(&cards).cloned() else {
            return self.start_run();
        };
        let run = self.store.run(&card.run_id)?.ok_or_else(|| {
            check::violation(
                "runs are never lost",
                format!("card of run {} without its run", card.run_id),
            )
        })?;
        self.touched.insert(run.id.clone());
        if run.trigger == TriggerKind::Task {
            return self.decide_task_card(&run, &card);
        }
        let roll = self.rng.below(100);
        self.maybe_crash();
        let Some(d) = card.delivery.clone() else {
            // A question: answered, or the run cancelled.
            if roll < 85 {
                self.note(format!("answer the question of run {}", run.id));
                let r = self.host.answer(&run.id, "the week of the 7th");
                self.outcome("answer", r)?;
            } else {
                self.cancel(&run.id)?;
            }
            return Ok(());
        };
        match roll {
            0..=64 => self.approve(&run, &d, &card.payload_hash)?,
            65..=69 => {
                // A stale or mistyped hash: refused, nothing executes.
                self.note(format!(
                    "approve {} {d} with a hash it does not show",
                    run.id
                ));
                let r = self.host.approve(&run.id, &d, &"0".repeat(64));
                self.outcome("approve (wrong hash)", r)?;
            }
            70..=81 => {
                self.note(format!("deny {} {d}", run.id));
                let r = self.host.deny(&run.id, &d);
                self.outcome("deny", r)?;
            }
            82..=93 => self.edit(&run.id, &d)?,
            _ => self.cancel(&run.id)?,
        }
        Ok(())
    }

    pub(crate) fn approve(
        &mut self,
        run: &vouch_store::RunRecord,
        d: &str,
        hash: &str,
    ) -> Result<(), Violation> {
        self.note(format!("approve {} {d} {hash}", run.id));
        self.approvals
            .granted
            .insert((run.scope.clone(), d.to_string(), hash.to_string()));
        let r = self.host.approve(&run.id, d, hash);
        self.outcome("approve", r)?;
        if self.cfg.faults.dup && self.rng.chance(15) {
            // The answer to the person was lost; they approve again.
            self.note(format!("approve {} {d} again", run.id));
            let r = self.host.approve(&run.id, d, hash);
            self.outcome("approve (again)", r)?;
        }
        Ok(())
    }

    fn edit(&mut self, run_id: &str, d: &str) -> Result<(), Violation> {
        let view = vouch_runtime::view::RunView::from_journal(&self.store.journal(run_id)?);
        let Some(delivery) = view.manifest.as_ref().and_then(|m| m.delivery(d)).cloned() else {
            return Ok(());
        };
        let text = json!({"text": format!("{run_id} {d} edited at step {}", self.step)});
        let payload = vouch_runtime::schemas::expand_script_text(&delivery, &text);
        self.note(format!("edit {run_id} {d}"));
        let r = self.host.edit(run_id, d, &payload);
        self.outcome("edit", r)?;
        Ok(())
    }

    fn cancel(&mut self, run_id: &str) -> Result<(), Violation> {
        self.note(format!("cancel {run_id}"));
        let r = self.host.cancel(run_id);
        self.outcome("cancel", r)?;
        Ok(())
    }

    /// `vouch resume` of a run start-up reconciliation ended.
    pub(crate) fn resume(&mut self) -> Result<(), Violation> {
        let mut ended: Vec<String> = self
            .store
            .runs(usize::MAX >> 1)?
            .into_iter()
            .filter(|r| {
                // Runs start-up reconciliation ended, and (less often) any other ended run:
                // a continuation attempts again what is not settled, under the same keys.
                r.state == RunState::Ended
                    && r.trigger != TriggerKind::Task
                    && (r.ended_by == Some(EndedBy::Boot) || r.id.ends_with(['0', '4', '8']))
            })
            .map(|r| r.id)
            .collect();
        ended.sort();
        let Some(id) = self.rng.pick(&ended).cloned() else {
            return self.start_run();
        };
        self.note(format!("resume {id}"));
        self.touched.insert(id.clone());
        self.maybe_crash();
        let r = self.host.resume(&id);
        if let Some((child, end)) = self.outcome("resume", r)? {
            self.note(format!("run {id} continues as {child}: {end:?}"));
            self.touched.insert(child);
        }
        Ok(())
    }

    /// A scheduler fires a slot: a new one, or (the same slot seen twice) an old one again;
    /// sometimes the slot was missed and the run is its late catch-up.
    pub(crate) fn fire_slot(&mut self) -> Result<(), Violation> {
        let schedule = format!("sched-{}", self.rng.below(SCHEDULES));
        let again = self.cfg.faults.dup && self.rng.chance(25) && !self.slots.is_empty();
        let n = if again {
            self.rng.below(self.runs as u64 + 1)
        } else {
            self.runs as u64
        };
        let slot_ms = crate::START_MS + n as i64 * SLOT_MS;
        let slot = format!("{schedule}@{slot_ms}");
        let id = self.new_id();
        let model = story::script(&mut self.rng, &id, true, false);
        let spec = RunSpec {
            trigger: TriggerKind::Scheduled,
            title: format!("routine {schedule}"),
            presence: None,
            quiet: false,
            model: ModelSpec::from(model),
            scope: Some(slot.clone()),
        };
        if !again {
            self.runs += 1;
        }
        self.note(format!(
            "fire slot {slot} as {id}{}",
            if again { " (again)" } else { "" }
        ));
        if self.rng.chance(15) {
            let latest = self.rng.chance(50);
            let r = self.host.missed_slot(&schedule, slot_ms, &spec, latest);
            if let Some((missed, late)) = self.outcome("missed slot", r)? {
                let runs = self.slots.entry(slot).or_default();
                runs.push(missed.clone());
                runs.extend(late.clone());
                self.touched.insert(missed);
                self.touched.extend(late);
            }
            return Ok(());
        }
        let created = self
            .host
            .create(&id, &spec, None, Some((&schedule, slot_ms)));
        if self.outcome("create (slot)", created)?.is_none() {
            return Ok(());
        }
        self.slots.entry(slot).or_default().push(id.clone());
        self.touched.insert(id.clone());
        self.maybe_crash();
        let r = self.host.drive(&id);
        self.outcome("drive (slot)", r)?;
        Ok(())
    }

    /// Decide every open card and end every task until nothing waits, then reconcile.
    pub(crate) fn drain(&mut self) -> Result<(), Violation> {
        self.host.arm_crash(None);
        for _ in 0..crate::DRAIN_ROUNDS_MAX {
            self.drain_tasks()?;
            let mut cards = self.store.open_cards()?;
            cards.sort_by(|a, b| (a.created_ms, &a.run_id).cmp(&(b.created_ms, &b.run_id)));
            let open_runs = self.store.open_runs()?;
            if cards.is_empty() && open_runs.is_empty() {
                break;
            }
            self.step += 1;
            self.note(format!(
                "drain: {} open cards, {} open runs",
                cards.len(),
                open_runs.len()
            ));
            for card in cards.iter().filter(|c| c.state == CardState::Open) {
                self.touched.insert(card.run_id.clone());
                let Some(run) = self.store.run(&card.run_id)? else {
                    continue;
                };
                if run.state == RunState::Ended {
                    continue;
                }
                if run.trigger == TriggerKind::Task {
                    self.decide_task_card(&run, card)?;
                    continue;
                }
                let r = match &card.delivery {
                    Some(d) => self.host.deny(&run.id, d),
                    None => self.host.answer(&run.id, "no preference"),
                };
                self.outcome("drain decision", r)?;
            }
            // Whatever is left (a run whose process died): start-up reconciliation.
            self.clock.advance(self.host.limits().lease_ms + 1);
            let ended = self.host.boot();
            if let Some(ended) = self.outcome("drain boot", ended)? {
                self.touched.extend(ended);
            }
            self.check_step()?;
        }
        let now = self.clock.now_ms();
        self.board.sweep(now)?;
        self.stranded()
    }

    /// No run waits with nothing to wake it (found as S1, docs/reliability.md): at the end of a
    /// store, a suspended run has a card open. A run whose process died right after a decision
    /// was carried into it is reconciled at start-up (§9.2), never left suspended.
    fn stranded(&mut self) -> Result<(), Violation> {
        for run in self.store.open_runs()? {
            let cards = self.store.cards_for_run(&run.id)?;
            if run.state == RunState::Suspended && !cards.iter().any(|c| c.state == CardState::Open)
            {
                return Err(check::violation(
                    "no run waits with nothing to wake it",
                    format!("run {} is suspended with no card open", run.id),
                ));
            }
        }
        Ok(())
    }
}
