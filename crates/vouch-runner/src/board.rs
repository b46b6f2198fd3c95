//! Task runs through the real board (contract §13): the scenario's task is offered on the
//! embedded store's board, each worker event claims, heartbeats, runs the attempt as a vouch
//! run through the host (`run_task_attempt`, whose `submit` tool validates the result) and
//! reports what the host decided — or crashes, fails, aborts — with the store's own guarded
//! procedures and sweeps. Time is the scenario's manual clock: a dead worker's lease lapses
//! because the clock moves past it, and the next sweep sees it.
//!
//! The report's run fields describe the last run of the main task; `deliveries.result` is that
//! run's implied `result` item as the board saw it (§13.4.2).

use super::{report, Ctx};
use serde_json::{json, Value};
use std::path::Path;
use std::sync::Arc;
use vouch_artifacts::{ArtifactStore, LocalStore};
use vouch_core::board::{self as core_board, Condition};
use vouch_runtime::clock::Clock;
use vouch_runtime::crash::{CrashMode, CrashPlan};
use vouch_runtime::host::{AttemptJob, RuntimeProfile, TaskTypes, TaskWork};
use vouch_runtime::worker::{AttemptEnd, LocalBoard, WorkerConfig, WorkerLoop};
use vouch_runtime::{Host, HostError};
use vouch_scenario::{
    AfterCondition, BoardStep, CancelAt, Does, JudgePlan, OfferAgain, PrerequisiteEnd, Scenario,
    TaskPlan, WorkerStep,
};
use vouch_store::board::{
    content_id, AttemptRef, BoardStore, Claim, ClaimRequest, NewTask, Offered, Report, ReportKind,
    TaskSpec, Usage,
};
use vouch_store::StoreError;
use vouch_store_sqlite::SqliteStore;

const MAIN: &str = "task-main";
const PREREQUISITE: &str = "task-prerequisite";
const JUDGE: &str = "task-judge";

