//! The embedded vouch store: bundled SQLite in one file under the home.
//!
//! Durability: WAL with `synchronous=FULL`, so a write is on disk when its method returns —
//! except a run's creation (`create_run`), which is committed without its own fsync
//! (`synchronous=NORMAL` for a batch of nothing else): it is in the WAL file, so it survives
//! the process's death at once, and on disk with the next synced commit, which the run's first
//! durability point is (contract §3.4.2).
//!
//! Group commit: every write — appends and all the others — is a job handed over a bounded
//! channel ([`WRITE_QUEUE_MAX`]) to one writer thread that owns the only write connection. It
//! drains whatever is queued (up to [`GROUP_COMMIT_BATCH_MAX`] jobs), runs the jobs inside one
//! transaction, commits once — one fsync for the whole batch — and only then answers the
//! callers. Multi-statement jobs run in their own savepoint, so a failing job rolls back alone;
//! an append is one statement and needs none. Routing every write through the writer (rather
//! than only appends) means SQLite never sees two writers of its own, so `SQLITE_BUSY` can only
//! come from another process, and a ledger intent or an `end_run` shares the fsync of the
//! appends around it.
//!
//! The costly part of an append — serializing the body and canonicalizing the event for its
//! hash — runs on the caller's thread ([`vouch_store::EventContent`]); the writer only finds
//! the next seq, hashes, and inserts.
//!
//! Reads use a small pool of their own connections ([`READ_CONNECTIONS_MAX`]); WAL gives each
//! a consistent snapshot while the writer commits.

mod aggregates;
mod board;
mod cards;
mod damage;
mod identity;
mod ledger;
mod outbox;
mod runs;
mod schedules;
mod schema;
mod tokens;

use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::{Arc, Condvar, Mutex};
use vouch_core::{EndedBy, Outcome, RunState, TriggerKind};
use vouch_store::codec::{
    self, enum_text, json_text, PreparedEvent, CARD_COLS, JOURNAL_COLS, LEDGER_COLS, OUTBOX_COLS,
    RUN_COLS, SCHEDULE_COLS, TOKEN_COLS,
};
use vouch_store::{
    verify_chain, Card, CardState, Decision, EndResult, EventEntry, EventKind, JournalEntry,
    LedgerEntry, LedgerIntent, LedgerState, NewEvent, NewRun, OutboxFailure, OutboxRow, RunRecord,
    Schedule, Store, StoreError, StoreResult, Terminal, TerminalPlace, VerifyReport, GENESIS_HASH,
};
use vouch_store::{ApiToken, TamperForTests};

use cards::card_row;
use ledger::ledger_row;
use runs::{journal_row, run_row};

/// The schema version a store has once opened (`PRAGMA user_version`).
pub const SCHEMA_VERSION: usize = schema::MIGRATIONS.len();

/// Jobs committed together at most.
pub const GROUP_COMMIT_BATCH_MAX: usize = 256;
/// How long the writer waits for the callers of its previous batch before committing.
pub const GROUP_COMMIT_WAIT_US: u64 = 200;
/// Jobs waiting for the writer at most (callers block beyond this: backpressure).
pub const WRITE_QUEUE_MAX: usize = 4096;
/// How long SQLite waits for another process's lock before reporting busy.
pub const BUSY_TIMEOUT_MS: u64 = 10_000;
/// Read connections open at most (each holds a file descriptor and a page cache).
pub const READ_CONNECTIONS_MAX: usize = 4;
/// Largest event body or payload accepted (the same in every backend).
pub use vouch_store::codec::BODY_BYTES_MAX;

type Finish = Box<dyn FnOnce(Option<&str>) + Send>;
/// A write job: given the writer's connection inside an open transaction (or, when the
/// transaction could not begin, the reason), it does its work and returns how to answer its
/// caller once the commit's fate is known.
type Work = Box<dyn FnOnce(Result<&Connection, &str>) -> Finish + Send>;

struct Job {
    work: Work,
    /// Whether the commit carrying this job must reach the disk before the caller is
    /// answered (every write but a run's creation).
    sync: bool,
}

/// Counters of the writer thread, for benchmarks and diagnostics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Transactions committed.
    pub commits: u64,
    /// Of those, the ones synced to disk before answering (one fsync each).
    pub synced: u64,
    /// Jobs (write calls) those transactions carried.
    pub jobs: u64,
}

#[derive(Default)]
struct Counters {
    commits: AtomicU64,
    synced: AtomicU64,
    jobs: AtomicU64,
}

pub struct SqliteStore {
    path: PathBuf,
    /// Why the store is read-only; then there is no writer and every write is refused.
    read_only: Option<String>,
    counters: Arc<Counters>,
    /// `None` only while dropping (closing the channel stops the writer thread).
    writer: Option<SyncSender<Job>>,
    handle: Option<std::thread::JoinHandle<()>>,
    readers: ReaderPool,
}

