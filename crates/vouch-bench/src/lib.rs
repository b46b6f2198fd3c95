//! Storage benchmarks for vouch.
//!
//! `journal` measures, on one disk and in one sitting, the physical limit of durable writes
//! (a loop of one 4 KiB page write plus `fdatasync`) and the rate of durable journal appends
//! with one writer and with N concurrent writers (one run each). The four measurements are
//! interleaved in rounds so that background load on a shared machine falls on all of them. Every append is durable when
//! it returns, so the 1-writer figure is bounded by the fsync loop, and N writers can only go
//! faster through group commit (several appends per fsync).
//!
//! The library holds the measurement so that other binaries (the `vouch` CLI) can call it;
//! the `vouch-bench` binary is a thin clap front end.

mod commit_loop;
mod floor;
pub use commit_loop::{sqlite_commits_per_s, COMMIT_LOOP_SECONDS_MAX};
pub use floor::{floor_runs_per_s, FLOOR_SECONDS_MAX};

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;
use serde_json::json;
use std::io::{Seek, SeekFrom, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};
use vouch_store::{EventKind, NewEvent, NewRun, Store};
use vouch_store_sqlite::SqliteStore;

/// Longest phase accepted (a typo like `--seconds 3000` should not hold the disk for hours).
pub const PHASE_SECONDS_MAX: f64 = 600.0;
/// Shortest phase accepted.
pub const PHASE_SECONDS_MIN: f64 = 0.2;
/// Shortest slice of a phase in one round: below this the fsync figures are noise.
pub const SLICE_SECONDS_MIN: f64 = 0.1;
/// Most interleaved rounds accepted.
pub const ROUNDS_MAX: usize = 100;
/// Most concurrent writers (threads) accepted.
pub const WRITERS_MAX: usize = 256;
/// The size of one page in the fsync loop.
pub const PAGE_BYTES: usize = 4096;
/// Pages the overwrite loop cycles through (a preallocated region, like a recycled WAL).
const OVERWRITE_PAGES: u64 = 256;

/// Validated settings for [`journal`].
#[derive(Debug, Clone)]
pub struct JournalOptions {
    /// Total duration of each measurement, summed over the rounds.
    pub phase: Duration,
    /// Concurrent writers of the last phase.
    pub writers: usize,
    /// Parent folder of the scratch folder; the disk being measured.
    pub dir: PathBuf,
    /// Interleaved rounds the phase is split into.
    pub rounds: usize,
}

impl JournalOptions {
    /// Check raw values (seconds, writers, folder) and derive the settings.
    pub fn new(seconds: f64, writers: usize, rounds: usize, dir: PathBuf) -> Result<Self> {
        if !seconds.is_finite() || !(PHASE_SECONDS_MIN..=PHASE_SECONDS_MAX).contains(&seconds) {
            bail!("--seconds {seconds}: give a phase length between {PHASE_SECONDS_MIN} and {PHASE_SECONDS_MAX} seconds");
        }
        if !(2..=WRITERS_MAX).contains(&writers) {
            bail!("--writers {writers}: give between 2 and {WRITERS_MAX} concurrent writers");
        }
        if !(1..=ROUNDS_MAX).contains(&rounds) {
            bail!("--rounds {rounds}: give between 1 and {ROUNDS_MAX} rounds");
        }
        if seconds / (rounds as f64) < SLICE_SECONDS_MIN {
            bail!("--seconds {seconds} over --rounds {rounds} leaves slices under {SLICE_SECONDS_MIN} s; measure longer or in fewer rounds");
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
            rounds,
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
    /// The interleaved rounds, in order.
    pub rounds: Vec<Round>,
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
    let mut append_file = FsyncFile::create(&base.join("fsync-append.dat"), false)?;
    let mut overwrite_file = FsyncFile::create(&base.join("fsync-overwrite.dat"), true)?;
    let store = Arc::new(
        SqliteStore::open(&base.join("vouch.db")).map_err(|e| anyhow!("open the store: {e}"))?,
    );
    let one_run = create_runs(&store, "bench-1", 1)?;
    let n_runs = create_runs(&store, &format!("bench-{}", opts.writers), opts.writers)?;

    // The disk is shared with whatever else runs on the machine; interleaving the four
    // measurements round by round exposes each of them to the same background load, so the
    // ratios compare like with like.
    let slice = opts.phase / opts.rounds as u32;
    let mut totals = [Totals::default(); 4];
    let mut rounds = Vec::with_capacity(opts.rounds);
    for round in 1..=opts.rounds {
        progress(&format!(
            "round {round}/{}: fsync loops, 1 writer, {} writers, {:.1} s each…",
            opts.rounds,
            opts.writers,
            slice.as_secs_f64()
        ));
        let r = [
            append_file.run(slice)?,
            overwrite_file.run(slice)?,
            appends(&store, &one_run, slice)?,
            appends(&store, &n_runs, slice)?,
        ];
        for (t, m) in totals.iter_mut().zip(&r) {
            t.add(m);
        }
        let round_report = Round::new(&r);
        progress(&format!(
            "    fsync {:.0}/{:.0} ops/s · 1 writer {:.0} appends/s ({:.2}×) · {} writers {:.0} appends/s ({:.2}×)",
            r[0].ops_per_s(),
            r[1].ops_per_s(),
            r[2].ops_per_s(),
            round_report.ratio_1_writer_to_fsync,
            opts.writers,
            r[3].ops_per_s(),
            round_report.ratio_n_to_1,
        ));
        rounds.push(round_report);
    }
    let verified = store
        .verify()
        .map_err(|e| anyhow!("verify the chains: {e}"))?;
    let [fsync_append_page, fsync_overwrite_page, journal_1_writer, journal_n_writers] =
        totals.map(|t| t.phase());
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
        rounds,
        events_verified: verified.events,
        broken_chains: verified.breaks.len(),
    })
}

