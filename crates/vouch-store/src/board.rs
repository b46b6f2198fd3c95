//! The task board's storage interface (§13): records, the [`BoardStore`] trait, and the
//! board's write procedures, written once over a tiny transaction interface ([`BoardTx`]).
//!
//! Every decision comes from the core's pure [`step`](vouch_core::board::step); every write
//! is guarded by the state it was decided from (`WHERE state = old AND epoch = old`), so a
//! write whose premise changed underneath affects no row and is refused. A backend provides
//! the row access (SQL of its dialect), the transaction (a row lock on PostgreSQL, the single
//! writer on SQLite) and the claim, which is one conditional `UPDATE … RETURNING` of its own.

use crate::{StoreError, StoreResult};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use vouch_core::board::{
    apply, step, AttemptChange, AttemptEnd, AttemptState, BoardEvent, Condition, FailureClass,
    Refused, TaskSnapshot, TaskState, Transition,
};

/// Largest task input, result or report detail, in bytes of JSON.
pub const TASK_JSON_BYTES_MAX: usize = 1 << 20;
/// Tasks one listing returns at most.
pub const TASK_LIST_MAX: usize = 1000;
/// Tasks one sweep handles at most per kind of work (the next sweep takes the rest).
pub const SWEEP_BATCH_MAX: usize = 500;

/// What `offer` stores. Ids and times are the caller's (the store never reads a clock).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewTask {
    pub id: String,
    /// The task's type (`freeform`, `judge`, or a registered type).
    pub kind: String,
    pub owner: String,
    pub max_attempts: u32,
    pub deadline_ms: Option<i64>,
    /// Runtime profiles allowed to claim (empty: any).
    pub profiles: Vec<String>,
    pub tags: Vec<String>,
    /// An identity that may not claim this task (a judge's producer, §13.4).
    pub excluded_claimant: Option<String>,
    pub condition: Option<Condition>,
    pub idempotency_key: Option<String>,
    /// Content id of the create request's canonical JSON (compared under the same key).
    pub request_id: String,
    /// Everything else the task says (brief, input, criteria, correlation, clocks …).
    pub spec: TaskSpec,
    pub created_ms: i64,
}

/// The parts of a task no SQL condition reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskSpec {
    pub brief: String,
    pub input: Value,
    /// Pinned context (§13.1.2): content ids of stored UTF-8 texts the attempt's model is given
    /// with the task, in this order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub context: Vec<String>,
    /// Input artifacts (§13.1.3): content ids of stored artifacts the attempt's model reads
    /// through the `read_input` tool, in this order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_artifacts: Vec<String>,
    pub correlation: String,
    pub criteria: Option<Value>,
    /// Other tasks this one refers to (e.g. a judge's target).
    pub references: Vec<String>,
    pub lease_ms: i64,
    pub heartbeat_ms: i64,
    pub dispatch_timeout_ms: i64,
    pub running_timeout_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TaskRecord {
    pub id: String,
    pub kind: String,
    pub owner: String,
    pub state: TaskState,
    pub max_attempts: u32,
    /// Attempts made (numbers 1..=attempts) and how many of them were aborts.
    pub attempts: u32,
    pub aborts: u32,
    /// Lease epoch: grows with every claim (a resumption included).
    pub epoch: i64,
    pub claimant: Option<String>,
    pub lease_until_ms: Option<i64>,
    pub deadline_ms: Option<i64>,
    pub profiles: Vec<String>,
    pub tags: Vec<String>,
    pub excluded_claimant: Option<String>,
    pub condition: Option<Condition>,
    pub idempotency_key: Option<String>,
    pub request_id: String,
    pub spec: TaskSpec,
    pub created_ms: i64,
    /// When the task (first) became claimable: the window measures group by (§13.7).
    pub queued_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    pub accepted_attempt: Option<u32>,
    pub result_id: Option<String>,
    /// Queued to resume its suspended latest attempt (claim-next prefers these).
    pub resuming: bool,
    pub updated_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptRecord {
    pub task_id: String,
    pub n: u32,
    pub state: AttemptState,
    /// The identity holding (or last holding) the attempt's lease.
    pub claimant: String,
    pub epoch: i64,
    pub profile: String,
    pub model: Option<String>,
    /// SHA-256 of the runtime profile's canonical policy recorded at claim (§13.6).
    pub policy_fingerprint: String,
    pub claimed_ms: i64,
    /// First heartbeat.
    pub started_ms: Option<i64>,
    pub lease_until_ms: Option<i64>,
    /// No first heartbeat by then: timed out (cleared by the first heartbeat).
    pub dispatch_deadline_ms: Option<i64>,
    /// Total running time ends then (moved out while suspended: the clocks stop).
    pub running_deadline_ms: Option<i64>,
    /// Running time left while suspended.
    pub running_left_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    pub end_reason: Option<String>,
    pub retryable: Option<bool>,
    pub run_id: Option<String>,
    pub result_id: Option<String>,
    /// From the host's own journal of the attempt's run (§13.7), not from the worker's word.
    pub usage: Usage,
    /// Receipt, self-assessment, signatures, policy snapshot, failure detail.
    pub detail: Value,
}

/// Counts the host takes from an attempt's journal.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    pub turns: i64,
    pub tokens: i64,
    pub tool_calls: i64,
    pub failed_tool_calls: i64,
}

/// What an attempt's run cost, charged after the attempt ended without its report carrying it
/// (cancelled, timed out, aborted, or a report refused as late; §13.7.2). Kept apart from the
/// attempt's row, which never changes once ended, and written once.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptCost {
    pub task_id: String,
    pub n: u32,
    /// The attempt's run (a run of its task created while the attempt was live).
    pub run_id: String,
    /// From the host's own journal of that run.
    pub usage: Usage,
    pub at_ms: i64,
}

