//! The shared store suite against a real PostgreSQL, plus the rules only this backend's schema
//! enforces. Each test works in a fresh schema `vouch_test_<pid>_<n>_<nanos>`, dropped at the
//! end. The server comes from `VOUCH_PG_URL` (default: postgres://postgres@127.0.0.1:5432/test);
//! an unreachable server fails the tests, it does not skip them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use postgres::{Client, NoTls};
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use vouch_core::{EndedBy, Outcome, TriggerKind};
use vouch_store::{EventKind, NewEvent, NewRun, Store, StoreError, Terminal};
use vouch_store_postgres::{PostgresStore, SCHEMA_VERSION};

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

fn url() -> String {
    std::env::var("VOUCH_PG_URL").unwrap_or_else(|_| DEFAULT_URL.to_string())
}

/// The URL without its password, for messages.
fn shown_url() -> String {
    let url = url();
    match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if scheme + 3 < at => {
            let user = &url[scheme + 3..at];
            match user.find(':') {
                Some(colon) => format!("{}:***{}", &url[..scheme + 3 + colon], &url[at..]),
                None => url,
            }
        }
        _ => url,
    }
}

fn admin() -> Client {
    Client::connect(&url(), NoTls).unwrap_or_else(|e| {
        panic!(
            "cannot reach PostgreSQL at {} ({e}). These tests need a running server: start one \
             (trust auth on 127.0.0.1:5432, database `test`) or set VOUCH_PG_URL",
            shown_url()
        )
    })
}

/// A fresh schema, dropped (with everything in it) when the test ends, pass or fail.
struct TestSchema {
    name: String,
}

