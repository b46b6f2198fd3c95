#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared storage suite on SQLite, plus what only this backend can show: tampering
//! behind the store's back, a file that is not a vouch store, and schema enforcement.

use serde_json::json;
use std::sync::Arc;
use vouch_store::{EventKind, NewEvent, NewRun, Store, StoreError};
use vouch_store_sqlite::SqliteStore;

/// A fresh store in its own folder: the guard (the folder) and an opener over it.
fn fresh<T: ?Sized>(as_dyn: fn(SqliteStore) -> Arc<T>) -> (tempfile::TempDir, impl Fn() -> Arc<T>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vouch.db");
    (dir, move || as_dyn(SqliteStore::open(&path).unwrap()))
}

/// The shared storage suite, one test per check.
mod shared {
    use super::*;
    vouch_store::store_conformance_tests!(fresh(|s| Arc::new(s) as Arc<dyn Store>));
}

/// The verification tests' tampering hook, on this backend's tables.
#[test]
fn tamper_hook_alters_one_payload() {
    let (_guard, open) = fresh(|s| Arc::new(s) as Arc<dyn vouch_store::TamperForTests>);
    vouch_store::conformance::tamper_hook_alters_one_payload(&*open());
}

/// The shared board suite, one test per check.
mod board {
    use super::*;
    vouch_store::board_conformance_tests!(fresh(
        |s| Arc::new(s) as Arc<dyn vouch_store::board::BoardStore>
    ));
}

/// The board's sweep reads the run store beside it (one store, two views).
#[test]
fn sweep_suspends_an_attempt_whose_run_is_durably_suspended() {
    let (_guard, open) = fresh(Arc::new);
    let s = open();
    vouch_store::board_conformance::sweep_suspends_an_attempt_whose_run_is_durably_suspended(
        s.clone(),
        s,
    );
}

/// Knowledge leverage is counted from the run store's journal beside the board (§13.7.3).
#[test]
fn measures_count_reads_from_the_journal() {
    let (_guard, open) = fresh(Arc::new);
    let s = open();
    vouch_store::board_conformance::measures_count_reads_from_the_journal(s.clone(), s);
}

/// The shared identity suite, one test per check.
mod identity {
    use super::*;
    vouch_store::identity_conformance_tests!(fresh(
        |s| Arc::new(s) as Arc<dyn vouch_store::IdentityStore>
    ));
}

#[test]
fn the_schema_refuses_to_rewrite_an_ended_attempt() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vouch.db");
    vouch_store::board_conformance::heartbeat_report_and_late_words(&|| {
        Arc::new(SqliteStore::open(&path).unwrap()) as Arc<dyn vouch_store::board::BoardStore>
    });
    // The schema itself refuses to rewrite an ended attempt, whoever writes.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let err = conn
        .execute(
            "UPDATE task_attempts SET state = 'running' WHERE task_id = 'h-1' AND n = 1",
            [],
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("an ended attempt never changes"),
        "{err}"
    );
}

fn run(id: &str) -> NewRun {
    NewRun {
        state: vouch_core::RunState::Created,
        id: id.into(),
        trigger: vouch_core::TriggerKind::Interactive,
        title: "t".into(),
        chain_root: id.into(),
        parent: None,
        scope: id.into(),
        spec: json!({}),
        created_ms: 1,
        lease: None,
    }
}

