#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 24 #1: only the process whose take-over succeeded may end a run. Start-up went on
//! reconciling a run whose take-over it had lost when the owner looked dead, so several
//! hosts on one store ended the same orphan, and a `serve` stopped on the error. Here the
//! race is made deterministic: the moment host B asks whether the run's owner still runs,
//! host A takes the run over, as the winner of the race would. On both backends.

use serde_json::json;
use std::sync::Arc;
use vouch_core::{RunState, TriggerKind};
use vouch_runtime::clock::ManualClock;
use vouch_runtime::host::{HostParts, Liveness};
use vouch_runtime::Host;
use vouch_store::{NewRun, RunLease, Store};

#[allow(dead_code)] // each test file uses part of the fake world
mod common;

const NOW_MS: i64 = 1_796_083_200_000;
const HOUR_MS: i64 = 3_600_000;

fn host(store: Arc<dyn Store>, dir: &std::path::Path, owner: &str) -> Host {
    let parts = HostParts {
        caps: Arc::new(vouch_runtime::capability::PatternCapabilities::default()),
        providers: common::FakeWorld::accepting().providers(),
        ..vouch_adapters::local::parts(dir)
    };
    let clock = Arc::new(ManualClock::new(NOW_MS, 1));
    Host::new(store, clock, owner, dir.join("drafts"), parts)
}

/// Liveness that says `gone` has exited, and at that very moment lets `winner` take the run
/// over from it: the race host B loses.
struct LostRace {
    store: Arc<dyn Store>,
    run: &'static str,
    gone: &'static str,
    winner: &'static str,
}

impl Liveness for LostRace {
    fn of(&self, owner: &str) -> Option<bool> {
        if owner != self.gone {
            return None;
        }
        let _ =
            self.store
                .take_over_run(self.run, self.gone, self.winner, NOW_MS, NOW_MS + HOUR_MS);
        Some(false)
    }
}

fn a_lost_take_over_leaves_the_run_to_the_winner(store: Arc<dyn Store>) {
    let dir = tempfile::tempdir().unwrap();
    store
        .create_run(&NewRun {
            state: RunState::Running,
            id: "orphan".into(),
            trigger: TriggerKind::Interactive,
            title: "an orphan".into(),
            chain_root: "orphan".into(),
            parent: None,
            scope: "orphan".into(),
            spec: json!({"model": {"kind": "script", "turns": []}}),
            created_ms: NOW_MS - 60_000,
            lease: Some(RunLease {
                owner: "gone:1".into(),
                until_ms: NOW_MS + HOUR_MS,
            }),
        })
        .unwrap();
    let b = host(store.clone(), dir.path(), "host-b").with_liveness(Arc::new(LostRace {
        store: store.clone(),
        run: "orphan",
        gone: "gone:1",
        winner: "host-a",
    }));
    let ended = b.boot().expect("a lost race is not an error");
    assert!(
        ended.is_empty(),
        "host b ended {ended:?}, a run it never held"
    );
    let run = store.run("orphan").unwrap().unwrap();
    assert_eq!(run.state, RunState::Running, "{run:?}");
    assert_eq!(run.owner.as_deref(), Some("host-a"), "the winner keeps it");
    assert!(
        store.receipt("orphan").unwrap().is_none(),
        "no terminal record"
    );
}

#[test]
fn a_lost_take_over_leaves_the_run_to_the_winner_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let store = vouch_store_sqlite::SqliteStore::open(&dir.path().join("vouch.db")).unwrap();
    a_lost_take_over_leaves_the_run_to_the_winner(Arc::new(store));
}

#[test]
fn a_lost_take_over_leaves_the_run_to_the_winner_on_postgresql() {
    let url = std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!(
        "vouch_ownership_{}_{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    );
    let store = vouch_store_postgres::PostgresStore::open(&url, &schema).unwrap();
    a_lost_take_over_leaves_the_run_to_the_winner(Arc::new(store));
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .unwrap();
}
