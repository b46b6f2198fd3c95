#![allow(clippy::unwrap_used, clippy::expect_used)]
//! E-mail against a real SMTP server (aiosmtpd) on loopback: approval binds the exact text,
//! the server receives it once, a crash between the server's effect and the journal leaves
//! `unknown` (never a second message), and a missing configuration drafts an openable .eml.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};

mod support;

use support::{Home, SmtpSink as Sink};

fn send_script(text_first: &str, text_second: &str) -> Value {
    json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "email", "address": "board@example.com"}}]}},
        {"deliver": "d1", "payload": {"to": "board@example.com", "subject": "Q4", "body": text_first}},
        {"deliver": "d1", "payload": {"to": "board@example.com", "subject": "Q4", "body": text_second}},
        {"final": "Done — sent to the board."}
    ])
}

fn config(port: u16) -> String {
    format!("[email]\nhost = \"127.0.0.1\"\nport = {port}\nfrom = \"agent@example.com\"\ntls = \"none\"\ntimeout_ms = 5000\n")
}

#[test]
fn the_approved_text_reaches_the_server_exactly_once() {
    let tmp = tempfile::tempdir().unwrap();
    let sink = Sink::start(&tmp.path().join("mail"));
    let h = Home::new(&config(sink.port));
    let s = h.script(&send_script(
        "The approved text.",
        "A regenerated text the person never saw.",
    ));
    let out = h.vouch(&["run", "Email the board the Q4 note", "--script", &s], &[]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        sink.messages().is_empty(),
        "nothing may go out before approval"
    );
    let cards = h.json(&["approvals"]);
    let card = &cards[0];
    assert_eq!(card["payload"]["body"], "The approved text.");
    let run = card["run"].as_str().unwrap().to_string();
    let hash = card["payload_hash"].as_str().unwrap().to_string();

    // An unknown hash is refused and changes nothing.
    let out = h.vouch(&["approve", &run, "d1", "--hash", &"0".repeat(64)], &[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(sink.messages().is_empty());

    let out = h.vouch(&["approve", &run, "d1", "--hash", &hash], &[]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let msgs = sink.messages();
    assert_eq!(msgs.len(), 1, "exactly one message");
    assert!(msgs[0].contains("The approved text."));
    assert!(!msgs[0].contains("regenerated"));
    assert!(msgs[0].contains("Message-ID: <"), "{}", msgs[0]);
    let receipt = h.json(&["receipt", &run])["receipt"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        receipt.contains("Sent to email board@example.com"),
        "{receipt}"
    );
    assert!(receipt.contains("SMTP 250"), "{receipt}");

    // Approving again (the card is decided) is an error and sends nothing.
    let out = h.vouch(&["approve", &run, "d1", "--hash", &hash], &[]);
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(sink.messages().len(), 1);
    let ledger = h.json(&["ledger"]);
    assert_eq!(ledger.as_array().unwrap().len(), 1);
    assert_eq!(ledger[0]["state"], "done");
}

#[test]
fn a_crash_between_the_servers_effect_and_the_journal_is_unknown_never_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let sink = Sink::start(&tmp.path().join("mail"));
    let h = Home::new(&config(sink.port));
    let s = h.script(&send_script("Only once.", "Only once."));
    assert_eq!(
        h.vouch(&["run", "Email the board", "--script", &s], &[])
            .status
            .code(),
        Some(3),
        "the e-mail waits for approval: exit 3"
    );
    let card = h.json(&["approvals"])[0].clone();
    let run = card["run"].as_str().unwrap().to_string();
    let hash = card["payload_hash"].as_str().unwrap().to_string();
    let out = h.vouch(
        &["approve", &run, "d1", "--hash", &hash],
        &[("VOUCH_CRASH_AFTER", "provider_effect:d1")],
    );
    assert!(
        out.status.code().is_none(),
        "the process should have been killed"
    );
    assert_eq!(sink.messages().len(), 1);
    let show = h.json(&["runs", "show", &run]);
    assert_eq!(show["run"]["ended_by"], "boot");
    assert_eq!(show["deliveries"][0]["status"], "unknown");
    let receipt = h.json(&["receipt", &run])["receipt"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        receipt.contains("Can't confirm whether it went out"),
        "{receipt}"
    );
    assert!(!receipt.contains("Sent to"), "{receipt}");
    // Resuming never retries an unknown act.
    let out = h.vouch(&["resume", &run], &[]);
    assert!(out.status.code().is_some());
    assert_eq!(
        sink.messages().len(),
        1,
        "an unknown send must not be retried"
    );
    let ledger = h.json(&["ledger"]);
    assert_eq!(ledger[0]["state"], "unknown");
}

#[test]
fn without_email_configured_the_send_is_drafted_with_a_connect_step() {
    let h = Home::new("");
    let s = h.script(&send_script("Draft me.", "Draft me."));
    let out = h.vouch(&["run", "Email the board", "--script", &s], &[]);
    let text = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(text.contains("Drafted, not executed"), "{text}");
    assert!(
        text.contains("add a [email] section to vouch.toml"),
        "{text}"
    );
    let drafts: Vec<_> = walk(&h.dir.join("drafts"))
        .into_iter()
        .filter(|p| p.extension().map(|e| e == "eml").unwrap_or(false))
        .collect();
    assert_eq!(drafts.len(), 1);
    let eml = std::fs::read_to_string(&drafts[0]).unwrap();
    assert!(
        eml.contains("To: board@example.com") && eml.contains("Draft me."),
        "{eml}"
    );
    let out = h.vouch(&["doctor"], &[]);
    let doc = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        doc.contains("email") && doc.contains("needs_setup"),
        "{doc}"
    );
}

#[test]
fn a_malformed_config_is_a_clear_error() {
    let h = Home::new("[email]\nhost = 5\n");
    let out = h.vouch(&["runs", "list"], &[]);
    assert_ne!(out.status.code(), Some(0));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("vouch.toml"), "{err}");
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}

