//! Task runs in a scenario (docs/scenarios.md, "Task runs"): the `task` object — the offer and
//! the board events around its attempts — and the `task` / `judge` report objects.
//!
//! Kept apart from the run format so another kind of task (patches, a `repo` object) can join
//! beside it without touching the run's types.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use vouch_core::board::{AttemptState, TaskState};

use crate::scenario::{CrashEvent, Turn};

/// Built-in task types (contract §13.5); any other `type` needs an `output_schema`.
pub const BUILTIN_TYPES: [&str; 2] = ["freeform", "judge"];
/// Board events per scenario at most (each may start a run).
pub const EVENTS_MAX: usize = 64;
/// Any duration in a task plan is at most this long (ten years, in milliseconds).
pub const DURATION_MS_MAX: i64 = 315_360_000_000;

fn freeform() -> String {
    "freeform".into()
}
fn one() -> u32 {
    1
}
fn three() -> u32 {
    3
}

/// The task a scenario offers, and what happens on the board around its attempts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskPlan {
    /// `freeform`, `judge` or a custom type (then `output_schema` is required).
    #[serde(rename = "type", default = "freeform")]
    pub kind: String,
    /// The task's input [`{"brief": PROMPT}`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Value>,
    /// Success criteria: a submission must carry a self-assessment (§13.4).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria: Option<Value>,
    #[serde(default = "one")]
    pub max_attempts: u32,
    /// In-session repairs of a malformed submission [3].
    #[serde(default = "three")]
    pub repairs: u32,
    /// A custom type's output schema (JSON Schema).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// A deadline this long after the offer: a task still waiting or queued then expires.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ms: Option<i64>,
    /// Offered with an idempotency key (then `offer_again` events may repeat the offer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Offered with a claim condition on a prerequisite task (then `prerequisite` events
    /// end that task).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after: Option<AfterCondition>,
    /// The board events, in order [one `run` by worker `w1`].
    #[serde(default)]
    pub events: Vec<BoardStep>,
    /// A judge task on the accepted output, offered once the events are done.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<JudgePlan>,
    /// Texts stored in the artifact store before the task is offered (as `vouch artifact
    /// put` would): a result's `artifacts` may name their content ids (§13.5).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub artifacts: Vec<String>,
    /// Input artifacts the task is offered with (§13.1.3): content ids, each of one of
    /// `artifacts` (the attempt's model reads them with `read_input`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub input_artifacts: Vec<String>,
    /// The workers' runtime profile (§13.6.3): its default context and where it goes
    /// (§13.1.2). Without it, the default profile.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<ProfilePlan>,
}

/// A runtime profile's context policy (§13.1.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfilePlan {
    /// Content ids, each of one of the task's `artifacts`.
    #[serde(default)]
    pub context: Vec<String>,
    /// `user` [default], `system` or `file`.
    #[serde(default = "user_placement")]
    pub context_placement: String,
}

fn user_placement() -> String {
    "user".into()
}

/// Reads the host journaled in the attempts' runs the board names (§13.7.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reads {
    pub context: i64,
    pub input: i64,
    pub diary: i64,
}

/// A scenario stores this many artifacts at most, each this large at most.
pub const ARTIFACTS_MAX: usize = 20;
pub const ARTIFACT_TEXT_BYTES_MAX: usize = 64 * 1024;

/// The claim condition on the prerequisite task (§13.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AfterCondition {
    TaskAccepted,
    TaskEnded,
}

/// How the prerequisite task ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PrerequisiteEnd {
    Completed,
    Failed,
    Cancelled,
}

/// A repeated offer under the same idempotency key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OfferAgain {
    /// The same request again.
    Same,
    /// A different brief under the same key.
    Different,
}

/// What a worker does once it holds the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Does {
    /// Runs the attempt as a vouch run and reports what the host decided.
    #[default]
    Run,
    /// Dies: nothing more is heard from it; its lease lapses and a sweep times it out.
    Crash,
    /// Reports a failure without running (`retryable` says whether to retry).
    Fail,
    /// Shuts down gracefully: aborts its attempt.
    Abort,
    /// Keeps heartbeating but never finishes: the running clock times the attempt out.
    Hang,
}

