#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 11 #8, §9.5: a draft could not be finished, and a cancel read as a failure. An
//! e-mail drafted while SMTP was not configured is finished after the person configures it:
//! `vouch resume` opens one approval card for the drafted payload's hash (the model is not
//! asked again), and approving it delivers exactly the drafted text to a real SMTP server
//! (aiosmtpd on loopback). A cancel withdraws what is unsettled and is not a failure (§9.4).

mod support;

use serde_json::{json, Value};
use support::{Home, SmtpSink};

fn email_config(port: u16) -> String {
    format!("[email]\nhost = \"127.0.0.1\"\nport = {port}\nfrom = \"agent@example.com\"\ntls = \"none\"\ntimeout_ms = 5000\n")
}

/// Decode a quoted-printable body (RFC 2045): soft line breaks and `=XX` bytes.
fn quoted_printable(text: &str) -> String {
    let text = text.replace("=\n", "");
    let b = text.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = b
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (b[i], hex) {
            (b'=', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (c, _) => {
                out.push(c);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn an_email_drafted_before_smtp_was_configured_is_sent_after_resume_and_approval() {
    let tmp = tempfile::tempdir().unwrap();
    let sink = SmtpSink::start(&tmp.path().join("mail"));
    let h = Home::new("");
    let body = "Hi team,\nthe Q4 numbers are attached as discussed.\n— A.";
    let s = h.script(&json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "email", "address": "team@example.com"}}]}},
        {"deliver": "d1", "payload": {"to": "team@example.com", "subject": "Q4 numbers", "body": body}},
        {"final": ""}
    ]));
    let out = h.vouch(
        &["run", "Email the team the Q4 numbers", "--script", &s],
        &[],
    );
    assert_eq!(out.status.code(), Some(1), "drafted, not delivered");
    let parent = h.json(&["runs", "list"])[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = h.json(&["runs", "show", &parent]);
    assert_eq!(show["deliveries"][0]["status"], "drafted", "{show}");
    let journal = h.json(&["journal", &parent]);
    let drafted_hash = journal
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "drafted")
        .map(|e| e["body"]["payload_hash"].as_str().unwrap().to_string())
        .expect("a drafted event");
    assert_eq!(sink.count(), 0);

    // Asked to finish it before e-mail is connected: it stays a draft (the draft rides into
    // the continuation), nothing is sent, no card opens.
    let out = h.vouch(&["resume", &parent], &[]);
    assert_eq!(out.status.code(), Some(1), "still only drafted");
    assert!(h.json(&["approvals"]).as_array().unwrap().is_empty());
    let parent = h.json(&["runs", "list"])[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let show = h.json(&["runs", "show", &parent]);
    assert_eq!(show["deliveries"][0]["status"], "drafted", "{show}");
    assert_eq!(sink.count(), 0);

    // The person connects e-mail, then asks to finish it.
    std::fs::write(h.dir.join("vouch.toml"), email_config(sink.port)).unwrap();
    let out = h.vouch(&["resume", &parent], &[]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        sink.count(),
        0,
        "irreversible: nothing goes out before approval"
    );
    let cards = h.json(&["approvals"]);
    let cards = cards.as_array().unwrap();
    assert_eq!(cards.len(), 1, "one approval card: {cards:?}");
    assert_eq!(
        cards[0]["payload_hash"], drafted_hash,
        "the card is for the drafted payload's hash"
    );
    assert_eq!(cards[0]["payload"]["body"], body);
    let child = cards[0]["run"].as_str().unwrap().to_string();
    assert_ne!(child, parent);

    let out = h.vouch(&["approve", &child, "d1", "--hash", &drafted_hash], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let msgs = sink.messages();
    assert_eq!(msgs.len(), 1, "exactly one message");
    let normalized = quoted_printable(&msgs[0].replace("\r\n", "\n"));
    assert!(
        normalized.contains(body),
        "the drafted text, exactly: {}",
        msgs[0]
    );
    assert!(normalized.contains("Subject: Q4 numbers"), "{}", msgs[0]);
    let show = h.json(&["runs", "show", &child]);
    assert_eq!(show["run"]["outcome"], "succeeded", "{show}");
    assert_eq!(show["deliveries"][0]["status"], "verified", "{show}");
}

#[test]
fn a_cancel_withdraws_what_is_left_and_is_not_a_failure() {
    let tmp = tempfile::tempdir().unwrap();
    let sink = SmtpSink::start(&tmp.path().join("mail"));
    let h = Home::new(&email_config(sink.port));
    let s = h.script(&json!([
        {"declare": {"deliveries": [
            {"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Notes/q4.md"}},
            {"id": "d2", "verb": "send", "destination": {"kind": "email", "address": "team@example.com"}},
            {"id": "d3", "verb": "save", "destination": {"kind": "folder", "address": "Notes/sent.md"}}]}},
        {"deliver": "d1", "payload": {"text": "Q4"}},
        {"deliver": "d2", "payload": {"to": "team@example.com", "subject": "Q4", "body": "numbers"}},
        {"deliver": "d3", "payload": {"text": "sent"}},
        {"final": ""}
    ]));
    assert_eq!(
        h.vouch(&["run", "Q4 round", "--script", &s], &[])
            .status
            .code(),
        Some(3),
        "the e-mail waits for approval: exit 3"
    );
    let run = h.json(&["approvals"])[0]["run"]
        .as_str()
        .unwrap()
        .to_string();
    let out = h.vouch(&["cancel", &run], &[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let show = h.json(&["runs", "show", &run]);
    assert_eq!(show["run"]["ended_by"], "cancel", "{show}");
    assert_eq!(
        show["run"]["outcome"], "succeeded",
        "d1 was verified: {show}"
    );
    let status = |i: usize| show["deliveries"][i]["status"].clone();
    assert_eq!(status(0), "verified");
    assert_eq!(status(1), "denied");
    assert_eq!(status(2), "denied");
    let receipt = h.json(&["receipt", &run])["receipt"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        receipt.matches("Withdrawn at your request").count(),
        2,
        "{receipt}"
    );
    assert!(!receipt.contains("Not done"), "{receipt}");
    assert_eq!(sink.count(), 0);
    let _: Value = h.json(&["inbox"]);
}
