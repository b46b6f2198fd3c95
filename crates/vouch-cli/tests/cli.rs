#![allow(clippy::unwrap_used, clippy::expect_used)]
//! End-to-end tests of the real `vouch` binary: bad input, journal verification and
//! tampering, and crash tests that kill real processes at every crash point and then check
//! the world (files on disk, the HTTP receiver's count, journal rows) and the receipt.

mod support;

use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Output};

fn vouch_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vouch"))
}

struct Home {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
}

impl Home {
    fn new() -> Home {
        let tmp = tempfile::tempdir().expect("tempdir");
        let dir = tmp.path().join("home");
        let h = Home { _tmp: tmp, dir };
        let out = h.vouch(&["init"], &[]);
        assert!(
            out.status.success(),
            "init failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        h
    }

    fn vouch(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = Command::new(vouch_bin());
        c.arg("--home")
            .arg(&self.dir)
            .args(args)
            .env_remove("VOUCH_CRASH_AFTER")
            .env_remove("VOUCH_MODEL_URL");
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().expect("run vouch")
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let out = self.vouch(&a, &[]);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
    }

    fn script(&self, name: &str, turns: Value) -> PathBuf {
        let p = self._tmp.path().join(name);
        std::fs::write(&p, turns.to_string()).expect("write script");
        p
    }

    fn file(&self, rel: &str) -> PathBuf {
        self.dir.join("files").join(rel)
    }

    fn runs(&self) -> Vec<Value> {
        self.json(&["runs", "list"])
            .as_array()
            .cloned()
            .unwrap_or_default()
    }

    fn journal(&self, run: &str) -> Vec<Value> {
        self.json(&["journal", run])
            .as_array()
            .cloned()
            .unwrap_or_default()
    }
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn count(events: &[Value], kind: &str, delivery: Option<&str>) -> usize {
    events
        .iter()
        .filter(|e| e["kind"] == kind && delivery.map(|d| e["delivery"] == d).unwrap_or(true))
        .count()
}

fn two_saves() -> Value {
    json!([
        {"declare": {"deliveries": [
            {"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Reports/a.md"}},
            {"id": "d2", "verb": "save", "destination": {"kind": "folder", "address": "Reports/b.md"}}]}},
        {"tool": "search", "args": {"q": "x"}},
        {"deliver": "d1", "payload": {"text": "A\n"}},
        {"deliver": "d2", "payload": {"text": "B\n"}},
        {"final": "Both saved."}
    ])
}

#[test]
fn unknown_run_and_missing_home_are_clear_errors() {
    let h = Home::new();
    let out = h.vouch(&["runs", "show", "nope"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("no run `nope`"), "{}", stderr(&out));
    let out = h.vouch(&["receipt", "nope"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let tmp = tempfile::tempdir().expect("tmp");
    let out = Command::new(vouch_bin())
        .arg("--home")
        .arg(tmp.path().join("none"))
        .args(["runs", "list"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2), "a missing home is bad input");
    assert!(stderr(&out).contains("vouch init"), "{}", stderr(&out));
}

#[test]
fn corrupt_home_is_refused_and_left_alone() {
    let h = Home::new();
    let db = h.dir.join("vouch.db");
    std::fs::write(
        &db,
        b"this is not a database at all, just text that someone wrote here",
    )
    .expect("write");
    let out = h.vouch(&["runs", "list"], &[]);
    assert_ne!(out.status.code(), Some(0));
    assert!(!stderr(&out).contains("panicked"), "{}", stderr(&out));
    assert!(
        stderr(&out).to_lowercase().contains("vouch"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        std::fs::read(&db).expect("read"),
        b"this is not a database at all, just text that someone wrote here"
    );
}

#[test]
fn bad_script_is_exit_2_naming_the_file() {
    let h = Home::new();
    let p = h._tmp.path().join("bad.json");
    std::fs::write(&p, "{not json").expect("write");
    let out = h.vouch(&["run", "x", "--script", p.to_str().expect("utf8")], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("bad.json"), "{}", stderr(&out));
    let out = h.vouch(&["run", "x"], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("VOUCH_MODEL_URL"), "{}", stderr(&out));
}

#[test]
fn a_run_that_ends_on_the_tool_call_succeeds_and_lying_text_changes_nothing() {
    let h = Home::new();
    let s = h.script("s.json", json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Notes/n.md"}}]}},
        {"deliver": "d1", "payload": {"text": "hello\n"}}
    ]));
    let out = h.vouch(
        &["run", "Save a note", "--script", s.to_str().expect("utf8")],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(h.file("Notes/n.md")).expect("file"),
        "hello\n"
    );
    assert!(
        stdout(&out).contains("Saved to folder Notes/n.md"),
        "{}",
        stdout(&out)
    );

    // The model claims it sent something it never declared: nothing is claimed on the receipt.
    let s = h.script("lie.json", json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "../escape.md"}}]}},
        {"deliver": "d1", "payload": {"text": "x"}},
        {"final": "Done — saved and sent to everyone."}
    ]));
    let out = h.vouch(
        &["run", "Save outside", "--script", s.to_str().expect("utf8")],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(text.contains("Failed:"), "{text}");
    assert!(!text.contains("Saved to"), "{text}");
    assert!(!h._tmp.path().join("escape.md").exists());
}

