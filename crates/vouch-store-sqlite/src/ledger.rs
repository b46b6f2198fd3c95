//! The idempotency ledger (§8) on SQLite: an intent before a provider call, then its outcome.

use super::*;

pub(super) fn ledger_row(r: &Row) -> rusqlite::Result<LedgerEntry> {
    let state: String = r.get(5)?;
    let detail: String = r.get(7)?;
    Ok(LedgerEntry {
        key: r.get(0)?,
        scope: r.get(1)?,
        run_id: r.get(2)?,
        delivery: r.get(3)?,
        payload_hash: r.get(4)?,
        state: LedgerState::parse(&state).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                5,
                rusqlite::types::Type::Text,
                format!("ledger state {state}").into(),
            )
        })?,
        attempts: r.get(6)?,
        detail: json_col(&detail)?,
        updated_ms: r.get(8)?,
    })
}

pub(super) fn ledger_intend(store: &SqliteStore, entry: &LedgerEntry) -> StoreResult<LedgerIntent> {
    let e = entry.clone();
    store.write(move |c| {
        let existing = c
            .query_row(&format!("SELECT {LEDGER_COLS} FROM ledger WHERE key = ?1"), [&e.key], ledger_row)
            .optional()
            .map_err(read_err)?;
        match existing {
            None => {
                let detail = json_text(&e.detail)?;
                execute_cached(c,
                    &format!("INSERT INTO ledger ({LEDGER_COLS}) VALUES (?1,?2,?3,?4,?5,'intended',1,?6,?7)"),
                    params![e.key, e.scope, e.run_id, e.delivery, e.payload_hash, detail, e.updated_ms],
                )
                .map_err(db_err)?;
                Ok(LedgerIntent::Proceed(LedgerEntry { state: LedgerState::Intended, attempts: 1, ..e }))
            }
            Some(prev) if prev.state == LedgerState::Failed => {
                execute_cached(c,
                    "UPDATE ledger SET state = 'intended', attempts = attempts + 1, run_id = ?2, updated_ms = ?3 WHERE key = ?1",
                    params![e.key, e.run_id, e.updated_ms],
                )
                .map_err(db_err)?;
                Ok(LedgerIntent::Proceed(LedgerEntry { state: LedgerState::Intended, attempts: prev.attempts + 1, run_id: e.run_id.clone(), updated_ms: e.updated_ms, ..prev }))
            }
            Some(prev) => Ok(LedgerIntent::Recorded(prev)),
        }
    })
}

pub(super) fn ledger_settle(
    store: &SqliteStore,
    key: &str,
    state: LedgerState,
    detail: &Value,
    at_ms: i64,
) -> StoreResult<()> {
    let (key, detail) = (key.to_string(), json_text(detail)?);
    store.write(move |c| {
        let n = c
            .execute("UPDATE ledger SET state = ?2, detail = ?3, updated_ms = ?4 WHERE key = ?1 AND state = 'intended'", params![key, state.as_str(), detail, at_ms])
            .map_err(db_err)?;
        if n == 0 {
            let exists: Option<String> = query_row_cached(c, "SELECT state FROM ledger WHERE key = ?1", [&key], |r| r.get(0)).optional().map_err(db_err)?;
            return match exists {
                None => Err(StoreError::NotFound { what: "ledger key", id: key }),
                Some(s) => Err(StoreError::Conflict(format!("ledger key is already {s}; only an intended key can be settled"))),
            };
        }
        Ok(())
    })
}

pub(super) fn ledger_get(store: &SqliteStore, key: &str) -> StoreResult<Option<LedgerEntry>> {
    store.read(|c| {
        query_row_cached(
            c,
            &format!("SELECT {LEDGER_COLS} FROM ledger WHERE key = ?1"),
            [key],
            ledger_row,
        )
        .optional()
        .map_err(read_err)
    })
}

pub(super) fn ledger_list(store: &SqliteStore) -> StoreResult<Vec<LedgerEntry>> {
    store.read(|c| {
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {LEDGER_COLS} FROM ledger ORDER BY updated_ms DESC"
            ))
            .map_err(db_err)?;
        let rows = st.query_map([], ledger_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}
