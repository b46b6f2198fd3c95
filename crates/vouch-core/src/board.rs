//! The task board's two state machines (§13.3) and claim conditions (§13.2), pure.
//!
//! A task and its attempts move together: [`step`] takes what the store read (a
//! [`TaskSnapshot`], under its row lock or single writer) and one [`BoardEvent`], and answers
//! the task's next state and what happens to its latest attempt — or why the event is
//! refused. Every store writes exactly this answer with a guarded, conditional update, so the
//! rules live here once and are property-tested: final states are absorbing, cancel wins, and
//! an ended attempt never changes again (history is never rewritten).

use serde::{Deserialize, Serialize};

/// Max attempts are bounded (§13.1).
pub const MAX_ATTEMPTS_MIN: u32 = 1;
pub const MAX_ATTEMPTS_MAX: u32 = 20;
/// Graceful shutdowns (aborts) never use up the task's attempts (§13.3 "always retryable"),
/// but a task is not re-offered forever: after this many aborts an abort fails it.
pub const ABORTS_MAX: u32 = 20;

/// Defaults (§13.3).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 1;
pub const DEFAULT_LEASE_MS: i64 = 300_000;
pub const DEFAULT_HEARTBEAT_MS: i64 = 60_000;
pub const DEFAULT_DISPATCH_TIMEOUT_MS: i64 = 300_000;
pub const DEFAULT_RUNNING_TIMEOUT_MS: i64 = 7_200_000;
/// Bounded in-session repairs of a malformed submission (§13.4).
pub const DEFAULT_REPAIRS_MAX: u32 = 3;

macro_rules! names {
    ($ty:ident { $($v:ident = $s:literal),* $(,)? }) => {
        impl $ty {
            pub const ALL: &'static [$ty] = &[$($ty::$v),*];
            pub fn as_str(self) -> &'static str {
                match self { $($ty::$v => $s),* }
            }
            pub fn parse(s: &str) -> Option<$ty> {
                match s { $($s => Some($ty::$v),)* _ => None }
            }
        }
        impl std::fmt::Display for $ty {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    Waiting,
    Queued,
    Dispatched,
    Running,
    Completed,
    Failed,
    Cancelled,
    Expired,
}

names!(TaskState {
    Waiting = "waiting",
    Queued = "queued",
    Dispatched = "dispatched",
    Running = "running",
    Completed = "completed",
    Failed = "failed",
    Cancelled = "cancelled",
    Expired = "expired",
});

impl TaskState {
    pub fn is_final(self) -> bool {
        matches!(
            self,
            TaskState::Completed | TaskState::Failed | TaskState::Cancelled | TaskState::Expired
        )
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AttemptState {
    Claimed,
    Running,
    Suspended,
    Completed,
    Failed,
    Cancelled,
    Aborted,
    TimedOut,
}

names!(AttemptState {
    Claimed = "claimed",
    Running = "running",
    Suspended = "suspended",
    Completed = "completed",
    Failed = "failed",
    Cancelled = "cancelled",
    Aborted = "aborted",
    TimedOut = "timed_out",
});

impl AttemptState {
    pub fn is_final(self) -> bool {
        !matches!(
            self,
            AttemptState::Claimed | AttemptState::Running | AttemptState::Suspended
        )
    }
    /// Holds a lease (a worker is on it): claimed or running.
    pub fn is_leased(self) -> bool {
        matches!(self, AttemptState::Claimed | AttemptState::Running)
    }
}

/// How a live attempt ends without a cancel.
/// Why an attempt failed, as whoever saw it says (§13.3.2): recorded on the attempt and
/// counted in the measures. It never decides a retry: `retryable` stays explicit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureClass {
    /// The model server was unreachable, overloaded, failing or refusing the request.
    ModelOutage,
    /// A tool, the host or the worker's own machinery failed the run.
    ToolError,
    /// Every submission was malformed: the repairs were spent.
    MalformedOutput,
    /// The runtime profile refused the work (its recorded policy, a tool it does not allow).
    PolicyRefusal,
    /// The worker stopped answering: no first heartbeat, or its lease lapsed.
    WorkerCrash,
}

impl FailureClass {
    pub const ALL: [FailureClass; 5] = [
        FailureClass::ModelOutage,
        FailureClass::ToolError,
        FailureClass::MalformedOutput,
        FailureClass::PolicyRefusal,
        FailureClass::WorkerCrash,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            FailureClass::ModelOutage => "model_outage",
            FailureClass::ToolError => "tool_error",
            FailureClass::MalformedOutput => "malformed_output",
            FailureClass::PolicyRefusal => "policy_refusal",
            FailureClass::WorkerCrash => "worker_crash",
        }
    }

    pub fn parse(s: &str) -> Option<FailureClass> {
        FailureClass::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "end")]
pub enum AttemptEnd {
    /// The board accepted the submitted result.
    Accepted,
    /// The worker reported a failure; retried only when `retryable` (§13.3).
    Failed { retryable: bool },
    /// The worker shut down: always retryable, and not counted against max attempts.
    Aborted,
    /// One of the three clocks ran out (dispatch, lease, running).
    TimedOut,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "event")]
