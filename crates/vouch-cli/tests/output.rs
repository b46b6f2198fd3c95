//! What people and programs read: the CLI's human and `--json` output for the commands a
//! person uses after a run, as insta snapshots (issue 10, item 7). A change in wording, layout
//! or a JSON field shows in review as a snapshot diff.
//!
//! Ids, hashes, times and durations differ on every run; they are replaced by stable words
//! before the snapshot is compared, and nothing else is.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use regex::Regex;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn vouch_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vouch"))
}

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples")
}

struct Home {
    dir: tempfile::TempDir,
}

impl Home {
    fn new() -> Home {
        let h = Home {
            dir: tempfile::tempdir().unwrap(),
        };
        let out = h.vouch(&["init"]);
        assert_eq!(out.1, 0, "init: {}", out.0);
        h
    }

    /// (stdout, exit code)
    fn vouch(&self, args: &[&str]) -> (String, i32) {
        let out = Command::new(vouch_bin())
            .arg("--home")
            .arg(self.dir.path())
            .args(args)
            .env_remove("VOUCH_DATABASE_URL")
            .env_remove("VOUCH_CRASH_AFTER")
            .env("TZ", "UTC")
            .output()
            .unwrap();
        (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            out.status.code().unwrap_or(-1),
        )
    }

    fn text(&self, args: &[&str]) -> String {
        let (out, code) = self.vouch(args);
        assert_eq!(code, 0, "vouch {args:?}: {out}");
        normalize(&out)
    }

    fn json(&self, args: &[&str]) -> String {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let (out, code) = self.vouch(&all);
        assert_eq!(code, 0, "vouch {all:?}: {out}");
        let v: Value = serde_json::from_str(out.trim())
            .unwrap_or_else(|e| panic!("vouch {all:?} printed no JSON ({e}): {out}"));
        normalize(&serde_json::to_string_pretty(&scrub(v)).unwrap())
    }
}

/// Times in JSON (`*_ms` fields) become 0; the rest is left as printed.
fn scrub(v: Value) -> Value {
    match v {
        Value::Object(m) => Value::Object(
            m.into_iter()
                .map(|(k, v)| {
                    let v = if k.ends_with("_ms") && v.is_number() {
                        Value::from(0)
                    } else {
                        scrub(v)
                    };
                    (k, v)
                })
                .collect(),
        ),
        Value::Array(a) => Value::Array(a.into_iter().map(scrub).collect()),
        other => other,
    }
}

/// Run ids (20 hex digits), payload hashes (64, or a shown prefix of 12 after `sha256:`),
/// durations and clock times become words.
fn normalize(s: &str) -> String {
    let rules = [
        (r"\b[0-9a-f]{64}\b", "HASH"),
        (r"sha256:[0-9a-f]{12,64}", "sha256:HASH"),
        (r"\bt[0-9a-f]{20}\b", "TASK"),
        (r"\b[0-9a-f]{20}\b", "RUN"),
        (r"\b\d+\.\d s\b", "N.N s"),
        (
            r"\b\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2})?(Z|[+-]\d{2}:?\d{2})?",
            "TIME",
        ),
    ];
    let mut out = s.to_string();
    for (pat, word) in rules {
        out = Regex::new(pat)
            .unwrap()
            .replace_all(&out, word)
            .into_owned();
    }
    out
}

#[test]
fn normalizing_replaces_only_what_varies() {
    let raw = "run 01a2402106de785986ac · 0.3 s · sha256:4e33207bae70 · 4 turns";
    assert_eq!(
        normalize(raw),
        "run RUN · N.N s · sha256:HASH · 4 turns",
        "ids, hashes and durations go; counts stay"
    );
}

#[test]
fn a_finished_run_as_a_person_and_a_program_read_it() {
    let h = Home::new();
    let script = examples().join("save-notes.json");
    let (_, code) = h.vouch(&["run", "Save my notes", "--script", script.to_str().unwrap()]);
    assert_eq!(code, 0);
    insta::assert_snapshot!("receipt", h.text(&["receipt", "last"]));
    insta::assert_snapshot!("runs_show", h.text(&["runs", "show", "last"]));
    insta::assert_snapshot!("runs_show_json", h.json(&["runs", "show", "last"]));
    insta::assert_snapshot!("inbox", h.text(&["inbox"]));
    insta::assert_snapshot!("inbox_json", h.json(&["inbox"]));
    insta::assert_snapshot!("ledger", h.text(&["ledger"]));
}

