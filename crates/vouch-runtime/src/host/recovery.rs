//! Start-up and resumption: boot ends runs whose owner is gone (§9), resume starts a child
//! run from an ended one.

use super::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

/// Orphans start-up reconciles at once. Their terminal commits share the store's group
/// commits; more threads than this would only queue for the store's connections.
pub const BOOT_THREADS_MAX: usize = 8;
/// The duty start-up reconciliation holds across processes (`Store::with_duty`).
pub const DUTY_BOOT: &str = "boot";

impl Host {
    // ------------------------------------------------------------------ the reconciler (§9)

    /// Start-up: end every run without a terminal record whose owner is gone; suspended runs
    /// stay suspended. Then deliver pending notifications. Returns the runs it ended, in the
    /// order they were found (oldest first).
    pub fn boot(&self) -> HostResult<Vec<String>> {
        // One reconciliation pass at a time across every process on the store (§9.1): a pass
        // waits for another's to finish, then finds what that one left.
        let mut ended = Ok(vec![]);
        let had = self
            .store
            .with_duty(DUTY_BOOT, true, &mut || ended = self.boot_pass())?;
        if !had {
            self.say("  start-up reconciliation is busy in another process; it ends the orphans");
        }
        let ended = ended?;
        // One pass over the outbox for every run ended here, rather than one per run.
        self.dispatch()?;
        Ok(ended)
    }

    fn boot_pass(&self) -> HostResult<Vec<String>> {
        let now = self.now();
        // One read of the open runs, oldest first: those with no owner or a lapsed lease (what
        // `orphaned_runs` selects), and those whose lease is held by a process of this
        // machine that no longer exists.
        let mut candidates = self.store.open_runs()?;
        candidates.retain(|run| {
            // A suspended run waits unowned; one still held by a gone owner died while a
            // decision was being carried through (§7.1).
            (run.state != RunState::Suspended || run.owner.is_some())
                && (run.lease_lapsed(now) || self.owner_is_dead(run.owner.as_deref()))
                // Only runs whose owner is gone (§9.2.5): a lapsed lease held by a process of
                // this machine that is still alive (a slow provider or model call outlived the
                // lease) is that process's run, not an orphan.
                && !self.owner_is_alive(run.owner.as_deref())
        });
        self.boot_runs(&candidates)
    }

