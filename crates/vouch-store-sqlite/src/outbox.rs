//! The notification outbox (§11.4) on SQLite: rows the terminal transaction wrote, until sent.

use super::*;

fn outbox_row(r: &Row) -> rusqlite::Result<OutboxRow> {
    let body: String = r.get(4)?;
    Ok(OutboxRow {
        id: r.get(0)?,
        dedup_key: r.get(1)?,
        run_id: r.get(2)?,
        route: r.get(3)?,
        body: json_col(&body)?,
        created_ms: r.get(5)?,
        sent_ms: r.get(6)?,
        failure: match r.get::<_, u32>(7)? {
            0 => None,
            failures => Some(OutboxFailure {
                failures,
                last_error: r.get::<_, Option<String>>(8)?.unwrap_or_default(),
                misconfigured: r.get(9)?,
                last_ms: r.get::<_, Option<i64>>(10)?.unwrap_or_default(),
            }),
        },
    })
}

pub(super) fn outbox_pending(store: &SqliteStore) -> StoreResult<Vec<OutboxRow>> {
    store.read(|c| {
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {OUTBOX_COLS} FROM outbox WHERE sent_ms IS NULL ORDER BY id"
            ))
            .map_err(db_err)?;
        let rows = st.query_map([], outbox_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

pub(super) fn outbox_mark_sent(store: &SqliteStore, id: i64, at_ms: i64) -> StoreResult<()> {
    store.write(move |c| {
        execute_cached(
            c,
            "UPDATE outbox SET sent_ms = ?2 WHERE id = ?1 AND sent_ms IS NULL",
            params![id, at_ms],
        )
        .map_err(db_err)?;
        Ok(())
    })
}

pub(super) fn outbox_for_run(store: &SqliteStore, run_id: &str) -> StoreResult<Vec<OutboxRow>> {
    store.read(|c| {
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {OUTBOX_COLS} FROM outbox WHERE run_id = ?1 ORDER BY id"
            ))
            .map_err(db_err)?;
        let rows = st.query_map([run_id], outbox_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

pub(super) fn outbox_failed(
    store: &SqliteStore,
    id: i64,
    error: &str,
    misconfigured: bool,
    at_ms: i64,
) -> StoreResult<()> {
    let error = error.to_string();
    store.write(move |c| {
        c.execute(
            "UPDATE outbox SET failures = failures + 1, last_error = ?2, misconfigured = ?3, \
             last_error_ms = ?4 WHERE id = ?1 AND sent_ms IS NULL",
            params![id, error, misconfigured, at_ms],
        )
        .map_err(db_err)?;
        Ok(())
    })
}
