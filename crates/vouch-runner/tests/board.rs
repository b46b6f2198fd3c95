//! Task runs through the real board and host: what the store records, and that the runner's
//! comparison with the oracle sees a difference in the board's record.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::{json, Value};

fn scenario(task: Value, script: Value) -> Value {
    json!({"id": "t", "prompt": "summarise the tickets", "trigger": {"kind": "task"}, "task": task, "script": script})
}

fn good() -> Value {
    json!([{"declare": {"deliveries": []}}, {"tool": "read", "args": {}}, {"submit": {"summary": "done"}}, {"final": ""}])
}

fn run(s: &Value) -> Value {
    vouch_runner::run_in_tempdir(s).expect("the scenario runs")
}

fn agree(
    s: &Value,
) -> (
    vouch_scenario::ScenarioReport,
    vouch_scenario::ScenarioReport,
) {
    let typed: vouch_scenario::Scenario = serde_json::from_value(s.clone()).unwrap();
    typed.check().unwrap();
    let oracle = vouch_oracle::evaluate(&typed).report;
    let actual = vouch_runner::run_typed(&typed).unwrap();
    let d = vouch_scenario::compare_reports(&oracle, &actual);
    assert!(d.is_empty(), "{d:?}");
    (oracle, actual)
}

#[test]
fn a_dead_workers_lease_lapses_and_another_worker_finishes() {
    let s = scenario(
        json!({"max_attempts": 2, "events": [{"worker": "a", "does": "crash", "late_report": true}, {"worker": "b"}]}),
        good(),
    );
    let r = run(&s);
    assert_eq!(r["task"]["state"], "completed", "{r}");
    assert_eq!(
        r["task"]["attempts"],
        json!([{"n": 1, "state": "timed_out", "claimant": "a"}, {"n": 2, "state": "completed", "claimant": "b"}])
    );
    assert_eq!(r["task"]["accepted_attempt"], 2);
    assert_eq!(
        r["task"]["turned_away"],
        json!([{"by": "a", "call": "report"}])
    );
    assert_eq!(r["deliveries"]["result"]["status"], "verified");
    assert!(r["receipt"].as_str().unwrap().contains("task task-main"));
}

#[test]
fn a_cancel_after_the_run_refuses_its_report() {
    let s = scenario(
        json!({"events": [{"worker": "a", "cancel": "after_run"}]}),
        good(),
    );
    let r = run(&s);
    assert_eq!(r["task"]["state"], "cancelled", "{r}");
    assert_eq!(r["task"]["attempts"][0]["state"], "cancelled");
    assert_eq!(r["task"]["accepted_attempt"], Value::Null);
    assert_eq!(r["deliveries"]["result"]["status"], "failed");
}

#[test]
fn malformed_submissions_are_repaired_within_the_bound() {
    let bad = json!({"submit": {"summary": ""}});
    let script = |n: usize| {
        let mut t = vec![json!({"declare": {"deliveries": []}})];
        t.extend(std::iter::repeat_n(bad.clone(), n));
        t.push(json!({"submit": {"summary": "fixed"}}));
        Value::from(t)
    };
    let r = run(&scenario(json!({"repairs": 2}), script(2)));
    assert_eq!(r["task"]["state"], "completed", "{r}");
    let r = run(&scenario(json!({"repairs": 2}), script(3)));
    assert_eq!(r["task"]["state"], "failed", "{r}");
    assert_eq!(r["deliveries"]["result"]["status"], "failed");
}

#[test]
fn the_comparison_sees_a_different_board_record() {
    let s = scenario(
        json!({"max_attempts": 2, "events": [{"worker": "a", "does": "abort"}, {"worker": "b"}]}),
        good(),
    );
    let (oracle, mut actual) = agree(&s);
    let t = actual.task.as_mut().unwrap();
    t.attempts[0].state = vouch_core::board::AttemptState::Failed;
    t.turned_away.push(vouch_scenario::TurnedAway {
        by: "b".into(),
        call: "claim".into(),
    });
    let fields: Vec<String> = vouch_scenario::compare_reports(&oracle, &actual)
        .into_iter()
        .map(|d| d.field)
        .collect();
    assert_eq!(fields, vec!["task.attempts", "task.turned_away"]);
}

