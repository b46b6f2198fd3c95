#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The shared storage suite on SQLite, plus what only this backend can show: tampering
//! behind the store's back, a file that is not a vouch store, and schema enforcement.

use serde_json::json;
use std::sync::Arc;
use vouch_store::{EventKind, NewEvent, NewRun, Store, StoreError};
use vouch_store_sqlite::SqliteStore;

#[test]
fn the_shared_suite() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vouch.db");
    vouch_store::conformance::run_all(&|| {
        Arc::new(SqliteStore::open(&path).unwrap()) as Arc<dyn Store>
    });
}

fn run(id: &str) -> NewRun {
    NewRun {
        id: id.into(),
        trigger: vouch_core::TriggerKind::Interactive,
        title: "t".into(),
        chain_root: id.into(),
        parent: None,
        scope: id.into(),
        spec: json!({}),
        created_ms: 1,
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