fn db_err(e: rusqlite::Error) -> StoreError {
    use rusqlite::ErrorCode;
    match &e {
        rusqlite::Error::SqliteFailure(f, msg) => match f.code {
            ErrorCode::DatabaseBusy | ErrorCode::DatabaseLocked => {
                StoreError::Retryable(e.to_string())
            }
            ErrorCode::NotADatabase | ErrorCode::DatabaseCorrupt => {
                StoreError::Corrupt(e.to_string())
            }
            ErrorCode::ConstraintViolation => {
                StoreError::Conflict(msg.clone().unwrap_or_else(|| e.to_string()))
            }
            _ => StoreError::Fatal(e.to_string()),
        },
        _ => StoreError::Fatal(e.to_string()),
    }
}

fn corrupt_hint(path: &Path, why: &str) -> StoreError {
    StoreError::Corrupt(format!(
        "{} is not a usable vouch store ({why}); keep a copy of it, then run `vouch init` in an empty folder or point VOUCH_HOME elsewhere",
        path.display()
    ))
}

/// Prepared statements kept per connection (the store runs a few dozen distinct ones).
const STATEMENT_CACHE: usize = 128;

fn open_conn(path: &Path) -> StoreResult<Connection> {
    let conn = Connection::open(path).map_err(|e| corrupt_hint(path, &e.to_string()))?;
    conn.busy_timeout(std::time::Duration::from_millis(BUSY_TIMEOUT_MS))
        .map_err(db_err)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(|e| corrupt_hint(path, &e.to_string()))?;
    conn.pragma_update(None, "synchronous", "FULL")
        .map_err(db_err)?;
    conn.pragma_update(None, "foreign_keys", "ON")
        .map_err(db_err)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(conn)
}

/// How the reader pool opens one more connection.
type Opener = Box<dyn Fn() -> StoreResult<Connection> + Send + Sync>;

/// A read-only connection. SQLite reads a WAL database read-only when it may create or use
/// the `-shm` file; on a write-protected folder it cannot, and then the file is opened
/// `immutable` (read as it is on disk; nobody can write it there anyway).
fn open_ro_conn(path: &Path) -> StoreResult<Connection> {
    use rusqlite::OpenFlags;
    let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
        | OpenFlags::SQLITE_OPEN_URI
        | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let usable = |c: &Connection| {
        c.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
            r.get::<_, i64>(0)
        })
        .is_ok()
    };
    if let Ok(c) = Connection::open_with_flags(path, flags) {
        if usable(&c) {
            c.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
            return Ok(c);
        }
    }
    let mut uri = String::from("file:");
    for ch in path.to_string_lossy().chars() {
        match ch {
            '%' | '?' | '#' => uri.push_str(&format!("%{:02X}", ch as u32)),
            c => uri.push(c),
        }
    }
    uri.push_str("?immutable=1");
    let c =
        Connection::open_with_flags(&uri, flags).map_err(|e| corrupt_hint(path, &e.to_string()))?;
    c.query_row("SELECT count(*) FROM sqlite_master", [], |r| {
        r.get::<_, i64>(0)
    })
    .map_err(|e| corrupt_hint(path, &e.to_string()))?;
    Ok(c)
}

fn migrate(conn: &Connection, path: &Path) -> StoreResult<()> {
    let app: i64 = conn
        .query_row("PRAGMA application_id", [], |r| r.get(0))
        .map_err(|e| corrupt_hint(path, &e.to_string()))?;
    let version: i64 = conn
        .query_row("PRAGMA user_version", [], |r| r.get(0))
        .map_err(db_err)?;
    if app == 0 && version == 0 {
        let tables: i64 = conn
            .query_row("SELECT count(*) FROM sqlite_master", [], |r| r.get(0))
            .map_err(|e| corrupt_hint(path, &e.to_string()))?;
        if tables > 0 {
            return Err(corrupt_hint(
                path,
                "it is a SQLite database of some other program",
            ));
        }
    } else if app != schema::APPLICATION_ID {
        return Err(corrupt_hint(
            path,
            "it is a SQLite database of some other program",
        ));
    }
    if version as usize > schema::MIGRATIONS.len() {
        return Err(StoreError::Fatal(format!(
            "{} was written by a newer vouch (schema {version}); upgrade vouch to open it",
            path.display()
        )));
    }
    for (i, sql) in schema::MIGRATIONS.iter().enumerate().skip(version as usize) {
        let n = i + 1;
        conn.execute_batch(&format!(
            "BEGIN IMMEDIATE; {sql}; PRAGMA user_version = {n}; PRAGMA application_id = {}; COMMIT;",
            schema::APPLICATION_ID
        ))
        .map_err(|e| {
            let _ = conn.execute_batch("ROLLBACK");
            StoreError::Fatal(format!("migration {n} failed: {e}"))
        })?;
    }
    Ok(())
}