#[test]
fn a_judge_is_never_the_producer() {
    let verdict = json!([{"declare": {"deliveries": []}}, {"submit": {"passed": true, "scores": {"accurate": 1}}}]);
    let s = scenario(
        json!({"judge": {"criteria": ["accurate"], "workers": ["w1", "w2"], "script": verdict}}),
        good(),
    );
    let (_, actual) = agree(&s);
    let j = actual.judge.unwrap();
    assert_eq!(j.accepted_attempt, Some(1));
    assert_eq!(j.attempts[0].claimant, "w2");
    assert_eq!(j.turned_away[0].by, "w1");
}

#[test]
fn a_retry_never_repeats_an_irreversible_act() {
    let post = json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": "https://hooks.example/t"}}]}},
        {"deliver": "d1", "payload": {"text": "all green"}}
    ]);
    let mut with_submit = post.as_array().unwrap().clone();
    with_submit.push(json!({"submit": {"summary": "posted"}}));
    let mut s = scenario(
        json!({"max_attempts": 2, "events": [{"worker": "a", "script": post}, {"worker": "b"}]}),
        Value::from(with_submit),
    );
    s["world"] = json!({"automation": ["send:webhook:*"]});
    let r = run(&s);
    assert_eq!(r["task"]["accepted_attempt"], 2, "{r}");
    assert_eq!(r["deliveries"]["d1"]["status"], "verified", "{r}");
    assert_eq!(r["deliveries"]["d1"]["executions"], 1, "{r}");
    agree(&s);
}

/// Issue 21 defect 6: `attempt_started` is durable before any provider call, so an act whose
/// key holds only its intent provably never ran — the next attempt does it, once, at every
/// destination kind (§8.1.1 over §8.3.1's "unknown", which needs a started attempt).
#[test]
fn an_act_whose_key_holds_only_its_intent_is_attempted_again() {
    for (verb, kind, address) in [
        ("send", "email", "team@example.com"),
        ("send", "webhook", "https://hooks.example/team"),
        ("send", "payment", "acct:acme"),
        ("save", "folder", "Reports/nightly.md"),
    ] {
        let mut s = scenario(
            json!({"max_attempts": 2, "events": [
                {"worker": "a", "does": "crash", "crash_after": "ledger_intent", "delivery": "d1"},
                {"worker": "b"}]}),
            json!([
                {"declare": {"deliveries": [{"id": "d1", "verb": verb, "destination": {"kind": kind, "address": address}}]}},
                {"deliver": "d1", "payload": {"text": "Nightly: all green."}},
                {"submit": {"summary": "done"}}, {"final": ""}]),
        );
        s["world"] = json!({"automation": [format!("{verb}:{kind}:*")],
            "existing": [format!("folder:{address}")]});
        let (oracle, actual) = agree(&s);
        for r in [&oracle, &actual] {
            let d1 = &r.deliveries["d1"];
            assert_eq!(
                d1.status,
                Some(vouch_core::DeliveryStatus::Verified),
                "{kind}: {}",
                r.to_json_line()
            );
        }
        assert_eq!(actual.deliveries["d1"].executions, Some(1), "{kind}");
        let rules = oracle.rules.unwrap_or_default();
        assert!(
            rules
                .iter()
                .any(|c| c.rule == "ledger.intent_only_never_ran"),
            "{kind}: {rules:?}"
        );
    }
}

