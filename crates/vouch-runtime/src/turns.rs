//! The turn machine (§13.2.2): the rules every turn of every run obeys, whatever carries it —
//! the host's own model loop, a remote worker posting its model's whole turns, an agent
//! calling tool by tool over HTTP or MCP. Pure: given what the run has spent and one model
//! turn, it says whether the turn may be taken, which of its calls run, and where the run
//! goes next. The host performs the calls and journals what the machine decided; no other
//! code counts a turn, a token or a repair.

use crate::model::ToolCall;

/// Bytes one turn (its text and every call's arguments) may hold: a payload (1 MiB) with room
/// beside it, well inside one journal event (4 MiB), so a turn that is journaled always fits.
pub const TURN_BYTES_MAX: usize = 2 << 20;

/// Why a loop stopped without the work: the cause (`turn_budget`, `token_budget`,
/// `repair_limit`, `model_error`) and the reason its end says.
pub type Stopped = (&'static str, String);

/// What a run may spend.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    pub turns_max: usize,
    pub tokens_max: u64,
    /// Malformed calls returned to the model before the run ends.
    pub repairs_max: u32,
}

/// What a run has spent, as its journal says (`RunView`: turns, tokens, repairs).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Spent {
    pub turns: usize,
    pub tokens: u64,
    pub repairs: u32,
}

/// Where the run goes after a turn (or instead of one).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Step {
    /// Another turn.
    Next,
    /// The loop is over; `Some` when it stopped without the work.
    Stop(Option<Stopped>),
    /// The run's work was cancelled: it ends `cancel`.
    Cancelled,
    /// The run waits for the person (an approval, the question).
    Suspend(String),
}

/// Whether one call of a turn runs, or is answered without running.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gate {
    Run,
    NotRun(&'static str),
}

/// The words a call that did not run is answered with.
pub const NOT_RUN_CANCELLED: &str = "not run: the task was cancelled";
pub const NOT_RUN_SUSPENDED: &str = "not run: the run is suspended; call again after it resumes";

/// What the machine needs to know of one call's answer.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Answered {
    /// Malformed arguments the model can repair (counted).
    pub repair: bool,
    /// The call left the run waiting for the person.
    pub suspend: Option<String>,
    /// The call ends the run.
    pub end: Option<String>,
}

impl Budget {
    /// The budget `who` (the model, the agent) has used up, if it has: no turn is taken then.
    pub fn spent(&self, who: &str, s: &Spent) -> Option<Stopped> {
        if s.turns >= self.turns_max {
            return Some((
                "turn_budget",
                format!(
                    "the {who} used its whole turn budget ({} turns)",
                    self.turns_max
                ),
            ));
        }
        (s.tokens >= self.tokens_max).then(|| {
            (
                "token_budget",
                format!(
                    "the {who} used its whole token budget ({} tokens)",
                    self.tokens_max
                ),
            )
        })
    }

    /// Before a turn: a cancel stops it, a spent budget ends the loop, else `None` (take it).
    pub fn before_turn(&self, who: &str, s: &Spent, cancelled: bool) -> Option<Step> {
        if cancelled {
            return Some(Step::Cancelled);
        }
        self.spent(who, s).map(|stopped| Step::Stop(Some(stopped)))
    }
}

/// A turn larger than a turn may be is the model's error, refused before it is journaled (a
/// turn larger than an event would leave the run unable to record anything).
pub fn admit(content: Option<&str>, calls: &[ToolCall]) -> Result<(), String> {
    let bytes = turn_bytes(content, calls);
    if bytes > TURN_BYTES_MAX {
        return Err(format!(
            "the model's turn is {bytes} bytes, more than the limit of {TURN_BYTES_MAX}"
        ));
    }
    Ok(())
}

/// The bytes a turn journals: its text and its calls' names, ids and arguments.
pub fn turn_bytes(content: Option<&str>, calls: &[ToolCall]) -> usize {
    content.map_or(0, str::len)
        + calls
            .iter()
            .map(|c| c.name.len() + c.arguments.len() + c.id.len())
            .sum::<usize>()
}

/// One turn in flight: its calls are gated one after another, each answer noted.
#[derive(Debug, Clone, Default)]
pub struct Turn {
    cancelled: bool,
    suspended: Option<String>,
    ended: Option<String>,
    repairs: u32,
}

impl Turn {
    /// A turn taken by a run that has spent `s` (its tokens already counted with `took`).
    pub fn start(s: &Spent) -> Self {
        Turn {
            repairs: s.repairs,
            ..Turn::default()
        }
    }

    /// Asked before each call: nothing is attempted once a cancel is seen, and after the
    /// first call that suspends or ends the run the rest are answered "not run".
    pub fn gate(&mut self, cancel_now: bool) -> Gate {
        self.cancelled |= cancel_now;
        if self.cancelled {
            Gate::NotRun(NOT_RUN_CANCELLED)
        } else if self.suspended.is_some() || self.ended.is_some() {
            Gate::NotRun(NOT_RUN_SUSPENDED)
        } else {
            Gate::Run
        }
    }

    /// One call's answer.
    pub fn answered(&mut self, a: Answered) {
        if a.repair {
            self.repairs += 1;
        }
        if self.suspended.is_none() {
            self.suspended = a.suspend;
        }
        if self.ended.is_none() {
            self.ended = a.end;
        }
    }

