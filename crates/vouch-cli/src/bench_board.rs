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
    if tasks == 0 || tasks > TASKS_MAX || workers == 0 || workers > 64 {
        return Err(crate::bad(format!(
            "--tasks must be 1..={TASKS_MAX} and --workers 1..=64"
        )));
    }
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

struct Figures {
    seconds: f64,
    p50: f64,
    p99: f64,
    claim_errors: usize,
}

fn bench(dir: &std::path::Path, tasks: usize, workers: usize) -> Result<Figures> {
    let (store, board) = task::open_board(dir)?;
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
    // The host writes through the durability points, as `vouch worker`'s does.
    let mut host = home::host_on(dir, store, None)?;
    let work = Arc::new(TaskWork::new(host.work.clone()));
    host.work = work.clone();
    let host = Arc::new(host);
    let types = Arc::new(TaskTypes::builtin());
    let model = json!({"kind": "script", "turns": [
        {"declare": {"deliveries": []}}, {"submit": {"summary": "done"}}, {"final": "ok"}
    ]});
    let latencies = Arc::new(Mutex::new(Vec::with_capacity(tasks)));
    let errors = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    std::thread::scope(|s| {
        for w in 0..workers {
            let (host, work, types, board, model) = (
                host.clone(),
                work.clone(),
                types.clone(),
                board.clone(),
                model.clone(),
            );
            let (latencies, errors) = (latencies.clone(), errors.clone());
            s.spawn(move || loop {
                let t0 = Instant::now();
                let req = ClaimRequest {
                    claimant: format!("bench-{w}"),
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
                let claim = match board.claim(&req) {
                    Ok(Some(c)) => c,
                    Ok(None) => break,
                    Err(_) => {
                        errors.fetch_add(1, Ordering::Relaxed);
                        continue;
                    }
                };
                if let Ok(mut l) = latencies.lock() {
                    l.push(t0.elapsed().as_secs_f64() * 1000.0);
                }
                let at = AttemptRef {
                    task_id: claim.task.id.clone(),
                    n: claim.attempt.n,
                    claimant: claim.attempt.claimant.clone(),
                    epoch: claim.attempt.epoch,
                };
                let _ = board.heartbeat(&at, SystemClock.now_ms());
                let job = AttemptJob {
                    task_id: claim.task.id.clone(),
                    attempt: claim.attempt.n,
                    kind: claim.task.kind.clone(),
                    brief: claim.task.spec.brief.clone(),
                    input: claim.task.spec.input.clone(),
                    criteria: None,
                    model: model.clone(),
                    repairs_max: DEFAULT_REPAIRS_MAX,
                    profile: None,
                    lease: None,
                };
                let Ok(o) = host.run_task_attempt(&work, &types, &job) else {
                    errors.fetch_add(1, Ordering::Relaxed);
                    continue;
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
                if board.report(&r).is_err() {
                    errors.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    verify(&*board, tasks)?;
    let mut l = latencies
        .lock()
        .map_err(|_| anyhow!("latency lock poisoned"))?
        .clone();
    l.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| {
        l.get(((l.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    Ok(Figures {
        seconds,
        p50: pct(0.5),
        p99: pct(0.99),
        claim_errors: errors.load(Ordering::Relaxed),
    })
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