fn writer_loop(conn: Connection, rx: Receiver<Job>, counters: Arc<Counters>) {
    // Adaptive group commit: when the last batch had k jobs, k callers are probably about
    // to send again; wait a few microseconds for them instead of paying one fsync each.
    let mut last_batch = 1usize;
    // The connection's `synchronous` setting now (it is opened FULL).
    let mut synchronous = "FULL";
    // The two statements of every batch, prepared once: through the statement cache each
    // use hashed its SQL text. (`PRAGMA synchronous` cannot be held: SQLite runs a PRAGMA
    // once and re-prepares it on its next use, two re-prepares a run as the mode changes.)
    let held = conn
        .prepare("BEGIN IMMEDIATE")
        .and_then(|begin| Ok((begin, conn.prepare("COMMIT")?)));
    let (mut begin, mut commit) = match held {
        Ok(held) => held,
        Err(e) => {
            let msg = format!("the store's writer could not prepare its transaction: {e}");
            for job in rx {
                (job.work)(Err(&msg))(None);
            }
            return;
        }
    };
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        let deadline =
            std::time::Instant::now() + std::time::Duration::from_micros(GROUP_COMMIT_WAIT_US);
        loop {
            while batch.len() < GROUP_COMMIT_BATCH_MAX {
                match rx.try_recv() {
                    Ok(j) => batch.push(j),
                    Err(_) => break,
                }
            }
            if batch.len() >= last_batch || batch.len() >= GROUP_COMMIT_BATCH_MAX {
                break;
            }
            let now = std::time::Instant::now();
            if now >= deadline {
                break;
            }
            match rx.recv_timeout(deadline - now) {
                Ok(j) => batch.push(j),
                Err(_) => break,
            }
        }
        last_batch = batch.len();
        // A batch of nothing but runs' creations is committed without an fsync of its own.
        let sync = batch.iter().any(|j| j.sync);
        let mode = if sync { "FULL" } else { "NORMAL" };
        let begun = if mode != synchronous {
            execute_cached(&conn, &format!("PRAGMA synchronous = {mode}"), [])
                .map(|_| synchronous = mode)
        } else {
            Ok(())
        }
        .and_then(|()| begin.execute([]).map(|_| ()));
        if let Err(e) = begun {
            // Run nothing; answer every caller with the reason.
            let msg = e.to_string();
            for job in batch {
                (job.work)(Err(&msg))(None);
            }
            continue;
        }
        let jobs = batch.len() as u64;
        let mut finishes: Vec<Finish> = Vec::with_capacity(batch.len());
        for job in batch {
            // Some errors (disk full, I/O) make SQLite roll back the whole transaction; the
            // jobs after that must not run in autocommit mode, or they would be committed
            // while the batch reports failure.
            if conn.is_autocommit() {
                finishes.push((job.work)(Err(
                    "an earlier write of the same batch rolled the transaction back",
                )));
            } else {
                finishes.push((job.work)(Ok(&conn)));
            }
        }
        let commit_err = if conn.is_autocommit() {
            Some("the transaction was rolled back by an earlier error".to_string())
        } else {
            match commit.execute([]) {
                Ok(_) => None,
                Err(e) => {
                    let _ = conn.execute_batch("ROLLBACK");
                    Some(e.to_string())
                }
            }
        };
        if commit_err.is_none() {
            counters.commits.fetch_add(1, Ordering::Relaxed);
            if sync {
                counters.synced.fetch_add(1, Ordering::Relaxed);
            }
            counters.jobs.fetch_add(jobs, Ordering::Relaxed);
        }
        for f in finishes {
            f(commit_err.as_deref());
        }
    }
}

/// `Connection::execute` through the connection's statement cache: the writer runs the same
/// few statements for every run, and parsing each again was a tenth of its time.
fn execute_cached<P: rusqlite::Params>(
    c: &Connection,
    sql: &str,
    params: P,
) -> rusqlite::Result<usize> {
    c.prepare_cached(sql)?.execute(params)
}

impl SqliteStore {
    /// Open (creating if needed) the store at `path` and bring its schema up to date.
    pub fn open(path: &Path) -> StoreResult<SqliteStore> {
        if path.is_dir() {
            return Err(corrupt_hint(path, "it is a folder"));
        }
        // A write-protected file (or file system) is a read-only home, not a damaged one.
        // SQLite says so itself (it opens such a file read-only). The file is never opened
        // and closed beside SQLite while the home may be writable: closing any descriptor of
        // the database file drops every POSIX lock this process holds on it, including the
        // shared locks of stores already open here (`vouch serve` opens two), and then another
        // process's last close deletes the WAL under them — they would read a stale snapshot
        // forever after.
        let wconn = match open_conn(path) {
            Ok(c) if c.is_readonly(rusqlite::DatabaseName::Main).unwrap_or(false) => {
                drop(c);
                return Self::open_read_only(
                    path,
                    &format!("{} cannot be written", path.display()),
                );
            }
            Ok(c) => c,
            Err(e) => {
                // Nothing of this store is open yet: probing the file is safe here.
                if let Err(pe) = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open(path)
                {
                    if path.exists()
                        && (pe.kind() == std::io::ErrorKind::PermissionDenied
                            || pe.kind() == std::io::ErrorKind::ReadOnlyFilesystem)
                    {
                        return Self::open_read_only(
                            path,
                            &format!("{} cannot be written ({pe})", path.display()),
                        );
                    }
                }
                // The folder may be write-protected (no room for the WAL files): read-only.
                let dir_locked = path
                    .parent()
                    .and_then(|d| std::fs::metadata(d).ok())
                    .map(|m| m.permissions().readonly())
                    .unwrap_or(false);
                if path.exists() && dir_locked {
                    return Self::open_read_only(path, "its folder cannot be written");
                }
                return Err(e);
            }
        };
        migrate(&wconn, path)?;
        let readers = ReaderPool::new(path.to_path_buf(), open_conn(path)?);
        let (tx, rx) = sync_channel::<Job>(WRITE_QUEUE_MAX);
        let counters = Arc::new(Counters::default());
        let writer_counters = counters.clone();
        let handle = std::thread::Builder::new()
            .name("vouch-store-writer".into())
            .spawn(move || writer_loop(wconn, rx, writer_counters))
            .map_err(|e| StoreError::Fatal(format!("start the writer thread: {e}")))?;
        Ok(SqliteStore {
            path: path.to_path_buf(),
            read_only: None,
            counters,
            writer: Some(tx),
            handle: Some(handle),
            readers,
        })
    }

