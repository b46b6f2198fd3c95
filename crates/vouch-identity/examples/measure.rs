//! Measures what identities cost (docs/performance.md, "Identities"): signing and verifying
//! a report-sized statement, and durable signed diary appends on SQLite (and on PostgreSQL
//! when `VOUCH_PG_URL` or the default local server is reachable).
//!
//! `cargo run --release -p vouch-identity --example measure -- [SECONDS]`
#![allow(clippy::unwrap_used, clippy::expect_used)]

use serde_json::json;
use std::sync::Arc;
use std::time::{Duration, Instant};
use vouch_identity::{diary, verify, Identity};
use vouch_store::IdentityStore;

fn rate(n: u64, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64()
}

fn timed(seconds: f64, mut f: impl FnMut()) -> (u64, Duration) {
    let start = Instant::now();
    let mut n = 0;
    while start.elapsed().as_secs_f64() < seconds {
        f();
        n += 1;
    }
    (n, start.elapsed())
}

fn diary_appends(store: Arc<dyn IdentityStore>, writers: usize, seconds: f64) -> f64 {
    let start = Instant::now();
    let total: u64 = std::thread::scope(|s| {
        let handles: Vec<_> = (0..writers)
            .map(|w| {
                let store = store.clone();
                s.spawn(move || {
                    let name = format!("m{writers}-{w}-{}", std::process::id());
                    let id = Identity::generate(&name).unwrap();
                    store.put_identity(&id.record(0)).unwrap();
                    let (n, _) = timed(seconds, || {
                        diary::append(
                            store.as_ref(),
                            &id,
                            &json!({"kind": "report", "task": "t", "n": 1}),
                            1,
                        )
                        .unwrap();
                    });
                    let entries = store.diary(&name).unwrap();
                    assert_eq!(
                        diary::verify(&name, &id.public_key(), &entries),
                        Ok(n as usize)
                    );
                    n
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).sum()
    });
    rate(total, start.elapsed())
}

fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(3.0);
    let id = Identity::generate("bench").unwrap();
    let report = json!({
        "task": "01a23d0898677367a607", "attempt": 3, "output": format!("sha256:{}", "ab".repeat(32)),
        "self_assessment": {"criteria": [{"name": "complete", "met": true}]}, "at_ms": 1_796_320_200_000i64,
    });
    let sig = id.sign(&report).unwrap();
    let (n, d) = timed(seconds, || {
        id.sign(&report).unwrap();
    });
    println!("sign (canonical form + Ed25519):   {:>9.0} /s", rate(n, d));
    let pk = id.public_key();
    let (n, d) = timed(seconds, || {
        verify(&pk, &report, &sig).unwrap();
    });
    println!("verify (canonical form + strict):  {:>9.0} /s", rate(n, d));

    let dir = tempfile::tempdir_in(std::env::current_dir().unwrap()).unwrap();
    let sqlite: Arc<dyn IdentityStore> =
        Arc::new(vouch_store_sqlite::SqliteStore::open(&dir.path().join("vouch.db")).unwrap());
    for writers in [1, 4] {
        println!(
            "diary appends, SQLite, {writers} identit{}: {:>7.0} /s (durable, signed, verified after)",
            if writers == 1 { "y  " } else { "ies" },
            diary_appends(sqlite.clone(), writers, seconds)
        );
    }
    let url = std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!("vouch_test_measure_{}", std::process::id());
    match vouch_store_postgres::PostgresStore::open(&url, &schema) {
        Ok(pg) => {
            let pg: Arc<dyn IdentityStore> = Arc::new(pg);
            for writers in [1, 4] {
                println!(
                    "diary appends, PostgreSQL, {writers} identit{}: {:>7.0} /s",
                    if writers == 1 { "y  " } else { "ies" },
                    diary_appends(pg.clone(), writers, seconds)
                );
            }
            drop(pg);
            if let Ok(mut c) = postgres::Client::connect(&url, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
            }
        }
        Err(e) => println!("PostgreSQL not measured: {e}"),
    }
}
