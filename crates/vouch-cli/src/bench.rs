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
        ]}),
        scope: None,
    }
}

pub fn runs(count: usize, concurrency: usize, json_out: bool) -> Result<i32> {
    let tmp = std::env::temp_dir().join(format!("vouch-bench-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    home::init(&tmp)?;
    let host = Arc::new(home::host(&tmp, None)?);
    if !json_out {
        eprintln!(
            "vouch bench runs: {count} scripted runs with one durable save each, home {}",
            tmp.display()
        );
    }
    // Sequential.
    let t = Instant::now();
    for i in 0..count {
        let (_, end) = host.start(&spec(i)).map_err(|e| anyhow!("{e}"))?;
        if !matches!(
            end,
            vouch_runtime::RunEnd::Ended {
                outcome: vouch_core::Outcome::Succeeded
            }
        ) {
            return Err(anyhow!("bench run {i} did not succeed: {end:?}"));
        }
        if !json_out && (i + 1) % (count / 4).max(1) == 0 {
            eprintln!("  sequential: {}/{count}", i + 1);
        }
    }
    let seq_s = t.elapsed().as_secs_f64();
    // Concurrent: N threads share the store (their appends are group-committed).
    let t = Instant::now();
    let per = count.div_ceil(concurrency.max(1));
    let mut handles = vec![];
    for w in 0..concurrency.max(1) {
        let host = host.clone();
        handles.push(std::thread::spawn(move || -> Result<usize> {
            let mut ok = 0;
            for k in 0..per {
                let (_, end) = host
                    .start(&spec(count + w * per + k))
                    .map_err(|e| anyhow!("{e}"))?;
                if matches!(
                    end,
                    vouch_runtime::RunEnd::Ended {
                        outcome: vouch_core::Outcome::Succeeded
                    }
                ) {
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
    let events = host.store.verify()?;
    let _ = std::fs::remove_dir_all(&tmp);
    if json_out {
        println!(
            "{}",
            json!({"runs": count, "sequential_runs_per_s": seq_rate, "concurrency": concurrency, "concurrent_runs": done, "concurrent_runs_per_s": par_rate, "journal_events": events.events})
        );
    } else {
        println!("sequential      {count:>6} runs  {seq_s:>7.2} s  {seq_rate:>8.1} runs/s");
        println!("{concurrency} at once       {done:>6} runs  {par_s:>7.2} s  {par_rate:>8.1} runs/s  ({:.2}× sequential)", par_rate / seq_rate);
        println!(
            "journal: {} events across {} runs, every chain intact: {}",
            events.events,
            events.runs,
            events.breaks.is_empty()
        );
    }
    Ok(0)
}

/// `vouch bench journal`: durable appends per second with 1 and with N concurrent writers,
/// beside this disk's physical limit measured by the same program (one 4 KiB page write +
/// fsync per operation, in a loop).
pub fn journal(
    seconds: f64,
    writers: usize,
    dir: Option<std::path::PathBuf>,
    json_out: bool,
) -> Result<i32> {
    use std::io::Write as _;
    use vouch_store::{EventKind, NewEvent, NewRun, Store};
    let base = dir
        .unwrap_or_else(std::env::temp_dir)
        .join(format!("vouch-bench-journal-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base)?;
    let dur = std::time::Duration::from_secs_f64(seconds.max(0.2));

    // 1. The disk's limit: write one page and fsync it, again and again.
    if !json_out {
        eprintln!("measuring the fsync limit for {seconds:.1} s…");
    }
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(base.join("fsync.dat"))?;
    let page = vec![0x5au8; 4096];
    let t = Instant::now();
    let mut fsyncs = 0u64;
    while t.elapsed() < dur {
        f.write_all(&page)?;
        f.sync_data()?;
        fsyncs += 1;
    }
    let fsync_rate = fsyncs as f64 / t.elapsed().as_secs_f64();

    let store = Arc::new(
        vouch_store_sqlite::SqliteStore::open(&base.join("vouch.db"))
            .map_err(|e| anyhow!("{e}"))?,
    );
    let mk_run = |id: String| NewRun {
        id: id.clone(),
        trigger: TriggerKind::Interactive,
        title: "bench".into(),
        chain_root: id.clone(),
        parent: None,
        scope: id,
        spec: json!({}),
        created_ms: 0,
    };
    let measure = |n: usize| -> Result<f64> {
        let mut handles = vec![];
        let start = Instant::now();
        for w in 0..n {
            let store = store.clone();
            let run = format!("bench-{n}-{w}");
            store
                .create_run(&mk_run(run.clone()))
                .map_err(|e| anyhow!("{e}"))?;
            handles.push(std::thread::spawn(move || -> Result<u64> {
                let mut k = 0u64;
                let body =
                    json!({"payload_hash": "ab".repeat(32), "note": "a typical small event body"});
                while start.elapsed() < dur {
                    store
                        .append(
                            &run,
                            &NewEvent::new(EventKind::ToolCalled, k as i64, body.clone()),
                        )
                        .map_err(|e| anyhow!("{e}"))?;
                    k += 1;
                }
                Ok(k)
            }));
        }
        let mut total = 0;
        for h in handles {
            total += h.join().map_err(|_| anyhow!("writer panicked"))??;
        }
        Ok(total as f64 / start.elapsed().as_secs_f64())
    };
    if !json_out {
        eprintln!("measuring 1 writer for {seconds:.1} s…");
    }
    let one = measure(1)?;
    if !json_out {
        eprintln!("measuring {writers} writers for {seconds:.1} s…");
    }
    let many = measure(writers)?;
    let report = store.verify().map_err(|e| anyhow!("{e}"))?;
    drop(store);
    let _ = std::fs::remove_dir_all(&base);
    if json_out {
        println!(
            "{}",
            json!({"fsync_per_s": fsync_rate, "appends_per_s_1": one, "writers": writers, "appends_per_s_n": many, "ratio_1_to_fsync": one / fsync_rate, "ratio_n_to_1": many / one, "events_verified": report.events, "broken_chains": report.breaks.len()})
        );
    } else {
        println!("fsync loop (4 KiB write + fdatasync)   {fsync_rate:>10.0} ops/s");
        println!("journal, 1 writer                      {one:>10.0} appends/s   ({:.2}× the fsync loop)", one / fsync_rate);
        println!("journal, {writers} writers (group commit)     {many:>10.0} appends/s   ({:.2}× one writer)", many / one);
        println!(
            "{} events appended and verified, {} broken chains",
            report.events,
            report.breaks.len()
        );
    }
    Ok(0)
}