#[test]
fn tampering_is_found_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vouch.db");
    {
        let s = SqliteStore::open(&path).unwrap();
        s.create_run(&run("r")).unwrap();
        for n in 0..5 {
            s.append(
                "r",
                &NewEvent::new(EventKind::ToolCalled, n, json!({"n": n})),
            )
            .unwrap();
        }
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    // The schema itself refuses edits and deletes.
    assert!(conn
        .execute(
            "UPDATE journal SET body = '{}' WHERE run_id = 'r' AND seq = 3",
            []
        )
        .is_err());
    assert!(conn
        .execute("DELETE FROM journal WHERE run_id = 'r' AND seq = 5", [])
        .is_err());
    // Someone who drops the triggers can edit, and verify names the event.
    conn.execute_batch("DROP TRIGGER journal_no_update; DROP TRIGGER journal_no_delete;")
        .unwrap();
    conn.execute(
        "UPDATE journal SET body = '{\"n\":33}' WHERE run_id = 'r' AND seq = 3",
        [],
    )
    .unwrap();
    drop(conn);
    let s = SqliteStore::open(&path).unwrap();
    let report = s.verify().unwrap();
    assert_eq!(report.breaks.len(), 1);
    assert_eq!(report.breaks[0].run_id, "r");
    assert_eq!(report.breaks[0].seq, 3);
    drop(s);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute("DELETE FROM journal WHERE run_id = 'r' AND seq = 2", [])
        .unwrap();
    drop(conn);
    let report = SqliteStore::open(&path).unwrap().verify().unwrap();
    assert_eq!(
        report.breaks[0].seq, 3,
        "a removed event breaks the sequence at the next one"
    );
}

#[test]
fn files_that_are_not_vouch_stores_are_refused_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let junk = dir.path().join("junk.db");
    std::fs::write(
        &junk,
        b"hello, not sqlite at all, definitely not a database file....",
    )
    .unwrap();
    assert!(matches!(
        SqliteStore::open(&junk),
        Err(StoreError::Corrupt(_))
    ));
    assert_eq!(
        std::fs::read(&junk).unwrap(),
        b"hello, not sqlite at all, definitely not a database file...."
    );
    let other = dir.path().join("other.db");
    rusqlite::Connection::open(&other)
        .unwrap()
        .execute_batch("CREATE TABLE t (x)")
        .unwrap();
    let err = SqliteStore::open(&other).err().unwrap();
    assert!(matches!(err, StoreError::Corrupt(_)));
    assert!(err.to_string().contains("vouch init"), "{err}");
    assert!(
        matches!(SqliteStore::open(dir.path()), Err(StoreError::Corrupt(_))),
        "a folder is not a store"
    );
}

fn ev(n: i64) -> NewEvent {
    NewEvent::new(EventKind::ToolCalled, n, json!({"n": n}))
}

#[test]
fn the_schema_itself_keeps_one_terminal_and_closes_the_chain() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vouch.db");
    {
        let s = SqliteStore::open(&path).unwrap();
        s.create_run(&run("r")).unwrap();
        s.append("r", &ev(1)).unwrap();
        let t = vouch_store::Terminal {
            outcome: vouch_core::Outcome::Succeeded,
            ended_by: vouch_core::EndedBy::Loop,
            receipt: "done".into(),
            body: json!({}).into(),
            at_ms: 2,
            outbox: None,
        };
        s.end_run("r", &t).unwrap();
    }
    // Behind the store's back, straight SQL still cannot add a second terminal or any event
    // after the first: the partial unique index and the trigger hold on their own.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let insert = |seq: i64, kind: &str| {
        conn.execute(
            "INSERT INTO journal (run_id, seq, kind, delivery, body, at_ms, prev_hash, hash) VALUES ('r', ?1, ?2, NULL, '{}', 3, 'x', 'y')",
            rusqlite::params![seq, kind],
        )
    };
    let err = insert(3, "terminal").unwrap_err().to_string();
    assert!(err.contains("terminal"), "{err}");
    let err = insert(3, "turn").unwrap_err().to_string();
    assert!(err.contains("terminal"), "{err}");
    conn.execute_batch("DROP TRIGGER journal_closed_after_terminal")
        .unwrap();
    let err = insert(3, "terminal").unwrap_err().to_string();
    assert!(err.contains("UNIQUE"), "{err}");
}

