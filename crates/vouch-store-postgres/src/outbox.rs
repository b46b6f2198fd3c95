//! The notification outbox (§11.4) on PostgreSQL: rows the terminal transaction wrote, until
//! sent.

use super::*;

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

pub(super) fn outbox_pending(store: &PostgresStore) -> StoreResult<Vec<OutboxRow>> {
    rows(
        store.query(
            &format!("SELECT {OUTBOX_COLS} FROM outbox WHERE sent_ms IS NULL ORDER BY id"),
            &[],
        )?,
        outbox_row,
    )
}

pub(super) fn outbox_mark_sent(store: &PostgresStore, id: i64, at_ms: i64) -> StoreResult<()> {
    store.exec(
        "UPDATE outbox SET sent_ms = $2 WHERE id = $1 AND sent_ms IS NULL",
        &[&id, &at_ms],
    )?;
    Ok(())
}

pub(super) fn outbox_for_run(store: &PostgresStore, run_id: &str) -> StoreResult<Vec<OutboxRow>> {
    rows(
        store.query(
            &format!("SELECT {OUTBOX_COLS} FROM outbox WHERE run_id = $1 ORDER BY id"),
            &[&run_id],
        )?,
        outbox_row,
    )
}
