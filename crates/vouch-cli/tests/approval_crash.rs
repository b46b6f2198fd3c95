#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 11 #11: a crash turned a "yes" into "not done". A process killed right after the
//! person's approval became durable (before the payload was attempted) left the run `failed`
//! with the approved e-mail never sent, until the person noticed and resumed it. Per §9.2 /
//! contract §7.1 the next start-up carries the approval out, through the ledger: the approved
//! bytes reach a real SMTP server exactly once, with no `resume`.

mod support;

use serde_json::json;
use support::{email_waiting_for_approval, Backend, SmtpSink};

#[test]
fn a_crash_right_after_an_approval_still_sends_the_approved_email_exactly_once() {
    crash_after_approval("approval_granted");
}

#[test]
fn a_crash_before_the_approval_event_was_durable_still_carries_out_the_approved_card() {
    // `~`: the process dies between two durability points, so the `approval_granted` event
    // is lost with the buffer; the card's committed decision is the durable instruction.
    crash_after_approval("~approval_granted:d1");
}

fn crash_after_approval(point: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let sink = SmtpSink::start(&tmp.path().join("mail"));
    let (h, card) = email_waiting_for_approval(Backend::Sqlite, &sink, "The approved numbers.");
    let run = card["run"].as_str().unwrap().to_string();
    let hash = card["payload_hash"].as_str().unwrap().to_string();

    // Killed right after the approval is durable: nothing has gone out yet.
    let out = h.vouch(
        &["approve", &run, "d1", "--hash", &hash],
        &[("VOUCH_CRASH_AFTER", point)],
    );
    assert_eq!(out.status.code(), None, "the process was killed");
    assert_eq!(sink.count(), 0, "the kill came before the attempt");

    // The next start of any command reconciles the run and carries the approval out.
    let show = h.json(&["runs", "show", &run]);
    assert_eq!(show["run"]["state"], "ended", "{show}");
    assert_eq!(show["run"]["ended_by"], "boot", "{show}");
    assert_eq!(show["run"]["outcome"], "succeeded", "{show}");
    assert_eq!(show["deliveries"][0]["status"], "verified", "{show}");
    let msgs = sink.messages();
    assert_eq!(msgs.len(), 1, "exactly one message");
    assert!(msgs[0].contains("The approved numbers."), "{}", msgs[0]);
    let receipt = h.json(&["receipt", &run])["receipt"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        receipt.contains("Sent to email board@example.com"),
        "{receipt}"
    );
    let ledger = h.json(&["ledger"]);
    assert_eq!(ledger.as_array().unwrap().len(), 1);
    assert_eq!(ledger[0]["state"], "done");

    // Later starts change nothing: no second message, one run, nothing to resume.
    h.vouch(&["runs", "list"], &[]);
    assert_eq!(h.json(&["runs", "list"]).as_array().unwrap().len(), 1);
    assert_eq!(sink.count(), 1);
    assert_eq!(h.vouch(&["resume", &run], &[]).status.code(), Some(2));
    assert_eq!(sink.count(), 1);
}

// Issue 21 #4: a process killed after a card's `denied` state committed and before
// `approval_denied` was durable left the run suspended forever, with no card to decide and no
// receipt. The denied card is the durable instruction, as an approved one is (§7.1): the next
// start-up ends the run saying denied, on either store, and nothing is sent.

#[test]
fn a_denial_survives_a_crash() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        // Killed once the denial event is durable, and (`~`) with it still in the buffer.
        crash_after_denial(backend, "approval_denied:d1");
        crash_after_denial(backend, "~approval_denied:d1");
    }
}

fn crash_after_denial(backend: Backend, point: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let sink = SmtpSink::start(&tmp.path().join("mail"));
    let (h, card) = email_waiting_for_approval(backend, &sink, "Numbers nobody approved.");
    let run = card["run"].as_str().unwrap().to_string();

    let out = h.vouch(&["deny", &run, "d1"], &[("VOUCH_CRASH_AFTER", point)]);
    assert_eq!(
        out.status.code(),
        None,
        "{backend:?} {point}: the process was killed"
    );

    // The next start of any command ends the run from the denied card.
    let show = h.json(&["runs", "show", &run]);
    let at = format!("{backend:?} {point}: {show}");
    assert_eq!(show["run"]["state"], "ended", "{at}");
    assert_eq!(show["run"]["ended_by"], "boot", "{at}");
    assert_eq!(show["deliveries"][0]["status"], "denied", "{at}");
    assert_eq!(h.json(&["approvals"]), json!([]), "{at}: no card left open");
    let receipt = h.json(&["receipt", &run])["receipt"]
        .as_str()
        .unwrap()
        .to_string();
    // A denied item's wording (§10).
    assert!(
        receipt.contains("d1  send → email board@example.com — Withdrawn at your request"),
        "{at}: {receipt}"
    );
    let denials = h.json(&["journal", &run]);
    let denials = denials
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "approval_denied")
        .count();
    assert_eq!(denials, 1, "{at}: the denial is journaled once");
    assert_eq!(sink.count(), 0, "{at}: nothing was sent");
    // Later starts change nothing.
    h.vouch(&["runs", "list"], &[]);
    assert_eq!(h.json(&["runs", "show", &run])["run"]["state"], "ended");
    assert!(
        h.vouch(&["journal", "verify"], &[]).status.success(),
        "{at}"
    );
}
