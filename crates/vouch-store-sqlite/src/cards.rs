//! Approval and clarify cards (§7, §5.3) and the payloads they are bound to by hash, on SQLite.

use super::*;

pub(super) fn card_row(r: &Row) -> rusqlite::Result<Card> {
    let state: String = r.get(4)?;
    Ok(Card {
        run_id: r.get(0)?,
        delivery: r.get(1)?,
        payload_hash: r.get(2)?,
        summary: r.get(3)?,
        state: CardState::parse(&state).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                4,
                rusqlite::types::Type::Text,
                format!("card state {state}").into(),
            )
        })?,
        created_ms: r.get(5)?,
        decided_ms: r.get(6)?,
        answer: r.get(7)?,
        reason: r.get(8)?,
    })
}

pub(super) fn put_payload(
    store: &SqliteStore,
    hash: &str,
    canonical_json: &str,
) -> StoreResult<()> {
    codec::check_payload_bytes(canonical_json.len())?;
    let (hash, body) = (hash.to_string(), canonical_json.to_string());
    store.write(move |c| {
        execute_cached(
            c,
            "INSERT OR IGNORE INTO payloads (hash, body) VALUES (?1, ?2)",
            params![hash, body],
        )
        .map_err(db_err)?;
        Ok(())
    })
}

pub(super) fn payload(store: &SqliteStore, hash: &str) -> StoreResult<Option<String>> {
    store.read(|c| {
        query_row_cached(
            c,
            "SELECT body FROM payloads WHERE hash = ?1",
            [hash],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err)
    })
}

pub(super) fn open_card(store: &SqliteStore, card: &Card) -> StoreResult<()> {
    let card = card.clone();
    store.write(move |c| {
        execute_cached(c,
            "UPDATE cards SET state = 'superseded', decided_ms = ?3 WHERE run_id = ?1 AND delivery IS ?2 AND state = 'open'",
            params![card.run_id, card.delivery, card.created_ms],
        )
        .map_err(db_err)?;
        execute_cached(c,
            &format!("INSERT INTO cards ({CARD_COLS}) VALUES (?1,?2,?3,?4,'open',?5,NULL,NULL,?6)"),
            params![card.run_id, card.delivery, card.payload_hash, card.summary, card.created_ms, card.reason],
        )
        .map_err(db_err)?;
        Ok(())
    })
}

pub(super) fn open_cards(store: &SqliteStore) -> StoreResult<Vec<Card>> {
    store.read(|c| {
        let mut st = c.prepare_cached(&format!("SELECT {CARD_COLS} FROM cards WHERE state = 'open' ORDER BY created_ms DESC, id DESC")).map_err(db_err)?;
        let rows = st.query_map([], card_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

pub(super) fn cards_for_run(store: &SqliteStore, run_id: &str) -> StoreResult<Vec<Card>> {
    store.read(|c| {
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {CARD_COLS} FROM cards WHERE run_id = ?1 ORDER BY id"
            ))
            .map_err(db_err)?;
        let rows = st.query_map([run_id], card_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

pub(super) fn decide_card(
    store: &SqliteStore,
    run_id: &str,
    delivery: &str,
    payload_hash: &str,
    decision: Decision,
    at_ms: i64,
) -> StoreResult<Card> {
    let (run_id, delivery, hash) = (
        run_id.to_string(),
        delivery.to_string(),
        payload_hash.to_string(),
    );
    store.write(move |c| {
        let found: Option<(i64, Card)> = c
            .query_row(
                &format!("SELECT {CARD_COLS}, id FROM cards WHERE run_id = ?1 AND delivery = ?2 AND payload_hash = ?3 ORDER BY id DESC LIMIT 1"),
                params![run_id, delivery, hash],
                |r| Ok((r.get(9)?, card_row(r)?)),
            )
            .optional()
            .map_err(read_err)?;
        let Some((id, card)) = found else {
            return Err(StoreError::NotFound { what: "approval card with that hash", id: format!("{run_id}/{delivery}/{hash}") });
        };
        if card.state != CardState::Open {
            return Err(StoreError::Conflict(format!(
                "the card for {delivery} with this hash is {}; it can no longer be decided (see `vouch approvals` for the current one)",
                card.state.as_str()
            )));
        }
        let state = match decision {
            Decision::Approve => CardState::Approved,
            Decision::Deny => CardState::Denied,
        };
        execute_cached(c, "UPDATE cards SET state = ?2, decided_ms = ?3 WHERE id = ?1", params![id, state.as_str(), at_ms]).map_err(db_err)?;
        Ok(Card { state, decided_ms: Some(at_ms), ..card })
    })
}

pub(super) fn answer_clarify(
    store: &SqliteStore,
    run_id: &str,
    answer: &str,
    at_ms: i64,
) -> StoreResult<Card> {
    let (run_id, answer) = (run_id.to_string(), answer.to_string());
    store.write(move |c| {
        let found: Option<(i64, Card)> = c
            .query_row(
                &format!("SELECT {CARD_COLS}, id FROM cards WHERE run_id = ?1 AND delivery IS NULL AND state = 'open' ORDER BY id DESC LIMIT 1"),
                [&run_id],
                |r| Ok((r.get(9)?, card_row(r)?)),
            )
            .optional()
            .map_err(read_err)?;
        let Some((id, card)) = found else {
            return Err(StoreError::NotFound { what: "open question of run", id: run_id });
        };
        execute_cached(c, "UPDATE cards SET state = 'answered', decided_ms = ?2, answer = ?3 WHERE id = ?1", params![id, at_ms, answer]).map_err(db_err)?;
        Ok(Card { state: CardState::Answered, decided_ms: Some(at_ms), answer: Some(answer), ..card })
    })
}

pub(super) fn close_cards(store: &SqliteStore, run_id: &str, at_ms: i64) -> StoreResult<u64> {
    let run_id = run_id.to_string();
    store.write(move |c| {
        let n = execute_cached(
            c,
            "UPDATE cards SET state = 'denied', decided_ms = ?2 WHERE run_id = ?1 AND state = 'open'",
            params![run_id, at_ms],
        )
        .map_err(db_err)?;
        Ok(n as u64)
    })
}
