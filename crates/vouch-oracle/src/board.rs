//! Task runs on the board (contract §13): the task's states and attempts as the contract
//! prescribes them, read independently of the core's state machines, and each attempt's run
//! evaluated by the run simulation. Pure: no I/O, no clock (time is the scenario's).
//!
//! The report's top-level run fields describe the last attempt that ran; `deliveries.result`
//! is the implied `result` item of that run (§13.4.2); `task` and `judge` are the board's
//! records.

use crate::sim::{Carry, RunDetail, Sim};
use indexmap::IndexMap;
use serde_json::{json, Value};
use vouch_core::board::{AttemptState, TaskState};
use vouch_core::{DeliveryStatus, Posture};
use vouch_scenario::{
    AfterCondition, AttemptReport, BoardStep, CancelAt, Citation, DeliveryReport, Does, Fault, Gap,
    JudgePlan, OfferAgain, PrerequisiteEnd, Reads, Scenario, ScenarioReport, TaskPlan, TaskReport,
    Turn, TurnedAway, WorkerStep,
};

/// The id of the implied delivery of a task run (§13.1).
pub const RESULT_ID: &str = "result";
/// Aborts after which an abort fails the task (§13.3.1).
pub const ABORTS_MAX: u32 = 20;

/// Output schemas of the built-in types (§13.5.1).
pub fn builtin_output_schema(kind: &str) -> Option<Value> {
    match kind {
        "freeform" => Some(json!({
            "type": "object",
            "required": ["summary"],
            "properties": {
                "summary": {"type": "string", "minLength": 1},
                "artifacts": {"type": "array", "items": {"type": "string"}}
            }
        })),
        "judge" => Some(json!({
            "type": "object",
            "required": ["passed", "scores"],
            "properties": {
                "passed": {"type": "boolean"},
                "scores": {"type": "object", "additionalProperties": {"type": "number"}},
                "notes": {"type": "string"}
            }
        })),
        _ => None,
    }
}

/// §13.5: the content id of some bytes, `sha256:` and 64 lowercase hex digits.
fn content_id(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    format!("sha256:{}", hex::encode(sha2::Sha256::digest(bytes)))
}

/// Why a result the schema accepts is still malformed by the host's rules, as the rule's name:
/// an `artifacts` entry that is not the content id of a stored artifact (§13.5), or a judge's
/// `scores` that do not score exactly its criteria (§13.5.1).
fn broken_rule(
    result: &Value,
    stored: &[String],
    criteria: Option<&[String]>,
) -> Option<&'static str> {
    if let Some(list) = result.get("artifacts") {
        let all_stored = list.as_array().is_some_and(|l| {
            l.iter()
                .all(|a| a.as_str().is_some_and(|c| stored.iter().any(|s| s == c)))
        });
        if !all_stored {
            return Some("submit.artifact_not_stored");
        }
    }
    if let Some(criteria) = criteria {
        let scores = result.get("scores").and_then(Value::as_object);
        let exact = scores.is_some_and(|m| {
            m.len()
                == criteria
                    .iter()
                    .collect::<std::collections::BTreeSet<_>>()
                    .len()
                && criteria.iter().all(|c| m.contains_key(c))
        });
        if !exact {
            return Some("judge.scores_not_criteria");
        }
    }
    None
}

fn valid(schema: &Value, v: &Value) -> bool {
    jsonschema::validator_for(schema)
        .map(|val| val.is_valid(v))
        .unwrap_or(false)
}

/// One task as the board holds it.
#[derive(Debug, Clone)]
struct Task {
    state: TaskState,
    attempts: Vec<AttemptReport>,
    aborts: u32,
    max_attempts: u32,
    accepted: Option<u32>,
    /// An identity that may not claim it (a judge's producer).
    excluded: Option<String>,
    deadline: Option<i64>,
    turned_away: Vec<TurnedAway>,
    offers: Vec<String>,
    /// The reads journaled in the runs its attempts name (§13.7.3), when they are reported.
    reads: Option<Reads>,
}

impl Task {
    fn new(max_attempts: u32, waiting: bool, deadline: Option<i64>) -> Self {
        Task {
            state: if waiting {
                TaskState::Waiting
            } else {
                TaskState::Queued
            },
            attempts: vec![],
            aborts: 0,
            max_attempts,
            accepted: None,
            excluded: None,
            deadline,
            turned_away: vec![],
            offers: vec![],
            reads: None,
        }
    }

