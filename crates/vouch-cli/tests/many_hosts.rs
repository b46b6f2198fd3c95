#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue 24 #2 and #3: many hosts on one PostgreSQL schema, each from a home of its own (as
//! separate machines would be). The board's sweeper is one actor across hosts; wake-ups and
//! events cross hosts through the database. Real processes; the world is checked in the
//! store and in what the processes answer, never in logs.

use serde_json::Value;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn pg_url() -> String {
    std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn err(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// One PostgreSQL schema shared by several homes (hosts); dropped with the value.
struct Cluster {
    tmp: tempfile::TempDir,
    schema: String,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&pg_url(), postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema));
        }
    }
}

impl Cluster {
    fn new(hosts: usize) -> Cluster {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let c = Cluster {
            tmp: tempfile::tempdir().unwrap(),
            schema: format!(
                "vouch_many_{}_{}",
                std::process::id(),
                nanos % 1_000_000_000
            ),
        };
        for n in 0..hosts {
            let out = c.run(n, &["init"]);
            assert!(out.status.success(), "init: {}", err(&out));
        }
        c
    }

    fn home(&self, n: usize) -> PathBuf {
        self.tmp.path().join(format!("host-{n}"))
    }

    fn cmd(&self, n: usize, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vouch"));
        c.arg("--home")
            .arg(self.home(n))
            .args(args)
            .env_remove("VOUCH_CRASH_AFTER")
            .env_remove("VOUCH_MODEL_URL")
            .env("VOUCH_DATABASE_URL", pg_url())
            .env("VOUCH_DATABASE_SCHEMA", &self.schema)
            .env("VOUCH_HOST_ID", format!("host-{n}"));
        c
    }

    fn run(&self, n: usize, args: &[&str]) -> Output {
        self.cmd(n, args).output().unwrap()
    }