/// What one measurement slice did.
#[derive(Debug, Clone, Copy, Default)]
struct Measured {
    ops: u64,
    seconds: f64,
    commits: u64,
}

impl Measured {
    fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.seconds
    }
}

#[derive(Debug, Clone, Copy, Default)]
struct Totals {
    ops: u64,
    seconds: f64,
    commits: u64,
}

impl Totals {
    fn add(&mut self, m: &Measured) {
        self.ops += m.ops;
        self.seconds += m.seconds;
        self.commits += m.commits;
    }
    fn phase(self) -> Phase {
        Phase {
            ops: self.ops,
            seconds: self.seconds,
            ops_per_s: self.ops as f64 / self.seconds,
            appends_per_commit: (self.commits > 0).then(|| self.ops as f64 / self.commits as f64),
        }
    }
}

/// One round's ratios (the spread across rounds shows how steady the machine was).
#[derive(Debug, Clone, Serialize)]
pub struct Round {
    pub fsync_append_page_per_s: f64,
    pub fsync_overwrite_page_per_s: f64,
    pub journal_1_writer_per_s: f64,
    pub journal_n_writers_per_s: f64,
    pub ratio_1_writer_to_fsync: f64,
    pub ratio_n_to_1: f64,
}

impl Round {
    fn new(m: &[Measured; 4]) -> Round {
        let fsync_best = m[0].ops_per_s().max(m[1].ops_per_s());
        Round {
            fsync_append_page_per_s: m[0].ops_per_s(),
            fsync_overwrite_page_per_s: m[1].ops_per_s(),
            journal_1_writer_per_s: m[2].ops_per_s(),
            journal_n_writers_per_s: m[3].ops_per_s(),
            ratio_1_writer_to_fsync: m[2].ops_per_s() / fsync_best,
            ratio_n_to_1: m[3].ops_per_s() / m[2].ops_per_s(),
        }
    }
}

/// A file that takes one page and an `fdatasync` per operation.
struct FsyncFile {
    file: std::fs::File,
    path: PathBuf,
    overwrite: bool,
    written: u64,
}

impl FsyncFile {
    /// `overwrite`: cycle through a preallocated region whose size is already durable, like a
    /// recycled WAL; otherwise append, so every sync also records a new file size.
    fn create(path: &Path, overwrite: bool) -> Result<FsyncFile> {
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(path)
            .with_context(|| format!("create {}", path.display()))?;
        if overwrite {
            let page = [0x5au8; PAGE_BYTES];
            for _ in 0..OVERWRITE_PAGES {
                file.write_all(&page)?;
            }
            file.sync_all()
                .with_context(|| format!("fsync {}", path.display()))?;
        }
        Ok(FsyncFile {
            file,
            path: path.to_path_buf(),
            overwrite,
            written: 0,
        })
    }