/// When the owner's cancel lands during a worker's attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CancelAt {
    /// After the first heartbeat, before the run starts: the next heartbeat answers
    /// `cancelled` and the worker stops.
    BeforeRun,
    /// After the run ended, before the worker reports: its report is refused.
    AfterRun,
}

/// One worker's turn at the task: it claims by id, then does what `does` says.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WorkerStep {
    pub worker: String,
    #[serde(default)]
    pub does: Does,
    /// The run's script for this attempt [the scenario's `script`] (`run`, or `crash` with
    /// `crash_after`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub script: Option<Vec<Turn>>,
    /// `crash` only: the worker runs the attempt and dies right after this journal event of
    /// its run became durable (of `delivery`, if given); the run is reconciled at the next
    /// start-up.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub crash_after: Option<CrashEvent>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<String>,
    /// `fail` only: is the failure retryable [false].
    #[serde(default)]
    pub retryable: bool,
    /// `crash` only: the worker dies before its first heartbeat (the dispatch clock).
    #[serde(default)]
    pub before_heartbeat: bool,
    /// `crash` or `hang` only: the worker was stalled, not dead; it reports a result after
    /// the sweep timed its attempt out.
    #[serde(default)]
    pub late_report: bool,
    /// `run` only: while this worker holds the attempt, another identity (not the claimant)
    /// reports a result for it — refused, nothing changes (§13.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub impostor: Option<String>,
    /// `run` only: after its run the worker stalls this long before it reports, with no
    /// sweep in between (its lease may lapse unseen).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall_ms: Option<i64>,
    /// `run` only: the owner cancels the task during this attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel: Option<CancelAt>,
    /// `run` only: the owner cancels the task while the model is answering its N-th turn of
    /// this run (1-based): the turns before it were carried out, its answer is not acted on,
    /// and the model is asked nothing more (contract §9.4.1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cancel_at_turn: Option<usize>,
}

/// One event on the board.
#[derive(Debug, Clone, PartialEq)]
pub enum BoardStep {
    Worker(WorkerStep),
    /// `{"cancel": true}`: the owner cancels the task.
    Cancel,
    /// `{"wait_ms": N}`: time passes, then a sweep runs.
    Wait(i64),
    /// `{"prerequisite": END}`: the prerequisite task ends so, then a sweep runs.
    Prerequisite(PrerequisiteEnd),
    /// `{"offer_again": "same" | "different"}`: the owner repeats the offer under its key.
    OfferAgain(OfferAgain),
    /// `{"offer": {"input_artifacts": [CID…]}}`: the owner offers another task binding these
    /// input artifacts; its answer (`created`, `refused`) joins `offers` (§13.1.3).
    Offer(Vec<String>),
}

