//! The disk's own limit for small durable transactions, as SQLite sees it: a loop of one-row
//! `INSERT` transactions in WAL mode with `synchronous = FULL` (the pragmas the store uses), on
//! the same disk, measured by the same process as the figure it is compared with.

use anyhow::{bail, Context, Result};
use std::path::Path;
use std::time::{Duration, Instant};

/// Longest loop accepted.
pub const COMMIT_LOOP_SECONDS_MAX: f64 = 60.0;

/// One-row `synchronous = FULL` commits per second in a scratch database under `dir`.
pub fn sqlite_commits_per_s(dir: &Path, seconds: f64) -> Result<f64> {
    if !seconds.is_finite() || seconds <= 0.0 || seconds > COMMIT_LOOP_SECONDS_MAX {
        bail!("commit loop of {seconds} s: give between 0 and {COMMIT_LOOP_SECONDS_MAX} seconds");
    }
    let scratch = dir.join(format!("vouch-commit-loop-{}", std::process::id()));
    std::fs::create_dir_all(&scratch).with_context(|| format!("create {}", scratch.display()))?;
    let result = (|| -> Result<f64> {
        let conn = rusqlite::Connection::open(scratch.join("loop.db")).context("open loop.db")?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.execute_batch("CREATE TABLE t (n INTEGER NOT NULL, body TEXT NOT NULL)")?;
        let mut insert = conn.prepare("INSERT INTO t (n, body) VALUES (?1, 'x')")?;
        let deadline = Duration::from_secs_f64(seconds);
        let start = Instant::now();
        let mut n: i64 = 0;
        while start.elapsed() < deadline {
            // Each statement outside a transaction is its own durable commit.
            insert.execute([n])?;
            n += 1;
        }
        Ok(n as f64 / start.elapsed().as_secs_f64())
    })();
    let _ = std::fs::remove_dir_all(&scratch);
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_loop_commits_and_cleans_up() {
        let dir = tempfile::tempdir().expect("tempdir");
        let rate = sqlite_commits_per_s(dir.path(), 0.2).expect("loop");
        assert!(rate > 0.0, "no commit in 0.2 s: {rate}");
        let left: Vec<_> = std::fs::read_dir(dir.path()).expect("read").collect();
        assert!(left.is_empty(), "scratch left behind: {left:?}");
    }

    #[test]
    fn an_unbounded_loop_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        assert!(sqlite_commits_per_s(dir.path(), 1e9).is_err());
        assert!(sqlite_commits_per_s(dir.path(), f64::NAN).is_err());
    }
}
