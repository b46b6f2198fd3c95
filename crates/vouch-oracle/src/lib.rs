//! The oracle: the contract (docs/contract.md) as code. A scenario in; out, mechanically,
//! what the document prescribes — per delivery the posture and final status, the outcome,
//! how the run ended, `needs_you`, significance, attention, notifications, the most times
//! each delivery may execute, which receipt lines may carry a claim word — with the section
//! of every rule applied, and a GAP wherever the document does not decide.
//!
//! Invariants: pure (no I/O, no clock); never reads `expect`; never calls vouch-core's
//! decision functions (only its types), so it is an independent second reading.

pub mod rules;
mod sim;

pub use sim::{IMPLIED_ID, RETRIES_MAX, TURNS_MAX};
use std::fmt::Write as _;
use std::path::PathBuf;
use vouch_scenario::{compare, Disagreement, Scenario, ScenarioReport};

/// The oracle's answer for one scenario: the report shape of scenarios.md with the oracle
/// extras (`rules`, `max_executions`, `claims`) and `gaps`; `expect_ok` stays unset.
#[derive(Debug, Clone, PartialEq)]
pub struct OracleAnswer {
    pub report: ScenarioReport,
}

impl OracleAnswer {
    /// Compare with the scenario's `expect` (`None` when it has none).
    pub fn check_expect(&self, s: &Scenario) -> Option<Vec<Disagreement>> {
        let e = s.expect.as_ref()?;
        Some(compare(&e.to_value(), &self.report.to_value()))
    }

    /// The report as printed by `vouch oracle --json`: `expect_ok` set, and the expect
    /// mismatches (if any) listed as `disagreements`.
    pub fn output(&self, s: &Scenario) -> ScenarioReport {
        let mut r = self.report.clone();
        if let Some(d) = self.check_expect(s) {
            r.expect_ok = Some(d.is_empty());
            if !d.is_empty() {
                r.disagreements = Some(d);
            }
        }
        r
    }
}

/// What the contract prescribes for `s`.
pub fn evaluate(s: &Scenario) -> OracleAnswer {
    OracleAnswer {
        report: sim::Sim::new(s).run(),
    }
}

/// The coverage line of `vouch oracle PATH --summary`.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Summary {
    pub scenarios: usize,
    /// Scenarios with an `expect` that the oracle's answer satisfies.
    pub agreeing: usize,
    /// Scenarios with an `expect` that the oracle's answer contradicts: `(id, disagreements)`.
    pub disagreeing: Vec<(String, Vec<Disagreement>)>,
    pub without_expect: usize,
    /// Every GAP reported: `(scenario id, question)`.
    pub gaps: Vec<(String, String)>,
}

impl Summary {
    /// Exit 0 when everything agrees (scenarios.md), else 1.
    pub fn exit_code(&self) -> i32 {
        i32::from(!self.disagreeing.is_empty())
    }
}

impl std::fmt::Display for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} scenarios, {} agreeing with expect, {} disagreeing, {} without expect, {} GAPs",
            self.scenarios,
            self.agreeing,
            self.disagreeing.len(),
            self.without_expect,
            self.gaps.len()
        )?;
        for (id, d) in &self.disagreeing {
            for x in d {
                write!(
                    f,
                    "\n  DISAGREE {id}: {} expected {} got {}",
                    x.field, x.expected, x.actual
                )?;
            }
        }
        for (id, q) in &self.gaps {
            write!(f, "\n  GAP {id}: {q}")?;
        }
        Ok(())
    }
}

/// Evaluate every scenario and summarise agreement with `expect` and the GAPs.
pub fn summary(scenarios: &[(PathBuf, Scenario)]) -> Summary {
    let mut out = Summary::default();
    for (_, s) in scenarios {
        out.scenarios += 1;
        let a = evaluate(s);
        for g in &a.report.gaps {
            out.gaps.push((s.id.clone(), g.question.clone()));
        }
        match a.check_expect(s) {
            None => out.without_expect += 1,
            Some(d) if d.is_empty() => out.agreeing += 1,
            Some(d) => out.disagreeing.push((s.id.clone(), d)),
        }
    }
    out
}

fn show<T: serde::Serialize>(v: &Option<T>) -> String {
    match v {
        None => "—".into(),
        Some(v) => serde_json::to_value(v)
            .ok()
            .and_then(|v| v.as_str().map(String::from).or(Some(v.to_string())))
            .unwrap_or_default(),
    }
}

/// A human-readable rendering of an answer (what `vouch oracle PATH` prints).
pub fn render_human(answer: &OracleAnswer) -> String {
    let r = &answer.report;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{}: {} · outcome {} · ended by {}",
        r.id,
        show(&r.state),
        show(&r.outcome),
        show(&r.ended_by)
    );
    for (id, d) in &r.deliveries {
        let max = r
            .max_executions
            .as_ref()
            .and_then(|m| m.get(id))
            .map(|n| format!(" · at most {n}×"))
            .unwrap_or_default();
        let claim = if r.claims.as_ref().is_some_and(|c| c.contains(id)) {
            " · may claim"
        } else {
            ""
        };
        let _ = writeln!(
            s,
            "  {id}: {} → {}{max}{claim}",
            show(&d.posture),
            show(&d.status)
        );
    }
    let needs = r
        .needs_you
        .as_ref()
        .map(|n| {
            if n.is_empty() {
                "nothing".into()
            } else {
                n.join(", ")
            }
        })
        .unwrap_or_else(|| "—".into());
    let _ = writeln!(s, "  needs you: {needs}");
    let _ = writeln!(
        s,
        "  attention: {} → {} · notifications {}",
        show(&r.significance),
        show(&r.attention),
        show(&r.notifications)
    );
    if let Some(rules) = &r.rules {
        let list: Vec<String> = rules
            .iter()
            .map(|c| format!("{} {}", c.rule, c.section))
            .collect();
        let _ = writeln!(s, "  rules: {}", list.join(", "));
    }
    for g in &r.gaps {
        let _ = writeln!(s, "  GAP: {}", g.question);
    }
    s
}
