#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Durability points (contract §3.4.2): a real `vouch` process is killed between two points
//! (`VOUCH_CRASH_AFTER=~EVENT`: the event was journaled but not yet committed), restarted, and
//! the world is checked — the file on disk, the run's rows, the chain. A crash between points
//! may lose turns and words, never an act.

mod support;

use serde_json::json;
use support::Home;

fn script(home: &Home) -> String {
    home.script(&json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "notes/a.md"}}]}},
        {"tool": "read_file", "args": {"path": "notes/missing.md"}},
        {"deliver": "d1", "payload": {"text": "kept\n"}},
        {"final": "Saved."}
    ]))
}

fn only_run(home: &Home) -> serde_json::Value {
    let runs = home.json(&["runs", "list"]);
    let runs = runs.as_array().unwrap();
    assert_eq!(runs.len(), 1, "one run: {runs:?}");
    let id = runs[0]["id"].as_str().unwrap().to_string();
    home.json(&["runs", "show", &id])
}

#[test]
fn a_crash_after_an_act_but_before_the_next_point_keeps_the_act() {
    let home = Home::new("");
    let s = script(&home);
    let out = home.vouch(
        &["run", "Save a note", "--script", &s],
        &[("VOUCH_CRASH_AFTER", "~evidence:d1")],
    );
    assert!(out.status.code().is_none(), "the run was not killed");
    // The effect happened before the crash: the file is there, exactly.
    let file = home.dir.join("files/notes/a.md");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "kept\n");
    // The next start reconciles from what is durable: the attempt was committed before the
    // provider was called, so the host re-observes the file and the save is verified.
    let show = only_run(&home);
    assert_eq!(show["run"]["state"], "ended", "{show}");
    assert_eq!(show["run"]["ended_by"], "boot", "{show}");
    assert_eq!(show["deliveries"][0]["status"], "verified", "{show}");
    assert!(home.vouch(&["journal", "verify"], &[]).status.success());
}

#[test]
fn a_crash_between_points_before_any_act_loses_only_words() {
    let home = Home::new("");
    let s = script(&home);
    let out = home.vouch(
        &["run", "Save a note", "--script", &s],
        &[("VOUCH_CRASH_AFTER", "~tool_called@1")],
    );
    assert!(out.status.code().is_none(), "the run was not killed");
    assert!(
        !home.dir.join("files/notes/a.md").exists(),
        "nothing was acted on"
    );
    let show = only_run(&home);
    let id = show["run"]["id"].as_str().unwrap().to_string();
    assert_eq!(show["run"]["state"], "ended", "{show}");
    assert_eq!(show["run"]["ended_by"], "boot", "{show}");
    // What was buffered (the declaration, the read-only turn) is gone, not half-written:
    // the chain verifies and holds no attempt.
    let journal = home.json(&["journal", &id]);
    let kinds: Vec<String> = journal
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or("").to_string())
        .collect();
    assert!(!kinds.iter().any(|k| k.starts_with("attempt")), "{kinds:?}");
    assert_eq!(
        kinds.last().map(String::as_str),
        Some("terminal"),
        "{kinds:?}"
    );
    assert!(home.vouch(&["journal", "verify"], &[]).status.success());
    let receipt = home.json(&["receipt", &id])["receipt"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(!receipt.contains("Saved to"), "{receipt}");
}

#[test]
fn a_crash_after_a_durable_event_keeps_it() {
    // Without `~` the crash point commits first: the read-only turn is in the journal.
    let home = Home::new("");
    let s = script(&home);
    let out = home.vouch(
        &["run", "Save a note", "--script", &s],
        &[("VOUCH_CRASH_AFTER", "tool_called@1")],
    );
    assert!(out.status.code().is_none(), "the run was not killed");
    let show = only_run(&home);
    let id = show["run"]["id"].as_str().unwrap().to_string();
    let journal = home.json(&["journal", &id]);
    let kinds: Vec<&str> = journal
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["kind"].as_str().unwrap_or(""))
        .collect();
    assert!(kinds.contains(&"manifest_declared"), "{kinds:?}");
    assert!(kinds.contains(&"tool_called"), "{kinds:?}");
}