    /// Open an existing store for reading only: nothing is written (no migration, no WAL
    /// files created, every write refused with [`StoreError::ReadOnly`]). `why` says why.
    pub fn open_read_only(path: &Path, why: &str) -> StoreResult<SqliteStore> {
        if !path.is_file() {
            return Err(corrupt_hint(path, "there is no store file to read"));
        }
        let conn = open_ro_conn(path)?;
        let app: i64 = conn
            .query_row("PRAGMA application_id", [], |r| r.get(0))
            .map_err(|e| corrupt_hint(path, &e.to_string()))?;
        let version: i64 = conn
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(db_err)?;
        if app != schema::APPLICATION_ID {
            return Err(corrupt_hint(path, "it is not a vouch store"));
        }
        if version as usize != schema::MIGRATIONS.len() {
            return Err(StoreError::ReadOnly(format!(
                "{} has schema {version} and this vouch reads schema {}; it is read-only ({why}), so it cannot be upgraded: open it once writable, or use the vouch that wrote it",
                path.display(),
                schema::MIGRATIONS.len()
            )));
        }
        let p = path.to_path_buf();
        let readers = ReaderPool::with_opener(Box::new(move || open_ro_conn(&p)), conn);
        Ok(SqliteStore {
            path: path.to_path_buf(),
            read_only: Some(why.to_string()),
            counters: Arc::new(Counters::default()),
            writer: None,
            handle: None,
            readers,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Commits and jobs since the store was opened (appends per fsync = jobs ÷ commits).
    pub fn write_stats(&self) -> WriteStats {
        WriteStats {
            commits: self.counters.commits.load(Ordering::Relaxed),
            synced: self.counters.synced.load(Ordering::Relaxed),
            jobs: self.counters.jobs.load(Ordering::Relaxed),
        }
    }

    /// Run `f` in the writer's next group commit, inside its own savepoint so that a failing
    /// job leaves the rest of the batch intact; returns once the batch is durable.
    fn write<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        self.submit(true, move |conn| {
            conn.prepare_cached("SAVEPOINT job")
                .and_then(|mut st| st.execute([]))
                .map_err(db_err)?;
            let r = f(conn);
            let end = if r.is_ok() {
                conn.prepare_cached("RELEASE job")
                    .and_then(|mut st| st.execute([]))
                    .map(|_| ())
            } else {
                conn.execute_batch("ROLLBACK TO job; RELEASE job")
            };
            end.map_err(db_err)?;
            r
        })
    }

    /// Like [`write`](Self::write) for jobs whose only change is one statement: SQLite
    /// undoes a failed statement by itself, so no savepoint is needed (two statements less
    /// per append, which is the hot path).
    fn write_one<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        self.submit(true, f)
    }

    /// Like [`write_one`](Self::write_one), committed without an fsync of its own: the change
    /// survives this process's death once the call returns (it is in the WAL file), and the
    /// machine's once the next synced commit of this store returns.
    fn write_unsynced<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        self.submit(false, f)
    }

