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

/// Start `vouch serve --http 127.0.0.1:0` with `extra` arguments; the server and its address.
fn serve(home: &Path, extra: &[&str]) -> (Killed, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_vouch"))
        .arg("--home")
        .arg(home)
        .args(["--json", "serve", "--http", "127.0.0.1:0"])
        .args(extra)
        .env("VOUCH_POLL_MS", "20")
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
    (server, addr)
}

/// A raw GET with this `Host` header: the status code and the body.
fn get_with_host(addr: &str, host: &str, path: &str, token: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    let code = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map(|b| b.1).unwrap_or("");
    (code, body.to_string())
}

fn new_token(home: &Path, name: &str) -> String {
    let out = vouch(home, &["--json", "token", "new", name]);
    assert!(out.status.success());
    serde_json::from_slice::<Value>(&out.stdout).unwrap()["token"]
        .as_str()
        .unwrap()
        .to_string()
}

#[test]
fn removing_a_token_from_another_process_ends_its_open_stream() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    assert!(vouch(&home, &["init"]).status.success());
    let gone = new_token(&home, "gone");
    let kept = new_token(&home, "kept");
    let (_server, addr) = serve(&home, &[]);
    let open = |secret: &str| {
        let res = ureq::get(&format!("http://{addr}/api/inbox/events"))
            .set("Authorization", &format!("Bearer {secret}"))
            .call()
            .unwrap();
        let mut lines = BufReader::new(res.into_reader()).lines();
        // The inbox as it is now: the stream is open and held.
        let first = lines
            .by_ref()
            .map(|l| l.unwrap())
            .find(|l| l.starts_with("event:"));
        assert_eq!(first.as_deref(), Some("event: inbox"));
        lines
    };
    let gone_lines = open(&gone);
    let kept_lines = open(&kept);
    assert!(vouch(&home, &["token", "rm", "gone"]).status.success());
    // The removed token's stream sends an `unauthorized` error and ends (the reader returns
    // at the end of the stream; a bounded wait, so a stream that kept going fails the test).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rest: Vec<String> = gone_lines.map(|l| l.unwrap()).collect();
        let _ = tx.send(rest);
    });
    let rest = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the removed token's stream is still open");
    assert!(rest.iter().any(|l| l == "event: error"), "{rest:?}");
    assert!(
        rest.iter().any(|l| l.contains("\"code\":\"unauthorized\"")),
        "{rest:?}"
    );
    // The other token still works; the removed one is refused.
    assert_eq!(
        status(&format!("http://{addr}/api/runs"), Some(&kept)).0,
        200
    );
    assert_eq!(
        status(&format!("http://{addr}/api/runs"), Some(&gone)).0,
        401
    );
    drop(kept_lines);
}

#[test]
fn on_loopback_only_loopback_host_names_and_allowed_ones_are_answered() {
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    assert!(vouch(&home, &["init"]).status.success());
    let secret = new_token(&home, "ci");
    let bad = vouch(
        &home,
        &["serve", "--http", "127.0.0.1:0", "--allow-host", "a b"],
    );
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--allow-host"));
    // Names come from the flag and from vouch.toml's `[http] allowed_hosts`.
    let toml = home.join("vouch.toml");
    let mut cfg = std::fs::read_to_string(&toml).unwrap_or_default();
    cfg.push_str("\n[http]\nallowed_hosts = [\"from.toml\"]\n");
    std::fs::write(&toml, cfg).unwrap();
    let (_server, addr) = serve(&home, &["--allow-host", "vouch.internal"]);
    let port = addr.rsplit_once(':').unwrap().1;
    for host in [
        addr.clone(),
        format!("localhost:{port}"),
        format!("LOCALHOST:{port}"),
        format!("[::1]:{port}"),
        "vouch.internal".to_string(),
        format!("vouch.internal:{port}"),
        "from.toml:1234".to_string(),
    ] {
        assert_eq!(
            get_with_host(&addr, &host, "/api/runs", &secret).0,
            200,
            "{host}"
        );
    }
    for host in [
        "evil.example".to_string(),
        format!("evil.example:{port}"),
        "localhost".to_string(),
        format!("127.0.0.1:{}", port.parse::<u16>().unwrap().wrapping_add(1)),
        format!("localhost.evil.example:{port}"),
    ] {
        let (code, body) = get_with_host(&addr, &host, "/api/runs", &secret);
        assert_eq!(code, 421, "{host}: {body}");
        assert!(body.contains("\"code\":\"misdirected\""), "{body}");
        assert!(body.contains(&format!("127.0.0.1:{port}")), "{body}");
        assert!(body.contains("vouch.internal"), "{body}");
    }
    // The console too, before any sign-in.
    assert_eq!(
        get_with_host(&addr, "evil.example", "/console/signin", "").0,
        421
    );
}