mod shapes {
    use super::*;
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Cancel {
        pub cancel: bool,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Wait {
        pub wait_ms: i64,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Prerequisite {
        pub prerequisite: PrerequisiteEnd,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Again {
        pub offer_again: OfferAgain,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct OfferBody {
        pub input_artifacts: Vec<String>,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Offer {
        pub offer: OfferBody,
    }
}

impl<'de> Deserialize<'de> for BoardStep {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let keys = [
            "worker",
            "cancel",
            "wait_ms",
            "prerequisite",
            "offer_again",
            "offer",
        ];
        let (key, v) = crate::scenario::tagged(d, "board event", &keys)?;
        Ok(match key {
            "worker" => {
                let w: WorkerStep = crate::scenario::inner(v, "worker event")?;
                check_worker(&w).map_err(D::Error::custom)?;
                BoardStep::Worker(w)
            }
            "cancel" => {
                if !crate::scenario::inner::<shapes::Cancel, _>(v, "cancel event")?.cancel {
                    return Err(D::Error::custom("`cancel` must be true"));
                }
                BoardStep::Cancel
            }
            "wait_ms" => {
                let n = crate::scenario::inner::<shapes::Wait, _>(v, "wait event")?.wait_ms;
                if n <= 0 || n > DURATION_MS_MAX {
                    return Err(D::Error::custom(format!(
                        "`wait_ms` must be a positive number of milliseconds, at most {DURATION_MS_MAX}"
                    )));
                }
                BoardStep::Wait(n)
            }
            "prerequisite" => BoardStep::Prerequisite(
                crate::scenario::inner::<shapes::Prerequisite, _>(v, "prerequisite event")?
                    .prerequisite,
            ),
            "offer" => BoardStep::Offer(
                crate::scenario::inner::<shapes::Offer, _>(v, "offer event")?
                    .offer
                    .input_artifacts,
            ),
            _ => BoardStep::OfferAgain(
                crate::scenario::inner::<shapes::Again, _>(v, "offer_again event")?.offer_again,
            ),
        })
    }
}

/// Options that do not belong to what the worker does are errors, not silently ignored.
fn check_worker(w: &WorkerStep) -> Result<(), String> {
    if w.worker.is_empty() || w.worker.len() > 64 || w.worker == "owner" {
        return Err(format!(
            "`worker` must be a name of 1-64 characters other than `owner`, not {:?}",
            w.worker
        ));
    }
    if w.impostor
        .as_deref()
        .is_some_and(|i| i == w.worker || i.is_empty() || i.len() > 64)
    {
        return Err("`impostor` names another identity than the worker (1-64 characters)".into());
    }
    if w.stall_ms.is_some_and(|n| n <= 0 || n > DURATION_MS_MAX) {
        return Err(format!(
            "`stall_ms` must be a positive number of milliseconds, at most {DURATION_MS_MAX}"
        ));
    }
    if w.cancel_at_turn == Some(0) {
        return Err("`cancel_at_turn` counts the run's model turns from 1".into());
    }
    if w.cancel_at_turn.is_some() && (w.cancel.is_some() || w.stall_ms.is_some()) {
        return Err(
            "`cancel_at_turn` contradicts `cancel` and `stall_ms`: the run ends at the cancel, and the worker reports nothing"
                .into(),
        );
    }
    if w.stall_ms.is_some() && w.cancel.is_some() {
        return Err(
            "`stall_ms` and `cancel` contradict: say one thing that happens before the report"
                .into(),
        );
    }
    let runs = w.does == Does::Run || w.crash_after.is_some();
    if let Some(e) = w.crash_after {
        if matches!(
            e,
            CrashEvent::ApprovalRequested
                | CrashEvent::ApprovalGranted
                | CrashEvent::ApprovalDenied
        ) {
            return Err(format!(
                "`crash_after: {}` cannot happen in a task run: a run that waits for a person suspends its attempt",
                e.as_str()
            ));
        }
        if w.before_heartbeat {
            return Err("`before_heartbeat` and `crash_after` contradict: a worker that runs has heartbeaten".into());
        }
    }
    let misplaced = [
        (
            w.script.is_some() && !runs,
            "script",
            "run (or crash with crash_after)",
        ),
        (
            w.crash_after.is_some() && w.does != Does::Crash,
            "crash_after",
            "crash",
        ),
        (
            w.delivery.is_some() && w.crash_after.is_none(),
            "delivery",
            "crash with crash_after",
        ),
        (w.cancel.is_some() && w.does != Does::Run, "cancel", "run"),
        (
            w.cancel_at_turn.is_some() && w.does != Does::Run,
            "cancel_at_turn",
            "run",
        ),
        (w.retryable && w.does != Does::Fail, "retryable", "fail"),
        (
            w.before_heartbeat && w.does != Does::Crash,
            "before_heartbeat",
            "crash",
        ),
        (
            w.late_report && !matches!(w.does, Does::Crash | Does::Hang),
            "late_report",
            "crash or hang",
        ),
        (
            w.stall_ms.is_some() && w.does != Does::Run,
            "stall_ms",
            "run",
        ),
        (
            w.impostor.is_some() && w.does != Does::Run,
            "impostor",
            "run",
        ),
    ];
    for (bad, field, does) in misplaced {
        if bad {
            return Err(format!(
                "`{field}` applies only to a worker that does `{does}`"
            ));
        }
    }
    Ok(())
}

impl Serialize for BoardStep {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            BoardStep::Worker(w) => w.serialize(s),
            BoardStep::Cancel => shapes::Cancel { cancel: true }.serialize(s),
            BoardStep::Wait(n) => shapes::Wait { wait_ms: *n }.serialize(s),
            BoardStep::Prerequisite(e) => shapes::Prerequisite { prerequisite: *e }.serialize(s),
            BoardStep::OfferAgain(a) => shapes::Again { offer_again: *a }.serialize(s),
            BoardStep::Offer(ids) => shapes::Offer {
                offer: shapes::OfferBody {
                    input_artifacts: ids.clone(),
                },
            }
            .serialize(s),
        }
    }
}

/// A judge on the main task's accepted output (§13.4): the workers try to claim it in order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JudgePlan {
    pub criteria: Vec<String>,
    pub workers: Vec<String>,
    /// The judge run's script.
    pub script: Vec<Turn>,
}

impl TaskPlan {
    /// The events with the documented default applied.
    pub fn events(&self) -> Vec<BoardStep> {
        if self.events.is_empty() {
            vec![BoardStep::Worker(WorkerStep {
                worker: "w1".into(),
                does: Does::Run,
                script: None,
                crash_after: None,
                delivery: None,
                retryable: false,
                before_heartbeat: false,
                late_report: false,
                stall_ms: None,
                impostor: None,
                cancel: None,
                cancel_at_turn: None,
            })]
        } else {
            self.events.clone()
        }
    }