pub enum BoardEvent {
    /// The claim condition became true: `waiting → queued`.
    Promote,
    /// A worker claims the task: a new attempt, or the suspended one as a resumption.
    Claim,
    /// The claimant's heartbeat: the first moves `dispatched → running`.
    Heartbeat,
    /// The attempt's run waits for a person: the lease is released, the clocks stop.
    Suspend,
    /// The person decided: the suspended attempt is claimable again as a resumption.
    ResumeReady,
    /// The live attempt ends.
    End(AttemptEnd),
    /// The suspended attempt's run ended while the attempt waited (start-up recovery or
    /// another host ended it after the decision, before anyone resumed it): the attempt ends
    /// as its run's end says, decided by the host, never by a worker (§13.3).
    RunEnded(AttemptEnd),
    /// The owner cancels the task (wins every race).
    Cancel,
    /// The deadline passed while the task waited for a claim.
    Expire,
}

/// What the store read about a task, enough to decide any event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct TaskSnapshot {
    pub state: TaskState,
    /// Attempts made so far (attempt numbers run 1..=attempts).
    pub attempts: u32,
    /// Of those, how many were aborts (not counted against `max_attempts`).
    pub aborts: u32,
    pub max_attempts: u32,
    /// The state of attempt number `attempts`, if there is one.
    pub latest: Option<AttemptState>,
}

impl TaskSnapshot {
    /// Attempts that count against `max_attempts`.
    pub fn counted(&self) -> u32 {
        self.attempts.saturating_sub(self.aborts)
    }
    /// A queued task whose latest attempt is suspended waits to be resumed, not retried.
    pub fn is_resumption(&self) -> bool {
        self.state == TaskState::Queued && self.latest == Some(AttemptState::Suspended)
    }
}

/// What happens to the latest attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "attempt")]
pub enum AttemptChange {
    /// Nothing.
    Unchanged,
    /// A new attempt number `attempts + 1` starts `claimed` under a fresh lease.
    New,
    /// The latest attempt moves to this state (possibly the same, e.g. a later heartbeat).
    To { state: AttemptState },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Transition {
    pub task: TaskState,
    pub attempt: AttemptChange,
    /// The event counts as an abort (see [`ABORTS_MAX`]).
    pub abort: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("the task is already {0}; nothing can change it")]
    TaskFinal(TaskState),
    #[error("the attempt already ended ({0}); a late report or heartbeat changes nothing")]
    AttemptEnded(AttemptState),
    #[error("no attempts remain")]
    NoAttemptsLeft,
    #[error("`{event}` does not apply to a {task} task")]
    NotApplicable {
        event: &'static str,
        task: TaskState,
    },
}

