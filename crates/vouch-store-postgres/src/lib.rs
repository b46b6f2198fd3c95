//! The server vouch store: PostgreSQL, every table inside one schema per store.
//!
//! Same semantics as the SQLite store (the shared conformance suite checks both); what differs
//! is how writers are serialized. SQLite has one writer thread; here every write is its own
//! transaction on a pooled connection at READ COMMITTED, and the one-time decisions are made
//! race-free by PostgreSQL itself:
//!
//! - appends and `end_run` lock the run's row (`FOR NO KEY UPDATE`) before reading the chain's
//!   tail, so appends to one run are serialized and gap-free, while appends to different runs
//!   proceed in parallel;
//! - `consume_slot`, `ledger_intend` and the outbox rely on unique keys (`ON CONFLICT`), so the
//!   loser of a race waits for the winner's commit and then sees its row;
//! - `decide_card` and `answer_clarify` lock the card row, so a second decision sees the first.
//!
//! Durability: commits use `synchronous_commit = on` (set explicitly on every connection), so a
//! write is flushed to the server's WAL when its method returns.
//!
//! The journal's rules are in the schema too (see `schema.rs`): append-only triggers, one
//! terminal event per run, closed after it, and each insert must extend the chain.

mod board;
mod identity;
mod schema;

use postgres::error::SqlState;
use postgres::fallible_iterator::FallibleIterator;
use postgres::types::ToSql;
use postgres::{Client, Config, NoTls, Row, Transaction};
use serde_json::Value;
use std::ops::{Deref, DerefMut};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};
use vouch_core::{EndedBy, Outcome, RunState, TriggerKind};
pub(crate) use vouch_store::codec::corrupt;
use vouch_store::codec::{
    self, enum_text, json_text, PreparedEvent, CARD_COLS, JOURNAL_COLS, LEDGER_COLS, OUTBOX_COLS,
    RUN_COLS, SCHEDULE_COLS, TOKEN_COLS,
};
use vouch_store::{
    verify_chain, Card, CardState, ChainBreak, Decision, EndResult, EventKind, JournalEntry,
    LedgerEntry, LedgerIntent, LedgerState, NewEvent, NewRun, OutboxRow, RunRecord, Schedule,
    Store, StoreError, StoreResult, Terminal, VerifyReport, GENESIS_HASH,
};
use vouch_store::{ApiToken, TamperForTests};

/// The schema version a store has once opened (rows in `vouch_migrations`).
pub const SCHEMA_VERSION: usize = schema::MIGRATIONS.len();
/// Connections a store opens at most, by default (each is a server backend process).
pub const CONNECTIONS_MAX: usize = 8;
/// How long a caller waits for a free pooled connection before `Retryable`, by default.
pub const POOL_WAIT_MS_MAX: u64 = 30_000;
/// How long connecting may take (unless the URL sets `connect_timeout`), by default.
pub const CONNECT_TIMEOUT_MS: u64 = 10_000;
/// How long a statement waits for a row lock before `Retryable` (SQLite's busy timeout).
pub const LOCK_TIMEOUT_MS: u64 = 10_000;

/// Largest event body or payload accepted (the same in every backend).
pub use vouch_store::codec::BODY_BYTES_MAX;
/// Longest schema name PostgreSQL keeps (NAMEDATALEN - 1).
pub const SCHEMA_NAME_BYTES_MAX: usize = 63;

/// Limits of one store's use of the server; [`PostgresStore::open`] uses the defaults.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostgresOptions {
    /// Pooled connections at most (at least 1).
    pub connections_max: usize,
    /// Wait for a free connection at most this long, then `Retryable`.
    pub pool_wait_ms_max: u64,
    /// Connecting may take this long (a `connect_timeout` in the URL wins).
    pub connect_timeout_ms: u64,
    /// A statement waits for a lock this long, then `Retryable` (PostgreSQL `lock_timeout`).
    pub lock_timeout_ms: u64,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        PostgresOptions {
            connections_max: CONNECTIONS_MAX,
            pool_wait_ms_max: POOL_WAIT_MS_MAX,
            connect_timeout_ms: CONNECT_TIMEOUT_MS,
            lock_timeout_ms: LOCK_TIMEOUT_MS,
        }
    }
}

pub struct PostgresStore {
    schema: String,
    pool: Pool,
}

// ---------------------------------------------------------------------------------------------
// errors

fn db_err(e: postgres::Error) -> StoreError {
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        let msg = match db.detail() {
            Some(d) => format!("{} ({d})", db.message()),
            None => db.message().to_string(),
        };
        let class = &code.code()[..2.min(code.code().len())];
        return match code.code() {
            _ if *code == SqlState::READ_ONLY_SQL_TRANSACTION => {
                StoreError::ReadOnly(format!("{msg}; PostgreSQL refuses writes in this session"))
            }
            schema::SQLSTATE_APPEND_ONLY
            | schema::SQLSTATE_RUN_CLOSED
            | schema::SQLSTATE_CHAIN_BROKEN => StoreError::Conflict(msg),
            _ if class == "23" => StoreError::Conflict(msg),
            // Data PostgreSQL cannot hold (a NUL character in a text): refused like an
            // oversized body, the caller must change the input.
            _ if class == "22" => StoreError::Conflict(format!(
                "{msg}; PostgreSQL cannot store this value (text may not contain NUL characters)"
            )),
            _ if *code == SqlState::T_R_SERIALIZATION_FAILURE
                || *code == SqlState::T_R_DEADLOCK_DETECTED
                || *code == SqlState::LOCK_NOT_AVAILABLE
                || *code == SqlState::QUERY_CANCELED
                || *code == SqlState::ADMIN_SHUTDOWN
                || *code == SqlState::CRASH_SHUTDOWN
                || *code == SqlState::CANNOT_CONNECT_NOW
                || class == "08"
                || class == "53" =>
            {
                StoreError::Retryable(format!("{msg} [{}]", code.code()))
            }
            _ if *code == SqlState::UNDEFINED_TABLE
                || *code == SqlState::INVALID_SCHEMA_NAME
                || *code == SqlState::UNDEFINED_COLUMN =>
            {
                StoreError::Corrupt(format!(
                    "{msg}; the store's schema was altered or dropped behind vouch's back"
                ))
            }
            _ => StoreError::Fatal(format!("{msg} [{}]", code.code())),
        };
    }
    if e.is_closed() || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>()) {
        return StoreError::Retryable(format!("connection to PostgreSQL lost: {e}"));
    }
    StoreError::Fatal(e.to_string())
}

