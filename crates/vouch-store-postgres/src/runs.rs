//! Runs and their journals on PostgreSQL: creating, leasing and listing runs, appending to a
//! run's chain under the run row's lock, and the terminal transaction.

use super::*;

pub(super) fn run_row(r: &Row) -> StoreResult<RunRecord> {
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

pub(super) fn journal_row(r: &Row) -> StoreResult<JournalEntry> {
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

/// Lock the run's row for the rest of the transaction and return its state (None: no such
/// run). Appends, `end_run` and `open_card` take this lock, so they are serialized per run.
pub(super) fn lock_run(t: &mut Txn<'_, '_>, run_id: &str) -> StoreResult<Option<String>> {
    let row = t
        .query_opt(
            "SELECT state FROM runs WHERE id = $1 FOR NO KEY UPDATE",
            &[&run_id],
        )
        .map_err(db_err)?;
    row.map(|r| col::<String>(&r, 0, "run state")).transpose()
}

/// Insert the next events of a run whose row `t` has locked, in order. Returns each one's
/// `(seq, prev_hash, hash)`. The tail is read once, in a statement after the lock was
/// granted, so at READ COMMITTED it sees every append committed before ours; the lock keeps
/// anyone else from appending until we commit, so the chain goes on in memory from there, and
/// the batch is one prepared statement over arrays (one round trip a batch, not one an event).
fn insert_events(
    t: &mut Txn<'_, '_>,
    run_id: &str,
    evs: &[&PreparedEvent],
) -> StoreResult<Vec<(i64, String, String)>> {
    let last = t
        .query_opt(
            "SELECT seq, hash FROM journal WHERE run_id = $1 ORDER BY seq DESC LIMIT 1",
            &[&run_id],
        )
        .map_err(db_err)?;
    let tail = match last {
        Some(r) => (
            col::<i64>(&r, 0, "event seq")?,
            col::<String>(&r, 1, "event hash")?,
        ),
        None => (0, GENESIS_HASH.to_string()),
    };
    // The chain goes on in memory; the events go in one statement (one round trip a batch).
    let out = chain(tail, evs);
    let a = EventArrays::new(evs, &out);
    t.execute(
        INSERT_EVENTS,
        &[
            &run_id,
            &a.seqs,
            &a.kinds,
            &a.deliveries,
            &a.bodies,
            &a.ats,
            &a.prevs,
            &a.hashes,
        ],
    )
    .map_err(|e| {
        let foreign_key = e.code() == Some(&SqlState::FOREIGN_KEY_VIOLATION);
        // Closed by the trigger's own SQLSTATE, or by the one-terminal index: by code and
        // constraint name, never by the wording of the message.
        let closed = e.code().map(SqlState::code) == Some(schema::SQLSTATE_RUN_CLOSED)
            || e.as_db_error().and_then(|d| d.constraint()) == Some("journal_one_terminal");
        match db_err(e) {
            // The run row was locked above, so this means it was never there.
            _ if foreign_key => StoreError::NotFound {
                what: "run",
                id: run_id.to_string(),
            },
            _ if closed => codec::run_ended(run_id),
            other => other,
        }
    })?;
    Ok(out)
}

/// A batch of a run's events, in order: `$1` the run, `$2`…`$8` one array per column.
const INSERT_EVENTS: &str = "INSERT INTO journal (run_id, seq, kind, delivery, body, at_ms, prev_hash, hash)
     SELECT $1, * FROM UNNEST($2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::text[])";

/// `(seq, prev_hash, hash)` of each event after the run's `tail` (its last seq and hash).
fn chain(tail: (i64, String), evs: &[&PreparedEvent]) -> Vec<(i64, String, String)> {
    let (mut seq, mut prev) = tail;
    let mut out = Vec::with_capacity(evs.len());
    for ev in evs {
        seq += 1;
        let hash = ev.content.hash(&prev, seq);
        let this = std::mem::replace(&mut prev, hash.clone());
        out.push((seq, this, hash));
    }
    out
}

/// The column arrays of [`INSERT_EVENTS`].
struct EventArrays<'a> {
    seqs: Vec<i64>,
    kinds: Vec<&'a str>,
    deliveries: Vec<Option<&'a str>>,
    bodies: Vec<&'a str>,
    ats: Vec<i64>,
    prevs: Vec<&'a str>,
    hashes: Vec<&'a str>,
}

impl<'a> EventArrays<'a> {
    fn new(evs: &[&'a PreparedEvent], chained: &'a [(i64, String, String)]) -> Self {
        EventArrays {
            seqs: chained.iter().map(|(s, _, _)| *s).collect(),
            kinds: evs.iter().map(|e| e.kind.as_str()).collect(),
            deliveries: evs.iter().map(|e| e.delivery.as_deref()).collect(),
            bodies: evs.iter().map(|e| e.body_text.as_str()).collect(),
            ats: evs.iter().map(|e| e.at_ms).collect(),
            prevs: chained.iter().map(|(_, p, _)| p.as_str()).collect(),
            hashes: chained.iter().map(|(_, _, h)| h.as_str()).collect(),
        }
    }
}

/// The fast path of an append whose run's tail this store wrote itself: the run's row lock
/// and the batch in one statement, with no read first (the insert trigger checks each event
/// extends the chain, with a snapshot taken after the lock). `None` when the tail is unknown,
/// the run has ended, or the server refused the batch (the tail was stale: another writer
/// appended) — nothing was written, and the caller goes the careful way.
fn append_at_known_tail(
    store: &PostgresStore,
    run_id: &str,
    evs: &[&PreparedEvent],
) -> StoreResult<Option<Vec<(i64, String, String)>>> {
    let Some(tail) = store.tails.get(run_id) else {
        return Ok(None);
    };
    let out = chain(tail, evs);
    let a = EventArrays::new(evs, &out);
    match store.exec_or_refused(
        "WITH locked AS (SELECT 1 FROM runs WHERE id = $1 AND state <> 'ended' FOR NO KEY UPDATE)
         INSERT INTO journal (run_id, seq, kind, delivery, body, at_ms, prev_hash, hash)
         SELECT $1, u.* FROM UNNEST($2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::text[]) AS u
         WHERE EXISTS (SELECT 1 FROM locked)",
        &[
            &run_id,
            &a.seqs,
            &a.kinds,
            &a.deliveries,
            &a.bodies,
            &a.ats,
            &a.prevs,
            &a.hashes,
        ],
    )? {
        Ok(n) if n as usize == evs.len() => Ok(Some(out)),
        _ => {
            store.tails.forget(run_id);
            Ok(None)
        }
    }
}

/// A run's row, inserted by `exec` (a plain client, or the store's statement cache) with
/// `sql`.
fn insert_run_with(
    run: &NewRun,
    sql: &str,
    exec: impl FnOnce(&str, &[&(dyn ToSql + Sync)]) -> StoreResult<u64>,
) -> StoreResult<()> {
    vouch_store::check_birth_state(run)?;
    let spec = json_text(&run.spec)?;
    exec(
        sql,
        &[
            &run.id,
            &enum_text(&run.trigger),
            &run.title,
            &run.chain_root,
            &run.parent,
            &run.scope,
            &spec,
            &run.created_ms,
            &run.lease.as_ref().map(|l| l.owner.as_str()),
            &run.lease.as_ref().map(|l| l.until_ms),
            &enum_text(&run.state),
        ],
    )
    .map_err(|e| codec::run_insert_conflict(&run.id, e))?;
    Ok(())
}

pub(super) fn insert_run(c: &mut impl postgres::GenericClient, run: &NewRun) -> StoreResult<()> {
    insert_run_with(
        run,
        "INSERT INTO runs (id, trigger, title, chain_root, parent, scope, spec, state, created_ms, owner, lease_until_ms) VALUES ($1,$2,$3,$4,$5,$6,$7,$11,$8,$9,$10)",
        |sql, params| c.execute(sql, params).map_err(db_err),
    )
}

/// A run's creation is committed without waiting for the server's WAL flush (contract
/// §3.4.2): the server has it once this returns, so this process's death never loses it; the
/// run's first durability point (a synchronous commit, later in the same WAL) carries it to
/// disk. One statement, one round trip: `set_config(…, true)` sets `synchronous_commit` for
/// the statement's own transaction, which the server reads when it commits.
pub(super) fn create_run(store: &PostgresStore, run: &NewRun) -> StoreResult<()> {
    insert_run_with(
        run,
        "INSERT INTO runs (id, trigger, title, chain_root, parent, scope, spec, state, created_ms, owner, lease_until_ms)
         SELECT $1::text, $2::text, $3::text, $4::text, $5::text, $6::text, $7::text, $11::text, $8::bigint, $9::text, $10::bigint
         FROM (SELECT set_config('synchronous_commit', 'off', true)) AS unsynced",
        |sql, params| store.exec(sql, params),
    )?;
    store.tails.set(&run.id, 0, GENESIS_HASH);
    Ok(())
}

pub(super) fn run(store: &PostgresStore, id: &str) -> StoreResult<Option<RunRecord>> {
    store
        .query_opt(
            &format!("SELECT {RUN_COLS} FROM runs WHERE id = $1"),
            &[&id],
        )?
        .map(|r| run_row(&r))
        .transpose()
}

pub(super) fn runs(store: &PostgresStore, limit: usize) -> StoreResult<Vec<RunRecord>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    rows(
        store.query(
            &format!("SELECT {RUN_COLS} FROM runs ORDER BY created_ms DESC, ord DESC LIMIT $1"),
            &[&limit],
        )?,
        run_row,
    )
}

/// `RunFilter::matches` in SQL: an unset field is NULL and lets every row through. Titles
/// are folded with `translate` over ASCII letters only, like SQLite's `lower`, so both
/// backends find the same runs.
pub(super) fn runs_filtered(
    store: &PostgresStore,
    f: &vouch_store::RunFilter,
    offset: usize,
    limit: usize,
) -> StoreResult<Vec<RunRecord>> {
    let limit = i64::try_from(limit).unwrap_or(i64::MAX);
    let offset = i64::try_from(offset).unwrap_or(i64::MAX);
    let (state, outcome, trigger) = (
        f.state.map(|s| s.as_str()),
        f.outcome.map(|o| o.as_str()),
        f.trigger.map(|t| t.as_str()),
    );
    let (schedule, task, title) = (f.schedule_scope(), f.task_scope(), f.title_lower());
    rows(
        store.query(
            &format!(
                "SELECT {RUN_COLS} FROM runs WHERE ($1::text IS NULL OR state = $1) \
                 AND ($2::text IS NULL OR outcome = $2) AND ($3::text IS NULL OR trigger = $3) \
                 AND ($4::text IS NULL OR starts_with(scope, $4)) \
                 AND ($5::text IS NULL OR scope = $5) \
                 AND ($6::bigint IS NULL OR created_ms >= $6) \
                 AND ($7::bigint IS NULL OR created_ms < $7) \
                 AND ($8::text IS NULL OR strpos(translate(title, \
                     'ABCDEFGHIJKLMNOPQRSTUVWXYZ', 'abcdefghijklmnopqrstuvwxyz'), $8) > 0) \
                 ORDER BY created_ms DESC, ord DESC LIMIT $9 OFFSET $10"
            ),
            &[
                &state,
                &outcome,
                &trigger,
                &schedule,
                &task,
                &f.since_ms,
                &f.until_ms,
                &title,
                &limit,
                &offset,
            ],
        )?,
        run_row,
    )
}

pub(super) fn set_run_state(store: &PostgresStore, id: &str, state: RunState) -> StoreResult<()> {
    if state == RunState::Ended {
        return Err(StoreError::Conflict("runs end only through end_run".into()));
    }
    let n = store.exec(
        "UPDATE runs SET state = $2 WHERE id = $1 AND state <> 'ended'",
        &[&id, &state.as_str()],
    )?;
    if n == 0 {
        return if store.run_exists(id)? {
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

pub(super) fn append(
    store: &PostgresStore,
    run_id: &str,
    event: &NewEvent,
) -> StoreResult<JournalEntry> {
    append_batch(store, run_id, std::slice::from_ref(event))?
        .pop()
        .ok_or_else(|| StoreError::Fatal("an append of one event returned none".into()))
}

pub(super) fn append_batch(
    store: &PostgresStore,
    run_id: &str,
    events: &[NewEvent],
) -> StoreResult<Vec<JournalEntry>> {
    if events.is_empty() {
        return Ok(vec![]);
    }
    if events.iter().any(|e| e.kind == EventKind::Terminal) {
        return Err(codec::terminal_only_by_end_run());
    }
    let prepared = PreparedEvent::all(run_id, events)?;
    let evs: Vec<&PreparedEvent> = prepared.iter().collect();
    let chained = match append_at_known_tail(store, run_id, &evs)? {
        Some(c) => c,
        None => store.tx(|t| {
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
            insert_events(t, run_id, &evs)
        })?,
    };
    if let Some((seq, _, hash)) = chained.last() {
        store.tails.set(run_id, *seq, hash);
    }
    Ok(prepared
        .into_iter()
        .zip(chained)
        .zip(events)
        .map(|((ev, (seq, prev, hash)), given)| ev.entry_of(seq, prev, hash, &given.body))
        .collect())
}

pub(super) fn journal(store: &PostgresStore, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
    rows(
        store.query(
            &format!("SELECT {JOURNAL_COLS} FROM journal WHERE run_id = $1 ORDER BY seq"),
            &[&run_id],
        )?,
        journal_row,
    )
}

pub(super) fn journal_since(
    store: &PostgresStore,
    run_id: &str,
    after_seq: i64,
) -> StoreResult<Vec<JournalEntry>> {
    rows(
        store.query(
            &format!(
                "SELECT {JOURNAL_COLS} FROM journal WHERE run_id = $1 AND seq > $2 ORDER BY seq"
            ),
            &[&run_id, &after_seq],
        )?,
        journal_row,
    )
}

pub(super) fn end_run_after(
    store: &PostgresStore,
    run_id: &str,
    events: &[NewEvent],
    terminal: &Terminal,
) -> StoreResult<EndResult> {
    let before = PreparedEvent::all(run_id, events)?;
    let ev = PreparedEvent::of_body(
        run_id,
        EventKind::Terminal,
        None,
        terminal.at_ms,
        &terminal.body,
    )?;
    let outbox_body = terminal
        .outbox
        .as_ref()
        .map(|o| json_text(&o.body))
        .transpose()?;
    let all: Vec<&PreparedEvent> = before.iter().chain(std::iter::once(&ev)).collect();
    let fast = end_at_known_tail(store, run_id, &all, terminal, outbox_body.as_deref());
    // The run ends here, or had ended: its tail is not needed again either way.
    store.tails.forget(run_id);
    if let Some((seq, prev, hash)) = fast? {
        return Ok(EndResult::Ended(TerminalPlace {
            seq,
            prev_hash: prev,
            hash,
        }));
    }
    let ended = store.tx(|t| {
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
        let (seq, prev, hash) = insert_events(t, run_id, &all)?
            .pop()
            .ok_or_else(|| StoreError::Fatal("the terminal event was not inserted".into()))?;
        // The run's row and its receipt in one statement (one round trip).
        t.execute(
            "WITH ended AS (UPDATE runs SET state = 'ended', outcome = $2, ended_by = $3, ended_ms = $4, owner = NULL, lease_until_ms = NULL WHERE id = $1)
             INSERT INTO receipts (run_id, text) VALUES ($1, $5)",
            &[&run_id, &enum_text(&terminal.outcome), &enum_text(&terminal.ended_by), &terminal.at_ms, &terminal.receipt],
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
        Some((seq, prev, hash)) => EndResult::Ended(TerminalPlace {
            seq,
            prev_hash: prev,
            hash,
        }),
        None => EndResult::AlreadyEnded,
    })
}

/// The fast path of the terminal transaction when this store wrote the run's tail: the
/// events, the run's row, its receipt and its notification in one statement. `None` when the
/// tail is unknown or the server refused it (stale tail, or the run already ended: its
/// terminal event closes the journal) — nothing was written; the careful way decides.
fn end_at_known_tail(
    store: &PostgresStore,
    run_id: &str,
    evs: &[&PreparedEvent],
    terminal: &Terminal,
    outbox_body: Option<&str>,
) -> StoreResult<Option<(i64, String, String)>> {
    let Some(tail) = store.tails.get(run_id) else {
        return Ok(None);
    };
    let mut out = chain(tail, evs);
    let a = EventArrays::new(evs, &out);
    let o = terminal.outbox.as_ref();
    let written = store
        .query_one_or_refused(
            "WITH locked AS (
                 SELECT 1 FROM runs WHERE id = $1 AND state <> 'ended' FOR NO KEY UPDATE
             ), events AS (
                 INSERT INTO journal (run_id, seq, kind, delivery, body, at_ms, prev_hash, hash)
                 SELECT $1, u.* FROM UNNEST($2::bigint[], $3::text[], $4::text[], $5::text[], $6::bigint[], $7::text[], $8::text[]) AS u
                 WHERE EXISTS (SELECT 1 FROM locked)
                 RETURNING 1
             ), ended AS (
                 UPDATE runs SET state = 'ended', outcome = $9, ended_by = $10, ended_ms = $11, owner = NULL, lease_until_ms = NULL
                 WHERE id = $1 AND EXISTS (SELECT 1 FROM locked)
             ), receipt AS (
                 INSERT INTO receipts (run_id, text) SELECT $1, $12 WHERE EXISTS (SELECT 1 FROM locked)
             ), notification AS (
                 INSERT INTO outbox (dedup_key, run_id, route, body, created_ms)
                 SELECT $13::text, $14::text, $15::text, $16::text, $11
                 WHERE $13::text IS NOT NULL AND EXISTS (SELECT 1 FROM locked)
                 ON CONFLICT (dedup_key) DO NOTHING
             )
             SELECT count(*) FROM events",
            &[
                &run_id, &a.seqs, &a.kinds, &a.deliveries, &a.bodies, &a.ats, &a.prevs, &a.hashes,
                &enum_text(&terminal.outcome), &enum_text(&terminal.ended_by), &terminal.at_ms,
                &terminal.receipt,
                &o.map(|o| o.dedup_key.as_str()), &o.map(|o| o.run_id.as_str()),
                &o.map(|o| o.route.as_str()), &outbox_body,
            ],
        )?
        .ok()
        .and_then(|row| row.try_get::<_, i64>(0).ok());
    if written != Some(evs.len() as i64) {
        return Ok(None);
    }
    Ok(out.pop())
}

pub(super) fn receipt(store: &PostgresStore, run_id: &str) -> StoreResult<Option<String>> {
    store
        .query_opt("SELECT text FROM receipts WHERE run_id = $1", &[&run_id])?
        .map(|r| col(&r, 0, "receipt"))
        .transpose()
}

/// A lease is a take-over from oneself: the run is free, lapsed, or already `owner`'s.
pub(super) fn lease_run(
    store: &PostgresStore,
    run_id: &str,
    owner: &str,
    now_ms: i64,
    until_ms: i64,
) -> StoreResult<bool> {
    take_over_run(store, run_id, owner, owner, now_ms, until_ms)
}

pub(super) fn take_over_run(
    store: &PostgresStore,
    run_id: &str,
    gone: &str,
    owner: &str,
    now_ms: i64,
    until_ms: i64,
) -> StoreResult<bool> {
    // One conditional update: PostgreSQL re-checks the condition on the newest row version,
    // so two owners racing for a lapsed lease cannot both win, and a holder that changed
    // meanwhile keeps the run.
    let n = store.exec(
        "UPDATE runs SET owner = $3, lease_until_ms = $5 WHERE id = $1 AND state <> 'ended'
         AND (owner IS NULL OR owner = $2 OR owner = $3 OR lease_until_ms IS NULL OR lease_until_ms < $4)",
        &[&run_id, &gone, &owner, &now_ms, &until_ms],
    )?;
    if n == 1 {
        return Ok(true);
    }
    if store.run_exists(run_id)? {
        Ok(false)
    } else {
        Err(StoreError::NotFound {
            what: "run",
            id: run_id.to_string(),
        })
    }
}

pub(super) fn release_run(store: &PostgresStore, run_id: &str, owner: &str) -> StoreResult<()> {
    store.exec(
        "UPDATE runs SET owner = NULL, lease_until_ms = NULL WHERE id = $1 AND owner = $2",
        &[&run_id, &owner],
    )?;
    Ok(())
}

pub(super) fn orphaned_runs(store: &PostgresStore, now_ms: i64) -> StoreResult<Vec<RunRecord>> {
    rows(
        store.query(
            &format!(
                "SELECT {RUN_COLS} FROM runs WHERE state <> 'ended' AND (owner IS NULL OR lease_until_ms IS NULL OR lease_until_ms < $1) ORDER BY created_ms, ord"
            ),
            &[&now_ms],
        )?,
        run_row,
    )
}

pub(super) fn open_runs(store: &PostgresStore) -> StoreResult<Vec<RunRecord>> {
    rows(
        store.query(
            &format!("SELECT {RUN_COLS} FROM runs WHERE state <> 'ended' ORDER BY created_ms, ord"),
            &[],
        )?,
        run_row,
    )
}

pub(super) fn runs_by_prefix(
    store: &PostgresStore,
    prefix: &str,
    limit: usize,
) -> StoreResult<Vec<RunRecord>> {
    let limit = limit as i64;
    rows(
        store.query(
            &format!("SELECT {RUN_COLS} FROM runs WHERE starts_with(id, $1) ORDER BY id LIMIT $2"),
            &[&prefix, &limit],
        )?,
        run_row,
    )
}

pub(super) fn continuation_of(
    store: &PostgresStore,
    parent: &str,
) -> StoreResult<Option<RunRecord>> {
    Ok(rows(
        store.query(
            &format!(
                "SELECT {RUN_COLS} FROM runs WHERE parent = $1 ORDER BY created_ms, ord LIMIT 1"
            ),
            &[&parent],
        )?,
        run_row,
    )?
    .into_iter()
    .next())
}
