#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 11, "Against real model servers": after an approval (or a denial) the resumed
//! conversation still told the model the item "awaits the person's approval". The model must
//! learn what actually happened — approved and verified, or denied — before its next turn.
//! A loopback OpenAI-compatible stand-in records every request the host sends.

mod support;

use serde_json::{json, Value};
use std::io::Write;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use support::{Home, Receiver};

fn stand_in(responses: Vec<Value>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(vec![]));
    let s2 = seen.clone();
    std::thread::spawn(move || {
        let mut queue = responses.into_iter();
        for mut s in listener.incoming().flatten() {
            let text = support::read_request(&mut s);
            let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
            s2.lock()
                .unwrap()
                .push(serde_json::from_str::<Value>(body).unwrap_or(Value::Null));
            let resp = queue
                .next()
                .unwrap_or(
                    json!({"choices": [{"message": {"role": "assistant", "content": "done"}}]}),
                )
                .to_string();
            let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{resp}", resp.len());
        }
    });
    (url, seen)
}

fn call(id: &str, name: &str, args: Value) -> Value {
    json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
}

/// Everything the host told the model in its last request, as one text.
fn last_request_text(seen: &Arc<Mutex<Vec<Value>>>) -> String {
    let seen = seen.lock().unwrap();
    let last = seen.last().unwrap();
    last["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect::<Vec<_>>()
        .join("\n")
}

fn run_to_card(decision: &str) -> (String, Arc<Mutex<Vec<Value>>>, Receiver) {
    let hook = Receiver::start(false);
    let manifest = json!({"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": hook.url}}]});
    let (url, seen) = stand_in(vec![
        call("c1", "declare", manifest),
        call(
            "c2",
            "send",
            json!({"delivery": "d1", "payload": {"json": "{\"text\": \"invoice 114\"}"}}),
        ),
        json!({"choices": [{"message": {"role": "assistant", "content": "Finished."}}]}),
    ]);
    let h = Home::new("");
    let env = [("VOUCH_MODEL_URL", url.as_str()), ("VOUCH_MODEL", "m")];
    let out = h.vouch(&["run", "Post invoice 114"], &env);
    assert_eq!(out.status.code(), Some(3), "suspended on the card: exit 3");
    let card = h.json(&["approvals"])[0].clone();
    let run = card["run"].as_str().unwrap().to_string();
    let out = match decision {
        "approve" => h.vouch(
            &[
                "approve",
                &run,
                "d1",
                "--hash",
                card["payload_hash"].as_str().unwrap(),
            ],
            &env,
        ),
        _ => h.vouch(&["deny", &run, "d1"], &env),
    };
    assert!(
        out.status.code() == Some(0) || out.status.code() == Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        seen.lock().unwrap().len(),
        3,
        "one more turn after the decision"
    );
    (last_request_text(&seen), seen, hook)
}

#[test]
fn after_an_approval_the_model_learns_it_was_approved_and_verified() {
    let (text, _, hook) = run_to_card("approve");
    assert_eq!(hook.applied(), 1);
    assert!(
        text.contains("The person approved d1") && text.contains("d1 is now verified"),
        "{text}"
    );
}

#[test]
fn after_a_denial_the_model_learns_it_was_denied() {
    let (text, _, hook) = run_to_card("deny");
    assert_eq!(hook.applied(), 0);
    assert!(
        text.contains("The person denied d1") && text.contains("will not be done"),
        "{text}"
    );
}
