//! The floor of a one-save run: its durable operations with no host logic in between, on the
//! same disk and in the same process as the runs compared with it (`vouch bench floor`,
//! `vouch bench runs`). One "floor run" is what a scripted one-save run must wait for:
//!
//! 1. the synced commit before the save (a WAL commit, `synchronous = FULL`);
//! 2. the saved file: written under a temporary name, fsynced, renamed, and its folder fsynced;
//! 3. the terminal synced commit.
//!
//! A run's creation is committed without an fsync of its own (contract §3.4.2), so it is not
//! part of the floor. Anything a run costs beyond these is the host's own work.

use anyhow::{bail, Context, Result};
use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// Longest floor loop accepted.
pub const FLOOR_SECONDS_MAX: f64 = 60.0;

/// Floor runs per second in a scratch folder under `dir`, looped for `seconds`.
pub fn floor_runs_per_s(dir: &Path, seconds: f64) -> Result<f64> {
    if !seconds.is_finite() || seconds <= 0.0 || seconds > FLOOR_SECONDS_MAX {
        bail!("floor loop of {seconds} s: give between 0 and {FLOOR_SECONDS_MAX} seconds");
    }
    let scratch = dir.join(format!("vouch-floor-{}", std::process::id()));
    std::fs::create_dir_all(scratch.join("files"))
        .with_context(|| format!("create {}", scratch.display()))?;
    let result = floor_loop(&scratch, Duration::from_secs_f64(seconds));
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

fn floor_loop(scratch: &Path, length: Duration) -> Result<f64> {
    let conn = rusqlite::Connection::open(scratch.join("floor.db")).context("open floor.db")?;
    conn.pragma_update(None, "journal_mode", "WAL")?;
    conn.pragma_update(None, "synchronous", "FULL")?;
    conn.execute_batch("CREATE TABLE t (n INTEGER NOT NULL, body TEXT NOT NULL)")?;
    let mut insert = conn.prepare("INSERT INTO t (n, body) VALUES (?1, ?2)")?;
    let files = scratch.join("files");
    let start = Instant::now();
    let mut n: i64 = 0;
    while start.elapsed() < length {
        // Each statement outside a transaction is its own durable commit.
        insert.execute(rusqlite::params![n, "before the save"])?;
        save(&files, n)?;
        insert.execute(rusqlite::params![n, "terminal"])?;
        n += 1;
    }
    Ok(n as f64 / start.elapsed().as_secs_f64())
}

/// The save's own syncs, as the folder provider does them: a temporary name, fsync, rename,
/// fsync of the folder.
fn save(files: &Path, n: i64) -> Result<()> {
    let tmp = files.join(format!(".{n}.md.tmp"));
    let dest = files.join(format!("{n}.md"));
    let mut f = std::fs::File::create(&tmp).with_context(|| format!("create {}", tmp.display()))?;
    f.write_all(format!("run {n}\n").as_bytes())?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, &dest)?;
    std::fs::File::open(files)?.sync_all()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_saves_commits_and_cleans_up() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rate = floor_runs_per_s(dir.path(), 0.2).expect("floor");
        assert!(rate > 0.0, "no floor run in 0.2 s: {rate}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("read").collect();
        assert!(left.is_empty(), "scratch left behind: {left:?}");
    }

    #[test]
    fn an_unbounded_floor_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(floor_runs_per_s(dir.path(), 1e9).is_err());
        assert!(floor_runs_per_s(dir.path(), 0.0).is_err());
    }
}
