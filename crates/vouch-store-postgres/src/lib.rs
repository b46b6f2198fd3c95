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
mod tls;
mod tokens;

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
    LedgerEntry, LedgerIntent, LedgerState, NewEvent, NewRun, OutboxFailure, OutboxRow, RunRecord,
    Schedule, Store, StoreError, StoreResult, Terminal, TerminalPlace, VerifyReport, GENESIS_HASH,
};
use vouch_store::{ApiToken, TamperForTests};

use cards::card_row;
use ledger::ledger_row;
use runs::{journal_row, run_row};

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
pub use tls::{split_url, SslMode, TlsSettings};
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
    /// The last (seq, hash) this store wrote for each run it is writing: an append that knows
    /// its run's tail goes in one statement, with no lock or read first (`runs.rs`).
    tails: Tails,
    /// The duties this process holds or has held (`Store::with_duty`), one session each.
    duties: Duties,
}

/// Runs' tails as this store last wrote them; a hint, never trusted: the journal's insert
/// trigger checks that each event extends the chain, so a stale tail fails and the write is
/// done again the careful way.
#[derive(Default)]
pub(crate) struct Tails(std::sync::Mutex<std::collections::HashMap<String, (i64, String)>>);

/// Tails remembered at most (runs written and not ended by this process); beyond, forgotten.
const TAILS_MAX: usize = 10_000;

impl Tails {
    pub(crate) fn get(&self, run_id: &str) -> Option<(i64, String)> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(run_id)
            .cloned()
    }
    pub(crate) fn set(&self, run_id: &str, seq: i64, hash: &str) {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if m.len() >= TAILS_MAX && !m.contains_key(run_id) {
            m.clear();
        }
        m.insert(run_id.to_string(), (seq, hash.to_string()));
    }
    pub(crate) fn forget(&self, run_id: &str) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(run_id);
    }
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
            | schema::SQLSTATE_CHAIN_BROKEN
            | schema::SQLSTATE_DAMAGED => StoreError::Conflict(msg),
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

/// Statements a connection has prepared, by their SQL: the store's reads run the same few
/// dozen statements over and over, and a statement sent as text is parsed by the server again
/// each time (an extra round trip).
type Statements = std::collections::HashMap<String, postgres::Statement>;

/// Statements one connection keeps prepared at most (the cache is cleared when full).
const STATEMENTS_MAX: usize = 256;

struct PoolState {
    idle: Vec<(Client, Statements)>,
    opened: usize,
}

struct Pool {
    config: Config,
    /// `None`: plain connections (`sslmode=disable`).
    tls: Option<tokio_postgres_rustls::MakeRustlsConnect>,
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
    statements: Statements,
}

impl Conn<'_> {
    /// The prepared statement for `sql` on this connection, prepared on first use.
    fn statement(&mut self, sql: &str) -> StoreResult<postgres::Statement> {
        // Only `drop` takes the client out.
        let client = self.client.as_mut().unwrap_or_else(|| unreachable!());
        cached_statement(&mut self.statements, sql, |sql| client.prepare(sql)).map_err(db_err)
    }
}

/// The statement for `sql` from a connection's cache, or prepared with `prepare` on first
/// use and kept (a full cache is cleared first). Shared by the pooled connection and its
/// transactions, which prepare through different handles.
fn cached_statement(
    statements: &mut Statements,
    sql: &str,
    prepare: impl FnOnce(&str) -> Result<postgres::Statement, postgres::Error>,
) -> Result<postgres::Statement, postgres::Error> {
    if let Some(st) = statements.get(sql) {
        return Ok(st.clone());
    }
    let st = prepare(sql)?;
    if statements.len() >= STATEMENTS_MAX {
        statements.clear();
    }
    statements.insert(sql.to_string(), st.clone());
    Ok(st)
}

/// A transaction on a pooled connection. Its `query`, `query_opt`, `query_one` and `execute`
/// run the connection's prepared statement for the SQL (prepared on first use and kept with
/// the connection), so a statement is parsed once per connection, not once per call; anything
/// else is the transaction's own (`Deref`).
pub(crate) struct Txn<'c, 's> {
    t: Transaction<'c>,
    statements: &'s mut Statements,
}

impl<'c> Deref for Txn<'c, '_> {
    type Target = Transaction<'c>;
    fn deref(&self) -> &Transaction<'c> {
        &self.t
    }
}

impl<'c> DerefMut for Txn<'c, '_> {
    fn deref_mut(&mut self) -> &mut Transaction<'c> {
        &mut self.t
    }
}

impl Txn<'_, '_> {
    fn statement(&mut self, sql: &str) -> Result<postgres::Statement, postgres::Error> {
        let t = &mut self.t;
        cached_statement(self.statements, sql, |sql| t.prepare(sql))
    }

