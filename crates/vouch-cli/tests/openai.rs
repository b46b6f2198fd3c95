#![allow(clippy::unwrap_used, clippy::expect_used)]
//! `vouch run` against an OpenAI-compatible endpoint: a local stand-in server on loopback
//! that speaks the real chat-completions wire format (tool calls, usage, errors).

mod support;

use serde_json::{json, Value};
use std::io::Write;
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use support::Home;

/// Serves canned (status, body) responses in order and records every request body.
fn stand_in(responses: Vec<(u16, Value)>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(vec![]));
    let s2 = seen.clone();
    std::thread::spawn(move || {
        let mut queue = responses.into_iter();
        for mut s in listener.incoming().flatten() {
            let text = support::read_request(&mut s);
            let auth = support::header(&text, "authorization")
                .map(|v| format!("authorization: {v}"))
                .unwrap_or_default();
            let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
            let mut v: Value = serde_json::from_str(body).unwrap_or(Value::Null);
            v["_auth"] = json!(auth);
            s2.lock().unwrap().push(v);
            let (code, resp) = queue.next().unwrap_or((
                500,
                json!({"error": {"message": "out of canned responses"}}),
            ));
            let resp = resp.to_string();
            let _ = write!(s, "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{resp}", resp.len());
        }
    });
    (url, seen)
}

fn call(id: &str, name: &str, args: &str) -> Value {
    json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function", "function": {"name": name, "arguments": args}}]}}], "usage": {"prompt_tokens": 100, "completion_tokens": 20}})
}

#[test]
fn a_tool_calling_model_declares_saves_repairs_a_bad_call_and_ends() {
    let manifest = json!({"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Notes/plan.md"}}]}).to_string();
    let (url, seen) = stand_in(vec![
        (429, json!({"error": {"message": "slow down"}})),
        (200, call("c1", "declare", &manifest)),
        (
            200,
            call(
                "c2",
                "save",
                "{\"delivery\": \"d1\", \"payload\": {\"text\": ",
            ),
        ),
        (503, json!({"error": {"message": "overloaded"}})),
        (
            200,
            call(
                "c3",
                "save",
                &json!({"delivery": "d1", "payload": {"text": "# Plan\n"}}).to_string(),
            ),
        ),
        (
            200,
            json!({"choices": [{"message": {"role": "assistant", "content": "Saved your plan — and emailed it to the team."}}]}),
        ),
    ]);
    let h = Home::new("");
    let out = h.vouch(
        &["run", "Write my plan to Notes/plan.md"],
        &[
            ("VOUCH_MODEL_URL", &url),
            ("VOUCH_MODEL", "stand-in-7b"),
            ("VOUCH_API_KEY", "sk-test"),
        ],
    );
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(h.dir.join("files/Notes/plan.md")).unwrap(),
        "# Plan\n"
    );
    assert!(stdout.contains("Saved to folder Notes/plan.md"), "{stdout}");
    assert!(
        !stdout.contains("emailed"),
        "the model's claim is not on the receipt: {stdout}"
    );
    let reqs = seen.lock().unwrap().clone();
    assert_eq!(reqs.len(), 6, "429 and 503 were retried");
    let first = &reqs[0];
    assert_eq!(first["model"], "stand-in-7b");
    assert_eq!(
        first["_auth"].as_str().unwrap().to_ascii_lowercase(),
        "authorization: bearer sk-test"
    );
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert!(
        tools.contains(&"declare") && tools.contains(&"save") && tools.contains(&"read_file"),
        "{tools:?}"
    );
    // The malformed call got a recoverable error back as a tool message.
    let last = &reqs[5]["messages"];
    let tool_msgs: Vec<&Value> = last
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert!(
        tool_msgs.iter().any(|m| m["tool_call_id"] == "c2"
            && m["content"].as_str().unwrap().contains("invalid arguments")),
        "{tool_msgs:?}"
    );
    assert!(last
        .as_array()
        .unwrap()
        .iter()
        .any(|m| m["role"] == "assistant" && m["tool_calls"][0]["id"] == "c1"));
    // Tokens are journaled per turn.
    let runs = h.json(&["runs", "list"]);
    let run = runs[0]["id"].as_str().unwrap();
    let turns: Vec<Value> = h
        .json(&["journal", run])
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "turn")
        .cloned()
        .collect();
    assert_eq!(turns.len(), 4);
    assert_eq!(turns[0]["body"]["usage"]["prompt_tokens"], 100);
}

#[test]
fn a_provider_that_stays_down_ends_the_run_with_a_truthful_receipt() {
    let manifest = json!({"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "x.md"}}]}).to_string();
    let mut responses = vec![(200, call("c1", "declare", &manifest))];
    for _ in 0..10 {
        responses.push((500, json!({"error": {"message": "down"}})));
    }
    let (url, seen) = stand_in(responses);
    let h = Home::new("");
    let out = h.vouch(
        &["run", "Save x"],
        &[("VOUCH_MODEL_URL", &url), ("VOUCH_MODEL", "m")],
    );
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(stdout.contains("Not done"), "{stdout}");
    assert!(seen.lock().unwrap().len() <= 7, "retries are bounded");
}

#[test]
fn a_rejected_request_is_reported_with_the_servers_message() {
    let (url, _) = stand_in(vec![(
        401,
        json!({"error": {"message": "invalid api key"}}),
    )]);
    let h = Home::new("");
    let out = h.vouch(
        &["run", "hello", "--watch"],
        &[("VOUCH_MODEL_URL", &url), ("VOUCH_MODEL", "m")],
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains("invalid api key"), "{all}");
}