struct Board {
    store: Arc<SqliteStore>,
    /// The home's artifact store: the scenario's artifacts, where results' artifacts must be.
    artifacts: Arc<dyn ArtifactStore>,
    types: TaskTypes,
    plan: TaskPlan,
    script: Value,
    prompt: String,
    turned_away: Vec<Value>,
    judge_turned_away: Vec<Value>,
    offers: Vec<String>,
    /// The last run of the main task and its result item's status.
    last_run: Option<(String, &'static str)>,
    /// The running attempt's task is cancelled while its model answers this turn (1-based).
    cancel_at_turn: Option<usize>,
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

fn conflict<T>(r: Result<T, StoreError>) -> Result<Option<T>, String> {
    match r {
        Ok(v) => Ok(Some(v)),
        Err(StoreError::Conflict(_)) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// Run a task scenario in `dir` (empty) and return its report.
pub fn run_task_scenario(s: &Scenario, plan: &TaskPlan, dir: &Path) -> Result<Value, String> {
    plan.check()?;
    let mut ctx = Ctx::new(s, dir);
    let store = Arc::new(SqliteStore::open(&dir.join("vouch.db")).map_err(err)?);
    let types = if let Some(schema) = &plan.output_schema {
        let types_dir = dir.join("types");
        std::fs::create_dir_all(&types_dir).map_err(err)?;
        let file = types_dir.join(format!("{}.json", plan.kind));
        let body = json!({"name": plan.kind, "output_schema": schema});
        std::fs::write(&file, body.to_string()).map_err(err)?;
        TaskTypes::with_dir(&types_dir)?
    } else {
        TaskTypes::builtin()
    };
    let prompt = if s.prompt.is_empty() {
        s.id.clone()
    } else {
        s.prompt.clone()
    };
    let artifacts: Arc<dyn ArtifactStore> = Arc::new(LocalStore::in_home(dir));
    for text in &plan.artifacts {
        artifacts.put(text.as_bytes()).map_err(err)?;
    }
    let mut b = Board {
        store,
        artifacts,
        types,
        script: serde_json::to_value(&s.script).map_err(err)?,
        prompt,
        plan: plan.clone(),
        turned_away: vec![],
        judge_turned_away: vec![],
        offers: vec![],
        last_run: None,
        cancel_at_turn: None,
    };
    if plan.after.is_some() {
        b.offer_plain(&ctx, PREREQUISITE)?;
    }
    let first = b.offer_main(&ctx, &b.prompt.clone())?;
    if plan.idempotency_key.is_some() {
        b.offers.push(first);
    }
    for ev in plan.events() {
        match ev {
            BoardStep::Worker(w) => b.worker(&mut ctx, &w)?,
            BoardStep::Cancel => {
                // The owner's cancel through the host: a run the attempt left waiting for a
                // person ends with it, its `result` item failed (§13.3).
                let host = ctx.host()?;
                match host.cancel_task(b.store.as_ref(), MAIN) {
                    Ok((_, Some(run))) => b.last_run = Some((run, "failed")),
                    Ok((_, None)) => {}
                    Err(HostError::Store(StoreError::Conflict(_))) => {
                        b.turned_away.push(json!({"by": "owner", "call": "cancel"}));
                    }
                    Err(e) => return Err(e.to_string()),
                }
            }
            BoardStep::Wait(ms) => {
                ctx.clock.advance(ms);
                b.store.sweep(ctx.clock.now_ms()).map_err(err)?;
            }
            BoardStep::Prerequisite(end) => {
                b.end_prerequisite(&ctx, end)?;
                b.store.sweep(ctx.clock.now_ms()).map_err(err)?;
            }
            BoardStep::Offer(ids) => {
                let answer = b.offer_with_inputs(&ctx, &ids)?;
                b.offers.push(answer);
            }
            BoardStep::OfferAgain(again) => {
                let brief = match again {
                    OfferAgain::Same => b.prompt.clone(),
                    OfferAgain::Different => format!("{} (changed)", b.prompt),
                };
                let answer = b.offer_main(&ctx, &brief)?;
                b.offers.push(answer);
            }
        }
    }
    let judge = match &plan.judge {
        Some(j) => b.judge(&mut ctx, j)?,
        None => None,
    };
    let task = b.task_report(MAIN, &b.turned_away, &b.offers)?;
    let mut out = match &b.last_run {
        Some((run_id, status)) => {
            let host = ctx.host()?;
            let mut r = report(s, &host, run_id, &ctx)?;
            if let Some(d) = r.get_mut("deliveries").and_then(Value::as_object_mut) {
                d.insert(
                    "result".into(),
                    json!({"posture": "execute", "status": status}),
                );
            }
            r
        }
        None => json!({
            "id": s.id,
            "state": null, "outcome": null, "ended_by": null, "deliveries": {},
            "needs_you": null, "significance": null, "attention": null, "notifications": null,
        }),
    };
    out["task"] = task;
    if let Some(j) = judge {
        out["judge"] = j;
    }
    Ok(out)
}

impl Board {
    fn spec(&self, brief: &str, input: Value, criteria: Option<Value>) -> TaskSpec {
        TaskSpec {
            context: vec![],
            input_artifacts: vec![],
            brief: brief.to_string(),
            input,
            correlation: String::new(),
            criteria,
            references: vec![],
            lease_ms: core_board::DEFAULT_LEASE_MS,
            heartbeat_ms: core_board::DEFAULT_HEARTBEAT_MS,
            dispatch_timeout_ms: core_board::DEFAULT_DISPATCH_TIMEOUT_MS,
            running_timeout_ms: core_board::DEFAULT_RUNNING_TIMEOUT_MS,
        }
    }

    fn new_task(&self, id: &str, kind: &str, spec: TaskSpec, now: i64) -> Result<NewTask, String> {
        let request = json!({"type": kind, "spec": spec});
        Ok(NewTask {
            id: id.to_string(),
            kind: kind.to_string(),
            owner: "person".into(),
            max_attempts: 1,
            deadline_ms: None,
            profiles: vec![],
            tags: vec![],
            excluded_claimant: None,
            condition: None,
            idempotency_key: None,
            request_id: content_id(&request).map_err(err)?,
            spec,
            created_ms: now,
        })
    }

    fn offer_plain(&self, ctx: &Ctx, id: &str) -> Result<(), String> {
        let now = ctx.clock.now_ms();
        let spec = self.spec(
            "the prerequisite",
            json!({"brief": "the prerequisite"}),
            None,
        );
        let t = self.new_task(id, "freeform", spec, now)?;
        self.store.offer(&t).map_err(err)?;
        Ok(())
    }

    /// Offer the main task; the answer (`created`, `existing`, `refused`).
    fn offer_main(&self, ctx: &Ctx, brief: &str) -> Result<String, String> {
        let p = &self.plan;
        let now = ctx.clock.now_ms();
        let input = p.input.clone().unwrap_or(json!({"brief": brief}));
        let mut spec = self.spec(brief, input, p.criteria.clone());
        spec.input_artifacts = p.input_artifacts.clone();
        // Bound and pinned as the offer binds them (§13.1.3).
        vouch_runtime::offer::pin_input_artifacts(
            Some(self.artifacts.as_ref()),
            &p.input_artifacts,
        )
        .map_err(err)?;
        let mut t = self.new_task(MAIN, &p.kind, spec, now)?;
        t.max_attempts = p.max_attempts;
        t.deadline_ms = p.deadline_ms.map(|d| now + d);
        t.idempotency_key = p.idempotency_key.clone();
        t.condition = p.after.map(|c| match c {
            AfterCondition::TaskAccepted => Condition::TaskAccepted(PREREQUISITE.into()),
            AfterCondition::TaskEnded => Condition::TaskEnded(PREREQUISITE.into()),
        });
        let request = json!({"type": p.kind, "spec": t.spec, "max_attempts": t.max_attempts,
            "deadline_ms": p.deadline_ms, "condition": t.condition});
        t.request_id = content_id(&request).map_err(err)?;
        // A repeated offer is a new request with a new id; the key decides.
        if !self.offers.is_empty() {
            t.id = format!("{MAIN}-{}", self.offers.len() + 1);
        }
        Ok(match conflict(self.store.offer(&t))? {
            Some(Offered::Created(_)) => "created",
            Some(Offered::Existing(_)) => "existing",
            None => "refused",
        }
        .into())
    }

    /// Another task offered through the offer's own checks (`vouch_runtime::offer`), binding
    /// `ids` as input artifacts: `created`, or `refused` when the offer refuses them.
    fn offer_with_inputs(&self, ctx: &Ctx, ids: &[String]) -> Result<String, String> {
        let req: vouch_runtime::offer::TaskOffer = serde_json::from_value(
            json!({"type": "freeform", "brief": "another task", "input_artifacts": ids}),
        )
        .map_err(err)?;
        let id = format!("{MAIN}-offer-{}", self.offers.len() + 1);
        match vouch_runtime::offer::offer(
            self.store.as_ref(),
            &self.types,
            Some(self.artifacts.as_ref()),
            &req,
            None,
            "person",
            id,
            ctx.clock.now_ms(),
        ) {
            Ok(_) => Ok("created".into()),
            Err(vouch_runtime::offer::OfferError::Field {
                field: "input_artifacts",
                ..
            }) => Ok("refused".into()),
            Err(e) => Err(e.to_string()),
        }
    }

    /// The workers' profile policy: the scenario's context policy (§13.1.2), else the
    /// default profile's.
    fn policy(&self) -> Value {
        match &self.plan.profile {
            Some(p) => json!({"context": p.context, "context_placement": p.context_placement}),
            None => json!({}),
        }
    }

    fn claim(&self, ctx: &Ctx, task: &str, worker: &str) -> Result<Option<Claim>, String> {
        // The profile's snapshot, so the worker loop's fingerprint check holds.
        let policy = self.policy();
        let req = ClaimRequest {
            claimant: worker.to_string(),
            profile: "default".into(),
            model: Some("script".into()),
            policy_fingerprint: content_id(&policy).map_err(err)?,
            types: vec![],
            tags: vec![],
            task_id: Some(task.to_string()),
            signature: None,
            nonce: None,
            policy,
            now_ms: ctx.clock.now_ms(),
            run_id: None,
        };
        self.store.claim(&req).map_err(err)
    }

    fn heartbeat(&self, ctx: &Ctx, at: &AttemptRef) -> Result<bool, String> {
        Ok(self
            .store
            .heartbeat(at, ctx.clock.now_ms())
            .map_err(err)?
            .cancelled)
    }

    fn report(
        &self,
        ctx: &Ctx,
        at: &AttemptRef,
        kind: ReportKind,
        run_id: Option<String>,
        receipt: Option<String>,
        usage: Usage,
    ) -> Result<bool, String> {
        let expected = match &kind {
            ReportKind::Accepted { result, .. } => Some(result.clone()),
            _ => None,
        };
        let r = Report {
            attempt: at.clone(),
            kind,
            run_id,
            receipt,
            usage,
            signature: None,
            stamp: None,
            now_ms: ctx.clock.now_ms(),
        };
        let Some(done) = conflict(self.store.report(&r))? else {
            return Ok(false);
        };
        // Acceptance is observed, not assumed: read the output back by its content id.
        if let (Some(id), Some(want)) = (&done.task.result_id, &expected) {
            let back = self.store.result(id).map_err(err)?;
            if back.as_ref() != Some(want) {
                return Err(format!("the board stored {id} but reads back {back:?}"));
            }
        }
        Ok(true)
    }

    /// A host of this worker: the scenario's providers, the board's `submit` tool.
    fn host(&self, ctx: &mut Ctx, worker: &str) -> Result<(Host, Arc<TaskWork>), String> {
        let host = ctx.host()?.with_owner(format!("worker-{worker}"));
        let work = Arc::new(
            TaskWork::new(host.work().clone())
                .with_artifacts(self.artifacts.clone())
                .with_board(self.store.clone()),
        );
        Ok((host.with_work(work.clone()), work))
    }

    fn worker(&mut self, ctx: &mut Ctx, w: &WorkerStep) -> Result<(), String> {
        let Some(claim) = self.claim(ctx, MAIN, &w.worker)? else {
            self.turned_away
                .push(json!({"by": w.worker, "call": "claim"}));
            return Ok(());
        };
        let at = attempt_ref(&claim);
        match w.does {
            Does::Crash => {
                let mut died_in_run = false;
                let lapse = if w.before_heartbeat {
                    core_board::DEFAULT_DISPATCH_TIMEOUT_MS
                } else {
                    self.heartbeat(ctx, &at)?;
                    if let Some(event) = w.crash_after {
                        let script = match &w.script {
                            Some(t) => serde_json::to_value(t).map_err(err)?,
                            None => self.script.clone(),
                        };
                        let plan = CrashPlan::new(
                            event.as_str(),
                            w.delivery.as_deref(),
                            1,
                            CrashMode::Simulate,
                        );
                        let last = self.run_dying(ctx, &at, &w.worker, script, plan)?;
                        self.last_run = Some(last);
                        died_in_run = true;
                    }
                    core_board::DEFAULT_LEASE_MS
                };
                // Nothing more is heard from the worker; the next sweep sees its clock out.
                let run_lease = vouch_runtime::Limits::default().lease_ms;
                ctx.clock.advance(lapse.max(run_lease) + 1_000);
                self.store.sweep(ctx.clock.now_ms()).map_err(err)?;
                if died_in_run {
                    // The next start-up reconciles the run the dead worker left (§9.2).
                    ctx.host()?.boot().map_err(err)?;
                }
                if w.late_report {
                    let kind = ReportKind::Accepted {
                        result: json!({"summary": "a late result"}),
                        self_assessment: Some(json!({"late": true})),
                        verdict: None,
                    };
                    if !self.report(ctx, &at, kind, None, None, Usage::default())? {
                        self.turned_away
                            .push(json!({"by": w.worker, "call": "report"}));
                    }
                }
            }
            Does::Hang => {
                // Alive and heartbeating, never finishing: the heartbeats keep the lease until
                // the running clock runs out; then a sweep times the attempt out.
                let interval = core_board::DEFAULT_HEARTBEAT_MS;
                let mut left = core_board::DEFAULT_RUNNING_TIMEOUT_MS + 1_000;
                while left > 0 {
                    let step = left.min(interval);
                    ctx.clock.advance(step);
                    left -= step;
                    let beat = conflict(self.store.heartbeat(&at, ctx.clock.now_ms()))?;
                    if beat.is_none() {
                        return Err(
                            "a live worker's heartbeat was refused before its running timeout"
                                .into(),
                        );
                    }
                }
                self.store.sweep(ctx.clock.now_ms()).map_err(err)?;
                if w.late_report {
                    let kind = ReportKind::Accepted {
                        result: json!({"summary": "a late result"}),
                        self_assessment: Some(json!({"late": true})),
                        verdict: None,
                    };
                    if !self.report(ctx, &at, kind, None, None, Usage::default())? {
                        self.turned_away
                            .push(json!({"by": w.worker, "call": "report"}));
                    }
                }
            }
            Does::Fail | Does::Abort => {
                self.heartbeat(ctx, &at)?;
                let kind = if w.does == Does::Abort {
                    ReportKind::Aborted {
                        reason: "the worker shut down".into(),
                    }
                } else {
                    ReportKind::Failed {
                        retryable: w.retryable,
                        reason: "the worker's environment failed".into(),
                        class: None,
                    }
                };
                if !self.report(ctx, &at, kind, None, None, Usage::default())? {
                    self.turned_away
                        .push(json!({"by": w.worker, "call": "report"}));
                }
            }
            Does::Run => {
                if self.heartbeat(ctx, &at)? {
                    return Err("the first heartbeat answered cancelled".into());
                }
                if let Some(who) = &w.impostor {
                    let forged = AttemptRef {
                        claimant: who.clone(),
                        ..at.clone()
                    };
                    let kind = ReportKind::Accepted {
                        result: json!({"summary": "not mine to report"}),
                        self_assessment: Some(json!({"forged": true})),
                        verdict: None,
                    };
                    if !self.report(ctx, &forged, kind, None, None, Usage::default())? {
                        self.turned_away.push(json!({"by": who, "call": "report"}));
                    }
                }
                if w.cancel == Some(CancelAt::BeforeRun) {
                    self.store.cancel(MAIN, ctx.clock.now_ms()).map_err(err)?;
                    // The worker hears of it at its next heartbeat and stops.
                    if !self.heartbeat(ctx, &at)? {
                        return Err("the heartbeat after the cancel did not say cancelled".into());
                    }
                    return Ok(());
                }
                let script = match &w.script {
                    Some(t) => serde_json::to_value(t).map_err(err)?,
                    None => self.script.clone(),
                };
                self.cancel_at_turn = w.cancel_at_turn;
                let ran = self.run_attempt(ctx, claim, &w.worker, script, w.cancel, w.stall_ms);
                self.cancel_at_turn = None;
                let (run_id, status) = ran?;
                self.last_run = Some((run_id, status));
            }
        }
        Ok(())
    }

    /// One attempt's run through the worker loop (`WorkerLoop::attempt`, as `vouch worker`
    /// runs it); the scenario's stall and after-run cancel happen at its seam before the
    /// report. Answers the run id and the status of its `result` item (§13.4.2).
    fn run_attempt(
        &mut self,
        ctx: &mut Ctx,
        claim: Claim,
        worker: &str,
        script: Value,
        cancel: Option<CancelAt>,
        stall_ms: Option<i64>,
    ) -> Result<(String, &'static str), String> {
        let task_id = claim.task.id.clone();
        let (mut host, work) = self.host(ctx, worker)?;
        if let Some(n) = self.cancel_at_turn {
            let models = Arc::new(crate::cancel::CancelWhileAnswering {
                inner: host.models().clone(),
                turn: n.saturating_sub(1),
                board: self.store.clone(),
                task_id: task_id.clone(),
                now_ms: ctx.clock.now_ms(),
            });
            host = host.with_models(models);
        }
        let host = Arc::new(host);
        let lp = self.worker_loop(ctx, host.clone(), work, worker, script, cancel, stall_ms);
        let end = lp.attempt(claim).map_err(err)?;
        let run_id = end
            .run()
            .map(String::from)
            .ok_or("the attempt ended without a run")?;
        let status = match &end {
            // §9.4.1: the run ended `cancel`; the worker reported nothing (the board's cancel
            // won), and the result item fails.
            AttemptEnd::Cancelled { .. } => "failed",
            // §13.4.2: an accepted submission waits in the run's journal for the resumption.
            AttemptEnd::Suspended { .. } => {
                if submission_accepted(&host, &run_id)? {
                    "awaiting"
                } else {
                    "not_attempted"
                }
            }
            AttemptEnd::Reported { accepted: true, .. } => "verified",
            AttemptEnd::Reported { .. } | AttemptEnd::Refused { .. } => {
                if submitted(&host, &run_id)? {
                    "failed"
                } else {
                    "not_attempted"
                }
            }
        };
        if let AttemptEnd::Refused { .. } = end {
            let list = if task_id == JUDGE {
                &mut self.judge_turned_away
            } else {
                &mut self.turned_away
            };
            list.push(json!({"by": worker, "call": "report"}));
        }
        Ok((run_id, status))
    }

    /// The worker loop of one scenario worker: the embedded board, unsigned (the scenario's
    /// board verifies nothing), on the manual clock, heartbeating only when told.
    #[allow(clippy::too_many_arguments)]
    fn worker_loop(
        &self,
        ctx: &Ctx,
        host: Arc<Host>,
        work: Arc<TaskWork>,
        worker: &str,
        script: Value,
        cancel: Option<CancelAt>,
        stall_ms: Option<i64>,
    ) -> WorkerLoop {
        let client = Arc::new(LocalBoard {
            board: self.store.clone(),
            host,
            work,
            types: Arc::new(self.types.clone()),
            signer: None,
        });
        let config = WorkerConfig {
            name: worker.to_string(),
            profile: "default".into(),
            types: vec![],
            tags: vec![],
            model: json!({"kind": "script", "turns": script}),
            repairs: self.plan.repairs,
            concurrency: 1,
            drain: false,
            attempt_delay_ms: 0,
            beat_while_running: false,
        };
        let mut lp = WorkerLoop::new(
            client,
            Arc::new(ctx.clock.clone()),
            config,
            {
                let policy = self.policy();
                Arc::new(move || RuntimeProfile::from_policy(policy.clone()))
            },
            Arc::new(|_| {}),
        );
        let (clock, store) = (ctx.clock.clone(), self.store.clone());
        lp.before_report = Some(Arc::new(move |at: &AttemptRef| {
            if let Some(ms) = stall_ms {
                // The worker stalls before reporting; no sweep runs in between.
                clock.advance(ms);
            }
            if cancel == Some(CancelAt::AfterRun) {
                // The owner cancels between the run and the report; the report is refused.
                let _ = store.cancel(&at.task_id, clock.now_ms());
            }
        }));
        lp
    }

    /// The worker runs the attempt and dies at `plan`'s crash point (or, if its run never
    /// reaches it, right after the run, before reporting). Answers the run and its `result`
    /// item's status: nothing was reported, so nothing was accepted.
    fn run_dying(
        &mut self,
        ctx: &mut Ctx,
        at: &AttemptRef,
        worker: &str,
        script: Value,
        plan: CrashPlan,
    ) -> Result<(String, &'static str), String> {
        let task = self
            .store
            .task(&at.task_id)
            .map_err(err)?
            .ok_or("the claimed task vanished")?;
        let (host, work) = self.host(ctx, worker)?;
        let host = host.with_crash(Some(plan));
        let job = AttemptJob {
            task_id: task.id.clone(),
            kind: task.kind.clone(),
            brief: task.spec.brief.clone(),
            input: task.spec.input.clone(),
            criteria: self.plan.criteria.clone(),
            model: json!({"kind": "script", "turns": script}),
            repairs_max: self.plan.repairs,
            attempt: at.n,
            profile: RuntimeProfile::from_policy(self.policy()).ok(),
            lease: Some(at.clone()),
        };
        let run_id = match host.run_task_attempt(&work, &self.types, &job) {
            Ok(o) => o.run_id,
            Err(HostError::Crashed(_)) => host
                .runs(1)
                .map_err(err)?
                .first()
                .map(|r| r.id.clone())
                .ok_or("the dead worker's run vanished")?,
            Err(e) => return Err(e.to_string()),
        };
        // Read what became durable, as the next process will (the dead one's buffer is gone).
        let fresh = ctx.host()?;
        let suspended = fresh
            .run_record(&run_id)
            .map_err(err)?
            .is_some_and(|r| r.state == vouch_core::RunState::Suspended);
        let status = if suspended {
            // The sweep suspends the attempt with its run (§13.3): a submission kept waits.
            if submission_accepted(&fresh, &run_id)? {
                "awaiting"
            } else {
                "not_attempted"
            }
        } else if submitted(&fresh, &run_id)? {
            "failed"
        } else {
            "not_attempted"
        };
        Ok((run_id, status))
    }

    fn end_prerequisite(&self, ctx: &Ctx, end: PrerequisiteEnd) -> Result<(), String> {
        if end == PrerequisiteEnd::Cancelled {
            self.store
                .cancel(PREREQUISITE, ctx.clock.now_ms())
                .map_err(err)?;
            return Ok(());
        }
        let at = self
            .claim(ctx, PREREQUISITE, "prerequisite-worker")?
            .map(|c| attempt_ref(&c))
            .ok_or("the prerequisite task could not be claimed")?;
        self.heartbeat(ctx, &at)?;
        let kind = if end == PrerequisiteEnd::Completed {
            ReportKind::Accepted {
                result: json!({"summary": "the prerequisite is done"}),
                self_assessment: None,
                verdict: None,
            }
        } else {
            ReportKind::Failed {
                retryable: false,
                reason: "the prerequisite failed".into(),
                class: None,
            }
        };
        if !self.report(ctx, &at, kind, None, None, Usage::default())? {
            return Err("the prerequisite's report was refused".into());
        }
        Ok(())
    }

    fn judge(&mut self, ctx: &mut Ctx, j: &JudgePlan) -> Result<Option<Value>, String> {
        let main = self.store.task(MAIN).map_err(err)?.ok_or("no main task")?;
        let Some(n) = main.accepted_attempt else {
            return Ok(None);
        };
        // The producer may not judge its own output (§13.4): the claimant of the accepted
        // attempt is excluded at claim.
        let producer = self
            .store
            .attempts(MAIN)
            .map_err(err)?
            .into_iter()
            .find(|a| a.n == n)
            .map(|a| a.claimant);
        let now = ctx.clock.now_ms();
        let input = json!({"target": MAIN, "criteria": j.criteria});
        let mut spec = self.spec("judge the accepted output", input, None);
        spec.references = vec![MAIN.into()];
        let mut t = self.new_task(JUDGE, "judge", spec, now)?;
        t.excluded_claimant = producer;
        self.store.offer(&t).map_err(err)?;
        let script = serde_json::to_value(&j.script).map_err(err)?;
        for w in &j.workers {
            let Some(claim) = self.claim(ctx, JUDGE, w)? else {
                self.judge_turned_away
                    .push(json!({"by": w, "call": "claim"}));
                continue;
            };
            let at = attempt_ref(&claim);
            if self.heartbeat(ctx, &at)? {
                return Err("the judge's first heartbeat answered cancelled".into());
            }
            self.run_attempt(ctx, claim, w, script.clone(), None, None)?;
        }
        Ok(Some(self.task_report(
            JUDGE,
            &self.judge_turned_away,
            &[],
        )?))
    }

    fn task_report(&self, id: &str, turned: &[Value], offers: &[String]) -> Result<Value, String> {
        let t = self.store.task(id).map_err(err)?.ok_or("no task")?;
        let attempts: Vec<Value> = self
            .store
            .attempts(id)
            .map_err(err)?
            .into_iter()
            .map(|a| json!({"n": a.n, "state": a.state, "claimant": a.claimant}))
            .collect();
        let mut v = json!({
            "state": t.state,
            "attempts": attempts,
            "accepted_attempt": t.accepted_attempt,
            "turned_away": turned,
        });
        if !offers.is_empty() {
            v["offers"] = json!(offers);
        }
        if id == MAIN && (!self.plan.input_artifacts.is_empty() || self.plan.profile.is_some()) {
            // The store's own count of the reads journaled in the task's attempts' runs.
            let q = vouch_store::board::MeasuresQuery {
                by: vouch_store::board::Cohort::All,
                since_ms: 0,
                friction_turns: 8,
                friction_failed_tools: 3,
                correlation: Some(MAIN.into()),
            };
            let m = self.store.measures(&q).map_err(err)?;
            let r = m.first().cloned().unwrap_or_default();
            v["reads"] =
                json!({"context": r.context_reads, "input": r.input_reads, "diary": r.diary_reads});
        }
        Ok(v)
    }
}

fn attempt_ref(c: &Claim) -> AttemptRef {
    AttemptRef {
        task_id: c.task.id.clone(),
        n: c.attempt.n,
        claimant: c.attempt.claimant.clone(),
        epoch: c.attempt.epoch,
    }
}

/// Did the run hand a result to its `submit` tool? A call rejected before the manifest
/// (§3.4) never reached the tool.
/// The run's `submit` tool took a result (the host's answer to the call was `ok`).
fn submission_accepted(host: &Host, run_id: &str) -> Result<bool, String> {
    Ok(host.events(run_id).map_err(err)?.iter().any(|e| {
        matches!(
            vouch_store::Event::parse(e.kind, &e.body),
            Ok(vouch_store::Event::ToolCalled(c)) if c.name == "submit" && c.ok
        )
    }))
}

fn submitted(host: &Host, run_id: &str) -> Result<bool, String> {
    use vouch_store::Event;
    let events: Vec<Event> = host
        .events(run_id)
        .map_err(err)?
        .iter()
        .filter_map(|e| Event::parse(e.kind, &e.body).ok())
        .collect();
    // A submit before the manifest is a rejected proposal (§3.4), not a submission.
    let rejected: Vec<&str> = events
        .iter()
        .filter_map(|e| match e {
            Event::ProposalRejected(r) if r.tool.as_deref() == Some("submit") => {
                Some(r.call_id.as_str())
            }
            _ => None,
        })
        .collect();
    Ok(events.iter().any(|e| {
        matches!(e, Event::ToolCalled(c)
            if c.name == "submit" && !rejected.contains(&c.call_id.as_str()))
    }))
}
