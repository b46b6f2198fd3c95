//! The oracle's board rules (contract §13), one scenario each: the record it prescribes and
//! the sections it cites.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};
use vouch_scenario::{compare, Scenario};

fn answer(task: Value, script: Value) -> vouch_scenario::ScenarioReport {
    let s: Scenario = serde_json::from_value(json!({
        "id": "t", "trigger": {"kind": "task"}, "task": task, "script": script
    }))
    .expect("a valid scenario");
    s.check().expect("checks pass");
    vouch_oracle::evaluate(&s).report
}

fn good() -> Value {
    json!([{"declare": {"deliveries": []}}, {"submit": {"summary": "done"}}, {"final": ""}])
}

fn check(r: &vouch_scenario::ScenarioReport, want: Value, cites: &[(&str, &str)]) {
    let d = compare(&want, &r.to_value());
    assert!(d.is_empty(), "{d:?}\n{}", r.to_json_line());
    let rules = r.rules.clone().unwrap_or_default();
    for (rule, section) in cites {
        assert!(
            rules
                .iter()
                .any(|c| c.rule == *rule && c.section == *section),
            "`{rule}` ({section}) not cited in {rules:?}"
        );
    }
}

#[test]
fn an_accepted_submission_completes_the_task() {
    let r = answer(json!({}), good());
    check(
        &r,
        json!({"deliveries": {"result": {"posture": "execute", "status": "verified"}},
               "task": {"state": "completed", "accepted_attempt": 1}}),
        &[
            ("board.claim", "§13.2"),
            ("submit.accepted", "§13.4.1"),
            ("result.item", "§13.4.2"),
        ],
    );
}

#[test]
fn a_lapsed_lease_times_out_and_the_next_attempt_has_a_fresh_one() {
    let r = answer(
        json!({"max_attempts": 2, "events": [{"worker": "a", "does": "crash", "late_report": true}, {"worker": "b"}]}),
        good(),
    );
    check(
        &r,
        json!({"task": {"state": "completed", "accepted_attempt": 2,
            "attempts": [{"n": 1, "state": "timed_out", "claimant": "a"}, {"n": 2, "state": "completed", "claimant": "b"}],
            "turned_away": [{"by": "a", "call": "report"}]}}),
        &[
            ("board.lease_lapsed", "§13.3.1"),
            ("board.late_report_refused", "§13.3"),
            ("board.new_attempt", "§13.3"),
        ],
    );
}

#[test]
fn repairs_are_bounded_and_the_attempt_fails_retryably() {
    let bad = json!({"submit": {"summary": ""}});
    let r = answer(
        json!({"repairs": 1, "max_attempts": 2, "events": [{"worker": "a"}, {"worker": "b", "script": good()}]}),
        json!([{"declare": {"deliveries": []}}, bad, bad, {"submit": {"summary": "ok"}}]),
    );
    check(
        &r,
        json!({"task": {"state": "completed", "accepted_attempt": 2}}),
        &[
            ("submit.repairs_exhausted", "§13.4.1"),
            ("submit.missing_fails_attempt", "§13.4.1"),
            ("board.retry", "§13.3"),
        ],
    );
}

#[test]
fn no_run_means_no_run_fields() {
    let r = answer(
        json!({"events": [{"cancel": true}, {"worker": "a"}]}),
        good(),
    );
    assert_eq!(r.state, None);
    assert!(r.deliveries.is_empty());
    check(
        &r,
        json!({"task": {"state": "cancelled", "attempts": [], "turned_away": [{"by": "a", "call": "claim"}]}}),
        &[
            ("board.cancel", "§13.3"),
            ("board.nothing_claimable", "§13.2"),
        ],
    );
}

#[test]
fn a_judge_never_claims_its_producers_output() {
    let verdict = json!([{"declare": {"deliveries": []}}, {"submit": {"passed": false, "scores": {"x": 0.2}}}]);
    let r = answer(
        json!({"judge": {"criteria": ["x"], "workers": ["w1", "w1", "w9"], "script": verdict}}),
        good(),
    );
    check(
        &r,
        json!({"judge": {"state": "completed", "accepted_attempt": 1,
            "turned_away": [{"by": "w1", "call": "claim"}, {"by": "w1", "call": "claim"}]}}),
        &[
            ("judge.producer_excluded", "§13.4"),
            ("judge.verdict", "§13.4"),
        ],
    );
}