    /// Start-up's work on each orphan, up to [`BOOT_THREADS_MAX`] at once: each run is
    /// reconciled on its own, and their commits share the store's group commits. Returns
    /// the runs ended, in the order given; the first error (in that order) is returned once
    /// the runs already begun are done, and no further run is begun after an error.
    fn boot_runs(&self, runs: &[RunRecord]) -> HostResult<Vec<String>> {
        // A crash plan counts the points it passes: one run at a time, so that a plan stops
        // at the same point of the same run every time.
        let threads = if self.crash.is_some() {
            1
        } else {
            self.limits.boot_threads_max.min(runs.len())
        };
        if threads <= 1 {
            let mut ended = vec![];
            for run in runs {
                if self.boot_run(run)? {
                    ended.push(run.id.clone());
                }
            }
            return Ok(ended);
        }
        let next = AtomicUsize::new(0);
        let failed = AtomicBool::new(false);
        let results: Vec<std::sync::Mutex<Option<HostResult<bool>>>> =
            runs.iter().map(|_| std::sync::Mutex::new(None)).collect();
        let work = || loop {
            if failed.load(Ordering::SeqCst) {
                break;
            }
            let i = next.fetch_add(1, Ordering::SeqCst);
            let Some(run) = runs.get(i) else {
                break;
            };
            let r = self.boot_run(run);
            if r.is_err() {
                failed.store(true, Ordering::SeqCst);
            }
            *results[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
        };
        std::thread::scope(|scope| {
            for _ in 1..threads {
                // A thread the system refuses only narrows the pool: this one works too.
                let _ = std::thread::Builder::new()
                    .name("vouch-boot".into())
                    .spawn_scoped(scope, work);
            }
            work();
        });
        let mut ended = vec![];
        for (run, r) in runs.iter().zip(results) {
            match r.into_inner().unwrap_or_else(|p| p.into_inner()) {
                Some(Ok(true)) => ended.push(run.id.clone()),
                Some(Err(e)) => return Err(e),
                // Left suspended or to its owner, or not begun after an error.
                Some(Ok(false)) | None => {}
            }
        }
        Ok(ended)
    }

    /// One orphan at start-up: suspended again if it opened a card, otherwise its approvals
    /// carried out and the run reconciled (`ended_by: boot`). True when it was ended here.
    fn boot_run(&self, run: &RunRecord) -> HostResult<bool> {
        // Only the process whose take-over succeeded may touch the run (§9.1): a dead owner
        // of this host and boot may still hold an unexpired lease, which it cannot renew, and
        // is taken over in one write; any other owner only once its lease has lapsed. A race
        // lost to another process or host leaves the run to the winner and is no error.
        let gone = run.owner.as_deref().filter(|o| self.owner_is_dead(Some(o)));
        let leased = match gone {
            Some(holder) => self.take_over(&run.id, holder),
            None => self.lease(&run.id),
        };
        match leased {
            Ok(()) => {}
            Err(HostError::OwnedElsewhere(_)) => return Ok(false),
            Err(e) => return Err(e),
        }
        // Held now: its state is read again, since it may have been suspended since it was
        // listed (ended runs are never leased).
        let state = self
            .store
            .run_state(&run.id)?
            .ok_or_else(|| HostError::NotFound {
                what: "run",
                id: run.id.clone(),
            })?;
        let cards = self.store.cards_for_run(&run.id)?;
        if state == RunState::Suspended && waits_on(run, &cards, &self.view(&run.id)?) {
            self.store.release_run(&run.id, &self.owner)?;
            return Ok(false);
        } else if cards.iter().any(|c| c.state == CardState::Open) {
            // Interrupted right after opening a card: the card is still valid, so the run is
            // suspended, not ended (§9.2), and waits unowned like any suspended run.
            self.journal(
                &run.id,
                self.ev(j::Suspended {
                    reason: "a card is open".into(),
                    at_boot: true,
                }),
            )?;
            self.store.set_run_state(&run.id, RunState::Suspended)?;
            self.store.release_run(&run.id, &self.owner)?;
            return Ok(false);
        }
        // The journal is read once: what reconciling the run appends extends this view in
        // memory, as while a run is driven. A run this process drives is left to its drive.
        let view = self.view(&run.id)?;
        if !self.drives.try_open(&run.id, view) {
            return Ok(false);
        }
        let out = self
            .carry_out_approvals(run, &cards)
            .and_then(|()| self.end_with(&run.id, EndedBy::Boot, None));
        self.drives.close(&run.id);
        out.map(|_| true)
    }

    /// §9.2: an approval is a durable instruction, not a moment. A run interrupted after the
    /// person approved a card and before the approved payload was attempted keeps it: the
    /// payload is read back by its hash and executed through the ledger (I4, §8) before the
    /// run is reconciled. An attempt already begun (a ledger intent) is settled by §8.3 instead.
    /// `cards` are the run's cards as read at start-up.
    pub(super) fn carry_out_approvals(&self, run: &RunRecord, cards: &[Card]) -> HostResult<()> {
        // The card's decision is committed before the `approval_granted` event, which may
        // still have been buffered when the process died: the approved card is the durable
        // instruction, so the event is written from it.
        // A denial is carried through the same way: the denied card writes `approval_denied`,
        // so the run ends saying denied instead of waiting on a card nobody can decide.
        let mut view = self.view(&run.id)?;
        let mut granted = false;
        for c in cards {
            let Some(d) = c
                .delivery
                .as_deref()
                .filter(|_| decided_unjournaled(&view, c))
            else {
                continue;
            };
            let payload_hash = c.payload_hash.clone();
            if c.state == CardState::Denied {
                // Who decided is in the card's committed decision only, not its principal.
                self.journal(
                    &run.id,
                    self.evd(
                        d,
                        j::ApprovalDenied {
                            payload_hash,
                            by: None,
                        },
                    ),
                )?;
                continue;
            }
            self.journal(
                &run.id,
                self.evd(
                    d,
                    j::ApprovalGranted {
                        payload_hash,
                        from_card: true,
                        carried_from: None,
                        by: None,
                    },
                ),
            )?;
            granted = true;
        }
        if granted {
            view = self.view(&run.id)?;
        }
        for (id, item) in &view.items {
            if item.open_attempt.is_some() || item.status.is_some() {
                continue;
            }
            if let Some(hash) = &item.granted {
                self.say(&format!(
                    "  ↻ {id} of run {} was approved before the interruption; carrying it out",
                    run.id
                ));
                self.attempts().execute_approved(run, id, hash)?;
            }
        }
        Ok(())
    }

    /// §9.2: a continuation run with the same manifest and ledger scope; settled deliveries
    /// carry over as they are, the others are attempted again.
    pub fn resume(&self, parent_id: &str) -> HostResult<(String, RunEnd)> {
        let (parent, pview) = self.resumable(parent_id)?;
        let id = new_id(self.clock.as_ref());
        let (presence, quiet) = presence_of(&parent);
        let spec = RunSpec {
            trigger: parent.trigger,
            title: parent.title.clone(),
            presence: Some(presence),
            quiet,
            model: StoredSpec::read(&parent.spec).model,
            scope: Some(parent.scope.clone()),
        };
        // The continuation as the store holds it now: its row does not change until it is
        // driven, so it is not read back. Its drive is open from its first event.
        let created = self.create_open(&id, &spec, Some(&parent))?;
        let end = match self.set_up_continuation(&created, &pview) {
            Ok(None) => self.drive_born(created).0,
            Ok(Some(reason)) => {
                let end = self.suspend_drive(&id, reason);
                self.drives.close(&id);
                end
            }
            Err(e) => {
                self.drives.close(&id);
                Err(e)
            }
        }?;
        Ok((id, end))
    }

    /// What a continuation carries over from its parent and where its script goes on, then
    /// the drafts the parent left finished (§9.5). The reason it waits when one of them
    /// opened a card.
    fn set_up_continuation(
        &self,
        created: &RunRecord,
        pview: &RunView,
    ) -> HostResult<Option<String>> {
        let id = created.id.as_str();
        let parent_id = created.parent.as_deref().unwrap_or_default();
        self.carry_over(id, parent_id, pview)?;
        // The script continues from the first turn the parent did not complete.
        self.journal(
            id,
            self.ev(j::Resumed {
                by: "resume".into(),
                delivery: None,
                parent: Some(parent_id.to_string()),
                start_turn: Some((pview.turn_offset + pview.turns_complete) as u64),
            }),
        )?;
        // §9.5: drafts the parent left because their destination was not ready are finished
        // from their stored payload, never re-asked of the model.
        let mut suspend = None;
        if let Some(m) = &pview.manifest {
            for d in &m.deliveries {
                let item = pview.items.get(&d.id).cloned().unwrap_or_default();
                if item.status == Some(DeliveryStatus::Drafted) {
                    if let Some(reason) = self.route().finish_draft(created, m, d, &item)? {
                        suspend.get_or_insert(reason);
                    }
                }
            }
        }
        Ok(suspend)
    }

    /// The ended run `parent_id` and its view, if a continuation may go on from it: not a
    /// task's run, ended, not resumed before, with something left to do.
    fn resumable(&self, parent_id: &str) -> HostResult<(RunRecord, RunView)> {
        let parent = self.record(parent_id)?;
        if parent.trigger == TriggerKind::Task {
            // A task's run goes on through the board (§13.3), never beside it (issue 22 #6).
            let task = parent.scope.strip_prefix("task:").unwrap_or("ID");
            return Err(HostError::NotWaiting(format!(
                "run {parent_id} is an attempt of task {task}: the board goes on with it, not `vouch resume` — see `vouch task show {task}`; a run waiting for you continues after `vouch approve|deny|answer`, a failed attempt is retried while attempts remain, and a completed task goes on with `vouch task continue {task} --brief …`"
            )));
        }
        if parent.state != RunState::Ended {
            return Err(HostError::NotWaiting(format!(
                "run {parent_id} has not ended (it is {}); only an ended run can be resumed",
                parent.state.as_str()
            )));
        }
        if let Some(child) = self.store.continuation_of(parent_id)? {
            // One continuation per run: resuming twice would redo what the first one did.
            return Err(HostError::NotWaiting(format!(
                "run {parent_id} was already resumed as run {}; resume that one instead (`vouch resume {}`)",
                child.id, child.id
            )));
        }
        let pview = self.view(parent_id)?;
        let left = pview
            .manifest
            .as_ref()
            .map(|m| {
                m.deliveries
                    .iter()
                    .any(|d| !pview.final_status(&d.id).is_settled())
            })
            // Interrupted, or failed (the model never answered, §3.4), before it declared
            // anything: all of it is left. A cancelled run is the person's decision.
            .unwrap_or(parent.ended_by != Some(EndedBy::Cancel));
        if !left {
            return Err(HostError::NotWaiting(format!(
                "run {parent_id} has nothing left to do: every delivery is settled (see `vouch receipt {parent_id}`)"
            )));
        }
        Ok((parent, pview))
    }

    /// What a continuation carries over from its parent (§9.2): the manifest, each item's
    /// posture, approvals of payloads not yet settled, and settled statuses.
    fn carry_over(&self, id: &str, parent_id: &str, pview: &RunView) -> HostResult<()> {
        if let Some(m) = &pview.manifest {
            self.journal(
                id,
                self.ev(j::ManifestDeclared {
                    manifest: m.clone(),
                    amendment: false,
                    carried_from: Some(parent_id.to_string()),
                }),
            )?;
            for d in &m.deliveries {
                let item = pview.items.get(&d.id).cloned().unwrap_or_default();
                if let Some(p) = item.posture {
                    self.journal(
                        id,
                        self.evd(
                            &d.id,
                            j::Preflight {
                                carried_from: Some(parent_id.to_string()),
                                ..j::Preflight::of(
                                    item.capability,
                                    p,
                                    item.rule.clone(),
                                    item.irreversible,
                                    item.connect_step.clone(),
                                )
                            },
                        ),
                    )?;
                }
                if let Some(hash) = item
                    .approved
                    .as_ref()
                    .filter(|_| !item.status.map(|s| s.is_settled()).unwrap_or(false))
                {
                    // Approved in the parent and not settled there (never attempted, or definitely
                    // failed): the approval of this exact hash carries over (§7, §8.2).
                    self.journal(
                        id,
                        self.evd(
                            &d.id,
                            j::ApprovalGranted {
                                payload_hash: hash.clone(),
                                from_card: false,
                                carried_from: Some(parent_id.to_string()),
                                by: None,
                            },
                        ),
                    )?;
                }
                if item.status == Some(DeliveryStatus::Drafted) {
                    // Finished below, once the continuation is set up (§9.5).
                    continue;
                }
                if let Some(s) = item.status.filter(|s| s.is_settled()) {
                    self.journal(
                        id,
                        self.evd(
                            &d.id,
                            j::Evidence {
                                carried_from: Some(parent_id.to_string()),
                                ..j::Evidence::of(s, item.evidence.clone(), item.reason.clone())
                            },
                        ),
                    )?;
                }
            }
        }
        Ok(())
    }
}

/// A card the person decided (approved or denied) whose decision the journal does not hold
/// yet: the process died between the card's commit and its event (§7.1).
fn decided_unjournaled(view: &RunView, card: &Card) -> bool {
    let decided = matches!(card.state, CardState::Approved | CardState::Denied);
    let Some(item) = card.delivery.as_deref().and_then(|d| view.items.get(d)) else {
        return false;
    };
    decided
        && item.awaiting
        && item.granted.is_none()
        && item.status.is_none()
        && item.card_hash.as_deref() == Some(card.payload_hash.as_str())
}

/// Whether a suspended run whose owner died still waits for someone (§9.2): a card open (the
/// person), or — with every decision journaled — the board's next claimant (a task attempt's
/// run, §13.3) or the outside agent's next call (§17.2). Otherwise its owner died carrying a
/// decision through (a card decided but not journaled, or the person's answer or approval
/// journaled and the run not yet driven on): nothing would ever wake it, so start-up carries
/// it through and reconciles it like any orphan. A task run parked here whose attempt has
/// ended has no next claimant: the board's sweeper and the server's reconciliation end it
/// (`end_orphaned_task_runs`, §13.3), since this pass does not read the board.
fn waits_on(run: &RunRecord, cards: &[Card], view: &RunView) -> bool {
    if cards.iter().any(|c| c.state == CardState::Open) {
        return true;
    }
    let carrying = cards.iter().any(|c| decided_unjournaled(view, c));
    let parks = super::external::is_external(&run.spec)
        || vouch_store::spec::SpecHead::read(&run.spec)
            .told_task()
            .is_some();
    !carrying && parks
}