    /// Checks across fields (each error names the field).
    pub fn check(&self) -> Result<(), String> {
        if !(1..=20).contains(&self.max_attempts) {
            return Err(format!(
                "task.max_attempts must be between 1 and 20, not {}",
                self.max_attempts
            ));
        }
        if self.repairs > 20 {
            return Err("task.repairs must be at most 20".into());
        }
        let k = &self.kind;
        if k.is_empty()
            || k.len() > 64
            || !k
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        {
            return Err(format!(
                "task.type {k:?} must be 1-64 letters, digits, `-` or `_` (a type's name)"
            ));
        }
        if self.output_schema.as_ref().is_some_and(|v| !v.is_object()) {
            return Err("task.output_schema must be a JSON Schema object".into());
        }
        let builtin = BUILTIN_TYPES.contains(&self.kind.as_str());
        if builtin && self.output_schema.is_some() {
            return Err(format!(
                "task.output_schema is for custom types; `{}` is built in",
                self.kind
            ));
        }
        if !builtin && self.output_schema.is_none() {
            return Err(format!(
                "task.type `{}` is not built in (freeform, judge): give its task.output_schema",
                self.kind
            ));
        }
        if self.kind == "judge" {
            return Err(
                "task.type `judge` needs a target: use task.judge on a freeform task".into(),
            );
        }
        if self.artifacts.len() > ARTIFACTS_MAX
            || self
                .artifacts
                .iter()
                .any(|a| a.len() > ARTIFACT_TEXT_BYTES_MAX)
        {
            return Err(format!(
                "task.artifacts holds at most {ARTIFACTS_MAX} texts of at most {ARTIFACT_TEXT_BYTES_MAX} bytes each"
            ));
        }
        if self.input_artifacts.len() > ARTIFACTS_MAX {
            return Err(format!(
                "task.input_artifacts holds at most {ARTIFACTS_MAX} content ids"
            ));
        }
        let stored: Vec<String> = self
            .artifacts
            .iter()
            .map(|a| format!("sha256:{}", vouch_core::sha256_hex(a.as_bytes())))
            .collect();
        let profile_context = self.profile.iter().flat_map(|p| p.context.iter());
        if let Some(c) = self
            .input_artifacts
            .iter()
            .chain(profile_context)
            .find(|c| !stored.contains(c))
        {
            return Err(format!(
                "task.input_artifacts and task.profile.context name content ids of task.artifacts; {c} is none of them (an unknown id is an `offer` event's)"
            ));
        }
        if let Some(p) = &self.profile {
            if !["user", "system", "file"].contains(&p.context_placement.as_str()) {
                return Err("task.profile.context_placement must be user, system or file".into());
            }
            if p.context.len() > ARTIFACTS_MAX {
                return Err(format!(
                    "task.profile.context holds at most {ARTIFACTS_MAX} content ids"
                ));
            }
        }
        if self.events.len() > EVENTS_MAX {
            return Err(format!("task.events has more than {EVENTS_MAX} events"));
        }
        if self
            .deadline_ms
            .is_some_and(|d| d <= 0 || d > DURATION_MS_MAX)
        {
            return Err(format!(
                "task.deadline_ms must be a positive number of milliseconds, at most {DURATION_MS_MAX}"
            ));
        }
        for e in &self.events {
            match e {
                BoardStep::Prerequisite(_) if self.after.is_none() => {
                    return Err("a `prerequisite` event needs task.after".into())
                }
                BoardStep::OfferAgain(_) if self.idempotency_key.is_none() => {
                    return Err("an `offer_again` event needs task.idempotency_key".into())
                }
                _ => {}
            }
        }
        if let Some(j) = &self.judge {
            if j.workers.is_empty() || j.criteria.is_empty() {
                return Err("task.judge needs at least one worker and one criterion".into());
            }
            if j.workers.len() > EVENTS_MAX
                || j.workers.iter().any(|w| w.is_empty() || w.len() > 64)
            {
                return Err(format!(
                    "task.judge.workers: at most {EVENTS_MAX} names of 1-64 characters"
                ));
            }
        }
        Ok(())
    }
}

/// One attempt as the board records it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptReport {
    pub n: u32,
    pub state: AttemptState,
    /// The worker that held (or last held) the attempt's lease.
    pub claimant: String,
}