    fn is_final(&self) -> bool {
        matches!(
            self.state,
            TaskState::Completed | TaskState::Failed | TaskState::Cancelled | TaskState::Expired
        )
    }

    /// Attempts that count against max attempts: aborts do not (§13.3.1).
    fn counted(&self) -> u32 {
        self.attempts.len() as u32 - self.aborts
    }

    fn live(&mut self) -> Option<&mut AttemptReport> {
        self.attempts.last_mut().filter(|a| {
            matches!(
                a.state,
                AttemptState::Claimed | AttemptState::Running | AttemptState::Suspended
            )
        })
    }

    fn turn_away(&mut self, by: &str, call: &str) {
        self.turned_away.push(TurnedAway {
            by: by.into(),
            call: call.into(),
        });
    }

    fn report(&self) -> TaskReport {
        TaskReport {
            state: self.state,
            attempts: self.attempts.clone(),
            accepted_attempt: self.accepted,
            turned_away: self.turned_away.clone(),
            offers: self.offers.clone(),
            reads: self.reads,
        }
    }
}

/// How one attempt's run went.
struct RunOutcome {
    report: ScenarioReport,
    suspended: bool,
    /// The run's submit tool accepted a result (§13.4.1).
    accepted: bool,
    /// A submission reached the tool (after the manifest).
    submitted: bool,
    /// Successful reads of what the task was given (§13.7.3).
    reads: Reads,
}

impl RunOutcome {
    /// What the run's receipt says became of its `result` item (§13.4.2, issue 22 #7): the
    /// run's own side of the handoff, none while it waits.
    fn handoff(&self) -> Option<String> {
        let word = if self.suspended {
            return None;
        } else if self.report.ended_by == Some(vouch_core::EndedBy::Cancel) {
            "cancelled"
        } else if self.accepted {
            "accepted"
        } else if self.submitted {
            "refused"
        } else {
            "missing"
        };
        Some(word.into())
    }
}

pub struct BoardSim<'a> {
    s: &'a Scenario,
    plan: &'a TaskPlan,
    now: i64,
    rules: Vec<Citation>,
    gaps: Vec<Gap>,
    last_run: Option<ScenarioReport>,
    prerequisite: Option<PrerequisiteEnd>,
    /// The task's ledger scope and the providers' calls, across its attempts' runs (§8.1).
    carry: Carry,
    /// Each delivery's bound summed over the main task's runs (capped at 1 for an
    /// irreversible act at the end: I5 holds across a task's attempts).
    max_executions: IndexMap<String, u32>,
    /// The script of the run a suspended attempt waits in, and the carry it started from: a
    /// task cancel ends that run (§13.3).
    suspended_run: Option<(Vec<Turn>, Carry)>,
    /// The running attempt's task is cancelled while its model answers this turn (1-based).
    cancel_at_turn: Option<usize>,
}

/// How long a dead worker's clocks take to run out before the next sweep sees it: the
/// default lease and dispatch timeout (§13.3) and a second.
pub const LAPSE_MS: i64 = 301_000;
/// How long a hung worker heartbeats before the sweep after its running timeout: the default
/// running timeout (§13.3) and a second.
pub const RUNNING_LAPSE_MS: i64 = 7_201_000;

impl<'a> BoardSim<'a> {
    pub fn new(s: &'a Scenario, plan: &'a TaskPlan) -> Self {
        BoardSim {
            s,
            plan,
            now: 0,
            rules: vec![],
            gaps: vec![],
            last_run: None,
            prerequisite: None,
            carry: Carry::default(),
            max_executions: IndexMap::new(),
            suspended_run: None,
            cancel_at_turn: None,
        }
    }

    fn cite(&mut self, rule: &str, section: &str) {
        if !self.rules.iter().any(|c| c.rule == rule) {
            self.rules.push(Citation {
                rule: rule.into(),
                section: section.into(),
            });
        }
    }

    fn output_schema(&self) -> Value {
        self.plan
            .output_schema
            .clone()
            .or_else(|| builtin_output_schema(&self.plan.kind))
            .unwrap_or(Value::Null)
    }