/// Issue 21 defect 6: an act an earlier attempt left `unconfirmed` (a 202: the reply confirmed
/// nothing) and a later attempt proposes again is not done again and stays `unconfirmed` — no
/// status is raised to `verified` without new evidence (§6.2.1, §8.1.1, I2).
#[test]
fn an_unconfirmed_act_proposed_again_stays_unconfirmed() {
    let declare = json!({"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": "https://hooks.example/team"}}]}});
    let deliver = json!({"deliver": "d1", "payload": {"text": "Nightly: all green."}});
    for first in [
        json!({"worker": "a", "does": "crash", "crash_after": "evidence", "delivery": "d1"}),
        json!({"worker": "a", "script": [declare, deliver, {"final": ""}]}),
    ] {
        let mut s = scenario(
            json!({"max_attempts": 2, "events": [first, {"worker": "b"}]}),
            json!([declare, deliver, {"submit": {"summary": "done"}}, {"final": ""}]),
        );
        s["world"] = json!({"automation": ["send:webhook:*"],
            "behavior": {"webhook:*": "accept_unverifiable"}});
        let (oracle, actual) = agree(&s);
        for r in [&oracle, &actual] {
            assert_eq!(
                r.deliveries["d1"].status,
                Some(vouch_core::DeliveryStatus::Unconfirmed),
                "{}",
                r.to_json_line()
            );
            assert_eq!(r.needs_you, Some(vec!["d1".to_string()]));
        }
        assert_eq!(actual.deliveries["d1"].executions, Some(1));
        assert!(oracle.gaps.is_empty(), "{:?}", oracle.gaps);
    }
}

/// Issue 21 defect 6: a result's `artifacts` are content ids of stored artifacts, else the
/// result is malformed and costs a repair — through the real host's `submit` tool.
#[test]
fn a_result_whose_artifacts_are_not_stored_content_ids_is_malformed() {
    let stored = "the week's report\n";
    let cid = vouch_artifacts::content_id(stored.as_bytes());
    let unstored = vouch_artifacts::content_id(b"never stored");
    for (artifact, accepted) in [
        (cid.as_str(), true),
        ("../../../victim/README", false),
        ("report.md", false),
        (unstored.as_str(), false),
    ] {
        let s = scenario(
            json!({"repairs": 0, "artifacts": [stored]}),
            json!([{"declare": {"deliveries": []}},
                {"submit": {"summary": "done", "artifacts": [artifact]}}, {"final": ""}]),
        );
        let (oracle, actual) = agree(&s);
        let want = if accepted { "completed" } else { "failed" };
        for r in [&oracle, &actual] {
            let task = r.task.as_ref().unwrap();
            assert_eq!(
                task.state.as_str(),
                want,
                "{artifact}: {}",
                r.to_json_line()
            );
        }
        let cited = oracle.rules.unwrap_or_default();
        assert_eq!(
            cited.iter().any(|c| c.rule == "submit.artifact_not_stored"),
            !accepted,
            "{artifact}"
        );
    }
}

/// Issue 21 defect 6: a judge's verdict scores exactly the task's criteria; a missing or an
/// unknown criterion is malformed — through the real host's `submit` tool.
#[test]
fn a_judge_verdict_that_does_not_score_exactly_the_criteria_is_malformed() {
    for (scores, accepted) in [
        (json!({"accurate": 1, "concise": 0.5}), true),
        (json!({"accurate": 1}), false),
        (json!({"accurate": 1, "concise": 0.5, "witty": 1}), false),
        (json!({}), false),
    ] {
        let s = scenario(
            json!({"judge": {"criteria": ["accurate", "concise"], "workers": ["b"], "script": [
                {"declare": {"deliveries": []}},
                {"submit": {"passed": true, "scores": scores}}, {"final": ""}]}}),
            good(),
        );
        let (oracle, actual) = agree(&s);
        let want = if accepted { "completed" } else { "failed" };
        for r in [&oracle, &actual] {
            let judge = r.judge.as_ref().unwrap();
            assert_eq!(judge.state.as_str(), want, "{scores}: {}", r.to_json_line());
        }
    }
}
