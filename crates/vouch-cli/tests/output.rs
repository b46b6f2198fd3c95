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
    assert_eq!(code, 0, "{out}");
    insta::assert_snapshot!("approvals_question", h.text(&["approvals"]));
    insta::assert_snapshot!("approvals_question_json", h.json(&["approvals"]));
    insta::assert_snapshot!("inbox_waiting", h.text(&["inbox"]));
    insta::assert_snapshot!("inbox_count_json", h.json(&["inbox", "--count"]));
}