    pub fn run(mut self) -> ScenarioReport {
        let p = self.plan;
        self.cite("task.autonomous", "§13.1");
        if jsonschema::validator_for(&self.output_schema()).is_err() {
            self.gaps.push(Gap {
                question: format!(
                    "the output schema of type `{}` is not a usable JSON Schema: what does a submission to it get?",
                    p.kind
                ),
            });
        }
        let mut task = Task::new(p.max_attempts, p.after.is_some(), p.deadline_ms);
        if !p.input_artifacts.is_empty() {
            self.cite("offer.input_artifacts_pinned", "§13.1.3");
        }
        if !p.input_artifacts.is_empty() || p.profile.is_some() {
            task.reads = Some(Reads::default());
        }
        if p.idempotency_key.is_some() {
            task.offers.push("created".into());
        }
        if p.after.is_some() {
            self.cite("condition.waiting", "§13.2");
        }
        for ev in p.events() {
            match ev {
                BoardStep::Worker(w) => self.worker(&mut task, &w),
                BoardStep::Cancel => self.cancel(&mut task, "owner"),
                BoardStep::Wait(ms) => {
                    self.now += ms;
                    self.sweep(&mut task);
                }
                BoardStep::Prerequisite(end) => {
                    self.prerequisite = Some(end);
                    self.sweep(&mut task);
                }
                BoardStep::Offer(ids) => {
                    // Each id must name a stored artifact, else nothing is offered (§13.1.3).
                    let stored = self.stored();
                    let known = ids.iter().all(|c| stored.contains(c));
                    if known {
                        self.cite("offer.input_artifacts_pinned", "§13.1.3");
                    } else {
                        self.cite("offer.input_artifact_unknown", "§13.1.3");
                    }
                    task.offers
                        .push(if known { "created" } else { "refused" }.into());
                }
                BoardStep::OfferAgain(again) => {
                    self.cite("idempotency.key", "§13.2");
                    task.offers.push(
                        match again {
                            OfferAgain::Same => "existing",
                            OfferAgain::Different => "refused",
                        }
                        .into(),
                    );
                }
            }
        }
        let judge = p.judge.as_ref().map(|j| self.judge(&task, j));
        let mut report = self.last_run.take().unwrap_or_else(|| ScenarioReport {
            id: self.s.id.clone(),
            ..Default::default()
        });
        report.id = self.s.id.clone();
        report.task = Some(task.report());
        report.judge = judge.flatten();
        let mut rules = report.rules.take().unwrap_or_default();
        for c in self.rules {
            if !rules.iter().any(|r| r.rule == c.rule) {
                rules.push(c);
            }
        }
        report.rules = Some(rules);
        for g in self.gaps {
            if !report.gaps.contains(&g) {
                report.gaps.push(g);
            }
        }
        if report.state.is_none() {
            // No attempt ran: nothing was declared, delivered or announced by a run.
            report.claims = Some(vec![]);
        }
        let mut max = std::mem::take(&mut self.max_executions);
        for id in &self.carry.irreversible {
            // Once per ledger key (§8.1): a later attempt's same act is the earlier one.
            let prefix = format!("{id}\u{0}");
            let keys = self
                .carry
                .ledger
                .keys()
                .filter(|k| k.starts_with(&prefix))
                .count() as u32;
            if let Some(n) = max.get_mut(id) {
                *n = (*n).min(keys.max(1));
            }
        }
        if report.deliveries.contains_key(RESULT_ID) {
            max.insert(RESULT_ID.into(), 1);
        }
        report.max_executions = Some(max);
        report
    }

    /// Time out attempts whose clocks ran out, expire passed deadlines, promote waiting
    /// tasks whose condition holds — in that order, as one sweep (§13.3.1, §13.2).
    fn sweep(&mut self, task: &mut Task) {
        let prerequisite = self.prerequisite;
        if matches!(task.state, TaskState::Waiting | TaskState::Queued)
            && task.deadline.is_some_and(|d| self.now >= d)
        {
            self.cite("board.deadline_expired", "§13.3");
            task.state = TaskState::Expired;
            return;
        }
        if task.state == TaskState::Waiting {
            let holds = match (self.plan.after, prerequisite) {
                (_, None) => false,
                (Some(AfterCondition::TaskAccepted), Some(end)) => {
                    end == PrerequisiteEnd::Completed
                }
                (Some(AfterCondition::TaskEnded), Some(_)) => true,
                (None, Some(_)) => true,
            };
            if holds {
                self.cite("condition.promoted", "§13.2");
                task.state = TaskState::Queued;
            } else {
                self.cite("condition.still_waiting", "§13.2");
            }
        }
    }

