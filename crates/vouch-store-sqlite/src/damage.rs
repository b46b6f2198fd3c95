//! Damage found by `vouch journal verify` (§10.2) on SQLite: kept until repaired or
//! acknowledged; the `runs_refused_while_damaged` trigger refuses new runs meanwhile.

use super::*;
use vouch_store::{damage_fingerprint, DamageClosed, DamageRecord};

const DAMAGE_COLS: &str = "fingerprint, found, found_ms, closed_ms, closed_by";

fn damage_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<DamageRecord> {
    let found: String = r.get(1)?;
    let closed_by: Option<String> = r.get(4)?;
    Ok(DamageRecord {
        fingerprint: r.get(0)?,
        found: codec::damage_found_parse(&found),
        found_ms: r.get(2)?,
        closed_ms: r.get(3)?,
        closed_by: closed_by.as_deref().and_then(DamageClosed::parse),
    })
}

pub(super) fn record_damage(
    store: &SqliteStore,
    found: &[String],
    at_ms: i64,
) -> StoreResult<bool> {
    let fingerprint = damage_fingerprint(found);
    let text = codec::damage_found_text(found)?;
    store.write(move |c| {
        let n = execute_cached(
            c,
            "INSERT INTO store_damage (fingerprint, found, found_ms) VALUES (?1, ?2, ?3) ON CONFLICT (fingerprint) DO NOTHING",
            params![fingerprint, text, at_ms],
        )
        .map_err(db_err)?;
        Ok(n == 1)
    })
}

pub(super) fn open_damage(store: &SqliteStore) -> StoreResult<Vec<DamageRecord>> {
    store.read(|c| {
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {DAMAGE_COLS} FROM store_damage WHERE closed_ms IS NULL ORDER BY found_ms DESC, fingerprint"
            ))
            .map_err(db_err)?;
        let rows = st.query_map([], damage_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

pub(super) fn close_damage(
    store: &SqliteStore,
    how: DamageClosed,
    at_ms: i64,
) -> StoreResult<usize> {
    store.write(move |c| {
        execute_cached(
            c,
            "UPDATE store_damage SET closed_ms = ?1, closed_by = ?2 WHERE closed_ms IS NULL",
            params![at_ms, how.as_str()],
        )
        .map_err(db_err)
    })
}
