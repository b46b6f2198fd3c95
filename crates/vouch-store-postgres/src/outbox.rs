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
        failure: match col::<i32>(r, 7, "outbox failures")? {
            0 => None,
            n => Some(OutboxFailure {
                failures: u32::try_from(n)
                    .map_err(|e| StoreError::Corrupt(format!("outbox failures {n}: {e}")))?,
                last_error: col::<Option<String>>(r, 8, "outbox last_error")?.unwrap_or_default(),
                misconfigured: col(r, 9, "outbox misconfigured")?,
                last_ms: col::<Option<i64>>(r, 10, "outbox last_error_ms")?.unwrap_or_default(),
            }),
        },
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

pub(super) fn outbox_failed(
    store: &PostgresStore,
    id: i64,
    error: &str,
    misconfigured: bool,
    at_ms: i64,
) -> StoreResult<()> {
    store.exec(
        "UPDATE outbox SET failures = failures + 1, last_error = $2, misconfigured = $3, \
         last_error_ms = $4 WHERE id = $1 AND sent_ms IS NULL",
        &[&id, &error, &misconfigured, &at_ms],
    )?;
    Ok(())
}