    /// Hand a job to the writer thread and wait for the verdict on its batch.
    fn submit<T: Send + 'static>(
        &self,
        sync: bool,
        f: impl FnOnce(&Connection) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        if let Some(why) = &self.read_only {
            return Err(StoreError::ReadOnly(format!(
                "{} ({why}); read-only commands work, this one needs to write",
                self.path.display()
            )));
        }
        let (tx, rx) = sync_channel::<StoreResult<T>>(1);
        let work: Work = Box::new(move |conn: Result<&Connection, &str>| {
            let res = match conn {
                Ok(conn) => f(conn),
                Err(why) => Err(StoreError::Retryable(format!(
                    "the write did not start: {why}"
                ))),
            };
            Box::new(move |commit_err: Option<&str>| {
                let out = match (commit_err, res) {
                    (_, Err(e)) => Err(e),
                    (Some(m), Ok(_)) => Err(StoreError::Retryable(format!("commit failed: {m}"))),
                    (None, ok) => ok,
                };
                let _ = tx.send(out);
            })
        });
        let sender = self
            .writer
            .as_ref()
            .ok_or_else(|| StoreError::Fatal("store is closed".into()))?;
        sender
            .send(Job { work, sync })
            .map_err(|_| StoreError::Fatal("the writer thread has stopped".into()))?;
        rx.recv().map_err(|_| {
            StoreError::Fatal("the writer thread stopped before answering; reopen the store".into())
        })?
    }

    fn read<T>(&self, f: impl FnOnce(&Connection) -> StoreResult<T>) -> StoreResult<T> {
        let conn = self.readers.take()?;
        let out = f(&conn);
        self.readers.put(conn);
        out
    }
}

/// Read connections, opened on demand up to [`READ_CONNECTIONS_MAX`]. WAL lets every one of
/// them read a consistent snapshot while the writer commits, so readers never wait for the
/// writer and the writer never waits for them; beyond the limit a reader waits for a free
/// connection (a bound on file descriptors and page caches).
struct ReaderPool {
    open: Opener,
    state: Mutex<PoolState>,
    freed: Condvar,
}

struct PoolState {
    idle: Vec<Connection>,
    opened: usize,
}

impl ReaderPool {
    fn new(path: PathBuf, first: Connection) -> ReaderPool {
        Self::with_opener(Box::new(move || open_conn(&path)), first)
    }

    fn with_opener(open: Opener, first: Connection) -> ReaderPool {
        ReaderPool {
            open,
            state: Mutex::new(PoolState {
                idle: vec![first],
                opened: 1,
            }),
            freed: Condvar::new(),
        }
    }

    fn take(&self) -> StoreResult<Connection> {
        let poisoned = |_| StoreError::Fatal("the reader pool lock is poisoned".into());
        let mut st = self.state.lock().map_err(poisoned)?;
        loop {
            if let Some(c) = st.idle.pop() {
                return Ok(c);
            }
            if st.opened < READ_CONNECTIONS_MAX {
                st.opened += 1;
                drop(st);
                return (self.open)().inspect_err(|_| {
                    if let Ok(mut st) = self.state.lock() {
                        st.opened -= 1;
                    }
                });
            }
            st = self.freed.wait(st).map_err(poisoned)?;
        }
    }

    fn put(&self, conn: Connection) {
        if let Ok(mut st) = self.state.lock() {
            st.idle.push(conn);
            self.freed.notify_one();
        }
    }
}

impl Drop for SqliteStore {
    fn drop(&mut self) {
        // Close the channel; the writer finishes what is queued, then returns.
        self.writer.take();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn parse<T: serde::de::DeserializeOwned>(s: &str, what: &str) -> rusqlite::Result<T> {
    codec::enum_from_text(s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(
            0,
            rusqlite::types::Type::Text,
            format!("{what}: {e}").into(),
        )
    })
}

fn json_col(s: &str) -> rusqlite::Result<Value> {
    serde_json::from_str(s).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(0, rusqlite::types::Type::Text, Box::new(e))
    })
}

/// Every run's hash chain, streamed one run at a time; an unreadable event is a break.
fn verify_chains(c: &Connection, report: &mut VerifyReport) -> StoreResult<()> {
    let mut st = c
        .prepare(&format!(
            "SELECT {JOURNAL_COLS} FROM journal ORDER BY run_id, seq"
        ))
        .map_err(db_err)?;
    let mut rows = st.query([]).map_err(db_err)?;
    let mut current: Vec<JournalEntry> = vec![];
    let flush = |entries: &mut Vec<JournalEntry>, report: &mut VerifyReport| {
        if entries.is_empty() {
            return;
        }
        report.runs += 1;
        report.events += entries.len();
        if let Err(b) = verify_chain(entries) {
            report.breaks.push(b);
        }
        entries.clear();
    };
    while let Some(r) = rows.next().map_err(db_err)? {
        let entry = match journal_row(r) {
            Ok(e) => e,
            Err(e) => {
                let run_id: String = r.get(0).unwrap_or_default();
                let seq: i64 = r.get(1).unwrap_or_default();
                report.breaks.push(vouch_store::ChainBreak {
                    run_id,
                    seq,
                    reason: format!("unreadable event: {e}"),
                });
                continue;
            }
        };
        if current
            .first()
            .map(|f| f.run_id != entry.run_id)
            .unwrap_or(false)
        {
            flush(&mut current, report);
        }
        current.push(entry);
    }
    flush(&mut current, report);
    Ok(())
}