    /// The owner's cancel: it wins over any live attempt; a final task refuses it.
    fn cancel(&mut self, task: &mut Task, by: &str) {
        if task.is_final() {
            self.cite("board.final_absorbing", "§13.3");
            task.turn_away(by, "cancel");
            return;
        }
        self.cite("board.cancel", "§13.3");
        task.state = TaskState::Cancelled;
        let mut was_suspended = false;
        if let Some(a) = task.live() {
            was_suspended = a.state == AttemptState::Suspended;
            a.state = AttemptState::Cancelled;
        }
        if let (true, Some((script, carry))) = (was_suspended, self.suspended_run.take()) {
            // The run the attempt waited in ends `cancel` (§9.4): the same run, with the
            // person's cancel as the decision it waited for; its `result` item fails.
            self.cite("board.cancel_ends_suspended_run", "§13.3");
            let mut sub = self.s.clone();
            sub.script = script;
            sub.faults = vec![];
            sub.task = None;
            sub.expect = None;
            sub.decisions = vec![vouch_scenario::Decision::Cancel];
            let (mut report, _) = Sim::new(&sub).with_carry(carry).run_detailed();
            report.handoff = Some("cancelled".into());
            self.keep_run(report, Some(DeliveryStatus::Failed));
        }
    }

    /// A worker claims by id; `None` when nothing is claimable for it (§13.2).
    fn claim(&mut self, task: &mut Task, worker: &str) -> Option<u32> {
        let past_deadline = task.deadline.is_some_and(|d| self.now >= d);
        if task.excluded.as_deref() == Some(worker) {
            self.cite("judge.producer_excluded", "§13.4");
            task.turn_away(worker, "claim");
            return None;
        }
        if task.state != TaskState::Queued || past_deadline || task.counted() >= task.max_attempts {
            self.cite("board.nothing_claimable", "§13.2");
            task.turn_away(worker, "claim");
            return None;
        }
        self.cite("board.claim", "§13.2");
        let n = task.attempts.len() as u32 + 1;
        if n > 1 {
            self.cite("board.new_attempt", "§13.3");
        }
        task.attempts.push(AttemptReport {
            n,
            state: AttemptState::Claimed,
            claimant: worker.to_string(),
        });
        task.state = TaskState::Dispatched;
        Some(n)
    }

    fn heartbeat(&mut self, task: &mut Task) {
        self.cite("board.first_heartbeat", "§13.3");
        task.state = TaskState::Running;
        if let Some(a) = task.live() {
            a.state = AttemptState::Running;
        }
    }

    /// The live attempt ends without acceptance: retried while attempts remain (§13.3).
    fn end_unaccepted(&mut self, task: &mut Task, state: AttemptState, retry: bool) {
        if let Some(a) = task.live() {
            a.state = state;
        }
        if state == AttemptState::Aborted {
            task.aborts += 1;
            self.cite("board.abort_uncounted", "§13.3.1");
            task.state = if task.aborts <= ABORTS_MAX {
                TaskState::Queued
            } else {
                TaskState::Failed
            };
            return;
        }
        if !retry {
            self.cite("board.not_retryable", "§13.3");
            task.state = TaskState::Failed;
        } else if task.counted() < task.max_attempts {
            self.cite("board.retry", "§13.3");
            task.state = TaskState::Queued;
        } else {
            self.cite("board.attempts_exhausted", "§13.3");
            task.state = TaskState::Failed;
        }
    }

