#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 11 #3, §6.3: where the provider's reply is the only observation it is the evidence
//! (`verified`, named as exactly what was observed); where a read-back is configured (a status
//! URL for a payment or a webhook) the host uses it, and a read-back that finds nothing makes
//! the delivery `failed` — a provider that says yes and applies nothing is caught there.

mod support;

use serde_json::json;
use std::io::Write;
use std::net::TcpListener;
use support::Home;

/// A payment/webhook service on loopback: `POST` answers 200 `{"id":"tr_1"}` (whether or not
/// it applies anything); `GET …/tr_1` answers 200 when `applies`, else 404.
fn service(applies: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let text = support::read_request(&mut s);
            let (code, body) = if text.starts_with("POST") {
                (200, r#"{"id":"tr_1"}"#.to_string())
            } else if applies && text.starts_with("GET /status/tr_1 ") {
                (200, r#"{"id":"tr_1","state":"settled"}"#.to_string())
            } else {
                (404, r#"{"error":"no such transfer"}"#.to_string())
            };
            let _ = write!(s, "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        }
    });
    base
}

fn pay(config: &str) -> (Home, serde_json::Value) {
    let h = Home::new(config);
    let s = h.script(&json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "payment", "address": "acct:ACME-42"}}]}},
        {"deliver": "d1", "payload": {"amount": "120.00", "currency": "EUR"}},
        {"final": ""}
    ]));
    assert_eq!(
        h.vouch(&["run", "Pay ACME", "--script", &s], &[])
            .status
            .code(),
        Some(3),
        "the payment waits for approval: exit 3"
    );
    let card = h.json(&["approvals"])[0].clone();
    let run = card["run"].as_str().unwrap().to_string();
    h.vouch(
        &[
            "approve",
            &run,
            "d1",
            "--hash",
            card["payload_hash"].as_str().unwrap(),
        ],
        &[],
    );
    let show = h.json(&["runs", "show", &run]);
    let receipt = h.json(&["receipt", &run])["receipt"].clone();
    (h, json!({"show": show, "receipt": receipt}))
}

#[test]
fn without_a_read_back_the_transfer_id_is_the_evidence_and_is_named_as_such() {
    let base = service(false);
    let (_h, r) = pay(&format!("[payment]\nurl = \"{base}/pay\"\n"));
    assert_eq!(r["show"]["deliveries"][0]["status"], "verified", "{r}");
    let receipt = r["receipt"].as_str().unwrap();
    assert!(
        receipt.contains("[accepted by the provider: transfer tr_1]"),
        "{receipt}"
    );
}

#[test]
fn a_read_back_that_finds_the_transfer_verifies_it() {
    let base = service(true);
    let (_h, r) = pay(&format!(
        "[payment]\nurl = \"{base}/pay\"\nstatus_url = \"{base}/status/{{id}}\"\n"
    ));
    assert_eq!(r["show"]["deliveries"][0]["status"], "verified", "{r}");
    let receipt = r["receipt"].as_str().unwrap();
    assert!(receipt.contains("read back: HTTP 200"), "{receipt}");
}

#[test]
fn a_read_back_that_finds_nothing_makes_a_false_success_failed() {
    let base = service(false);
    let (_h, r) = pay(&format!(
        "[payment]\nurl = \"{base}/pay\"\nstatus_url = \"{base}/status/{{id}}\"\n"
    ));
    assert_eq!(r["show"]["deliveries"][0]["status"], "failed", "{r}");
    assert_eq!(r["show"]["run"]["outcome"], "failed", "{r}");
    let receipt = r["receipt"].as_str().unwrap();
    assert!(!receipt.contains("Paid to"), "{receipt}");
    assert!(receipt.contains("HTTP 404"), "{receipt}");
}