#[test]
fn migrations_are_recorded_and_a_newer_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vouch.db");
    drop(SqliteStore::open(&path).unwrap());
    let version = |p: &std::path::Path| -> i64 {
        rusqlite::Connection::open(p)
            .unwrap()
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .unwrap()
    };
    assert_eq!(version(&path), vouch_store_sqlite::SCHEMA_VERSION as i64);
    // Reopening applies nothing twice.
    drop(SqliteStore::open(&path).unwrap());
    assert_eq!(version(&path), vouch_store_sqlite::SCHEMA_VERSION as i64);
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(&format!(
            "PRAGMA user_version = {}",
            vouch_store_sqlite::SCHEMA_VERSION + 1
        ))
        .unwrap();
    let err = SqliteStore::open(&path).err().unwrap();
    assert!(matches!(err, StoreError::Fatal(_)), "{err:?}");
    assert!(err.to_string().contains("newer vouch"), "{err}");
}

#[test]
fn oversized_bodies_are_refused_and_nothing_is_appended() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(&dir.path().join("vouch.db")).unwrap();
    s.create_run(&run("r")).unwrap();
    let big = "x".repeat(vouch_store_sqlite::BODY_BYTES_MAX + 1);
    let err = s
        .append(
            "r",
            &NewEvent::new(EventKind::Turn, 1, json!({ "text": big })),
        )
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert!(s.journal("r").unwrap().is_empty());
    assert_eq!(s.append("r", &ev(2)).unwrap().seq, 1);
}

#[test]
fn appends_are_group_committed() {
    let dir = tempfile::tempdir().unwrap();
    let s = Arc::new(SqliteStore::open(&dir.path().join("vouch.db")).unwrap());
    for w in 0..8 {
        s.create_run(&run(&format!("g{w}"))).unwrap();
    }
    let before = s.write_stats();
    std::thread::scope(|scope| {
        for w in 0..8 {
            let s = s.clone();
            scope.spawn(move || {
                for n in 0..50 {
                    s.append(&format!("g{w}"), &ev(n)).unwrap();
                }
            });
        }
    });
    let after = s.write_stats();
    assert_eq!(after.jobs - before.jobs, 400);
    // Every append is durable on return, yet they did not each pay for a commit.
    assert!(
        after.commits - before.commits < 400,
        "{before:?} → {after:?}"
    );
}

/// A run's creation is committed without an fsync of its own (§3.4.2); the next write of the
/// store is synced and carries it to disk.
#[test]
fn a_runs_creation_is_committed_unsynced_and_the_next_write_syncs() {
    let dir = tempfile::tempdir().unwrap();
    let s = SqliteStore::open(&dir.path().join("vouch.db")).unwrap();
    let before = s.write_stats();
    s.create_run(&run("u")).unwrap();
    let created = s.write_stats();
    assert_eq!(
        created.commits - before.commits,
        1,
        "{before:?} → {created:?}"
    );
    assert_eq!(
        created.synced, before.synced,
        "the creation was synced: {created:?}"
    );
    s.append("u", &ev(1)).unwrap();
    let appended = s.write_stats();
    assert_eq!(
        appended.synced - created.synced,
        1,
        "{created:?} → {appended:?}"
    );
    assert_eq!(s.run("u").unwrap().unwrap().id, "u");
}

/// Run this binary's `test` as a child process writing to a fresh store (its path in `env`),
/// read its `ack …` lines, and kill it with SIGKILL after [`CRASH_ACKS_BEFORE_KILL`] of them.
/// Returns what followed each `ack `, the store's folder (kept while it is needed) and path.
fn acks_until_killed(
    test: &str,
    env: &str,
) -> (Vec<String>, tempfile::TempDir, std::path::PathBuf) {
    use std::io::BufRead;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vouch.db");
    let mut child = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", test, "--nocapture", "--test-threads=1"])
        .env(env, &path)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut acked: Vec<String> = vec![];
    let stdout = child.stdout.take().unwrap();
    for line in std::io::BufReader::new(stdout).lines() {
        let line = line.unwrap();
        if let Some(ack) = line.strip_prefix("ack ") {
            acked.push(ack.to_string());
            if acked.len() >= CRASH_ACKS_BEFORE_KILL {
                child.kill().unwrap();
                break;
            }
        }
    }
    child.wait().unwrap();
    assert_eq!(
        acked.len(),
        CRASH_ACKS_BEFORE_KILL,
        "the child stopped early"
    );
    (acked, dir, path)
}

