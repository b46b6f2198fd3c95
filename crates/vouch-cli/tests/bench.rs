#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The benchmarks as a user runs them: each prints its figures as JSON, checks its own work
//! (every run succeeded and every chain intact; every task accepted exactly once) and cleans up
//! after itself — on SQLite and on PostgreSQL. Counts are asserted, never times.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn vouch_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vouch"))
}

fn pg_url() -> String {
    std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn bench(pg: bool, args: &[&str]) -> Value {
    let mut c = Command::new(vouch_bin());
    c.arg("--json").arg("bench").args(args);
    c.env_remove("VOUCH_DATABASE_URL")
        .env_remove("VOUCH_DATABASE_SCHEMA");
    if pg {
        c.env("VOUCH_DATABASE_URL", pg_url());
    }
    let out = c.output().unwrap();
    assert!(
        out.status.success(),
        "vouch bench {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// Whether the throwaway schema a bench names in its output is still in the database (it
/// drops its own when it ends).
fn schema_left(v: &Value) -> bool {
    let name = v["schema"]
        .as_str()
        .unwrap_or_else(|| panic!("a PostgreSQL bench names its schema: {v}"));
    let mut c = postgres::Client::connect(&pg_url(), postgres::NoTls).unwrap();
    c.query_one(
        "SELECT count(*) FROM pg_namespace WHERE nspname = $1",
        &[&name],
    )
    .unwrap()
    .get::<_, i64>(0)
        > 0
}

fn runs(pg: bool) {
    let v = bench(pg, &["runs", "--runs", "6", "--concurrency", "2"]);
    assert_eq!(
        v["backend"],
        if pg { "postgresql" } else { "sqlite" },
        "{v}"
    );
    assert_eq!(v["runs"], 6);
    assert_eq!(
        v["concurrent_runs"], 6,
        "every concurrent run succeeded: {v}"
    );
    assert_eq!(v["chains_intact"], true);
    // 6 sequential + 6 concurrent runs, 22 events each (declare, save, receipt...).
    assert!(v["journal_events"].as_u64().unwrap() >= 12 * 10, "{v}");
    if pg {
        assert!(
            v["commits_per_run"].is_null(),
            "counted on SQLite only: {v}"
        );
        assert!(!schema_left(&v), "the throwaway schema is dropped: {v}");
    } else {
        assert!(v["schema"].is_null());
        // Born running, one commit before the save, the terminal record (§3.4.2).
        assert_eq!(v["commits_per_run"], 3.0, "{v}");
        // The floor was measured beside the runs, and the ratio taken against it.
        assert!(v["floor_runs_per_s"].as_f64().unwrap() > 0.0, "{v}");
        assert!(v["sequential_vs_floor"].as_f64().unwrap() > 0.0, "{v}");
        // In five rounds, each after a floor loop of its own.
        assert_eq!(
            v["sequential_vs_floor_rounds"].as_array().map(Vec::len),
            Some(5),
            "{v}"
        );
    }
}

fn board(pg: bool) {
    let v = bench(pg, &["board", "--tasks", "12", "--workers", "3"]);
    assert_eq!(
        v["backend"],
        if pg { "postgresql" } else { "sqlite" },
        "{v}"
    );
    assert_eq!(v["tasks"], 12);
    assert_eq!(v["exactly_once"], true, "{v}");
    assert_eq!(v["claim_errors"], 0, "{v}");
    if pg {
        assert!(!schema_left(&v), "the throwaway schema is dropped: {v}");
    } else {
        assert!(v["schema"].is_null());
    }
}

/// Issue 24 #7: three host processes on one schema share the runs; the parent counts what they
/// did together, verifies every chain and drops the schema.
fn runs_on_three_hosts() {
    let v = bench(
        true,
        &["runs", "--hosts", "3", "--runs", "9", "--concurrency", "2"],
    );
    assert_eq!(v["hosts"], 3, "{v}");
    assert_eq!(
        v["runs"], 9,
        "every sequential run of every host succeeded: {v}"
    );
    assert_eq!(v["concurrent_runs"], 9, "{v}");
    assert_eq!(v["chains_intact"], true, "{v}");
    assert!(v["journal_events"].as_u64().unwrap() >= 18 * 10, "{v}");
    assert!(!schema_left(&v), "the throwaway schema is dropped: {v}");
}

/// Three host processes drain one board: every task accepted exactly once, whoever took it.
fn board_on_three_hosts() {
    let v = bench(
        true,
        &["board", "--hosts", "3", "--tasks", "15", "--workers", "2"],
    );
    assert_eq!(v["hosts"], 3, "{v}");
    assert_eq!(v["exactly_once"], true, "{v}");
    assert_eq!(v["claim_errors"], 0, "{v}");
    let per_host: Vec<u64> = v["tasks_per_host"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_u64().unwrap())
        .collect();
    assert_eq!(per_host.len(), 3, "{v}");
    assert_eq!(
        per_host.iter().sum::<u64>(),
        15,
        "every task claimed once: {v}"
    );
    assert!(!schema_left(&v), "the throwaway schema is dropped: {v}");
}

/// `--hosts` needs a store the hosts share, and a sane count: exit 2, nothing started.
#[test]
fn bench_hosts_without_a_shared_store_or_with_zero_hosts_is_refused() {
    for (args, pg) in [
        (&["runs", "--hosts", "2"][..], false),
        (&["board", "--hosts", "2"][..], false),
        (&["runs", "--hosts", "0"][..], true),
        (&["board", "--hosts", "17"][..], true),
    ] {
        let mut c = Command::new(vouch_bin());
        c.arg("bench")
            .args(args)
            .env_remove("VOUCH_DATABASE_URL")
            .env_remove("VOUCH_DATABASE_SCHEMA");
        if pg {
            c.env("VOUCH_DATABASE_URL", pg_url());
        }
        let out = c.output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("--hosts"),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Issue 10: the runs interrupted after their first save are ended at start-up and resumed
/// several at once; the bench checks the world itself (every second file once, every first
/// file untouched) and says how many ran at once.
fn recovery() {
    let v = bench(false, &["recovery", "--runs", "24", "--concurrency", "4"]);
    assert_eq!(v["runs"], 24, "{v}");
    assert_eq!(v["concurrency"], 4, "{v}");
    assert_eq!(v["resumed_and_succeeded"], 24, "{v}");
    assert_eq!(v["runs_with_both_files"], 24, "{v}");
    // Counted, not timed: reconciling takes the lease and writes the terminal record (at
    // most two commits a run, fewer when group commits are shared).
    let per_run = v["reconcile_commits_per_run"].as_f64().unwrap();
    assert!(per_run > 0.0 && per_run <= 2.0, "{v}");
}

/// `bench cpu` does only its runs, and says how many succeeded; `bench floor` loops the
/// durable operations of a run and leaves nothing behind in the temporary folder.
#[test]
fn bench_cpu_runs_its_runs_and_bench_floor_measures_a_rate() {
    let v = bench(false, &["cpu", "--runs", "3"]);
    assert_eq!(v["runs"], 3, "{v}");
    assert_eq!(v["succeeded"], 3, "every run succeeded: {v}");
    let v = bench(false, &["floor", "--seconds", "0.2"]);
    assert!(v["floor_runs_per_s"].as_f64().unwrap() > 0.0, "{v}");
    let mut c = Command::new(vouch_bin());
    let out = c
        .args(["bench", "floor", "--seconds", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "a floor of 0 s is refused");
}

mod sqlite {
    #[test]
    fn bench_recovery_ends_resumes_and_checks_every_run() {
        super::recovery()
    }
    #[test]
    fn bench_runs_checks_its_runs_and_counts_three_commits_a_run() {
        super::runs(false)
    }
    #[test]
    fn bench_board_accepts_every_task_exactly_once() {
        super::board(false)
    }
}

mod postgresql {
    #[test]
    fn bench_runs_checks_its_runs_and_drops_its_schema() {
        super::runs(true)
    }
    #[test]
    fn bench_board_accepts_every_task_exactly_once() {
        super::board(true)
    }
    #[test]
    fn bench_runs_on_three_hosts_shares_the_runs_and_drops_its_schema() {
        super::runs_on_three_hosts()
    }
    #[test]
    fn bench_board_on_three_hosts_accepts_every_task_exactly_once() {
        super::board_on_three_hosts()
    }
}
