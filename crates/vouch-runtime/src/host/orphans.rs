//! Task runs whose attempt ended (§13.3): a run that waits (suspended, or idle between a
//! remote worker's calls) while the attempt naming it has ended — failed, timed out,
//! cancelled, aborted — would wait for nothing, since the board continues only a suspended
//! attempt's run. The host ends each such run with its receipt, once: the lease is taken in
//! one conditional write, so of the processes and hosts that find it only one ends it.
//!
//! And the other way round: a suspended attempt whose run ended while it waited (start-up
//! recovery, or any host, ended it after the decision and before anyone resumed it) would
//! keep its task `running` for nothing. The host settles it as the run's end says.

use super::*;
use vouch_store::board::{AttemptRef, BoardStore, Report};

/// What the board's sweeper did to task runs and their attempts after a sweep (§13.3).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct Tended {
    /// Runs whose attempt had ended, ended here.
    pub runs_ended: Vec<String>,
    /// `(task, attempt n, run)`: suspended attempts whose run had ended, settled here.
    pub settled: Vec<(String, u32, String)>,
}

impl Host {
    /// The sweeper's work on task runs after a sweep it held: end the runs that wait for an
    /// attempt that ended, then settle the suspended attempts whose run ended (§13.3).
    pub fn tend_task_runs(&self, board: &dyn BoardStore) -> HostResult<Tended> {
        Ok(Tended {
            runs_ended: self.end_orphaned_task_runs(board)?,
            settled: self.settle_ended_suspensions(board)?,
        })
    }

    /// Every suspended attempt whose run has ended, ended as that run says — its accepted
    /// submission, or the failure its journal names (the same decision as a worker's report,
    /// [`Host::attempt_outcome`]) — with the run's receipt and cost. Answers those settled
    /// here; one another process settled first is left out.
    pub fn settle_ended_suspensions(
        &self,
        board: &dyn BoardStore,
    ) -> HostResult<Vec<(String, u32, String)>> {
        let mut settled = vec![];
        for (task_id, n, run) in
            board.suspended_with_ended_runs(vouch_store::board::SWEEP_BATCH_MAX)?
        {
            let Some(t) = board.task(&task_id)? else {
                continue;
            };
            let Some(a) = board.attempt_of_run(&run)? else {
                continue;
            };
            let o = self.attempt_outcome(&run, &t.kind, &t.spec.input, self.limits.repairs_max)?;
            let Some(kind) = o.report else {
                continue;
            };
            let report = Report {
                attempt: AttemptRef {
                    task_id: task_id.clone(),
                    n,
                    claimant: a.claimant,
                    epoch: a.epoch,
                },
                kind,
                run_id: Some(run.clone()),
                receipt: o.receipt,
                usage: o.usage,
                signature: None,
                now_ms: self.now(),
                stamp: None,
            };
            if let Some(done) = board.settle_suspended(&report)? {
                self.say(&format!(
                    "  ⏹ attempt {n} of task {task_id} waited on run {run}, which had ended: the attempt is {}, the task {}",
                    done.attempt.state, done.task.state
                ));
                settled.push((task_id, n, run));
            }
        }
        Ok(settled)
    }

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
