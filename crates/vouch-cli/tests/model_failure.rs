#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 11 #2: a model that never answered read as "nothing was left to do" — the run ended
//! `withdrawn`, exited 0 and its receipt did not say why. Per §3.4 such a run ends `failed`,
//! its receipt names the model's error, it reaches the person, and `vouch run` exits 1; after
//! a manifest, the items the loop never reached say why it stopped. Settings are checked
//! before a run exists. Real binary, real loopback servers.

mod support;

use serde_json::{json, Value};
use std::io::Write;
use std::net::TcpListener;
use support::{Home, Receiver};

/// A loopback address where nothing listens.
fn closed_url() -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", l.local_addr().unwrap());
    drop(l);
    url
}

/// Serves canned (status, body) responses in order.
fn stand_in(responses: Vec<(u16, Value)>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    std::thread::spawn(move || {
        let mut queue = responses.into_iter();
        for mut s in listener.incoming().flatten() {
            let _ = support::read_request(&mut s);
            let (code, resp) = queue.next().unwrap_or((
                500,
                json!({"error": {"message": "out of canned responses"}}),
            ));
            let resp = resp.to_string();
            let _ = write!(s, "HTTP/1.1 {code} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{resp}", resp.len());
        }
    });
    url
}

fn text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn an_unreachable_model_fails_the_run_names_the_error_and_reaches_the_person() {
    let push = Receiver::start(false);
    let h = Home::new(&format!("[notify]\npush_url = \"{}\"\n", push.url));
    let url = closed_url();
    let env = [
        ("VOUCH_MODEL_URL", url.as_str()),
        ("VOUCH_MODEL", "m"),
        ("VOUCH_MODEL_MAX_RETRIES", "1"),
    ];
    let out = h.vouch(&["run", "Summarise my week", "--presence", "away"], &env);
    let all = text(&out);
    assert_eq!(out.status.code(), Some(1), "a failed run exits 1: {all}");
    assert!(
        all.contains("Failed — the run declared nothing and delivered nothing"),
        "{all}"
    );
    assert!(
        all.contains("Why it stopped: the model could not be reached"),
        "{all}"
    );
    assert!(!all.contains("Withdrawn"), "{all}");
    let runs = h.json(&["runs", "list"]);
    let id = runs[0]["id"].as_str().unwrap().to_string();
    let show = h.json(&["runs", "show", &id]);
    assert_eq!(show["run"]["outcome"], "failed", "{show}");
    assert_eq!(show["run"]["ended_by"], "loop", "{show}");
    // Failure reaches the person (I7): the terminal notification went out, once.
    assert_eq!(push.applied(), 1, "one notification for the failed run");
    let receipt = h.json(&["receipt", &id])["receipt"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(receipt.contains("could not be reached"), "{receipt}");

    // The same through --json: the cause is named for programs.
    let out = h.vouch(&["--json", "run", "Summarise my week"], &env);
    assert_eq!(out.status.code(), Some(1));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outcome"], "failed", "{v}");
    assert_eq!(v["why"]["loop_end"]["cause"], "model_error", "{v}");
    assert!(
        v["why"]["loop_end"]["reason"]
            .as_str()
            .unwrap()
            .contains("could not be reached"),
        "{v}"
    );
}

#[test]
fn a_missing_model_setting_is_bad_input_and_leaves_no_run_behind() {
    let h = Home::new("");
    for env in [
        vec![("VOUCH_MODEL_URL", "http://127.0.0.1:9/v1")],
        vec![("VOUCH_MODEL", "m")],
        vec![("VOUCH_MODEL_URL", "ftp://x"), ("VOUCH_MODEL", "m")],
    ] {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_vouch"));
        c.arg("--home")
            .arg(&h.dir)
            .args(["run", "hello"])
            .env_remove("VOUCH_MODEL_URL")
            .env_remove("VOUCH_MODEL");
        for (k, v) in &env {
            c.env(k, v);
        }
        let out = c.output().unwrap();
        let all = text(&out);
        assert_eq!(out.status.code(), Some(2), "{env:?}: {all}");
        assert!(all.contains("VOUCH_MODEL"), "names the setting: {all}");
    }
    let runs = h.json(&["runs", "list"]);
    assert_eq!(runs, json!([]), "no run row is left behind");
}

#[test]
fn after_a_manifest_the_unreached_items_say_why_the_loop_stopped() {
    let manifest = json!({"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "x.md"}}]}).to_string();
    let url = stand_in(vec![
        (
            200,
            json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "declare", "arguments": manifest}}]}}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}),
        ),
        (401, json!({"error": {"message": "invalid api key"}})),
    ]);
    let h = Home::new("");
    let out = h.vouch(
        &["--json", "run", "Save x"],
        &[("VOUCH_MODEL_URL", &url), ("VOUCH_MODEL", "m")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outcome"], "failed");
    assert_eq!(v["why"]["loop_end"]["cause"], "model_error");
    let why = v["why"]["deliveries"]["d1"].as_str().unwrap();
    assert!(
        why.starts_with("the run stopped before it was attempted: the model server refused the credentials (HTTP 401)"),
        "{why}"
    );
    let receipt = v["receipt"].as_str().unwrap();
    assert!(
        receipt.contains("Not done: the run stopped before it was attempted: the model server refused the credentials"),
        "{receipt}"
    );
}

#[test]
fn a_model_past_its_repair_limit_fails_the_run_and_says_so() {
    // Every turn calls `declare` with arguments that are not JSON: the host returns the error
    // to the model (a repair) until the limit, then ends the run — failed, with the reason.
    let bad = json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [{"id": "c", "type": "function", "function": {"name": "declare", "arguments": "{not json"}}]}}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}});
    let url = stand_in((0..6).map(|_| (200, bad.clone())).collect());
    let h = Home::new("");
    let out = h.vouch(
        &["--json", "run", "Save x"],
        &[("VOUCH_MODEL_URL", &url), ("VOUCH_MODEL", "m")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["outcome"], "failed", "{v}");
    assert_eq!(v["why"]["loop_end"]["cause"], "repair_limit", "{v}");
    let receipt = v["receipt"].as_str().unwrap();
    assert!(
        receipt.contains("Why it stopped: the model gave invalid tool arguments 4 times"),
        "{receipt}"
    );
}

#[test]
fn a_run_whose_model_never_answered_can_be_tried_again_with_resume() {
    let h = Home::new("");
    let url = closed_url();
    let out = h.vouch(
        &["run", "Summarise my week"],
        &[
            ("VOUCH_MODEL_URL", url.as_str()),
            ("VOUCH_MODEL", "m"),
            ("VOUCH_MODEL_MAX_RETRIES", "0"),
        ],
    );
    assert_eq!(out.status.code(), Some(1));
    let run = h.json(&["runs", "list"])[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let receipt = h.json(&["receipt", &run])["receipt"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        receipt.contains(&format!("vouch resume {run}")),
        "{receipt}"
    );
    // The model is back: the continuation answers and succeeds.
    let url = stand_in(vec![(
        200,
        json!({"choices": [{"message": {"role": "assistant", "content": "Your week: three meetings."}}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}}),
    )]);
    let out = h.vouch(
        &["resume", &run],
        &[("VOUCH_MODEL_URL", url.as_str()), ("VOUCH_MODEL", "m")],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let child = h.json(&["runs", "list"])[0].clone();
    assert_ne!(child["id"], json!(run));
    assert_eq!(child["outcome"], "succeeded", "{child}");
}