/// Shows charged costs on the attempts they belong to: an attempt without a run of its own
/// takes its charged run and usage, and `detail.charged` says when they were charged.
pub fn with_costs(mut attempts: Vec<AttemptRecord>, costs: &[AttemptCost]) -> Vec<AttemptRecord> {
    for a in attempts.iter_mut().filter(|a| a.run_id.is_none()) {
        if let Some(c) = costs.iter().find(|c| c.task_id == a.task_id && c.n == a.n) {
            a.run_id = Some(c.run_id.clone());
            a.usage = c.usage;
            if let Some(d) = a.detail.as_object_mut() {
                d.insert(
                    "charged".into(),
                    serde_json::json!({"at_ms": c.at_ms, "after_end": true}),
                );
            }
        }
    }
    attempts
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Offered {
    Created(TaskRecord),
    /// The same idempotency key with the same request: the task it created before.
    Existing(TaskRecord),
}

impl Offered {
    pub fn task(&self) -> &TaskRecord {
        match self {
            Offered::Created(t) | Offered::Existing(t) => t,
        }
    }
}

/// A worker asking for work. `task_id` set: claim-by-id; otherwise claim-next.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClaimRequest {
    pub claimant: String,
    pub profile: String,
    pub model: Option<String>,
    pub policy_fingerprint: String,
    /// Only these types (empty: any).
    pub types: Vec<String>,
    /// Only tasks carrying at least one of these tags (empty: any).
    pub tags: Vec<String>,
    pub task_id: Option<String>,
    /// Signature over the claim's canonical form (§13.6), stored with the attempt.
    pub signature: Option<String>,
    pub policy: Value,
    /// The claimant's clock: the claim's `at_ms`.
    pub now_ms: i64,
    /// The claim's fresh nonce (§13.6.3), part of what is signed.
    #[serde(default)]
    pub nonce: Option<String>,
    /// The run a new attempt runs as, opened by the host that takes the claim (§13.2: a
    /// claim over HTTP or MCP opens the attempt's run). Not part of the signed statement: the
    /// claimant signs before the host names the run. A resumption keeps its attempt's run.
    #[serde(default)]
    pub run_id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Claim {
    pub task: TaskRecord,
    pub attempt: AttemptRecord,
    /// The attempt was suspended and continues under a new epoch.
    pub resumption: bool,
}

/// Names a live attempt as its claimant sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AttemptRef {
    pub task_id: String,
    pub n: u32,
    pub claimant: String,
    pub epoch: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Heartbeat {
    /// The task was cancelled: stop working (the attempt is already `cancelled`).
    pub cancelled: bool,
    pub lease_until_ms: Option<i64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum ReportKind {
    /// A result the caller validated against the type's output schema.
    Accepted {
        result: Value,
        /// The producer's self-assessment against the criteria (advisory, kept apart).
        self_assessment: Option<Value>,
        /// For `judge` tasks: the verdict on the target task.
        verdict: Option<Box<Verdict>>,
    },
    Failed {
        retryable: bool,
        reason: String,
        /// Why, when the reporter knows (§13.3.2); it never decides the retry.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        class: Option<FailureClass>,
    },
    Aborted {
        reason: String,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Verdict {
    pub target: String,
    pub passed: bool,
    pub scores: Value,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Report {
    pub attempt: AttemptRef,
    pub kind: ReportKind,
    pub run_id: Option<String>,
    pub receipt: Option<String>,
    pub usage: Usage,
    pub signature: Option<String>,
    pub now_ms: i64,
    /// The reporter's clock and fresh nonce, part of what is signed (§13.6.3).
    #[serde(default)]
    pub stamp: Option<Stamp>,
}

/// When a signed worker statement was made, by the worker's clock, and its nonce: fresh per
/// statement, so no two statements are the same bytes and none is accepted twice (§13.6.3).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stamp {
    pub at_ms: i64,
    pub nonce: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Reported {
    pub task: TaskRecord,
    pub attempt: AttemptRecord,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    pub promoted: Vec<String>,
    pub expired: Vec<String>,
    /// (task, attempt number, which clock)
    pub timed_out: Vec<(String, u32, String)>,
    /// Suspended attempts whose run's decisions were all made, queued as resumptions (the
    /// decider stopped between recording the decision and queuing the task).
    #[serde(default)]
    pub resumed: Vec<String>,
    /// (task, attempt number, run): attempts whose worker died after their run suspended and
    /// before telling the board; the run's durable suspension suspends the attempt (no retry,
    /// no second card; §13.3).
    #[serde(default)]
    pub suspended: Vec<(String, u32, String)>,
}

/// The duty the board's sweeper holds across processes (`Store::with_duty`).
pub const DUTY_BOARD_SWEEP: &str = "board_sweep";

/// One sweep of `board`, fenced by `store` (the same database): at most one process of every
/// host on the store sweeps at a time (§13.3.1), so N hosts do the work once instead of N
/// times racing on the same guarded writes. `None` when another process holds the duty and
/// `wait` is false (or the wait ran out): that sweep does this work.
pub fn sweep_fenced(
    store: &dyn crate::Store,
    board: &dyn BoardStore,
    now_ms: i64,
    wait: bool,
) -> StoreResult<Option<SweepReport>> {
    let mut swept = None;
    let had = store.with_duty(DUTY_BOARD_SWEEP, wait, &mut || {
        swept = Some(board.sweep(now_ms));
    })?;
    if !had {
        return Ok(None);
    }
    swept.transpose()
}

/// The sweep's query for attempts whose clock ran out while a run of their task, created since
/// their claim and named by no attempt, is durably suspended (a worker died between its run's
/// suspension and telling the board): `(task id, attempt n, run id)`. `?1`/`$1` is now, `?2`/`$2`
/// the batch; both backends run it as written with their own placeholders.
pub const SUSPENDED_ORPHANS_SQL: &str = "SELECT a.task_id, a.n, r.id FROM task_attempts a \
     JOIN runs r ON r.scope = 'task:' || a.task_id AND r.trigger = 'task' AND r.state = 'suspended' \
     AND r.created_ms >= a.claimed_ms \
     WHERE a.state IN ('claimed', 'running') \
     AND (a.dispatch_deadline_ms <= ?1 OR a.lease_until_ms <= ?1 OR a.running_deadline_ms <= ?1) \
     AND NOT EXISTS (SELECT 1 FROM task_attempts b WHERE b.run_id = r.id) \
     ORDER BY a.task_id, r.created_ms DESC LIMIT ?2";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TaskFilter {
    pub state: Option<TaskState>,
    pub tag: Option<String>,
    /// Only the tasks of this thread (§13.1): its correlation is this, or it is the task of
    /// this id (a thread's first task, whose continuations name it as their correlation).
    #[serde(default)]
    pub correlation: Option<String>,
    pub limit: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cohort {
    All,
    Tag,
    Type,
    Claimant,
    Profile,
    Model,
}

impl Cohort {
    pub fn parse(s: &str) -> Option<Cohort> {
        Some(match s {
            "all" => Cohort::All,
            "tag" => Cohort::Tag,
            "type" => Cohort::Type,
            "claimant" => Cohort::Claimant,
            "profile" => Cohort::Profile,
            "model" => Cohort::Model,
            _ => return None,
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MeasuresQuery {
    pub by: Cohort,
    /// Tasks queued at or after this instant (the window, §13.7).
    pub since_ms: i64,
    pub friction_turns: i64,
    pub friction_failed_tools: i64,
    /// Only the tasks of this thread (as [`TaskFilter::correlation`]).
    #[serde(default)]
    pub correlation: Option<String>,
}

/// Raw counts per cohort; the rates are computed from them, never collapsed (§13.7).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MeasureRow {
    pub cohort: String,
    pub tasks: i64,
    pub accepted: i64,
    pub first_attempt_accepted: i64,
    pub terminal_failed: i64,
    pub cancelled: i64,
    pub retried: i64,
    pub retry_recovered: i64,
    pub attempts: i64,
    pub tool_calls: i64,
    pub failed_tool_calls: i64,
    pub high_friction_attempts: i64,
    pub median_turns: Option<f64>,
    pub median_queued_to_accepted_ms: Option<f64>,
    pub tokens: i64,
    pub judged: i64,
    pub verdicts_passed: i64,
    /// Failed attempts by class (§13.3.2); unclassified failures are in none of them.
    #[serde(default)]
    pub failed_model_outage: i64,
    #[serde(default)]
    pub failed_tool_error: i64,
    #[serde(default)]
    pub failed_malformed_output: i64,
    #[serde(default)]
    pub failed_policy_refusal: i64,
    #[serde(default)]
    pub failed_worker_crash: i64,
    /// Knowledge leverage (§13.7.3): successful reads the host journaled in the cohort's
    /// attempts' runs — of pinned context (`read_context`), of input artifacts (`read_input`)
    /// and of the diary (`read_diary`). Each is reported per accepted output, never folded
    /// into another figure.
    #[serde(default)]
    pub context_reads: i64,
    #[serde(default)]
    pub input_reads: i64,
    #[serde(default)]
    pub diary_reads: i64,
}

impl MeasureRow {
    /// The tasks queued in `[a, b)`, from `self` = the measures since `a` and `later` = the
    /// measures since `b` (the store's measures take a start, not an end). Every count is a
    /// sum over tasks, so it subtracts; a median does not, and is `None` here.
    pub fn between(&self, later: &MeasureRow) -> MeasureRow {
        MeasureRow {
            cohort: self.cohort.clone(),
            tasks: self.tasks - later.tasks,
            accepted: self.accepted - later.accepted,
            first_attempt_accepted: self.first_attempt_accepted - later.first_attempt_accepted,
            terminal_failed: self.terminal_failed - later.terminal_failed,
            cancelled: self.cancelled - later.cancelled,
            retried: self.retried - later.retried,
            retry_recovered: self.retry_recovered - later.retry_recovered,
            attempts: self.attempts - later.attempts,
            tool_calls: self.tool_calls - later.tool_calls,
            failed_tool_calls: self.failed_tool_calls - later.failed_tool_calls,
            high_friction_attempts: self.high_friction_attempts - later.high_friction_attempts,
            median_turns: None,
            median_queued_to_accepted_ms: None,
            tokens: self.tokens - later.tokens,
            judged: self.judged - later.judged,
            verdicts_passed: self.verdicts_passed - later.verdicts_passed,
            failed_model_outage: self.failed_model_outage - later.failed_model_outage,
            failed_tool_error: self.failed_tool_error - later.failed_tool_error,
            failed_malformed_output: self.failed_malformed_output - later.failed_malformed_output,
            failed_policy_refusal: self.failed_policy_refusal - later.failed_policy_refusal,
            failed_worker_crash: self.failed_worker_crash - later.failed_worker_crash,
            context_reads: self.context_reads - later.context_reads,
            input_reads: self.input_reads - later.input_reads,
            diary_reads: self.diary_reads - later.diary_reads,
        }
    }
}

/// The board's store. Every write is durable on return and refused (`Conflict`, nothing
/// changed) when its premise no longer holds.
pub trait BoardStore: Send + Sync {
    /// Create a task (`waiting` when its condition is false, else `queued`). With an
    /// idempotency key already used: the same request returns `Existing`, a different one is
    /// `Conflict`.
    fn offer(&self, task: &NewTask) -> StoreResult<Offered>;
    fn task(&self, id: &str) -> StoreResult<Option<TaskRecord>>;
    /// Oldest first.
    fn tasks(&self, filter: &TaskFilter) -> StoreResult<Vec<TaskRecord>>;
    fn attempts(&self, task_id: &str) -> StoreResult<Vec<AttemptRecord>>;
    /// One conditional update (§13.2); `None` when nothing is claimable for this worker.
    fn claim(&self, req: &ClaimRequest) -> StoreResult<Option<Claim>>;
    /// Extend the lease; the first moves `dispatched → running`. Answers `cancelled` when
    /// the owner cancelled; any other ended attempt is `Conflict`.
    fn heartbeat(&self, at: &AttemptRef, now_ms: i64) -> StoreResult<Heartbeat>;
    /// A heartbeat its claimant signed (§13.6.2): a board that verifies statements checks
    /// the signature and spends the stamp's nonce first; any other takes it as a heartbeat.
    fn heartbeat_signed(
        &self,
        at: &AttemptRef,
        now_ms: i64,
        stamp: &Stamp,
        signature: Option<&str>,
    ) -> StoreResult<Heartbeat> {
        let _ = (stamp, signature);
        self.heartbeat(at, now_ms)
    }
    /// The attempt's run `run_id` waits for a person: lease released, clocks stopped. The run
    /// is recorded on the attempt, so whoever claims the resumption continues that run.
    fn suspend(&self, at: &AttemptRef, run_id: &str, now_ms: i64) -> StoreResult<TaskRecord>;
    /// The attempt whose run is `run_id` (a person deciding on a run finds its task here).
    fn attempt_of_run(&self, run_id: &str) -> StoreResult<Option<AttemptRecord>>;
    /// Open task runs that an ended attempt names, oldest first, at most `limit`
    /// ([`ENDED_ATTEMPT_RUNS_SQL`]: one query over the open runs, each attempt found by
    /// its run's index) — the candidates a host ends as waiting for nothing (§13.3).
    fn runs_of_ended_attempts(&self, limit: usize) -> StoreResult<Vec<String>>;
    /// The person decided: the suspended attempt becomes claimable as a resumption.
    fn resume_ready(&self, task_id: &str, now_ms: i64) -> StoreResult<TaskRecord>;
    fn report(&self, report: &Report) -> StoreResult<Reported>;
    /// Suspended attempts whose run has ended while they waited — start-up recovery or
    /// another host ended it after the decision and before anyone resumed it — as
    /// `(task, attempt n, run)`, at most `limit` ([`SUSPENDED_ENDED_SQL`]).
    fn suspended_with_ended_runs(&self, limit: usize) -> StoreResult<Vec<(String, u32, String)>>;
    /// End the suspended attempt `report.attempt` as its ended run says ([`settle_suspended`]):
    /// the host's settlement, never a worker's report. `None` when it is no longer suspended.
    fn settle_suspended(&self, report: &Report) -> StoreResult<Option<Reported>>;
    /// Count one malformed submission of the live attempt `at` → its count after (§13.4.1).
    /// The budget is the attempt row's, so it holds across interfaces, processes and a
    /// resumption; refused (`Conflict`) unless `at` names the live attempt and its claimant.
    fn spend_repair(&self, at: &AttemptRef) -> StoreResult<u32>;
    /// The malformed submissions attempt `n` of the task has made so far.
    fn repairs_spent(&self, task_id: &str, n: u32) -> StoreResult<u32>;
    fn cancel(&self, task_id: &str, now_ms: i64) -> StoreResult<TaskRecord>;
    /// Promote waiting tasks whose condition holds, expire passed deadlines, time out
    /// attempts whose clocks ran out, queue suspended attempts whose run no longer waits for
    /// a decision — each with the same guarded writes.
    fn sweep(&self, now_ms: i64) -> StoreResult<SweepReport>;
    /// A stored result by content id.
    fn result(&self, id: &str) -> StoreResult<Option<Value>>;
    fn verdicts(&self, target: &str) -> StoreResult<Vec<(String, Verdict)>>;
    fn measures(&self, q: &MeasuresQuery) -> StoreResult<Vec<MeasureRow>>;
    /// Ended attempts whose run's cost nobody reported (§13.7.2): `(task, attempt, run)` for
    /// each ended attempt with no run of its own, not yet charged, whose task has a run created
    /// while the attempt was live, named by no attempt, and ended or no longer held by a live
    /// owner at `now_ms` ([`UNCHARGED_SQL`]). At most [`SWEEP_BATCH_MAX`].
    fn uncharged(&self, now_ms: i64) -> StoreResult<Vec<(String, u32, String)>>;
    /// Charge an ended attempt with its run's cost, once: `false` when it was charged before
    /// (or its run was); `Conflict` when the attempt is live or already has a run of its own.
    fn charge(&self, cost: &AttemptCost) -> StoreResult<bool>;
    /// How many tasks are in each state: every state of `TaskState::ALL`, in that order,
    /// zero when none. One `GROUP BY` ([`TASKS_BY_STATE_SQL`]), so it is exact at any size of
    /// board (a listing stops at `TASK_LIST_MAX`).
    fn task_counts(&self) -> StoreResult<Vec<(TaskState, u64)>>;
    /// Record `nonce` as used by `identity` for a statement made at `at_ms`: `true` when it
    /// was not used before (one conditional insert, [`SPEND_NONCE_SQL`]), `false` for a
    /// replay. Forgets nonces older than [`nonces_kept_after`]`(now_ms)` first.
    fn spend_nonce(
        &self,
        identity: &str,
        nonce: &str,
        at_ms: i64,
        now_ms: i64,
    ) -> StoreResult<bool>;
}

/// One task of a thread (§13.1) with what became of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ThreadTask {
    pub task: TaskRecord,
    /// Oldest first.
    pub attempts: Vec<AttemptRecord>,
    /// The accepted output, when there is one.
    pub result: Option<Value>,
    /// Verdicts on this task's accepted output: `(judge task, verdict)`.
    pub verdicts: Vec<(String, Verdict)>,
}

/// Every task of a thread — tasks whose correlation is `correlation`, and the task of that id
/// (a thread's first task) — in the order they were offered, each with its attempts, its
/// accepted output and the verdicts on it. At most [`TASK_LIST_MAX`] tasks.
pub fn thread(board: &dyn BoardStore, correlation: &str) -> StoreResult<Vec<ThreadTask>> {
    let tasks = board.tasks(&TaskFilter {
        state: None,
        tag: None,
        correlation: Some(correlation.to_string()),
        limit: TASK_LIST_MAX,
    })?;
    let mut out = Vec::with_capacity(tasks.len());
    for task in tasks {
        let result = match &task.result_id {
            Some(id) => board.result(id)?,
            None => None,
        };
        out.push(ThreadTask {
            attempts: board.attempts(&task.id)?,
            verdicts: board.verdicts(&task.id)?,
            result,
            task,
        });
    }
    Ok(out)
}

/// [`BoardStore::uncharged`] in portable SQL; `?1` is now, `?2` the batch.
pub const UNCHARGED_SQL: &str = "SELECT a.task_id, a.n, r.id FROM task_attempts a \
     JOIN runs r ON r.scope = 'task:' || a.task_id AND r.trigger = 'task' \
     AND r.created_ms >= a.claimed_ms AND r.created_ms <= a.ended_ms \
     AND (r.state = 'ended' OR r.owner IS NULL OR r.lease_until_ms IS NULL OR r.lease_until_ms < ?1) \
     WHERE a.state IN ('failed', 'cancelled', 'aborted', 'timed_out') AND a.run_id IS NULL \
     AND NOT EXISTS (SELECT 1 FROM task_attempts b WHERE b.run_id = r.id) \
     AND NOT EXISTS (SELECT 1 FROM task_attempt_costs k \
       WHERE (k.task_id = a.task_id AND k.n = a.n) OR k.run_id = r.id) \
     ORDER BY a.task_id, a.n, r.created_ms LIMIT ?2";

/// [`BoardStore::charge`] in portable SQL: inserts only for an ended attempt without a run of
/// its own; `?1`…`?8` are task, n, run, turns, tokens, tool calls, failed tool calls, at.
pub const CHARGE_SQL: &str = "INSERT INTO task_attempt_costs \
     (task_id, n, run_id, turns, tokens, tool_calls, failed_tool_calls, at_ms) \
     SELECT CAST(?1 AS TEXT), CAST(?2 AS BIGINT), CAST(?3 AS TEXT), CAST(?4 AS BIGINT), \
       CAST(?5 AS BIGINT), CAST(?6 AS BIGINT), CAST(?7 AS BIGINT), CAST(?8 AS BIGINT) WHERE EXISTS (SELECT 1 FROM task_attempts a \
       WHERE a.task_id = CAST(?1 AS TEXT) AND a.n = CAST(?2 AS BIGINT) AND a.run_id IS NULL \
       AND a.state IN ('failed', 'cancelled', 'aborted', 'timed_out')) \
     ON CONFLICT DO NOTHING";

/// Why [`CHARGE_SQL`] inserted nothing: charged before (`Ok(false)`), or refused.
pub fn charge_refused(attempt: Option<&AttemptRecord>, cost: &AttemptCost) -> StoreResult<bool> {
    match attempt {
        None => Err(StoreError::NotFound {
            what: "attempt",
            id: format!("{}#{}", cost.task_id, cost.n),
        }),
        Some(a) if !a.state.is_final() => Err(StoreError::Conflict(format!(
            "attempt {} of task `{}` is live: its report carries its usage",
            a.n, a.task_id
        ))),
        Some(a) if a.run_id.is_some() => Err(StoreError::Conflict(format!(
            "attempt {} of task `{}` has its run already; its report carried its usage",
            a.n, a.task_id
        ))),
        Some(_) => Ok(false),
    }
}

/// Tasks by state, in portable SQL over the board's tables.
pub const TASKS_BY_STATE_SQL: &str = "SELECT state, COUNT(*) FROM tasks GROUP BY state";

/// The rows of [`TASKS_BY_STATE_SQL`] as `task_counts` answers them: every state, in
/// `TaskState::ALL` order, zero when no row names it. A state the core does not name is
/// corrupt (the schema's check allows none).
pub fn task_counts_of(
    rows: impl IntoIterator<Item = (String, i64)>,
) -> StoreResult<Vec<(TaskState, u64)>> {
    let mut counts: Vec<(TaskState, u64)> = TaskState::ALL.iter().map(|s| (*s, 0)).collect();
    for (word, n) in rows {
        let state = TaskState::parse(&word)
            .ok_or_else(|| StoreError::Corrupt(format!("a task has the unknown state {word:?}")))?;
        let n = u64::try_from(n)
            .map_err(|_| StoreError::Corrupt(format!("{n} tasks counted as {word}")))?;
        if let Some(slot) = counts.iter_mut().find(|(s, _)| *s == state) {
            slot.1 = n;
        }
    }
    Ok(counts)
}

// ---------------------------------------------------------------------------------------------
// the procedures, once for every backend

/// Row access inside one transaction (PostgreSQL: rows read with `lock` are `FOR UPDATE`).
pub trait BoardTx {
    fn task(&mut self, id: &str, lock: bool) -> StoreResult<Option<TaskRecord>>;
    fn task_by_key(&mut self, key: &str) -> StoreResult<Option<TaskRecord>>;
    fn insert_task(&mut self, t: &TaskRecord) -> StoreResult<()>;
    /// Write every mutable column of `t` where the row still has `old_state` and `old_epoch`.
    /// Returns whether a row matched.
    fn update_task(
        &mut self,
        t: &TaskRecord,
        old_state: TaskState,
        old_epoch: i64,
    ) -> StoreResult<bool>;
    fn attempt(&mut self, task_id: &str, n: u32) -> StoreResult<Option<AttemptRecord>>;
    fn insert_attempt(&mut self, a: &AttemptRecord) -> StoreResult<()>;
    /// Write every mutable column of `a` where the row still has `old_state` and `old_epoch`.
    fn update_attempt(
        &mut self,
        a: &AttemptRecord,
        old_state: AttemptState,
        old_epoch: i64,
    ) -> StoreResult<bool>;
    /// Insert a result by content id (a second insert of the same id is a no-op).
    fn put_result(&mut self, id: &str, task_id: &str, body: &str) -> StoreResult<()>;
    fn put_verdict(&mut self, judge_task: &str, v: &Verdict, at_ms: i64) -> StoreResult<()>;
    /// The backend's one conditional update (§13.2): moves the oldest claimable matching
    /// task (resumptions first) from `queued` to `dispatched` — only if still queued, not past
    /// its deadline, attempts remaining, the profile allowed, the claimant not excluded —
    /// setting claimant, lease (`now + lease_ms`) and epoch (+1) together, and returns the
    /// row as updated. Contending claimants skip each other's rows (PostgreSQL) or are
    /// serialized (SQLite).
    fn claim_row(&mut self, req: &ClaimRequest) -> StoreResult<Option<TaskRecord>>;
    /// Add one to the attempt's malformed submissions and return the count after.
    fn add_repair(&mut self, task_id: &str, n: u32) -> StoreResult<u32>;
    /// The attempt's malformed submissions so far (0 when there is no such attempt).
    fn repairs(&mut self, task_id: &str, n: u32) -> StoreResult<u32>;
}

fn refused(what: &str, r: Refused) -> StoreError {
    StoreError::Conflict(format!("{what} refused: {r}"))
}

fn snapshot(t: &TaskRecord, latest: Option<&AttemptRecord>) -> TaskSnapshot {
    TaskSnapshot {
        state: t.state,
        attempts: t.attempts,
        aborts: t.aborts,
        max_attempts: t.max_attempts,
        latest: latest.map(|a| a.state),
    }
}

/// Read the task (locked) and its latest attempt.
fn load(tx: &mut dyn BoardTx, task_id: &str) -> StoreResult<(TaskRecord, Option<AttemptRecord>)> {
    let t = tx
        .task(task_id, true)?
        .ok_or_else(|| StoreError::NotFound {
            what: "task",
            id: task_id.to_string(),
        })?;
    let a = if t.attempts > 0 {
        tx.attempt(task_id, t.attempts)?
    } else {
        None
    };
    Ok((t, a))
}

/// Write a decided transition: the task row, then the attempt row, both guarded.
fn commit(
    tx: &mut dyn BoardTx,
    old: &TaskRecord,
    new: &TaskRecord,
    attempt: Option<(&AttemptRecord, &AttemptRecord)>,
) -> StoreResult<()> {
    if !tx.update_task(new, old.state, old.epoch)? {
        return Err(StoreError::Conflict(format!(
            "task `{}` changed while this write was decided; read it again",
            old.id
        )));
    }
    if let Some((before, after)) = attempt {
        if !tx.update_attempt(after, before.state, before.epoch)? {
            return Err(StoreError::Conflict(format!(
                "attempt {} of task `{}` changed while this write was decided",
                before.n, before.task_id
            )));
        }
    }
    Ok(())
}

/// The task's columns after a transition (state, counters, lease, end).
fn task_after(
    t: &TaskRecord,
    latest: Option<AttemptState>,
    tr: &Transition,
    now_ms: i64,
) -> TaskRecord {
    let mut before = snapshot(t, None);
    before.latest = latest;
    let snap = apply(&before, tr);
    let mut n = t.clone();
    n.state = tr.task;
    n.attempts = snap.attempts;
    n.aborts = snap.aborts;
    n.updated_ms = now_ms;
    n.resuming = snap.is_resumption();
    if !matches!(tr.task, TaskState::Dispatched | TaskState::Running) {
        n.claimant = None;
        n.lease_until_ms = None;
    }
    if tr.task == TaskState::Queued && n.queued_ms.is_none() {
        n.queued_ms = Some(now_ms);
    }
    if tr.task.is_final() {
        n.ended_ms = Some(now_ms);
    }
    n
}

fn attempt_after(a: &AttemptRecord, state: AttemptState, now_ms: i64) -> AttemptRecord {
    let mut n = a.clone();
    n.state = state;
    if state.is_final() {
        n.ended_ms = Some(now_ms);
        n.lease_until_ms = None;
        n.dispatch_deadline_ms = None;
    }
    n
}

fn check_json(v: &Value, what: &str) -> StoreResult<String> {
    let s = serde_json::to_string(v).map_err(|e| StoreError::Fatal(format!("{what}: {e}")))?;
    if s.len() > TASK_JSON_BYTES_MAX {
        return Err(StoreError::Conflict(format!(
            "{what} is {} bytes; at most {TASK_JSON_BYTES_MAX} are accepted",
            s.len()
        )));
    }
    Ok(s)
}

/// Content id of a JSON value (§13.5): `sha256:` + hex SHA-256 of its canonical form.
pub fn content_id(v: &Value) -> StoreResult<String> {
    let c = vouch_core::canonical_json(v)
        .map_err(|e| StoreError::Conflict(format!("the value has no canonical form: {e}")))?;
    Ok(format!("sha256:{}", vouch_core::sha256_hex(c.as_bytes())))
}

pub fn offer(tx: &mut dyn BoardTx, t: &NewTask) -> StoreResult<Offered> {
    vouch_core::board::check_max_attempts(t.max_attempts).map_err(StoreError::Conflict)?;
    check_json(&t.spec.input, "the task input")?;
    if let Some(key) = &t.idempotency_key {
        if let Some(existing) = tx.task_by_key(key)? {
            return if existing.request_id == t.request_id {
                Ok(Offered::Existing(existing))
            } else {
                Err(StoreError::Conflict(format!(
                    "idempotency key `{key}` was used for a different request (task `{}`); use a new key or repeat the same request",
                    existing.id
                )))
            };
        }
    }
    let holds = match &t.condition {
        None => true,
        Some(c) => {
            c.check().map_err(StoreError::Conflict)?;
            let mut states = Vec::new();
            for id in c.tasks() {
                states.push((id.to_string(), tx.task(id, false)?.map(|x| x.state)));
            }
            c.holds(&|id| states.iter().find(|(i, _)| i == id).and_then(|(_, s)| *s))
        }
    };
    let rec = TaskRecord {
        id: t.id.clone(),
        kind: t.kind.clone(),
        owner: t.owner.clone(),
        state: if holds {
            TaskState::Queued
        } else {
            TaskState::Waiting
        },
        max_attempts: t.max_attempts,
        attempts: 0,
        aborts: 0,
        epoch: 0,
        claimant: None,
        lease_until_ms: None,
        deadline_ms: t.deadline_ms,
        profiles: t.profiles.clone(),
        tags: t.tags.clone(),
        excluded_claimant: t.excluded_claimant.clone(),
        condition: t.condition.clone(),
        idempotency_key: t.idempotency_key.clone(),
        request_id: t.request_id.clone(),
        spec: t.spec.clone(),
        created_ms: t.created_ms,
        queued_ms: holds.then_some(t.created_ms),
        ended_ms: None,
        accepted_attempt: None,
        result_id: None,
        resuming: false,
        updated_ms: t.created_ms,
    };
    tx.insert_task(&rec)?;
    Ok(Offered::Created(rec))
}

pub fn claim(tx: &mut dyn BoardTx, req: &ClaimRequest) -> StoreResult<Option<Claim>> {
    let Some(claimed) = tx.claim_row(req)? else {
        return Ok(None);
    };
    let mut before = claimed.clone();
    before.state = TaskState::Queued;
    before.epoch = claimed.epoch - 1;
    before.claimant = None;
    before.lease_until_ms = None;
    let latest = if before.attempts > 0 {
        tx.attempt(&before.id, before.attempts)?
    } else {
        None
    };
    let snap = snapshot(&before, latest.as_ref());
    // The conditional update already moved the row; the core must agree, or undo it all.
    let tr = step(&snap, BoardEvent::Claim).map_err(|r| refused("claim", r))?;
    let now = req.now_ms;
    let lease_until = claimed.lease_until_ms.unwrap_or(now + before.spec.lease_ms);
    let mut task = task_after(&before, snap.latest, &tr, now);
    task.epoch = claimed.epoch;
    task.claimant = Some(req.claimant.clone());
    task.lease_until_ms = Some(lease_until);
    let mut detail = serde_json::json!({
        "policy": req.policy,
        "claim_signature": req.signature,
    });
    let (attempt, resumption) = match (tr.attempt, latest) {
        (AttemptChange::New, _) => {
            let a = AttemptRecord {
                task_id: before.id.clone(),
                n: task.attempts,
                state: AttemptState::Claimed,
                claimant: req.claimant.clone(),
                epoch: task.epoch,
                profile: req.profile.clone(),
                model: req.model.clone(),
                policy_fingerprint: req.policy_fingerprint.clone(),
                claimed_ms: now,
                started_ms: None,
                lease_until_ms: Some(lease_until),
                dispatch_deadline_ms: Some(now + before.spec.dispatch_timeout_ms),
                running_deadline_ms: Some(now + before.spec.running_timeout_ms),
                running_left_ms: None,
                ended_ms: None,
                end_reason: None,
                retryable: None,
                run_id: req.run_id.clone(),
                result_id: None,
                usage: Usage::default(),
                detail,
            };
            tx.insert_attempt(&a)?;
            (a, false)
        }
        (AttemptChange::To { state }, Some(old)) => {
            let mut a = attempt_after(&old, state, now);
            a.claimant = req.claimant.clone();
            // The resumption runs under its own claim's profile snapshot (§13.6); the earlier
            // ones stay in `resumed_from`.
            a.profile = req.profile.clone();
            a.model = req.model.clone();
            a.policy_fingerprint = req.policy_fingerprint.clone();
            a.epoch = task.epoch;
            a.lease_until_ms = Some(lease_until);
            a.dispatch_deadline_ms = Some(now + before.spec.dispatch_timeout_ms);
            let left = old
                .running_left_ms
                .unwrap_or(before.spec.running_timeout_ms);
            a.running_deadline_ms = Some(now + left);
            a.running_left_ms = None;
            // Keep earlier claimants in the history of this attempt.
            if let Value::Object(m) = &mut detail {
                let mut prior = old
                    .detail
                    .get("resumed_from")
                    .cloned()
                    .unwrap_or(Value::Null);
                if !prior.is_array() {
                    prior = Value::Array(vec![]);
                }
                if let Value::Array(xs) = &mut prior {
                    xs.push(serde_json::json!({"claimant": old.claimant, "epoch": old.epoch, "profile": old.profile, "policy_fingerprint": old.policy_fingerprint}));
                }
                m.insert("resumed_from".into(), prior);
            }
            a.detail = merge(&old.detail, &detail);
            if !tx.update_attempt(&a, old.state, old.epoch)? {
                return Err(StoreError::Conflict(
                    "the suspended attempt changed during the claim".into(),
                ));
            }
            (a, true)
        }
        _ => {
            return Err(StoreError::Corrupt(format!(
                "task `{}` is queued for resumption without a suspended attempt",
                before.id
            )))
        }
    };
    // The row was written by claim_row; write the remaining columns under the new epoch.
    if !tx.update_task(&task, TaskState::Dispatched, task.epoch)? {
        return Err(StoreError::Conflict(format!(
            "task `{}` changed during its claim",
            before.id
        )));
    }
    Ok(Some(Claim {
        task,
        attempt,
        resumption,
    }))
}

fn merge(a: &Value, b: &Value) -> Value {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let mut m = x.clone();
            for (k, v) in y {
                m.insert(k.clone(), v.clone());
            }
            Value::Object(m)
        }
        (_, b) => b.clone(),
    }
}

/// Load and check that `at` names the live attempt and its claimant.
fn load_for_claimant(
    tx: &mut dyn BoardTx,
    at: &AttemptRef,
    what: &str,
) -> StoreResult<(TaskRecord, AttemptRecord)> {
    let (t, latest) = load(tx, &at.task_id)?;
    let a = match latest {
        Some(a) if a.n == at.n => a,
        _ => {
            let a = tx
                .attempt(&at.task_id, at.n)?
                .ok_or_else(|| StoreError::NotFound {
                    what: "attempt",
                    id: format!("{}#{}", at.task_id, at.n),
                })?;
            return Err(StoreError::Conflict(format!(
                "{what} refused: attempt {} of task `{}` already ended ({})",
                a.n, a.task_id, a.state
            )));
        }
    };
    if a.claimant != at.claimant || a.epoch != at.epoch {
        return Err(StoreError::Conflict(format!(
            "{what} refused: `{}` does not hold the lease of attempt {} of task `{}`",
            at.claimant, at.n, at.task_id
        )));
    }
    if a.state.is_leased() && t.claimant.as_deref() != Some(at.claimant.as_str()) {
        return Err(StoreError::Conflict(format!(
            "{what} refused: the task names another claimant"
        )));
    }
    Ok((t, a))
}

pub fn heartbeat(tx: &mut dyn BoardTx, at: &AttemptRef, now: i64) -> StoreResult<Heartbeat> {
    // A cancelled attempt answers its own claimant "cancelled" (§13.3: heartbeats carry the
    // cancel signal), even though the cancel released the task's claimant and lease — the
    // lease checks below would otherwise refuse the heartbeat and the worker would never hear.
    if let Some(a) = tx.attempt(&at.task_id, at.n)? {
        if a.state == AttemptState::Cancelled && a.claimant == at.claimant {
            return Ok(Heartbeat {
                cancelled: true,
                lease_until_ms: None,
            });
        }
    }
    let (t, a) = load_for_claimant(tx, at, "heartbeat")?;
    if a.state == AttemptState::Cancelled {
        return Ok(Heartbeat {
            cancelled: true,
            lease_until_ms: None,
        });
    }
    let tr = step(&snapshot(&t, Some(&a)), BoardEvent::Heartbeat)
        .map_err(|r| refused("heartbeat", r))?;
    let lease_until = now + t.spec.lease_ms;
    let mut nt = task_after(&t, Some(a.state), &tr, now);
    nt.lease_until_ms = Some(lease_until);
    let mut na = attempt_after(&a, AttemptState::Running, now);
    na.lease_until_ms = Some(lease_until);
    if na.started_ms.is_none() {
        na.started_ms = Some(now);
    }
    na.dispatch_deadline_ms = None;
    commit(tx, &t, &nt, Some((&a, &na)))?;
    Ok(Heartbeat {
        cancelled: false,
        lease_until_ms: Some(lease_until),
    })
}

pub fn suspend(
    tx: &mut dyn BoardTx,
    at: &AttemptRef,
    run_id: &str,
    now: i64,
) -> StoreResult<TaskRecord> {
    let (t, a) = load_for_claimant(tx, at, "suspend")?;
    let tr =
        step(&snapshot(&t, Some(&a)), BoardEvent::Suspend).map_err(|r| refused("suspend", r))?;
    let mut nt = task_after(&t, Some(a.state), &tr, now);
    nt.claimant = None;
    nt.lease_until_ms = None;
    let mut na = attempt_after(&a, AttemptState::Suspended, now);
    na.run_id = Some(run_id.to_string());
    na.lease_until_ms = None;
    na.dispatch_deadline_ms = None;
    na.running_left_ms = Some(
        a.running_deadline_ms
            .map_or(t.spec.running_timeout_ms, |d| (d - now).max(0)),
    );
    na.running_deadline_ms = None;
    commit(tx, &t, &nt, Some((&a, &na)))?;
    Ok(nt)
}

/// The sweep suspends an attempt whose worker died after its run suspended (issue 22 #6): the
/// same guarded write as the worker's own `suspend`, on behalf of the claimant on the rows.
/// `false` when the attempt is no longer live (someone else acted first).
pub fn suspend_orphan(
    tx: &mut dyn BoardTx,
    task_id: &str,
    n: u32,
    run_id: &str,
    now: i64,
) -> StoreResult<bool> {
    let Some(a) = tx.attempt(task_id, n)? else {
        return Ok(false);
    };
    if !a.state.is_leased() {
        return Ok(false);
    }
    let at = AttemptRef {
        task_id: task_id.to_string(),
        n,
        claimant: a.claimant.clone(),
        epoch: a.epoch,
    };
    match suspend(tx, &at, run_id, now) {
        Ok(_) => Ok(true),
        Err(StoreError::Conflict(_)) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Count one malformed submission of the live attempt `at` (§13.4.1) → the count after.
pub fn spend_repair(tx: &mut dyn BoardTx, at: &AttemptRef) -> StoreResult<u32> {
    let (_, a) = load_for_claimant(tx, at, "submit")?;
    if !a.state.is_leased() {
        return Err(StoreError::Conflict(format!(
            "submit refused: attempt {} of task `{}` is {}, not running",
            a.n, a.task_id, a.state
        )));
    }
    tx.add_repair(&at.task_id, at.n)
}

pub fn resume_ready(tx: &mut dyn BoardTx, task_id: &str, now: i64) -> StoreResult<TaskRecord> {
    let (t, a) = load(tx, task_id)?;
    let tr = step(&snapshot(&t, a.as_ref()), BoardEvent::ResumeReady)
        .map_err(|r| refused("resume", r))?;
    let nt = task_after(&t, a.as_ref().map(|a| a.state), &tr, now);
    commit(tx, &t, &nt, None)?;
    Ok(nt)
}

/// An attempt bound to its run (opened at claim, or suspended with it) is reported with that
/// run: a submit or a failure naming no run, or another one, is refused (§13.2). An abort
/// gives the attempt back and names none.
pub fn check_bound_run(a: &AttemptRecord, r: &Report) -> StoreResult<()> {
    let Some(bound) = &a.run_id else {
        return Ok(());
    };
    if matches!(r.kind, ReportKind::Aborted { .. }) || r.run_id.as_deref() == Some(bound) {
        return Ok(());
    }
    Err(StoreError::Conflict(format!(
        "attempt {} of task {} runs as run {bound}; report it with that run, not {}",
        a.n,
        a.task_id,
        r.run_id.as_deref().unwrap_or("none")
    )))
}

pub fn report(tx: &mut dyn BoardTx, r: &Report) -> StoreResult<Reported> {
    let (t, a) = load_for_claimant(tx, &r.attempt, "report")?;
    check_bound_run(&a, r)?;
    let tr = step(&snapshot(&t, Some(&a)), BoardEvent::End(end_of(&r.kind)))
        .map_err(|e| refused("report", e))?;
    write_end(tx, &t, &a, r, &tr)
}

fn end_of(kind: &ReportKind) -> AttemptEnd {
    match kind {
        ReportKind::Accepted { .. } => AttemptEnd::Accepted,
        ReportKind::Failed { retryable, .. } => AttemptEnd::Failed {
            retryable: *retryable,
        },
        ReportKind::Aborted { .. } => AttemptEnd::Aborted,
    }
}

/// The host settles a suspended attempt whose run ended while it waited (§13.3): the report
/// `r` is decided from that run's journal, as a worker's would be; written with the same
/// guarded write as a report, on behalf of the claimant on the rows. `None` when the attempt
/// is no longer the task's suspended one (a resumption was claimed, or someone acted first).
pub fn settle_suspended(tx: &mut dyn BoardTx, r: &Report) -> StoreResult<Option<Reported>> {
    let (t, Some(a)) = load(tx, &r.attempt.task_id)? else {
        return Ok(None);
    };
    if a.n != r.attempt.n || a.state != AttemptState::Suspended {
        return Ok(None);
    }
    if matches!(r.kind, ReportKind::Aborted { .. }) || a.run_id != r.run_id {
        return Err(StoreError::Conflict(format!(
            "settle refused: attempt {} of task `{}` is settled from its own run, with an end",
            a.n, a.task_id
        )));
    }
    let Ok(tr) = step(
        &snapshot(&t, Some(&a)),
        BoardEvent::RunEnded(end_of(&r.kind)),
    ) else {
        return Ok(None);
    };
    match write_end(tx, &t, &a, r, &tr) {
        Ok(done) => Ok(Some(done)),
        Err(StoreError::Conflict(_)) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Write an attempt's end `tr`, decided from the report `r`: the result stored when accepted,
/// the reason, class and receipt in the attempt's detail.
fn write_end(
    tx: &mut dyn BoardTx,
    t: &TaskRecord,
    a: &AttemptRecord,
    r: &Report,
    tr: &Transition,
) -> StoreResult<Reported> {
    let now = r.now_ms;
    let mut nt = task_after(t, Some(a.state), tr, now);
    let AttemptChange::To { state } = tr.attempt else {
        return Err(StoreError::Fatal("a report must end the attempt".into()));
    };
    let mut na = attempt_after(a, state, now);
    // An attempt whose run the claim opened keeps it, whatever the report names.
    na.run_id = r.run_id.clone().or_else(|| a.run_id.clone());
    na.usage = r.usage;
    let mut detail = serde_json::json!({
        "receipt": r.receipt,
        "report_signature": r.signature,
    });
    match &r.kind {
        ReportKind::Accepted {
            result,
            self_assessment,
            verdict,
        } => {
            let body = check_json(result, "the result")?;
            let id = content_id(result)?;
            tx.put_result(&id, &t.id, &body)?;
            na.result_id = Some(id.clone());
            nt.result_id = Some(id);
            nt.accepted_attempt = Some(a.n);
            na.end_reason = Some("accepted".into());
            if let Value::Object(m) = &mut detail {
                m.insert(
                    "self_assessment".into(),
                    self_assessment.clone().unwrap_or(Value::Null),
                );
            }
            if let Some(v) = verdict {
                tx.put_verdict(&t.id, v, now)?;
            }
        }
        ReportKind::Failed {
            retryable,
            reason,
            class,
        } => {
            na.retryable = Some(*retryable);
            na.end_reason = Some(reason.clone());
            if let (Some(c), Value::Object(m)) = (class, &mut detail) {
                m.insert("failure_class".into(), Value::from(c.as_str()));
            }
        }
        ReportKind::Aborted { reason } => {
            na.retryable = Some(true);
            na.end_reason = Some(reason.clone());
        }
    }
    check_json(&detail, "the report")?;
    na.detail = merge(&a.detail, &detail);
    commit(tx, t, &nt, Some((a, &na)))?;
    Ok(Reported {
        task: nt,
        attempt: na,
    })
}

pub fn cancel(tx: &mut dyn BoardTx, task_id: &str, now: i64) -> StoreResult<TaskRecord> {
    let (t, a) = load(tx, task_id)?;
    let tr =
        step(&snapshot(&t, a.as_ref()), BoardEvent::Cancel).map_err(|r| refused("cancel", r))?;
    let nt = task_after(&t, a.as_ref().map(|a| a.state), &tr, now);
    match (tr.attempt, &a) {
        (AttemptChange::To { state }, Some(a)) => {
            let mut na = attempt_after(a, state, now);
            na.end_reason = Some("cancelled by the owner".into());
            commit(tx, &t, &nt, Some((a, &na)))?;
        }
        _ => commit(tx, &t, &nt, None)?,
    }
    Ok(nt)
}

/// Time out one attempt whose clock ran out, if it still has; `None` when nothing is due.
pub fn time_out(
    tx: &mut dyn BoardTx,
    task_id: &str,
    now: i64,
) -> StoreResult<Option<(u32, String)>> {
    let (t, Some(a)) = load(tx, task_id)? else {
        return Ok(None);
    };
    if !a.state.is_leased() {
        return Ok(None);
    }
    let clock = if a.dispatch_deadline_ms.is_some_and(|d| d <= now) {
        "dispatch"
    } else if a.lease_until_ms.is_some_and(|d| d <= now) {
        "lease"
    } else if a.running_deadline_ms.is_some_and(|d| d <= now) {
        "running"
    } else {
        return Ok(None);
    };
    let tr = step(
        &snapshot(&t, Some(&a)),
        BoardEvent::End(AttemptEnd::TimedOut),
    )
    .map_err(|r| refused("time out", r))?;
    let nt = task_after(&t, Some(a.state), &tr, now);
    let mut na = attempt_after(&a, AttemptState::TimedOut, now);
    na.end_reason = Some(format!("the {clock} clock ran out"));
    // No first heartbeat, or heartbeats stopped: the worker stopped answering (§13.3.2). A
    // running clock that ran out is the task's limit, not a crash.
    if clock != "running" {
        na.detail = merge(
            &a.detail,
            &serde_json::json!({"failure_class": FailureClass::WorkerCrash.as_str()}),
        );
    }
    commit(tx, &t, &nt, Some((&a, &na)))?;
    Ok(Some((a.n, clock.to_string())))
}

/// Expire a waiting or queued task whose deadline passed; false when not due.
pub fn expire(tx: &mut dyn BoardTx, task_id: &str, now: i64) -> StoreResult<bool> {
    let (t, a) = load(tx, task_id)?;
    if t.deadline_ms.is_none_or(|d| d > now) {
        return Ok(false);
    }
    let Ok(tr) = step(&snapshot(&t, a.as_ref()), BoardEvent::Expire) else {
        return Ok(false);
    };
    let nt = task_after(&t, a.as_ref().map(|a| a.state), &tr, now);
    match (tr.attempt, &a) {
        (AttemptChange::To { state }, Some(a)) => {
            let mut na = attempt_after(a, state, now);
            na.end_reason = Some("the deadline passed while it waited to resume".into());
            commit(tx, &t, &nt, Some((a, &na)))?;
        }
        _ => commit(tx, &t, &nt, None)?,
    }
    Ok(true)
}

/// Promote a waiting task whose condition now holds; false when it does not (yet).
pub fn promote(tx: &mut dyn BoardTx, task_id: &str, now: i64) -> StoreResult<bool> {
    let (t, a) = load(tx, task_id)?;
    if t.state != TaskState::Waiting {
        return Ok(false);
    }
    let holds = match &t.condition {
        None => true,
        Some(c) => {
            let mut states = Vec::new();
            for id in c.tasks() {
                states.push((id.to_string(), tx.task(id, false)?.map(|x| x.state)));
            }
            c.holds(&|id| states.iter().find(|(i, _)| i == id).and_then(|(_, s)| *s))
        }
    };
    if !holds {
        return Ok(false);
    }
    let tr =
        step(&snapshot(&t, a.as_ref()), BoardEvent::Promote).map_err(|r| refused("promote", r))?;
    let nt = task_after(&t, a.as_ref().map(|a| a.state), &tr, now);
    commit(tx, &t, &nt, None)?;
    Ok(true)
}

/// The rates of a measures row (§13.7), each `None` when its denominator is zero.
pub fn rates(m: &MeasureRow) -> Value {
    let r = |a: i64, b: i64| (b > 0).then(|| a as f64 / b as f64);
    serde_json::json!({
        "accepted_output_rate": r(m.accepted, m.tasks),
        "first_attempt_acceptance": r(m.first_attempt_accepted, m.tasks),
        "terminal_failure": r(m.terminal_failed, m.tasks),
        "cancelled": r(m.cancelled, m.tasks),
        "retry_recovery": r(m.retry_recovered, m.retried),
        "failed_tool_calls": r(m.failed_tool_calls, m.tool_calls),
        "high_friction_attempts": r(m.high_friction_attempts, m.attempts),
        "tokens_per_accepted_output": r(m.tokens, m.accepted),
        "verdict_pass_rate": r(m.verdicts_passed, m.judged),
        "context_reads_per_accepted_output": r(m.context_reads, m.accepted),
        "input_reads_per_accepted_output": r(m.input_reads, m.accepted),
        "diary_reads_per_accepted_output": r(m.diary_reads, m.accepted),
    })
}

/// The cohort key of a task row `t` (joined with its latest attempt `la`).
fn cohort_expr(by: Cohort) -> (&'static str, &'static str) {
    // (expression, extra join)
    match by {
        Cohort::All => ("'all'", ""),
        Cohort::Type => ("t.kind", ""),
        Cohort::Tag => ("g.tag", "JOIN task_tags g ON g.task_id = t.id"),
        Cohort::Claimant => ("COALESCE(la.claimant, '(unclaimed)')", ""),
        Cohort::Profile => ("COALESCE(la.profile, '(unclaimed)')", ""),
        Cohort::Model => ("COALESCE(la.model, '(none)')", ""),
    }
}

/// §13.7 in portable SQL over the board's tables (the same in every backend's schema);
/// placeholders `?N` (SQLite) or `$N` (PostgreSQL). `?1` window start (queue time), `?2`/`?3`
/// friction thresholds, `?4` a thread (correlation) or NULL for every task. A task
/// belongs to the cohort of its latest attempt (claimant, profile, model), of its type, or
/// of each of its tags; attempt figures follow their task.
pub fn measures_sql(by: Cohort, dollar: bool) -> String {
    let (key, join) = cohort_expr(by);
    // An attempt's own claimant, profile and model carry its figures (a crash is charged to
    // the claimant whose attempt crashed, §13.7.1); other cohorts are the task's.
    let attempt_key = match by {
        Cohort::Claimant => "a.claimant",
        Cohort::Profile => "a.profile",
        Cohort::Model => "COALESCE(a.model, '(none)')",
        Cohort::All | Cohort::Type | Cohort::Tag => "ct.cohort",
    };
    // The failure class lives in the attempt's detail (JSON text): each dialect reads it.
    let class = if dollar {
        "(a.detail::json ->> 'failure_class')"
    } else {
        "json_extract(a.detail, '$.failure_class')"
    };
    // A read is a `tool_called` event of the host's read tools that succeeded (§13.7.3): the
    // journal's bodies are JSON text on both backends.
    let (tool, ok) = if dollar {
        (
            "(j.body::json ->> 'name')",
            "(j.body::json ->> 'ok') = 'true'",
        )
    } else {
        (
            "json_extract(j.body, '$.name')",
            "json_extract(j.body, '$.ok') = 1",
        )
    };
    let sql = format!(
        "WITH ct AS ( \
           SELECT {key} AS cohort, t.id, t.state, t.attempts, t.accepted_attempt, t.queued_ms, t.ended_ms \
           FROM tasks t {join} \
           LEFT JOIN task_attempts la ON la.task_id = t.id AND la.n = t.attempts \
           WHERE t.queued_ms IS NOT NULL AND t.queued_ms >= ?1 \
             AND (CAST(?4 AS TEXT) IS NULL OR t.correlation = ?4 OR t.id = ?4) \
         ), \
         ca AS ( \
           SELECT {attempt_key} AS cohort, a.turns + COALESCE(k.turns, 0) AS turns, \
             a.tokens + COALESCE(k.tokens, 0) AS tokens, \
             a.tool_calls + COALESCE(k.tool_calls, 0) AS tool_calls, \
             a.failed_tool_calls + COALESCE(k.failed_tool_calls, 0) AS failed_tool_calls, \
             {class} AS fc, COALESCE(a.run_id, k.run_id) AS run_id \
           FROM ct JOIN task_attempts a ON a.task_id = ct.id \
           LEFT JOIN task_attempt_costs k ON k.task_id = a.task_id AND k.n = a.n \
         ), \
         rd AS ( \
           SELECT ca.cohort, \
             CAST(SUM(CASE WHEN {tool} = 'read_context' THEN 1 ELSE 0 END) AS BIGINT) AS r_context, \
             CAST(SUM(CASE WHEN {tool} = 'read_input' THEN 1 ELSE 0 END) AS BIGINT) AS r_input, \
             CAST(SUM(CASE WHEN {tool} = 'read_diary' THEN 1 ELSE 0 END) AS BIGINT) AS r_diary \
           FROM ca JOIN journal j ON j.run_id = ca.run_id AND j.kind = 'tool_called' \
           WHERE {ok} AND {tool} IN ('read_context', 'read_input', 'read_diary') \
           GROUP BY ca.cohort \
         ), \
         mt AS ( \
           SELECT cohort, AVG(turns) AS m FROM ( \
             SELECT cohort, turns, ROW_NUMBER() OVER (PARTITION BY cohort ORDER BY turns) AS rn, \
                    COUNT(*) OVER (PARTITION BY cohort) AS c FROM ca) x \
           WHERE rn IN ((c + 1) / 2, (c + 2) / 2) GROUP BY cohort \
         ), \
         mq AS ( \
           SELECT cohort, AVG(d) AS m FROM ( \
             SELECT cohort, ended_ms - queued_ms AS d, \
                    ROW_NUMBER() OVER (PARTITION BY cohort ORDER BY ended_ms - queued_ms) AS rn, \
                    COUNT(*) OVER (PARTITION BY cohort) AS c \
             FROM ct WHERE accepted_attempt IS NOT NULL) x \
           WHERE rn IN ((c + 1) / 2, (c + 2) / 2) GROUP BY cohort \
         ), \
         tk AS ( \
           SELECT cohort, COUNT(*) AS tasks, \
             CAST(SUM(CASE WHEN accepted_attempt IS NOT NULL THEN 1 ELSE 0 END) AS BIGINT) AS accepted, \
             CAST(SUM(CASE WHEN accepted_attempt = 1 THEN 1 ELSE 0 END) AS BIGINT) AS first_ok, \
             CAST(SUM(CASE WHEN state IN ('failed', 'expired') AND accepted_attempt IS NULL THEN 1 ELSE 0 END) AS BIGINT) AS term_failed, \
             CAST(SUM(CASE WHEN state = 'cancelled' THEN 1 ELSE 0 END) AS BIGINT) AS cancelled, \
             CAST(SUM(CASE WHEN attempts > 1 THEN 1 ELSE 0 END) AS BIGINT) AS retried, \
             CAST(SUM(CASE WHEN accepted_attempt > 1 THEN 1 ELSE 0 END) AS BIGINT) AS recovered \
           FROM ct GROUP BY cohort \
         ), \
         at AS ( \
           SELECT cohort, COUNT(*) AS attempts, CAST(SUM(tool_calls) AS BIGINT) AS tool_calls, \
             CAST(SUM(failed_tool_calls) AS BIGINT) AS failed_tool_calls, \
             CAST(SUM(CASE WHEN turns >= ?2 OR failed_tool_calls >= ?3 THEN 1 ELSE 0 END) AS BIGINT) AS friction, \
             CAST(SUM(tokens) AS BIGINT) AS tokens, \
             CAST(SUM(CASE WHEN fc = 'model_outage' THEN 1 ELSE 0 END) AS BIGINT) AS f_outage, \
             CAST(SUM(CASE WHEN fc = 'tool_error' THEN 1 ELSE 0 END) AS BIGINT) AS f_tool, \
             CAST(SUM(CASE WHEN fc = 'malformed_output' THEN 1 ELSE 0 END) AS BIGINT) AS f_malformed, \
             CAST(SUM(CASE WHEN fc = 'policy_refusal' THEN 1 ELSE 0 END) AS BIGINT) AS f_policy, \
             CAST(SUM(CASE WHEN fc = 'worker_crash' THEN 1 ELSE 0 END) AS BIGINT) AS f_crash \
           FROM ca GROUP BY cohort \
         ), \
         vd AS ( \
           SELECT ct.cohort, COUNT(*) AS judged, CAST(SUM(CASE WHEN v.passed THEN 1 ELSE 0 END) AS BIGINT) AS passed \
           FROM ct JOIN task_verdicts v ON v.target = ct.id GROUP BY ct.cohort \
         ), \
         cs AS (SELECT cohort FROM tk UNION SELECT cohort FROM at) \
         SELECT cs.cohort, COALESCE(tk.tasks, 0), COALESCE(tk.accepted, 0), COALESCE(tk.first_ok, 0), \
           COALESCE(tk.term_failed, 0), COALESCE(tk.cancelled, 0), \
           COALESCE(tk.retried, 0), COALESCE(tk.recovered, 0), COALESCE(at.attempts, 0), COALESCE(at.tool_calls, 0), \
           COALESCE(at.failed_tool_calls, 0), COALESCE(at.friction, 0), \
           CAST(mt.m AS DOUBLE PRECISION), CAST(mq.m AS DOUBLE PRECISION), COALESCE(at.tokens, 0), \
           COALESCE(vd.judged, 0), COALESCE(vd.passed, 0), \
           COALESCE(at.f_outage, 0), COALESCE(at.f_tool, 0), COALESCE(at.f_malformed, 0), \
           COALESCE(at.f_policy, 0), COALESCE(at.f_crash, 0), \
           COALESCE(rd.r_context, 0), COALESCE(rd.r_input, 0), COALESCE(rd.r_diary, 0) \
         FROM cs LEFT JOIN tk ON tk.cohort = cs.cohort LEFT JOIN at ON at.cohort = cs.cohort \
         LEFT JOIN rd ON rd.cohort = cs.cohort \
         LEFT JOIN mt ON mt.cohort = cs.cohort \
         LEFT JOIN mq ON mq.cohort = cs.cohort LEFT JOIN vd ON vd.cohort = cs.cohort \
         ORDER BY cs.cohort"
    );
    if dollar {
        sql.replace("?1", "$1")
            .replace("?2", "$2")
            .replace("?3", "$3")
            .replace("?4", "$4")
    } else {
        sql
    }
}

// ---------------------------------------------------------------------------------------------
// signatures (§13.6): the seam worker identities plug into

/// What a claim says, canonically: the statement its claimant signs.
pub fn claim_statement(req: &ClaimRequest) -> StoreResult<String> {
    canonical(&serde_json::json!({"claim": {
        "claimant": req.claimant,
        "task": req.task_id,
        "profile": req.profile,
        "policy_fingerprint": req.policy_fingerprint,
        "at_ms": req.now_ms,
        "nonce": req.nonce,
    }}))
}

/// What a report says, canonically (task, attempt, outcome, output content id): the
/// statement its claimant signs.
pub fn report_statement(r: &Report) -> StoreResult<String> {
    let (outcome, output) = match &r.kind {
        ReportKind::Accepted { result, .. } => ("accepted", Some(content_id(result)?)),
        ReportKind::Failed { .. } => ("failed", None),
        ReportKind::Aborted { .. } => ("aborted", None),
    };
    canonical(&serde_json::json!({"report": {
        "task": r.attempt.task_id,
        "attempt": r.attempt.n,
        "claimant": r.attempt.claimant,
        "epoch": r.attempt.epoch,
        "outcome": outcome,
        "output": output,
        "run": r.run_id,
        "at_ms": r.stamp.as_ref().map(|t| t.at_ms),
        "nonce": r.stamp.as_ref().map(|t| t.nonce.as_str()),
    }}))
}

/// What a heartbeat says, canonically: the statement its claimant signs.
pub fn heartbeat_statement(at: &AttemptRef, stamp: &Stamp) -> StoreResult<String> {
    canonical(&serde_json::json!({"heartbeat": {
        "task": at.task_id,
        "attempt": at.n,
        "claimant": at.claimant,
        "epoch": at.epoch,
        "at_ms": stamp.at_ms,
        "nonce": stamp.nonce,
    }}))
}

/// What an artifact upload says, canonically (the content id and the attempt it belongs
/// to): the statement its claimant signs.
pub fn artifact_statement(cid: &str, at: &AttemptRef, stamp: &Stamp) -> StoreResult<String> {
    canonical(&serde_json::json!({"artifact": {
        "cid": cid,
        "task": at.task_id,
        "attempt": at.n,
        "claimant": at.claimant,
        "epoch": at.epoch,
        "at_ms": stamp.at_ms,
        "nonce": stamp.nonce,
    }}))
}

/// How far a signed statement's `at_ms` may be from the host's clock (§13.6.3).
pub const STATEMENT_SKEW_MS_MAX: i64 = 60_000;
/// A nonce's length in characters, at least and at most.
pub const NONCE_CHARS_MIN: usize = 16;
pub const NONCE_CHARS_MAX: usize = 64;

/// Why a statement's stamp is refused.
#[derive(Debug, thiserror::Error)]
pub enum StampError {
    /// `at_ms` is too far from the host's clock.
    #[error("`at_ms` {at_ms} is more than {} s from the host's clock ({now_ms}); check the worker's clock", STATEMENT_SKEW_MS_MAX / 1000)]
    Stale { at_ms: i64, now_ms: i64 },
    /// The nonce is not 16–64 characters of `A–Z a–z 0–9 _ -`.
    #[error("`nonce` must be {NONCE_CHARS_MIN}–{NONCE_CHARS_MAX} characters of A–Z a–z 0–9 _ -")]
    BadNonce,
    /// The identity used this nonce before: a replayed statement.
    #[error("nonce `{nonce}` was already used by `{identity}`: a replayed statement is refused; sign each statement with a fresh nonce")]
    Replayed { identity: String, nonce: String },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// A fresh nonce: 128 random bits as 32 hex digits.
pub fn fresh_nonce() -> StoreResult<String> {
    let mut b = [0u8; 16];
    getrandom::fill(&mut b)
        .map_err(|e| StoreError::Fatal(format!("no randomness for a nonce: {e}")))?;
    Ok(hex::encode(b))
}

/// Whether a nonce is well formed (16–64 characters of `A–Z a–z 0–9 _ -`).
pub fn nonce_ok(nonce: &str) -> bool {
    (NONCE_CHARS_MIN..=NONCE_CHARS_MAX).contains(&nonce.len())
        && nonce
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The checks of a stamp that need no store: `at_ms` within [`STATEMENT_SKEW_MS_MAX`] of
/// `now_ms` and a well-formed nonce (cheap, so made before a signature is checked).
pub fn check_stamp(stamp: &Stamp, now_ms: i64) -> Result<(), StampError> {
    if stamp.at_ms.abs_diff(now_ms) > STATEMENT_SKEW_MS_MAX.unsigned_abs() {
        return Err(StampError::Stale {
            at_ms: stamp.at_ms,
            now_ms,
        });
    }
    if !nonce_ok(&stamp.nonce) {
        return Err(StampError::BadNonce);
    }
    Ok(())
}

/// The one freshness and replay check of a signed worker statement (§13.6.3): `at_ms`
/// within [`STATEMENT_SKEW_MS_MAX`] of `now_ms`, a well-formed nonce, and the nonce never
/// seen before from `identity` — the store's conditional insert decides, so two hosts on one
/// database agree. Call it after the signature verifies, once per statement.
pub fn spend_stamp(
    board: &dyn BoardStore,
    identity: &str,
    stamp: &Stamp,
    now_ms: i64,
) -> Result<(), StampError> {
    check_stamp(stamp, now_ms)?;
    if board.spend_nonce(identity, &stamp.nonce, stamp.at_ms, now_ms)? {
        Ok(())
    } else {
        Err(StampError::Replayed {
            identity: identity.to_string(),
            nonce: stamp.nonce.clone(),
        })
    }
}

/// Records a nonce as used (`?1` identity, `?2` nonce, `?3` the statement's `at_ms`); one
/// row inserted means it was fresh.
pub const SPEND_NONCE_SQL: &str = "INSERT INTO worker_nonces (identity, nonce, at_ms) \
     VALUES (?1, ?2, ?3) ON CONFLICT DO NOTHING";
/// Open task runs an ended attempt names, oldest first (`?1`: how many at most).
pub const ENDED_ATTEMPT_RUNS_SQL: &str = "SELECT r.id FROM runs r \
     WHERE r.state <> 'ended' AND r.trigger = 'task' AND EXISTS (\
     SELECT 1 FROM task_attempts a WHERE a.run_id = r.id \
     AND a.state NOT IN ('claimed', 'running', 'suspended')) \
     ORDER BY r.created_ms, r.id LIMIT ?1";
/// Suspended attempts whose run has ended (`?1`: the batch), oldest task first.
pub const SUSPENDED_ENDED_SQL: &str = "SELECT a.task_id, a.n, a.run_id FROM task_attempts a \
     JOIN runs r ON r.id = a.run_id WHERE a.state = 'suspended' AND r.state = 'ended' \
     ORDER BY a.task_id, a.n LIMIT ?1";
/// Forgets nonces whose statements can no longer be fresh (`?1`: the oldest `at_ms` kept).
pub const PRUNE_NONCES_SQL: &str = "DELETE FROM worker_nonces WHERE at_ms < ?1";

/// The oldest `at_ms` whose nonce must still be remembered at `now_ms`: twice the window,
/// so a statement accepted by a host whose clock runs ahead is still remembered.
pub fn nonces_kept_after(now_ms: i64) -> i64 {
    now_ms.saturating_sub(2 * STATEMENT_SKEW_MS_MAX)
}

/// One tool call of an attempt's run, sent by its claimant (§13.2): what it says,
/// canonically — the statement its claimant signs. `nonce` makes each call its own statement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AttemptCall {
    pub attempt: AttemptRef,
    pub tool: String,
    pub args: Value,
    pub at_ms: i64,
    pub nonce: String,
    /// The tokens the claimant's model spent on the turn that made this call, as it reports
    /// them; signed with the call when given (a statement without it is unchanged).
    pub usage: Option<crate::journal::TokenUsage>,
}

pub fn call_statement(c: &AttemptCall) -> StoreResult<String> {
    let mut call = serde_json::json!({
        "task": c.attempt.task_id,
        "attempt": c.attempt.n,
        "claimant": c.attempt.claimant,
        "epoch": c.attempt.epoch,
        "tool": c.tool,
        "args": c.args,
        "at_ms": c.at_ms,
        "nonce": c.nonce,
    });
    if let Some(u) = &c.usage {
        call["usage"] = serde_json::json!({
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
        });
    }
    canonical(&serde_json::json!({ "call": call }))
}

fn canonical(v: &Value) -> StoreResult<String> {
    vouch_core::canonical_json(v).map_err(|e| StoreError::Fatal(e.to_string()))
}

/// Checks an identity's signature over a statement (Ed25519 with the identity's stored public
/// key, once worker identities exist). `Err` says why it does not verify.
pub trait SignatureVerifier: Send + Sync {
    fn verify(
        &self,
        identity: &str,
        statement: &str,
        signature: Option<&str>,
    ) -> Result<(), String>;
}

/// A board that verifies every claim and report before it is written: an unsigned, badly
/// signed or replayed one (its nonce spent before, [`spend_stamp`]) is refused (`Conflict`)
/// and changes nothing; the signature is stored with the attempt.
pub struct Verified {
    pub inner: std::sync::Arc<dyn BoardStore>,
    pub verifier: std::sync::Arc<dyn SignatureVerifier>,
}

impl Verified {
    /// A statement signed in this process is checked against its own clock: only its nonce
    /// must be fresh.
    fn spend(&self, identity: &str, stamp: &Stamp, what: &str) -> StoreResult<()> {
        spend_stamp(&*self.inner, identity, stamp, stamp.at_ms).map_err(|e| match e {
            StampError::Store(e) => e,
            other => StoreError::Conflict(format!("{what} refused: {other}")),
        })
    }
}

impl BoardStore for Verified {
    fn offer(&self, task: &NewTask) -> StoreResult<Offered> {
        self.inner.offer(task)
    }
    fn task(&self, id: &str) -> StoreResult<Option<TaskRecord>> {
        self.inner.task(id)
    }
    fn tasks(&self, filter: &TaskFilter) -> StoreResult<Vec<TaskRecord>> {
        self.inner.tasks(filter)
    }
    fn attempts(&self, task_id: &str) -> StoreResult<Vec<AttemptRecord>> {
        self.inner.attempts(task_id)
    }
    fn claim(&self, req: &ClaimRequest) -> StoreResult<Option<Claim>> {
        self.verifier
            .verify(
                &req.claimant,
                &claim_statement(req)?,
                req.signature.as_deref(),
            )
            .map_err(|e| StoreError::Conflict(format!("claim refused: {e}")))?;
        let stamp = Stamp {
            at_ms: req.now_ms,
            nonce: req.nonce.clone().unwrap_or_default(),
        };
        self.spend(&req.claimant, &stamp, "claim")?;
        self.inner.claim(req)
    }
    fn heartbeat(&self, at: &AttemptRef, _now_ms: i64) -> StoreResult<Heartbeat> {
        Err(StoreError::Conflict(format!(
            "heartbeat refused: `{}` did not sign it",
            at.claimant
        )))
    }
    fn heartbeat_signed(
        &self,
        at: &AttemptRef,
        now_ms: i64,
        stamp: &Stamp,
        signature: Option<&str>,
    ) -> StoreResult<Heartbeat> {
        self.verifier
            .verify(&at.claimant, &heartbeat_statement(at, stamp)?, signature)
            .map_err(|e| StoreError::Conflict(format!("heartbeat refused: {e}")))?;
        self.spend(&at.claimant, stamp, "heartbeat")?;
        self.inner.heartbeat(at, now_ms)
    }
    fn suspend(&self, at: &AttemptRef, run_id: &str, now_ms: i64) -> StoreResult<TaskRecord> {
        self.inner.suspend(at, run_id, now_ms)
    }
    fn runs_of_ended_attempts(&self, limit: usize) -> StoreResult<Vec<String>> {
        self.inner.runs_of_ended_attempts(limit)
    }
    fn attempt_of_run(&self, run_id: &str) -> StoreResult<Option<AttemptRecord>> {
        self.inner.attempt_of_run(run_id)
    }
    fn resume_ready(&self, task_id: &str, now_ms: i64) -> StoreResult<TaskRecord> {
        self.inner.resume_ready(task_id, now_ms)
    }
    fn report(&self, report: &Report) -> StoreResult<Reported> {
        self.verifier
            .verify(
                &report.attempt.claimant,
                &report_statement(report)?,
                report.signature.as_deref(),
            )
            .map_err(|e| StoreError::Conflict(format!("report refused: {e}")))?;
        let stamp = report.stamp.clone().ok_or_else(|| {
            StoreError::Conflict("report refused: it carries no `at_ms` and `nonce`".into())
        })?;
        self.spend(&report.attempt.claimant, &stamp, "report")?;
        self.inner.report(report)
    }
    fn suspended_with_ended_runs(&self, limit: usize) -> StoreResult<Vec<(String, u32, String)>> {
        self.inner.suspended_with_ended_runs(limit)
    }
    // The host's own settlement from the run's journal: no worker statement to verify.
    fn settle_suspended(&self, report: &Report) -> StoreResult<Option<Reported>> {
        self.inner.settle_suspended(report)
    }
    fn spend_repair(&self, at: &AttemptRef) -> StoreResult<u32> {
        self.inner.spend_repair(at)
    }
    fn repairs_spent(&self, task_id: &str, n: u32) -> StoreResult<u32> {
        self.inner.repairs_spent(task_id, n)
    }
    fn cancel(&self, task_id: &str, now_ms: i64) -> StoreResult<TaskRecord> {
        self.inner.cancel(task_id, now_ms)
    }
    fn sweep(&self, now_ms: i64) -> StoreResult<SweepReport> {
        self.inner.sweep(now_ms)
    }
    fn result(&self, id: &str) -> StoreResult<Option<Value>> {
        self.inner.result(id)
    }
    fn verdicts(&self, target: &str) -> StoreResult<Vec<(String, Verdict)>> {
        self.inner.verdicts(target)
    }
    fn measures(&self, q: &MeasuresQuery) -> StoreResult<Vec<MeasureRow>> {
        self.inner.measures(q)
    }
    fn uncharged(&self, now_ms: i64) -> StoreResult<Vec<(String, u32, String)>> {
        self.inner.uncharged(now_ms)
    }
    fn charge(&self, cost: &AttemptCost) -> StoreResult<bool> {
        self.inner.charge(cost)
    }
    fn task_counts(&self) -> StoreResult<Vec<(TaskState, u64)>> {
        self.inner.task_counts()
    }
    fn spend_nonce(
        &self,
        identity: &str,
        nonce: &str,
        at_ms: i64,
        now_ms: i64,
    ) -> StoreResult<bool> {
        self.inner.spend_nonce(identity, nonce, at_ms, now_ms)
    }
}
