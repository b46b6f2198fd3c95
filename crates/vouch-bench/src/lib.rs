//! Storage benchmarks for vouch.
//!
//! `journal` measures, on one disk and in one sitting, the physical limit of durable writes
//! (a loop of one 4 KiB page write plus `fdatasync`) and the rate of durable journal appends
//! with one writer and with N concurrent writers (one run each). Every append is durable when
//! it returns, so the 1-writer figure is bounded by the fsync loop, and N writers can only go
//! faster through group commit (several appends per fsync).
//!
//! The library holds the measurement so that other binaries (the `vouch` CLI) can call it;
//! the `vouch-bench` binary is a thin clap front end.

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use serde_json::json;
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vouch_store::{EventKind, NewEvent, NewRun, Store};
use vouch_store_sqlite::SqliteStore;

/// Longest phase accepted (a typo like `--seconds 3000` should not hold the disk for hours).
pub const PHASE_SECONDS_MAX: f64 = 600.0;
/// Shortest phase: below this the fsync figures are noise.
pub const PHASE_SECONDS_MIN: f64 = 0.2;
/// Most concurrent writers (threads) accepted.
pub const WRITERS_MAX: usize = 256;
/// The size of one page in the fsync loop.
pub const PAGE_BYTES: usize = 4096;
/// Pages the overwrite loop cycles through (a preallocated region, like a recycled WAL).
const OVERWRITE_PAGES: u64 = 256;

/// Validated settings for [`journal`].
#[derive(Debug, Clone)]
pub struct JournalOptions {
    /// Duration of each measured phase.
    pub phase: Duration,
    /// Concurrent writers of the last phase.
    pub writers: usize,
    /// Parent folder of the scratch folder; the disk being measured.
    pub dir: PathBuf,
}

impl JournalOptions {
    /// Check raw values (seconds, writers, folder) and derive the settings.
    pub fn new(seconds: f64, writers: usize, dir: PathBuf) -> Result<Self> {
        if !seconds.is_finite() || !(PHASE_SECONDS_MIN..=PHASE_SECONDS_MAX).contains(&seconds) {
            bail!("--seconds {seconds}: give a phase length between {PHASE_SECONDS_MIN} and {PHASE_SECONDS_MAX} seconds");
        }
        if !(2..=WRITERS_MAX).contains(&writers) {
            bail!("--writers {writers}: give between 2 and {WRITERS_MAX} concurrent writers");
        }
        if !dir.is_dir() {
            bail!(
                "--dir {}: not a folder; point it at a folder on the disk to measure",
                dir.display()
            );
        }
        Ok(JournalOptions {
            phase: Duration::from_secs_f64(seconds),
            writers,
            dir,
        })
    }
}

/// One phase's figures.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    pub ops: u64,
    pub seconds: f64,
    pub ops_per_s: f64,
    /// For journal phases: mean appends committed per fsync (group commit batch size).
    pub appends_per_commit: Option<f64>,
}

#[derive(Debug, Clone, Serialize)]
pub struct JournalReport {
    /// 4 KiB appended to a growing file, then `fdatasync`, in a loop.
    pub fsync_append_page: Phase,
    /// 4 KiB overwritten in a preallocated region, then `fdatasync`, in a loop: the cheapest
    /// durable write this disk offers, and the bar the 1-writer figure is compared with.
    pub fsync_overwrite_page: Phase,
    pub journal_1_writer: Phase,
    pub writers: usize,
    pub journal_n_writers: Phase,
    /// 1 writer ÷ the faster of the two fsync loops (target ≥ 0.5).
    pub ratio_1_writer_to_fsync: f64,
    /// N writers ÷ 1 writer (target ≥ 5 for 8 writers).
    pub ratio_n_to_1: f64,
    pub events_verified: usize,
    pub broken_chains: usize,
}

/// Run the journal benchmark; `progress` receives one line per phase.
pub fn journal(opts: &JournalOptions, progress: &mut dyn FnMut(&str)) -> Result<JournalReport> {
    let base = opts
        .dir
        .join(format!("vouch-bench-journal-{}", std::process::id()));
    if base.exists() {
        std::fs::remove_dir_all(&base)
            .with_context(|| format!("remove the old scratch folder {}", base.display()))?;
    }
    std::fs::create_dir_all(&base)
        .with_context(|| format!("create the scratch folder {}", base.display()))?;
    let result = journal_in(&base, opts, progress);
    // Leave nothing behind, whatever happened.
    let _ = std::fs::remove_dir_all(&base);
    result
}