    fn json(&self, n: usize, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let out = self.run(n, &a);
        assert!(out.status.success(), "{args:?}: {}", err(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn client(&self) -> postgres::Client {
        postgres::Client::connect(&pg_url(), postgres::NoTls).unwrap()
    }
}

/// The board's sweeper is fenced across hosts: while a process of one host holds the duty, a
/// sweep on another host waits for it (it does not sweep beside it), then sweeps what is left.
#[test]
fn the_board_sweeper_is_one_actor_across_hosts() {
    let c = Cluster::new(2);
    let id = c.json(
        0,
        &[
            "task",
            "offer",
            "--type",
            "freeform",
            "--brief",
            "soon stale",
            "--deadline-s",
            "1",
        ],
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    // Let the deadline pass (the sweep, not this pause, is what is tested).
    std::thread::sleep(std::time::Duration::from_millis(1_200));
    // Another process (this test, as a third host) holds the sweeper's duty.
    let holder = vouch_store_postgres::PostgresStore::open(&pg_url(), &c.schema).unwrap();
    let (held_tx, held_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holding = std::thread::spawn(move || {
        use vouch_store::Store as _;
        holder
            .with_duty(vouch_store::board::DUTY_BOARD_SWEEP, true, &mut || {
                held_tx.send(()).unwrap();
                let _ = release_rx.recv();
            })
            .unwrap()
    });
    held_rx.recv().unwrap();
    let sweeper = c
        .cmd(1, &["--json", "task", "sweep"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The sweep on host 1 is waiting for the duty: the server shows its lock request ungranted.
    let mut db = c.client();
    let mut waiting = false;
    for _ in 0..600 {
        let n: i64 = db
            .query_one(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted",
                &[],
            )
            .unwrap()
            .get(0);
        if n > 0 {
            waiting = true;
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert!(waiting, "the sweep never asked for the duty");
    assert_eq!(
        c.json(0, &["task", "show", &id])["task"]["state"],
        "queued",
        "nothing swept while another process holds the duty"
    );
    release_tx.send(()).unwrap();
    assert!(holding.join().unwrap(), "the test held the duty");
    let out = sweeper.wait_with_output().unwrap();
    assert!(out.status.success(), "{}", err(&out));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["expired"], serde_json::json!([id]), "{report}");
    assert_eq!(
        c.json(0, &["task", "show", &id])["task"]["state"],
        "expired"
    );
}

/// A `vouch serve --http` of one host, killed and reaped on drop.
struct Server {
    child: std::process::Child,
    addr: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Cluster {
    /// `vouch serve --http` on host `n`, polling the store only every `poll_ms` when nothing
    /// wakes it.
    fn serve(&self, n: usize, poll_ms: u64) -> Server {
        use std::io::BufRead as _;
        let mut child = self
            .cmd(n, &["--json", "serve", "--http", "127.0.0.1:0"])
            .env("VOUCH_POLL_MS", poll_ms.to_string())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("serve on host {n} said `{line}`: {e}"));
        Server {
            child,
            addr: v["listening"].as_str().unwrap().to_string(),
        }
    }
}

/// A connection that sent one request; a read gives up after 60 s.
fn request(addr: &str, method: &str, path: &str, token: &str, body: &str) -> std::net::TcpStream {
    use std::io::Write as _;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(60)))
        .unwrap();
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: Bearer {token}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    s
}

fn claim_body(w: &vouch_identity::Identity) -> String {
    let at_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let policy = serde_json::json!({"profile": "default", "context": "autonomous"});
    let fingerprint =
        vouch_artifacts::content_id(vouch_core::canonical_json(&policy).unwrap().as_bytes());
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let nonce = format!(
        "many-hosts-{}-{:08}",
        std::process::id(),
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let statement = serde_json::json!({"claim": {"claimant": w.name(), "task": null, "profile": "default", "policy_fingerprint": fingerprint, "at_ms": at_ms, "nonce": nonce}});
    serde_json::json!({"claimant": w.name(), "at_ms": at_ms, "nonce": nonce, "signature": w.sign(&statement).unwrap()})
        .to_string()
}

/// Issue 24 #3: wake-ups, not polling. Two servers on one schema that poll the store only
/// every ten minutes: a claim-next long-poll on host 0 is answered with the task offered on
/// host 1, and host 0's inbox stream shows a run that ended on host 1 — only the store's
/// notification can have told host 0 in time.
#[test]
fn a_write_on_one_host_wakes_long_polls_and_streams_on_another() {
    use std::io::{BufRead as _, Read as _};
    let c = Cluster::new(2);
    let token = c.json(0, &["token", "new", "ci"])["token"]
        .as_str()
        .unwrap()
        .to_string();
    c.json(0, &["identity", "new", "w1"]);
    // Claims take a worker's token, bound to its identity (§17.1.1).
    let worker_token = c.json(
        0,
        &[
            "token",
            "new",
            "w1",
            "--scope",
            "worker",
            "--identity",
            "w1",
        ],
    )["token"]
        .as_str()
        .unwrap()
        .to_string();
    let w1 = vouch_identity::KeyDir::in_home(&c.home(0))
        .load("w1")
        .unwrap();
    let a = c.serve(0, 600_000);
    let _b = c.serve(1, 600_000);
    // Host 0's inbox stream: the first event is the inbox now.
    let stream = request(&a.addr, "GET", "/api/inbox/events", &token, "");
    let mut lines = std::io::BufReader::new(stream).lines();
    // The stream's keep-alive comments come every few seconds; a next inbox that takes longer
    // than a minute (the servers poll every ten) was not woken.
    let mut next_inbox = move || -> Value {
        let since = std::time::Instant::now();
        loop {
            assert!(
                since.elapsed() < std::time::Duration::from_secs(60),
                "no wake-up: the inbox did not change within a minute"
            );
            let line = lines
                .next()
                .expect("the stream ended")
                .expect("no wake-up within 60 s");
            if let Some(data) = line.strip_prefix("data:") {
                return serde_json::from_str(data.trim()).unwrap();
            }
        }
    };
    let first = next_inbox();
    // A claim-next long-poll on host 0, waiting for work.
    let claim = {
        let (addr, token, body) = (a.addr.clone(), worker_token.clone(), claim_body(&w1));
        std::thread::spawn(move || {
            let mut s = request(
                &addr,
                "POST",
                "/api/tasks/claim-next?wait_s=20",
                &token,
                &body,
            );
            let mut resp = String::new();
            s.read_to_string(&mut resp).unwrap();
            resp
        })
    };
    // Give the long-poll time to find nothing and wait (if it had not yet, it claims at once
    // and the test proves less, never a false failure). Unwoken, it answers `claimed: false`
    // after 20 s: the servers look at the store again only every ten minutes.
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    let id = c.json(
        1,
        &[
            "task",
            "offer",
            "--type",
            "freeform",
            "--brief",
            "from host 1",
        ],
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let resp = claim.join().unwrap();
    let body: Value = serde_json::from_str(&resp[resp.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    assert_eq!(body["claimed"], true, "{resp}");
    assert_eq!(body["task"]["id"], id.as_str(), "{resp}");
    // A run that ends on host 1 shows in host 0's inbox stream.
    let script = c.tmp.path().join("script.json");
    std::fs::write(&script, r#"[{"final": "done on host 1"}]"#).unwrap();
    let out = c.run(
        1,
        &[
            "run",
            "Done elsewhere",
            "--script",
            script.to_str().unwrap(),
        ],
    );
    assert!(out.status.success(), "{}", err(&out));
    let mut seen = first;
    for _ in 0..10 {
        if seen.to_string().contains("Done elsewhere") {
            break;
        }
        seen = next_inbox();
    }
    assert!(seen.to_string().contains("Done elsewhere"), "{seen}");
}

/// On SQLite too, a write through a server wakes that server's own long-polls: a claim-next
/// waiting on a server that polls every ten minutes is answered with the task offered through
/// the same server.
#[test]
fn a_write_through_a_server_wakes_its_own_long_polls_on_sqlite() {
    use std::io::{BufRead as _, Read as _};
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let vouch = |args: &[&str]| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vouch"));
        c.arg("--home")
            .arg(&home)
            .args(args)
            .env_remove("VOUCH_DATABASE_URL")
            .env_remove("VOUCH_MODEL_URL")
            .env("VOUCH_POLL_MS", "600000");
        c
    };
    let json = |args: &[&str]| -> Value {
        let out = vouch(args).output().unwrap();
        assert!(out.status.success(), "{args:?}: {}", err(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    json(&["--json", "init"]);
    let token = json(&["--json", "token", "new", "ci"])["token"]
        .as_str()
        .unwrap()
        .to_string();
    json(&["--json", "identity", "new", "w1"]);
    // Claims take a worker's token, bound to its identity (§17.1.1).
    let worker_token = json(&[
        "--json",
        "token",
        "new",
        "w1",
        "--scope",
        "worker",
        "--identity",
        "w1",
    ])["token"]
        .as_str()
        .unwrap()
        .to_string();
    let w1 = vouch_identity::KeyDir::in_home(&home).load("w1").unwrap();
    let mut child = vouch(&["--json", "serve", "--http", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let server = Server {
        child,
        addr: serde_json::from_str::<Value>(&line).unwrap()["listening"]
            .as_str()
            .unwrap()
            .to_string(),
    };
    let claim = {
        let (addr, token, body) = (server.addr.clone(), worker_token.clone(), claim_body(&w1));
        std::thread::spawn(move || {
            let mut s = request(
                &addr,
                "POST",
                "/api/tasks/claim-next?wait_s=20",
                &token,
                &body,
            );
            let mut resp = String::new();
            s.read_to_string(&mut resp).unwrap();
            resp
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(1_500));
    let mut s = request(
        &server.addr,
        "POST",
        "/api/tasks",
        &token,
        r#"{"type": "freeform", "brief": "through the server"}"#,
    );
    let mut offered = String::new();
    s.read_to_string(&mut offered).unwrap();
    assert!(offered.starts_with("HTTP/1.1 201"), "{offered}");
    let resp = claim.join().unwrap();
    let body: Value = serde_json::from_str(&resp[resp.find("\r\n\r\n").unwrap() + 4..]).unwrap();
    assert_eq!(body["claimed"], true, "{resp}");
}