#[test]
fn a_run_waiting_for_an_answer_as_a_person_and_a_program_read_it() {
    let h = Home::new();
    let script = examples().join("ask-first.json");
    let (out, code) = h.vouch(&[
        "run",
        "Plan the team offsite",
        "--script",
        script.to_str().unwrap(),
    ]);
    assert_eq!(code, 3, "waiting for you has its own exit code: {out}");
    insta::assert_snapshot!("approvals_question", h.text(&["approvals"]));
    insta::assert_snapshot!("approvals_question_json", h.json(&["approvals"]));
    insta::assert_snapshot!("inbox_waiting", h.text(&["inbox"]));
    insta::assert_snapshot!("inbox_count_json", h.json(&["inbox", "--count"]));
}

#[test]
fn runs_list_has_time_columns_and_filters() {
    let h = Home::new();
    let save = examples().join("save-notes.json");
    let draft = examples().join("email-draft.json");
    let (_, code) = h.vouch(&["run", "Save my notes", "--script", save.to_str().unwrap()]);
    assert_eq!(code, 0);
    let (_, code) = h.vouch(&[
        "run",
        "E-mail the team",
        "--script",
        draft.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "a drafted e-mail is work that did not succeed");
    insta::assert_snapshot!("runs_list", h.text(&["runs", "list"]));
    let failed = h.text(&["runs", "list", "--outcome", "failed"]);
    assert!(
        failed.contains("E-mail the team") && !failed.contains("Save my notes"),
        "{failed}"
    );
    let titled = h.text(&["runs", "list", "--title", "NOTES", "--since", "1h"]);
    assert!(
        titled.contains("Save my notes") && !titled.contains("E-mail"),
        "{titled}"
    );
    let none = h.text(&["runs", "list", "--trigger", "scheduled"]);
    assert!(none.starts_with("No run matches these filters"), "{none}");
    let (out, code) = h.vouch(&["runs", "list", "--since", "0h"]);
    assert_eq!(code, 2, "a window of nothing is bad input: {out}");
    let (out, code) = h.vouch(&["runs", "list", "--state", "finished"]);
    assert_eq!(code, 2, "only the stored words: {out}");
}

#[test]
fn a_drafts_receipt_names_the_draft_and_the_whole_next_step() {
    let h = Home::new();
    let draft = examples().join("email-draft.json");
    let (out, code) = h.vouch(&[
        "run",
        "E-mail the team",
        "--script",
        draft.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}");
    let home = h.dir.path().display().to_string();
    let receipt = h.text(&["receipt", "last"]).replace(&home, "HOME");
    insta::assert_snapshot!("receipt_draft", receipt);
}

#[test]
fn schedule_list_shows_the_next_slot() {
    let h = Home::new();
    let routine = examples().join("brief-routine.json");
    let (out, code) = h.vouch(&[
        "schedule",
        "add",
        "brief",
        "--cron",
        "0 7 * * *",
        "--tz",
        "Europe/Berlin",
        "--routine",
        routine.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}");
    insta::assert_snapshot!("schedule_list", h.text(&["schedule", "list"]));
    let (out, _) = h.vouch(&["--json", "schedule", "list"]);
    let v: Value = serde_json::from_str(&out).unwrap();
    let next = v[0]["next_slot"].as_str().unwrap();
    assert!(
        next.ends_with("T07:00:00+01:00") || next.ends_with("T07:00:00+02:00"),
        "{next}"
    );
    assert!(v[0]["next_slot_ms"].as_i64().unwrap() > v[0]["created_ms"].as_i64().unwrap());
}

#[test]
fn waiting_for_you_exits_3_and_last_is_the_newest_waiting_run() {
    let h = Home::new();
    let save = examples().join("save-notes.json");
    let overwrite = examples().join("overwrite-notes.json");
    let (_, code) = h.vouch(&["run", "Save", "--script", save.to_str().unwrap()]);
    assert_eq!(code, 0);
    let (out, code) = h.vouch(&["run", "Rewrite", "--script", overwrite.to_str().unwrap()]);
    assert_eq!(code, 3, "an overwrite waits for approval: {out}");
    let waiting = h.text(&["runs", "list", "--state", "suspended"]);
    // A newer run that ended does not make `last` mean it.
    let (_, code) = h.vouch(&["run", "Save again", "--script", save.to_str().unwrap()]);
    assert_eq!(code, 0);
    let (out, code) = h.vouch(&["answer", "last", "Friday"]);
    assert_eq!(code, 2, "no run waits for an answer: {out}");
    assert!(out.is_empty());
    let (out, code) = h.vouch(&["deny", "last", "d1"]);
    assert_eq!(code, 0, "the waiting run, not the newest: {out}");
    assert!(
        out.contains("withdrawn") || out.contains("Withdrawn"),
        "{out}"
    );
    assert!(waiting.contains("Rewrite"), "{waiting}");
    let (out, code) = h.vouch(&["watch", "last"]);
    assert_eq!(code, 0, "a run that succeeded: {out}");
}

#[test]
fn watch_exits_like_run() {
    let h = Home::new();
    let draft = examples().join("email-draft.json");
    let (_, code) = h.vouch(&[
        "run",
        "E-mail the team",
        "--script",
        draft.to_str().unwrap(),
    ]);
    assert_eq!(code, 1);
    let (out, code) = h.vouch(&["watch", "last"]);
    assert_eq!(code, 1, "the work did not succeed: {out}");
}

#[test]
fn completions_and_the_manual_come_from_the_same_definitions_as_help() {
    let h = Home::new();
    for (shell, marker) in [
        ("bash", "_vouch()"),
        ("zsh", "#compdef vouch"),
        ("fish", "complete -c vouch"),
    ] {
        let (out, code) = Command::new(vouch_bin())
            .args(["completions", shell])
            .output()
            .map(|o| {
                (
                    String::from_utf8_lossy(&o.stdout).into_owned(),
                    o.status.code(),
                )
            })
            .unwrap();
        assert_eq!(code, Some(0));
        assert!(out.contains(marker), "{shell}: {out}");
        assert!(
            out.contains("approvals") && out.contains("schedule"),
            "{shell}"
        );
    }
    let (out, code) = Command::new(vouch_bin())
        .arg("man")
        .output()
        .map(|o| {
            (
                String::from_utf8_lossy(&o.stdout).into_owned(),
                o.status.code(),
            )
        })
        .unwrap();
    assert_eq!(code, Some(0));
    assert!(
        out.starts_with(".ie") && out.contains(".TH vouch 1"),
        "{out}"
    );
    assert!(
        out.contains(".SH \"EXIT STATUS\"") && out.contains("Waiting for you"),
        "{out}"
    );
    let dir = tempfile::tempdir().unwrap();
    let (_, code) = h.vouch(&["man", "--dir", dir.path().to_str().unwrap()]);
    assert_eq!(code, 0, "man uses no home: --home is ignored, with a note");
    let status = Command::new(vouch_bin())
        .args(["man", "--dir"])
        .arg(dir.path())
        .status()
        .unwrap();
    assert!(status.success());
    for page in [
        "vouch.1",
        "vouch-run.1",
        "vouch-runs-list.1",
        "vouch-schedule-add.1",
    ] {
        assert!(dir.path().join(page).is_file(), "{page}");
    }
    let (_, code) = h.vouch(&["--json", "completions", "bash"]);
    assert_eq!(code, 2);
}

#[test]
fn a_draining_worker_counts_and_sums_up() {
    let h = Home::new();
    let script = examples().join("worker-script.json");
    for brief in ["Summarise the Q3 notes", "Summarise the Q4 notes"] {
        let (out, code) = h.vouch(&["task", "offer", "--type", "freeform", "--brief", brief]);
        assert_eq!(code, 0, "{out}");
    }
    insta::assert_snapshot!("task_list_queued", h.text(&["task", "list"]));
    let (out, code) = h.vouch(&[
        "worker",
        "--name",
        "w1",
        "--script",
        script.to_str().unwrap(),
        "--drain",
    ]);
    assert_eq!(code, 0, "{out}");
    insta::assert_snapshot!("worker_drain", normalize(&out));
}