    fn worker(&mut self, task: &mut Task, w: &WorkerStep) {
        let Some(n) = self.claim(task, &w.worker) else {
            return;
        };
        match w.does {
            Does::Crash => {
                if w.before_heartbeat {
                    self.cite("board.dispatch_lapsed", "§13.3");
                } else {
                    self.heartbeat(task);
                    if let Some(event) = w.crash_after {
                        // It dies inside its run (or, if the run never reaches the event,
                        // right after the run, before it reports): nothing is reported, and
                        // the run is reconciled at the next start-up (§9.2).
                        self.cite("board.worker_died_in_run", "§13.3");
                        let script = w.script.clone().unwrap_or_else(|| self.s.script.clone());
                        let fault = Fault::CrashAfter {
                            event,
                            delivery: w.delivery.clone(),
                            nth: 1,
                        };
                        let before = self.carry.clone();
                        let out =
                            self.run_attempt(&script, self.plan.criteria.is_some(), vec![fault]);
                        if out.suspended {
                            // The run suspended durably before the worker died: the sweep sees
                            // it and suspends the attempt — no retry, no second card (§13.3).
                            self.cite("board.sweep_suspends_with_its_run", "§13.3");
                            self.now += LAPSE_MS;
                            task.state = TaskState::Running;
                            if let Some(a) = task.live() {
                                a.state = AttemptState::Suspended;
                            }
                            self.suspended_run = Some((script.clone(), before));
                            let status = if out.accepted {
                                DeliveryStatus::Awaiting
                            } else {
                                DeliveryStatus::NotAttempted
                            };
                            self.keep_run(out.report, Some(status));
                            return;
                        }
                        let status = if out.submitted {
                            DeliveryStatus::Failed
                        } else {
                            DeliveryStatus::NotAttempted
                        };
                        let handoff = out.handoff();
                        let mut report = out.report;
                        report.handoff = handoff;
                        self.keep_run(report, Some(status));
                    }
                    self.cite("board.lease_lapsed", "§13.3.1");
                }
                // The clock runs out; the next sweep ends the attempt (it counts).
                self.now += LAPSE_MS;
                self.end_unaccepted(task, AttemptState::TimedOut, true);
                self.sweep(task);
                if w.late_report {
                    self.cite("board.late_report_refused", "§13.3");
                    task.turn_away(&w.worker, "report");
                }
            }
            Does::Hang => {
                self.heartbeat(task);
                // Its heartbeats keep the lease; the running clock (§13.3) ends the attempt.
                self.cite("board.running_timeout", "§13.3");
                self.now += RUNNING_LAPSE_MS;
                self.end_unaccepted(task, AttemptState::TimedOut, true);
                self.sweep(task);
                if w.late_report {
                    self.cite("board.late_report_refused", "§13.3");
                    task.turn_away(&w.worker, "report");
                }
            }
            Does::Fail => {
                self.heartbeat(task);
                self.end_unaccepted(task, AttemptState::Failed, w.retryable);
            }
            Does::Abort => {
                self.heartbeat(task);
                self.end_unaccepted(task, AttemptState::Aborted, true);
            }
            Does::Run => {
                self.heartbeat(task);
                if let Some(who) = &w.impostor {
                    // Only the claimant on both rows may report (§13.3): refused, no change.
                    self.cite("board.only_the_claimant", "§13.3");
                    task.turn_away(who, "report");
                }
                if w.cancel == Some(CancelAt::BeforeRun) {
                    self.cancel(task, "owner");
                    self.cite("board.cancel_at_heartbeat", "§13.3.1");
                    return;
                }
                let script = w.script.clone().unwrap_or_else(|| self.s.script.clone());
                let before = self.carry.clone();
                self.cancel_at_turn = w.cancel_at_turn;
                let out = self.run_attempt(&script, self.plan.criteria.is_some(), vec![]);
                self.cancel_at_turn = None;
                if out.report.ended_by == Some(vouch_core::EndedBy::Cancel) {
                    // §9.4.1: the owner's cancel reached the run mid-way; it ended `cancel`,
                    // and the worker reports nothing (the board's cancel won).
                    self.cancel(task, "owner");
                    let handoff = out.handoff();
                    let mut report = out.report;
                    report.handoff = handoff;
                    self.keep_run(report, Some(DeliveryStatus::Failed));
                    return;
                }
                if out.suspended {
                    self.suspended_run = Some((script.clone(), before));
                }
                if w.cancel != Some(CancelAt::AfterRun) {
                    // The attempt names its run (its report, or its suspension, carries it):
                    // the run's reads count (§13.7.3). A refused report names none.
                    if let Some(r) = task.reads.as_mut() {
                        r.context += out.reads.context;
                        r.input += out.reads.input;
                    }
                }
                let handoff = out.handoff();
                let mut report = out.report;
                report.handoff = handoff;
                if let Some(ms) = w.stall_ms {
                    // The lease is the authority until a sweep acts (§13.3.1): a stall with no
                    // sweep in between changes nothing.
                    self.now += ms;
                    self.cite("board.lease_authority_until_sweep", "§13.3.1");
                }
                let status = if out.suspended {
                    self.cite("board.suspended", "§13.3.1");
                    task.state = TaskState::Running;
                    if let Some(a) = task.live() {
                        a.state = AttemptState::Suspended;
                    }
                    if out.accepted {
                        // The accepted submission is in the run's durable journal; whoever
                        // resumes the run reports it when the run ends (§13.4.2).
                        self.cite("result.kept_for_resumption", "§13.4.2");
                        Some(DeliveryStatus::Awaiting)
                    } else {
                        Some(DeliveryStatus::NotAttempted)
                    }
                } else if w.cancel == Some(CancelAt::AfterRun) {
                    self.cancel(task, "owner");
                    self.cite("board.late_report_refused", "§13.3");
                    task.turn_away(&w.worker, "report");
                    Some(if out.submitted {
                        DeliveryStatus::Failed
                    } else {
                        DeliveryStatus::NotAttempted
                    })
                } else if out.accepted {
                    self.cite("board.accepted", "§13.4");
                    task.state = TaskState::Completed;
                    task.accepted = Some(n);
                    if let Some(a) = task.live() {
                        a.state = AttemptState::Completed;
                    }
                    Some(DeliveryStatus::Verified)
                } else {
                    // §13.1: the host notices the missing handoff; §13.4.1: retryable.
                    self.cite("submit.missing_fails_attempt", "§13.4.1");
                    self.end_unaccepted(task, AttemptState::Failed, true);
                    Some(if out.submitted {
                        DeliveryStatus::Failed
                    } else {
                        DeliveryStatus::NotAttempted
                    })
                };
                self.keep_run(report, status);
            }
        }
    }

