#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 24 #1: ownership by lease and host, never by a local pid alone. Across two machines
//! (a worker in its own PID namespace looks like one), a host ended every live run of the
//! worker because the worker's pid was missing from *its* `/proc`; a run whose owner was pid 1
//! of a container looked alive forever. An owner is now (host id, boot, pid, start): a host
//! judges processes only of its own host and boot, and any other owner by its lease alone.
//! Real processes, real namespaces (`unshare`), on both backends.

mod support;

use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Output};

/// One vouch home on one backend; `pg` is (url, schema) for PostgreSQL.
struct Site {
    _tmp: tempfile::TempDir,
    dir: PathBuf,
    pg: Option<(String, String)>,
}

impl Drop for Site {
    fn drop(&mut self) {
        if let Some((url, schema)) = &self.pg {
            if let Ok(mut c) = postgres::Client::connect(url, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
            }
        }
    }
}

fn pg_url() -> String {
    std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

impl Site {
    fn new(postgres: bool) -> Site {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("home");
        let pg = postgres.then(|| {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let schema = format!(
                "vouch_hosts_{}_{}",
                std::process::id(),
                nanos % 1_000_000_000
            );
            (pg_url(), schema)
        });
        let s = Site { _tmp: tmp, dir, pg };
        let out = s.vouch(&[], &["init"], &[]);
        assert!(out.status.success(), "init: {}", err(&out));
        s
    }

    /// `vouch ARGS` on this site, started through `wrap` (e.g. `unshare …`), with `env`.
    fn vouch(&self, wrap: &[&str], args: &[&str], env: &[(&str, &str)]) -> Output {
        self.vouch_in(&self.dir, wrap, args, env)
    }

    /// As [`Site::vouch`], with the home `dir` on this site's store.
    fn vouch_in(
        &self,
        dir: &std::path::Path,
        wrap: &[&str],
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Output {
        let bin = env!("CARGO_BIN_EXE_vouch");
        let mut c = match wrap.split_first() {
            Some((first, rest)) => {
                let mut c = Command::new(first);
                c.args(rest).arg(bin);
                c
            }
            None => Command::new(bin),
        };
        c.arg("--home")
            .arg(dir)
            .args(args)
            .env_remove("VOUCH_CRASH_AFTER")
            .env_remove("VOUCH_HOST_ID")
            .env_remove("DBUS_SESSION_BUS_ADDRESS");
        if let Some((url, schema)) = &self.pg {
            c.env("VOUCH_DATABASE_URL", url)
                .env("VOUCH_DATABASE_SCHEMA", schema);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    }

    /// A run started through `wrap` and killed after its first delivery's evidence: its
    /// process is gone, its lease still runs. Returns the run's id.
    fn killed_run(&self, wrap: &[&str], env: &[(&str, &str)], name: &str) -> String {
        self.killed_run_at(wrap, env, name, "evidence:d1")
    }

    /// As [`Site::killed_run`], killed after the crash point `point`.
    fn killed_run_at(
        &self,
        wrap: &[&str],
        env: &[(&str, &str)],
        name: &str,
        point: &str,
    ) -> String {
        let script = self.dir.join(format!("{name}.json"));
        std::fs::write(&script, two_saves(name).to_string()).unwrap();
        let mut env = env.to_vec();
        env.push(("VOUCH_CRASH_AFTER", point));
        let out = self.vouch(
            wrap,
            &["run", name, "--script", script.to_str().unwrap()],
            &env,
        );
        assert!(
            !out.status.success(),
            "the run should have been killed: {}",
            err(&out)
        );
        // Read without starting up (a read-only home reconciles nothing).
        let runs = self.runs_seen_by(&[], &[("VOUCH_READ_ONLY", "1")]);
        let run = runs.into_iter().find(|r| r["title"] == json!(name));
        run.unwrap()["id"].as_str().unwrap().to_string()
    }

    /// The runs as `vouch runs list` shows them: every listing is a start-up (§9.1 b).
    fn runs_seen_by(&self, wrap: &[&str], env: &[(&str, &str)]) -> Vec<Value> {
        let out = self.vouch(wrap, &["--json", "runs", "list"], env);
        assert!(out.status.success(), "runs list: {}", err(&out));
        serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
    }

    fn runs(&self) -> Vec<Value> {
        self.runs_seen_by(&[], &[])
    }

    /// Time passes for one run: its lease lapsed a minute ago.
    fn lapse(&self, run: &str) {
        self.sql(&format!(
            "UPDATE runs SET lease_until_ms = lease_until_ms - 60000 WHERE id = '{run}'"
        ));
    }

    /// One statement on the site's store, behind the host's back.
    fn sql(&self, statement: &str) {
        match &self.pg {
            Some((url, schema)) => {
                let mut c = postgres::Client::connect(url, postgres::NoTls).unwrap();
                c.batch_execute(&format!("SET search_path TO {schema}; {statement}"))
                    .unwrap();
            }
            None => {
                let c = rusqlite::Connection::open(self.dir.join("vouch.db")).unwrap();
                c.execute_batch(statement).unwrap();
            }
        }
    }

    /// The events of a run's journal as (kind, delivery), read without starting up.
    fn journal(&self, run: &str) -> Vec<(String, Value)> {
        let out = self.vouch(
            &[],
            &["--json", "journal", run],
            &[("VOUCH_READ_ONLY", "1")],
        );
        assert!(out.status.success(), "journal: {}", err(&out));
        let events: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
        events
            .iter()
            .map(|e| {
                (
                    e["kind"].as_str().unwrap_or("").to_string(),
                    e["delivery"].clone(),
                )
            })
            .collect()
    }

    /// `vouch serve` on this site, its stderr kept in the site's folder.
    fn serve(&self, env: &[(&str, &str)], n: usize) -> Serve {
        let log = std::fs::File::create(self.dir.join(format!("serve-{n}.log"))).unwrap();
        let mut c = Command::new(env!("CARGO_BIN_EXE_vouch"));
        c.arg("--home")
            .arg(&self.dir)
            .args(["serve", "--tick-ms", "50"])
            .env_remove("VOUCH_CRASH_AFTER")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdout(std::process::Stdio::null())
            .stderr(log);
        if let Some((url, schema)) = &self.pg {
            c.env("VOUCH_DATABASE_URL", url)
                .env("VOUCH_DATABASE_SCHEMA", schema);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        Serve(c.spawn().unwrap())
    }
}

/// Kills the child it holds when dropped, so a failing assertion never leaves it running.
struct Serve(std::process::Child);
impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn err(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn two_saves(name: &str) -> Value {
    json!([
        {"declare": {"deliveries": [
            {"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": format!("Reports/{name}-a.md")}},
            {"id": "d2", "verb": "save", "destination": {"kind": "folder", "address": format!("Reports/{name}-b.md")}}]}},
        {"deliver": "d1", "payload": {"text": "A\n"}},
        {"deliver": "d2", "payload": {"text": "B\n"}},
        {"final": "Both saved."}
    ])
}

fn state_of(runs: &[Value], id: &str) -> (String, Value) {
    let r = runs.iter().find(|r| r["id"] == json!(id)).unwrap();
    (
        r["state"].as_str().unwrap().to_string(),
        r["ended_by"].clone(),
    )
}

fn assert_open(runs: &[Value], id: &str, why: &str) {
    let (state, by) = state_of(runs, id);
    assert_ne!(state, "ended", "run {id} was ended ({by}) {why}");
}

fn assert_ended_by_boot(runs: &[Value], id: &str, why: &str) {
    assert_eq!(
        state_of(runs, id),
        ("ended".into(), json!("boot")),
        "run {id}: {why}"
    );
}

/// A run of host `a` whose process is gone but whose lease still runs is never ended by
/// host `b` (which cannot see `a`'s processes); once the lease lapses, `b` ends it. The host
/// of a run, back on the same machine and boot, ends it at once: its owner's pid is gone.
fn another_hosts_live_lease_is_never_ended(pg: bool) {
    let site = Site::new(pg);
    let a = [("VOUCH_HOST_ID", "host-a")];
    let b = [("VOUCH_HOST_ID", "host-b")];
    let c = [("VOUCH_HOST_ID", "host-c")];
    let first = site.killed_run(&[], &a, "first");
    // Host c's start-up leaves host a's run alone too.
    let second = site.killed_run(&[], &c, "second");
    let runs = site.runs_seen_by(&[], &b);
    assert_open(&runs, &first, "by host b while host a's lease ran");
    assert_open(&runs, &second, "by host b while host a's lease ran");
    site.lapse(&first);
    let runs = site.runs_seen_by(&[], &b);
    assert_ended_by_boot(
        &runs,
        &first,
        "its lease lapsed: another host takes it over",
    );
    assert_open(&runs, &second, "by host b while host a's lease ran");
    let runs = site.runs_seen_by(&[], &c);
    assert_ended_by_boot(&runs, &second, "its own host knows its process is gone");
}

#[test]
fn another_hosts_live_lease_is_never_ended_on_sqlite() {
    another_hosts_live_lease_is_never_ended(false);
}

#[test]
fn another_hosts_live_lease_is_never_ended_on_postgresql() {
    another_hosts_live_lease_is_never_ended(true);
}

const NAMESPACE: [&str; 4] = ["unshare", "--pid", "--fork", "--mount-proc"];

/// A worker in its own PID namespace is pid 1 there, and pid 1 exists in every namespace:
/// its run looked alive forever to the root namespace and to a restarted worker (pid 1 again),
/// so it was never ended. Its lease, not a pid, now decides: live, the run is left alone by
/// every other namespace; lapsed, whoever comes next takes it over. (A namespace's inode
/// number may be given again once it is gone: then the pid's start time tells the restarted
/// pid 1 from the one that died.)
fn a_worker_in_its_own_pid_namespace(pg: bool) {
    if !support::namespaces() {
        return;
    }
    let site = Site::new(pg);
    let first = site.killed_run(&NAMESPACE, &[], "first");
    assert_open(
        &site.runs(),
        &first,
        "by the root namespace while its lease ran",
    );
    site.lapse(&first);
    assert_ended_by_boot(
        &site.runs(),
        &first,
        "the root namespace takes over a lapsed lease of another namespace's pid 1",
    );
    let second = site.killed_run(&NAMESPACE, &[], "second");
    site.lapse(&second);
    assert_ended_by_boot(
        &site.runs_seen_by(&NAMESPACE, &[]),
        &second,
        "a restarted pid 1 takes over its predecessor's lapsed lease",
    );
}

#[test]
fn a_worker_in_its_own_pid_namespace_on_sqlite() {
    a_worker_in_its_own_pid_namespace(false);
}

#[test]
fn a_worker_in_its_own_pid_namespace_on_postgresql() {
    a_worker_in_its_own_pid_namespace(true);
}

const ORPHANS: usize = 24;
const SERVES: usize = 4;
/// How long the serves may take to end every orphan.
const SETTLE_MS_MAX: u64 = 60_000;

/// Four `vouch serve` on one store reconciled the same orphan several times and some of them
/// exited: start-up went on reconciling a run whose take-over it had lost, because the owner
/// looked dead. Only the process whose take-over succeeded ends a run now, and a lost race is
/// not an error. Orphans whose owner is a dead process of the serves' own host and boot
/// (with leases still running, so every serve takes the take-over path), each killed inside
/// an attempt so that reconciling it journals the attempt's settlement: every run is settled
/// once and ended once, and every serve is still running.
fn only_the_winner_of_a_take_over_reconciles_an_orphan(pg: bool) {
    let site = Site::new(pg);
    let runs: Vec<String> = (0..ORPHANS)
        .map(|i| {
            let host = format!("orphans-{i}");
            let name = format!("orphan-{i}");
            site.killed_run_at(
                &[],
                &[("VOUCH_HOST_ID", &host)],
                &name,
                "attempt_started:d1",
            )
        })
        .collect();
    // The serves start while every orphan's owner is another host's, with its lease running
    // (left alone); then all at once the owners become dead processes of the serves' own host
    // and boot (pid_max is at most 2^22, so this pid never exists), and every serve, ticking,
    // races the others for them.
    let serves: Vec<Serve> = (0..SERVES)
        .map(|n| site.serve(&[("VOUCH_HOST_ID", "serves")], n))
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let boot_id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let ns = std::fs::read_link("/proc/self/ns/pid").unwrap();
    let ns: String = ns
        .to_str()
        .unwrap()
        .chars()
        .filter(|c| c.is_ascii_digit())
        .collect();
    let dead = format!("pid:4194305+1@serves/{}.{ns}", boot_id.trim());
    site.sql(&format!(
        "UPDATE runs SET owner = '{dead}' WHERE state <> 'ended'"
    ));
    let started = std::time::Instant::now();
    let open = || {
        let all = site.runs_seen_by(&[], &[("VOUCH_READ_ONLY", "1")]);
        all.iter().filter(|r| r["state"] != json!("ended")).count()
    };
    while open() > 0 && started.elapsed().as_millis() < SETTLE_MS_MAX as u128 {
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
    let mut serves = serves;
    let exited: Vec<String> = serves
        .iter_mut()
        .enumerate()
        .filter_map(|(n, s)| {
            let status = s.0.try_wait().unwrap()?;
            let log = std::fs::read_to_string(site.dir.join(format!("serve-{n}.log")));
            Some(format!(
                "serve {n} exited ({status}): {}",
                log.unwrap_or_default()
            ))
        })
        .collect();
    assert!(exited.is_empty(), "{}", exited.join("\n"));
    assert_eq!(open(), 0, "every orphan ends within {SETTLE_MS_MAX} ms");
    let mut twice = vec![];
    for run in &runs {
        // What start-up journaled: everything after the interrupted attempt's start, each
        // (kind, delivery) once, ending in one terminal event.
        let events = site.journal(run);
        let from = events.iter().position(|(k, _)| k == "attempt_started");
        let settled = &events[from.unwrap_or(events.len())..];
        let mut seen = std::collections::BTreeSet::new();
        for e in settled {
            if !seen.insert(format!("{e:?}")) {
                twice.push(format!("run {run}: {e:?} twice in {settled:?}"));
            }
        }
        if settled.last().map(|(k, _)| k.as_str()) != Some("terminal") || settled.len() < 3 {
            twice.push(format!(
                "run {run}: not settled and ended once: {settled:?}"
            ));
        }
    }
    assert!(twice.is_empty(), "{}", twice.join("\n"));
}

#[test]
fn only_the_winner_of_a_take_over_reconciles_an_orphan_on_sqlite() {
    only_the_winner_of_a_take_over_reconciles_an_orphan(false);
}

#[test]
fn only_the_winner_of_a_take_over_reconciles_an_orphan_on_postgresql() {
    only_the_winner_of_a_take_over_reconciles_an_orphan(true);
}

const TICKERS: usize = 4;
const SLOTS: i64 = 12;

/// Issue 24 #2: one actor per duty across hosts. Four processes tick one store at once (on
/// PostgreSQL each from a home of its own, as separate machines would; on SQLite sharing one
/// home): every one of twelve owed slots of an every-minute schedule is consumed once, each
/// by one run, and every run's notification (a failed run always notifies) is delivered once
/// across all of them — the outbox dispatcher is fenced by the store, not by a process.
fn every_slot_and_notification_once_across_processes(pg: bool) {
    let site = Site::new(pg);
    let homes: Vec<PathBuf> = (0..TICKERS)
        .map(|n| {
            if !pg || n == 0 {
                return site.dir.clone();
            }
            let dir = site._tmp.path().join(format!("home-{n}"));
            let out = site.vouch_in(&dir, &[], &["init"], &[]);
            assert!(out.status.success(), "init: {}", err(&out));
            dir
        })
        .collect();
    let routine = site.dir.join("routine.json");
    let routine_json = json!({"prompt": "tick", "script": [{"final": "nothing to do"}]});
    std::fs::write(&routine, routine_json.to_string()).unwrap();
    let args = [
        "schedule",
        "add",
        "tick",
        "--cron",
        "* * * * *",
        "--grace",
        "1h",
    ];
    let out = site.vouch(
        &[],
        &[&args[..], &["--routine", routine.to_str().unwrap()]].concat(),
        &[],
    );
    assert!(out.status.success(), "schedule add: {}", err(&out));
    // Added twelve minutes ago (to the minute): twelve slots are owed, none late.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let created = now - now % 60_000 - SLOTS * 60_000 + 1;
    site.sql(&format!("UPDATE schedules SET created_ms = {created}"));
    let outs: Vec<Output> = std::thread::scope(|s| {
        let handles: Vec<_> = homes
            .iter()
            .map(|home| s.spawn(|| site.vouch_in(home, &[], &["serve", "--once"], &[])))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for o in &outs {
        assert!(o.status.success(), "serve --once: {}", err(o));
    }
    let out = site.vouch(
        &[],
        &["--json", "schedule", "list"],
        &[("VOUCH_READ_ONLY", "1")],
    );
    assert!(out.status.success(), "{}", err(&out));
    let runs = site.runs_seen_by(&[], &[("VOUCH_READ_ONLY", "1")]);
    let mut scopes: Vec<&str> = runs.iter().filter_map(|r| r["scope"].as_str()).collect();
    let before = scopes.len();
    scopes.sort();
    scopes.dedup();
    assert_eq!(before, scopes.len(), "a slot ran twice: {scopes:?}");
    // The minute now may have become due too while the tickers ran.
    assert!(
        (SLOTS..=SLOTS + 1).contains(&(runs.len() as i64)),
        "{} runs for {SLOTS} slots",
        runs.len()
    );
    let mut delivered: Vec<String> = vec![];
    let mut files: Vec<&PathBuf> = homes.iter().collect();
    files.dedup();
    for home in files {
        let text = std::fs::read_to_string(home.join("notifications.jsonl")).unwrap_or_default();
        for line in text.lines() {
            let v: Value = serde_json::from_str(line).unwrap();
            delivered.push(v["run"].as_str().unwrap().to_string());
        }
    }
    delivered.sort();
    let mut twice = delivered.clone();
    twice.dedup();
    assert_eq!(
        delivered.len(),
        twice.len(),
        "delivered twice: {delivered:?}"
    );
    let mut ids: Vec<String> = runs
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    ids.sort();
    assert_eq!(delivered, ids, "every run's notification, once");
}

#[test]
fn every_slot_and_notification_once_across_processes_on_sqlite() {
    every_slot_and_notification_once_across_processes(false);
}

#[test]
fn every_slot_and_notification_once_across_processes_on_postgresql() {
    every_slot_and_notification_once_across_processes(true);
}
