//! Damage found by `vouch journal verify` (§10.2) on PostgreSQL: kept until repaired or
//! acknowledged; the `runs_refused_while_damaged` trigger refuses new runs meanwhile.

use super::*;
use vouch_store::{damage_fingerprint, DamageClosed, DamageRecord};

const DAMAGE_COLS: &str = "fingerprint, found, found_ms, closed_ms, closed_by";

fn damage_row(r: &Row) -> StoreResult<DamageRecord> {
    let found: String = col(r, 1, "damage found")?;
    let closed_by: Option<String> = col(r, 4, "damage closed_by")?;
    Ok(DamageRecord {
        fingerprint: col(r, 0, "damage fingerprint")?,
        found: codec::damage_found_parse(&found),
        found_ms: col(r, 2, "damage found_ms")?,
        closed_ms: col(r, 3, "damage closed_ms")?,
        closed_by: closed_by.as_deref().and_then(DamageClosed::parse),
    })
}

pub(super) fn record_damage(
    store: &PostgresStore,
    found: &[String],
    at_ms: i64,
) -> StoreResult<bool> {
    let fingerprint = damage_fingerprint(found);
    let text = codec::damage_found_text(found)?;
    Ok(store.exec(
        "INSERT INTO store_damage (fingerprint, found, found_ms) VALUES ($1, $2, $3) ON CONFLICT (fingerprint) DO NOTHING",
        &[&fingerprint, &text, &at_ms],
    )? == 1)
}

pub(super) fn open_damage(store: &PostgresStore) -> StoreResult<Vec<DamageRecord>> {
    rows(
        store.query(
            &format!(
                "SELECT {DAMAGE_COLS} FROM store_damage WHERE closed_ms IS NULL ORDER BY found_ms DESC, fingerprint COLLATE \"C\""
            ),
            &[],
        )?,
        damage_row,
    )
}

pub(super) fn close_damage(
    store: &PostgresStore,
    how: DamageClosed,
    at_ms: i64,
) -> StoreResult<usize> {
    Ok(store.exec(
        "UPDATE store_damage SET closed_ms = $1, closed_by = $2 WHERE closed_ms IS NULL",
        &[&at_ms, &how.as_str()],
    )? as usize)
}
