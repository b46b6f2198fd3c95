#![allow(clippy::unwrap_used, clippy::expect_used)]
use serde_json::json;

fn run(s: serde_json::Value) -> serde_json::Value {
    vouch_runner::run_in_tempdir(&s).expect("scenario runs")
}

#[test]
fn the_design_example_crash_after_save() {
    let s = json!({
      "id": "brief-crash-after-save",
      "prompt": "Every day at 7am prepare my brief and save it to Briefs/",
      "trigger": {"kind": "scheduled", "cron": "0 7 * * *", "tz": "UTC", "slot": "2026-12-02T07:00:00Z", "ran": true, "catch_up": "skip", "overlap": "skip", "grace_s": 900},
      "presence": "away",
      "world": {"capabilities": {"email:*": "needs_setup"}, "automation": ["send:webhook:*"], "behavior": {"webhook:https://hooks.example/brief": "lose_response"}, "idempotent_by_key": ["webhook:*"], "existing": ["folder:Briefs/today.md"]},
      "script": [
        {"declare": {"deliveries": [
            {"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Briefs/2026-12-02.md"}},
            {"id": "d2", "verb": "send", "destination": {"kind": "webhook", "address": "https://hooks.example/brief"}, "confidence": "high"}],
          "forbid": [{"verb": "send", "kind": "email"}],
          "order": [{"before": "d1", "after": "d2"}]}},
        {"tool": "search_news", "args": {"q": "markets"}},
        {"tool": "fetch", "args": {"url": "x"}, "fails": true},
        {"deliver": "d1", "payload": {"text": "# Brief\n..."}},
        {"deliver": "d2", "payload": {"text": "Your brief is saved."}},
        {"final": ""}
      ],
      "decisions": [{"approve": "d2"}],
      "faults": [{"crash_after": "evidence", "delivery": "d1"}]
    });
    let r = run(s);
    println!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
    assert_eq!(r["outcome"], "partial");
    assert_eq!(r["ended_by"], "boot");
    assert_eq!(r["deliveries"]["d1"]["status"], "verified");
    assert_eq!(r["deliveries"]["d2"]["status"], "not_attempted");
    assert_eq!(r["deliveries"]["d2"]["executions"], 0);
    assert_eq!(r["significance"], "failure");
    assert_eq!(r["attention"], "notify");
    assert_eq!(r["notifications"], 1);
}

#[test]
fn approval_edit_tamper_and_lost_responses() {
    let base = |decisions: serde_json::Value,
                faults: serde_json::Value,
                behavior: serde_json::Value| {
        json!({
            "id": "x", "prompt": "email the board",
            "world": {"behavior": behavior},
            "script": [
                {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "email", "address": "board@example.com"}}]}},
                {"deliver": "d1", "payload": {"text": "v1"}},
                {"final": "Done — sent."}
            ],
            "decisions": decisions, "faults": faults
        })
    };
    let r = run(base(json!([]), json!([]), json!({})));
    assert_eq!(r["state"], "suspended");
    assert_eq!(r["deliveries"]["d1"]["status"], "awaiting");
    assert_eq!(r["deliveries"]["d1"]["posture"], "confirm");
    let r = run(base(json!([{"approve": "d1"}]), json!([]), json!({})));
    assert_eq!(r["outcome"], "succeeded");
    assert_eq!(r["deliveries"]["d1"]["executions"], 1);
    let r = run(base(json!([{"deny": "d1"}]), json!([]), json!({})));
    assert_eq!(r["outcome"], "withdrawn");
    assert_eq!(r["deliveries"]["d1"]["status"], "denied");
    let r = run(base(
        json!([{"edit": "d1", "payload": {"text": "v2"}}, {"approve": "d1"}]),
        json!([]),
        json!({}),
    ));
    assert_eq!(r["deliveries"]["d1"]["status"], "verified");
    let r = run(base(
        json!([{"approve": "d1"}]),
        json!([{"tamper_payload": "d1"}]),
        json!({}),
    ));
    assert_eq!(r["deliveries"]["d1"]["status"], "refused_mismatch");
    assert_eq!(r["deliveries"]["d1"]["executions"], 0);
    let r = run(base(
        json!([{"approve": "d1"}]),
        json!([]),
        json!({"email:*": "lose_response"}),
    ));
    assert_eq!(r["deliveries"]["d1"]["status"], "unknown");
    assert_eq!(r["needs_you"], json!(["d1"]));
    assert!(!r["receipt"].as_str().unwrap_or("").contains("Sent to"));
    let r = run(base(
        json!([{"approve": "d1"}]),
        json!([{"crash_after": "provider_effect", "delivery": "d1"}]),
        json!({}),
    ));
    assert_eq!(r["deliveries"]["d1"]["status"], "unknown");
    assert_eq!(r["deliveries"]["d1"]["executions"], 1);
    // A crash right after the approval became durable: start-up reconciliation carries it
    // out, once (§7.1), and the run ends at boot with nothing left to resume.
    let r = run(base(
        json!([{"approve": "d1"}]),
        json!([{"crash_after": "approval_granted", "delivery": "d1"}]),
        json!({}),
    ));
    assert_eq!(r["deliveries"]["d1"]["status"], "verified", "{r}");
    assert_eq!(r["deliveries"]["d1"]["executions"], 1);
    assert_eq!(r["ended_by"], "boot");
    assert_eq!(r["outcome"], "succeeded");
}

#[test]
fn missed_slot_and_catch_up() {
    let s = |catch: &str| {
        json!({
            "id": "m", "prompt": "7am brief",
            "trigger": {"kind": "scheduled", "cron": "0 7 * * *", "slot": "2026-12-02T07:00:00Z", "ran": false, "catch_up": catch},
            "script": [
                {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Briefs/b.md"}}]}},
                {"deliver": "d1", "payload": {"text": "brief"}}
            ]
        })
    };
    let r = run(s("skip"));
    assert_eq!(r["outcome"], "missed");
    assert_eq!(r["ended_by"], "schedule");
    assert_eq!(r["significance"], "failure");
    assert_eq!(r["notifications"], 1);
    let r = run(s("latest"));
    assert_eq!(r["outcome"], "succeeded");
}

#[test]
fn a_world_the_scenario_format_does_not_know_is_refused_by_field() {
    let s = json!({
        "id": "bad-world",
        "world": {"behavior": {"email:*": "explode"}},
        "script": [{"final": ""}]
    });
    let err = vouch_runner::run_in_tempdir(&s).expect_err("an unknown behaviour is refused");
    assert!(err.contains("world.behavior"), "{err}");
    assert!(err.contains("explode"), "{err}");
}
