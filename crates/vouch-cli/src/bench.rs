//! `vouch bench runs`: scripted runs with one durable save each, on the embedded store,
//! sequentially and N at once. Prints runs per second for comparison with the peers of
//! `shared/bench/peers` (DBOS and LangGraph 3-step durable workflows) measured beside it.

use crate::home;
use anyhow::{anyhow, Result};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use vouch_core::TriggerKind;
use vouch_runtime::RunSpec;

fn spec(i: usize) -> RunSpec {
    RunSpec {
        trigger: TriggerKind::Interactive,
        title: format!("bench run {i}"),
        presence: None,
        quiet: false,
        model: json!({"kind": "script", "turns": [
            {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": format!("bench/{i}.md")}}]}},
            {"deliver": "d1", "payload": {"text": format!("run {i}\n")}}
        ]}).into(),
        scope: None,
    }
}

/// Did the run end `succeeded`?
fn succeeded(end: &vouch_runtime::RunEnd) -> bool {
    matches!(
        end,
        vouch_runtime::RunEnd::Ended {
            outcome: vouch_core::Outcome::Succeeded
        }
    )
}

/// Seconds of the SQLite one-row commit loop measured beside the runs.
const COMMIT_LOOP_SECONDS: f64 = 2.0;
/// Seconds of the floor loop (`vouch_bench::floor_runs_per_s`) measured beside the runs, in
/// all: split between the rounds of the sequential phase.
const FLOOR_SECONDS: f64 = 2.0;
/// Rounds of the sequential phase on SQLite: each a floor loop then a share of the runs, so
/// that the floor and the runs meet the same disk (a shared disk's rate drifts by 2–3× within
/// a minute, which made one floor loop after the runs a poor yardstick).
const FLOOR_ROUNDS: usize = 5;

/// `vouch bench floor`: the durable operations of a one-save run with no host logic, looped
/// for `seconds` in the temporary folder (where `bench runs` keeps its home).
pub fn floor(seconds: f64, json_out: bool) -> Result<i32> {
    let rate = vouch_bench::floor_runs_per_s(&std::env::temp_dir(), seconds)
        .map_err(|e| crate::bad(format!("--seconds: {e:#}")))?;
    if json_out {
        outln!("{}", json!({"seconds": seconds, "floor_runs_per_s": rate}));
    } else {
        outln!("floor: {rate:.1} one-save runs/s (2 synced commits, a file written, fsynced, renamed and its folder fsynced, no host logic)");
    }
    Ok(0)
}

pub fn runs(count: usize, concurrency: usize, json_out: bool) -> Result<i32> {
    if count == 0 || concurrency == 0 {
        return Err(crate::bad("--runs and --concurrency must be at least 1"));
    }
    let tmp = std::env::temp_dir().join(format!("vouch-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    // With VOUCH_DATABASE_URL the runs go to PostgreSQL, in a throwaway schema.
    let pg = home::database_url().is_some();
    let schema = format!("vouch_bench_runs_{}", std::process::id());
    if pg {
        std::env::set_var("VOUCH_DATABASE_SCHEMA", &schema);
    }
    home::init(&tmp)?;
    let out = measure_runs(
        &tmp,
        count,
        concurrency,
        json_out,
        pg.then_some(schema.as_str()),
    );
    let _ = std::fs::remove_dir_all(&tmp);
    if let (true, Some((url, _))) = (pg, home::database_url()) {
        if let Ok(mut c) = postgres::Client::connect(&url, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
        }
    }
    out
}

/// `vouch bench runs --hosts N` (PostgreSQL): N host processes of this binary on one fresh
/// schema, each from a home of its own, share `count` runs — first one at a time in each host,
/// then `concurrency` at once in each — and the rates are their sum over the wall time.
pub fn runs_hosts(count: usize, concurrency: usize, hosts: usize, json_out: bool) -> Result<i32> {
    if count == 0 || concurrency == 0 {
        return Err(crate::bad("--runs and --concurrency must be at least 1"));
    }
    crate::bench_hosts::check(hosts)?;
    let tmp = std::env::temp_dir().join(format!("vouch-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let schema = format!("vouch_bench_runs_{}", std::process::id());
    std::env::set_var("VOUCH_DATABASE_SCHEMA", &schema);
    home::init(&tmp)?;
    let out = measure_hosts(&tmp, count, concurrency, hosts);
    let _ = std::fs::remove_dir_all(&tmp);
    if let Some((url, _)) = home::database_url() {
        if let Ok(mut c) = postgres::Client::connect(&url, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
        }
    }
    let f = out?;
    if json_out {
        outln!(
            "{}",
            json!({
                "backend": "postgresql", "schema": schema, "hosts": hosts, "runs": f.seq_runs,
                "sequential_runs_per_s": f.seq_runs as f64 / f.seq_s,
                "concurrency_per_host": concurrency, "concurrent_runs": f.par_runs,
                "concurrent_runs_per_s": f.par_runs as f64 / f.par_s,
                "journal_events": f.events, "chains_intact": f.intact,
            })
        );
    } else {
        outln!(
            "hosts {hosts}, one run at a time each  {:>6} runs  {:>7.2} s  {:>8.1} runs/s",
            f.seq_runs,
            f.seq_s,
            f.seq_runs as f64 / f.seq_s
        );
        outln!("hosts {hosts}, {concurrency} at once each        {:>6} runs  {:>7.2} s  {:>8.1} runs/s", f.par_runs, f.par_s, f.par_runs as f64 / f.par_s);
        outln!(
            "journal: {} events, every chain intact: {}",
            f.events,
            f.intact
        );
    }
    Ok(if f.intact { 0 } else { 1 })
}

/// What the hosts of `bench runs --hosts` did together.
struct HostFigures {
    seq_runs: usize,
    seq_s: f64,
    par_runs: usize,
    par_s: f64,
    events: usize,
    intact: bool,
}

fn measure_hosts(
    tmp: &std::path::Path,
    count: usize,
    concurrency: usize,
    hosts: usize,
) -> Result<HostFigures> {
    let share = count.div_ceil(hosts);
    let mut h = crate::bench_hosts::Hosts::start(hosts, |k| {
        [
            "bench",
            "runs",
            "--runs",
            &share.to_string(),
            "--concurrency",
            &concurrency.to_string(),
            "--part",
            &k.to_string(),
        ]
        .map(String::from)
        .to_vec()
    })?;
    let (seq_s, seq) = h.phase("sequential")?;
    let (par_s, par) = h.phase("concurrent")?;
    h.finish()?;
    let sum = |l: &[serde_json::Value]| {
        crate::bench_hosts::numbers(l, "succeeded")
            .iter()
            .sum::<f64>() as usize
    };
    let report = home::open_store(tmp)?.verify()?;
    Ok(HostFigures {
        seq_runs: sum(&seq),
        seq_s,
        par_runs: sum(&par),
        par_s,
        events: report.events,
        intact: report.breaks.is_empty(),
    })
}

/// One host of `bench runs --hosts`: its own home on the shared schema; `count` runs one at a
/// time, then `count` more `concurrency` at once, each phase when the parent says.
pub fn runs_part(count: usize, concurrency: usize, part: usize) -> Result<i32> {
    let dir = crate::bench_hosts::own_home("runs", part)?;
    let r = run_part(&dir, count, concurrency, part);
    let _ = std::fs::remove_dir_all(&dir);
    match r {
        Ok(()) => Ok(0),
        Err(e) => {
            crate::bench_hosts::say(&json!({"error": format!("{e:#}")}));
            Ok(1)
        }
    }
}

fn run_part(dir: &std::path::Path, count: usize, concurrency: usize, part: usize) -> Result<()> {
    let host = Arc::new(home::host_on(dir, home::open_store(dir)?, None)?);
    // Spec numbers (titles and file names) of each host apart from the others'.
    let base = part * 2 * count;
    crate::bench_hosts::say(&json!({"ready": part}));
    crate::bench_hosts::wait_for("sequential")?;
    let mut ok = 0;
    for i in 0..count {
        let (_, end) = host.start(&spec(base + i)).map_err(|e| anyhow!("{e}"))?;
        ok += usize::from(succeeded(&end));
    }
    crate::bench_hosts::say(&json!({"succeeded": ok}));
    crate::bench_hosts::wait_for("concurrent")?;
    // Thread `w` runs the runs `w`, `w + concurrency`, …: `count` in all.
    let ok = std::thread::scope(|s| {
        let handles: Vec<_> = (0..concurrency)
            .map(|w| {
                let host = host.clone();
                s.spawn(move || -> Result<usize> {
                    let mut ok = 0;
                    for k in (w..count).step_by(concurrency) {
                        let (_, end) = host
                            .start(&spec(base + count + k))
                            .map_err(|e| anyhow!("{e}"))?;
                        ok += usize::from(succeeded(&end));
                    }
                    Ok(ok)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("a bench thread panicked"))?)
            .sum::<Result<usize>>()
    })?;
    crate::bench_hosts::say(&json!({"succeeded": ok}));
    Ok(())
}

/// Most runs `bench cpu` performs.
pub const CPU_RUNS_MAX: usize = 100_000;

/// `vouch bench cpu`: `count` one-save runs one after another on a temporary SQLite home, and
/// nothing else — no timed loop whose work depends on the clock — so that an instruction
/// counter (callgrind, `scripts/cpu.sh`) sees the same work on any machine under any load.
/// Counting N and 2N runs and taking the difference leaves out the process's start-up.
pub fn cpu(count: usize, json_out: bool) -> Result<i32> {
    if count == 0 || count > CPU_RUNS_MAX {
        return Err(crate::bad(format!(
            "--runs: give a number of runs between 1 and {CPU_RUNS_MAX}"
        )));
    }
    let tmp = std::env::temp_dir().join(format!("vouch-bench-cpu-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    home::init(&tmp)?;
    let out = cpu_runs(&tmp, count);
    let _ = std::fs::remove_dir_all(&tmp);
    let ok = out?;
    if json_out {
        outln!("{}", json!({"runs": count, "succeeded": ok}));
    } else {
        outln!("{ok} of {count} runs succeeded");
    }
    Ok(if ok == count { 0 } else { 1 })
}

/// The runs of `bench cpu` on the home at `tmp`: how many succeeded. (The chains are not
/// verified here: reading them back would add per-run work that is not a run's.)
fn cpu_runs(tmp: &std::path::Path, count: usize) -> Result<usize> {
    let store: Arc<dyn vouch_store::Store> = Arc::new(
        vouch_store_sqlite::SqliteStore::open(&tmp.join(home::DB_FILE))
            .map_err(|e| anyhow!("{e}"))?,
    );
    let host = home::host_on(tmp, store, None)?;
    let mut ok = 0;
    for i in 0..count {
        let (_, end) = host.start(&spec(i)).map_err(|e| anyhow!("{e}"))?;
        ok += usize::from(succeeded(&end));
    }
    Ok(ok)
}

/// The sequential phase of `bench runs`.
struct Sequential {
    /// Seconds the runs took (the floor loops left out).
    seconds: f64,
    /// The floor loops' mean rate (0 when not measured).
    floor_runs_per_s: f64,
    /// Each round's runs per second ÷ the floor measured just before them, and their median.
    vs_floor_rounds: Vec<f64>,
    vs_floor: f64,
}

/// `count` runs one after another in `rounds` rounds, each after a floor loop when `floor`.
fn sequential_rounds(
    host: &vouch_runtime::Host,
    tmp: &std::path::Path,
    count: usize,
    rounds: usize,
    floor: bool,
    json_out: bool,
) -> Result<Sequential> {
    let (mut seconds, mut floors, mut ratios) = (0.0, vec![], vec![]);
    for r in 0..rounds {
        let floor_rate = if floor {
            vouch_bench::floor_runs_per_s(tmp, FLOOR_SECONDS / rounds as f64)?
        } else {
            0.0
        };
        let (from, to) = (count * r / rounds, count * (r + 1) / rounds);
        let t = Instant::now();
        for i in from..to {
            let (_, end) = host.start(&spec(i)).map_err(|e| anyhow!("{e}"))?;
            if !succeeded(&end) {
                return Err(anyhow!("bench run {i} did not succeed: {end:?}"));
            }
        }
        let s = t.elapsed().as_secs_f64();
        seconds += s;
        if floor {
            floors.push(floor_rate);
            ratios.push((to - from) as f64 / s / floor_rate);
        }
        if !json_out {
            errln!("  sequential: {to}/{count}");
        }
    }
    let floor_runs_per_s = floors.iter().sum::<f64>() / floors.len().max(1) as f64;
    let mut sorted = ratios.clone();
    sorted.sort_by(f64::total_cmp);
    let vs_floor = sorted.get(sorted.len() / 2).copied().unwrap_or(0.0);
    Ok(Sequential {
        seconds,
        floor_runs_per_s,
        vs_floor_rounds: ratios,
        vs_floor,
    })
}

fn measure_runs(
    tmp: &std::path::Path,
    count: usize,
    concurrency: usize,
    json_out: bool,
    pg_schema: Option<&str>,
) -> Result<i32> {
    let tmp = tmp.to_path_buf();
    let pg = pg_schema.is_some();
    // SQLite: the concrete store, so its write counters can be read (commits per run).
    let (store, sqlite): (
        Arc<dyn vouch_store::Store>,
        Option<Arc<vouch_store_sqlite::SqliteStore>>,
    ) = if pg {
        (home::open_store(&tmp)?, None)
    } else {
        let s = Arc::new(
            vouch_store_sqlite::SqliteStore::open(&tmp.join(home::DB_FILE))
                .map_err(|e| anyhow!("{e}"))?,
        );
        (s.clone(), Some(s))
    };
    let host = Arc::new(home::host_on(&tmp, store, None)?);
    if !json_out {
        errln!(
            "vouch bench runs: {count} scripted runs with one durable save each on {}, home {}",
            if pg { "PostgreSQL" } else { "SQLite" },
            tmp.display()
        );
    }
    // Sequential, in rounds that each begin with a floor loop (SQLite: the runs' own disk).
    let before = sqlite.as_ref().map(|s| s.write_stats());
    let rounds = if pg { 1 } else { FLOOR_ROUNDS.min(count) };
    let seq = sequential_rounds(&host, &tmp, count, rounds, !pg, json_out)?;
    let seq_s = seq.seconds;
    let after = sqlite.as_ref().map(|s| s.write_stats());
    let per_run = |f: fn(&vouch_store_sqlite::WriteStats) -> u64| match (&before, &after) {
        (Some(b), Some(a)) => Some((f(a) - f(b)) as f64 / count as f64),
        _ => None,
    };
    let commits_per_run = per_run(|w| w.commits);
    // Commits that waited for the disk (a run's creation does not, §3.4.2).
    let synced_per_run = per_run(|w| w.synced);
    let jobs_per_run = per_run(|w| w.jobs);
    // Concurrent: N threads share the store (their appends are group-committed).
    let t = Instant::now();
    let per = count.div_ceil(concurrency);
    let mut handles = vec![];
    for w in 0..concurrency {
        let host = host.clone();
        handles.push(std::thread::spawn(move || -> Result<usize> {
            let mut ok = 0;
            for k in 0..per {
                let (_, end) = host
                    .start(&spec(count + w * per + k))
                    .map_err(|e| anyhow!("{e}"))?;
                if succeeded(&end) {
                    ok += 1;
                }
            }
            Ok(ok)
        }));
    }
    let mut done = 0;
    for h in handles {
        done += h.join().map_err(|_| anyhow!("a bench thread panicked"))??;
    }
    let par_s = t.elapsed().as_secs_f64();
    let seq_rate = count as f64 / seq_s;
    let par_rate = done as f64 / par_s;
    let events = host.verify_store()?;
    if !json_out {
        errln!("  SQLite's own 1-row FULL commit loop on the same disk ({COMMIT_LOOP_SECONDS} s)");
    }
    let sqlite_rate = vouch_bench::sqlite_commits_per_s(&tmp, COMMIT_LOOP_SECONDS)?;
    let floor_rate = seq.floor_runs_per_s;
    drop(host);
    if json_out {
        outln!(
            "{}",
            json!({
                "backend": if pg { "postgresql" } else { "sqlite" },
                "schema": pg_schema,
                "runs": count,
                "sequential_runs_per_s": seq_rate,
                "concurrency": concurrency,
                "concurrent_runs": done,
                "concurrent_runs_per_s": par_rate,
                "commits_per_run": commits_per_run,
                "synced_commits_per_run": synced_per_run,
                "store_jobs_per_run": jobs_per_run,
                "sqlite_commits_per_s": sqlite_rate,
                // Only where the runs went to that SQLite disk.
                "sequential_vs_sqlite_commits": (!pg).then(|| seq_rate / sqlite_rate),
                "floor_runs_per_s": floor_rate,
                // The median of the rounds' ratios (each round's runs ÷ the floor just before).
                "sequential_vs_floor": (!pg).then_some(seq.vs_floor),
                "sequential_vs_floor_rounds": (!pg).then_some(&seq.vs_floor_rounds),
                "concurrent_vs_sequential": par_rate / seq_rate,
                "journal_events": events.events,
                "chains_intact": events.breaks.is_empty(),
            })
        );
    } else {
        let commits = commits_per_run
            .zip(synced_per_run)
            .map(|(c, s)| format!("  ({c:.1} commits a run, {s:.1} of them synced)"))
            .unwrap_or_default();
        outln!("sequential      {count:>6} runs  {seq_s:>7.2} s  {seq_rate:>8.1} runs/s{commits}");
        outln!("{concurrency} at once       {done:>6} runs  {par_s:>7.2} s  {par_rate:>8.1} runs/s  ({:.2}× sequential)", par_rate / seq_rate);
        if pg {
            // The runs went to the server; its own commit rate is measured by the server's
            // side (the peers' W0), not by this disk's SQLite loop.
            outln!(
                "SQLite 1-row FULL commits on this disk  {sqlite_rate:>8.1}/s  (for reference: these runs went to PostgreSQL)"
            );
        } else {
            outln!(
                "SQLite 1-row FULL commits  {sqlite_rate:>8.1}/s  (sequential runs are {:.3}× of it)",
                seq_rate / sqlite_rate
            );
            outln!(
                "floor of a one-save run    {floor_rate:>8.1}/s  (sequential runs are {:.2}× of it, the median of {} rounds)",
                seq.vs_floor,
                seq.vs_floor_rounds.len()
            );
        }
        outln!(
            "journal: {} events across {} runs, every chain intact: {}",
            events.events,
            events.runs,
            events.breaks.is_empty()
        );
    }
    Ok(if events.breaks.is_empty() { 0 } else { 1 })
}

/// `vouch bench journal`: the journal measurement of `vouch-bench` (durable appends with 1
/// and N writers beside this disk's fsync limit), run from the `vouch` command.
pub fn journal(
    seconds: f64,
    writers: usize,
    rounds: usize,
    dir: Option<std::path::PathBuf>,
    json_out: bool,
) -> Result<i32> {
    let dir = dir.unwrap_or_else(std::env::temp_dir);
    let opts = vouch_bench::JournalOptions::new(seconds, writers, rounds, dir)
        .map_err(|e| crate::bad(format!("{e:#}")))?;
    let report = vouch_bench::journal(&opts, &mut |line| {
        if !json_out {
            errln!("{line}");
        }
    })?;
    if json_out {
        outln!("{}", serde_json::to_string(&report)?);
    } else {
        let command = std::env::args().collect::<Vec<_>>().join(" ");
        out!("{}", vouch_bench::render(&report, &command));
    }
    Ok(if report.broken_chains > 0 { 1 } else { 0 })
}

/// Most runs `bench scale` seeds into one store.
pub const SCALE_RUNS_MAX: usize = 1_000_000;
/// Repetitions of each timed operation; the median is reported.
const SCALE_REPEATS: usize = 7;

/// `vouch bench scale`: what start-up and listing cost as history grows. For each size, a
/// fresh home is seeded with that many ended runs (each with a journal and a receipt), plus a few open cards; then the median of repeated start-ups
/// (open the store and the host, start-up reconciliation — what every command does first) and
/// of the listings a person asks for (the inbox: open cards and the newest runs; the badge).
pub fn scale(sizes: &[usize], json_out: bool) -> Result<i32> {
    if sizes.is_empty() || sizes.iter().any(|&n| n == 0 || n > SCALE_RUNS_MAX) {
        return Err(crate::bad(format!(
            "--sizes: give run counts between 1 and {SCALE_RUNS_MAX}, comma-separated"
        )));
    }
    let mut rows = vec![];
    for &n in sizes {
        let tmp =
            std::env::temp_dir().join(format!("vouch-bench-scale-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&tmp);
        home::init(&tmp)?;
        if !json_out {
            errln!(
                "vouch bench scale: seeding {n} ended runs in {}",
                tmp.display()
            );
        }
        let t = Instant::now();
        seed(&tmp, n)?;
        let seed_s = t.elapsed().as_secs_f64();
        let mut startup = vec![];
        let mut list = vec![];
        for _ in 0..SCALE_REPEATS {
            let t = Instant::now();
            let host = home::host(&tmp, None)?;
            host.boot().map_err(|e| anyhow!("{e}"))?;
            startup.push(t.elapsed().as_secs_f64() * 1e3);
            let t = Instant::now();
            let cards = host.open_cards()?;
            let runs = host.runs(50)?;
            list.push(t.elapsed().as_secs_f64() * 1e3);
            if cards.len() != 3 || runs.len() != (n + 3).min(50) {
                return Err(anyhow!(
                    "scale {n}: the inbox shows {} cards and {} runs",
                    cards.len(),
                    runs.len()
                ));
            }
        }
        let _ = std::fs::remove_dir_all(&tmp);
        let row = json!({"runs_in_store": n, "startup_ms": median(&mut startup), "list_ms": median(&mut list), "seed_s": seed_s});
        if !json_out {
            errln!(
                "  {n:>8} runs: start-up {:.2} ms, inbox {:.2} ms (seeded in {seed_s:.1} s)",
                row["startup_ms"].as_f64().unwrap_or(0.0),
                row["list_ms"].as_f64().unwrap_or(0.0)
            );
        }
        rows.push(row);
    }
    let ratio = |key: &str| -> f64 {
        let first = rows.first().and_then(|r| r[key].as_f64()).unwrap_or(0.0);
        let last = rows.last().and_then(|r| r[key].as_f64()).unwrap_or(0.0);
        if first > 0.0 {
            last / first
        } else {
            0.0
        }
    };
    let (startup_ratio, list_ratio) = (ratio("startup_ms"), ratio("list_ms"));
    if json_out {
        outln!(
            "{}",
            json!({"sizes": rows, "startup_largest_vs_smallest": startup_ratio, "list_largest_vs_smallest": list_ratio})
        );
    } else {
        outln!("runs in store   start-up ms   inbox ms");
        for r in &rows {
            outln!(
                "{:>13}   {:>11.2}   {:>8.2}",
                r["runs_in_store"],
                r["startup_ms"].as_f64().unwrap_or(0.0),
                r["list_ms"].as_f64().unwrap_or(0.0)
            );
        }
        outln!("largest ÷ smallest: start-up {startup_ratio:.2}×, inbox {list_ratio:.2}×");
    }
    Ok(0)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

/// `n` ended runs written straight to the store by 8 threads (two group-committed writes a
/// run), plus three suspended runs with an open card each.
fn seed(dir: &std::path::Path, n: usize) -> Result<()> {
    use vouch_store::{Card, CardState, EventKind, NewEvent, NewRun, Store, Terminal};
    let store: Arc<dyn Store> = home::open_store(dir)?;
    let threads = 8usize;
    let mut handles = vec![];
    for w in 0..threads {
        let store = store.clone();
        handles.push(std::thread::spawn(move || -> Result<()> {
            let mut i = w;
            while i < n {
                let id = format!("seed{i:08}");
                let at = 1_700_000_000_000i64 + i as i64 * 1_000;
                store.create_run(&NewRun {
                    state: vouch_core::RunState::Created,
                    id: id.clone(),
                    trigger: TriggerKind::Scheduled,
                    title: format!("seeded run {i}"),
                    chain_root: id.clone(),
                    parent: None,
                    scope: id.clone(),
                    spec: json!({"presence": "away"}),
                    created_ms: at,
                    lease: None,
                })?;
                let events = [
                    NewEvent::new(
                        EventKind::RunCreated,
                        at,
                        json!({"title": format!("seeded run {i}")}),
                    ),
                    NewEvent::new(
                        EventKind::Turn,
                        at,
                        json!({"content": "done", "tool_calls": []}),
                    ),
                ];
                store.end_run_after(
                    &id,
                    &events,
                    &Terminal {
                        outcome: vouch_core::Outcome::Succeeded,
                        ended_by: vouch_core::EndedBy::Loop,
                        receipt: format!("Receipt — seeded run {i}\n"),
                        body: json!({"outcome": "succeeded"}).into(),
                        at_ms: at + 10,
                        // Steady state: every notification has gone out.
                        outbox: None,
                    },
                )?;
                i += threads;
            }
            Ok(())
        }));
    }
    for h in handles {
        h.join()
            .map_err(|_| anyhow!("a seeding thread panicked"))??;
    }
    for k in 0..3 {
        let id = format!("open{k}");
        let at = 1_800_000_000_000i64 + k;
        store.create_run(&NewRun {
            state: vouch_core::RunState::Created,
            id: id.clone(),
            trigger: TriggerKind::Interactive,
            title: format!("waiting run {k}"),
            chain_root: id.clone(),
            parent: None,
            scope: id.clone(),
            spec: json!({}),
            created_ms: at,
            lease: None,
        })?;
        store.set_run_state(&id, vouch_core::RunState::Suspended)?;
        store.open_card(&Card {
            run_id: id.clone(),
            delivery: Some("d1".into()),
            payload_hash: format!("{k:064}"),
            summary: "send a message".into(),
            state: CardState::Open,
            created_ms: at,
            decided_ms: None,
            answer: None,
            reason: "sending cannot be undone (rule R9)".into(),
        })?;
    }
    Ok(())
}

/// Most work-tool turns `bench turns` runs in one run.
pub const TURNS_MAX: usize = 50_000;

/// `vouch bench turns`: one run per size, each with that many read-only work-tool turns
/// between its declaration and one save. Reports the host's cost per turn (the scripted model
/// costs nothing) and the commits of each run: a turn with no effect commits nothing of its own.
pub fn turns(sizes: &[usize], json_out: bool) -> Result<i32> {
    if sizes.is_empty() || sizes.iter().any(|&n| n == 0 || n > TURNS_MAX) {
        return Err(crate::bad(format!(
            "--sizes: give turn counts between 1 and {TURNS_MAX}, comma-separated"
        )));
    }
    let tmp = std::env::temp_dir().join(format!("vouch-bench-turns-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    home::init(&tmp)?;
    std::fs::create_dir_all(home::folder_root(&tmp).join("src"))?;
    std::fs::write(
        home::folder_root(&tmp).join("src/notes.md"),
        "a line to read\n",
    )?;
    let sqlite = Arc::new(
        vouch_store_sqlite::SqliteStore::open(&tmp.join(home::DB_FILE))
            .map_err(|e| anyhow!("{e}"))?,
    );
    let store: Arc<dyn vouch_store::Store> = sqlite.clone();
    let host = home::host_on(&tmp, store, None)?;
    let limits = vouch_runtime::Limits {
        turns_max: TURNS_MAX + 10,
        ..host.limits().clone()
    };
    let host = host.with_limits(limits);
    let mut rows = vec![];
    for (k, &n) in sizes.iter().enumerate() {
        let mut script = vec![
            json!({"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": format!("out/{k}.md")}}]}}),
        ];
        script
            .extend((0..n).map(|_| json!({"tool": "read_file", "args": {"path": "src/notes.md"}})));
        script.push(json!({"deliver": "d1", "payload": {"text": "done\n"}}));
        script.push(json!({"final": "Saved."}));
        let spec = RunSpec {
            trigger: TriggerKind::Interactive,
            title: format!("bench {n} turns"),
            presence: None,
            quiet: false,
            model: json!({"kind": "script", "turns": script}).into(),
            scope: None,
        };
        if !json_out {
            errln!("vouch bench turns: a run of {n} work-tool turns");
        }
        let before = sqlite.write_stats();
        let t = Instant::now();
        let (_, end) = host.start(&spec).map_err(|e| anyhow!("{e}"))?;
        let secs = t.elapsed().as_secs_f64();
        let after = sqlite.write_stats();
        if !succeeded(&end) {
            return Err(anyhow!("the run of {n} turns did not succeed: {end:?}"));
        }
        let turns = n + 3;
        rows.push(json!({
            "work_turns": n,
            "seconds": secs,
            "per_turn_us": secs * 1e6 / turns as f64,
            "commits": after.commits - before.commits,
        }));
    }
    drop(host);
    let _ = std::fs::remove_dir_all(&tmp);
    let per =
        |r: Option<&serde_json::Value>| r.and_then(|r| r["per_turn_us"].as_f64()).unwrap_or(0.0);
    let ratio = if per(rows.first()) > 0.0 {
        per(rows.last()) / per(rows.first())
    } else {
        0.0
    };
    if json_out {
        outln!(
            "{}",
            json!({"sizes": rows, "per_turn_largest_vs_smallest": ratio})
        );
    } else {
        outln!("work turns   seconds   per turn µs   commits");
        for r in &rows {
            outln!(
                "{:>10}   {:>7.2}   {:>11.1}   {:>7}",
                r["work_turns"],
                r["seconds"].as_f64().unwrap_or(0.0),
                r["per_turn_us"].as_f64().unwrap_or(0.0),
                r["commits"]
            );
        }
        outln!("per-turn cost, largest ÷ smallest: {ratio:.2}×");
    }
    Ok(0)
}

/// Most runs `bench recovery` and `bench approval` accept.
pub const RECOVERY_RUNS_MAX: usize = 100_000;

/// The pid of a process that has exited: an owner that is certainly gone.
fn dead_owner() -> Result<String> {
    let mut child = std::process::Command::new("true").spawn()?;
    child.wait()?;
    // An owner of this host and boot (§9.2.5): only such an owner is judged by its process.
    Ok(vouch_runtime::host::HostIdentity::this().owner(child.id(), 0))
}

fn two_saves(i: usize) -> RunSpec {
    RunSpec {
        trigger: TriggerKind::Interactive,
        title: format!("bench recovery {i}"),
        presence: None,
        quiet: false,
        model: json!({"kind": "script", "turns": [
            {"declare": {"deliveries": [
                {"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": format!("rec/{i}-a.md")}},
                {"id": "d2", "verb": "save", "destination": {"kind": "folder", "address": format!("rec/{i}-b.md")}}
            ]}},
            {"deliver": "d1", "payload": {"text": "first\n"}},
            {"deliver": "d2", "payload": {"text": "second\n"}},
            {"final": "Saved both."}
        ]}).into(),
        scope: None,
    }
}

/// `vouch bench recovery --runs N --concurrency C`: N runs each interrupted after their first
/// of two saves (the process's memory dropped: a host whose owner is gone, the store reopened),
/// then the time for start-up reconciliation to end them all, and the time to resume and finish
/// all, C at once. On SQLite it also counts the commits of each phase and measures this disk's
/// own commit rate, which bounds both.
pub fn recovery(runs: usize, concurrency: usize, json_out: bool) -> Result<i32> {
    if runs == 0 || runs > RECOVERY_RUNS_MAX {
        return Err(crate::bad(format!(
            "--runs: give between 1 and {RECOVERY_RUNS_MAX}"
        )));
    }
    if concurrency == 0 {
        return Err(crate::bad("--concurrency must be at least 1"));
    }
    let tmp = std::env::temp_dir().join(format!("vouch-bench-recovery-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    home::init(&tmp)?;
    let out = measure_recovery(&tmp, runs, concurrency, json_out);
    let _ = std::fs::remove_dir_all(&tmp);
    out
}

fn measure_recovery(
    tmp: &std::path::Path,
    runs: usize,
    concurrency: usize,
    json_out: bool,
) -> Result<i32> {
    let owner = dead_owner()?;
    if !json_out {
        errln!("vouch bench recovery: interrupting {runs} runs after their first save");
    }
    for i in 0..runs {
        // A fresh host per run: each crash drops everything the process held in memory.
        let host = home::host(tmp, None)?
            .with_owner(owner.clone())
            .with_crash(Some(vouch_runtime::crash::CrashPlan::new(
                "evidence",
                Some("d1"),
                1,
                vouch_runtime::crash::CrashMode::Simulate,
            )));
        match host.start(&two_saves(i)) {
            Err(vouch_runtime::HostError::Crashed(_)) => {}
            other => return Err(anyhow!("run {i} was not interrupted: {other:?}")),
        }
    }
    // Restart: a new process (host) over the reopened store reconciles every orphan. On
    // SQLite the concrete store is kept to read its commit counter.
    let t = Instant::now();
    let (store, sqlite): (
        Arc<dyn vouch_store::Store>,
        Option<Arc<vouch_store_sqlite::SqliteStore>>,
    ) = if home::database_url().is_some() {
        (home::open_store(tmp)?, None)
    } else {
        let s = Arc::new(
            vouch_store_sqlite::SqliteStore::open(&tmp.join(home::DB_FILE))
                .map_err(|e| anyhow!("{e}"))?,
        );
        (s.clone(), Some(s))
    };
    let host = Arc::new(home::host_on(tmp, store, None)?);
    let commits = || sqlite.as_ref().map(|s| s.write_stats().commits);
    let c0 = commits();
    let ended = host.boot().map_err(|e| anyhow!("{e}"))?;
    let reconcile_s = t.elapsed().as_secs_f64();
    let c1 = commits();
    if ended.len() != runs {
        return Err(anyhow!(
            "start-up reconciled {} of {runs} runs",
            ended.len()
        ));
    }
    // Resume: `concurrency` threads take the ended runs in turn.
    let t = Instant::now();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let finished = std::thread::scope(|scope| -> Result<usize> {
        let workers: Vec<_> = (0..concurrency.min(runs))
            .map(|_| {
                std::thread::Builder::new()
                    .name("vouch-resume".into())
                    .spawn_scoped(scope, || -> Result<usize> {
                        let mut ok = 0;
                        loop {
                            let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                            let Some(id) = ended.get(i) else {
                                return Ok(ok);
                            };
                            let (_, end) = host.resume(id).map_err(|e| anyhow!("{e}"))?;
                            if succeeded(&end) {
                                ok += 1;
                            }
                        }
                    })
            })
            .collect::<std::io::Result<_>>()?;
        let mut n = 0;
        for w in workers {
            n += w
                .join()
                .map_err(|_| anyhow!("a resume thread panicked"))??;
        }
        Ok(n)
    })?;
    let resume_s = t.elapsed().as_secs_f64();
    let c2 = commits();
    // The world: every second file exactly once, every first file untouched by the resume.
    let root = home::folder_root(tmp);
    let files = (0..runs)
        .filter(|i| {
            std::fs::read_to_string(root.join(format!("rec/{i}-a.md")))
                .ok()
                .as_deref()
                == Some("first\n")
                && std::fs::read_to_string(root.join(format!("rec/{i}-b.md")))
                    .ok()
                    .as_deref()
                    == Some("second\n")
        })
        .count();
    drop(host);
    let per_run = |a: Option<u64>, b: Option<u64>| match (a, b) {
        (Some(a), Some(b)) => Some((b - a) as f64 / runs as f64),
        _ => None,
    };
    let (reconcile_commits, resume_commits) = (per_run(c0, c1), per_run(c1, c2));
    // What bounds both phases on this disk: its own one-row FULL commit rate.
    let sqlite_rate = match sqlite {
        Some(_) => {
            if !json_out {
                errln!("  SQLite's own 1-row FULL commit loop on the same disk ({COMMIT_LOOP_SECONDS} s)");
            }
            Some(vouch_bench::sqlite_commits_per_s(tmp, COMMIT_LOOP_SECONDS)?)
        }
        None => None,
    };
    let report = json!({
        "runs": runs,
        "reconcile_threads_max": vouch_runtime::host::BOOT_THREADS_MAX,
        "concurrency": concurrency,
        "reconcile_s": reconcile_s,
        "resume_and_finish_s": resume_s,
        "restart_to_all_done_s": reconcile_s + resume_s,
        "resumed_and_succeeded": finished,
        "runs_with_both_files": files,
        "reconcile_commits_per_run": reconcile_commits,
        "resume_commits_per_run": resume_commits,
        "sqlite_commits_per_s": sqlite_rate,
    });
    if json_out {
        outln!("{report}");
    } else {
        let threads = vouch_runtime::host::BOOT_THREADS_MAX;
        outln!("{runs} interrupted runs: start-up reconciliation {reconcile_s:.2} s (up to {threads} at once), resume and finish {resume_s:.2} s ({concurrency} at once)");
        outln!("restart → all done: {:.2} s; {finished} succeeded; {files} runs with both files on disk", reconcile_s + resume_s);
        if let (Some(r), Some(c), Some(rate)) = (reconcile_commits, resume_commits, sqlite_rate) {
            outln!("commits a run: {r:.2} to reconcile, {c:.2} to resume and finish; SQLite 1-row FULL commits on this disk {rate:.1}/s");
        }
    }
    Ok(if finished == runs && files == runs {
        0
    } else {
        1
    })
}

/// `vouch bench approval --runs N`: N runs suspended on an approval card (an e-mail drafted
/// for confirmation is replaced here by a webhook to a loopback receiver), then each approved:
/// the time from approve to executed-and-ended, p50 and p90, and how many earlier steps were
/// executed again (must be 0).
pub fn approval(runs: usize, json_out: bool) -> Result<i32> {
    if runs == 0 || runs > RECOVERY_RUNS_MAX {
        return Err(crate::bad(format!(
            "--runs: give between 1 and {RECOVERY_RUNS_MAX}"
        )));
    }
    let tmp = std::env::temp_dir().join(format!("vouch-bench-approval-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    home::init(&tmp)?;
    let host = home::host(&tmp, None)?;
    if !json_out {
        errln!("vouch bench approval: {runs} runs waiting on a card, then approved");
    }
    let mut waiting = vec![];
    for i in 0..runs {
        // d1 saves a new file (runs at once); d2 overwrites it (irreversible: needs approval).
        let spec = RunSpec {
            trigger: TriggerKind::Interactive,
            title: format!("bench approval {i}"),
            presence: None,
            quiet: false,
            model: json!({"kind": "script", "turns": [
                {"declare": {"deliveries": [
                    {"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": format!("ap/{i}-log.md")}},
                    {"id": "d2", "verb": "save", "destination": {"kind": "folder", "address": "ap/shared.md"}}
                ]}},
                {"deliver": "d1", "payload": {"text": format!("step one {i}\n")}},
                {"deliver": "d2", "payload": {"text": format!("approved text {i}\n")}},
                {"final": "Done."}
            ]}).into(),
            scope: None,
        };
        if i == 0 {
            // The first run creates shared.md, so every later d2 overwrites it.
            std::fs::create_dir_all(home::folder_root(&tmp).join("ap"))?;
            std::fs::write(home::folder_root(&tmp).join("ap/shared.md"), "before\n")?;
        }
        let (id, end) = host.start(&spec).map_err(|e| anyhow!("{e}"))?;
        if !matches!(end, vouch_runtime::RunEnd::Suspended { .. }) {
            return Err(anyhow!("run {i} did not wait for approval: {end:?}"));
        }
        waiting.push(id);
    }
    let cards = host.open_cards()?;
    let mut ms = vec![];
    let mut ended_ok = 0;
    for id in &waiting {
        let card = cards
            .iter()
            .find(|c| &c.run_id == id)
            .ok_or_else(|| anyhow!("run {id} has no open card"))?;
        let t = Instant::now();
        let end = host
            .approve(
                id,
                card.delivery.as_deref().unwrap_or(""),
                &card.payload_hash,
            )
            .map_err(|e| anyhow!("{e}"))?;
        ms.push(t.elapsed().as_secs_f64() * 1e3);
        if matches!(end, vouch_runtime::RunEnd::Ended { .. }) {
            ended_ok += 1;
        }
    }
    // Re-executions: d1's attempts per run (exactly one each).
    let mut reexecuted = 0usize;
    for id in &waiting {
        let starts = host
            .events(id)?
            .iter()
            .filter(|e| {
                e.kind == vouch_store::EventKind::AttemptStarted
                    && e.delivery.as_deref() == Some("d1")
            })
            .count();
        reexecuted += starts.saturating_sub(1);
    }
    drop(host);
    let _ = std::fs::remove_dir_all(&tmp);
    ms.sort_by(|a, b| a.total_cmp(b));
    let pct = |p: f64| {
        ms.get(((ms.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    let report = json!({"runs": runs, "approve_to_done_ms_p50": pct(0.5), "approve_to_done_ms_p90": pct(0.9), "ended": ended_ok, "earlier_steps_reexecuted": reexecuted});
    if json_out {
        outln!("{report}");
    } else {
        outln!(
            "approve → executed and ended: p50 {:.2} ms, p90 {:.2} ms over {runs} runs; earlier steps re-executed: {reexecuted}",
            pct(0.5),
            pct(0.9)
        );
    }
    Ok(if ended_ok == runs && reexecuted == 0 {
        0
    } else {
        1
    })
}
