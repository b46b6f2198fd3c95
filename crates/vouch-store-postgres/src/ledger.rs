//! The idempotency ledger (§8) on PostgreSQL: an intent before a provider call, then its outcome.

use super::*;

pub(super) fn ledger_row(r: &Row) -> StoreResult<LedgerEntry> {
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

pub(super) fn ledger_intend(
    store: &PostgresStore,
    entry: &LedgerEntry,
) -> StoreResult<LedgerIntent> {
    let e = entry;
    let detail = json_text(&e.detail)?;
    store.tx(|t| {
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

pub(super) fn ledger_settle(
    store: &PostgresStore,
    key: &str,
    state: LedgerState,
    detail: &Value,
    at_ms: i64,
) -> StoreResult<()> {
    let detail = json_text(detail)?;
    let n = store.exec(
        "UPDATE ledger SET state = $2, detail = $3, updated_ms = $4 WHERE key = $1 AND state = 'intended'",
        &[&key, &state.as_str(), &detail, &at_ms],
    )?;
    if n == 0 {
        let row = store.query_opt("SELECT state FROM ledger WHERE key = $1", &[&key])?;
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

pub(super) fn ledger_get(store: &PostgresStore, key: &str) -> StoreResult<Option<LedgerEntry>> {
    store
        .query_opt(
            &format!("SELECT {LEDGER_COLS} FROM ledger WHERE key = $1"),
            &[&key],
        )?
        .map(|r| ledger_row(&r))
        .transpose()
}

pub(super) fn ledger_list(store: &PostgresStore) -> StoreResult<Vec<LedgerEntry>> {
    rows(
        store.query(
            &format!(
                "SELECT {LEDGER_COLS} FROM ledger ORDER BY updated_ms DESC, key COLLATE \"C\""
            ),
            &[],
        )?,
        ledger_row,
    )
}
