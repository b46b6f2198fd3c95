//! Runs and their journals on SQLite: creating, leasing and listing runs, appending to a run's
//! chain (the writer's serialized part: next seq, SHA-256, insert), and the terminal transaction.

use super::*;

pub(super) fn run_row(r: &Row) -> rusqlite::Result<RunRecord> {
    let trigger: String = r.get(1)?;
    let state: String = r.get(7)?;
    let outcome: Option<String> = r.get(8)?;
    let ended_by: Option<String> = r.get(9)?;
    let spec: String = r.get(6)?;
    Ok(RunRecord {
        id: r.get(0)?,
        trigger: parse::<TriggerKind>(&trigger, "trigger")?,
        title: r.get(2)?,
        chain_root: r.get(3)?,
        parent: r.get(4)?,
        scope: r.get(5)?,
        spec: json_col(&spec)?,
        state: RunState::parse(&state).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                7,
                rusqlite::types::Type::Text,
                format!("state {state}").into(),
            )
        })?,
        outcome: outcome
            .map(|o| parse::<Outcome>(&o, "outcome"))
            .transpose()?,
        ended_by: ended_by
            .map(|o| parse::<EndedBy>(&o, "ended_by"))
            .transpose()?,
        created_ms: r.get(10)?,
        ended_ms: r.get(11)?,
        owner: r.get(12)?,
        lease_until_ms: r.get(13)?,
    })
}

pub(super) fn journal_row(r: &Row) -> rusqlite::Result<JournalEntry> {
    let kind: String = r.get(2)?;
    let body: String = r.get(4)?;
    Ok(JournalEntry {
        run_id: r.get(0)?,
        seq: r.get(1)?,
        kind: EventKind::parse(&kind).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                2,
                rusqlite::types::Type::Text,
                format!("event kind {kind}").into(),
            )
        })?,
        delivery: r.get(3)?,
        body: json_col(&body)?,
        at_ms: r.get(5)?,
        prev_hash: r.get(6)?,
        hash: r.get(7)?,
    })
}

/// Append inside the writer's transaction: next seq, chained hash, insert. Returns
/// `(seq, prev_hash, hash)`.
fn insert_event(conn: &Connection, ev: &PreparedEvent) -> StoreResult<(i64, String, String)> {
    let tail = tail(conn, &ev.run_id)?;
    let mut insert = conn.prepare_cached(INSERT_EVENT_SQL).map_err(db_err)?;
    insert_after(&mut insert, ev, tail)
}

/// Append a run's events in order inside the writer's transaction, reading its tail once
/// (the writer holds the only write lock, so nobody appends in between). Returns each one's
/// `(seq, prev_hash, hash)`.
fn insert_events<'e>(
    conn: &Connection,
    run_id: &str,
    evs: impl IntoIterator<Item = &'e PreparedEvent>,
) -> StoreResult<Vec<(i64, String, String)>> {
    let mut last = tail(conn, run_id)?;
    let mut out = vec![];
    // One statement for the batch: a lookup in the statement cache hashes the SQL's text.
    let mut insert = conn.prepare_cached(INSERT_EVENT_SQL).map_err(db_err)?;
    for ev in evs {
        let (seq, prev, hash) = insert_after(&mut insert, ev, last)?;
        last = Some((seq, hash.clone()));
        out.push((seq, prev, hash));
    }
    Ok(out)
}

const INSERT_EVENT_SQL: &str = "INSERT INTO journal (run_id, seq, kind, delivery, body, at_ms, prev_hash, hash) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)";

/// The seq and hash of a run's last event, if any.
fn tail(conn: &Connection, run_id: &str) -> StoreResult<Option<(i64, String)>> {
    conn.prepare_cached("SELECT seq, hash FROM journal WHERE run_id = ?1 ORDER BY seq DESC LIMIT 1")
        .and_then(|mut st| {
            st.query_row([run_id], |r| Ok((r.get(0)?, r.get(1)?)))
                .optional()
        })
        .map_err(db_err)
}

