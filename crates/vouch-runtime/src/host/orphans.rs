//! Task runs whose attempt ended (§13.3): a run that waits (suspended, or idle between a
//! remote worker's calls) while the attempt naming it has ended — failed, timed out,
//! cancelled, aborted — would wait for nothing, since the board continues only a suspended
//! attempt's run. The host ends each such run with its receipt, once: the lease is taken in
//! one conditional write, so of the processes and hosts that find it only one ends it.

use super::*;
use vouch_store::board::BoardStore;

impl Host {
    /// End every open task run that no process holds and whose attempt has ended, each item
    /// not yet done saying "Not done: the attempt ended: …". Answers the runs ended here.
    pub fn end_orphaned_task_runs(&self, board: &dyn BoardStore) -> HostResult<Vec<String>> {
        let now = self.now();
        let mut ended = vec![];
        // The candidates in one indexed query, a batch a sweep; the rest at the next.
        for id in board.runs_of_ended_attempts(vouch_store::board::SWEEP_BATCH_MAX)? {
            let Some(run) = self.store.run(&id)? else {
                continue;
            };
            if run.trigger != TriggerKind::Task || run.state == RunState::Ended {
                continue;
            }
            let held = run.owner.is_some()
                && !run.lease_lapsed(now)
                && !self.owner_is_dead(run.owner.as_deref());
            if held {
                continue;
            }
            let Some(why) = attempt_ended(board, &run.id)? else {
                continue;
            };
            if self.end_orphan(&run.id, &why)? {
                ended.push(run.id);
            }
        }
        Ok(ended)
    }

    /// One orphan: taken over (a race lost is no error), read again, and ended. True when it
    /// was ended here.
    fn end_orphan(&self, run_id: &str, why: &str) -> HostResult<bool> {
        match self.lease(run_id) {
            Ok(()) => {}
            Err(HostError::OwnedElsewhere(_)) => return Ok(false),
            Err(e) => return Err(e),
        }
        if self.record(run_id)?.state == RunState::Ended {
            return Ok(false);
        }
        let view = self.view(run_id)?;
        if !self.drives.try_open(run_id, view) {
            return Ok(false);
        }
        self.say(&format!(
            "  ⏹ run {run_id} waited for nothing: {why}; ending it"
        ));
        // Said in the journal, so the receipt names why the run stopped.
        let out = self
            .journal(
                run_id,
                self.ev(j::LoopEnded {
                    cause: "attempt_ended".into(),
                    reason: why.to_string(),
                }),
            )
            .and_then(|_| {
                // Nobody asked for this end: the items it leaves say why, not "at your request".
                self.settle_unsettled_and_end(
                    run_id,
                    DeliveryStatus::NotAttempted,
                    why,
                    EndedBy::Loop,
                )
            });
        self.drives.close(run_id);
        out.map(|_| true)
    }
}

/// Why a task run waits for nothing: the attempt naming it has ended. `None` while that
/// attempt is live or suspended (its run is the one a resumption continues), or when no
/// attempt names the run yet (a local worker names its run when it reports).
pub(super) fn attempt_ended(board: &dyn BoardStore, run_id: &str) -> HostResult<Option<String>> {
    let Some(a) = board.attempt_of_run(run_id)? else {
        return Ok(None);
    };
    if !a.state.is_final() {
        return Ok(None);
    }
    Ok(Some(format!(
        "the attempt ended: attempt {} of task {} is {}",
        a.n, a.task_id, a.state
    )))
}
