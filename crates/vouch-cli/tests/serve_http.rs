//! `vouch token` and `vouch serve --http` through the real binary: a token printed once works
//! as a bearer token, a wrong one is 401, a revoked one stops working, and an address beyond
//! loopback is refused unless asked for.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

fn vouch(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vouch"))
        .arg("--home")
        .arg(home)
        .args(args)
        .env_remove("VOUCH_DATABASE_URL")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
        .unwrap()
}

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn status(url: &str, token: Option<&str>) -> (u16, String) {
    let mut req = ureq::get(url);
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    match req.call() {
        Ok(r) => (r.status(), r.into_string().unwrap()),
        Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap()),
        Err(e) => panic!("{url}: {e}"),
    }
}

#[test]
fn a_new_token_opens_the_api_and_a_revoked_one_closes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    assert!(vouch(&home, &["init"]).status.success());
    let out = vouch(&home, &["--json", "token", "new", "ci"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let t: Value = serde_json::from_slice(&out.stdout).unwrap();
    let secret = t["token"].as_str().unwrap().to_string();
    assert!(secret.starts_with("vouch_"));
    // Stored by hash only: the listing never shows the secret, and the name is unique.
    let list = vouch(&home, &["--json", "token", "list"]);
    assert!(!String::from_utf8_lossy(&list.stdout).contains(&secret));
    let again = vouch(&home, &["token", "new", "ci"]);
    assert_eq!(again.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&again.stderr).contains("already exists"));

    let remote = vouch(&home, &["serve", "--http", "0.0.0.0:0"]);
    assert_eq!(remote.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&remote.stderr).contains("--allow-remote"));
    let bad = vouch(&home, &["serve", "--http", "localhost"]);
    assert_eq!(bad.status.code(), Some(2));

    let mut child = Command::new(env!("CARGO_BIN_EXE_vouch"))
        .arg("--home")
        .arg(&home)
        .args(["--json", "serve", "--http", "127.0.0.1:0"])
        .env_remove("VOUCH_DATABASE_URL")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let server = Killed(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let addr = serde_json::from_str::<Value>(&line).unwrap()["listening"]
        .as_str()
        .unwrap()
        .to_string();
    let url = format!("http://{addr}/api/runs");
    assert_eq!(status(&url, Some(&secret)).0, 200);
    let (code, body) = status(&url, None);
    assert_eq!(code, 401);
    assert!(body.contains("\"code\":\"unauthorized\""), "{body}");
    assert_eq!(status(&url, Some("vouch_0000")).0, 401);
    assert!(vouch(&home, &["token", "rm", "ci"]).status.success());
    assert_eq!(status(&url, Some(&secret)).0, 401);
    assert_eq!(vouch(&home, &["token", "rm", "ci"]).status.code(), Some(2));
    drop(server);
}

/// Regression (issue 15): the server opens the store twice (the host's and the board's); the
/// second open used to open and close the database file beside SQLite, which dropped the
/// process's POSIX locks, so the next `vouch` command's last close deleted the WAL under the
/// server and it read a stale snapshot forever after — runs started later never showed.
#[test]
fn the_server_sees_every_run_other_processes_start_while_it_serves() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    assert!(vouch(&home, &["init"]).status.success());
    let out = vouch(&home, &["--json", "token", "new", "ci"]);
    let secret = serde_json::from_slice::<Value>(&out.stdout).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string();
    let mut child = Command::new(env!("CARGO_BIN_EXE_vouch"))
        .arg("--home")
        .arg(&home)
        .args(["--json", "serve", "--http", "127.0.0.1:0"])
        .env_remove("VOUCH_DATABASE_URL")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let server = Killed(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let addr = serde_json::from_str::<Value>(&line).unwrap()["listening"]
        .as_str()
        .unwrap()
        .to_string();
    let url = format!("http://{addr}/api/runs");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/save-notes.json");
    for n in 1..=3 {
        // A read-only command first: its close is the one that used to delete the WAL.
        assert!(vouch(&home, &["runs", "list"]).status.success());
        let run = vouch(
            &home,
            &[
                "run",
                &format!("run {n}"),
                "--script",
                script.to_str().unwrap(),
            ],
        );
        assert!(run.status.success());
        let (code, body) = status(&url, Some(&secret));
        assert_eq!(code, 200);
        let runs = serde_json::from_str::<Value>(&body).unwrap()["runs"]
            .as_array()
            .unwrap()
            .len();
        assert_eq!(runs, n, "the server sees every run started so far: {body}");
    }
    drop(server);
}

/// Issue 23 #1: a token's scope is chosen when it is made; a worker token names exactly one
/// valid identity and no other scope names one (exit 2, nothing stored); the listing shows it.
#[test]
fn a_token_is_made_with_its_scope_and_a_worker_token_with_its_identity() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    assert!(vouch(&home, &["init"]).status.success());
    for bad in [
        vec!["token", "new", "w", "--scope", "worker"],
        vec![
            "token",
            "new",
            "w",
            "--scope",
            "worker",
            "--identity",
            "Not A Name",
        ],
        vec![
            "token",
            "new",
            "r",
            "--scope",
            "reader",
            "--identity",
            "py1",
        ],
        vec!["token", "new", "x", "--scope", "root"],
    ] {
        assert_eq!(vouch(&home, &bad).status.code(), Some(2), "{bad:?}");
    }
    let made = vouch(
        &home,
        &[
            "--json",
            "token",
            "new",
            "w",
            "--scope",
            "worker",
            "--identity",
            "py1",
        ],
    );
    assert!(made.status.success());
    let made: Value = serde_json::from_slice(&made.stdout).unwrap();
    assert_eq!(
        (made["scope"].as_str(), made["identity"].as_str()),
        (Some("worker"), Some("py1"))
    );
    let list: Value =
        serde_json::from_slice(&vouch(&home, &["--json", "token", "list"]).stdout).unwrap();
    assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
    assert_eq!(list[0]["scope"], "worker");
    assert_eq!(list[0]["identity"], "py1");
}