fn journal_in(
    base: &Path,
    opts: &JournalOptions,
    progress: &mut dyn FnMut(&str),
) -> Result<JournalReport> {
    let secs = opts.phase.as_secs_f64();
    progress(&format!(
        "1/4 fsync loop, growing file: 4 KiB write + fdatasync for {secs:.1} s…"
    ));
    let fsync_append_page = fsync_loop(&base.join("fsync-append.dat"), opts.phase, false)?;
    progress(&format!("    {:.0} ops/s", fsync_append_page.ops_per_s));
    progress(&format!(
        "2/4 fsync loop, preallocated file: 4 KiB overwrite + fdatasync for {secs:.1} s…"
    ));
    let fsync_overwrite_page = fsync_loop(&base.join("fsync-overwrite.dat"), opts.phase, true)?;
    progress(&format!("    {:.0} ops/s", fsync_overwrite_page.ops_per_s));

    let store = Arc::new(
        SqliteStore::open(&base.join("vouch.db")).map_err(|e| anyhow!("open the store: {e}"))?,
    );
    progress(&format!(
        "3/4 journal, 1 writer: durable appends for {secs:.1} s…"
    ));
    let journal_1_writer = appends(&store, 1, opts.phase)?;
    progress(&format!("    {:.0} appends/s", journal_1_writer.ops_per_s));
    progress(&format!(
        "4/4 journal, {} writers (one run each): durable appends for {secs:.1} s…",
        opts.writers
    ));
    let journal_n_writers = appends(&store, opts.writers, opts.phase)?;
    progress(&format!("    {:.0} appends/s", journal_n_writers.ops_per_s));
    let verified = store
        .verify()
        .map_err(|e| anyhow!("verify the chains: {e}"))?;

    let fsync_best = fsync_append_page
        .ops_per_s
        .max(fsync_overwrite_page.ops_per_s);
    Ok(JournalReport {
        ratio_1_writer_to_fsync: journal_1_writer.ops_per_s / fsync_best,
        ratio_n_to_1: journal_n_writers.ops_per_s / journal_1_writer.ops_per_s,
        fsync_append_page,
        fsync_overwrite_page,
        journal_1_writer,
        writers: opts.writers,
        journal_n_writers,
        events_verified: verified.events,
        broken_chains: verified.breaks.len(),
    })
}

/// One page written and made durable per operation, for `phase`.
fn fsync_loop(path: &Path, phase: Duration, overwrite: bool) -> Result<Phase> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("create {}", path.display()))?;
    let page = vec![0x5au8; PAGE_BYTES];
    if overwrite {
        // Preallocate and make the size durable first, so the loop pays for data only.
        for _ in 0..OVERWRITE_PAGES {
            f.write_all(&page)?;
        }
        f.sync_all()?;
    }
    let start = Instant::now();
    let mut ops = 0u64;
    while start.elapsed() < phase {
        if overwrite {
            f.seek(SeekFrom::Start((ops % OVERWRITE_PAGES) * PAGE_BYTES as u64))?;
        }
        f.write_all(&page)?;
        f.sync_data()
            .with_context(|| format!("fdatasync {}", path.display()))?;
        ops += 1;
    }
    let seconds = start.elapsed().as_secs_f64();
    Ok(Phase {
        ops,
        seconds,
        ops_per_s: ops as f64 / seconds,
        appends_per_commit: None,
    })
}