    fn run(&mut self, slice: Duration) -> Result<Measured> {
        let page = [0x5au8; PAGE_BYTES];
        let start = Instant::now();
        let mut ops = 0u64;
        while start.elapsed() < slice {
            if self.overwrite {
                let offset = (self.written % OVERWRITE_PAGES) * PAGE_BYTES as u64;
                self.file.seek(SeekFrom::Start(offset))?;
            }
            self.file.write_all(&page)?;
            self.file
                .sync_data()
                .with_context(|| format!("fdatasync {}", self.path.display()))?;
            self.written += 1;
            ops += 1;
        }
        Ok(Measured {
            ops,
            seconds: start.elapsed().as_secs_f64(),
            commits: 0,
        })
    }
}

fn create_runs(store: &SqliteStore, prefix: &str, count: usize) -> Result<Vec<String>> {
    let mut runs = Vec::with_capacity(count);
    for w in 0..count {
        let id = format!("{prefix}-{w}");
        store
            .create_run(&NewRun {
                state: vouch_core::RunState::Created,
                id: id.clone(),
                trigger: vouch_core::TriggerKind::Interactive,
                title: "vouch-bench journal".into(),
                chain_root: id.clone(),
                parent: None,
                scope: id.clone(),
                spec: json!({}),
                created_ms: 0,
                lease: None,
            })
            .map_err(|e| anyhow!("create run {id}: {e}"))?;
        runs.push(id);
    }
    Ok(runs)
}

/// One thread per run, each appending to its run until `slice` has passed.
fn appends(store: &Arc<SqliteStore>, runs: &[String], slice: Duration) -> Result<Measured> {
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
                    while start.elapsed() < slice {
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
    Ok(Measured {
        ops: counts.iter().sum(),
        seconds,
        commits: after.commits.saturating_sub(before.commits),
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
    let spread = |f: fn(&Round) -> f64| {
        let (lo, hi) = r
            .rounds
            .iter()
            .map(f)
            .fold((f64::INFINITY, 0.0f64), |(lo, hi), x| {
                (lo.min(x), hi.max(x))
            });
        format!("rounds {lo:.2}–{hi:.2}×")
    };
    out.push_str(&format!(
        "1 writer ÷ fastest fsync loop   {:>6.2}×   ({}; target ≥ 0.50×: {})\n",
        r.ratio_1_writer_to_fsync,
        spread(|x| x.ratio_1_writer_to_fsync),
        verdict(r.ratio_1_writer_to_fsync >= 0.5)
    ));
    out.push_str(&format!(
        "{} writers ÷ 1 writer            {:>6.2}×   ({}; target ≥ 5.00× for 8 writers: {})\n",
        r.writers,
        r.ratio_n_to_1,
        spread(|x| x.ratio_n_to_1),
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
        let d = || dir.path().to_path_buf();
        assert!(JournalOptions::new(0.0, 8, 1, d()).is_err());
        assert!(JournalOptions::new(f64::NAN, 8, 1, d()).is_err());
        assert!(JournalOptions::new(1.0, 1, 1, d()).is_err());
        assert!(JournalOptions::new(1.0, 8, 0, d()).is_err());
        assert!(
            JournalOptions::new(1.0, 8, 20, d()).is_err(),
            "50 ms slices"
        );
        assert!(JournalOptions::new(1.0, 8, 1, dir.path().join("absent")).is_err());
        assert!(JournalOptions::new(1.0, 8, 5, d()).is_ok());
    }

    #[test]
    fn a_short_run_measures_every_phase_and_cleans_up() {
        let dir = tempfile::tempdir().unwrap();
        let opts = JournalOptions::new(0.4, 2, 2, dir.path().into()).unwrap();
        let mut lines = vec![];
        let r = journal(&opts, &mut |l| lines.push(l.to_string())).unwrap();
        assert!(r.fsync_append_page.ops > 0 && r.journal_n_writers.ops > 0);
        assert_eq!(r.broken_chains, 0);
        assert_eq!(
            r.events_verified as u64,
            r.journal_1_writer.ops + r.journal_n_writers.ops
        );
        assert_eq!(r.rounds.len(), 2);
        assert!(lines.iter().any(|l| l.starts_with("round 2/2")));
        assert!(render(&r, "test").contains("1 writer ÷ fastest fsync loop"));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
