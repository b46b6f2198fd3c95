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