/// A call the board answered with nothing (an empty claim) or refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TurnedAway {
    /// A worker's name, or `owner`.
    pub by: String,
    /// `claim`, `report` or `cancel`.
    pub call: String,
}

/// The `task` (and `judge`) object of the output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskReport {
    pub state: TaskState,
    pub attempts: Vec<AttemptReport>,
    pub accepted_attempt: Option<u32>,
    /// Empty claims and refused calls, in order.
    #[serde(default)]
    pub turned_away: Vec<TurnedAway>,
    /// With an idempotency key: each offer's answer (`created`, `existing`, `refused`); and
    /// each `offer` event's answer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub offers: Vec<String>,
    /// With input artifacts or a profile: the reads of the task's attempts (§13.7.3).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<Reads>,
}

/// `expect.task` / `expect.judge`: any subset of the report's task fields.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectTask {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<TaskState>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempts: Option<Vec<AttemptReport>>,
    #[serde(
        default,
        deserialize_with = "crate::scenario::some",
        skip_serializing_if = "Option::is_none"
    )]
    pub accepted_attempt: Option<Option<u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turned_away: Option<Vec<TurnedAway>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offers: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reads: Option<Reads>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use crate::load::parse_scenario;
    use std::path::Path;

    fn parse(text: &str) -> Result<crate::Scenario, String> {
        parse_scenario(Path::new("t.json"), text).map_err(|e| e.to_string())
    }

    const BASE: &str = r#""id": "t", "trigger": {"kind": "task"}, "script": [{"declare": {"deliveries": []}}, {"submit": {"summary": "s"}, "self_assessment": {"ok": true}}]"#;

    #[test]
    fn a_task_run_parses_with_its_defaults() {
        let s = parse(&format!(r#"{{{BASE}, "task": {{}}}}"#)).unwrap();
        let t = s.task.unwrap();
        assert_eq!(
            (t.kind.as_str(), t.max_attempts, t.repairs),
            ("freeform", 1, 3)
        );
        assert_eq!(t.events().len(), 1);
        assert!(matches!(
            s.script[1],
            crate::Turn::Submit {
                self_assessment: Some(_),
                ..
            }
        ));
    }

    #[test]
    fn unknown_and_misplaced_fields_are_errors_naming_the_field() {
        for (task, needle) in [
            (r#"{"max_attempt": 2}"#, "max_attempt"),
            (
                r#"{"events": [{"worker": "w1", "does": "explode"}]}"#,
                "explode",
            ),
            (
                r#"{"events": [{"worker": "w1", "retryable": true}]}"#,
                "retryable",
            ),
            (
                r#"{"events": [{"worker": "w1", "does": "fail", "script": []}]}"#,
                "script",
            ),
            (
                r#"{"events": [{"worker": "w1", "late_report": true}]}"#,
                "late_report",
            ),
            (
                r#"{"events": [{"worker": "w1", "crash_after": "evidence"}]}"#,
                "crash_after",
            ),
            (
                r#"{"events": [{"worker": "w1", "does": "crash", "script": []}]}"#,
                "script",
            ),
            (
                r#"{"events": [{"worker": "w1", "does": "crash", "delivery": "d1"}]}"#,
                "delivery",
            ),
            (
                r#"{"events": [{"worker": "w1", "does": "crash", "crash_after": "approval_requested"}]}"#,
                "suspends",
            ),
            (
                r#"{"events": [{"worker": "w1", "does": "crash", "crash_after": "terminal", "before_heartbeat": true}]}"#,
                "contradict",
            ),
            (r#"{"events": [{"worker": "owner"}]}"#, "owner"),
            (
                r#"{"events": [{"worker": "w1", "impostor": "w1"}]}"#,
                "impostor",
            ),
            (
                r#"{"events": [{"worker": "w1", "does": "abort", "impostor": "m"}]}"#,
                "impostor",
            ),
            (r#"{"events": [{"wait_ms": 0}]}"#, "wait_ms"),
            (
                r#"{"events": [{"wait_ms": 9223372036854775807}]}"#,
                "wait_ms",
            ),
            (r#"{"deadline_ms": 9223372036854775807}"#, "deadline_ms"),
            (
                r#"{"events": [{"worker": "w1", "stall_ms": 9223372036854775807}]}"#,
                "stall_ms",
            ),
            (r#"{"events": [{"cancel": false}]}"#, "cancel"),
            (
                r#"{"events": [{"worker": "w1", "cancel_at_turn": 0}]}"#,
                "counts the run's model turns from 1",
            ),
            (
                r#"{"events": [{"worker": "w1", "cancel_at_turn": 3}]}"#,
                "does not have (it has 2)",
            ),
            (
                r#"{"events": [{"worker": "w1", "cancel_at_turn": 1, "cancel": "after_run"}]}"#,
                "contradicts",
            ),
            (r#"{"events": [{"pause": 1}]}"#, "pause"),
            (
                r#"{"events": [{"prerequisite": "completed"}]}"#,
                "task.after",
            ),
            (
                r#"{"events": [{"offer_again": "same"}]}"#,
                "idempotency_key",
            ),
            (r#"{"max_attempts": 21}"#, "max_attempts"),
            (r#"{"type": "haiku"}"#, "output_schema"),
            (r#"{"type": "judge"}"#, "task.judge"),
            (r#"{"output_schema": {}}"#, "built in"),
            (r#"{"type": "../x", "output_schema": {}}"#, "task.type"),
            (r#"{"type": "x", "output_schema": 5}"#, "JSON Schema object"),
            (
                r#"{"input_artifacts": ["sha256:0000000000000000000000000000000000000000000000000000000000000000"]}"#,
                "none of them",
            ),
            (
                r#"{"profile": {"context_placement": "clipboard"}}"#,
                "context_placement",
            ),
            (r#"{"profile": {"context": [], "extra": 1}}"#, "extra"),
            (
                r#"{"events": [{"offer": {"input_artifacts": ["x"], "brief": "b"}}]}"#,
                "brief",
            ),
        ] {
            let e = parse(&format!(r#"{{{BASE}, "task": {task}}}"#)).unwrap_err();
            assert!(e.contains(needle), "{task}: {e}");
        }
    }

    #[test]
    fn task_runs_refuse_what_they_cannot_carry() {
        let e = parse(r#"{"id": "t", "script": [{"submit": {}}]}"#).unwrap_err();
        assert!(e.contains("`submit` turn needs a `task`"), "{e}");
        let e = parse(r#"{"id": "t", "task": {}}"#).unwrap_err();
        assert!(e.contains("trigger.kind"), "{e}");
        let e = parse(&format!(
            r#"{{{BASE}, "task": {{}}, "decisions": [{{"approve": "d1"}}]}}"#
        ))
        .unwrap_err();
        assert!(e.contains("decisions"), "{e}");
        let e = parse(&format!(
            r#"{{{BASE}, "task": {{}}, "faults": [{{"crash_after": "terminal"}}]}}"#
        ))
        .unwrap_err();
        assert!(e.contains("faults"), "{e}");
    }
}