    pub(crate) fn query(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, postgres::Error> {
        let st = self.statement(sql)?;
        self.t.query(&st, params)
    }

    pub(crate) fn query_opt(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, postgres::Error> {
        let st = self.statement(sql)?;
        self.t.query_opt(&st, params)
    }

    pub(crate) fn query_one(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, postgres::Error> {
        let st = self.statement(sql)?;
        self.t.query_one(&st, params)
    }

    pub(crate) fn execute(
        &mut self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, postgres::Error> {
        let st = self.statement(sql)?;
        self.t.execute(&st, params)
    }
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
            st.idle.push((client, std::mem::take(&mut self.statements)));
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
        let connected = match &self.tls {
            Some(tls) => self.config.connect(tls.clone()),
            None => self.config.connect(NoTls),
        };
        let mut client = connected.map_err(|e| {
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
            if let Some((client, statements)) = st.idle.pop() {
                if client.is_closed() {
                    st.opened -= 1;
                    continue;
                }
                return Ok(Conn {
                    pool: self,
                    client: Some(client),
                    statements,
                });
            }
            if st.opened < self.options.connections_max.max(1) {
                st.opened += 1;
                drop(st);
                return match self.connect() {
                    Ok(client) => Ok(Conn {
                        pool: self,
                        client: Some(client),
                        statements: Statements::new(),
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

fn rows<T>(rows: Vec<Row>, f: fn(&Row) -> StoreResult<T>) -> StoreResult<Vec<T>> {
    rows.iter().map(f).collect()
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
        let (url, tls) = tls::split_url(url)?;
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
        config.ssl_mode(tls::client_mode(tls.mode));
        let pool = Pool {
            config,
            tls: tls::connector(&tls)?,
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
            tails: Tails::default(),
            duties: Duties::default(),
        })
    }

    /// The schema this store lives in.
    pub fn schema(&self) -> &str {
        &self.schema
    }

    /// Run `f` in one transaction on a pooled connection; commit if it returns `Ok`, roll
    /// back (by dropping the transaction) if it returns `Err`.
    fn tx<T>(&self, f: impl FnOnce(&mut Txn<'_, '_>) -> StoreResult<T>) -> StoreResult<T> {
        let mut conn = self.pool.get()?;
        let client = conn
            .client
            .as_mut()
            .ok_or_else(|| StoreError::Fatal("a pooled connection without a client".into()))?;
        let t = client.transaction().map_err(db_err)?;
        let mut txn = Txn {
            t,
            statements: &mut conn.statements,
        };
        let v = f(&mut txn)?;
        txn.t.commit().map_err(commit_err)?;
        Ok(v)
    }

    /// One statement in its own transaction; the server's own refusal is returned as it
    /// came (`Ok(Err)`), so the caller can tell "refused, nothing written" from a lost
    /// connection (`Err`).
    fn exec_or_refused(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> StoreResult<Result<u64, postgres::Error>> {
        let mut c = self.pool.get()?;
        let st = c.statement(sql)?;
        match c.execute(&st, params) {
            Err(e) if e.as_db_error().is_none() => Err(db_err(e)),
            r => Ok(r),
        }
    }

    /// Like [`exec_or_refused`](Self::exec_or_refused) for a statement returning one row.
    fn query_one_or_refused(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> StoreResult<Result<Row, postgres::Error>> {
        let mut c = self.pool.get()?;
        let st = c.statement(sql)?;
        match c.query_one(&st, params) {
            Err(e) if e.as_db_error().is_none() => Err(db_err(e)),
            r => Ok(r),
        }
    }

    /// One statement in its own (autocommit) transaction.
    fn exec(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<u64> {
        let mut c = self.pool.get()?;
        let st = c.statement(sql)?;
        c.execute(&st, params).map_err(db_err)
    }

    fn query(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<Vec<Row>> {
        let mut c = self.pool.get()?;
        let st = c.statement(sql)?;
        c.query(&st, params).map_err(db_err)
    }

    fn query_opt(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> StoreResult<Option<Row>> {
        let mut c = self.pool.get()?;
        let st = c.statement(sql)?;
        c.query_opt(&st, params).map_err(db_err)
    }

    fn run_exists(&self, id: &str) -> StoreResult<bool> {
        Ok(self
            .query_opt("SELECT 1 FROM runs WHERE id = $1", &[&id])?
            .is_some())
    }
}

/// Duties one store fences at most; each keeps a connection of its own.
pub const DUTIES_MAX: usize = 8;

/// Each duty's own session: an advisory lock belongs to the session that took it, so the
/// server lets go of it when this process dies (its sessions close), and never while the
/// session lives.
#[derive(Default)]
struct Duties(Mutex<std::collections::HashMap<String, std::sync::Arc<Mutex<Option<Client>>>>>);

impl PostgresStore {
    fn fenced(&self, duty: &str, wait: bool, work: &mut dyn FnMut()) -> StoreResult<bool> {
        let slot = {
            let mut m = self.duties.0.lock().map_err(poisoned)?;
            if !m.contains_key(duty) && m.len() >= DUTIES_MAX {
                return Err(StoreError::Fatal(format!(
                    "duty `{duty}`: a store fences at most {DUTIES_MAX} duties"
                )));
            }
            m.entry(duty.to_string()).or_default().clone()
        };
        // One holder per process at a time (the session's lock would let a second one in);
        // other processes wait on the server's lock.
        let mut held = slot.lock().map_err(poisoned)?;
        if held.as_ref().is_none_or(|c| c.is_closed()) {
            *held = Some(self.pool.connect()?);
        }
        let key = format!("vouch:{}:{duty}", self.schema);
        let took = match held.as_mut() {
            Some(c) if wait => c
                .execute("SELECT pg_advisory_lock(hashtextextended($1, 0))", &[&key])
                .map(|_| true),
            Some(c) => c
                .query_one(
                    "SELECT pg_try_advisory_lock(hashtextextended($1, 0))",
                    &[&key],
                )
                .map(|row| row.get::<_, bool>(0)),
            None => return Ok(false),
        };
        match took {
            Ok(true) => {}
            Ok(false) => return Ok(false),
            // Waited as long as any lock (`lock_timeout`): another process holds it.
            Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => return Ok(false),
            Err(e) => {
                *held = None;
                return Err(db_err(e));
            }
        }
        work();
        let let_go = held.as_mut().map(|c| {
            c.execute(
                "SELECT pg_advisory_unlock(hashtextextended($1, 0))",
                &[&key],
            )
        });
        if let Some(Err(e)) = let_go {
            // A session that could not let go is closed: the server lets go with it.
            *held = None;
            return Err(db_err(e));
        }
        Ok(true)
    }
}

/// How long a listener waits before it connects again after losing its connection.
pub const LISTEN_RETRY_MS: u64 = 1_000;

/// What a listener is told: what changed (`Ok`), or why it stopped listening for a moment.
pub type OnWake = Box<dyn Fn(Result<&str, &StoreError>) + Send>;

impl PostgresStore {
    /// Listen for the store's wake-ups (migration 9): whenever any process on any host writes
    /// a task, a card or a run's state, `on_wake` is called with what changed (`task`, `card`,
    /// `run`) on a thread of its own, over a connection of its own. After (re)connecting it is
    /// called with `listening`, since anything may have changed while nobody listened; a lost
    /// connection is told as `Err` and made again after [`LISTEN_RETRY_MS`]. The thread never
    /// ends the process.
    pub fn listen(
        self: std::sync::Arc<Self>,
        on_wake: OnWake,
    ) -> std::io::Result<std::thread::JoinHandle<()>> {
        std::thread::Builder::new()
            .name("vouch-pg-listen".into())
            .spawn(move || loop {
                if let Err(e) = self.listen_once(&*on_wake) {
                    on_wake(Err(&e));
                }
                std::thread::sleep(std::time::Duration::from_millis(LISTEN_RETRY_MS));
            })
    }

    fn listen_once(&self, on_wake: &dyn Fn(Result<&str, &StoreError>)) -> StoreResult<()> {
        let mut c = self.pool.connect()?;
        let channel: String = c
            .query_one("SELECT 'vouch_' || md5($1)", &[&self.schema])
            .and_then(|r| r.try_get(0))
            .map_err(db_err)?;
        c.batch_execute(&format!("LISTEN {}", quote_ident(&channel)))
            .map_err(db_err)?;
        on_wake(Ok("listening"));
        let mut notes = c.notifications();
        let mut it = notes.blocking_iter();
        loop {
            match it.next() {
                Ok(Some(n)) => on_wake(Ok(n.payload())),
                Ok(None) => {
                    return Err(StoreError::Retryable(
                        "the server closed the connection".into(),
                    ))
                }
                Err(e) => return Err(db_err(e)),
            }
        }
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
    fn with_duty(&self, duty: &str, wait: bool, work: &mut dyn FnMut()) -> StoreResult<bool> {
        self.fenced(duty, wait, work)
    }

    fn read_only(&self) -> Option<String> {
        self.pool.read_only.clone()
    }

    fn create_run(&self, run: &NewRun) -> StoreResult<()> {
        runs::create_run(self, run)
    }

    fn run(&self, id: &str) -> StoreResult<Option<RunRecord>> {
        runs::run(self, id)
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

    fn append_batch(&self, run_id: &str, events: &[NewEvent]) -> StoreResult<Vec<JournalEntry>> {
        runs::append_batch(self, run_id, events)
    }

    fn journal(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
        runs::journal(self, run_id)
    }

    fn journal_since(&self, run_id: &str, after_seq: i64) -> StoreResult<Vec<JournalEntry>> {
        runs::journal_since(self, run_id, after_seq)
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
        let dollars = |sql: &str| {
            (1..=5).rev().fold(sql.to_string(), |q, i| {
                q.replace(&format!("?{i}"), &format!("${i}"))
            })
        };
        let inserted = self.exec(
            &dollars(vouch_store::request_keys::KEEP_REQUEST_SQL),
            &[&key.scope, &key.key, &key.request, &key.answer, &now_ms],
        )?;
        if inserted == 1 {
            return Ok(None);
        }
        let row = self
            .query_opt(
                &dollars(vouch_store::request_keys::KEPT_REQUEST_SQL),
                &[&key.scope, &key.key],
            )?
            .ok_or_else(|| {
                StoreError::Fatal(format!("request key `{}` was kept and is gone", key.key))
            })?;
        Ok(Some(vouch_store::request_keys::KeptRequest {
            request: row.get(0),
            answer: row.get(1),
        }))
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