const CREATE_CHILD_ENV: &str = "VOUCH_STORE_CREATE_CHILD";

/// A real process creating runs (unsynced commits) is killed with SIGKILL: every run whose
/// creation returned is in the store afterwards — the WAL holds it even without an fsync.
#[test]
fn a_killed_process_loses_no_run_it_created() {
    use std::io::Write;
    if let Ok(path) = std::env::var(CREATE_CHILD_ENV) {
        let s = SqliteStore::open(std::path::Path::new(&path)).unwrap();
        for n in 0..CRASH_CHILD_APPENDS_MAX {
            let id = format!("c{n}");
            s.create_run(&run(&id)).unwrap();
            let mut out = std::io::stdout().lock();
            writeln!(out, "ack {id}").unwrap();
            out.flush().unwrap();
        }
        return;
    }
    let (acked, _dir, path) =
        acks_until_killed("a_killed_process_loses_no_run_it_created", CREATE_CHILD_ENV);
    let s = SqliteStore::open(&path).unwrap();
    for id in &acked {
        assert!(
            s.run(id).unwrap().is_some(),
            "run {id} was created but is gone"
        );
    }
}

const CRASH_CHILD_ENV: &str = "VOUCH_STORE_CRASH_CHILD";
/// Acknowledged appends the parent waits for before it kills the child.
const CRASH_ACKS_BEFORE_KILL: usize = 300;
/// Appends a child makes at most (it is normally killed long before).
const CRASH_CHILD_APPENDS_MAX: i64 = 100_000;

/// A real process appending from four threads is killed with SIGKILL; every append it
/// acknowledged is in the journal afterwards and every chain verifies.
#[test]
fn a_killed_process_loses_no_acknowledged_append() {
    use std::io::Write;
    if let Ok(path) = std::env::var(CRASH_CHILD_ENV) {
        // The child: append until killed, printing each acknowledgement once it returned.
        let s = Arc::new(SqliteStore::open(std::path::Path::new(&path)).unwrap());
        for w in 0..4 {
            s.create_run(&run(&format!("k{w}"))).unwrap();
        }
        std::thread::scope(|scope| {
            for w in 0..4 {
                let s = s.clone();
                scope.spawn(move || {
                    for n in 0..CRASH_CHILD_APPENDS_MAX {
                        let e = s.append(&format!("k{w}"), &ev(n)).unwrap();
                        let mut out = std::io::stdout().lock();
                        writeln!(out, "ack {} {}", e.run_id, e.seq).unwrap();
                        out.flush().unwrap();
                    }
                });
            }
        });
        return;
    }
    let (acks, _dir, path) = acks_until_killed(
        "a_killed_process_loses_no_acknowledged_append",
        CRASH_CHILD_ENV,
    );
    let acked: Vec<(String, i64)> = acks
        .iter()
        .map(|a| {
            let (run, seq) = a.split_once(' ').unwrap();
            (run.to_string(), seq.parse().unwrap())
        })
        .collect();
    let s = SqliteStore::open(&path).unwrap();
    for (run, seq) in &acked {
        let j = s.journal(run).unwrap();
        assert!(
            j.iter().any(|e| e.seq == *seq),
            "{run}#{seq} was acknowledged but is gone"
        );
    }
    let report = s.verify().unwrap();
    assert!(report.breaks.is_empty(), "{:?}", report.breaks);
    assert!(report.events >= CRASH_ACKS_BEFORE_KILL);
    // The store takes appends again after the crash, on the same chains.
    let next = s.append("k0", &ev(-1)).unwrap();
    assert_eq!(next.seq as usize, s.journal("k0").unwrap().len());
}

