//! The oracle: the contract (docs/contract.md) as code. A scenario in; out, mechanically,
//! what the document prescribes — per delivery the posture and final status, the outcome,
//! how the run ended, `needs_you`, significance, attention, notifications, the most times
//! each delivery may execute, which receipt lines may carry a claim word — with the section
//! of every rule applied, and a GAP wherever the document does not decide.
//!
//! Invariants: pure (no I/O, no clock); never reads `expect`; never calls vouch-core's
//! decision functions (only its types), so it is an independent second reading.

pub mod board;
pub mod patch;
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
    let report = match &s.task {
        Some(plan) => board::BoardSim::new(s, plan).run(),
        None => sim::Sim::new(s).run(),
    };
    OracleAnswer { report }
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

/// One line for a task's record: its state, accepted attempt, attempts and what the board
/// turned away.
pub fn render_task(what: &str, t: &vouch_scenario::TaskReport) -> String {
    let attempts: Vec<String> = t
        .attempts
        .iter()
        .map(|a| {
            format!(
                "{} {} ({})",
                a.n,
                a.state,
                vouch_core::escape_line(&a.claimant)
            )
        })
        .collect();
    let mut line = format!(
        "{what}: {} · accepted attempt {} · attempts: {}",
        t.state,
        t.accepted_attempt
            .map(|n| n.to_string())
            .unwrap_or_else(|| "none".into()),
        if attempts.is_empty() {
            "none".into()
        } else {
            attempts.join(", ")
        }
    );
    if !t.turned_away.is_empty() {
        let list: Vec<String> = t
            .turned_away
            .iter()
            .map(|x| format!("{} {}", vouch_core::escape_line(&x.by), x.call))
            .collect();
        line.push_str(&format!(" · turned away: {}", list.join(", ")));
    }
    if !t.offers.is_empty() {
        line.push_str(&format!(" · offers: {}", t.offers.join(", ")));
    }
    line
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
    for (what, t) in [("task", &r.task), ("judge", &r.judge)] {
        if let Some(t) = t {
            let _ = writeln!(s, "  {}", render_task(what, t));
        }
    }
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

#[cfg(test)]
mod tests {
    //! One data-driven entry point: `check(scenario, expected)` where `expected` is any
    //! subset of the answer (compared field by field), plus the rules that must be cited.
    use super::*;
    use serde_json::{json, Value};

    fn check(scenario: Value, expected: Value, cites: &[&str]) {
        let s: Scenario = serde_json::from_value(scenario).expect("valid scenario");
        let a = evaluate(&s);
        let d = compare(&expected, &a.report.to_value());
        assert!(d.is_empty(), "{}: {d:?}\n{}", s.id, render_human(&a));
        let cited: Vec<&str> = a
            .report
            .rules
            .iter()
            .flatten()
            .map(|c| c.rule.as_str())
            .collect();
        for c in cites {
            assert!(cited.contains(c), "{}: `{c}` not cited in {cited:?}", s.id);
        }
    }

    fn one(verb: &str, kind: &str, addr: &str) -> Value {
        json!({"declare": {"deliveries": [{"id": "d1", "verb": verb, "destination": {"kind": kind, "address": addr}}]}})
    }

    fn deliver() -> Value {
        json!({"deliver": "d1", "payload": {"text": "x"}})
    }

    #[test]
    fn posture_rules() {
        let cases = [
            (json!({}), "write", "surface", "answer", "R3"),
            (
                json!({"capabilities": {"folder:*": "unavailable"}}),
                "save",
                "folder",
                "decline",
                "R2",
            ),
            (
                json!({"capabilities": {"email:*": "needs_setup"}}),
                "send",
                "email",
                "draft",
                "R5",
            ),
            (json!({}), "draft", "payment", "execute", "R6"),
            (json!({}), "save", "folder", "execute", "R7"),
            (json!({}), "send", "email", "confirm", "R9"),
            (
                json!({"automation": ["send:email:*"]}),
                "send",
                "email",
                "confirm",
                "R9",
            ),
        ];
        for (world, verb, kind, posture, rule) in cases {
            check(
                json!({"id": format!("{verb}-{kind}-{posture}"), "world": world, "script": [one(verb, kind, "a"), deliver()], "decisions": [{"approve": "d1"}]}),
                json!({"deliveries": {"d1": {"posture": posture}}}),
                &[rule],
            );
        }
        check(
            json!({"id": "r8", "trigger": {"kind": "event"}, "world": {"automation": ["send:webhook:*"]}, "script": [one("send", "webhook", "h"), deliver()]}),
            json!({"deliveries": {"d1": {"posture": "execute", "status": "verified"}}, "significance": "notable", "attention": "notify"}),
            &["R8", "ledger.intent_before_attempt"],
        );
        check(
            json!({"id": "r1", "script": [{"clarify": "?"}, {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "email", "address": "a"}}], "forbid": [{"verb": "send"}]}}], "decisions": [{"answer": "ok"}]}),
            json!({"outcome": "failed", "deliveries": {"d1": {"posture": "decline", "status": "declined"}}}),
            &["R1", "manifest.contradiction_declined"],
        );
        check(
            json!({"id": "r4", "script": [{"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "a"}, "confidence": "low"}]}}, deliver()], "decisions": [{"answer": "yes"}]}),
            json!({"state": "ended", "deliveries": {"d1": {"posture": "draft", "status": "drafted"}}}),
            &["R4", "clarify.asked", "clarify.answered"],
        );
    }

    #[test]
    fn outcomes_and_attention() {
        check(
            json!({"id": "partial", "world": {"behavior": {"folder:b": "reject"}}, "script": [
                {"declare": {"deliveries": [
                    {"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "a"}},
                    {"id": "d2", "verb": "save", "destination": {"kind": "folder", "address": "b"}}]}},
                deliver(), {"deliver": "d2", "payload": {}}, {"final": "All saved!"}]}),
            json!({"outcome": "partial", "significance": "failure", "attention": "inline", "notifications": 0, "claims": ["d1"]}),
            &[
                "outcome.partial",
                "significance.failure",
                "final_text.not_evidence",
            ],
        );
        check(
            json!({"id": "missed", "trigger": {"kind": "scheduled", "slot": "2026-01-01T07:00:00Z", "ran": false}, "presence": "nearby"}),
            json!({"outcome": "missed", "ended_by": "schedule", "significance": "failure", "attention": "notify", "notifications": 1}),
            &["schedule.missed", "outcome.missed"],
        );
        check(
            json!({"id": "quiet", "presence": "nearby", "quiet": true, "script": [one("send", "email", "a"), deliver()], "decisions": [{"approve": "d1"}]}),
            json!({"outcome": "succeeded", "significance": "notable", "attention": "inbox", "notifications": 0}),
            &["attention.quiet"],
        );
    }

    #[test]
    fn ledger_and_crashes() {
        let pay = || json!([{"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "payment", "address": "acct"}}]}}, {"deliver": "d1", "payload": {"eur": 5}}]);
        check(
            json!({"id": "lost", "world": {"behavior": {"payment:*": "lose_response"}}, "script": pay(), "decisions": [{"approve": "d1"}]}),
            json!({"deliveries": {"d1": {"status": "unknown"}}, "needs_you": ["d1"], "max_executions": {"d1": 1}}),
            &["ledger.unknown_after_lost_result"],
        );
        check(
            json!({"id": "idem", "world": {"behavior": {"payment:*": "lose_response"}, "idempotent_by_key": ["payment:*"]}, "script": pay(), "decisions": [{"approve": "d1"}]}),
            json!({"deliveries": {"d1": {"status": "verified"}}, "needs_you": []}),
            &["ledger.idempotent_retry"],
        );
        check(
            json!({"id": "crash-intent", "script": pay(), "decisions": [{"approve": "d1"}], "faults": [{"crash_after": "ledger_intent", "delivery": "d1"}]}),
            json!({"ended_by": "boot", "deliveries": {"d1": {"status": "not_attempted"}}}),
            &["boot.reconcile", "ledger.intent_only_never_ran"],
        );
        check(
            json!({"id": "tamper", "script": pay(), "decisions": [{"approve": "d1"}], "faults": [{"tamper_payload": "d1"}]}),
            json!({"deliveries": {"d1": {"status": "refused_mismatch"}}, "claims": []}),
            &["approval.refused_mismatch"],
        );
        // §7.1/§9.2: a crash right after the approval became durable — start-up
        // reconciliation carries the approval out, once.
        check(
            json!({"id": "granted-boot", "script": pay(), "decisions": [{"approve": "d1"}], "faults": [{"crash_after": "approval_granted", "delivery": "d1"}]}),
            json!({"ended_by": "boot", "outcome": "succeeded", "deliveries": {"d1": {"status": "verified"}}, "max_executions": {"d1": 1}}),
            &["boot.carries_out_approval", "ledger.intent_before_attempt"],
        );
        check(
            json!({"id": "granted-boot-tamper", "script": pay(), "decisions": [{"approve": "d1"}], "faults": [{"crash_after": "approval_granted", "delivery": "d1"}, {"tamper_payload": "d1"}]}),
            json!({"ended_by": "boot", "deliveries": {"d1": {"status": "refused_mismatch"}}, "claims": []}),
            &["boot.carries_out_approval", "approval.refused_mismatch"],
        );
        // §7.1: a denial is as durable: a crash right after it ends the run denied, at boot.
        check(
            json!({"id": "denied-boot", "script": pay(), "decisions": [{"deny": "d1"}], "faults": [{"crash_after": "approval_denied", "delivery": "d1"}]}),
            json!({"ended_by": "boot", "outcome": "withdrawn", "deliveries": {"d1": {"status": "denied"}}}),
            &["boot.keeps_denial", "approval.deny"],
        );
    }

    #[test]
    fn a_cancel_denies_what_is_unsettled_and_is_not_a_failure() {
        check(
            json!({"id": "cancel", "script": [
                {"declare": {"deliveries": [
                    {"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "a"}},
                    {"id": "d2", "verb": "send", "destination": {"kind": "email", "address": "b"}},
                    {"id": "d3", "verb": "save", "destination": {"kind": "folder", "address": "c"}}]}},
                deliver(), {"deliver": "d2", "payload": {}}, {"deliver": "d3", "payload": {}}],
                "decisions": [{"cancel": true}]}),
            json!({"ended_by": "cancel", "outcome": "succeeded", "deliveries": {"d1": {"status": "verified"}, "d2": {"status": "denied"}, "d3": {"status": "denied"}}}),
            &["cancel.denies_unsettled"],
        );
        check(
            json!({"id": "cancel-all", "script": [one("send", "email", "a"), deliver()], "decisions": [{"cancel": true}]}),
            json!({"ended_by": "cancel", "outcome": "withdrawn", "deliveries": {"d1": {"status": "denied"}}, "significance": "routine"}),
            &["cancel.denies_unsettled"],
        );
    }

    #[test]
    fn the_reply_is_the_evidence_where_it_is_the_only_observation() {
        for kind in ["email", "webhook", "payment"] {
            check(
                json!({"id": format!("false-success-{kind}"), "world": {"behavior": {format!("{kind}:*"): "false_success"}}, "script": [one("send", kind, "a"), deliver()], "decisions": [{"approve": "d1"}]}),
                json!({"outcome": "succeeded", "deliveries": {"d1": {"status": "verified"}}}),
                &["observation.reply_is_evidence"],
            );
        }
        check(
            json!({"id": "false-success-folder", "world": {"behavior": {"folder:*": "false_success"}}, "script": [one("save", "folder", "a"), deliver()]}),
            json!({"outcome": "failed", "deliveries": {"d1": {"status": "failed"}}}),
            &["observation.no_effect"],
        );
    }

    #[test]
    fn a_run_without_a_manifest_fails_and_reaches_the_person() {
        for trigger in ["task", "event"] {
            check(
                json!({"id": "no-manifest", "trigger": {"kind": trigger}, "script": [{"final": "done"}]}),
                json!({"outcome": "failed", "deliveries": {}, "significance": "failure", "attention": "notify", "notifications": 1, "gaps": []}),
                &["outcome.no_manifest_failed"],
            );
        }
        check(
            json!({"id": "empty", "script": [{"final": ""}]}),
            json!({"outcome": "failed", "significance": "failure", "attention": "inline"}),
            &["outcome.no_manifest_failed"],
        );
    }

    #[test]
    fn gaps_are_reported_not_guessed() {
        let turns: Vec<Value> = (0..=crate::sim::TURNS_MAX)
            .map(|_| json!({"tool": "t", "args": {}}))
            .collect();
        let s: Scenario =
            serde_json::from_value(json!({"id": "g", "script": turns})).expect("valid");
        let a = evaluate(&s);
        assert_eq!(a.report.gaps.len(), 1);
        assert_eq!(a.report.outcome, None);
        assert_eq!(a.report.attention, None);
    }
}