/// A commit whose answer never arrived may or may not have happened: not safe to blindly retry.
fn commit_err(e: postgres::Error) -> StoreError {
    let lost = e.as_db_error().is_none()
        && (e.is_closed()
            || std::error::Error::source(&e).is_some_and(|s| s.is::<std::io::Error>()));
    if lost {
        return StoreError::Fatal(format!(
            "the connection was lost during commit, so its outcome is unknown ({e}); read the state back before writing again"
        ));
    }
    db_err(e)
}

// ---------------------------------------------------------------------------------------------
// the connection pool

struct PoolState {
    idle: Vec<Client>,
    opened: usize,
}

struct Pool {
    config: Config,
    schema: String,
    options: PostgresOptions,
    /// Why the store is read-only; then every session is `default_transaction_read_only`.
    read_only: Option<String>,
    state: Mutex<PoolState>,
    freed: Condvar,
}

/// A pooled connection; goes back to the pool on drop unless it broke.
struct Conn<'a> {
    pool: &'a Pool,
    client: Option<Client>,
}

impl Deref for Conn<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        // Only `drop` takes the client out.
        self.client.as_ref().unwrap_or_else(|| unreachable!())
    }
}

impl DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.client.as_mut().unwrap_or_else(|| unreachable!())
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        let Some(client) = self.client.take() else {
            return;
        };
        let Ok(mut st) = self.pool.state.lock() else {
            return;
        };
        if client.is_closed() {
            st.opened -= 1;
        } else {
            st.idle.push(client);
        }
        self.pool.freed.notify_one();
    }
}

fn poisoned<T>(_: T) -> StoreError {
    StoreError::Fatal("the connection pool's lock was poisoned by a panicking thread".into())
}

fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

impl Pool {
    fn connect(&self) -> StoreResult<Client> {
        let mut client = self.config.connect(NoTls).map_err(|e| {
            let target = describe(&self.config);
            match db_err(e) {
                StoreError::Retryable(m) | StoreError::Fatal(m) => StoreError::Retryable(format!(
                    "cannot connect to PostgreSQL at {target}: {m}; check that the server is running and the URL is right"
                )),
                other => other,
            }
        })?;
        // Every setting the store depends on, explicitly, whatever the server's defaults.
        client
            .batch_execute(&format!(
                "SET search_path TO {}; \
                 SET synchronous_commit TO on; \
                 SET default_transaction_isolation TO 'read committed'; \
                 SET lock_timeout TO {}; \
                 SET client_min_messages TO warning;",
                quote_ident(&self.schema),
                self.options.lock_timeout_ms,
            ))
            .map_err(db_err)?;
        if self.read_only.is_some() {
            // The server itself refuses every write of a read-only open (SQLSTATE 25006).
            client
                .batch_execute("SET default_transaction_read_only TO on")
                .map_err(db_err)?;
        }
        Ok(client)
    }

    fn get(&self) -> StoreResult<Conn<'_>> {
        let wait_ms_max = self.options.pool_wait_ms_max;
        let deadline = Instant::now() + Duration::from_millis(wait_ms_max);
        let mut st = self.state.lock().map_err(poisoned)?;
        loop {
            if let Some(client) = st.idle.pop() {
                if client.is_closed() {
                    st.opened -= 1;
                    continue;
                }
                return Ok(Conn {
                    pool: self,
                    client: Some(client),
                });
            }
            if st.opened < self.options.connections_max.max(1) {
                st.opened += 1;
                drop(st);
                return match self.connect() {
                    Ok(client) => Ok(Conn {
                        pool: self,
                        client: Some(client),
                    }),
                    Err(e) => {
                        if let Ok(mut st) = self.state.lock() {
                            st.opened -= 1;
                            self.freed.notify_one();
                        }
                        Err(e)
                    }
                };
            }
            let now = Instant::now();
            if now >= deadline {
                return Err(StoreError::Retryable(format!(
                    "all {} PostgreSQL connections stayed busy for {wait_ms_max} ms",
                    st.opened
                )));
            }
            st = self
                .freed
                .wait_timeout(st, deadline - now)
                .map_err(poisoned)?
                .0;
        }
    }
}

/// Where a config points, without its password (for error messages).
fn describe(config: &Config) -> String {
    let host = config
        .get_hosts()
        .first()
        .map(|h| match h {
            postgres::config::Host::Tcp(s) => s.clone(),
            #[allow(unreachable_patterns)]
            other => format!("{other:?}"),
        })
        .unwrap_or_else(|| "localhost".into());
    let port = config.get_ports().first().copied().unwrap_or(5432);
    format!(
        "{}@{host}:{port}/{}",
        config.get_user().unwrap_or("?"),
        config.get_dbname().unwrap_or("?")
    )
}

fn valid_schema_name(schema: &str) -> bool {
    let mut chars = schema.chars();
    schema.len() <= SCHEMA_NAME_BYTES_MAX
        && chars
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c == '_')
        && chars.all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        && !schema.starts_with("pg_")
}

// ---------------------------------------------------------------------------------------------
// migrations

fn migrate(client: &mut Client, schema: &str) -> StoreResult<()> {
    let mut t = client.transaction().map_err(db_err)?;
    // Two processes opening a fresh schema at once: the second waits, then finds it migrated.
    t.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended('vouch-store:' || $1, 0))",
        &[&schema],
    )
    .map_err(db_err)?;
    t.batch_execute(&format!(
        "CREATE SCHEMA IF NOT EXISTS {}",
        quote_ident(schema)
    ))
    .map_err(db_err)?;
    let marked: bool = t
        .query_one(
            "SELECT EXISTS (SELECT 1 FROM pg_tables WHERE schemaname = $1 AND tablename = 'vouch_migrations')",
            &[&schema],
        )
        .and_then(|r| r.try_get(0))
        .map_err(db_err)?;
    if !marked {
        let relations: i64 = t
            .query_one(
                "SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = $1",
                &[&schema],
            )
            .and_then(|r| r.try_get(0))
            .map_err(db_err)?;
        if relations > 0 {
            return Err(StoreError::Corrupt(format!(
                "schema `{schema}` holds tables of some other program; pick another schema for the vouch store"
            )));
        }
        t.batch_execute(
            "CREATE TABLE vouch_migrations (
                 version INTEGER PRIMARY KEY,
                 applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
             )",
        )
        .map_err(db_err)?;
    }
    let version: i32 = t
        .query_one(
            "SELECT COALESCE(max(version), 0) FROM vouch_migrations",
            &[],
        )
        .and_then(|r| r.try_get(0))
        .map_err(db_err)?;
    let version = usize::try_from(version)
        .map_err(|_| corrupt("migration version", format!("{version} is negative")))?;
    if version > schema::MIGRATIONS.len() {
        return Err(StoreError::Fatal(format!(
            "schema `{schema}` was written by a newer vouch (schema {version}); upgrade vouch to open it"
        )));
    }
    for (i, sql) in schema::MIGRATIONS.iter().enumerate().skip(version) {
        let n = i32::try_from(i + 1).map_err(|e| StoreError::Fatal(e.to_string()))?;
        t.batch_execute(sql)
            .map_err(|e| StoreError::Fatal(format!("migration {n} failed: {e}")))?;
        t.execute("INSERT INTO vouch_migrations (version) VALUES ($1)", &[&n])
            .map_err(db_err)?;
    }
    t.commit().map_err(commit_err)
}