    /// The main task's latest run, with its `result` item (§13.4.2).
    fn keep_run(&mut self, mut report: ScenarioReport, status: Option<DeliveryStatus>) {
        self.cite("result.item", "§13.4.2");
        report.deliveries.insert(
            RESULT_ID.into(),
            DeliveryReport {
                posture: Some(Posture::Execute),
                status,
                executions: None,
            },
        );
        self.last_run = Some(report);
    }

    /// Evaluate one attempt's run and its submissions (§13.4.1).
    fn run_attempt(
        &mut self,
        script: &[Turn],
        needs_assessment: bool,
        faults: Vec<Fault>,
    ) -> RunOutcome {
        let schema = self.output_schema();
        let carry = std::mem::take(&mut self.carry);
        let (out, carry) = self.run_with(script, needs_assessment, &schema, None, carry, faults);
        self.carry = carry;
        for (id, n) in out.report.max_executions.iter().flatten() {
            *self.max_executions.entry(id.clone()).or_default() += n;
        }
        out
    }

    /// Content ids of the scenario's stored artifacts.
    fn stored(&self) -> Vec<String> {
        self.plan
            .artifacts
            .iter()
            .map(|a| content_id(a.as_bytes()))
            .collect()
    }

    /// The reads among a run's `tool` turns (§13.7.3): a call after the manifest of
    /// `read_input` with an id the task binds (§13.1.3), or of `read_context` with an id the
    /// profile places as a file (§13.1.2). Anything else the host refuses: not a read.
    fn reads_of(&mut self, script: &[Turn], tools: &[(usize, bool)]) -> Reads {
        let mut reads = Reads::default();
        let files: Vec<String> = match &self.plan.profile {
            Some(p) if p.context_placement == "file" => p.context.clone(),
            _ => vec![],
        };
        for (i, declared) in tools {
            let Some(Turn::Tool { name, args, .. }) = script.get(*i) else {
                continue;
            };
            let cid = args.get("cid").and_then(Value::as_str).unwrap_or_default();
            let (listed, section) = match name.as_str() {
                "read_input" => (&self.plan.input_artifacts, "§13.1.3"),
                "read_context" => (&files, "§13.1.2"),
                _ => continue,
            };
            if !*declared || !listed.iter().any(|c| c == cid) {
                self.cite("read.refused", section);
                continue;
            }
            self.cite("read.counted", "§13.7.3");
            if name == "read_input" {
                reads.input += 1;
            } else {
                reads.context += 1;
            }
        }
        reads
    }