/// Insert `ev` after the run's `last` event (its seq and hash) with `insert`
/// ([`INSERT_EVENT_SQL`]).
fn insert_after(
    insert: &mut rusqlite::CachedStatement<'_>,
    ev: &PreparedEvent,
    last: Option<(i64, String)>,
) -> StoreResult<(i64, String, String)> {
    let run_id = ev.run_id.as_str();
    let (seq, prev) = match last {
        Some((s, h)) => (s + 1, h),
        None => (1, GENESIS_HASH.to_string()),
    };
    let hash = ev.content.hash(&prev, seq);
    insert
        .execute(params![
            run_id,
            seq,
            ev.kind.as_str(),
            ev.delivery,
            ev.body_text,
            ev.at_ms,
            prev,
            hash
        ])
        .map_err(|e| insert_refused(run_id, e))?;
    Ok((seq, prev, hash))
}

/// Why SQLite refused an event's insert, as the store says it.
fn insert_refused(run_id: &str, e: rusqlite::Error) -> StoreError {
    use rusqlite::ffi;
    // By SQLite's extended code, never by the wording: the only trigger on an insert into
    // the journal closes it after the terminal event, and its only unique index is the one
    // terminal per run (the key (run_id, seq) is a primary-key violation, not this one).
    let extended = match &e {
        rusqlite::Error::SqliteFailure(f, _) => Some(f.extended_code),
        _ => None,
    };
    match extended {
        // The foreign key stands for "the run exists" (one query less per append).
        Some(ffi::SQLITE_CONSTRAINT_FOREIGNKEY) => StoreError::NotFound {
            what: "run",
            id: run_id.to_string(),
        },
        Some(ffi::SQLITE_CONSTRAINT_TRIGGER | ffi::SQLITE_CONSTRAINT_UNIQUE) => {
            codec::run_ended(run_id)
        }
        _ => db_err(e),
    }
}

pub(super) fn insert_run(conn: &Connection, run: &NewRun) -> StoreResult<()> {
    vouch_store::check_birth_state(run)?;
    let spec = json_text(&run.spec)?;
    execute_cached(conn,
        &format!("INSERT INTO runs ({RUN_COLS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?11,NULL,NULL,?8,NULL,?9,?10)"),
        params![run.id, enum_text(&run.trigger), run.title, run.chain_root, run.parent, run.scope, spec, run.created_ms, run.lease.as_ref().map(|l| l.owner.as_str()), run.lease.as_ref().map(|l| l.until_ms), enum_text(&run.state)],
    )
    .map_err(|e| codec::run_insert_conflict(&run.id, db_err(e)))?;
    Ok(())
}

/// A run's creation is one statement, committed without an fsync of its own (contract
/// §3.4.2): durable against this process's death at once, against the machine's with the
/// run's first durability point.
pub(super) fn create_run(store: &SqliteStore, run: &NewRun) -> StoreResult<()> {
    let run = run.clone();
    store.write_unsynced(move |c| insert_run(c, &run))
}

pub(super) fn run(store: &SqliteStore, id: &str) -> StoreResult<Option<RunRecord>> {
    store.read(|c| {
        query_row_cached(
            c,
            &format!("SELECT {RUN_COLS} FROM runs WHERE id = ?1"),
            [id],
            run_row,
        )
        .optional()
        .map_err(read_err)
    })
}

/// A run's state, without its spec and the rest of its row.
pub(super) fn run_state(store: &SqliteStore, id: &str) -> StoreResult<Option<RunState>> {
    store.read(|c| {
        query_row_cached(c, "SELECT state FROM runs WHERE id = ?1", [id], |r| {
            parse::<RunState>(r.get_ref(0)?.as_str()?, "state")
        })
        .optional()
        .map_err(read_err)
    })
}

