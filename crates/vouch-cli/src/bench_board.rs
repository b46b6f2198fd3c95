//! `vouch bench board`: offer → claim → run → submit → accepted, on a temporary home (SQLite,
//! or PostgreSQL when `VOUCH_DATABASE_URL` is set, in a throwaway schema), with W worker
//! threads racing. Prints tasks per second, claim latency percentiles, and checks that every
//! task was accepted exactly once.

use crate::{home, task};
use anyhow::{anyhow, bail, Result};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use vouch_core::board::DEFAULT_REPAIRS_MAX;
use vouch_runtime::clock::{Clock, SystemClock};
use vouch_runtime::host::{AttemptJob, TaskTypes, TaskWork};
use vouch_store::board::{
    AttemptRef, BoardStore, ClaimRequest, Cohort, MeasuresQuery, NewTask, Report, ReportKind,
    TaskSpec,
};

/// Tasks a bench offers at most.
const TASKS_MAX: usize = 1_000_000;

pub fn board(tasks: usize, workers: usize, json_out: bool) -> Result<i32> {
    check_sizes(tasks, workers)?;
    let tmp = std::env::temp_dir().join(format!("vouch-bench-board-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let pg = home::database_url().is_some();
    let schema = format!("vouch_bench_board_{}", std::process::id());
    if pg {
        std::env::set_var("VOUCH_DATABASE_SCHEMA", &schema);
    }
    home::init(&tmp)?;
    let out = bench(&tmp, tasks, workers);
    let _ = std::fs::remove_dir_all(&tmp);
    if let (true, Some((url, _))) = (pg, home::database_url()) {
        if let Ok(mut c) = postgres::Client::connect(&url, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
        }
    }
    let r = out?;
    let backend = if pg { "postgresql" } else { "sqlite" };
    if json_out {
        outln!(
            "{}",
            json!({"backend": backend, "schema": pg.then_some(schema.as_str()), "tasks": tasks, "workers": workers, "seconds": r.seconds,
                   "tasks_per_s": tasks as f64 / r.seconds, "claim_p50_ms": r.p50, "claim_p99_ms": r.p99,
                   "claim_errors": r.claim_errors, "exactly_once": true})
        );
    } else {
        outln!(
            "{tasks} tasks, {workers} workers on {backend}: {:.1} s, {:.0} tasks/s accepted exactly once; claim latency p50 {:.2} ms, p99 {:.2} ms; {} claim errors",
            r.seconds,
            tasks as f64 / r.seconds,
            r.p50,
            r.p99,
            r.claim_errors
        );
    }
    Ok(0)
}

/// `vouch bench board --hosts N` (PostgreSQL): the tasks are offered once on a fresh schema,
/// then N host processes of this binary, `workers` threads each, claim and run them all.
pub fn board_hosts(tasks: usize, workers: usize, hosts: usize, json_out: bool) -> Result<i32> {
    check_sizes(tasks, workers)?;
    crate::bench_hosts::check(hosts)?;
    let tmp = std::env::temp_dir().join(format!("vouch-bench-board-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let schema = format!("vouch_bench_board_{}", std::process::id());
    std::env::set_var("VOUCH_DATABASE_SCHEMA", &schema);
    home::init(&tmp)?;
    let out = bench_hosts(&tmp, tasks, workers, hosts);
    let _ = std::fs::remove_dir_all(&tmp);
    drop_schema(&schema);
    let (r, per_host) = out?;
    let rate = tasks as f64 / r.seconds;
    if json_out {
        outln!(
            "{}",
            json!({"backend": "postgresql", "schema": schema, "hosts": hosts, "tasks": tasks,
                   "workers_per_host": workers, "seconds": r.seconds, "tasks_per_s": rate,
                   "tasks_per_host": per_host, "claim_p50_ms": r.p50, "claim_p99_ms": r.p99,
                   "claim_errors": r.claim_errors, "exactly_once": true})
        );
    } else {
        outln!(
            "{tasks} tasks, {hosts} hosts × {workers} workers on postgresql: {:.1} s, {rate:.0} tasks/s accepted exactly once (per host {per_host:?}); claim latency p50 {:.2} ms, p99 {:.2} ms; {} claim errors",
            r.seconds, r.p50, r.p99, r.claim_errors
        );
    }
    Ok(0)
}

fn bench_hosts(
    dir: &std::path::Path,
    tasks: usize,
    workers: usize,
    hosts: usize,
) -> Result<(Figures, Vec<usize>)> {
    let (_store, board) = task::open_board(dir)?;
    offer_all(&*board, tasks)?;
    let mut h = crate::bench_hosts::Hosts::start(hosts, |k| {
        [
            "bench",
            "board",
            "--tasks",
            &tasks.to_string(),
            "--workers",
            &workers.to_string(),
            "--part",
            &k.to_string(),
        ]
        .map(String::from)
        .to_vec()
    })?;
    let (seconds, lines) = h.phase("work")?;
    h.finish()?;
    verify(&*board, tasks)?;
    let latencies: Vec<f64> = lines
        .iter()
        .filter_map(|l| l["latencies"].as_array())
        .flatten()
        .filter_map(|v| v.as_f64())
        .collect();
    let errors = crate::bench_hosts::numbers(&lines, "claim_errors")
        .iter()
        .sum::<f64>() as usize;
    let per_host = crate::bench_hosts::numbers(&lines, "claims")
        .iter()
        .map(|n| *n as usize)
        .collect();
    Ok((figures(seconds, latencies, errors), per_host))
}

/// One host of `bench board --hosts`: its own home on the shared schema, `workers` threads.
pub fn board_part(workers: usize, part: usize) -> Result<i32> {
    let dir = crate::bench_hosts::own_home("board", part)?;
    let r = (|| -> Result<Worked> {
        let (store, board) = task::open_board(&dir)?;
        crate::bench_hosts::say(&json!({"ready": part}));
        crate::bench_hosts::wait_for("work")?;
        work(&dir, store, board, workers)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    match r {
        Ok(w) => {
            crate::bench_hosts::say(
                &json!({"claims": w.claims, "latencies": w.latencies, "claim_errors": w.errors}),
            );
            Ok(0)
        }
        Err(e) => {
            crate::bench_hosts::say(&json!({"error": format!("{e:#}")}));
            Ok(1)
        }
    }
}

fn check_sizes(tasks: usize, workers: usize) -> Result<()> {
    if tasks == 0 || tasks > TASKS_MAX || workers == 0 || workers > 64 {
        return Err(crate::bad(format!(
            "--tasks must be 1..={TASKS_MAX} and --workers 1..=64"
        )));
    }
    Ok(())
}

fn drop_schema(schema: &str) {
    if let Some((url, _)) = home::database_url() {
        if let Ok(mut c) = postgres::Client::connect(&url, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
        }
    }
}

struct Figures {
    seconds: f64,
    p50: f64,
    p99: f64,
    claim_errors: usize,
}

fn bench(dir: &std::path::Path, tasks: usize, workers: usize) -> Result<Figures> {
    let (store, board) = task::open_board(dir)?;
    offer_all(&*board, tasks)?;
    let started = Instant::now();
    let w = work(dir, store, board.clone(), workers)?;
    let seconds = started.elapsed().as_secs_f64();
    verify(&*board, tasks)?;
    Ok(figures(seconds, w.latencies, w.errors))
}

/// The figures of a bench from its claim latencies (ms) and errors.
fn figures(seconds: f64, mut l: Vec<f64>, claim_errors: usize) -> Figures {
    l.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| {
        l.get(((l.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    Figures {
        seconds,
        p50: pct(0.5),
        p99: pct(0.99),
        claim_errors,
    }
}

/// Offer `tasks` freeform tasks of one attempt each.
fn offer_all(board: &dyn BoardStore, tasks: usize) -> Result<()> {
    let clock = SystemClock;
    let spec = TaskSpec {
        context: vec![],
        input_artifacts: vec![],
        brief: "bench".into(),
        input: json!({"brief": "bench"}),
        correlation: String::new(),
        criteria: None,
        references: vec![],
        lease_ms: 300_000,
        heartbeat_ms: 60_000,
        dispatch_timeout_ms: 300_000,
        running_timeout_ms: 7_200_000,
    };
    for i in 0..tasks {
        board
            .offer(&NewTask {
                id: format!("bench-{i:07}"),
                kind: "freeform".into(),
                owner: "bench".into(),
                max_attempts: 1,
                deadline_ms: None,
                profiles: vec![],
                tags: vec![],
                excluded_claimant: None,
                condition: None,
                idempotency_key: None,
                request_id: format!("sha256:{i}"),
                spec: spec.clone(),
                created_ms: clock.now_ms(),
            })
            .map_err(|e| anyhow!("{e}"))?;
    }
    Ok(())
}

/// What the workers of one process saw.
struct Worked {
    /// Claims that got a task.
    claims: usize,
    /// Claim latencies, milliseconds.
    latencies: Vec<f64>,
    errors: usize,
}

/// `workers` threads claim, run and report until the board has nothing left for them.
fn work(
    dir: &std::path::Path,
    store: Arc<dyn vouch_store::Store>,
    board: Arc<dyn BoardStore>,
    workers: usize,
) -> Result<Worked> {
    // The host writes through the durability points, as `vouch worker`'s does.
    let host = home::host_on(dir, store, None)?;
    let work = Arc::new(TaskWork::new(host.work().clone()));
    let host = Arc::new(host.with_work(work.clone()));
    let types = Arc::new(TaskTypes::builtin());
    let model = json!({"kind": "script", "turns": [
        {"declare": {"deliveries": []}}, {"submit": {"summary": "done"}}, {"final": "ok"}
    ]});
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let errors = Arc::new(AtomicUsize::new(0));
    let prefix = std::env::var("VOUCH_HOST_ID").unwrap_or_else(|_| "bench".into());
    std::thread::scope(|s| {
        for w in 0..workers {
            let worker = Worker {
                claimant: format!("{prefix}-{w}"),
                host: &host,
                work: &work,
                types: &types,
                board: &*board,
                model: &model,
                latencies: &latencies,
                errors: &errors,
            };
            s.spawn(move || worker.run());
        }
    });
    let latencies = latencies
        .lock()
        .map_err(|_| anyhow!("latency lock poisoned"))?
        .clone();
    Ok(Worked {
        claims: latencies.len(),
        latencies,
        errors: errors.load(Ordering::Relaxed),
    })
}

/// One worker thread of a bench.
struct Worker<'a> {
    claimant: String,
    host: &'a vouch_runtime::host::Host,
    work: &'a Arc<TaskWork>,
    types: &'a TaskTypes,
    board: &'a dyn BoardStore,
    model: &'a serde_json::Value,
    latencies: &'a Mutex<Vec<f64>>,
    errors: &'a AtomicUsize,
}

impl Worker<'_> {
    fn run(&self) {
        loop {
            let t0 = Instant::now();
            let req = ClaimRequest {
                claimant: self.claimant.clone(),
                profile: "default".into(),
                model: Some("script".into()),
                policy_fingerprint: "sha256:bench".into(),
                types: vec![],
                tags: vec![],
                task_id: None,
                signature: None,
                nonce: None,
                policy: json!({}),
                now_ms: SystemClock.now_ms(),
                run_id: None,
            };
            let claim = match self.board.claim(&req) {
                Ok(Some(c)) => c,
                Ok(None) => break,
                Err(_) => {
                    self.errors.fetch_add(1, Ordering::Relaxed);
                    continue;
                }
            };
            if let Ok(mut l) = self.latencies.lock() {
                l.push(t0.elapsed().as_secs_f64() * 1000.0);
            }
            self.attempt(claim);
        }
    }

    /// Run a claimed attempt as a vouch run and report it.
    fn attempt(&self, claim: vouch_store::board::Claim) {
        let at = AttemptRef {
            task_id: claim.task.id.clone(),
            n: claim.attempt.n,
            claimant: claim.attempt.claimant.clone(),
            epoch: claim.attempt.epoch,
        };
        let _ = self.board.heartbeat(&at, SystemClock.now_ms());
        let job = AttemptJob {
            task_id: claim.task.id.clone(),
            attempt: claim.attempt.n,
            kind: claim.task.kind.clone(),
            brief: claim.task.spec.brief.clone(),
            input: claim.task.spec.input.clone(),
            criteria: None,
            model: self.model.clone(),
            repairs_max: DEFAULT_REPAIRS_MAX,
            profile: None,
            lease: None,
        };
        let Ok(o) = self.host.run_task_attempt(self.work, self.types, &job) else {
            self.errors.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let kind = o.report.unwrap_or(ReportKind::Failed {
            retryable: false,
            reason: "suspended".into(),
            class: None,
        });
        let r = Report {
            attempt: at,
            kind,
            run_id: Some(o.run_id),
            receipt: o.receipt,
            usage: o.usage,
            signature: None,
            stamp: None,
            now_ms: SystemClock.now_ms(),
        };
        if self.board.report(&r).is_err() {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Every task completed on attempt 1 with one attempt: counted by the store in SQL.
fn verify(board: &dyn BoardStore, tasks: usize) -> Result<()> {
    let rows = board
        .measures(&MeasuresQuery {
            by: Cohort::All,
            since_ms: i64::MIN,
            friction_turns: 8,
            friction_failed_tools: 3,
            correlation: None,
        })
        .map_err(|e| anyhow!("{e}"))?;
    let n = tasks as i64;
    match rows.as_slice() {
        [m] if m.tasks == n
            && m.accepted == n
            && m.first_attempt_accepted == n
            && m.attempts == n =>
        {
            Ok(())
        }
        other => bail!("not every task was accepted exactly once: {other:?}"),
    }
}
