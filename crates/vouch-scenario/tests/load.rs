//! Unreadable input names the file and the field (the caller exits 2).

use std::path::PathBuf;
use vouch_scenario::{load_paths, LoadError};

fn load_one(text: &str) -> (PathBuf, Result<(), LoadError>) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("bad.json");
    std::fs::write(&path, text).expect("write");
    let r = load_paths(&[dir.path().to_path_buf()]).map(|_| ());
    (path, r)
}

fn check(text: &str, field: &str, words: &[&str]) {
    let (path, r) = load_one(text);
    let e = r.expect_err("must fail");
    let msg = e.to_string();
    assert!(
        msg.contains(&path.display().to_string()),
        "names the file: {msg}"
    );
    if let LoadError::Parse { field: f, .. } = &e {
        assert_eq!(f, field, "{msg}");
    } else {
        panic!("not a parse error: {msg}");
    }
    for w in words {
        assert!(msg.contains(w), "`{w}` missing in: {msg}");
    }
}

#[test]
fn unknown_fields_bad_enums_and_malformed_json_name_file_and_field() {
    check(
        r#"{"id": "x", "promt": "typo"}"#,
        "promt",
        &["unknown field"],
    );
    check(
        r#"{"id": "x", "trigger": {"kind": "cron"}}"#,
        "trigger.kind",
        &["cron"],
    );
    check(
        r#"{"id": "x", "world": {"behavior": {"email:*": "explode"}}}"#,
        "world.behavior.email:*",
        &["explode"],
    );
    check(
        r#"{"id": "x", "world": {"capabilites": {}}}"#,
        "world.capabilites",
        &["unknown field"],
    );
    check(
        r#"{"id": "x", "script": [{"final": ""}, {"deliver": "d1", "paylod": {}}]}"#,
        "script[1]",
        &["deliver turn", "paylod"],
    );
    check(
        r#"{"id": "x", "script": [{"declare": {"deliveries": [{"id": "a", "verb": "tweet", "destination": {"kind": "folder"}}]}}]}"#,
        "script[0]",
        &["declare.deliveries[0].verb", "tweet"],
    );
    check(
        r#"{"id": "x", "script": [{"shout": "hi"}]}"#,
        "script[0]",
        &["shout"],
    );
    check(
        r#"{"id": "x", "decisions": [{"approve": "d1", "why": "ok"}]}"#,
        "decisions[0]",
        &["why"],
    );
    check(
        r#"{"id": "x", "faults": [{"crash_after": "reboot"}]}"#,
        "faults[0]",
        &["reboot"],
    );
    check(
        r#"{"id": "x", "expect": {"outcome": "great"}}"#,
        "expect.outcome",
        &["great"],
    );
    check(
        r#"{"id": "x", "expect": {"deliveries": {"d1": {"stat": "verified"}}}}"#,
        "expect.deliveries.d1.stat",
        &["unknown field"],
    );
    check(r#"{"id": "x", "quiet": tru}"#, "quiet", &["line 1"]);
    check(r#"{"id": "x"} {"id": "y"}"#, ".", &["trailing"]);
}

#[test]
fn a_declare_with_a_hostile_id_or_too_many_deliveries_does_not_load() {
    check(
        r#"{"id": "x", "script": [{"declare": {"deliveries": [{"id": "../../victim", "verb": "write", "destination": {"kind": "surface"}}]}}]}"#,
        "script[0]",
        &["declare turn", "A–Z a–z 0–9 _ -"],
    );
    let many: Vec<String> = (0..257)
        .map(|i| {
            format!(r#"{{"id": "d{i}", "verb": "write", "destination": {{"kind": "surface"}}}}"#)
        })
        .collect();
    check(
        &format!(
            r#"{{"id": "x", "script": [{{"declare": {{"deliveries": [{}]}}}}]}}"#,
            many.join(",")
        ),
        "script[0]",
        &["257 deliveries", "at most 256"],
    );
}

#[test]
fn duplicate_ids_and_empty_folders_are_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    std::fs::write(dir.path().join("a.json"), r#"{"id": "same"}"#).expect("write");
    std::fs::create_dir(dir.path().join("sub")).expect("mkdir");
    std::fs::write(dir.path().join("sub/b.json"), r#"{"id": "same"}"#).expect("write");
    let e = load_paths(&[dir.path().to_path_buf()]).expect_err("duplicate");
    assert!(matches!(e, LoadError::DuplicateId { .. }), "{e}");
    let empty = tempfile::tempdir().expect("tempdir");
    assert!(matches!(
        load_paths(&[empty.path().to_path_buf()]),
        Err(LoadError::Empty { .. })
    ));
}

#[test]
fn defaults_are_the_documented_ones() {
    let (_, all) = {
        let dir = tempfile::tempdir().expect("tempdir");
        let p = dir.path().join("ok.json");
        std::fs::write(
            &p,
            r#"{"id": "ok", "trigger": {"kind": "scheduled"}, "script": [{"tool": "t"}]}"#,
        )
        .expect("write");
        (dir.path().to_path_buf(), load_paths(&[p]).expect("loads"))
    };
    let s = &all[0].1;
    assert!(s.trigger.ran);
    assert_eq!(s.trigger.grace_s, 900);
    assert_eq!(s.trigger.tz, "UTC");
    assert_eq!(s.presence(), vouch_core::Presence::Away);
    assert!(!s.quiet);
    // Round trip: what we serialize, we read back.
    let text = serde_json::to_string(s).expect("serialize");
    let back: vouch_scenario::Scenario = serde_json::from_str(&text).expect("reparse");
    assert_eq!(&back, s);
}