/// `writers` threads, each appending to its own run until `phase` has passed.
fn appends(store: &Arc<SqliteStore>, writers: usize, phase: Duration) -> Result<Phase> {
    let mut runs = Vec::with_capacity(writers);
    for w in 0..writers {
        let id = format!("bench-{writers}-{w}");
        store
            .create_run(&NewRun {
                id: id.clone(),
                trigger: vouch_core::TriggerKind::Interactive,
                title: "vouch-bench journal".into(),
                chain_root: id.clone(),
                parent: None,
                scope: id.clone(),
                spec: json!({}),
                created_ms: 0,
            })
            .map_err(|e| anyhow!("create run {id}: {e}"))?;
        runs.push(id);
    }
    let before = store.write_stats();
    let start = Instant::now();
    let counts = std::thread::scope(|scope| {
        let handles: Vec<_> = runs
            .iter()
            .map(|run| {
                let store = store.clone();
                scope.spawn(move || -> Result<u64> {
                    // A typical small event: a payload hash and a line of text.
                    let body = json!({"payload_hash": "ab".repeat(32), "note": "a typical small event body"});
                    let mut n = 0u64;
                    while start.elapsed() < phase {
                        let ev = NewEvent::new(EventKind::ToolCalled, n as i64, body.clone());
                        store
                            .append(run, &ev)
                            .map_err(|e| anyhow!("append to {run}: {e}"))?;
                        n += 1;
                    }
                    Ok(n)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().map_err(|_| anyhow!("a writer thread panicked"))?)
            .collect::<Result<Vec<u64>>>()
    })?;
    let seconds = start.elapsed().as_secs_f64();
    let after = store.write_stats();
    let ops: u64 = counts.iter().sum();
    let commits = after.commits.saturating_sub(before.commits);
    Ok(Phase {
        ops,
        seconds,
        ops_per_s: ops as f64 / seconds,
        appends_per_commit: (commits > 0).then(|| ops as f64 / commits as f64),
    })
}

/// The human table.
pub fn render(r: &JournalReport, command: &str) -> String {
    let batch = |p: &Phase| {
        p.appends_per_commit
            .map(|b| format!("{b:.1}"))
            .unwrap_or_else(|| "-".into())
    };
    let verdict = |ok: bool| if ok { "meets" } else { "MISSES" };
    let mut out = String::new();
    out.push_str(&format!("vouch-bench journal   ({command})\n\n"));
    out.push_str(&format!(
        "{:<46} {:>12} {:>16}\n",
        "measurement", "ops/s", "appends/commit"
    ));
    out.push_str(&format!(
        "{:<46} {:>12.0} {:>16}\n",
        "fsync loop: 4 KiB append + fdatasync", r.fsync_append_page.ops_per_s, "-"
    ));
    out.push_str(&format!(
        "{:<46} {:>12.0} {:>16}\n",
        "fsync loop: 4 KiB overwrite + fdatasync", r.fsync_overwrite_page.ops_per_s, "-"
    ));
    out.push_str(&format!(
        "{:<46} {:>12.0} {:>16}\n",
        "journal: 1 writer, durable appends",
        r.journal_1_writer.ops_per_s,
        batch(&r.journal_1_writer)
    ));
    out.push_str(&format!(
        "{:<46} {:>12.0} {:>16}\n",
        format!("journal: {} writers, durable appends", r.writers),
        r.journal_n_writers.ops_per_s,
        batch(&r.journal_n_writers)
    ));
    out.push('\n');
    out.push_str(&format!(
        "1 writer ÷ fastest fsync loop   {:>6.2}×   (target ≥ 0.50×: {})\n",
        r.ratio_1_writer_to_fsync,
        verdict(r.ratio_1_writer_to_fsync >= 0.5)
    ));
    out.push_str(&format!(
        "{} writers ÷ 1 writer            {:>6.2}×   (target ≥ 5.00× for 8 writers: {})\n",
        r.writers,
        r.ratio_n_to_1,
        verdict(r.ratio_n_to_1 >= 5.0)
    ));
    out.push_str(&format!(
        "{} events appended and verified, {} broken chains\n",
        r.events_verified, r.broken_chains
    ));
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn options_are_checked_before_anything_runs() {
        let dir = tempfile::tempdir().unwrap();
        assert!(JournalOptions::new(0.0, 8, dir.path().into()).is_err());
        assert!(JournalOptions::new(f64::NAN, 8, dir.path().into()).is_err());
        assert!(JournalOptions::new(1.0, 1, dir.path().into()).is_err());
        assert!(JournalOptions::new(1.0, 8, dir.path().join("absent")).is_err());
        assert!(JournalOptions::new(1.0, 8, dir.path().into()).is_ok());
    }

    #[test]
    fn a_short_run_measures_every_phase_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let opts = JournalOptions::new(0.2, 2, dir.path().into()).unwrap();
        let mut lines = vec![];
        let r = journal(&opts, &mut |l| lines.push(l.to_string())).unwrap();
        assert!(r.fsync_append_page.ops > 0 && r.journal_n_writers.ops > 0);
        assert_eq!(r.broken_chains, 0);
        assert_eq!(
            r.events_verified as u64,
            r.journal_1_writer.ops + r.journal_n_writers.ops
        );
        assert!(lines.iter().any(|l| l.starts_with("4/4")));
        assert!(render(&r, "test").contains("1 writer ÷ fastest fsync loop"));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
