#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 11 #6 at the store: a read-only open reads everything and refuses every write as
//! read-only (never as corruption), and `verify` names a damaged table in the file itself.

use serde_json::json;
use vouch_store::{EventKind, NewEvent, NewRun, Store, StoreError};
use vouch_store_sqlite::SqliteStore;

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

fn filled(path: &std::path::Path) {
    let s = SqliteStore::open(path).unwrap();
    for r in ["a", "b", "c"] {
        s.create_run(&run(r)).unwrap();
        for n in 0..3 {
            s.append(r, &NewEvent::new(EventKind::Turn, n, json!({"n": n})))
                .unwrap();
        }
    }
}

#[test]
fn a_read_only_open_reads_and_refuses_writes_as_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vouch.db");
    filled(&path);
    let before = std::fs::read(&path).unwrap();
    let s = SqliteStore::open_read_only(&path, "a test").unwrap();
    assert_eq!(s.read_only().as_deref(), Some("a test"));
    assert_eq!(s.runs(10).unwrap().len(), 3);
    assert_eq!(s.journal("b").unwrap().len(), 3);
    let report = s.verify().unwrap();
    assert!(report.intact(), "{report:?}");
    assert!(matches!(
        s.create_run(&run("d")),
        Err(StoreError::ReadOnly(_))
    ));
    assert!(matches!(
        s.append("a", &NewEvent::new(EventKind::Turn, 9, json!({}))),
        Err(StoreError::ReadOnly(_))
    ));
    drop(s);
    assert_eq!(std::fs::read(&path).unwrap(), before, "nothing was written");
    assert!(SqliteStore::open(&path).unwrap().read_only().is_none());
}

#[test]
fn verify_names_a_damaged_table_of_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vouch.db");
    filled(&path);
    // The store closed cleanly, so the WAL is folded into the file; SQLite's own schema says
    // where the journal's root page is.
    let (root, page): (i64, i64) = {
        let c = rusqlite::Connection::open(&path).unwrap();
        let root = c
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'journal'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        (
            root,
            c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap(),
        )
    };
    let (root, page) = (root as usize, page as usize);
    let mut bytes = std::fs::read(&path).unwrap();
    let start = (root - 1) * page;
    bytes[start..start + page].fill(0xAB);
    std::fs::write(&path, &bytes).unwrap();
    let s = SqliteStore::open(&path).unwrap();
    let report = s.verify().unwrap();
    assert!(!report.intact());
    assert!(
        report.damage.iter().any(|d| d.contains("table journal")),
        "{:?}",
        report.damage
    );
}

/// The child half of the test below: open the store at `VOUCH_TEST_OTHER_PROCESS`, read it,
/// close it — what any other vouch command does.
#[test]
fn other_process_reads_and_closes() {
    if let Ok(p) = std::env::var("VOUCH_TEST_OTHER_PROCESS") {
        let s = SqliteStore::open(std::path::Path::new(&p)).unwrap();
        assert!(s.run("a").unwrap().is_some());
    }
}

/// Board tests on SQLite (a worker that never heard a cancel): a second open of the same store
/// in one process must not release the first one's locks, or another process closing its
/// connection deletes the WAL under it and the two processes stop seeing each other's writes.
#[test]
fn a_second_open_in_one_process_keeps_the_store_shared() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("vouch.db");
    let first = SqliteStore::open(&path).unwrap();
    first.create_run(&run("a")).unwrap();
    drop(SqliteStore::open(&path).unwrap());
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "other_process_reads_and_closes", "--nocapture"])
        .env("VOUCH_TEST_OTHER_PROCESS", &path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(
        dir.path().join("vouch.db-wal").exists(),
        "the other process deleted the WAL this process still writes"
    );
    first.create_run(&run("b")).unwrap();
    drop(first);
    let again = SqliteStore::open(&path).unwrap();
    assert!(
        again.run("b").unwrap().is_some(),
        "a write went to an unlinked WAL"
    );
}