// ---------------------------------------------------------------------------------------------
// rows

fn col<'a, T: postgres::types::FromSql<'a>>(r: &'a Row, i: usize, what: &str) -> StoreResult<T> {
    r.try_get(i).map_err(|e| corrupt(what, e))
}

fn json_col(r: &Row, i: usize, what: &str) -> StoreResult<Value> {
    let s: &str = col(r, i, what)?;
    serde_json::from_str(s).map_err(|e| corrupt(what, e))
}

fn parse_enum<T: serde::de::DeserializeOwned>(s: &str, what: &str) -> StoreResult<T> {
    codec::enum_from_text(s).map_err(|e| corrupt(what, e))
}

fn run_row(r: &Row) -> StoreResult<RunRecord> {
    let state: &str = col(r, 7, "run state")?;
    let outcome: Option<&str> = col(r, 8, "run outcome")?;
    let ended_by: Option<&str> = col(r, 9, "run ended_by")?;
    Ok(RunRecord {
        id: col(r, 0, "run id")?,
        trigger: parse_enum::<TriggerKind>(col(r, 1, "run trigger")?, "run trigger")?,
        title: col(r, 2, "run title")?,
        chain_root: col(r, 3, "run chain_root")?,
        parent: col(r, 4, "run parent")?,
        scope: col(r, 5, "run scope")?,
        spec: json_col(r, 6, "run spec")?,
        state: RunState::parse(state).ok_or_else(|| corrupt("run state", state))?,
        outcome: outcome
            .map(|o| parse_enum::<Outcome>(o, "run outcome"))
            .transpose()?,
        ended_by: ended_by
            .map(|o| parse_enum::<EndedBy>(o, "run ended_by"))
            .transpose()?,
        created_ms: col(r, 10, "run created_ms")?,
        ended_ms: col(r, 11, "run ended_ms")?,
        owner: col(r, 12, "run owner")?,
        lease_until_ms: col(r, 13, "run lease_until_ms")?,
    })
}

fn journal_row(r: &Row) -> StoreResult<JournalEntry> {
    let kind: &str = col(r, 2, "event kind")?;
    Ok(JournalEntry {
        run_id: col(r, 0, "event run_id")?,
        seq: col(r, 1, "event seq")?,
        kind: EventKind::parse(kind).ok_or_else(|| corrupt("event kind", kind))?,
        delivery: col(r, 3, "event delivery")?,
        body: json_col(r, 4, "event body")?,
        at_ms: col(r, 5, "event at_ms")?,
        prev_hash: col(r, 6, "event prev_hash")?,
        hash: col(r, 7, "event hash")?,
    })
}

fn ledger_row(r: &Row) -> StoreResult<LedgerEntry> {
    let state: &str = col(r, 5, "ledger state")?;
    Ok(LedgerEntry {
        key: col(r, 0, "ledger key")?,
        scope: col(r, 1, "ledger scope")?,
        run_id: col(r, 2, "ledger run_id")?,
        delivery: col(r, 3, "ledger delivery")?,
        payload_hash: col(r, 4, "ledger payload_hash")?,
        state: LedgerState::parse(state).ok_or_else(|| corrupt("ledger state", state))?,
        attempts: col(r, 6, "ledger attempts")?,
        detail: json_col(r, 7, "ledger detail")?,
        updated_ms: col(r, 8, "ledger updated_ms")?,
    })
}

fn card_row(r: &Row) -> StoreResult<Card> {
    let state: &str = col(r, 4, "card state")?;
    Ok(Card {
        run_id: col(r, 0, "card run_id")?,
        delivery: col(r, 1, "card delivery")?,
        payload_hash: col(r, 2, "card payload_hash")?,
        summary: col(r, 3, "card summary")?,
        state: CardState::parse(state).ok_or_else(|| corrupt("card state", state))?,
        created_ms: col(r, 5, "card created_ms")?,
        decided_ms: col(r, 6, "card decided_ms")?,
        answer: col(r, 7, "card answer")?,
        reason: col(r, 8, "card reason")?,
    })
}

/// Every run's hash chain, streamed one run at a time; an unreadable event is a break.
fn verify_chains(conn: &mut postgres::Client, report: &mut VerifyReport) -> StoreResult<()> {
    // Streamed, one run's chain in memory at a time; one statement, so one snapshot.
    let mut it = conn
        .query_raw(
            &format!("SELECT {JOURNAL_COLS} FROM journal ORDER BY run_id, seq"),
            std::iter::empty::<&str>(),
        )
        .map_err(db_err)?;
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
    while let Some(r) = it.next().map_err(db_err)? {
        let entry = match journal_row(&r) {
            Ok(e) => e,
            Err(e) => {
                report.breaks.push(ChainBreak {
                    run_id: r.try_get(0).unwrap_or_default(),
                    seq: r.try_get(1).unwrap_or_default(),
                    reason: format!("unreadable event: {e}"),
                });
                continue;
            }
        };
        if current.first().is_some_and(|f| f.run_id != entry.run_id) {
            flush(&mut current, report);
        }
        current.push(entry);
    }
    flush(&mut current, report);
    Ok(())
}

type RowCheck = fn(&Row) -> StoreResult<()>;

/// The row checks (§10.2): every run, card and ledger row reads back as its type, and the
/// cross-table checks of [`vouch_store::ROW_CHECKS`]; each problem names what is damaged.
fn row_damage(conn: &mut postgres::Client) -> Vec<String> {
    let mut out = vec![];
    let typed: [(&str, String, RowCheck); 3] = [
        ("runs", format!("SELECT {RUN_COLS} FROM runs"), |r| {
            run_row(r).map(|_| ())
        }),
        ("cards", format!("SELECT {CARD_COLS} FROM cards"), |r| {
            card_row(r).map(|_| ())
        }),
        ("ledger", format!("SELECT {LEDGER_COLS} FROM ledger"), |r| {
            ledger_row(r).map(|_| ())
        }),
    ];
    for (table, sql, check) in typed {
        match conn.query(sql.as_str(), &[]) {
            Ok(rows) => {
                if let Some(e) = rows.iter().find_map(|r| check(r).err()) {
                    out.push(format!(
                        "table {table}: a row does not read back as a {table} row ({e})"
                    ));
                }
            }
            Err(e) => out.push(format!("table {table}: cannot be read ({e})")),
        }
    }
    for (what, sql) in vouch_store::ROW_CHECKS {
        match conn.query(*sql, &[]) {
            Ok(rows) => out.extend(rows.iter().map(|r| {
                let id: String = r.try_get(0).unwrap_or_default();
                format!("{what}: run {id}")
            })),
            Err(e) => out.push(format!("{what}: the check could not run ({e})")),
        }
    }
    out
}

