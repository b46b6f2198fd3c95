#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue 24 #6: three hosts on one PostgreSQL schema, each a `vouch serve --http` (scheduler,
//! reconciler, HTTP) and a `vouch worker`, from homes of their own. Tasks whose runs wait for
//! an approval and then send a webhook (irreversible) to a receiver on loopback; a schedule
//! owing slots; approvals given on whichever host is up. Every few seconds one host (server and
//! worker) is killed with SIGKILL and started again. Then the world is counted at the receiver
//! and in the store. `VOUCH_CHAOS_S` sets how long the killing goes on (default 40 s;
//! `scripts/chaos.sh MINUTES` runs it longer).

mod support;

use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

const HOSTS: usize = 3;
const TASKS: usize = 9;
const SLOTS_OWED: i64 = 3;

fn pg_url() -> String {
    std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn err(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

struct Cluster {
    tmp: tempfile::TempDir,
    schema: String,
    /// Per host: its server and its worker, when up.
    up: Vec<Option<(Child, Child)>>,
    script: PathBuf,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        for n in 0..HOSTS {
            self.kill(n);
        }
        if let Ok(mut c) = postgres::Client::connect(&pg_url(), postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema));
        }
    }
}

impl Cluster {
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
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .env("VOUCH_DATABASE_URL", pg_url())
            .env("VOUCH_DATABASE_SCHEMA", &self.schema)
            .env("VOUCH_HOST_ID", format!("host-{n}"));
        c
    }

    fn json(&self, n: usize, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let out = self.cmd(n, &a).output().unwrap();
        assert!(out.status.success(), "{args:?} on host {n}: {}", err(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn start(&mut self, n: usize) {
        let quiet = |mut c: Command| {
            c.stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        };
        let server = quiet(self.cmd(n, &["serve", "--http", "127.0.0.1:0"]));
        let script = self.script.to_str().unwrap().to_string();
        let worker = quiet(self.cmd(
            n,
            &["worker", "--name", &format!("w{n}"), "--script", &script],
        ));
        self.up[n] = Some((server, worker));
    }

    fn kill(&mut self, n: usize) {
        if let Some((mut s, mut w)) = self.up[n].take() {
            for c in [&mut s, &mut w] {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }

    /// Approve every open card, on host `n`.
    fn approve_all(&self, n: usize) {
        let cards = self.json(n, &["approvals"]);
        for c in cards.as_array().unwrap() {
            let (run, hash) = (
                c["run"].as_str().unwrap(),
                c["payload_hash"].as_str().unwrap(),
            );
            // A card decided meanwhile by another host is refused: that is not a failure.
            let _ = self
                .cmd(n, &["approve", run, "d1", "--hash", hash])
                .output()
                .unwrap();
        }
    }
}

/// `task offer` of task `i`: retried when an attempt dies with its host, short clocks so a
/// dead worker's attempt times out within seconds.
fn offer(i: usize) -> Vec<&'static str> {
    let brief: &'static str = Box::leak(format!("send {i}").into_boxed_str());
    vec![
        "task",
        "offer",
        "--type",
        "freeform",
        "--brief",
        brief,
        "--max-attempts",
        "10",
        "--lease-ms",
        "4000",
        "--heartbeat-ms",
        "1000",
        "--dispatch-timeout-ms",
        "4000",
    ]
}

/// A small deterministic generator (the test needs no true randomness, only spread).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self, n: usize) -> usize {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) % n as u64) as usize
    }
}

#[test]
fn three_hosts_killed_at_random_lose_nothing_and_do_nothing_twice() {
    let chaos_s: u64 = std::env::var("VOUCH_CHAOS_S")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let receiver = support::Receiver::start(false);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("script.json");
    std::fs::write(
        &script,
        json!([
            {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": receiver.url}}]}},
            {"deliver": "d1", "payload": {"text": "hello"}},
            {"submit": {"summary": "sent"}},
            {"final": "done"}
        ])
        .to_string(),
    )
    .unwrap();
    let mut c = Cluster {
        tmp,
        schema: format!(
            "vouch_chaos_{}_{}",
            std::process::id(),
            nanos % 1_000_000_000
        ),
        up: (0..HOSTS).map(|_| None).collect(),
        script,
    };
    for n in 0..HOSTS {
        let out = c.cmd(n, &["init"]).output().unwrap();
        assert!(out.status.success(), "init: {}", err(&out));
    }
    // A schedule every minute that already owes some slots.
    let routine = c.tmp.path().join("routine.json");
    std::fs::write(
        &routine,
        json!({"prompt": "tick", "script": [{"final": "tick"}]}).to_string(),
    )
    .unwrap();
    c.json(
        0,
        &[
            "schedule",
            "add",
            "tick",
            "--cron",
            "* * * * *",
            "--grace",
            "1h",
            "--routine",
            routine.to_str().unwrap(),
        ],
    );
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let created = now - now % 60_000 - SLOTS_OWED * 60_000 + 1;
    let mut db = postgres::Client::connect(&pg_url(), postgres::NoTls).unwrap();
    db.batch_execute(&format!(
        "UPDATE {}.schedules SET created_ms = {created}",
        c.schema
    ))
    .unwrap();
    let mut tasks = vec![];
    for i in 0..TASKS {
        let v = c.json(i % HOSTS, &offer(i));
        tasks.push(v["id"].as_str().unwrap().to_string());
    }
    for n in 0..HOSTS {
        c.start(n);
    }
    // Chaos: every few seconds one host dies (server and worker, SIGKILL) and comes back;
    // approvals are given on a host that is up.
    let mut rng = Lcg(nanos as u64);
    let mut kills = 0;
    let until = Instant::now() + Duration::from_secs(chaos_s);
    while Instant::now() < until {
        let victim = rng.next(HOSTS);
        c.kill(victim);
        kills += 1;
        // Work keeps arriving, so kills meet attempts in every state.
        let v = c.json(rng.next(HOSTS), &offer(tasks.len()));
        tasks.push(v["id"].as_str().unwrap().to_string());
        c.approve_all((victim + 1 + rng.next(HOSTS - 1)) % HOSTS);
        std::thread::sleep(Duration::from_millis(500 + 500 * rng.next(4) as u64));
        c.start(victim);
        std::thread::sleep(Duration::from_millis(1_000 + 500 * rng.next(4) as u64));
    }
    // Calm: everything up, approvals given, until every task is final (bounded).
    let mut last = Value::Null;
    for _ in 0..120 {
        c.approve_all(rng.next(HOSTS));
        last = c.json(0, &["task", "list"]);
        let open = last
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| {
                !["completed", "failed", "cancelled", "expired"]
                    .contains(&t["state"].as_str().unwrap())
            })
            .count();
        if open == 0 {
            break;
        }
        std::thread::sleep(Duration::from_millis(1_000));
    }
    for n in 0..HOSTS {
        c.kill(n);
    }
    let states: Vec<&str> = last
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["state"].as_str().unwrap())
        .collect();
    eprintln!(
        "chaos: {kills} kills over {chaos_s} s; tasks {states:?}; receiver {} requests",
        receiver.applied()
    );
    // Every task accepted exactly once: completed, with one completed attempt.
    let mut attempts: std::collections::BTreeMap<String, usize> = Default::default();
    for id in &tasks {
        let v = c.json(0, &["task", "show", id]);
        for a in v["attempts"].as_array().unwrap() {
            *attempts
                .entry(a["state"].as_str().unwrap().to_string())
                .or_default() += 1;
        }
        assert_eq!(v["task"]["state"], "completed", "{v}");
        let done = v["attempts"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|a| a["state"] == "completed")
            .count();
        assert_eq!(done, 1, "{v}");
    }
    // No effect twice: one request per task at the receiver, each key once.
    let keys = receiver.applied.lock().unwrap().clone();
    let distinct: BTreeSet<&String> = keys.iter().collect();
    assert_eq!(distinct.len(), keys.len(), "an effect twice: {keys:?}");
    assert_eq!(keys.len(), tasks.len(), "one send per task: {keys:?}");
    // Every run ended with exactly one receipt; every schedule slot ran once.
    let runs = c.json(0, &["runs", "list", "--limit", "500"]);
    let runs = runs.as_array().unwrap();
    let mut scopes = vec![];
    for r in runs {
        let id = r["id"].as_str().unwrap();
        assert_eq!(r["state"], "ended", "{r}");
        let receipt = c.json(0, &["receipt", id]);
        assert!(receipt.is_object(), "{receipt}");
        // A schedule's run is scoped `NAME@SLOT` (§12.2).
        if let Some(s) = r["scope"].as_str().filter(|s| s.starts_with("tick@")) {
            scopes.push(s.to_string());
        }
    }
    let slot_count = scopes.len();
    scopes.sort();
    scopes.dedup();
    assert_eq!(slot_count, scopes.len(), "a slot ran twice");
    assert!(
        slot_count as i64 >= SLOTS_OWED,
        "owed slots ran: {scopes:?}"
    );
    let terminals: i64 = db
        .query_one(
            &format!(
                "SELECT count(*) FROM {}.journal WHERE kind = 'terminal'",
                c.schema
            ),
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(terminals, runs.len() as i64, "one terminal record per run");
    eprintln!(
        "chaos figures: {kills} hosts killed, {} tasks, {} runs ({slot_count} from schedule slots), attempts by state {attempts:?}, {} sends received",
        tasks.len(),
        runs.len(),
        keys.len()
    );
}