#[test]
fn edit_supersedes_the_card_and_bad_decisions_change_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let sink = Sink::start(&tmp.path().join("mail"));
    let h = Home::new(&config(sink.port));
    let s = h.script(&json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "email", "address": "board@example.com"}}]}},
        {"deliver": "d1", "payload": {"to": "board@example.com", "subject": "Q4", "body": "first draft"}},
        {"final": ""}
    ]));
    assert_eq!(
        h.vouch(&["run", "Email the board", "--script", &s], &[])
            .status
            .code(),
        Some(3),
        "the e-mail waits for approval: exit 3"
    );
    let card = h.json(&["approvals"])[0].clone();
    let run = card["run"].as_str().unwrap().to_string();
    let old = card["payload_hash"].as_str().unwrap().to_string();

    let bad = h.tmp.path().join("bad.json");
    std::fs::write(&bad, "{not json").unwrap();
    let out = h.vouch(
        &["edit", &run, "d1", "--payload", bad.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("bad.json"));
    let out = h.vouch(
        &["edit", &run, "d9", "--payload", bad.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));

    // An edit that does not fit an e-mail's payload is refused, naming the field (§6.0.2).
    let misfit = h.tmp.path().join("misfit.json");
    std::fs::write(&misfit, r#"{"to": "board@example.com", "subject": "Q4"}"#).unwrap();
    let out = h.vouch(
        &["edit", &run, "d1", "--payload", misfit.to_str().unwrap()],
        &[],
    );
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("body"));

    let good = h.tmp.path().join("good.json");
    std::fs::write(
        &good,
        r#"{"to": "board@example.com", "subject": "Q4", "body": "the edited text"}"#,
    )
    .unwrap();
    let out = h.vouch(
        &[
            "--json",
            "edit",
            &run,
            "d1",
            "--payload",
            good.to_str().unwrap(),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let new = serde_json::from_slice::<Value>(&out.stdout).unwrap()["payload_hash"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(new, old);
    // The superseded hash can no longer be approved, and nothing is sent.
    let out = h.vouch(&["approve", &run, "d1", "--hash", &old], &[]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("superseded"));
    assert!(sink.messages().is_empty());
    let cards = h.json(&["approvals"]);
    assert_eq!(cards.as_array().unwrap().len(), 1);
    assert_eq!(cards[0]["payload"]["body"], "the edited text");
    let out = h.vouch(&["approve", &run, "d1", "--hash", &new], &[]);
    assert!(out.status.success());
    let msgs = sink.messages();
    assert_eq!(msgs.len(), 1);
    assert!(msgs[0].contains("the edited text") && !msgs[0].contains("first draft"));
    // Denying after the fact is refused.
    let out = h.vouch(&["deny", &run, "d1"], &[]);
    assert_ne!(out.status.code(), Some(0));
}