    /// Repairs the run has spent after this turn's calls.
    pub fn repairs(&self) -> u32 {
        self.repairs
    }

    /// Where the run goes once every call is answered: a cancel, an end, a suspension, too
    /// many repairs, or another turn. `Stop(None)` with the reason an ending call gave.
    pub fn next(self, b: &Budget) -> (Step, Option<String>) {
        if self.cancelled {
            return (Step::Cancelled, None);
        }
        if let Some(reason) = self.ended {
            return (Step::Stop(None), Some(reason));
        }
        if let Some(reason) = self.suspended {
            return (Step::Suspend(reason), None);
        }
        if self.repairs > b.repairs_max {
            let reason = format!(
                "the model gave invalid tool arguments {} times",
                self.repairs
            );
            return (Step::Stop(Some(("repair_limit", reason))), None);
        }
        (Step::Next, None)
    }
}

impl Spent {
    /// A turn was taken, spending `tokens`.
    pub fn took(&mut self, tokens: u64) {
        self.turns += 1;
        self.tokens += tokens;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const B: Budget = Budget {
        turns_max: 3,
        tokens_max: 1_000,
        repairs_max: 2,
    };

    fn answer(kind: u8) -> Answered {
        match kind % 4 {
            0 => Answered::default(),
            1 => Answered {
                repair: true,
                ..Answered::default()
            },
            2 => Answered {
                suspend: Some("approval".into()),
                ..Answered::default()
            },
            _ => Answered {
                end: Some("ended".into()),
                ..Answered::default()
            },
        }
    }

    /// Runs a turn of calls answered by `kinds`, with a cancel seen at call `cancel_at`.
    fn run_turn(kinds: &[u8], cancel_at: Option<usize>, repairs: u32) -> (Vec<Gate>, Step) {
        let mut t = Turn::start(&Spent {
            repairs,
            ..Spent::default()
        });
        let mut gates = vec![];
        for (i, k) in kinds.iter().enumerate() {
            let g = t.gate(cancel_at == Some(i));
            gates.push(g);
            if g == Gate::Run {
                t.answered(answer(*k));
            }
        }
        (gates, t.next(&B).0)
    }

    #[test]
    fn a_spent_budget_takes_no_turn_and_a_cancel_comes_first() {
        let s = Spent {
            turns: 3,
            ..Spent::default()
        };
        assert!(matches!(
            B.before_turn("model", &s, false),
            Some(Step::Stop(Some(("turn_budget", _))))
        ));
        assert_eq!(B.before_turn("model", &s, true), Some(Step::Cancelled));
        let s = Spent {
            tokens: 1_000,
            ..Spent::default()
        };
        assert!(matches!(
            B.before_turn("agent", &s, false),
            Some(Step::Stop(Some(("token_budget", _))))
        ));
        assert_eq!(B.before_turn("model", &Spent::default(), false), None);
    }

    #[test]
    fn a_turn_over_the_limit_is_refused() {
        let big = "x".repeat(TURN_BYTES_MAX + 1);
        assert!(admit(Some(&big), &[]).is_err());
        assert!(admit(Some("hi"), &[]).is_ok());
    }

    proptest! {
        /// After the first call that suspends or ends the run, every later call is "not run";
        /// before it, every call runs (no cancel).
        #[test]
        fn nothing_runs_after_a_suspension(kinds in prop::collection::vec(0u8..4, 0..8)) {
            let (gates, _) = run_turn(&kinds, None, 0);
            let first = kinds.iter().position(|k| k % 4 >= 2);
            for (i, g) in gates.iter().enumerate() {
                let runs = first.is_none_or(|f| i <= f);
                prop_assert_eq!(*g == Gate::Run, runs);
            }
        }

        /// Once a cancel is seen no later call runs and the turn ends `Cancelled`.
        #[test]
        fn nothing_runs_after_a_cancel(kinds in prop::collection::vec(0u8..4, 1..8), at in 0usize..8) {
            let at = at % kinds.len();
            let (gates, step) = run_turn(&kinds, Some(at), 0);
            prop_assert!(gates[at..].iter().all(|g| *g == Gate::NotRun(NOT_RUN_CANCELLED)));
            prop_assert_eq!(step, Step::Cancelled);
        }

        /// The repair limit ends the loop exactly when the run's repairs pass it, counted
        /// across turns (the repairs the run had spent carry into the turn).
        #[test]
        fn repairs_past_the_limit_end_the_loop(before in 0u32..4, n in 0usize..5) {
            let kinds = vec![1u8; n];
            let (_, step) = run_turn(&kinds, None, before);
            let total = before + n as u32;
            if total > B.repairs_max {
                prop_assert!(matches!(step, Step::Stop(Some(("repair_limit", _)))));
            } else {
                prop_assert_eq!(step, Step::Next);
            }
        }

        /// However the turns go, a run never takes more turns than its budget.
        #[test]
        fn no_run_takes_more_turns_than_its_budget(tokens in prop::collection::vec(0u64..600, 0..10)) {
            let mut s = Spent::default();
            for t in tokens {
                if B.before_turn("model", &s, false).is_some() {
                    break;
                }
                s.took(t);
            }
            prop_assert!(s.turns <= B.turns_max);
        }
    }
}
