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

