//! Approval and clarify cards (§7, §5.3) and the payloads they are bound to by hash, on
//! PostgreSQL.

use super::runs::lock_run;
use super::*;

pub(super) fn card_row(r: &Row) -> StoreResult<Card> {
    let state: &str = col(r, 4, "card state")?;
    Ok(Card {
        run_id: col(r, 0, "card run_id")?,
        delivery: col(r, 1, "card delivery")?,
        payload_hash: col(r, 2, "card payload_hash")?,
        summary: col(r, 3, "card summary")?,
        state: CardState::parse(state).ok_or_else(|| corrupt("card state", state))?,
        created_ms: col(r, 5, "card created_ms")?,
        decided_ms: col(r, 6, "card decided_ms")?,
        answer: col(r, 7, "card answer")?,
        reason: col(r, 8, "card reason")?,
    })
}

pub(super) fn put_payload(
    store: &PostgresStore,
    hash: &str,
    canonical_json: &str,
) -> StoreResult<()> {
    codec::check_payload_bytes(canonical_json.len())?;
    store.exec(
        "INSERT INTO payloads (hash, body) VALUES ($1, $2) ON CONFLICT (hash) DO NOTHING",
        &[&hash, &canonical_json],
    )?;
    Ok(())
}

pub(super) fn payload(store: &PostgresStore, hash: &str) -> StoreResult<Option<String>> {
    store
        .query_opt("SELECT body FROM payloads WHERE hash = $1", &[&hash])?
        .map(|r| col(&r, 0, "payload"))
        .transpose()
}

pub(super) fn open_card(store: &PostgresStore, card: &Card) -> StoreResult<()> {
    store.tx(|t| {
        // Serialize card changes per run, so a second opener supersedes the first's card
        // instead of colliding with it on `cards_one_open`. A missing run is left to the
        // foreign key below (Conflict, as in SQLite).
        lock_run(t, &card.run_id)?;
        t.execute(
            "UPDATE cards SET state = 'superseded', decided_ms = $3 WHERE run_id = $1 AND delivery IS NOT DISTINCT FROM $2 AND state = 'open'",
            &[&card.run_id, &card.delivery, &card.created_ms],
        )
        .map_err(db_err)?;
        t.execute(
            &format!("INSERT INTO cards ({CARD_COLS}) VALUES ($1,$2,$3,$4,'open',$5,NULL,NULL,$6)"),
            &[&card.run_id, &card.delivery, &card.payload_hash, &card.summary, &card.created_ms, &card.reason],
        )
        .map_err(db_err)?;
        Ok(())
    })
}

pub(super) fn open_cards(store: &PostgresStore) -> StoreResult<Vec<Card>> {
    rows(
        store.query(
            &format!("SELECT {CARD_COLS} FROM cards WHERE state = 'open' ORDER BY created_ms DESC, id DESC"),
            &[],
        )?,
        card_row,
    )
}

pub(super) fn cards_for_run(store: &PostgresStore, run_id: &str) -> StoreResult<Vec<Card>> {
    rows(
        store.query(
            &format!("SELECT {CARD_COLS} FROM cards WHERE run_id = $1 ORDER BY id"),
            &[&run_id],
        )?,
        card_row,
    )
}

pub(super) fn decide_card(
    store: &PostgresStore,
    run_id: &str,
    delivery: &str,
    payload_hash: &str,
    decision: Decision,
    at_ms: i64,
) -> StoreResult<Card> {
    store.tx(|t| {
        // The row lock makes a second, concurrent decision wait and then see the first.
        let row = t
            .query_opt(
                &format!("SELECT {CARD_COLS}, id FROM cards WHERE run_id = $1 AND delivery = $2 AND payload_hash = $3 ORDER BY id DESC LIMIT 1 FOR UPDATE"),
                &[&run_id, &delivery, &payload_hash],
            )
            .map_err(db_err)?;
        let Some(row) = row else {
            return Err(StoreError::NotFound {
                what: "approval card with that hash",
                id: format!("{run_id}/{delivery}/{payload_hash}"),
            });
        };
        let card = card_row(&row)?;
        let id: i64 = col(&row, 9, "card id")?;
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
        t.execute(
            "UPDATE cards SET state = $2, decided_ms = $3 WHERE id = $1",
            &[&id, &state.as_str(), &at_ms],
        )
        .map_err(db_err)?;
        Ok(Card {
            state,
            decided_ms: Some(at_ms),
            ..card
        })
    })
}

pub(super) fn answer_clarify(
    store: &PostgresStore,
    run_id: &str,
    answer: &str,
    at_ms: i64,
) -> StoreResult<Card> {
    store.tx(|t| {
        let row = t
            .query_opt(
                &format!("SELECT {CARD_COLS}, id FROM cards WHERE run_id = $1 AND delivery IS NULL AND state = 'open' ORDER BY id DESC LIMIT 1 FOR UPDATE"),
                &[&run_id],
            )
            .map_err(db_err)?;
        let Some(row) = row else {
            return Err(StoreError::NotFound {
                what: "open question of run",
                id: run_id.to_string(),
            });
        };
        let card = card_row(&row)?;
        let id: i64 = col(&row, 9, "card id")?;
        t.execute(
            "UPDATE cards SET state = 'answered', decided_ms = $2, answer = $3 WHERE id = $1",
            &[&id, &at_ms, &answer],
        )
        .map_err(db_err)?;
        Ok(Card {
            state: CardState::Answered,
            decided_ms: Some(at_ms),
            answer: Some(answer.to_string()),
            ..card
        })
    })
}

pub(super) fn close_cards(store: &PostgresStore, run_id: &str, at_ms: i64) -> StoreResult<u64> {
    store.exec(
        "UPDATE cards SET state = 'denied', decided_ms = $2 WHERE run_id = $1 AND state = 'open'",
        &[&run_id, &at_ms],
    )
}