fn outbox_row(r: &Row) -> StoreResult<OutboxRow> {
    Ok(OutboxRow {
        id: col(r, 0, "outbox id")?,
        dedup_key: col(r, 1, "outbox dedup_key")?,
        run_id: col(r, 2, "outbox run_id")?,
        route: col(r, 3, "outbox route")?,
        body: json_col(r, 4, "outbox body")?,
        created_ms: col(r, 5, "outbox created_ms")?,
        sent_ms: col(r, 6, "outbox sent_ms")?,
    })
}

fn schedule_row(r: &Row) -> StoreResult<Schedule> {
    Ok(Schedule {
        name: col(r, 0, "schedule name")?,
        cron: col(r, 1, "schedule cron")?,
        tz: col(r, 2, "schedule tz")?,
        routine: json_col(r, 3, "schedule routine")?,
        catch_up: parse_enum(col(r, 4, "schedule catch_up")?, "schedule catch_up")?,
        overlap: parse_enum(col(r, 5, "schedule overlap")?, "schedule overlap")?,
        grace_ms: col(r, 6, "schedule grace_ms")?,
        created_ms: col(r, 7, "schedule created_ms")?,
    })
}

fn token_row(r: &Row) -> StoreResult<ApiToken> {
    Ok(ApiToken {
        name: col(r, 0, "token name")?,
        hash: col(r, 1, "token hash")?,
        created_ms: col(r, 2, "token created_ms")?,
    })
}

fn rows<T>(rows: Vec<Row>, f: fn(&Row) -> StoreResult<T>) -> StoreResult<Vec<T>> {
    rows.iter().map(f).collect()
}

// ---------------------------------------------------------------------------------------------
// appends

/// Lock the run's row for the rest of the transaction and return its state (None: no such
/// run). Appends, `end_run` and `open_card` take this lock, so they are serialized per run.
fn lock_run(t: &mut Transaction<'_>, run_id: &str) -> StoreResult<Option<String>> {
    let row = t
        .query_opt(
            "SELECT state FROM runs WHERE id = $1 FOR NO KEY UPDATE",
            &[&run_id],
        )
        .map_err(db_err)?;
    row.map(|r| col::<String>(&r, 0, "run state")).transpose()
}

/// Insert the next event of a run whose row `t` has locked. Returns `(seq, prev_hash, hash)`.
/// The tail is read in a statement after the lock was granted, so at READ COMMITTED it sees
/// every append committed before ours.
fn insert_event(t: &mut Transaction<'_>, ev: &PreparedEvent) -> StoreResult<(i64, String, String)> {
    let run_id = ev.run_id.as_str();
    let last = t
        .query_opt(
            "SELECT seq, hash FROM journal WHERE run_id = $1 ORDER BY seq DESC LIMIT 1",
            &[&run_id],
        )
        .map_err(db_err)?;
    let (seq, prev) = match last {
        Some(r) => {
            let seq: i64 = col(&r, 0, "event seq")?;
            (seq + 1, col::<String>(&r, 1, "event hash")?)
        }
        None => (1, GENESIS_HASH.to_string()),
    };
    let hash = ev.content.hash(&prev, seq);
    t.execute(
        "INSERT INTO journal (run_id, seq, kind, delivery, body, at_ms, prev_hash, hash) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)",
        &[&run_id, &seq, &ev.kind.as_str(), &ev.delivery, &ev.body_text, &ev.at_ms, &prev, &hash],
    )
    .map_err(|e| {
        let foreign_key = e.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION);
        // Closed by the trigger's own SQLSTATE, or by the one-terminal index: by code and
        // constraint name, never by the wording of the message.
        let closed = e.code().map(SqlState::code) == Some(schema::SQLSTATE_RUN_CLOSED)
            || e.as_db_error().and_then(|d| d.constraint()) == Some("journal_one_terminal");
        match db_err(e) {
            // The run row was locked above, so this means it was never there.
            _ if foreign_key => StoreError::NotFound { what: "run", id: run_id.to_string() },
            _ if closed => codec::run_ended(run_id),
            other => other,
        }
    })?;
    Ok((seq, prev, hash))
}

