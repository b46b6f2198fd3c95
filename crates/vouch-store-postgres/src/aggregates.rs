//! The store's counts (`Store::counts`): one `GROUP BY` per figure, all in one REPEATABLE READ
//! transaction, so they agree with each other; the board's tasks by state
//! (`BoardStore::task_counts`) are one `GROUP BY` of their own.

use super::{col, db_err, PostgresStore};
use postgres::Transaction;
use std::collections::BTreeMap;
use vouch_core::board::TaskState;
use vouch_store::board::{task_counts_of, TASKS_BY_STATE_SQL};
use vouch_store::{StoreCounts, StoreResult};

/// Runs by state.
const RUNS_BY_STATE: &str = "SELECT state, COUNT(*) FROM runs GROUP BY state";
/// Ended runs by outcome (an ended run without one counts under "").
const ENDED_BY_OUTCOME: &str =
    "SELECT COALESCE(outcome, ''), COUNT(*) FROM runs WHERE state = 'ended' GROUP BY 1";
/// Each terminal record's `statuses` object (delivery → final status). Bodies are written as
/// JSON by this store and triggers refuse to change them, so the cast holds; a body changed
/// behind the triggers fails the read (and `verify` names it).
const DELIVERIES_BY_STATUS: &str = "SELECT s.value, COUNT(*) FROM journal j \
     CROSS JOIN LATERAL jsonb_each_text(CASE WHEN jsonb_typeof(j.body::jsonb -> 'statuses') = 'object' \
     THEN j.body::jsonb -> 'statuses' ELSE '{}'::jsonb END) s \
     WHERE j.kind = 'terminal' GROUP BY s.value";
/// Notifications of ended runs by route and whether sent.
const NOTIFICATIONS: &str = "SELECT o.route, o.sent_ms IS NOT NULL, COUNT(*) FROM outbox o \
     JOIN runs r ON r.id = o.run_id WHERE r.state = 'ended' GROUP BY 1, 2";
const PENDING: &str = "SELECT COUNT(*) FROM outbox WHERE sent_ms IS NULL";

fn by_word(t: &mut Transaction<'_>, sql: &str, what: &str) -> StoreResult<BTreeMap<String, u64>> {
    let mut out = BTreeMap::new();
    for r in t.query(sql, &[]).map_err(db_err)? {
        let word: String = col(&r, 0, what)?;
        let n: i64 = col(&r, 1, what)?;
        out.insert(word, u64::try_from(n).unwrap_or(0));
    }
    Ok(out)
}

pub(crate) fn counts(s: &PostgresStore) -> StoreResult<StoreCounts> {
    s.tx(|t| {
        t.batch_execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            .map_err(db_err)?;
        let runs_by_state = by_word(t, RUNS_BY_STATE, "runs by state")?;
        let ended_by_outcome = by_word(t, ENDED_BY_OUTCOME, "runs by outcome")?;
        let deliveries_by_status = by_word(t, DELIVERIES_BY_STATUS, "deliveries by status")?;
        let mut notifications = BTreeMap::new();
        for r in t.query(NOTIFICATIONS, &[]).map_err(db_err)? {
            let route: String = col(&r, 0, "notifications by route")?;
            let sent: bool = col(&r, 1, "notifications by route")?;
            let n: i64 = col(&r, 2, "notifications by route")?;
            notifications.insert((route, sent), u64::try_from(n).unwrap_or(0));
        }
        let pending: i64 = col(
            &t.query_one(PENDING, &[]).map_err(db_err)?,
            0,
            "pending notifications",
        )?;
        Ok(StoreCounts {
            runs_by_state,
            ended_by_outcome,
            deliveries_by_status,
            notifications,
            notifications_pending: u64::try_from(pending).unwrap_or(0),
        })
    })
}

/// The board's tasks by state (`BoardStore::task_counts`): one `GROUP BY`.
pub(crate) fn task_counts(s: &PostgresStore) -> StoreResult<Vec<(TaskState, u64)>> {
    let rows = s.query(TASKS_BY_STATE_SQL, &[])?;
    let rows = rows
        .iter()
        .map(|r| Ok((col(r, 0, "tasks by state")?, col(r, 1, "tasks by state")?)))
        .collect::<StoreResult<Vec<(String, i64)>>>()?;
    task_counts_of(rows)
}
