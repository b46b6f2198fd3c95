//! The board (contract §13) as workers use it: tasks offered, claimed by workers that race,
//! stall past their lease, die inside their run, report twice or out of order; each attempt
//! runs as a vouch run through a host of its own (a worker is its own process).

use crate::check::{self, Violation};
use crate::{host, story, Sim};
use serde_json::json;
use std::sync::Arc;
use vouch_core::board as core_board;
use vouch_runtime::clock::Clock;
use vouch_runtime::host::{AttemptJob, TaskDecision, TaskTypes, TaskWork};
use vouch_runtime::HostError;
use vouch_store::board::{content_id, AttemptRef, ClaimRequest, NewTask, Report, TaskSpec};
use vouch_store::{Card, RunRecord, StoreError};

/// Workers of a world.
const WORKERS: u64 = 3;

/// A task of the simulation and the reports its workers still hold (delivered later).
pub(crate) struct TaskSim {
    pub id: String,
    pending: Vec<Report>,
}

impl Sim<'_> {
    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    pub(crate) fn task_step(&mut self) -> Result<(), Violation> {
        let live: Vec<usize> = (0..self.tasks.len())
            .filter(|i| {
                let t = &self.tasks[*i];
                !t.pending.is_empty()
                    || self
                        .board
                        .task(&t.id)
                        .ok()
                        .flatten()
                        .is_some_and(|t| !t.state.is_final())
            })
            .collect();
        if live.is_empty() || self.rng.chance(25) {
            return self.offer();
        }
        let i = live[self.rng.below(live.len() as u64) as usize];
        if !self.tasks[i].pending.is_empty() && self.rng.chance(50) {
            // A report held back arrives now, after whatever happened since.
            let r = self.tasks[i].pending.remove(0);
            self.note(format!(
                "a held-back report of {} attempt {} arrives",
                r.attempt.task_id, r.attempt.n
            ));
            return self.send(&r);
        }
        if self.rng.chance(5) {
            let id = self.tasks[i].id.clone();
            self.note(format!("the owner cancels task {id}"));
            let r = self.host.cancel_task(self.board.as_ref(), &id);
            if let Some((_, Some(run))) = self.outcome("cancel task", r)? {
                self.touched.insert(run);
            }
            return Ok(());
        }
        let id = self.tasks[i].id.clone();
        self.work(i, &id)
    }

    fn offer(&mut self) -> Result<(), Violation> {
        let id = format!("task-{}", self.new_id());
        let now = self.now();
        let spec = TaskSpec {
            brief: format!("simulated task {id}"),
            input: json!({"brief": format!("simulated task {id}")}),
            correlation: String::new(),
            criteria: None,
            context: vec![],
            input_artifacts: vec![],
            references: vec![],
            lease_ms: core_board::DEFAULT_LEASE_MS,
            heartbeat_ms: core_board::DEFAULT_HEARTBEAT_MS,
            dispatch_timeout_ms: core_board::DEFAULT_DISPATCH_TIMEOUT_MS,
            running_timeout_ms: core_board::DEFAULT_RUNNING_TIMEOUT_MS,
        };
        let request = json!({"type": "freeform", "spec": spec});
        let t = NewTask {
            id: id.clone(),
            kind: "freeform".into(),
            owner: "person".into(),
            max_attempts: 1 + self.rng.below(3) as u32,
            deadline_ms: None,
            profiles: vec![],
            tags: vec![],
            excluded_claimant: None,
            condition: None,
            idempotency_key: None,
            request_id: content_id(&request)?,
            spec,
            created_ms: now,
        };
        self.runs += 1;
        self.note(format!("offer {id} ({} attempts)", t.max_attempts));
        self.board.offer(&t)?;
        self.tasks.push(TaskSim {
            id,
            pending: vec![],
        });
        Ok(())
    }

    fn claim(
        &mut self,
        task: &str,
        worker: &str,
    ) -> Result<Option<vouch_store::board::Claim>, Violation> {
        let req = ClaimRequest {
            claimant: worker.to_string(),
            profile: "default".into(),
            model: Some("script".into()),
            policy_fingerprint: "sha256:sim".into(),
            types: vec![],
            tags: vec![],
            task_id: Some(task.to_string()),
            signature: None,
            nonce: None,
            policy: json!({}),
            now_ms: self.now(),
            run_id: None,
        };
        Ok(self.board.claim(&req).conflict_is_none()?.flatten())
    }

    /// A worker claims the task and works on it (or dies, or stalls).
    fn work(&mut self, i: usize, id: &str) -> Result<(), Violation> {
        let worker = format!("w{}", self.rng.below(WORKERS));
        let Some(c) = self.claim(id, &worker)? else {
            self.note(format!("{worker} is turned away from {id}"));
            return Ok(());
        };
        let at = AttemptRef {
            task_id: id.to_string(),
            n: c.attempt.n,
            claimant: worker.clone(),
            epoch: c.attempt.epoch,
        };
        self.note(format!(
            "{worker} claims {id} attempt {} (epoch {}{})",
            at.n,
            at.epoch,
            if c.resumption { ", a resumption" } else { "" }
        ));
        if self.cfg.faults.race && self.rng.chance(20) {
            let rival = format!("w{}", WORKERS + self.rng.below(WORKERS));
            if let Some(c2) = self.claim(id, &rival)? {
                return Err(check::violation(
                    "one live attempt per task",
                    format!(
                        "{rival} claimed {id} attempt {} while {worker} holds attempt {}",
                        c2.attempt.n, at.n
                    ),
                ));
            }
        }
        let beat = self.board.heartbeat(&at, self.now()).conflict_is_none()?;
        if beat.is_none_or(|b| b.cancelled) {
            self.note(format!("{worker}: the heartbeat says stop"));
            return Ok(());
        }
        if (self.cfg.faults.lease || self.cfg.faults.race) && self.rng.chance(10) {
            // The worker stalls past its lease: the board times it out; its late report must
            // be refused.
            self.clock.advance(core_board::DEFAULT_LEASE_MS + 1_000);
            let swept = self.board.sweep(self.now())?;
            self.note(format!("{worker} stalls past its lease; sweep: {swept:?}"));
        }
        self.run_attempt(i, &worker, &at, &c)
    }

    fn run_attempt(
        &mut self,
        i: usize,
        worker: &str,
        at: &AttemptRef,
        c: &vouch_store::board::Claim,
    ) -> Result<(), Violation> {
        let script = story::task_script(&mut self.rng, &at.task_id);
        let job = AttemptJob {
            task_id: at.task_id.clone(),
            attempt: at.n,
            kind: "freeform".into(),
            brief: c.task.spec.brief.clone(),
            input: c.task.spec.input.clone(),
            criteria: None,
            model: script,
            repairs_max: 1,
            profile: None,
            lease: Some(at.clone()),
        };
        let wh = host(
            &self.clock,
            &self.world,
            self.dir.path(),
            self.store.clone(),
            self.boots,
        )
        .with_owner(format!("worker-{worker}"));
        let work = Arc::new(TaskWork::new(wh.work().clone()));
        // The crash `maybe_crash` arms is the worker's: the sim's own host keeps its plan.
        let kept = self.host.arm_crash(None);
        self.maybe_crash();
        let armed = self.host.arm_crash(kept);
        let wh = wh.with_work(work.clone()).with_crash(armed);
        let types = TaskTypes::builtin();
        let out = match (&c.attempt.run_id, c.resumption) {
            (Some(run), true) => wh.resume_task_attempt(&work, &types, &job, run),
            _ => wh.run_task_attempt(&work, &types, &job),
        };
        drop(wh);
        let out = match out {
            Ok(o) => o,
            Err(HostError::Crashed(point)) => {
                // The worker's process died: its lease lapses, a sweep and a start-up see to it.
                self.crashes += 1;
                self.note(format!("{worker} dies after {point} inside {}", at.task_id));
                for r in self.store.open_runs()? {
                    self.touched.insert(r.id);
                }
                return Ok(());
            }
            Err(e) => {
                self.outcome("task attempt", Err::<(), _>(e))?;
                return Ok(());
            }
        };
        self.touched.insert(out.run_id.clone());
        let Some(kind) = out.report else {
            self.note(format!(
                "{worker}: run {} waits for the person; the attempt suspends",
                out.run_id
            ));
            self.board
                .suspend(at, &out.run_id, self.now())
                .conflict_is_none()?;
            return Ok(());
        };
        let report = Report {
            attempt: at.clone(),
            kind,
            run_id: Some(out.run_id.clone()),
            receipt: out.receipt,
            usage: out.usage,
            signature: None,
            stamp: None,
            now_ms: self.now(),
        };
        if self.cfg.faults.reorder && self.rng.chance(25) {
            self.note(format!("{worker}'s report of {} is held back", at.task_id));
            self.tasks[i].pending.push(report);
            return Ok(());
        }
        self.send(&report)?;
        if self.cfg.faults.dup && self.rng.chance(20) {
            self.send(&report)?;
        }
        Ok(())
    }

    /// Deliver a report. The board must refuse one whose attempt had already ended.
    fn send(&mut self, r: &Report) -> Result<(), Violation> {
        let before = self
            .board
            .attempts(&r.attempt.task_id)?
            .into_iter()
            .find(|a| a.n == r.attempt.n);
        let ended = before.as_ref().is_some_and(|a| a.state.is_final());
        let r = Report {
            now_ms: self.now(),
            ..r.clone()
        };
        let took = self.board.report(&r).conflict_is_none()?;
        self.note(format!(
            "report of {} attempt {} (epoch {}): {}",
            r.attempt.task_id,
            r.attempt.n,
            r.attempt.epoch,
            if took.is_some() { "taken" } else { "refused" }
        ));
        if took.is_some() && ended {
            return Err(check::violation(
                "no report after its attempt ended",
                format!(
                    "task {} attempt {} was {} and the board took a report for it",
                    r.attempt.task_id,
                    r.attempt.n,
                    before.map(|a| a.state.as_str()).unwrap_or("gone")
                ),
            ));
        }
        Ok(())
    }

    /// The person decides on a run that waits inside a task attempt.
    pub(crate) fn decide_task_card(
        &mut self,
        run: &RunRecord,
        card: &Card,
    ) -> Result<(), Violation> {
        let decision = match &card.delivery {
            None => TaskDecision::Answer {
                text: "the week of the 7th".into(),
            },
            Some(d) if self.rng.chance(70) => {
                self.approvals.granted.insert((
                    run.scope.clone(),
                    d.clone(),
                    card.payload_hash.clone(),
                ));
                TaskDecision::Approve {
                    delivery: d.clone(),
                    hash: card.payload_hash.clone(),
                }
            }
            Some(d) => TaskDecision::Deny {
                delivery: d.clone(),
            },
        };
        self.note(format!("decide task run {}: {decision:?}", run.id));
        let r = self
            .host
            .decide_task_run(self.board.as_ref(), &run.id, &decision, None);
        if let Some(None) = self.outcome("decide task run", r)? {
            // Its attempt no longer waits (timed out, cancelled): decided as any run.
            self.note(format!(
                "run {} waits outside its attempt: decided as any run",
                run.id
            ));
            let r = match decision {
                TaskDecision::Answer { text } => self.host.answer(&run.id, &text),
                TaskDecision::Approve { delivery, hash } => {
                    self.host.approve(&run.id, &delivery, &hash)
                }
                TaskDecision::Deny { delivery } => self.host.deny(&run.id, &delivery),
            };
            self.outcome("decide task run as any run", r)?;
        }
        Ok(())
    }

    /// The owner ends every task still open.
    pub(crate) fn drain_tasks(&mut self) -> Result<(), Violation> {
        for i in 0..self.tasks.len() {
            let id = self.tasks[i].id.clone();
            for r in std::mem::take(&mut self.tasks[i].pending) {
                self.send(&r)?;
            }
            let open = self.board.task(&id)?.is_some_and(|t| !t.state.is_final());
            if !open {
                continue;
            }
            self.note(format!("drain: the owner cancels task {id}"));
            let r = self.host.cancel_task(self.board.as_ref(), &id);
            if let Some((_, Some(run))) = self.outcome("drain cancel task", r)? {
                self.touched.insert(run);
            }
        }
        Ok(())
    }
}

/// `Conflict` is the board refusing a stale or late call: no value, not an error.
trait ConflictIsNone<T> {
    fn conflict_is_none(self) -> Result<Option<T>, StoreError>;
}

impl<T> ConflictIsNone<T> for Result<T, StoreError> {
    fn conflict_is_none(self) -> Result<Option<T>, StoreError> {
        match self {
            Ok(v) => Ok(Some(v)),
            Err(StoreError::Conflict(_)) => Ok(None),
            Err(e) => Err(e),
        }
    }
}
