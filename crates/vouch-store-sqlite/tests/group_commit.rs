#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Group commit keeps every durability point: runs ending at once share the writer's synced
//! commits, and still each end is durable when its caller returns. A real process ends runs
//! from 8 threads and says which have returned; it is killed mid-stream (SIGKILL, no close),
//! and on reopen every end it reported is there, with its receipt, and every chain intact.

use serde_json::json;
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use vouch_core::{EndedBy, Outcome, RunState, TriggerKind};
use vouch_store::{EventKind, NewEvent, NewRun, Store, Terminal};
use vouch_store_sqlite::SqliteStore;

/// Set in the child process: the store file it writes.
const CHILD_ENV: &str = "VOUCH_TEST_GROUP_COMMIT_STORE";
const THREADS: usize = 8;
/// Runs a thread of the child ends at most (it is killed long before).
const RUNS_PER_THREAD_MAX: usize = 5_000;
/// Ends reported before the kill.
const REPORTED_BEFORE_KILL: usize = 64;

fn new_run(id: &str) -> NewRun {
    NewRun {
        state: RunState::Running,
        id: id.into(),
        trigger: TriggerKind::Interactive,
        title: "group commit".into(),
        chain_root: id.into(),
        parent: None,
        scope: id.into(),
        spec: json!({}),
        created_ms: 1,
        lease: None,
    }
}

fn terminal(id: &str) -> Terminal {
    Terminal {
        outcome: Outcome::Succeeded,
        ended_by: EndedBy::Loop,
        receipt: format!("Receipt for {id}"),
        body: json!({"outcome": "succeeded"}).into(),
        at_ms: 2,
        outbox: None,
    }
}

/// The child: 8 threads, each creating, journaling and ending runs one after another, and
/// printing `ended <id>` once `end_run` has returned.
fn child(path: &str) {
    let store = SqliteStore::open(std::path::Path::new(path)).unwrap();
    let out = std::sync::Mutex::new(std::io::stdout());
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (store, out) = (&store, &out);
            s.spawn(move || {
                for k in 0..RUNS_PER_THREAD_MAX {
                    let id = format!("w{t}-{k}");
                    store.create_run(&new_run(&id)).unwrap();
                    let events = [
                        NewEvent::new(EventKind::Turn, 1, json!({"n": 1})),
                        NewEvent::new(EventKind::Turn, 2, json!({"n": 2})),
                    ];
                    store.append_batch(&id, &events).unwrap();
                    store.end_run(&id, &terminal(&id)).unwrap();
                    let mut o = out.lock().unwrap();
                    writeln!(o, "ended {id}").unwrap();
                    o.flush().unwrap();
                }
            });
        }
    });
}

#[test]
fn runs_ending_at_once_are_each_durable_when_their_callers_return() {
    if let Ok(path) = std::env::var(CHILD_ENV) {
        child(&path);
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vouch.db");
    let mut proc = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "runs_ending_at_once_are_each_durable_when_their_callers_return",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut reported = Vec::new();
    for line in BufReader::new(proc.stdout.take().unwrap()).lines() {
        let line = line.unwrap();
        if let Some(id) = line.strip_prefix("ended ") {
            reported.push(id.to_string());
            if reported.len() == REPORTED_BEFORE_KILL {
                // Killed while the other threads' ends are still in flight.
                proc.kill().unwrap();
                break;
            }
        }
    }
    let status = proc.wait().unwrap();
    assert_eq!(
        reported.len(),
        REPORTED_BEFORE_KILL,
        "the child ended early ({status}) after {} ends",
        reported.len()
    );
    assert!(
        status.code().is_none(),
        "the child was killed, not ended: {status}"
    );

    let store = SqliteStore::open(&path).unwrap();
    for id in &reported {
        let run = store
            .run(id)
            .unwrap()
            .unwrap_or_else(|| panic!("run {id} lost"));
        assert_eq!(
            run.state,
            RunState::Ended,
            "run {id} reported ended: {run:?}"
        );
        assert_eq!(
            store.receipt(id).unwrap().as_deref(),
            Some(format!("Receipt for {id}").as_str()),
            "run {id}'s receipt"
        );
        assert_eq!(store.journal(id).unwrap().len(), 3, "run {id}'s journal");
    }
    let report = store.verify().unwrap();
    assert!(report.intact(), "{report:?}");
}
