//! MCP through a client nobody here wrote: the official MCP Python SDK (`mcp` from PyPI, in
//! the repo's virtual environment) runs `crates/vouch-server/tests/mcp_client.py` against the
//! real binary — `vouch mcp --name` over stdio and `/mcp` of `vouch serve --http` — listing the
//! tools and driving one task and one declared delivery end to end (over HTTP also one that
//! waits for the person's approval). The store is then checked for what the client claimed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

fn vouch(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vouch"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("VOUCH_DATABASE_URL")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env_remove("VOUCH_FOLDER_ROOT")
        .output()
        .unwrap()
}

fn json(home: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = vouch(home, &all);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The venv's Python (scripts/test.sh creates it with the MCP SDK), else the one on PATH.
fn python() -> PathBuf {
    let venv = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/venv/bin/python");
    if venv.exists() {
        venv
    } else {
        PathBuf::from("python3")
    }
}

fn client() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../vouch-server/tests/mcp_client.py")
}

/// Run the client; its last stdout line is what it saw.
fn run_client(args: &[&str]) -> Value {
    let out = Command::new(python())
        .arg(client())
        .args(args)
        .env_remove("VOUCH_DATABASE_URL")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env_remove("VOUCH_FOLDER_ROOT")
        .output()
        .expect("python3 with the MCP SDK (./scripts/test.sh installs it into target/venv)");
    assert!(
        out.status.success(),
        "the MCP client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.lines().last().unwrap_or("")).unwrap()
}

fn home() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    assert!(vouch(&home, &["init"]).status.success());
    (tmp, home)
}

/// What the client did is in the store: the task completed by the worker with its output,
/// the run ended succeeded with the note saved.
fn check_store(home: &Path, seen: &Value, worker: &str, note: &str, text: &str) {
    let task = seen["task"].as_str().unwrap();
    let t = json(home, &["task", "show", task]);
    assert_eq!(t["task"]["state"], "completed", "{t}");
    assert_eq!(t["attempts"][0]["claimant"], worker, "{t}");
    assert_eq!(t["result"]["summary"], "Three notes, one decision.", "{t}");
    let run = seen["run"].as_str().unwrap();
    let r = json(home, &["runs", "show", run]);
    assert_eq!(r["run"]["outcome"], "succeeded", "{r}");
    assert_eq!(
        std::fs::read_to_string(home.join("files").join(note)).unwrap(),
        text
    );
    let tools = seen["tools"].as_array().unwrap();
    assert!(tools.len() >= 17, "{seen}");
}

#[test]
fn the_python_sdk_drives_a_task_and_a_delivery_over_stdio() {
    let (_tmp, home) = home();
    // A name that cannot be a worker's identity is refused before anything is served.
    for bad in ["host", "Not A Name"] {
        let out = vouch(&home, &["mcp", "--name", bad]);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{bad}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(String::from_utf8_lossy(&out.stderr).contains(bad));
    }
    let seen = run_client(&[
        "stdio",
        env!("CARGO_BIN_EXE_vouch"),
        home.to_str().unwrap(),
        "w1",
    ]);
    check_store(
        &home,
        &seen,
        "w1",
        "Notes/mcp-stdio.md",
        "from an MCP agent\n",
    );
    // The worker's reports were signed with its key in the home and checked by the board.
    let t = json(&home, &["task", "show", seen["task"].as_str().unwrap()]);
    assert!(t["attempts"][0]["detail"]["report_signature"]
        .as_str()
        .is_some_and(|s| s.len() == 128));
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn the_python_sdk_drives_a_task_a_delivery_and_an_approval_over_http() {
    let (_tmp, home) = home();
    let id = json(&home, &["identity", "new", "w2"]);
    let key: Value =
        serde_json::from_str(&std::fs::read_to_string(id["key_file"].as_str().unwrap()).unwrap())
            .unwrap();
    let secret = key["secret_key"].as_str().unwrap().to_string();
    let token = json(&home, &["token", "new", "mcp"])["token"]
        .as_str()
        .unwrap()
        .to_string();
    let worker_token = json(
        &home,
        &[
            "token",
            "new",
            "w2-token",
            "--scope",
            "worker",
            "--identity",
            "w2",
        ],
    )["token"]
        .as_str()
        .unwrap()
        .to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vouch"))
        .arg("--home")
        .arg(&home)
        .args(["--json", "serve", "--http", "127.0.0.1:0"])
        .env_remove("VOUCH_DATABASE_URL")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env_remove("VOUCH_FOLDER_ROOT")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _server = Killed(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let listening: Value = serde_json::from_str(&line).unwrap();
    let url = format!("http://{}/mcp", listening["listening"].as_str().unwrap());
    // Without the token, /mcp is closed like every other route.
    let refused = ureq::post(&url)
        .set("Content-Type", "application/json")
        .send_string("{}");
    assert!(matches!(refused, Err(ureq::Error::Status(401, _))));

    let seen = run_client(&["http", &url, &token, &worker_token, "w2", &secret]);
    check_store(&home, &seen, "w2", "Notes/mcp-http.md", "rewritten\n");
    // The second run waited for the person and carried out exactly what they approved.
    let run2 = seen["approved_run"].as_str().unwrap();
    let r = json(&home, &["runs", "show", run2]);
    assert_eq!(r["run"]["outcome"], "succeeded", "{r}");
}

/// A long-lived `/mcp` session is no credential of its own: every request of it carries the
/// bearer token and is checked again, so a token removed (by another process) stops working
/// at the session's very next request.
#[test]
fn a_removed_token_stops_an_open_mcp_session_at_its_next_request() {
    let (_tmp, home) = home();
    let token = json(&home, &["token", "new", "laptop"])["token"]
        .as_str()
        .unwrap()
        .to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vouch"))
        .arg("--home")
        .arg(&home)
        .args(["--json", "serve", "--http", "127.0.0.1:0"])
        .env_remove("VOUCH_DATABASE_URL")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .env_remove("VOUCH_FOLDER_ROOT")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _server = Killed(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let listening: Value = serde_json::from_str(&line).unwrap();
    let url = format!("http://{}/mcp", listening["listening"].as_str().unwrap());
    let mut session: Option<String> = None;
    let mut post = |v: Value| -> (u16, String) {
        let mut req = ureq::post(&url)
            .set("Content-Type", "application/json")
            .set("Accept", "application/json, text/event-stream")
            .set("Authorization", &format!("Bearer {token}"));
        if let Some(s) = &session {
            req = req.set("Mcp-Session-Id", s);
        }
        match req.send_string(&v.to_string()) {
            Ok(r) => {
                if let Some(s) = r.header("mcp-session-id") {
                    session = Some(s.to_string());
                }
                (r.status(), r.into_string().unwrap())
            }
            Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap()),
            Err(e) => panic!("{e}"),
        }
    };
    let (code, body) = post(
        serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
        "params": {"protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "revoked", "version": "0"}}}),
    );
    assert_eq!(code, 200, "{body}");
    post(serde_json::json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let list = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "task_list", "arguments": {}}});
    let (code, body) = post(list.clone());
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"result\""), "{body}");

    let out = vouch(&home, &["token", "rm", "laptop"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (code, body) = post(list);
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("\"code\":\"unauthorized\""), "{body}");
}