fn event_name(e: BoardEvent) -> &'static str {
    match e {
        BoardEvent::Promote => "promote",
        BoardEvent::Claim => "claim",
        BoardEvent::Heartbeat => "heartbeat",
        BoardEvent::Suspend => "suspend",
        BoardEvent::ResumeReady => "resume",
        BoardEvent::End(AttemptEnd::Accepted) => "accept",
        BoardEvent::End(AttemptEnd::Failed { .. }) => "fail",
        BoardEvent::End(AttemptEnd::Aborted) => "abort",
        BoardEvent::End(AttemptEnd::TimedOut) => "time out",
        BoardEvent::RunEnded(_) => "settle",
        BoardEvent::Cancel => "cancel",
        BoardEvent::Expire => "expire",
    }
}

/// The one transition function of the board (§13.3).
pub fn step(s: &TaskSnapshot, ev: BoardEvent) -> Result<Transition, Refused> {
    let to = |task: TaskState, attempt: AttemptChange| Transition {
        task,
        attempt,
        abort: false,
    };
    let not_applicable = || Refused::NotApplicable {
        event: event_name(ev),
        task: s.state,
    };
    if s.state.is_final() {
        // Final states are absorbing; a worker's late word gets the attempt's own answer.
        return Err(match (ev, s.latest) {
            (
                BoardEvent::Heartbeat
                | BoardEvent::Suspend
                | BoardEvent::End(_)
                | BoardEvent::RunEnded(_),
                Some(a),
            ) if a.is_final() => Refused::AttemptEnded(a),
            _ => Refused::TaskFinal(s.state),
        });
    }
    let live = s.latest.filter(|a| !a.is_final());
    match ev {
        BoardEvent::Cancel => Ok(to(
            TaskState::Cancelled,
            match live {
                Some(_) => AttemptChange::To {
                    state: AttemptState::Cancelled,
                },
                None => AttemptChange::Unchanged,
            },
        )),
        BoardEvent::Promote => match s.state {
            TaskState::Waiting => Ok(to(TaskState::Queued, AttemptChange::Unchanged)),
            _ => Err(not_applicable()),
        },
        BoardEvent::Expire => match s.state {
            TaskState::Waiting | TaskState::Queued => Ok(to(
                TaskState::Expired,
                match live {
                    // A resumption that nobody took in time: its attempt ran out of time.
                    Some(_) => AttemptChange::To {
                        state: AttemptState::TimedOut,
                    },
                    None => AttemptChange::Unchanged,
                },
            )),
            _ => Err(not_applicable()),
        },
        BoardEvent::Claim => match (s.state, live) {
            (TaskState::Queued, Some(AttemptState::Suspended)) => Ok(to(
                TaskState::Dispatched,
                AttemptChange::To {
                    state: AttemptState::Claimed,
                },
            )),
            (TaskState::Queued, None) if s.counted() < s.max_attempts => {
                Ok(to(TaskState::Dispatched, AttemptChange::New))
            }
            (TaskState::Queued, None) => Err(Refused::NoAttemptsLeft),
            _ => Err(not_applicable()),
        },
        BoardEvent::Heartbeat | BoardEvent::Suspend | BoardEvent::End(_) => {
            if live.filter(|a| a.is_leased()).is_none() {
                return Err(match s.latest {
                    Some(a) if a.is_final() => Refused::AttemptEnded(a),
                    _ => not_applicable(),
                });
            }
            match ev {
                BoardEvent::Heartbeat => Ok(to(
                    TaskState::Running,
                    AttemptChange::To {
                        state: AttemptState::Running,
                    },
                )),
                // The task keeps a live attempt: it stays `running` until the person decides.
                BoardEvent::Suspend => Ok(to(
                    TaskState::Running,
                    AttemptChange::To {
                        state: AttemptState::Suspended,
                    },
                )),
                BoardEvent::End(end) => Ok(end_attempt(s, end)),
                _ => Err(not_applicable()),
            }
        }
        BoardEvent::ResumeReady => match (s.state, live) {
            (TaskState::Running, Some(AttemptState::Suspended)) => {
                Ok(to(TaskState::Queued, AttemptChange::Unchanged))
            }
            _ => Err(not_applicable()),
        },
        // Waiting for the person, or queued as a resumption nobody has claimed yet.
        BoardEvent::RunEnded(end) => match live {
            Some(AttemptState::Suspended) => Ok(end_attempt(s, end)),
            _ => Err(match s.latest {
                Some(a) if a.is_final() => Refused::AttemptEnded(a),
                _ => not_applicable(),
            }),
        },
    }
}