#[test]
fn tampering_with_the_journal_is_detected_and_named() {
    let h = Home::new();
    let s = h.script("s.json", two_saves());
    let out = h.vouch(
        &["run", "Two reports", "--script", s.to_str().expect("utf8")],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = h.vouch(&["journal", "verify"], &[]);
    assert!(out.status.success(), "{}", stdout(&out));
    let run = h.runs()[0]["id"].as_str().expect("id").to_string();
    // Edit one event's body behind vouch's back (bypassing the append-only triggers).
    let db = h.dir.join("vouch.db");
    let conn = rusqlite::Connection::open(&db).expect("open db");
    let triggers: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type='trigger'")
        .expect("prepare")
        .query_map([], |r| r.get(0))
        .expect("query")
        .filter_map(Result::ok)
        .collect();
    for t in triggers {
        conn.execute(&format!("DROP TRIGGER \"{t}\""), [])
            .expect("drop trigger");
    }
    let changed = conn
        .execute("UPDATE journal SET body = replace(body, 'A\\n', 'Z\\n') WHERE run_id = ?1 AND seq = (SELECT MIN(seq) FROM journal WHERE run_id = ?1 AND kind = 'attempt_started')", [&run])
        .expect("tamper");
    assert_eq!(changed, 1);
    drop(conn);
    let out = h.vouch(&["journal", "verify"], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout(&out).contains(&format!("BROKEN: run {run} event #")),
        "{}",
        stdout(&out)
    );
}

fn assert_one_terminal_and_intact(h: &Home) {
    for r in h.runs() {
        let id = r["id"].as_str().expect("id");
        let j = h.journal(id);
        assert_eq!(
            count(&j, "terminal", None),
            1,
            "run {id} must have exactly one terminal event"
        );
        let receipt = h.json(&["receipt", id]);
        assert!(
            receipt["receipt"]
                .as_str()
                .unwrap_or("")
                .starts_with("Receipt"),
            "run {id} has no receipt"
        );
    }
    let out = h.vouch(&["journal", "verify"], &[]);
    assert!(
        out.status.success(),
        "journal verify after crash: {}",
        stdout(&out)
    );
}

#[test]
fn crash_at_every_point_of_a_folder_run_then_boot_and_resume() {
    for point in [
        "manifest_declared",
        "attempt_started:d1",
        "provider_effect:d1",
        "evidence:d1",
        "attempt_started:d2",
        "evidence:d2",
        "terminal",
    ] {
        let h = Home::new();
        let s = h.script("s.json", two_saves());
        let out = h.vouch(
            &["run", "Two reports", "--script", s.to_str().expect("utf8")],
            &[("VOUCH_CRASH_AFTER", point)],
        );
        assert!(
            out.status.code().is_none(),
            "{point}: the process should have been killed: {}",
            stderr(&out)
        );
        let runs = h.runs(); // start-up reconciliation runs here
        assert_eq!(runs.len(), 1, "{point}");
        let parent = runs[0]["id"].as_str().expect("id").to_string();
        assert_eq!(runs[0]["state"], "ended", "{point}");
        let expected_by = if point == "terminal" { "loop" } else { "boot" };
        assert_eq!(runs[0]["ended_by"], expected_by, "{point}");
        let pj = h.journal(&parent);
        let d1_verified_in_parent = pj.iter().any(|e| {
            e["kind"] == "evidence" && e["delivery"] == "d1" && e["body"]["status"] == "verified"
        });
        let d2_verified_in_parent = pj.iter().any(|e| {
            e["kind"] == "evidence" && e["delivery"] == "d2" && e["body"]["status"] == "verified"
        });
        if point != "terminal" && !(d1_verified_in_parent && d2_verified_in_parent) {
            let out = h.vouch(&["resume", &parent], &[]);
            assert!(
                out.status.success(),
                "{point}: resume: {}{}",
                stdout(&out),
                stderr(&out)
            );
            let runs = h.runs();
            let child = runs
                .iter()
                .find(|r| r["parent"] == parent.as_str())
                .expect("continuation run");
            assert_eq!(child["outcome"], "succeeded", "{point}");
            let cj = h.journal(child["id"].as_str().expect("id"));
            if d1_verified_in_parent {
                assert_eq!(
                    count(&cj, "attempt_started", Some("d1")),
                    0,
                    "{point}: verified d1 was redone"
                );
            }
        }
        assert_eq!(
            std::fs::read_to_string(h.file("Reports/a.md")).expect("a.md"),
            "A\n",
            "{point}"
        );
        assert_eq!(
            std::fs::read_to_string(h.file("Reports/b.md")).expect("b.md"),
            "B\n",
            "{point}"
        );
        assert_one_terminal_and_intact(&h);
    }
}

/// Issue 21 defect 6: killed between the ledger intent's row and the event recording it
/// (`~ledger_intent`: the row is written, the buffered event lost), the key holds only its
/// intent and no journal holds a started attempt — since `attempt_started` is durable before
/// any provider call, the act never ran. Start-up carries the approval out and the act is
/// attempted, once; it is never left `unknown` for the person.
#[test]
fn an_act_whose_intent_event_was_lost_is_attempted_again() {
    let hook = support::Receiver::start(false);
    let h = Home::new();
    let s = h.script(
        "send.json",
        json!([
            {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": hook.url}}]}},
            {"deliver": "d1", "payload": {"text": "ship it"}},
            {"final": "Sent."}
        ]),
    );
    let out = h.vouch(
        &[
            "run",
            "Post to the hook",
            "--script",
            s.to_str().expect("utf8"),
        ],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(3),
        "waits for approval: {}",
        stderr(&out)
    );
    let card = h.json(&["approvals"])[0].clone();
    let run = card["run"].as_str().expect("run").to_string();
    let hash = card["payload_hash"].as_str().expect("hash").to_string();
    let out = h.vouch(
        &["approve", &run, "d1", "--hash", &hash],
        &[("VOUCH_CRASH_AFTER", "~ledger_intent:d1")],
    );
    assert!(out.status.code().is_none(), "not killed: {}", stderr(&out));
    assert_eq!(hook.applied(), 0);
    let show = h.json(&["runs", "show", &run]);
    assert_eq!(show["deliveries"][0]["status"], "verified", "{show}");
    assert_eq!(hook.applied(), 1);
    assert_one_terminal_and_intact(&h);
}

#[test]
fn crash_points_around_an_approved_send_never_send_twice() {
    let hook = support::Receiver::start(true);
    let url = hook.url.clone();
    let script = |h: &Home| {
        h.script("send.json", json!([
            {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": url}}]}},
            {"deliver": "d1", "payload": {"text": "ship it"}},
            {"final": "Sent."}
        ]))
    };
    for point in [
        "approval_requested:d1",
        "approval_granted:d1",
        "ledger_intent:d1",
        "attempt_started:d1",
        "provider_effect:d1",
        "evidence:d1",
        "terminal",
    ] {
        let before = hook.applied();
        let h = Home::new();
        let s = script(&h);
        let crash_in_run = point == "approval_requested:d1";
        let env: Vec<(&str, &str)> = if crash_in_run {
            vec![("VOUCH_CRASH_AFTER", point)]
        } else {
            vec![]
        };
        let out = h.vouch(
            &[
                "run",
                "Post to the hook",
                "--script",
                s.to_str().expect("utf8"),
            ],
            &env,
        );
        if crash_in_run {
            assert!(out.status.code().is_none(), "{point}");
        }
        // The card survives (a crash right after it is opened leaves the run suspended).
        let cards = h.json(&["approvals"]);
        let card = cards
            .as_array()
            .and_then(|c| c.first())
            .cloned()
            .unwrap_or_else(|| panic!("{point}: lost the approval card"));
        let run = card["run"].as_str().expect("run").to_string();
        let hash = card["payload_hash"].as_str().expect("hash").to_string();
        let env = if crash_in_run {
            vec![]
        } else {
            vec![("VOUCH_CRASH_AFTER", point)]
        };
        let out = h.vouch(&["approve", &run, "d1", "--hash", &hash], &env);
        if !crash_in_run {
            assert!(
                out.status.code().is_none(),
                "{point}: approve should have been killed: {}",
                stderr(&out)
            );
            let runs = h.runs();
            let parent = runs.iter().find(|r| r["id"] == run.as_str()).expect("run");
            assert_eq!(parent["state"], "ended", "{point}");
            let status = h.json(&["runs", "show", &run])["deliveries"][0]["status"].clone();
            if status != "verified" && status != "unknown" {
                let out = h.vouch(&["resume", &run], &[]);
                assert!(out.status.code().is_some(), "{point}");
            }
        } else {
            assert!(out.status.success(), "{point}: {}", stderr(&out));
        }
        let sent = hook.applied() - before;
        assert!(sent <= 1, "{point}: the receiver applied {sent} effects");
        // Where the host cannot know, it says unknown — never a claim.
        for r in h.runs() {
            let id = r["id"].as_str().expect("id");
            let show = h.json(&["runs", "show", id]);
            let st = show["deliveries"][0]["status"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let receipt = h.json(&["receipt", id])["receipt"]
                .as_str()
                .unwrap_or("")
                .to_string();
            if st != "verified" {
                assert!(!receipt.contains("Posted to"), "{point}: {receipt}");
            }
            if sent == 0 {
                assert_ne!(
                    st, "verified",
                    "{point}: verified with no effect at the receiver"
                );
            }
        }
        assert_one_terminal_and_intact(&h);
    }
    assert!(*hook.requests.lock().unwrap() >= hook.applied());
}

#[test]
fn the_demo_runs_from_a_fresh_machine_and_every_story_checks_out() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let out = Command::new(vouch_bin())
        .arg("demo")
        .env("TMPDIR", tmp.path())
        .output()
        .expect("run demo");
    assert_eq!(
        demo_homes_left(tmp.path()),
        Vec::<String>::new(),
        "the demo left its temporary home behind"
    );
    let text = stdout(&out);
    assert!(out.status.success(), "{text}{}", stderr(&out));
    assert!(
        text.contains("Demo finished: every receipt matched what really happened."),
        "{text}"
    );
    assert!(text.contains("Failed: HTTP 503"), "{text}");
    assert!(text.contains("The slot of"), "{text}");
    // The empty-diff story (issue 14): the model's words against the host's diff.
    assert!(text.contains("implemented retry handling"), "{text}");
    assert!(text.contains("Changed: nothing"), "{text}");
    // The board story: alpha killed mid-task, beta finished it, the measures shown.
    assert!(text.contains("attempt 1 by alpha: timed_out"), "{text}");
    assert!(text.contains("attempt 2 by beta: completed"), "{text}");
    assert!(text.contains("retry recovery"), "{text}");
}

/// The corpus through the real host: every scenario must agree with the oracle and with its
/// `expect` (issue: the contract as code). Runs `vouch scenario run corpus/` for real.
#[test]
fn the_whole_corpus_agrees_between_runner_and_oracle() {
    let corpus = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
    let out = Command::new(vouch_bin())
        .args(["scenario", "run"])
        .arg(&corpus)
        .output()
        .expect("run corpus");
    let text = stdout(&out);
    assert!(out.status.success(), "{text}");
    assert!(text.contains(" 0 disagree"), "{text}");
    let out = Command::new(vouch_bin())
        .args(["oracle", "--summary"])
        .arg(&corpus)
        .output()
        .expect("oracle");
    assert!(out.status.success(), "{}", stdout(&out));
    assert!(stdout(&out).contains("0 disagreeing"), "{}", stdout(&out));
}

#[test]
fn malformed_scenarios_exit_2_naming_file_and_field() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("bad.json");
    std::fs::write(&p, r#"{"id": "x", "script": [], "wrld": {}}"#).unwrap();
    for cmd in [vec!["oracle"], vec!["scenario", "run"]] {
        let out = Command::new(vouch_bin())
            .args(&cmd)
            .arg(&p)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{cmd:?}");
        let err = stderr(&out);
        assert!(err.contains("bad.json") && err.contains("wrld"), "{err}");
    }
}

/// Issue 21: `vouch scenario run --json` printed nothing for a scenario the runner could not
/// run; it prints one JSON line naming the scenario and the runner's error.
#[test]
fn scenario_run_json_prints_the_runners_error() {
    let tmp = tempfile::tempdir().unwrap();
    let p = tmp.path().join("bad-schema.json");
    // Loads (a custom type with an object schema) but is no usable JSON Schema: the runner
    // cannot register the type.
    std::fs::write(
        &p,
        json!({"id": "bad-schema", "trigger": {"kind": "task"},
            "task": {"type": "weird", "output_schema": {"type": 5}},
            "script": [{"declare": {"deliveries": []}}, {"submit": {"x": 1}}]})
        .to_string(),
    )
    .unwrap();
    let out = Command::new(vouch_bin())
        .args(["--json", "scenario", "run"])
        .arg(&p)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    let line: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}: {text:?}"));
    assert_eq!(line["id"], "bad-schema", "{line}");
    assert_eq!(line["agrees"], false, "{line}");
    let error = line["error"].as_str().unwrap_or_default();
    assert!(
        error.contains("the runner failed") && error.contains("output_schema"),
        "{line}"
    );
}

#[test]
fn schedules_from_the_command_line_and_their_bad_input() {
    let h = Home::new();
    let routine = h.script(
        "brief.json",
        json!({"prompt": "Prepare my brief", "script": [
            {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Briefs/b.md"}}]}},
            {"deliver": "d1", "payload": {"text": "brief"}}
        ]}),
    );
    let r = routine.to_str().unwrap();
    let out = h.vouch(
        &[
            "schedule",
            "add",
            "brief",
            "--cron",
            "61 7 * * *",
            "--routine",
            r,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("61 7 * * *"), "{}", stderr(&out));
    let out = h.vouch(
        &[
            "schedule",
            "add",
            "brief",
            "--cron",
            "0 7 * * *",
            "--tz",
            "Mars/Base",
            "--routine",
            r,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("Mars/Base"));
    let out = h.vouch(
        &[
            "schedule",
            "add",
            "brief",
            "--cron",
            "0 7 * * *",
            "--grace",
            "5 parsecs",
            "--routine",
            r,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    let out = h.vouch(
        &[
            "schedule",
            "add",
            "brief",
            "--cron",
            "0 7 * * *",
            "--tz",
            "Europe/Berlin",
            "--routine",
            r,
            "--catch-up",
            "latest",
        ],
        &[],
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let out = h.vouch(
        &[
            "schedule",
            "add",
            "brief",
            "--cron",
            "0 8 * * *",
            "--routine",
            r,
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(2), "a duplicate name is refused");
    let list = h.json(&["schedule", "list"]);
    assert_eq!(list[0]["name"], "brief");
    assert_eq!(list[0]["catch_up"], "latest");
    assert_eq!(list[0]["routine"]["model"]["kind"], "script");
    // One serve tick with nothing due starts nothing.
    let out = h.vouch(&["--json", "serve", "--once"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(h.runs().is_empty());
    assert!(h.vouch(&["schedule", "rm", "brief"], &[]).status.success());
    assert_eq!(
        h.vouch(&["schedule", "rm", "brief"], &[]).status.code(),
        Some(2)
    );
}

#[test]
fn decisions_on_runs_that_are_not_waiting_are_refused_and_change_nothing() {
    let h = Home::new();
    let s = h.script("s.json", json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "n.md"}}]}},
        {"deliver": "d1", "payload": {"text": "x"}}
    ]));
    assert!(h
        .vouch(&["run", "Save", "--script", s.to_str().unwrap()], &[])
        .status
        .success());
    let run = h.runs()[0]["id"].as_str().unwrap().to_string();
    let before = h.journal(&run).len();
    for args in [
        vec!["approve", run.as_str(), "d1", "--hash", "abc"],
        vec!["deny", run.as_str(), "d1"],
        vec!["answer", run.as_str(), "yes"],
        vec!["cancel", run.as_str()],
        vec!["resume", run.as_str()],
    ] {
        let out = h.vouch(&args, &[]);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(&run), "{args:?}: {}", stderr(&out));
    }
    assert_eq!(h.journal(&run).len(), before, "nothing was journaled");
    assert_eq!(h.runs().len(), 1, "no continuation was started");
    let bad = h.script("bad.json", json!([{"declare": 5}]));
    let out = h.vouch(&["run", "x", "--script", bad.to_str().unwrap()], &[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("turn 0"), "{}", stderr(&out));
}

/// The same host on the real PostgreSQL (`VOUCH_DATABASE_URL`): a run killed halfway is
/// reconciled at start-up and resumed, and every chain verifies.
#[test]
fn the_host_runs_on_postgresql_too() {
    let url = std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let schema = format!(
        "vouch_cli_test_{}_{}",
        std::process::id(),
        nanos % 1_000_000_000
    );
    let env = [
        ("VOUCH_DATABASE_URL", url.as_str()),
        ("VOUCH_DATABASE_SCHEMA", schema.as_str()),
    ];
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let vouch = |args: &[&str], extra: &[(&str, &str)]| {
        let mut c = Command::new(vouch_bin());
        c.arg("--home")
            .arg(&home)
            .args(args)
            .env_remove("VOUCH_CRASH_AFTER");
        for (k, v) in env.iter().chain(extra.iter()) {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let out = vouch(&["init"], &[]);
    assert!(
        out.status.success(),
        "is PostgreSQL up on {url}? {}",
        stderr(&out)
    );
    assert!(
        !home.join("vouch.db").exists(),
        "no SQLite file when PostgreSQL is chosen"
    );
    let script = tmp.path().join("s.json");
    std::fs::write(&script, two_saves().to_string()).unwrap();
    let out = vouch(
        &["run", "Two reports", "--script", script.to_str().unwrap()],
        &[("VOUCH_CRASH_AFTER", "evidence:d1")],
    );
    assert!(out.status.code().is_none(), "should have been killed");
    let runs: Value =
        serde_json::from_slice(&vouch(&["--json", "runs", "list"], &[]).stdout).unwrap();
    let parent = runs[0]["id"].as_str().unwrap().to_string();
    assert_eq!(runs[0]["ended_by"], "boot");
    let out = vouch(&["resume", &parent], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(
        std::fs::read_to_string(home.join("files/Reports/b.md")).unwrap(),
        "B\n"
    );
    let out = vouch(&["journal", "verify"], &[]);
    assert!(out.status.success(), "{}", stdout(&out));
    // Clean up the schema.
    let mut client = postgres_drop(&url);
    let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
}

fn postgres_drop(url: &str) -> postgres::Client {
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

/// Issue 11 #1, "output can kill work": with stdout and stderr closed before the run prints
/// anything (a pipe into `head`, a closed terminal), the run still ends as it would have —
/// succeeded, the file on disk, one terminal record — and nothing is left for start-up
/// reconciliation to call interrupted.
#[test]
fn closed_stdout_and_stderr_do_not_change_what_a_run_does() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/save-notes.json");
    for extra in [&[][..], &["--watch"][..]] {
        let h = Home::new();
        let mut c = Command::new(vouch_bin());
        c.arg("--home")
            .arg(&h.dir)
            .args(["run", "Save my notes to Notes/", "--script"])
            .arg(&script)
            .args(extra)
            .env_remove("VOUCH_CRASH_AFTER")
            .env_remove("VOUCH_MODEL_URL")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let mut child = c.spawn().expect("spawn vouch run");
        // Close the read ends before the process can print: every write it makes fails.
        drop(child.stdout.take());
        drop(child.stderr.take());
        let status = child.wait().expect("wait");
        assert!(
            status.code() == Some(0),
            "{extra:?}: a closed output changed the exit: {status:?}"
        );
        let runs = h.runs();
        assert_eq!(runs.len(), 1, "{extra:?}: {runs:?}");
        assert_eq!(runs[0]["outcome"], "succeeded", "{extra:?}: {:?}", runs[0]);
        assert_ne!(runs[0]["ended_by"], "boot", "{extra:?}");
        assert_eq!(
            std::fs::read_to_string(h.file("Notes/today.md")).expect("saved file"),
            "# Today\n\n- ship the foundation\n",
            "{extra:?}"
        );
    }
}

fn demo_homes_left(tmp: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(tmp)
        .expect("read tmp")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("vouch-demo-"))
        .collect()
}

/// Issue 11 #1: the demo removes its temporary home on every way out — here Ctrl-C (SIGINT)
/// while its stories run.
#[test]
fn the_demo_interrupted_by_ctrl_c_removes_its_temporary_home() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut child = Command::new(vouch_bin())
        .arg("demo")
        .env("TMPDIR", tmp.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn demo");
    // Wait until the demo has made its home, then interrupt it.
    for _ in 0..200 {
        if !demo_homes_left(tmp.path()).is_empty() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    assert!(
        !demo_homes_left(tmp.path()).is_empty(),
        "the demo never created its home"
    );
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .expect("kill -INT");
    assert!(kill.success());
    let status = child.wait().expect("wait demo");
    assert!(!status.success(), "an interrupted demo must not exit 0");
    assert_eq!(demo_homes_left(tmp.path()), Vec::<String>::new());
}

/// Issue 21 #3: a control character in an id or a name is bad input (exit 2) before either
/// backend sees it; the same answer on SQLite and on PostgreSQL, and nothing is written.
#[test]
fn a_control_character_in_an_id_is_exit_2_on_both_backends() {
    let url = std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!("vouch_cli_test_ids_{}", std::process::id());
    let routine =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/brief-routine.json");
    let routine = routine.to_str().unwrap();
    for pg in [false, true] {
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        let vouch = |args: &[&str]| {
            let mut c = Command::new(vouch_bin());
            c.arg("--home").arg(&home).args(args);
            if pg {
                c.env("VOUCH_DATABASE_URL", &url)
                    .env("VOUCH_DATABASE_SCHEMA", &schema);
            }
            c.output().unwrap()
        };
        let out = vouch(&["init"]);
        assert!(out.status.success(), "pg={pg}: {}", stderr(&out));
        for args in [
            vec!["runs", "show", "r\n1"],
            vec!["receipt", "\u{1b}[2J"],
            vec!["approve", "last", "d\u{7f}", "--hash", "abc"],
            vec!["deny", "r\u{85}", "d1"],
            vec!["cancel", "\r"],
            vec!["task", "show", "t\u{1}"],
            vec!["schedule", "rm", "x\ty"],
            vec![
                "schedule",
                "add",
                "x\u{1b}y",
                "--cron",
                "0 7 * * *",
                "--routine",
                routine,
            ],
        ] {
            let out = vouch(&args);
            assert_eq!(
                out.status.code(),
                Some(2),
                "pg={pg} {args:?}: {}",
                stderr(&out)
            );
            assert!(
                stderr(&out).contains("control character"),
                "pg={pg} {args:?}: {}",
                stderr(&out)
            );
        }
        let out = vouch(&["--json", "schedule", "list"]);
        let list: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(list, serde_json::json!([]), "pg={pg}: nothing was written");
    }
    let mut client = postgres_drop(&url);
    let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
}