/// Damage to the SQLite file itself, each naming what is damaged: SQLite's integrity check,
/// every row of every table read back, the typed rows parsed, and the row checks.
fn sqlite_damage(c: &Connection) -> Vec<String> {
    let mut out = vec![];
    let lines = c.prepare("PRAGMA integrity_check(100)").and_then(|mut st| {
        st.query_map([], |r| r.get::<_, String>(0))?
            .collect::<rusqlite::Result<Vec<_>>>()
    });
    match lines {
        Ok(lines) => out.extend(
            lines
                .into_iter()
                .filter(|l| l != "ok")
                .map(|l| format!("integrity check: {l}")),
        ),
        Err(e) => out.push(format!("the integrity check could not run: {e}")),
    }
    let tables = c
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
        .and_then(|mut st| {
            st.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        });
    let tables = match tables {
        Ok(t) => t,
        Err(e) => {
            out.push(format!("the schema cannot be read: {e}"));
            vec![]
        }
    };
    for t in &tables {
        let read = c
            .prepare(&format!("SELECT * FROM \"{}\"", t.replace('"', "\"\"")))
            .and_then(|mut st| {
                let n = st.column_count();
                let mut rows = st.query([])?;
                while let Some(row) = rows.next()? {
                    for i in 0..n {
                        let _: rusqlite::types::Value = row.get(i)?;
                    }
                }
                Ok(())
            });
        if let Err(e) = read {
            out.push(format!("table {t}: {e}"));
        }
    }
    let parse = |table: &str, sql: String, check: &dyn Fn(&Row) -> rusqlite::Result<()>| {
        c.prepare(&sql)
            .and_then(|mut st| {
                let mut rows = st.query([])?;
                while let Some(row) = rows.next()? {
                    check(row)?;
                }
                Ok(())
            })
            .err()
            .map(|e| format!("table {table}: a row does not read back as a {table} row ({e})"))
    };
    out.extend(parse(
        "runs",
        format!("SELECT {RUN_COLS} FROM runs"),
        &|r| run_row(r).map(|_| ()),
    ));
    out.extend(parse(
        "cards",
        format!("SELECT {CARD_COLS} FROM cards"),
        &|r| card_row(r).map(|_| ()),
    ));
    out.extend(parse(
        "ledger",
        format!("SELECT {LEDGER_COLS} FROM ledger"),
        &|r| ledger_row(r).map(|_| ()),
    ));
    for (what, sql) in vouch_store::ROW_CHECKS {
        let found = c.prepare(sql).and_then(|mut st| {
            st.query_map([], |r| r.get::<_, String>(0))?
                .collect::<rusqlite::Result<Vec<_>>>()
        });
        match found {
            Ok(ids) => out.extend(ids.into_iter().map(|id| format!("{what}: run {id}"))),
            Err(e) => out.push(format!("{what}: the check could not run ({e})")),
        }
    }
    out
}

fn read_err(e: rusqlite::Error) -> StoreError {
    match e {
        rusqlite::Error::FromSqlConversionFailure(..) => {
            StoreError::Corrupt(format!("a stored row does not parse: {e}"))
        }
        other => db_err(other),
    }
}

impl TamperForTests for SqliteStore {
    fn tamper_payload(&self, hash: &str, body: &str) -> StoreResult<bool> {
        let (hash, body) = (hash.to_string(), body.to_string());
        self.write(move |c| {
            c.execute(
                "UPDATE payloads SET body = ?2 WHERE hash = ?1",
                params![hash, body],
            )
            .map(|n| n == 1)
            .map_err(db_err)
        })
    }
}

/// `query_row` through the connection's statement cache: the store's reads run the same few
/// statements over and over, and parsing each again cost more than running it.
fn query_row_cached<T>(
    c: &Connection,
    sql: &str,
    params: impl rusqlite::Params,
    f: impl FnOnce(&Row<'_>) -> rusqlite::Result<T>,
) -> rusqlite::Result<T> {
    c.prepare_cached(sql)?.query_row(params, f)
}

/// Longest duty name (`Store::with_duty`): a lock file's name is made of it.
pub const DUTY_NAME_BYTES_MAX: usize = 32;

impl SqliteStore {
    /// A duty is fenced by an exclusive lock (`flock`) on its own file beside the database,
    /// never on the database file itself (closing any descriptor of it would drop this
    /// process's SQLite locks, see `open`). The kernel lets go when the process dies.
    fn duty_lock(&self, duty: &str, wait: bool) -> StoreResult<Option<std::fs::File>> {
        if duty.is_empty()
            || duty.len() > DUTY_NAME_BYTES_MAX
            || !duty.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
        {
            return Err(StoreError::Fatal(format!(
                "duty name `{duty}`: expected up to {DUTY_NAME_BYTES_MAX} lowercase letters or `_`"
            )));
        }
        let mut name = self.path.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".duty-{duty}.lock"));
        let path = self.path.with_file_name(name);
        let file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|e| {
                StoreError::Fatal(format!("open the duty lock {}: {e}", path.display()))
            })?;
        let deadline = std::time::Instant::now()
            + std::time::Duration::from_millis(if wait { BUSY_TIMEOUT_MS } else { 0 });
        loop {
            match file.try_lock() {
                Ok(()) => return Ok(Some(file)),
                Err(std::fs::TryLockError::WouldBlock) => {}
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(StoreError::Fatal(format!(
                        "lock the duty lock {}: {e}",
                        path.display()
                    )))
                }
            }
            if std::time::Instant::now() >= deadline {
                return Ok(None);
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }
}