#[test]
fn bodies_hash_as_they_read_back_floats_included() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vouch.db");
    let bodies = [
        json!({"x": 0.1, "y": 1e300, "z": 5e-324, "w": -0.0, "n": [1.5, {"deep": 2.2250738585072014e-308}]}),
        json!({"b": u64::MAX, "a": i64::MIN, "s": "\u{2028}\"\\é", "t": true, "o": null}),
        json!([]),
        json!("just text"),
    ];
    {
        let s = SqliteStore::open(&path).unwrap();
        s.create_run(&run("f")).unwrap();
        for (n, b) in bodies.iter().enumerate() {
            let e = s
                .append("f", &NewEvent::new(EventKind::Turn, n as i64, b.clone()))
                .unwrap();
            assert_eq!(&e, s.journal("f").unwrap().last().unwrap());
        }
    }
    let s = SqliteStore::open(&path).unwrap();
    let report = s.verify().unwrap();
    assert!(report.breaks.is_empty(), "{:?}", report.breaks);
    assert_eq!(s.journal("f").unwrap()[1].body, bodies[1]);
}

#[test]
fn diary_and_identities_refuse_edits_in_the_schema() {
    use vouch_store::{DiaryEntry, IdentityRecord, IdentityStore, GENESIS_HASH};
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vouch.db");
    {
        let s = SqliteStore::open(&path).unwrap();
        s.put_identity(&IdentityRecord {
            name: "w".into(),
            public_key: format!("ed25519:{}", "11".repeat(32)),
            created_ms: 1,
        })
        .unwrap();
        s.diary_append(&DiaryEntry {
            identity: "w".into(),
            seq: 1,
            at_ms: 2,
            body: json!({"text": "hi"}),
            prev_hash: GENESIS_HASH.into(),
            hash: "22".repeat(32),
            signature: "33".repeat(64),
        })
        .unwrap();
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    for sql in [
        "UPDATE diary SET body = '{}' WHERE identity = 'w'",
        "DELETE FROM diary WHERE identity = 'w'",
        "UPDATE identities SET public_key = 'x' WHERE name = 'w'",
        "DELETE FROM identities WHERE name = 'w'",
        "INSERT INTO diary VALUES ('w', 3, 1, '{}', 'x', 'y', 'z')",
    ] {
        assert!(
            conn.execute(sql, []).is_err(),
            "the schema must refuse: {sql}"
        );
    }
}

/// §8.2: the ledger follows its state machine for generated sequences of intents and
/// outcomes (each case in its own key space of one store).
#[test]
fn the_ledger_follows_its_state_machine_for_any_sequence() {
    use proptest::prelude::*;
    use vouch_store::conformance::{ledger_follows_its_state_machine, LedgerOp};
    use vouch_store::LedgerState;
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("vouch.db")).unwrap();
    let op = prop_oneof![
        (0u8..3).prop_map(LedgerOp::Intend),
        (
            0u8..3,
            prop::sample::select(vec![
                LedgerState::Done,
                LedgerState::Failed,
                LedgerState::Unknown,
                LedgerState::Intended,
            ])
        )
            .prop_map(|(k, s)| LedgerOp::Settle(k, s)),
    ];
    let case = std::sync::atomic::AtomicUsize::new(0);
    let mut runner = proptest::test_runner::TestRunner::new(proptest::test_runner::Config {
        cases: 48,
        ..Default::default()
    });
    runner
        .run(&prop::collection::vec(op, 1..24), |ops| {
            let n = case.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            ledger_follows_its_state_machine(&store, &format!("case{n}"), &ops);
            Ok(())
        })
        .unwrap();
}

/// Every run's end dispatches the outbox: what is pending, and one run's rows, are found
/// through an index, never by reading the outbox's whole history (as on PostgreSQL).
#[test]
fn the_outbox_is_read_by_index_not_by_its_history() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vouch.db");
    drop(SqliteStore::open(&path).unwrap());
    let conn = rusqlite::Connection::open(&path).unwrap();
    let plan = |sql: &str| -> String {
        let mut st = conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}")).unwrap();
        let rows = st
            .query_map([], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap();
        rows.join("; ")
    };
    let pending = plan("SELECT id, run_id FROM outbox WHERE sent_ms IS NULL ORDER BY id");
    assert!(pending.contains("INDEX outbox_pending"), "{pending}");
    let by_run = plan("SELECT id FROM outbox WHERE run_id = 'r' ORDER BY id");
    assert!(by_run.contains("INDEX outbox_by_run"), "{by_run}");
}