fn end_attempt(s: &TaskSnapshot, end: AttemptEnd) -> Transition {
    let remains = s.counted() < s.max_attempts;
    let (attempt, task, abort) = match end {
        AttemptEnd::Accepted => (AttemptState::Completed, TaskState::Completed, false),
        AttemptEnd::Failed { retryable } => (
            AttemptState::Failed,
            if retryable && remains {
                TaskState::Queued
            } else {
                TaskState::Failed
            },
            false,
        ),
        AttemptEnd::Aborted => (
            AttemptState::Aborted,
            // This attempt is not counted, so the same number of attempts remain.
            if s.aborts < ABORTS_MAX {
                TaskState::Queued
            } else {
                TaskState::Failed
            },
            true,
        ),
        AttemptEnd::TimedOut => (
            AttemptState::TimedOut,
            if remains {
                TaskState::Queued
            } else {
                TaskState::Failed
            },
            false,
        ),
    };
    Transition {
        task,
        attempt: AttemptChange::To { state: attempt },
        abort,
    }
}

/// Apply a transition to a snapshot: what the store will read back after writing it.
pub fn apply(s: &TaskSnapshot, t: &Transition) -> TaskSnapshot {
    let mut next = *s;
    next.state = t.task;
    match t.attempt {
        AttemptChange::Unchanged => {}
        AttemptChange::New => {
            next.attempts += 1;
            next.latest = Some(AttemptState::Claimed);
        }
        AttemptChange::To { state } => next.latest = Some(state),
    }
    if t.abort {
        next.aborts += 1;
    }
    next
}

/// Bound-check max attempts (§13.1); the error says what to do.
pub fn check_max_attempts(n: u32) -> Result<u32, String> {
    if (MAX_ATTEMPTS_MIN..=MAX_ATTEMPTS_MAX).contains(&n) {
        Ok(n)
    } else {
        Err(format!(
            "max attempts must be between {MAX_ATTEMPTS_MIN} and {MAX_ATTEMPTS_MAX}, not {n}"
        ))
    }
}

/// A claim condition (§13.2): a task whose condition is false waits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Condition {
    /// The named task completed with an accepted output.
    TaskAccepted(String),
    /// The named task reached any final state.
    TaskEnded(String),
    All(Vec<Condition>),
    Any(Vec<Condition>),
}

/// Nesting and size bounds of a condition.
pub const CONDITION_DEPTH_MAX: usize = 8;
pub const CONDITION_TASKS_MAX: usize = 100;