impl Store for SqliteStore {
    fn create_run(&self, run: &NewRun) -> StoreResult<()> {
        runs::create_run(self, run)
    }

    fn run(&self, id: &str) -> StoreResult<Option<RunRecord>> {
        runs::run(self, id)
    }

    fn run_state(&self, id: &str) -> StoreResult<Option<RunState>> {
        runs::run_state(self, id)
    }

    fn with_duty(&self, duty: &str, wait: bool, work: &mut dyn FnMut()) -> StoreResult<bool> {
        let Some(lock) = self.duty_lock(duty, wait)? else {
            return Ok(false);
        };
        work();
        // Closing the file lets go of the lock.
        drop(lock);
        Ok(true)
    }

    fn runs(&self, limit: usize) -> StoreResult<Vec<RunRecord>> {
        runs::runs(self, limit)
    }

    fn runs_filtered(
        &self,
        filter: &vouch_store::RunFilter,
        offset: usize,
        limit: usize,
    ) -> StoreResult<Vec<RunRecord>> {
        runs::runs_filtered(self, filter, offset, limit)
    }

    fn set_run_state(&self, id: &str, state: RunState) -> StoreResult<()> {
        runs::set_run_state(self, id, state)
    }

    fn append(&self, run_id: &str, event: &NewEvent) -> StoreResult<JournalEntry> {
        runs::append(self, run_id, event)
    }

    fn append_batch_seq(&self, run_id: &str, events: &[NewEvent]) -> StoreResult<Option<i64>> {
        runs::append_batch_seq(self, run_id, events)
    }
    fn append_batch(&self, run_id: &str, events: &[NewEvent]) -> StoreResult<Vec<JournalEntry>> {
        runs::append_batch(self, run_id, events)
    }

    fn journal(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
        runs::journal(self, run_id)
    }

    fn journal_events(&self, run_id: &str) -> StoreResult<Vec<EventEntry>> {
        runs::journal_events(self, run_id)
    }

    fn journal_since(&self, run_id: &str, after_seq: i64) -> StoreResult<Vec<JournalEntry>> {
        runs::journal_since(self, run_id, after_seq)
    }

    fn read_only(&self) -> Option<String> {
        self.read_only.clone()
    }

    fn verify(&self) -> StoreResult<VerifyReport> {
        self.read(|c| {
            let mut report = VerifyReport {
                runs: 0,
                events: 0,
                breaks: vec![],
                damage: sqlite_damage(c),
            };
            if let Err(e) = verify_chains(c, &mut report) {
                report
                    .damage
                    .push(format!("table journal: not every event can be read ({e})"));
            }
            Ok(report)
        })
    }

    fn end_run(&self, run_id: &str, terminal: &Terminal) -> StoreResult<EndResult> {
        self.end_run_after(run_id, &[], terminal)
    }

    fn end_run_after(
        &self,
        run_id: &str,
        events: &[NewEvent],
        terminal: &Terminal,
    ) -> StoreResult<EndResult> {
        runs::end_run_after(self, run_id, events, terminal)
    }

    fn receipt(&self, run_id: &str) -> StoreResult<Option<String>> {
        runs::receipt(self, run_id)
    }

