//! The store's counts (`Store::counts`): one `GROUP BY` per figure, all in one read
//! transaction, so they agree with each other (WAL gives the reader one snapshot); the
//! board's tasks by state (`BoardStore::task_counts`) are one `GROUP BY` of their own.

use super::{db_err, read_err, SqliteStore};
use rusqlite::Connection;
use std::collections::BTreeMap;
use vouch_core::board::TaskState;
use vouch_store::board::{task_counts_of, TASKS_BY_STATE_SQL};
use vouch_store::{StoreCounts, StoreResult};

/// Runs by state.
const RUNS_BY_STATE: &str = "SELECT state, COUNT(*) FROM runs GROUP BY state";
/// Ended runs by outcome (an ended run without one counts under "").
const ENDED_BY_OUTCOME: &str =
    "SELECT COALESCE(outcome, ''), COUNT(*) FROM runs WHERE state = 'ended' GROUP BY 1";
/// Each terminal record's `statuses` object (delivery → final status). A body that is not
/// JSON counts nothing rather than failing the whole read; `verify` is what reports it.
const DELIVERIES_BY_STATUS: &str = "SELECT s.value, COUNT(*) FROM journal j, \
     json_each(CASE WHEN json_valid(j.body) THEN j.body ELSE '{}' END, '$.statuses') s \
     WHERE j.kind = 'terminal' AND s.type = 'text' GROUP BY s.value";
/// Notifications of ended runs by route and whether sent.
const NOTIFICATIONS: &str = "SELECT o.route, o.sent_ms IS NOT NULL, COUNT(*) FROM outbox o \
     JOIN runs r ON r.id = o.run_id WHERE r.state = 'ended' GROUP BY 1, 2";
const PENDING: &str = "SELECT COUNT(*) FROM outbox WHERE sent_ms IS NULL";

fn by_word(c: &Connection, sql: &str) -> StoreResult<BTreeMap<String, u64>> {
    let mut st = c.prepare_cached(sql).map_err(db_err)?;
    let rows = st
        .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
        .map_err(db_err)?;
    let mut out = BTreeMap::new();
    for row in rows {
        let (k, n) = row.map_err(read_err)?;
        out.insert(k, u64::try_from(n).unwrap_or(0));
    }
    Ok(out)
}

pub(crate) fn counts(s: &SqliteStore) -> StoreResult<StoreCounts> {
    s.read(|c| {
        // Dropped at the end without a commit: a read transaction only fixes the snapshot.
        let t = c.unchecked_transaction().map_err(db_err)?;
        let mut notifications = BTreeMap::new();
        {
            let mut st = t.prepare_cached(NOTIFICATIONS).map_err(db_err)?;
            let rows = st
                .query_map([], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        r.get::<_, bool>(1)?,
                        r.get::<_, i64>(2)?,
                    ))
                })
                .map_err(db_err)?;
            for row in rows {
                let (route, sent, n) = row.map_err(read_err)?;
                notifications.insert((route, sent), u64::try_from(n).unwrap_or(0));
            }
        }
        let pending: i64 = t.query_row(PENDING, [], |r| r.get(0)).map_err(read_err)?;
        Ok(StoreCounts {
            runs_by_state: by_word(&t, RUNS_BY_STATE)?,
            ended_by_outcome: by_word(&t, ENDED_BY_OUTCOME)?,
            deliveries_by_status: by_word(&t, DELIVERIES_BY_STATUS)?,
            notifications,
            notifications_pending: u64::try_from(pending).unwrap_or(0),
        })
    })
}

/// The board's tasks by state (`BoardStore::task_counts`): one `GROUP BY`.
pub(crate) fn task_counts(s: &SqliteStore) -> StoreResult<Vec<(TaskState, u64)>> {
    let rows = s.read(|c| {
        let mut st = c.prepare_cached(TASKS_BY_STATE_SQL).map_err(db_err)?;
        let rows = st
            .query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)?)))
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })?;
    task_counts_of(rows)
}