impl Condition {
    /// Every task the condition names, in order of appearance.
    pub fn tasks(&self) -> Vec<&str> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }
    fn collect<'a>(&'a self, out: &mut Vec<&'a str>) {
        match self {
            Condition::TaskAccepted(t) | Condition::TaskEnded(t) => out.push(t),
            Condition::All(cs) | Condition::Any(cs) => cs.iter().for_each(|c| c.collect(out)),
        }
    }
    fn depth(&self) -> usize {
        match self {
            Condition::TaskAccepted(_) | Condition::TaskEnded(_) => 1,
            Condition::All(cs) | Condition::Any(cs) => {
                1 + cs.iter().map(Condition::depth).max().unwrap_or(0)
            }
        }
    }
    pub fn check(&self) -> Result<(), String> {
        if self.depth() > CONDITION_DEPTH_MAX {
            return Err(format!(
                "a claim condition may nest at most {CONDITION_DEPTH_MAX} deep"
            ));
        }
        if self.tasks().len() > CONDITION_TASKS_MAX {
            return Err(format!(
                "a claim condition may name at most {CONDITION_TASKS_MAX} tasks"
            ));
        }
        Ok(())
    }
    /// Evaluate against the named tasks' states; an unknown task never satisfies.
    /// `all[]` is true and `any[]` false, as in logic.
    pub fn holds(&self, state_of: &dyn Fn(&str) -> Option<TaskState>) -> bool {
        match self {
            Condition::TaskAccepted(t) => state_of(t) == Some(TaskState::Completed),
            Condition::TaskEnded(t) => state_of(t).is_some_and(TaskState::is_final),
            Condition::All(cs) => cs.iter().all(|c| c.holds(state_of)),
            Condition::Any(cs) => cs.iter().any(|c| c.holds(state_of)),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;

    fn fresh(max: u32) -> TaskSnapshot {
        TaskSnapshot {
            state: TaskState::Queued,
            attempts: 0,
            aborts: 0,
            max_attempts: max,
            latest: None,
        }
    }

    fn run(s: &mut TaskSnapshot, ev: BoardEvent) -> Result<Transition, Refused> {
        let t = step(s, ev)?;
        *s = apply(s, &t);
        Ok(t)
    }

    #[test]
    fn the_happy_path() {
        let mut s = fresh(1);
        run(&mut s, BoardEvent::Claim).unwrap();
        assert_eq!(
            (s.state, s.latest),
            (TaskState::Dispatched, Some(AttemptState::Claimed))
        );
        run(&mut s, BoardEvent::Heartbeat).unwrap();
        assert_eq!(
            (s.state, s.latest),
            (TaskState::Running, Some(AttemptState::Running))
        );
        run(&mut s, BoardEvent::End(AttemptEnd::Accepted)).unwrap();
        assert_eq!(
            (s.state, s.latest),
            (TaskState::Completed, Some(AttemptState::Completed))
        );
        assert_eq!(
            step(&s, BoardEvent::End(AttemptEnd::Accepted)),
            Err(Refused::AttemptEnded(AttemptState::Completed))
        );
    }

    #[test]
    fn retries_only_when_retryable_and_attempts_remain() {
        let mut s = fresh(2);
        run(&mut s, BoardEvent::Claim).unwrap();
        run(
            &mut s,
            BoardEvent::End(AttemptEnd::Failed { retryable: false }),
        )
        .unwrap();
        assert_eq!(s.state, TaskState::Failed);

        let mut s = fresh(2);
        run(&mut s, BoardEvent::Claim).unwrap();
        run(
            &mut s,
            BoardEvent::End(AttemptEnd::Failed { retryable: true }),
        )
        .unwrap();
        assert_eq!(s.state, TaskState::Queued);
        run(&mut s, BoardEvent::Claim).unwrap();
        assert_eq!(s.attempts, 2);
        run(&mut s, BoardEvent::End(AttemptEnd::TimedOut)).unwrap();
        assert_eq!(s.state, TaskState::Failed);
    }

    #[test]
    fn aborts_do_not_use_up_attempts() {
        let mut s = fresh(1);
        run(&mut s, BoardEvent::Claim).unwrap();
        run(&mut s, BoardEvent::End(AttemptEnd::Aborted)).unwrap();
        assert_eq!(s.state, TaskState::Queued);
        run(&mut s, BoardEvent::Claim).unwrap();
        assert_eq!((s.attempts, s.counted()), (2, 1));
        run(&mut s, BoardEvent::End(AttemptEnd::Accepted)).unwrap();
        assert_eq!(s.state, TaskState::Completed);
    }

    #[test]
    fn aborts_are_bounded() {
        let mut s = fresh(1);
        for _ in 0..ABORTS_MAX {
            run(&mut s, BoardEvent::Claim).unwrap();
            run(&mut s, BoardEvent::End(AttemptEnd::Aborted)).unwrap();
            assert_eq!(s.state, TaskState::Queued);
        }
        run(&mut s, BoardEvent::Claim).unwrap();
        run(&mut s, BoardEvent::End(AttemptEnd::Aborted)).unwrap();
        assert_eq!(s.state, TaskState::Failed);
    }

    #[test]
    fn suspend_and_resume_keep_the_attempt() {
        let mut s = fresh(1);
        run(&mut s, BoardEvent::Claim).unwrap();
        run(&mut s, BoardEvent::Heartbeat).unwrap();
        run(&mut s, BoardEvent::Suspend).unwrap();
        assert_eq!(
            (s.state, s.latest),
            (TaskState::Running, Some(AttemptState::Suspended))
        );
        // Nobody may claim it until the person decides.
        assert!(step(&s, BoardEvent::Claim).is_err());
        assert!(step(&s, BoardEvent::Heartbeat).is_err());
        run(&mut s, BoardEvent::ResumeReady).unwrap();
        assert!(s.is_resumption());
        let t = run(&mut s, BoardEvent::Claim).unwrap();
        assert_eq!(
            t.attempt,
            AttemptChange::To {
                state: AttemptState::Claimed
            }
        );
        assert_eq!(s.attempts, 1);
        run(&mut s, BoardEvent::End(AttemptEnd::Accepted)).unwrap();
        assert_eq!(s.state, TaskState::Completed);
    }

    #[test]
    fn a_suspended_attempt_ends_with_its_run() {
        let mut s = fresh(2);
        run(&mut s, BoardEvent::Claim).unwrap();
        // Only a suspended attempt: a live one is its worker's to report.
        assert!(step(&s, BoardEvent::RunEnded(AttemptEnd::Accepted)).is_err());
        run(&mut s, BoardEvent::Suspend).unwrap();
        run(
            &mut s,
            BoardEvent::RunEnded(AttemptEnd::Failed { retryable: true }),
        )
        .unwrap();
        assert_eq!(
            (s.state, s.latest),
            (TaskState::Queued, Some(AttemptState::Failed))
        );
        // Queued as a resumption, its run already ended: the same, and the task completes.
        run(&mut s, BoardEvent::Claim).unwrap();
        run(&mut s, BoardEvent::Suspend).unwrap();
        run(&mut s, BoardEvent::ResumeReady).unwrap();
        run(&mut s, BoardEvent::RunEnded(AttemptEnd::Accepted)).unwrap();
        assert_eq!(s.state, TaskState::Completed);
        assert_eq!(
            step(&s, BoardEvent::RunEnded(AttemptEnd::Accepted)),
            Err(Refused::AttemptEnded(AttemptState::Completed))
        );
    }

    #[test]
    fn cancel_ends_the_live_attempt_and_refuses_what_follows() {
        let mut s = fresh(3);
        run(&mut s, BoardEvent::Claim).unwrap();
        run(&mut s, BoardEvent::Cancel).unwrap();
        assert_eq!(
            (s.state, s.latest),
            (TaskState::Cancelled, Some(AttemptState::Cancelled))
        );
        assert_eq!(
            step(&s, BoardEvent::End(AttemptEnd::Accepted)),
            Err(Refused::AttemptEnded(AttemptState::Cancelled))
        );
        assert_eq!(
            step(&s, BoardEvent::Cancel),
            Err(Refused::TaskFinal(TaskState::Cancelled))
        );
    }

    #[test]
    fn conditions() {
        let states = |t: &str| match t {
            "a" => Some(TaskState::Completed),
            "b" => Some(TaskState::Failed),
            "c" => Some(TaskState::Running),
            _ => None,
        };
        use Condition::*;
        assert!(TaskAccepted("a".into()).holds(&states));
        assert!(!TaskAccepted("b".into()).holds(&states));
        assert!(TaskEnded("b".into()).holds(&states));
        assert!(!TaskEnded("c".into()).holds(&states));
        assert!(!TaskEnded("zz".into()).holds(&states));
        assert!(All(vec![]).holds(&states));
        assert!(!Any(vec![]).holds(&states));
        assert!(Any(vec![TaskEnded("c".into()), TaskEnded("b".into())]).holds(&states));
        assert!(!All(vec![TaskEnded("c".into()), TaskEnded("b".into())]).holds(&states));
        let c: Condition = serde_json::from_str(r#"{"all":[{"task_accepted":"a"}]}"#).unwrap();
        assert_eq!(c, All(vec![TaskAccepted("a".into())]));
        assert_eq!(c.tasks(), vec!["a"]);
        let mut deep = TaskEnded("x".into());
        for _ in 0..CONDITION_DEPTH_MAX {
            deep = All(vec![deep]);
        }
        assert!(deep.check().is_err());
    }

    #[test]
    fn max_attempts_bounds() {
        assert!(check_max_attempts(0).is_err());
        assert!(check_max_attempts(21).is_err());
        assert_eq!(check_max_attempts(20), Ok(20));
    }

    fn event() -> impl Strategy<Value = BoardEvent> {
        prop_oneof![
            Just(BoardEvent::Promote),
            Just(BoardEvent::Claim),
            Just(BoardEvent::Heartbeat),
            Just(BoardEvent::Suspend),
            Just(BoardEvent::ResumeReady),
            Just(BoardEvent::End(AttemptEnd::Accepted)),
            any::<bool>().prop_map(|r| BoardEvent::End(AttemptEnd::Failed { retryable: r })),
            Just(BoardEvent::End(AttemptEnd::Aborted)),
            Just(BoardEvent::End(AttemptEnd::TimedOut)),
            Just(BoardEvent::RunEnded(AttemptEnd::Accepted)),
            any::<bool>().prop_map(|r| BoardEvent::RunEnded(AttemptEnd::Failed { retryable: r })),
            Just(BoardEvent::Cancel),
            Just(BoardEvent::Expire),
        ]
    }

    proptest! {
        /// Any sequence of events: final task states never change, a cancel (when applied)
        /// leaves the task cancelled for good, ended attempts never change, attempt numbers
        /// only grow, a refused event changes nothing, and counted attempts stay bounded.
        #[test]
        fn the_machines_hold_their_invariants(
            max in 1u32..5,
            waiting in any::<bool>(),
            events in proptest::collection::vec(event(), 0..80),
        ) {
            let mut s = fresh(max);
            if waiting { s.state = TaskState::Waiting; }
            // The history: every attempt's state as last seen.
            let mut history: Vec<AttemptState> = Vec::new();
            let mut cancelled = false;
            for ev in events {
                let before = s;
                match step(&s, ev) {
                    // Refused: the caller writes nothing.
                    Err(_) => {}
                    Ok(t) => {
                        prop_assert!(!before.state.is_final(), "moved out of final {:?} by {:?}", before.state, ev);
                        s = apply(&s, &t);
                        if ev == BoardEvent::Cancel {
                            cancelled = true;
                            prop_assert_eq!(s.state, TaskState::Cancelled);
                        }
                        match t.attempt {
                            AttemptChange::New => {
                                prop_assert!(history.last().is_none_or(|a| a.is_final()));
                                history.push(AttemptState::Claimed);
                            }
                            AttemptChange::To { state } => {
                                let last = history.last_mut();
                                prop_assert!(last.is_some());
                                let last = last.unwrap_or_else(|| unreachable!());
                                prop_assert!(!last.is_final(), "an ended attempt changed: {:?} -> {:?}", last, state);
                                *last = state;
                            }
                            AttemptChange::Unchanged => {}
                        }
                    }
                }
                if cancelled {
                    prop_assert_eq!(s.state, TaskState::Cancelled);
                }
                prop_assert!(s.attempts >= before.attempts);
                prop_assert_eq!(s.attempts as usize, history.len());
                prop_assert!(s.counted() <= s.max_attempts);
                prop_assert_eq!(s.latest, history.last().copied());
                // At most one live attempt, and it is the latest.
                let live = history.iter().filter(|a| !a.is_final()).count();
                prop_assert!(live <= 1);
                if s.state.is_final() {
                    prop_assert!(s.latest.is_none_or(AttemptState::is_final));
                }
                if matches!(s.state, TaskState::Dispatched) {
                    prop_assert_eq!(s.latest, Some(AttemptState::Claimed));
                }
            }
        }
    }
}