fn insert_run(c: &mut impl postgres::GenericClient, run: &NewRun) -> StoreResult<()> {
    vouch_store::check_birth_state(run)?;
    let spec = json_text(&run.spec)?;
    c.execute(
        "INSERT INTO runs (id, trigger, title, chain_root, parent, scope, spec, state, created_ms, owner, lease_until_ms) VALUES ($1,$2,$3,$4,$5,$6,$7,$11,$8,$9,$10)",
        &[&run.id, &enum_text(&run.trigger), &run.title, &run.chain_root, &run.parent, &run.scope, &spec, &run.created_ms, &run.lease.as_ref().map(|l| l.owner.as_str()), &run.lease.as_ref().map(|l| l.until_ms), &enum_text(&run.state)],
    )
    .map_err(|e| match db_err(e) {
        StoreError::Conflict(_) => codec::run_exists(&run.id),
        other => other,
    })?;
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// the store

impl PostgresStore {
    /// Connect to the database at `url` (a `postgres://` URL or a key=value string; loopback
    /// without TLS) and keep the store in `schema`, creating the schema and its tables if
    /// needed and applying any newer migrations. `schema` must be lowercase ASCII letters,
    /// digits and `_`, at most 63 bytes, not starting with a digit or `pg_`.
    ///
    /// ```no_run
    /// use vouch_store::Store;
    /// let store = vouch_store_postgres::PostgresStore::open(
    ///     "postgres://postgres@127.0.0.1:5432/test",
    ///     "vouch",
    /// )?;
    /// assert!(store.verify()?.breaks.is_empty());
    /// # Ok::<(), vouch_store::StoreError>(())
    /// ```
    pub fn open(url: &str, schema: &str) -> StoreResult<PostgresStore> {
        Self::open_with(url, schema, PostgresOptions::default())
    }

    /// [`open`](Self::open) with explicit limits.
    pub fn open_with(
        url: &str,
        schema: &str,
        options: PostgresOptions,
    ) -> StoreResult<PostgresStore> {
        Self::build(url, schema, options, None)
    }

    /// Open an existing store for reading only: no migration, and the server refuses every
    /// write ([`StoreError::ReadOnly`]). `why` says why (shown to the person).
    pub fn open_read_only(url: &str, schema: &str, why: &str) -> StoreResult<PostgresStore> {
        Self::build(
            url,
            schema,
            PostgresOptions::default(),
            Some(why.to_string()),
        )
    }

    fn build(
        url: &str,
        schema: &str,
        options: PostgresOptions,
        read_only: Option<String>,
    ) -> StoreResult<PostgresStore> {
        if !valid_schema_name(schema) {
            return Err(StoreError::Fatal(format!(
                "`{schema}` is not a usable schema name; use lowercase letters, digits and `_` (at most {SCHEMA_NAME_BYTES_MAX}, not starting with a digit or `pg_`)"
            )));
        }
        let mut config: Config = url.parse().map_err(|e| {
            StoreError::Fatal(format!(
                "the PostgreSQL URL does not parse ({e}); expected postgres://user@host:port/database"
            ))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(Duration::from_millis(options.connect_timeout_ms));
        }
        if config.get_application_name().is_none() {
            config.application_name("vouch");
        }
        let pool = Pool {
            config,
            schema: schema.to_string(),
            options,
            read_only: read_only.clone(),
            state: Mutex::new(PoolState {
                idle: vec![],
                opened: 0,
            }),
            freed: Condvar::new(),
        };
        {
            let mut conn = pool.get()?;
            match &read_only {
                None => migrate(&mut conn, schema)?,
                Some(why) => {
                    let version: i32 = conn
                        .query_one(
                            "SELECT COALESCE(max(version), 0) FROM vouch_migrations",
                            &[],
                        )
                        .and_then(|r| r.try_get(0))
                        .map_err(|e| {
                            StoreError::Corrupt(format!(
                                "schema `{schema}` holds no vouch store to read ({})",
                                db_err(e)
                            ))
                        })?;
                    if version as usize != schema::MIGRATIONS.len() {
                        return Err(StoreError::ReadOnly(format!(
                            "schema `{schema}` has store version {version} and this vouch reads {}; it is read-only ({why}), so it cannot be upgraded",
                            schema::MIGRATIONS.len()
                        )));
                    }
                }
            }
        }
        Ok(PostgresStore {
            schema: schema.to_string(),
            pool,
        })
    }

    /// The schema this store lives in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Run `f` in one transaction on a pooled connection; commit if it returns `Ok`, roll
    /// back (by dropping the transaction) if it returns `Err`.
    fn tx<T>(&self, f: impl FnOnce(&mut Transaction<'_>) -> StoreResult<T>) -> StoreResult<T> {
        let mut conn = self.pool.get()?;
        let mut t = conn.transaction().map_err(db_err)?;
        let v = f(&mut t)?;
        t.commit().map_err(commit_err)?;
        Ok(v)
    }

    /// One statement in its own (autocommit) transaction.
    fn exec(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<u64> {
        self.pool.get()?.execute(sql, params).map_err(db_err)
    }

    fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<Vec<Row>> {
        self.pool.get()?.query(sql, params).map_err(db_err)
    }

    fn query_opt(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<Option<Row>> {
        self.pool.get()?.query_opt(sql, params).map_err(db_err)
    }

    fn run_exists(&self, id: &str) -> StoreResult<bool> {
        Ok(self
            .query_opt("SELECT 1 FROM runs WHERE id = $1", &[&id])?
            .is_some())
    }
}

impl TamperForTests for PostgresStore {
    fn tamper_payload(&self, hash: &str, body: &str) -> StoreResult<bool> {
        self.exec(
            "UPDATE payloads SET body = $2 WHERE hash = $1",
            &[&hash, &body],
        )
        .map(|n| n == 1)
    }
}

impl Store for PostgresStore {
    fn read_only(&self) -> Option<String> {
        self.pool.read_only.clone()
    }

    fn create_run(&self, run: &NewRun) -> StoreResult<()> {
        insert_run(&mut *self.pool.get()?, run)
    }

    fn run(&self, id: &str) -> StoreResult<Option<RunRecord>> {
        self.query_opt(
            &format!("SELECT {RUN_COLS} FROM runs WHERE id = $1"),
            &[&id],
        )?
        .map(|r| run_row(&r))
        .transpose()
    }

    fn runs(&self, limit: usize) -> StoreResult<Vec<RunRecord>> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        rows(
            self.query(
                &format!("SELECT {RUN_COLS} FROM runs ORDER BY created_ms DESC, ord DESC LIMIT $1"),
                &[&limit],
            )?,
            run_row,
        )
    }

    fn set_run_state(&self, id: &str, state: RunState) -> StoreResult<()> {
        if state == RunState::Ended {
            return Err(StoreError::Conflict("runs end only through end_run".into()));
        }
        let n = self.exec(
            "UPDATE runs SET state = $2 WHERE id = $1 AND state <> 'ended'",
            &[&id, &state.as_str()],
        )?;
        if n == 0 {
            return if self.run_exists(id)? {
                Err(StoreError::Conflict(format!("run {id} has already ended")))
            } else {
                Err(StoreError::NotFound {
                    what: "run",
                    id: id.to_string(),
                })
            };
        }
        Ok(())
    }

    fn append(&self, run_id: &str, event: &NewEvent) -> StoreResult<JournalEntry> {
        if event.kind == EventKind::Terminal {
            return Err(codec::terminal_only_by_end_run());
        }
        let ev = PreparedEvent::new(run_id, event)?;
        let (seq, prev, hash) = self.tx(|t| {
            match lock_run(t, run_id)?.as_deref() {
                None => {
                    return Err(StoreError::NotFound {
                        what: "run",
                        id: run_id.to_string(),
                    })
                }
                Some("ended") => return Err(codec::run_ended(run_id)),
                Some(_) => {}
            }
            insert_event(t, &ev)
        })?;
        Ok(ev.entry(seq, prev, hash))
    }

    fn append_batch(&self, run_id: &str, events: &[NewEvent]) -> StoreResult<Vec<JournalEntry>> {
        if events.is_empty() {
            return Ok(vec![]);
        }
        let prepared = PreparedEvent::all(run_id, events)?;
        let chained = self.tx(|t| {
            match lock_run(t, run_id)?.as_deref() {
                None => {
                    return Err(StoreError::NotFound {
                        what: "run",
                        id: run_id.to_string(),
                    })
                }
                Some("ended") => return Err(codec::run_ended(run_id)),
                Some(_) => {}
            }
            let mut chained = Vec::with_capacity(prepared.len());
            for ev in &prepared {
                chained.push(insert_event(t, ev)?);
            }
            Ok(chained)
        })?;
        Ok(prepared
            .into_iter()
            .zip(chained)
            .map(|(ev, (seq, prev, hash))| ev.entry(seq, prev, hash))
            .collect())
    }

    fn journal(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
        rows(
            self.query(
                &format!("SELECT {JOURNAL_COLS} FROM journal WHERE run_id = $1 ORDER BY seq"),
                &[&run_id],
            )?,
            journal_row,
        )
    }

    fn journal_since(&self, run_id: &str, after_seq: i64) -> StoreResult<Vec<JournalEntry>> {
        rows(
            self.query(
                &format!(
                    "SELECT {JOURNAL_COLS} FROM journal WHERE run_id = $1 AND seq > $2 ORDER BY seq"
                ),
                &[&run_id, &after_seq],
            )?,
            journal_row,
        )
    }

    fn verify(&self) -> StoreResult<VerifyReport> {
        let mut conn = self.pool.get()?;
        let mut report = VerifyReport {
            runs: 0,
            events: 0,
            breaks: vec![],
            damage: vec![],
        };
        if let Err(e) = verify_chains(&mut conn, &mut report) {
            report
                .damage
                .push(format!("table journal: not every event can be read ({e})"));
        }
        report.damage.extend(row_damage(&mut conn));
        Ok(report)
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
        let before = PreparedEvent::all(run_id, events)?;
        let ev = PreparedEvent::new(
            run_id,
            &NewEvent::new(EventKind::Terminal, terminal.at_ms, terminal.body.clone()),
        )?;
        let outbox_body = terminal
            .outbox
            .as_ref()
            .map(|o| json_text(&o.body))
            .transpose()?;
        let ended = self.tx(|t| {
            match lock_run(t, run_id)?.as_deref() {
                None => {
                    return Err(StoreError::NotFound {
                        what: "run",
                        id: run_id.to_string(),
                    })
                }
                Some("ended") => return Ok(None),
                Some(_) => {}
            }
            for e in &before {
                insert_event(t, e)?;
            }
            let (seq, prev, hash) = insert_event(t, &ev)?;
            t.execute(
                "UPDATE runs SET state = 'ended', outcome = $2, ended_by = $3, ended_ms = $4, owner = NULL, lease_until_ms = NULL WHERE id = $1",
                &[&run_id, &enum_text(&terminal.outcome), &enum_text(&terminal.ended_by), &terminal.at_ms],
            )
            .map_err(db_err)?;
            t.execute(
                "INSERT INTO receipts (run_id, text) VALUES ($1, $2)",
                &[&run_id, &terminal.receipt],
            )
            .map_err(db_err)?;
            if let (Some(o), Some(body)) = (&terminal.outbox, &outbox_body) {
                // One notification per key, ever: a key already used (by any run) is skipped.
                t.execute(
                    "INSERT INTO outbox (dedup_key, run_id, route, body, created_ms) VALUES ($1,$2,$3,$4,$5) ON CONFLICT (dedup_key) DO NOTHING",
                    &[&o.dedup_key, &o.run_id, &o.route, body, &terminal.at_ms],
                )
                .map_err(db_err)?;
            }
            Ok(Some((seq, prev, hash)))
        })?;
        Ok(match ended {
            Some((seq, prev, hash)) => EndResult::Ended(ev.entry(seq, prev, hash)),
            None => EndResult::AlreadyEnded,
        })
    }

    fn receipt(&self, run_id: &str) -> StoreResult<Option<String>> {
        self.query_opt("SELECT text FROM receipts WHERE run_id = $1", &[&run_id])?
            .map(|r| col(&r, 0, "receipt"))
            .transpose()
    }

    fn lease_run(
        &self,
        run_id: &str,
        owner: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> StoreResult<bool> {
        // One conditional update: PostgreSQL re-checks the condition on the newest row version,
        // so two owners racing for a lapsed lease cannot both win.
        let n = self.exec(
            "UPDATE runs SET owner = $2, lease_until_ms = $4 WHERE id = $1 AND state <> 'ended'
             AND (owner IS NULL OR owner = $2 OR lease_until_ms IS NULL OR lease_until_ms < $3)",
            &[&run_id, &owner, &now_ms, &until_ms],
        )?;
        if n == 1 {
            return Ok(true);
        }
        if self.run_exists(run_id)? {
            Ok(false)
        } else {
            Err(StoreError::NotFound {
                what: "run",
                id: run_id.to_string(),
            })
        }
    }

    fn release_run(&self, run_id: &str, owner: &str) -> StoreResult<()> {
        self.exec(
            "UPDATE runs SET owner = NULL, lease_until_ms = NULL WHERE id = $1 AND owner = $2",
            &[&run_id, &owner],
        )?;
        Ok(())
    }

    fn orphaned_runs(&self, now_ms: i64) -> StoreResult<Vec<RunRecord>> {
        rows(
            self.query(
                &format!(
                    "SELECT {RUN_COLS} FROM runs WHERE state <> 'ended' AND (owner IS NULL OR lease_until_ms IS NULL OR lease_until_ms < $1) ORDER BY created_ms, ord"
                ),
                &[&now_ms],
            )?,
            run_row,
        )
    }

    fn open_runs(&self) -> StoreResult<Vec<RunRecord>> {
        rows(
            self.query(
                &format!(
                    "SELECT {RUN_COLS} FROM runs WHERE state <> 'ended' ORDER BY created_ms, ord"
                ),
                &[],
            )?,
            run_row,
        )
    }

    fn runs_by_prefix(&self, prefix: &str, limit: usize) -> StoreResult<Vec<RunRecord>> {
        let limit = limit as i64;
        rows(
            self.query(
                &format!(
                    "SELECT {RUN_COLS} FROM runs WHERE starts_with(id, $1) ORDER BY id LIMIT $2"
                ),
                &[&prefix, &limit],
            )?,
            run_row,
        )
    }

    fn continuation_of(&self, parent: &str) -> StoreResult<Option<RunRecord>> {
        Ok(rows(
            self.query(
                &format!("SELECT {RUN_COLS} FROM runs WHERE parent = $1 ORDER BY created_ms, ord LIMIT 1"),
                &[&parent],
            )?,
            run_row,
        )?
        .into_iter()
        .next())
    }

    fn put_payload(&self, hash: &str, canonical_json: &str) -> StoreResult<()> {
        codec::check_payload_bytes(canonical_json.len())?;
        self.exec(
            "INSERT INTO payloads (hash, body) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING",
            &[&hash, &canonical_json],
        )?;
        Ok(())
    }

    fn payload(&self, hash: &str) -> StoreResult<Option<String>> {
        self.query_opt("SELECT body FROM payloads WHERE hash = $1", &[&hash])?
            .map(|r| col(&r, 0, "payload"))
            .transpose()
    }

    fn ledger_intend(&self, entry: &LedgerEntry) -> StoreResult<LedgerIntent> {
        let e = entry;
        let detail = json_text(&e.detail)?;
        self.tx(|t| {
            // The unique key decides a race: the loser waits for the winner's commit, inserts
            // nothing, and then reads the winner's row below.
            let inserted = t
                .execute(
                    &format!("INSERT INTO ledger ({LEDGER_COLS}) VALUES ($1,$2,$3,$4,$5,'intended',1,$6,$7) ON CONFLICT (key) DO NOTHING"),
                    &[&e.key, &e.scope, &e.run_id, &e.delivery, &e.payload_hash, &detail, &e.updated_ms],
                )
                .map_err(db_err)?;
            if inserted == 1 {
                return Ok(LedgerIntent::Proceed(LedgerEntry {
                    state: LedgerState::Intended,
                    attempts: 1,
                    ..e.clone()
                }));
            }
            let row = t
                .query_opt(
                    &format!("SELECT {LEDGER_COLS} FROM ledger WHERE key = $1 FOR UPDATE"),
                    &[&e.key],
                )
                .map_err(db_err)?
                .ok_or_else(|| {
                    StoreError::Retryable(format!("ledger key {} vanished while it was read", e.key))
                })?;
            let prev = ledger_row(&row)?;
            if prev.state != LedgerState::Failed {
                return Ok(LedgerIntent::Recorded(prev));
            }
            t.execute(
                "UPDATE ledger SET state = 'intended', attempts = attempts + 1, run_id = $2, updated_ms = $3 WHERE key = $1",
                &[&e.key, &e.run_id, &e.updated_ms],
            )
            .map_err(db_err)?;
            Ok(LedgerIntent::Proceed(LedgerEntry {
                state: LedgerState::Intended,
                attempts: prev.attempts + 1,
                run_id: e.run_id.clone(),
                updated_ms: e.updated_ms,
                ..prev
            }))
        })
    }

    fn ledger_settle(
        &self,
        key: &str,
        state: LedgerState,
        detail: &Value,
        at_ms: i64,
    ) -> StoreResult<()> {
        let detail = json_text(detail)?;
        let n = self.exec(
            "UPDATE ledger SET state = $2, detail = $3, updated_ms = $4 WHERE key = $1 AND state = 'intended'",
            &[&key, &state.as_str(), &detail, &at_ms],
        )?;
        if n == 0 {
            let row = self.query_opt("SELECT state FROM ledger WHERE key = $1", &[&key])?;
            return match row {
                None => Err(StoreError::NotFound {
                    what: "ledger key",
                    id: key.to_string(),
                }),
                Some(r) => Err(StoreError::Conflict(format!(
                    "ledger key is already {}; only an intended key can be settled",
                    col::<&str>(&r, 0, "ledger state")?
                ))),
            };
        }
        Ok(())
    }

    fn ledger_get(&self, key: &str) -> StoreResult<Option<LedgerEntry>> {
        self.query_opt(
            &format!("SELECT {LEDGER_COLS} FROM ledger WHERE key = $1"),
            &[&key],
        )?
        .map(|r| ledger_row(&r))
        .transpose()
    }

    fn ledger_list(&self) -> StoreResult<Vec<LedgerEntry>> {
        rows(
            self.query(
                &format!(
                    "SELECT {LEDGER_COLS} FROM ledger ORDER BY updated_ms DESC, key COLLATE \"C\""
                ),
                &[],
            )?,
            ledger_row,
        )
    }

    fn open_card(&self, card: &Card) -> StoreResult<()> {
        self.tx(|t| {
            // Serialize card changes per run, so a second opener supersedes the first's card
            // instead of colliding with it on `cards_one_open`. A missing run is left to the
            // foreign key below (Conflict, as in SQLite).
            lock_run(t, &card.run_id)?;
            t.execute(
                "UPDATE cards SET state = 'superseded', decided_ms = $3 WHERE run_id = $1 AND delivery IS NOT DISTINCT FROM $2 AND state = 'open'",
                &[&card.run_id, &card.delivery, &card.created_ms],
            )
            .map_err(db_err)?;
            t.execute(
                &format!("INSERT INTO cards ({CARD_COLS}) VALUES ($1,$2,$3,$4,'open',$5,NULL,NULL,$6)"),
                &[&card.run_id, &card.delivery, &card.payload_hash, &card.summary, &card.created_ms, &card.reason],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn open_cards(&self) -> StoreResult<Vec<Card>> {
        rows(
            self.query(
                &format!("SELECT {CARD_COLS} FROM cards WHERE state = 'open' ORDER BY created_ms DESC, id DESC"),
                &[],
            )?,
            card_row,
        )
    }

    fn cards_for_run(&self, run_id: &str) -> StoreResult<Vec<Card>> {
        rows(
            self.query(
                &format!("SELECT {CARD_COLS} FROM cards WHERE run_id = $1 ORDER BY id"),
                &[&run_id],
            )?,
            card_row,
        )
    }

    fn decide_card(
        &self,
        run_id: &str,
        delivery: &str,
        payload_hash: &str,
        decision: Decision,
        at_ms: i64,
    ) -> StoreResult<Card> {
        self.tx(|t| {
            // The row lock makes a second, concurrent decision wait and then see the first.
            let row = t
                .query_opt(
                    &format!("SELECT {CARD_COLS}, id FROM cards WHERE run_id = $1 AND delivery = $2 AND payload_hash = $3 ORDER BY id DESC LIMIT 1 FOR UPDATE"),
                    &[&run_id, &delivery, &payload_hash],
                )
                .map_err(db_err)?;
            let Some(row) = row else {
                return Err(StoreError::NotFound {
                    what: "approval card with that hash",
                    id: format!("{run_id}/{delivery}/{payload_hash}"),
                });
            };
            let card = card_row(&row)?;
            let id: i64 = col(&row, 9, "card id")?;
            if card.state != CardState::Open {
                return Err(StoreError::Conflict(format!(
                    "the card for {delivery} with this hash is {}; it can no longer be decided (see `vouch approvals` for the current one)",
                    card.state.as_str()
                )));
            }
            let state = match decision {
                Decision::Approve => CardState::Approved,
                Decision::Deny => CardState::Denied,
            };
            t.execute(
                "UPDATE cards SET state = $2, decided_ms = $3 WHERE id = $1",
                &[&id, &state.as_str(), &at_ms],
            )
            .map_err(db_err)?;
            Ok(Card {
                state,
                decided_ms: Some(at_ms),
                ..card
            })
        })
    }

    fn answer_clarify(&self, run_id: &str, answer: &str, at_ms: i64) -> StoreResult<Card> {
        self.tx(|t| {
            let row = t
                .query_opt(
                    &format!("SELECT {CARD_COLS}, id FROM cards WHERE run_id = $1 AND delivery IS NULL AND state = 'open' ORDER BY id DESC LIMIT 1 FOR UPDATE"),
                    &[&run_id],
                )
                .map_err(db_err)?;
            let Some(row) = row else {
                return Err(StoreError::NotFound {
                    what: "open question of run",
                    id: run_id.to_string(),
                });
            };
            let card = card_row(&row)?;
            let id: i64 = col(&row, 9, "card id")?;
            t.execute(
                "UPDATE cards SET state = 'answered', decided_ms = $2, answer = $3 WHERE id = $1",
                &[&id, &at_ms, &answer],
            )
            .map_err(db_err)?;
            Ok(Card {
                state: CardState::Answered,
                decided_ms: Some(at_ms),
                answer: Some(answer.to_string()),
                ..card
            })
        })
    }

    fn consume_slot(&self, schedule: &str, slot_ms: i64, run: &NewRun) -> StoreResult<bool> {
        let mut conn = self.pool.get()?;
        let mut t = conn.transaction().map_err(db_err)?;
        let taken = t
            .query_opt(
                "SELECT 1 FROM slots WHERE schedule = $1 AND slot_ms = $2",
                &[&schedule, &slot_ms],
            )
            .map_err(db_err)?;
        if taken.is_some() {
            return Ok(false);
        }
        insert_run(&mut t, run)?;
        // A concurrent consumer of the same slot blocks here until the first commits, then
        // inserts nothing and rolls its run back: a refused slot creates no run.
        let n = t
            .execute(
                "INSERT INTO slots (schedule, slot_ms, run_id) VALUES ($1, $2, $3) ON CONFLICT (schedule, slot_ms) DO NOTHING",
                &[&schedule, &slot_ms, &run.id],
            )
            .map_err(db_err)?;
        if n == 0 {
            t.rollback().map_err(db_err)?;
            return Ok(false);
        }
        t.commit().map_err(commit_err)?;
        Ok(true)
    }

    fn slot_run(&self, schedule: &str, slot_ms: i64) -> StoreResult<Option<String>> {
        self.query_opt(
            "SELECT run_id FROM slots WHERE schedule = $1 AND slot_ms = $2",
            &[&schedule, &slot_ms],
        )?
        .map(|r| col(&r, 0, "slot run_id"))
        .transpose()
    }

    fn slots(&self, schedule: &str) -> StoreResult<Vec<(i64, String)>> {
        self.query(
            "SELECT slot_ms, run_id FROM slots WHERE schedule = $1 ORDER BY slot_ms",
            &[&schedule],
        )?
        .iter()
        .map(|r| Ok((col(r, 0, "slot_ms")?, col(r, 1, "slot run_id")?)))
        .collect()
    }

    fn put_schedule(&self, s: &Schedule) -> StoreResult<()> {
        let routine = json_text(&s.routine)?;
        self.pool
            .get()?
            .execute(
                &format!(
                    "INSERT INTO schedules ({SCHEDULE_COLS}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)"
                ),
                &[
                    &s.name,
                    &s.cron,
                    &s.tz,
                    &routine,
                    &s.catch_up.as_str(),
                    &s.overlap.as_str(),
                    &s.grace_ms,
                    &s.created_ms,
                ],
            )
            // The name is taken when the primary key says so (by constraint name, not wording).
            .map_err(|e| match e.as_db_error().and_then(|d| d.constraint()) {
                Some("schedules_pkey") => codec::schedule_exists(&s.name),
                _ => db_err(e),
            })?;
        Ok(())
    }

    fn schedules(&self) -> StoreResult<Vec<Schedule>> {
        rows(
            self.query(
                &format!("SELECT {SCHEDULE_COLS} FROM schedules ORDER BY name COLLATE \"C\""),
                &[],
            )?,
            schedule_row,
        )
    }

    fn remove_schedule(&self, name: &str) -> StoreResult<bool> {
        Ok(self.exec("DELETE FROM schedules WHERE name = $1", &[&name])? == 1)
    }

    fn put_token(&self, t: &ApiToken) -> StoreResult<()> {
        self.exec(
            &format!("INSERT INTO api_tokens ({TOKEN_COLS}) VALUES ($1, $2, $3)"),
            &[&t.name, &t.hash, &t.created_ms],
        )
        .map_err(|e| match e {
            StoreError::Conflict(_) => codec::token_exists(&t.name),
            other => other,
        })?;
        Ok(())
    }

    fn token_by_hash(&self, hash: &str) -> StoreResult<Option<ApiToken>> {
        self.query_opt(
            &format!("SELECT {TOKEN_COLS} FROM api_tokens WHERE hash = $1"),
            &[&hash],
        )?
        .as_ref()
        .map(token_row)
        .transpose()
    }

    fn tokens(&self) -> StoreResult<Vec<ApiToken>> {
        rows(
            self.query(
                &format!("SELECT {TOKEN_COLS} FROM api_tokens ORDER BY name COLLATE \"C\""),
                &[],
            )?,
            token_row,
        )
    }

    fn remove_token(&self, name: &str) -> StoreResult<bool> {
        Ok(self.exec("DELETE FROM api_tokens WHERE name = $1", &[&name])? == 1)
    }

    fn outbox_pending(&self) -> StoreResult<Vec<OutboxRow>> {
        rows(
            self.query(
                &format!("SELECT {OUTBOX_COLS} FROM outbox WHERE sent_ms IS NULL ORDER BY id"),
                &[],
            )?,
            outbox_row,
        )
    }

    fn outbox_mark_sent(&self, id: i64, at_ms: i64) -> StoreResult<()> {
        self.exec(
            "UPDATE outbox SET sent_ms = $2 WHERE id = $1 AND sent_ms IS NULL",
            &[&id, &at_ms],
        )?;
        Ok(())
    }

    fn outbox_for_run(&self, run_id: &str) -> StoreResult<Vec<OutboxRow>> {
        rows(
            self.query(
                &format!("SELECT {OUTBOX_COLS} FROM outbox WHERE run_id = $1 ORDER BY id"),
                &[&run_id],
            )?,
            outbox_row,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schema_names_are_plain_identifiers() {
        for ok in ["vouch", "vouch_test_12ab", "_x", &"a".repeat(63)] {
            assert!(valid_schema_name(ok), "{ok}");
        }
        for bad in [
            "",
            "Vouch",
            "1x",
            "pg_x",
            "a-b",
            "a\"b",
            "a b",
            &"a".repeat(64),
        ] {
            assert!(!valid_schema_name(bad), "{bad}");
        }
    }

    #[test]
    fn quoted_identifiers_escape_quotes() {
        assert_eq!(quote_ident("a\"b"), "\"a\"\"b\"");
    }
}