pub(super) fn runs(store: &SqliteStore, limit: usize) -> StoreResult<Vec<RunRecord>> {
    store.read(|c| {
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {RUN_COLS} FROM runs ORDER BY created_ms DESC, rowid DESC LIMIT ?1"
            ))
            .map_err(db_err)?;
        let rows = st.query_map([limit as i64], run_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

/// `RunFilter::matches` in SQL: an unset field is NULL and lets every row through. SQLite's
/// `lower` folds ASCII letters only, as the filter states.
pub(super) fn runs_filtered(
    store: &SqliteStore,
    f: &vouch_store::RunFilter,
    offset: usize,
    limit: usize,
) -> StoreResult<Vec<RunRecord>> {
    let p = (
        f.state.map(|s| s.as_str()),
        f.outcome.map(|o| o.as_str()),
        f.trigger.map(|t| t.as_str()),
        f.schedule_scope(),
        f.task_scope(),
        f.since_ms,
        f.until_ms,
        f.title_lower(),
    );
    store.read(move |c| {
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {RUN_COLS} FROM runs WHERE (?1 IS NULL OR state = ?1) \
                 AND (?2 IS NULL OR outcome = ?2) AND (?3 IS NULL OR trigger = ?3) \
                 AND (?4 IS NULL OR substr(scope, 1, length(?4)) = ?4) \
                 AND (?5 IS NULL OR scope = ?5) AND (?6 IS NULL OR created_ms >= ?6) \
                 AND (?7 IS NULL OR created_ms < ?7) \
                 AND (?8 IS NULL OR instr(lower(title), ?8) > 0) \
                 ORDER BY created_ms DESC, rowid DESC LIMIT ?9 OFFSET ?10"
            ))
            .map_err(db_err)?;
        let rows = st
            .query_map(
                params![
                    p.0,
                    p.1,
                    p.2,
                    p.3,
                    p.4,
                    p.5,
                    p.6,
                    p.7,
                    limit as i64,
                    offset as i64
                ],
                run_row,
            )
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

pub(super) fn set_run_state(store: &SqliteStore, id: &str, state: RunState) -> StoreResult<()> {
    if state == RunState::Ended {
        return Err(StoreError::Conflict("runs end only through end_run".into()));
    }
    let id = id.to_string();
    store.write(move |c| {
        let n = c
            .execute(
                "UPDATE runs SET state = ?2 WHERE id = ?1 AND state != 'ended'",
                params![id, state.as_str()],
            )
            .map_err(db_err)?;
        if n == 0 {
            let exists: Option<String> = c
                .query_row("SELECT state FROM runs WHERE id = ?1", [&id], |r| r.get(0))
                .optional()
                .map_err(db_err)?;
            return match exists {
                None => Err(StoreError::NotFound { what: "run", id }),
                Some(_) => Err(StoreError::Conflict(format!("run {id} has already ended"))),
            };
        }
        Ok(())
    })
}

pub(super) fn append(
    store: &SqliteStore,
    run_id: &str,
    event: &NewEvent,
) -> StoreResult<JournalEntry> {
    if event.kind == EventKind::Terminal {
        return Err(codec::terminal_only_by_end_run());
    }
    let ev = PreparedEvent::new(run_id, event)?;
    let (seq, prev, hash, ev) = store.write_one(move |c| {
        let (seq, prev, hash) = insert_event(c, &ev)?;
        Ok((seq, prev, hash, ev))
    })?;
    Ok(ev.entry_of(seq, prev, hash, &event.body))
}

pub(super) fn append_batch(
    store: &SqliteStore,
    run_id: &str,
    events: &[NewEvent],
) -> StoreResult<Vec<JournalEntry>> {
    if events.is_empty() {
        return Ok(vec![]);
    }
    let prepared = PreparedEvent::all(run_id, events)?;
    // One job, one savepoint: the batch is durable together or not at all.
    let run_id = run_id.to_string();
    let (prepared, chained) = store.write(move |c| {
        let chained = insert_events(c, &run_id, &prepared)?;
        Ok((prepared, chained))
    })?;
    Ok(prepared
        .into_iter()
        .zip(chained)
        .zip(events)
        .map(|((ev, (seq, prev, hash)), given)| ev.entry_of(seq, prev, hash, &given.body))
        .collect())
}

/// [`append_batch`] answering only the last seq: no entry is built, no body copied.
pub(super) fn append_batch_seq(
    store: &SqliteStore,
    run_id: &str,
    events: &[NewEvent],
) -> StoreResult<Option<i64>> {
    if events.is_empty() {
        return Ok(None);
    }
    let prepared = PreparedEvent::all(run_id, events)?;
    let run_id = run_id.to_string();
    store.write(move |c| {
        let chained = insert_events(c, &run_id, &prepared)?;
        Ok(chained.last().map(|(seq, _, _)| *seq))
    })
}

pub(super) fn journal(store: &SqliteStore, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
    store.read(|c| {
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {JOURNAL_COLS} FROM journal WHERE run_id = ?1 ORDER BY seq"
            ))
            .map_err(db_err)?;
        let rows = st.query_map([run_id], journal_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

/// A run's journal as typed events: each body's text read straight into its kind's type
/// (no `Value` between, no hashes read).
pub(super) fn journal_events(store: &SqliteStore, run_id: &str) -> StoreResult<Vec<EventEntry>> {
    store.read(|c| {
        let mut st = c
            .prepare_cached(
                "SELECT seq, kind, delivery, body, at_ms FROM journal WHERE run_id = ?1 ORDER BY seq",
            )
            .map_err(db_err)?;
        let rows = st.query_map([run_id], event_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

fn event_row(r: &Row) -> rusqlite::Result<EventEntry> {
    let kind = r.get_ref(1)?.as_str()?;
    let kind = EventKind::parse(kind).ok_or_else(|| {
        rusqlite::Error::FromSqlConversionFailure(
            1,
            rusqlite::types::Type::Text,
            format!("event kind {kind}").into(),
        )
    })?;
    let (seq, delivery, at_ms) = (r.get(0)?, r.get(2)?, r.get(4)?);
    EventEntry::of_text(seq, kind, delivery, at_ms, r.get_ref(3)?.as_str()?).map_err(|e| {
        rusqlite::Error::FromSqlConversionFailure(3, rusqlite::types::Type::Text, Box::new(e))
    })
}

pub(super) fn journal_since(
    store: &SqliteStore,
    run_id: &str,
    after_seq: i64,
) -> StoreResult<Vec<JournalEntry>> {
    store.read(|c| {
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {JOURNAL_COLS} FROM journal WHERE run_id = ?1 AND seq > ?2 ORDER BY seq"
            ))
            .map_err(db_err)?;
        let rows = st
            .query_map(params![run_id, after_seq], journal_row)
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

pub(super) fn end_run_after(
    store: &SqliteStore,
    run_id: &str,
    events: &[NewEvent],
    terminal: &Terminal,
) -> StoreResult<EndResult> {
    let before = PreparedEvent::all(run_id, events)?;
    let (run_id, t) = (run_id.to_string(), terminal.clone());
    let ev = PreparedEvent::of_body(&run_id, EventKind::Terminal, None, t.at_ms, &t.body)?;
    store.write(move |c| {
        let state: Option<String> = query_row_cached(c, "SELECT state FROM runs WHERE id = ?1", [&run_id], |r| r.get(0)).optional().map_err(db_err)?;
        match state.as_deref() {
            None => return Err(StoreError::NotFound { what: "run", id: run_id }),
            Some("ended") => return Ok(EndResult::AlreadyEnded),
            _ => {}
        }
        let (seq, prev, hash) = insert_events(c, &run_id, before.iter().chain([&ev]))?
            .pop()
            .ok_or_else(|| StoreError::Fatal("the terminal event was not inserted".into()))?;
        execute_cached(c,
            "UPDATE runs SET state = 'ended', outcome = ?2, ended_by = ?3, ended_ms = ?4, owner = NULL, lease_until_ms = NULL WHERE id = ?1",
            params![run_id, enum_text(&t.outcome), enum_text(&t.ended_by), t.at_ms],
        )
        .map_err(db_err)?;
        execute_cached(c, "INSERT INTO receipts (run_id, text) VALUES (?1, ?2)", params![run_id, t.receipt]).map_err(db_err)?;
        if let Some(o) = &t.outbox {
            let body = json_text(&o.body)?;
            execute_cached(c,
                "INSERT OR IGNORE INTO outbox (dedup_key, run_id, route, body, created_ms, sent_ms) VALUES (?1,?2,?3,?4,?5,NULL)",
                params![o.dedup_key, o.run_id, o.route, body, t.at_ms],
            )
            .map_err(db_err)?;
        }
        Ok(EndResult::Ended(TerminalPlace { seq, prev_hash: prev, hash }))
    })
}

pub(super) fn receipt(store: &SqliteStore, run_id: &str) -> StoreResult<Option<String>> {
    store.read(|c| {
        query_row_cached(
            c,
            "SELECT text FROM receipts WHERE run_id = ?1",
            [run_id],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err)
    })
}

/// A lease is a take-over from oneself: the run is free, lapsed, or already `owner`'s.
pub(super) fn lease_run(
    store: &SqliteStore,
    run_id: &str,
    owner: &str,
    now_ms: i64,
    until_ms: i64,
) -> StoreResult<bool> {
    take_over_run(store, run_id, owner, owner, now_ms, until_ms)
}

pub(super) fn take_over_run(
    store: &SqliteStore,
    run_id: &str,
    gone: &str,
    owner: &str,
    now_ms: i64,
    until_ms: i64,
) -> StoreResult<bool> {
    let (run_id, gone, owner) = (run_id.to_string(), gone.to_string(), owner.to_string());
    store.write(move |c| {
        let n = execute_cached(
            c,
            "UPDATE runs SET owner = ?3, lease_until_ms = ?5 WHERE id = ?1 AND state != 'ended'
             AND (owner IS NULL OR owner = ?2 OR owner = ?3 OR lease_until_ms IS NULL OR lease_until_ms < ?4)",
            params![run_id, gone, owner, now_ms, until_ms],
        )
        .map_err(db_err)?;
        if n == 1 {
            return Ok(true);
        }
        let exists: Option<String> = query_row_cached(c, "SELECT state FROM runs WHERE id = ?1", [&run_id], |r| r.get(0)).optional().map_err(db_err)?;
        match exists {
            None => Err(StoreError::NotFound { what: "run", id: run_id }),
            Some(_) => Ok(false),
        }
    })
}

pub(super) fn release_run(store: &SqliteStore, run_id: &str, owner: &str) -> StoreResult<()> {
    let (run_id, owner) = (run_id.to_string(), owner.to_string());
    store.write(move |c| {
        execute_cached(
            c,
            "UPDATE runs SET owner = NULL, lease_until_ms = NULL WHERE id = ?1 AND owner = ?2",
            params![run_id, owner],
        )
        .map_err(db_err)?;
        Ok(())
    })
}

pub(super) fn orphaned_runs(store: &SqliteStore, now_ms: i64) -> StoreResult<Vec<RunRecord>> {
    store.read(|c| {
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {RUN_COLS} FROM runs WHERE state != 'ended' AND (owner IS NULL OR lease_until_ms IS NULL OR lease_until_ms < ?1) ORDER BY created_ms"
            ))
            .map_err(db_err)?;
        let rows = st.query_map([now_ms], run_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

pub(super) fn open_runs(store: &SqliteStore) -> StoreResult<Vec<RunRecord>> {
    store.read(|c| {
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {RUN_COLS} FROM runs WHERE state != 'ended' ORDER BY created_ms"
            ))
            .map_err(db_err)?;
        let rows = st.query_map([], run_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

pub(super) fn runs_by_prefix(
    store: &SqliteStore,
    prefix: &str,
    limit: usize,
) -> StoreResult<Vec<RunRecord>> {
    // A range on the primary key: ids are compared bytewise, and U+10FFFF sorts after
    // every character an id can hold.
    let upper = format!("{prefix}\u{10FFFF}");
    let prefix = prefix.to_string();
    store.read(move |c| {
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {RUN_COLS} FROM runs WHERE id >= ?1 AND id < ?2 ORDER BY id LIMIT ?3"
            ))
            .map_err(db_err)?;
        let rows = st
            .query_map(params![prefix, upper, limit as i64], run_row)
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

pub(super) fn continuation_of(store: &SqliteStore, parent: &str) -> StoreResult<Option<RunRecord>> {
    store.read(|c| {
        query_row_cached(
            c,
            &format!("SELECT {RUN_COLS} FROM runs WHERE parent = ?1 ORDER BY created_ms LIMIT 1"),
            [parent],
            run_row,
        )
        .optional()
        .map_err(read_err)
    })
}