    fn lease_run(
        &self,
        run_id: &str,
        owner: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> StoreResult<bool> {
        runs::lease_run(self, run_id, owner, now_ms, until_ms)
    }

    fn release_run(&self, run_id: &str, owner: &str) -> StoreResult<()> {
        runs::release_run(self, run_id, owner)
    }

    fn take_over_run(
        &self,
        run_id: &str,
        gone: &str,
        owner: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> StoreResult<bool> {
        runs::take_over_run(self, run_id, gone, owner, now_ms, until_ms)
    }

    fn orphaned_runs(&self, now_ms: i64) -> StoreResult<Vec<RunRecord>> {
        runs::orphaned_runs(self, now_ms)
    }

    fn open_runs(&self) -> StoreResult<Vec<RunRecord>> {
        runs::open_runs(self)
    }

    fn runs_by_prefix(&self, prefix: &str, limit: usize) -> StoreResult<Vec<RunRecord>> {
        runs::runs_by_prefix(self, prefix, limit)
    }

    fn continuation_of(&self, parent: &str) -> StoreResult<Option<RunRecord>> {
        runs::continuation_of(self, parent)
    }

    fn put_payload(&self, hash: &str, canonical_json: &str) -> StoreResult<()> {
        cards::put_payload(self, hash, canonical_json)
    }

    fn payload(&self, hash: &str) -> StoreResult<Option<String>> {
        cards::payload(self, hash)
    }

    fn ledger_intend(&self, entry: &LedgerEntry) -> StoreResult<LedgerIntent> {
        ledger::ledger_intend(self, entry)
    }

    fn ledger_settle(
        &self,
        key: &str,
        state: LedgerState,
        detail: &Value,
        at_ms: i64,
    ) -> StoreResult<()> {
        ledger::ledger_settle(self, key, state, detail, at_ms)
    }

    fn ledger_get(&self, key: &str) -> StoreResult<Option<LedgerEntry>> {
        ledger::ledger_get(self, key)
    }

    fn ledger_list(&self) -> StoreResult<Vec<LedgerEntry>> {
        ledger::ledger_list(self)
    }

    fn open_card(&self, card: &Card) -> StoreResult<()> {
        cards::open_card(self, card)
    }

    fn open_cards(&self) -> StoreResult<Vec<Card>> {
        cards::open_cards(self)
    }

    fn cards_for_run(&self, run_id: &str) -> StoreResult<Vec<Card>> {
        cards::cards_for_run(self, run_id)
    }

    fn decide_card(
        &self,
        run_id: &str,
        delivery: &str,
        payload_hash: &str,
        decision: Decision,
        at_ms: i64,
    ) -> StoreResult<Card> {
        cards::decide_card(self, run_id, delivery, payload_hash, decision, at_ms)
    }

    fn answer_clarify(&self, run_id: &str, answer: &str, at_ms: i64) -> StoreResult<Card> {
        cards::answer_clarify(self, run_id, answer, at_ms)
    }

    fn close_cards(&self, run_id: &str, at_ms: i64) -> StoreResult<u64> {
        cards::close_cards(self, run_id, at_ms)
    }

    fn consume_slot(&self, schedule: &str, slot_ms: i64, run: &NewRun) -> StoreResult<bool> {
        schedules::consume_slot(self, schedule, slot_ms, run)
    }

    fn slot_run(&self, schedule: &str, slot_ms: i64) -> StoreResult<Option<String>> {
        schedules::slot_run(self, schedule, slot_ms)
    }

    fn slots(&self, schedule: &str) -> StoreResult<Vec<(i64, String)>> {
        schedules::slots(self, schedule)
    }

    fn put_schedule(&self, s: &Schedule) -> StoreResult<()> {
        schedules::put_schedule(self, s)
    }

    fn schedules(&self) -> StoreResult<Vec<Schedule>> {
        schedules::schedules(self)
    }

    fn remove_schedule(&self, name: &str) -> StoreResult<bool> {
        schedules::remove_schedule(self, name)
    }

    fn put_token(&self, t: &ApiToken) -> StoreResult<()> {
        tokens::put_token(self, t)
    }

    fn token_by_hash(&self, hash: &str) -> StoreResult<Option<ApiToken>> {
        tokens::token_by_hash(self, hash)
    }

    fn tokens(&self) -> StoreResult<Vec<ApiToken>> {
        tokens::tokens(self)
    }

    fn remove_token(&self, name: &str) -> StoreResult<bool> {
        tokens::remove_token(self, name)
    }

    fn record_damage(&self, found: &[String], at_ms: i64) -> StoreResult<bool> {
        damage::record_damage(self, found, at_ms)
    }

    fn open_damage(&self) -> StoreResult<Vec<vouch_store::DamageRecord>> {
        damage::open_damage(self)
    }

    fn close_damage(&self, how: vouch_store::DamageClosed, at_ms: i64) -> StoreResult<usize> {
        damage::close_damage(self, how, at_ms)
    }

    fn keep_request(
        &self,
        key: &vouch_store::request_keys::RequestKey,
        now_ms: i64,
    ) -> StoreResult<Option<vouch_store::request_keys::KeptRequest>> {
        let k = key.clone();
        self.write(move |conn| {
            let inserted = conn
                .prepare_cached(vouch_store::request_keys::KEEP_REQUEST_SQL)
                .map_err(db_err)?
                .execute(params![k.scope, k.key, k.request, k.answer, now_ms])
                .map_err(db_err)?;
            if inserted == 1 {
                return Ok(None);
            }
            conn.prepare_cached(vouch_store::request_keys::KEPT_REQUEST_SQL)
                .map_err(db_err)?
                .query_row(params![k.scope, k.key], |r| {
                    Ok(vouch_store::request_keys::KeptRequest {
                        request: r.get(0)?,
                        answer: r.get(1)?,
                    })
                })
                .map(Some)
                .map_err(db_err)
        })
    }

    fn outbox_pending(&self) -> StoreResult<Vec<OutboxRow>> {
        outbox::outbox_pending(self)
    }

    fn outbox_mark_sent(&self, id: i64, at_ms: i64) -> StoreResult<()> {
        outbox::outbox_mark_sent(self, id, at_ms)
    }

    fn outbox_for_run(&self, run_id: &str) -> StoreResult<Vec<OutboxRow>> {
        outbox::outbox_for_run(self, run_id)
    }
    fn outbox_failed(
        &self,
        id: i64,
        error: &str,
        misconfigured: bool,
        at_ms: i64,
    ) -> StoreResult<()> {
        outbox::outbox_failed(self, id, error, misconfigured, at_ms)
    }

    fn counts(&self) -> StoreResult<vouch_store::StoreCounts> {
        aggregates::counts(self)
    }
}