impl TestSchema {
    fn new() -> TestSchema {
        static N: AtomicU32 = AtomicU32::new(0);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let name = format!(
            "vouch_test_{}_{}_{nanos}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        admin(); // fail early and clearly if the server is down
        TestSchema { name }
    }

    fn open(&self) -> PostgresStore {
        PostgresStore::open(&url(), &self.name)
            .unwrap_or_else(|e| panic!("open the store in schema {}: {e}", self.name))
    }

    /// A raw connection inside the schema, to do what the store never would.
    fn raw(&self) -> Client {
        let mut c = admin();
        c.batch_execute(&format!("SET search_path TO {}", self.name))
            .unwrap();
        c
    }
}

impl Drop for TestSchema {
    fn drop(&mut self) {
        if let Ok(mut c) = Client::connect(&url(), NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
        }
    }
}

fn new_run(id: &str) -> NewRun {
    NewRun {
        state: vouch_core::RunState::Created,
        id: id.into(),
        trigger: TriggerKind::Interactive,
        title: format!("run {id}"),
        chain_root: id.into(),
        parent: None,
        scope: id.into(),
        spec: json!({}),
        created_ms: 1,
        lease: None,
    }
}

fn terminal() -> Terminal {
    Terminal {
        outcome: Outcome::Succeeded,
        ended_by: EndedBy::Loop,
        receipt: "r".into(),
        body: json!({}).into(),
        at_ms: 9,
        outbox: None,
    }
}

fn sqlstate(e: &postgres::Error) -> String {
    e.code().map(|c| c.code().to_string()).unwrap_or_default()
}

/// A fresh schema: the guard (dropped with the test) and an opener over it.
fn fresh<T: ?Sized>(as_dyn: fn(PostgresStore) -> Arc<T>) -> (Arc<TestSchema>, impl Fn() -> Arc<T>) {
    let schema = Arc::new(TestSchema::new());
    let s = schema.clone();
    (schema, move || as_dyn(s.open()))
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
    let schema = TestSchema::new();
    let open = || -> Arc<dyn vouch_store::board::BoardStore> { Arc::new(schema.open()) };
    vouch_store::board_conformance::heartbeat_report_and_late_words(&open);
    // The schema itself refuses to rewrite an ended attempt, whoever writes.
    let mut c = admin();
    let err = c
        .execute(
            &format!(
                "UPDATE {}.task_attempts SET state = 'running' WHERE task_id = 'h-1' AND n = 1",
                schema.name
            ),
            &[],
        )
        .unwrap_err();
    assert!(
        err.to_string().contains("an ended attempt never changes")
            || format!("{err:?}").contains("an ended attempt never changes"),
        "{err:?}"
    );
}

#[test]
fn the_schema_keeps_the_journal_append_only_and_closed() {
    let schema = TestSchema::new();
    let s = schema.open();
    s.create_run(&new_run("r1")).unwrap();
    let first = s
        .append(
            "r1",
            &NewEvent::new(EventKind::ToolCalled, 1, json!({"a": 1})),
        )
        .unwrap();
    let mut c = schema.raw();
    let update = c.execute("UPDATE journal SET body = '{}' WHERE run_id = 'r1'", &[]);
    assert_eq!(sqlstate(&update.unwrap_err()), "VJ001");
    let delete = c.execute("DELETE FROM journal WHERE run_id = 'r1'", &[]);
    assert_eq!(sqlstate(&delete.unwrap_err()), "VJ001");
    let truncate = c.batch_execute("TRUNCATE journal");
    assert_eq!(sqlstate(&truncate.unwrap_err()), "VJ001");
    // An insert that does not extend the chain (a gap, or a wrong prev_hash) is refused.
    let insert = "INSERT INTO journal (run_id, seq, kind, delivery, body, at_ms, prev_hash, hash) VALUES ('r1', $1, $2, NULL, '{}', 1, $3, 'x')";
    let gap = c.execute(insert, &[&3i64, &"turn", &first.hash]);
    assert_eq!(sqlstate(&gap.unwrap_err()), "VJ003");
    let fork = c.execute(insert, &[&2i64, &"turn", &"0".repeat(64)]);
    assert_eq!(sqlstate(&fork.unwrap_err()), "VJ003");
    // After the terminal event nothing more goes in, not even through SQL.
    let vouch_store::EndResult::Ended(t) = s.end_run("r1", &terminal()).unwrap() else {
        panic!("the first end_run ends the run");
    };
    let after = c.execute(insert, &[&3i64, &"terminal", &t.hash]);
    assert_eq!(sqlstate(&after.unwrap_err()), "VJ002");
    assert_eq!(s.journal("r1").unwrap().len(), 2);
    assert!(s.verify().unwrap().breaks.is_empty());
}

#[test]
fn one_terminal_per_run_is_a_unique_index() {
    let schema = TestSchema::new();
    let _s = schema.open();
    let mut c = schema.raw();
    let def: String = c
        .query_one(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = current_schema() AND indexname = 'journal_one_terminal'",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(def.contains("UNIQUE") && def.contains("terminal"), "{def}");
}

#[test]
fn migrations_are_recorded_and_forward_only() {
    let schema = TestSchema::new();
    drop(schema.open());
    drop(schema.open()); // reopening applies nothing twice
    let mut c = schema.raw();
    let versions: Vec<i32> = c
        .query("SELECT version FROM vouch_migrations ORDER BY version", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, (1..=SCHEMA_VERSION as i32).collect::<Vec<_>>());
    c.execute("INSERT INTO vouch_migrations (version) VALUES (999)", &[])
        .unwrap();
    match PostgresStore::open(&url(), &schema.name) {
        Err(StoreError::Fatal(m)) => assert!(m.contains("newer vouch"), "{m}"),
        other => panic!("a newer schema must be refused, got {:?}", other.err()),
    }
}

#[test]
fn a_schema_of_another_program_is_refused() {
    let schema = TestSchema::new();
    let mut c = admin();
    c.batch_execute(&format!(
        "CREATE SCHEMA {0}; CREATE TABLE {0}.customers (id int)",
        schema.name
    ))
    .unwrap();
    assert!(matches!(
        PostgresStore::open(&url(), &schema.name),
        Err(StoreError::Corrupt(_))
    ));
}

#[test]
fn bad_schema_names_and_urls_are_refused_before_connecting() {
    for bad in ["", "Public", "a;drop", "pg_catalog"] {
        assert!(matches!(
            PostgresStore::open(&url(), bad),
            Err(StoreError::Fatal(_))
        ));
    }
    assert!(matches!(
        PostgresStore::open("postgres://x@[::1", "vouch"),
        Err(StoreError::Fatal(_))
    ));
}

#[test]
fn an_unreachable_server_is_retryable() {
    match PostgresStore::open(
        "postgres://postgres@127.0.0.1:1/test?connect_timeout=2",
        "vouch",
    ) {
        Err(StoreError::Retryable(m)) => assert!(m.contains("127.0.0.1:1"), "{m}"),
        other => panic!("expected Retryable, got {:?}", other.err()),
    }
}

#[test]
fn unreadable_rows_are_corrupt_not_panics() {
    let schema = TestSchema::new();
    let s = schema.open();
    s.create_run(&new_run("r1")).unwrap();
    s.append("r1", &NewEvent::new(EventKind::ToolCalled, 1, json!({})))
        .unwrap();
    let mut c = schema.raw();
    c.execute("UPDATE runs SET state = 'bogus' WHERE id = 'r1'", &[])
        .unwrap();
    assert!(matches!(s.run("r1"), Err(StoreError::Corrupt(_))));
    c.execute(
        "UPDATE runs SET state = 'created', spec = 'not json' WHERE id = 'r1'",
        &[],
    )
    .unwrap();
    assert!(matches!(s.runs(10), Err(StoreError::Corrupt(_))));
    // A journal row that extends the chain but does not parse: reads say Corrupt, verify
    // reports it as a break instead of failing.
    let last: String = c
        .query_one(
            "SELECT hash FROM journal WHERE run_id = 'r1' AND seq = 1",
            &[],
        )
        .unwrap()
        .get(0);
    c.execute(
        "INSERT INTO journal (run_id, seq, kind, delivery, body, at_ms, prev_hash, hash) VALUES ('r1', 2, 'no_such_kind', NULL, '{', 1, $1, 'x')",
        &[&last],
    )
    .unwrap();
    assert!(matches!(s.journal("r1"), Err(StoreError::Corrupt(_))));
    let report = s.verify().unwrap();
    assert_eq!(report.breaks.len(), 1);
    assert_eq!(
        (report.breaks[0].run_id.as_str(), report.breaks[0].seq),
        ("r1", 2)
    );
}

#[test]
fn concurrent_card_openers_supersede_instead_of_colliding() {
    let schema = TestSchema::new();
    let s = Arc::new(schema.open());
    s.create_run(&new_run("r1")).unwrap();
    std::thread::scope(|scope| {
        for t in 0..8 {
            let s = s.clone();
            scope.spawn(move || {
                for n in 0..10 {
                    let card = vouch_store::Card {
                        run_id: "r1".into(),
                        delivery: Some("d1".into()),
                        payload_hash: format!("h{t}-{n}"),
                        summary: "s".into(),
                        state: vouch_store::CardState::Open,
                        created_ms: 1,
                        decided_ms: None,
                        answer: None,
                        reason: String::new(),
                    };
                    s.open_card(&card).unwrap();
                }
            });
        }
    });
    let cards = s.cards_for_run("r1").unwrap();
    assert_eq!(cards.len(), 80);
    let open = cards
        .iter()
        .filter(|c| c.state == vouch_store::CardState::Open)
        .count();
    assert_eq!(open, 1);
}

#[test]
fn appends_to_a_missing_or_ended_run() {
    let schema = TestSchema::new();
    let s = schema.open();
    assert!(matches!(
        s.append("nope", &NewEvent::new(EventKind::ToolCalled, 1, json!({}))),
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        s.end_run("nope", &terminal()),
        Err(StoreError::NotFound { .. })
    ));
    assert!(matches!(
        s.consume_slot("sch", 1, &new_run("sch-1")),
        Ok(true)
    ));
    // The run id of a refused slot is free again: nothing of it was kept.
    assert!(matches!(
        s.consume_slot("sch", 1, &new_run("sch-2")),
        Ok(false)
    ));
    s.create_run(&new_run("sch-2")).unwrap();
}

#[test]
fn text_postgresql_cannot_hold_is_refused_as_a_conflict() {
    let schema = TestSchema::new();
    let s = schema.open();
    let mut run = new_run("r-nul");
    run.title = "a\0b".into();
    assert!(matches!(s.create_run(&run), Err(StoreError::Conflict(_))));
    assert!(s.run("r-nul").unwrap().is_none());
    // NUL inside JSON bodies is fine: it is stored escaped.
    s.create_run(&new_run("r-ok")).unwrap();
    let e = s
        .append(
            "r-ok",
            &NewEvent::new(EventKind::ToolCalled, 1, json!({"t": "a\0b"})),
        )
        .unwrap();
    assert_eq!(s.journal("r-ok").unwrap(), vec![e]);
}

/// Each pooled connection keeps the statements it prepared; a transaction that fails after
/// preparing them (and is rolled back) must leave them usable — PostgreSQL's prepared
/// statements belong to the session, not the transaction. One connection, so every call
/// below meets the statements the earlier ones prepared.
#[test]
fn prepared_statements_outlive_a_rolled_back_transaction() {
    let schema = TestSchema::new();
    let options = vouch_store_postgres::PostgresOptions {
        connections_max: 1,
        ..Default::default()
    };
    let s = PostgresStore::open_with(&url(), &schema.name, options).unwrap();
    s.create_run(&new_run("p1")).unwrap();
    let ev = |n: i64| NewEvent::new(EventKind::ToolCalled, n, json!({"n": n}));
    s.append("p1", &ev(1)).unwrap();
    // Prepared, then rolled back: the run is missing (lock), and ended (insert refused).
    assert!(matches!(
        s.append("nope", &ev(2)),
        Err(StoreError::NotFound { .. })
    ));
    s.end_run("p1", &terminal()).unwrap();
    assert!(s.append("p1", &ev(3)).is_err());
    s.create_run(&new_run("p2")).unwrap();
    s.append_batch("p2", &[ev(4), ev(5)]).unwrap();
    let j = s.journal("p2").unwrap();
    assert_eq!(j.iter().map(|e| e.seq).collect::<Vec<_>>(), vec![1, 2]);
    assert_eq!(
        j[1].prev_hash, j[0].hash,
        "the chain goes on across the batch"
    );
    let report = s.verify().unwrap();
    assert!(
        report.breaks.is_empty() && report.damage.is_empty(),
        "{report:?}"
    );
}

#[test]
fn a_small_pool_still_serves_many_threads() {
    let schema = TestSchema::new();
    let options = vouch_store_postgres::PostgresOptions {
        connections_max: 2,
        ..Default::default()
    };
    let s = Arc::new(PostgresStore::open_with(&url(), &schema.name, options).unwrap());
    s.create_run(&new_run("r1")).unwrap();
    std::thread::scope(|scope| {
        for _ in 0..6 {
            let s = s.clone();
            scope.spawn(move || {
                for n in 0..10 {
                    s.append("r1", &NewEvent::new(EventKind::ToolCalled, n, json!({})))
                        .unwrap();
                }
            });
        }
    });
    let j = s.journal("r1").unwrap();
    assert_eq!(j.len(), 60);
    assert!(vouch_store::verify_chain(&j).is_ok());
}

#[test]
fn the_schema_keeps_identities_immutable_and_the_diary_append_only() {
    use vouch_store::{DiaryEntry, IdentityRecord, IdentityStore, GENESIS_HASH};
    let schema = TestSchema::new();
    let s = schema.open();
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
    let mut raw = schema.raw();
    for (sql, state) in [
        ("UPDATE diary SET body = '{}' WHERE identity = 'w'", "VJ001"),
        ("DELETE FROM diary WHERE identity = 'w'", "VJ001"),
        ("TRUNCATE diary", "VJ001"),
        (
            "UPDATE identities SET public_key = 'x' WHERE name = 'w'",
            "VJ001",
        ),
        ("DELETE FROM identities WHERE name = 'w'", "VJ001"),
        (
            "INSERT INTO diary VALUES ('w', 3, 1, '{}', 'x', 'y', 'z')",
            "VJ003",
        ),
    ] {
        let e = raw.batch_execute(sql).expect_err(sql);
        assert_eq!(sqlstate(&e), state, "{sql}: {e}");
    }
}

/// §8.2: the ledger follows its state machine for generated sequences of intents and
/// outcomes (each case in its own key space of one store).
#[test]
fn the_ledger_follows_its_state_machine_for_any_sequence() {
    use proptest::prelude::*;
    use vouch_store::conformance::{ledger_follows_its_state_machine, LedgerOp};
    use vouch_store::LedgerState;
    let schema = TestSchema::new();
    let store = schema.open();
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

/// Two stores on one schema (two processes) append to the same run and end it in turns:
/// each one's remembered tail is stale after the other wrote, so its one-statement append is
/// refused by the chain trigger and done again under the run's lock — the chain stays whole
/// and nothing is written twice.
#[test]
fn two_writers_with_stale_tails_keep_one_chain() {
    let schema = TestSchema::new();
    let a = PostgresStore::open(&url(), &schema.name).unwrap();
    let b = PostgresStore::open(&url(), &schema.name).unwrap();
    a.create_run(&new_run("t1")).unwrap();
    for n in 0..10 {
        let w = if n % 2 == 0 { &a } else { &b };
        let batch = [
            NewEvent::new(EventKind::ToolCalled, n, json!({"n": n})),
            NewEvent::new(EventKind::ToolCalled, n, json!({"n": n, "second": true})),
        ];
        let written = w.append_batch("t1", &batch).unwrap();
        assert_eq!(written.len(), 2);
        assert_eq!(written[1].seq, 2 * n + 2);
    }
    let terminal = Terminal {
        outcome: Outcome::Succeeded,
        ended_by: EndedBy::Loop,
        receipt: "done".into(),
        body: json!({}).into(),
        at_ms: 99,
        outbox: None,
    };
    // `a` last wrote seq 18; `b` wrote 20 since: `a`'s end is refused, then done carefully.
    assert!(matches!(
        a.end_run_after("t1", &[NewEvent::new(EventKind::Turn, 98, json!({}))], &terminal)
            .unwrap(),
        vouch_store::EndResult::Ended(e) if e.seq == 22
    ));
    assert!(matches!(
        b.end_run("t1", &terminal).unwrap(),
        vouch_store::EndResult::AlreadyEnded
    ));
    assert!(b
        .append("t1", &NewEvent::new(EventKind::Turn, 100, json!({})))
        .is_err());
    let j = a.journal("t1").unwrap();
    assert_eq!(j.len(), 22);
    assert!(vouch_store::verify_chain(&j).is_ok());
    assert_eq!(a.receipt("t1").unwrap().as_deref(), Some("done"));
}