    fn run_with(
        &mut self,
        script: &[Turn],
        needs_assessment: bool,
        schema: &Value,
        criteria: Option<&[String]>,
        carry: Carry,
        faults: Vec<Fault>,
    ) -> (RunOutcome, Carry) {
        let stored = self.stored();
        let mut sub = self.s.clone();
        sub.script = script.to_vec();
        sub.faults = faults;
        sub.task = None;
        sub.expect = None;
        let (report, detail): (ScenarioReport, RunDetail) = Sim::new(&sub)
            .with_carry(carry)
            .cancelled_at(self.cancel_at_turn.map(|n| n - 1))
            .run_detailed();
        for c in report.rules.iter().flatten() {
            self.cite(&c.rule, &c.section);
        }
        let mut invalid = 0u32;
        let mut accepted = false;
        let mut submitted = false;
        for (i, declared) in detail.submits {
            if !declared {
                continue;
            }
            submitted = true;
            let Some(Turn::Submit {
                result,
                self_assessment,
            }) = script.get(i)
            else {
                continue;
            };
            if accepted {
                self.cite("submit.not_replaced", "§13.4.1");
                continue;
            }
            if invalid > self.plan.repairs {
                self.cite("submit.repairs_exhausted", "§13.4.1");
                continue;
            }
            let assessed = self_assessment.as_ref().is_some_and(|v| !v.is_null());
            let schema_ok = valid(schema, result);
            let broken = schema_ok
                .then(|| broken_rule(result, &stored, criteria))
                .flatten();
            if let Some(rule) = broken {
                let section = if rule.starts_with("judge.") {
                    "§13.5.1"
                } else {
                    "§13.5"
                };
                self.cite(rule, section);
            }
            if schema_ok && broken.is_none() && (assessed || !needs_assessment) {
                self.cite("submit.accepted", "§13.4.1");
                accepted = true;
            } else {
                if needs_assessment && !assessed {
                    self.cite("submit.needs_self_assessment", "§13.4");
                }
                self.cite("submit.malformed_repairable", "§13.4.1");
                invalid += 1;
            }
        }
        let reads = self.reads_of(script, &detail.tools);
        let out = RunOutcome {
            suspended: report.state == Some(vouch_scenario::ReportState::Suspended),
            report,
            accepted,
            submitted,
            reads,
        };
        (out, detail.carry)
    }

    /// A judge task on the accepted output (§13.4): the producer may not claim it.
    fn judge(&mut self, main: &Task, j: &JudgePlan) -> Option<TaskReport> {
        let Some(n) = main.accepted else {
            self.cite("judge.no_accepted_output", "§13.4");
            return None;
        };
        let mut task = Task::new(1, false, None);
        task.excluded = main
            .attempts
            .iter()
            .find(|a| a.n == n)
            .map(|a| a.claimant.clone());
        let schema = builtin_output_schema("judge").unwrap_or(Value::Null);
        for w in &j.workers {
            let Some(jn) = self.claim(&mut task, w) else {
                continue;
            };
            self.heartbeat(&mut task);
            // The judge's runs have their own ledger scope; the providers are the same.
            let carry = Carry {
                calls: self.carry.calls.clone(),
                ..Default::default()
            };
            let (out, carry) =
                self.run_with(&j.script, false, &schema, Some(&j.criteria), carry, vec![]);
            self.carry.calls = carry.calls;
            if out.suspended {
                self.cite("board.suspended", "§13.3.1");
                task.state = TaskState::Running;
                if let Some(a) = task.live() {
                    a.state = AttemptState::Suspended;
                }
            } else if out.accepted {
                self.cite("judge.verdict", "§13.4");
                task.state = TaskState::Completed;
                task.accepted = Some(jn);
                if let Some(a) = task.live() {
                    a.state = AttemptState::Completed;
                }
            } else {
                self.end_unaccepted(&mut task, AttemptState::Failed, true);
            }
        }
        Some(task.report())
    }
}
