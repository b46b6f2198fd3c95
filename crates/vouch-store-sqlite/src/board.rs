//! The task board on SQLite (§13). Every write is one job of the single writer thread, so a
//! claim's conditional `UPDATE … RETURNING` and the procedures of `vouch_store::board` never
//! interleave with another writer; readers use their own snapshots.

use super::{db_err, json_col, read_err, SqliteStore};
use rusqlite::{params, Connection, OptionalExtension, Row};
use serde_json::Value;
use vouch_core::board::{AttemptState, Condition, TaskState};
use vouch_store::board::{
    self as ops, AttemptCost, AttemptRecord, AttemptRef, BoardStore, BoardTx, Claim, ClaimRequest,
    Heartbeat, MeasureRow, MeasuresQuery, NewTask, Offered, Report, Reported, SweepReport,
    TaskFilter, TaskRecord, TaskSpec, Usage, Verdict, SWEEP_BATCH_MAX, TASK_LIST_MAX,
};
use vouch_store::codec::{ATTEMPT_COLS, TASK_COLS};
use vouch_store::{StoreError, StoreResult};

fn bad(i: usize, what: String) -> rusqlite::Error {
    rusqlite::Error::FromSqlConversionFailure(i, rusqlite::types::Type::Text, what.into())
}

fn de<T: serde::de::DeserializeOwned>(i: usize, s: &str) -> rusqlite::Result<T> {
    serde_json::from_str(s).map_err(|e| bad(i, e.to_string()))
}

fn task_row(r: &Row) -> rusqlite::Result<TaskRecord> {
    let state: String = r.get(3)?;
    let condition: Option<String> = r.get(14)?;
    Ok(TaskRecord {
        id: r.get(0)?,
        kind: r.get(1)?,
        owner: r.get(2)?,
        state: TaskState::parse(&state).ok_or_else(|| bad(3, format!("task state {state}")))?,
        max_attempts: r.get(4)?,
        attempts: r.get(5)?,
        aborts: r.get(6)?,
        epoch: r.get(7)?,
        claimant: r.get(8)?,
        lease_until_ms: r.get(9)?,
        deadline_ms: r.get(10)?,
        profiles: de(11, &r.get::<_, String>(11)?)?,
        tags: de(12, &r.get::<_, String>(12)?)?,
        excluded_claimant: r.get(13)?,
        condition: condition.map(|c| de::<Condition>(14, &c)).transpose()?,
        idempotency_key: r.get(15)?,
        request_id: r.get(16)?,
        spec: de::<TaskSpec>(17, &r.get::<_, String>(17)?)?,
        created_ms: r.get(18)?,
        queued_ms: r.get(19)?,
        ended_ms: r.get(20)?,
        accepted_attempt: r.get(21)?,
        result_id: r.get(22)?,
        resuming: r.get(23)?,
        updated_ms: r.get(24)?,
    })
}

fn attempt_row(r: &Row) -> rusqlite::Result<AttemptRecord> {
    let state: String = r.get(2)?;
    Ok(AttemptRecord {
        task_id: r.get(0)?,
        n: r.get(1)?,
        state: AttemptState::parse(&state)
            .ok_or_else(|| bad(2, format!("attempt state {state}")))?,
        claimant: r.get(3)?,
        epoch: r.get(4)?,
        profile: r.get(5)?,
        model: r.get(6)?,
        policy_fingerprint: r.get(7)?,
        claimed_ms: r.get(8)?,
        started_ms: r.get(9)?,
        lease_until_ms: r.get(10)?,
        dispatch_deadline_ms: r.get(11)?,
        running_deadline_ms: r.get(12)?,
        running_left_ms: r.get(13)?,
        ended_ms: r.get(14)?,
        end_reason: r.get(15)?,
        retryable: r.get(16)?,
        run_id: r.get(17)?,
        result_id: r.get(18)?,
        usage: Usage {
            turns: r.get(19)?,
            tokens: r.get(20)?,
            tool_calls: r.get(21)?,
            failed_tool_calls: r.get(22)?,
        },
        detail: json_col(&r.get::<_, String>(23)?)?,
    })
}

fn json<T: serde::Serialize>(v: &T) -> StoreResult<String> {
    serde_json::to_string(v).map_err(|e| StoreError::Fatal(format!("serialize: {e}")))
}

struct Tx<'a>(&'a Connection);

impl BoardTx for Tx<'_> {
    fn task(&mut self, id: &str, _lock: bool) -> StoreResult<Option<TaskRecord>> {
        self.0
            .prepare_cached(&format!("SELECT {TASK_COLS} FROM tasks WHERE id = ?1"))
            .map_err(db_err)?
            .query_row([id], task_row)
            .optional()
            .map_err(read_err)
    }

    fn task_by_key(&mut self, key: &str) -> StoreResult<Option<TaskRecord>> {
        self.0
            .prepare_cached(&format!(
                "SELECT {TASK_COLS} FROM tasks WHERE idempotency_key = ?1"
            ))
            .map_err(db_err)?
            .query_row([key], task_row)
            .optional()
            .map_err(read_err)
    }

    fn insert_task(&mut self, t: &TaskRecord) -> StoreResult<()> {
        let condition = t.condition.as_ref().map(json).transpose()?;
        self.0
            .prepare_cached(&format!(
                "INSERT INTO tasks ({TASK_COLS}, lease_ms, correlation) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24, ?25, ?26, ?27)"
            ))
            .map_err(db_err)?
            .execute(params![
                t.id,
                t.kind,
                t.owner,
                t.state.as_str(),
                t.max_attempts,
                t.attempts,
                t.aborts,
                t.epoch,
                t.claimant,
                t.lease_until_ms,
                t.deadline_ms,
                json(&t.profiles)?,
                json(&t.tags)?,
                t.excluded_claimant,
                condition,
                t.idempotency_key,
                t.request_id,
                json(&t.spec)?,
                t.created_ms,
                t.queued_ms,
                t.ended_ms,
                t.accepted_attempt,
                t.result_id,
                t.resuming,
                t.updated_ms,
                t.spec.lease_ms,
                t.spec.correlation,
            ])
            .map_err(db_err)?;
        let mut st = self
            .0
            .prepare_cached("INSERT OR IGNORE INTO task_tags (task_id, tag) VALUES (?1, ?2)")
            .map_err(db_err)?;
        for tag in &t.tags {
            st.execute(params![t.id, tag]).map_err(db_err)?;
        }
        Ok(())
    }

    fn update_task(
        &mut self,
        t: &TaskRecord,
        old_state: TaskState,
        old_epoch: i64,
    ) -> StoreResult<bool> {
        let n = self
            .0
            .prepare_cached(
                "UPDATE tasks SET state = ?1, attempts = ?2, aborts = ?3, epoch = ?4, claimant = ?5, lease_until_ms = ?6, queued_ms = ?7, ended_ms = ?8, accepted_attempt = ?9, result_id = ?10, resuming = ?11, updated_ms = ?12 WHERE id = ?13 AND state = ?14 AND epoch = ?15",
            )
            .map_err(db_err)?
            .execute(params![
                t.state.as_str(),
                t.attempts,
                t.aborts,
                t.epoch,
                t.claimant,
                t.lease_until_ms,
                t.queued_ms,
                t.ended_ms,
                t.accepted_attempt,
                t.result_id,
                t.resuming,
                t.updated_ms,
                t.id,
                old_state.as_str(),
                old_epoch,
            ])
            .map_err(db_err)?;
        Ok(n == 1)
    }

    fn attempt(&mut self, task_id: &str, n: u32) -> StoreResult<Option<AttemptRecord>> {
        self.0
            .prepare_cached(&format!(
                "SELECT {ATTEMPT_COLS} FROM task_attempts WHERE task_id = ?1 AND n = ?2"
            ))
            .map_err(db_err)?
            .query_row(params![task_id, n], attempt_row)
            .optional()
            .map_err(read_err)
    }

    fn insert_attempt(&mut self, a: &AttemptRecord) -> StoreResult<()> {
        self.0
            .prepare_cached(&format!(
                "INSERT INTO task_attempts ({ATTEMPT_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21, ?22, ?23, ?24)"
            ))
            .map_err(db_err)?
            .execute(params![
                a.task_id,
                a.n,
                a.state.as_str(),
                a.claimant,
                a.epoch,
                a.profile,
                a.model,
                a.policy_fingerprint,
                a.claimed_ms,
                a.started_ms,
                a.lease_until_ms,
                a.dispatch_deadline_ms,
                a.running_deadline_ms,
                a.running_left_ms,
                a.ended_ms,
                a.end_reason,
                a.retryable,
                a.run_id,
                a.result_id,
                a.usage.turns,
                a.usage.tokens,
                a.usage.tool_calls,
                a.usage.failed_tool_calls,
                json(&a.detail)?,
            ])
            .map_err(db_err)?;
        Ok(())
    }

    fn update_attempt(
        &mut self,
        a: &AttemptRecord,
        old_state: AttemptState,
        old_epoch: i64,
    ) -> StoreResult<bool> {
        let n = self
            .0
            .prepare_cached(
                "UPDATE task_attempts SET state = ?1, claimant = ?2, epoch = ?3, started_ms = ?4, lease_until_ms = ?5, dispatch_deadline_ms = ?6, running_deadline_ms = ?7, running_left_ms = ?8, ended_ms = ?9, end_reason = ?10, retryable = ?11, run_id = ?12, result_id = ?13, turns = ?14, tokens = ?15, tool_calls = ?16, failed_tool_calls = ?17, detail = ?18 WHERE task_id = ?19 AND n = ?20 AND state = ?21 AND epoch = ?22",
            )
            .map_err(db_err)?
            .execute(params![
                a.state.as_str(),
                a.claimant,
                a.epoch,
                a.started_ms,
                a.lease_until_ms,
                a.dispatch_deadline_ms,
                a.running_deadline_ms,
                a.running_left_ms,
                a.ended_ms,
                a.end_reason,
                a.retryable,
                a.run_id,
                a.result_id,
                a.usage.turns,
                a.usage.tokens,
                a.usage.tool_calls,
                a.usage.failed_tool_calls,
                json(&a.detail)?,
                a.task_id,
                a.n,
                old_state.as_str(),
                old_epoch,
            ])
            .map_err(db_err)?;
        Ok(n == 1)
    }

    fn put_result(&mut self, id: &str, task_id: &str, body: &str) -> StoreResult<()> {
        self.0
            .prepare_cached(
                "INSERT INTO task_results (id, task_id, body) VALUES (?1, ?2, ?3) ON CONFLICT (id) DO NOTHING",
            )
            .map_err(db_err)?
            .execute(params![id, task_id, body])
            .map_err(db_err)?;
        Ok(())
    }

    fn put_verdict(&mut self, judge_task: &str, v: &Verdict, at_ms: i64) -> StoreResult<()> {
        self.0
            .prepare_cached(
                "INSERT INTO task_verdicts (judge_task, target, passed, scores, at_ms) VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(db_err)?
            .execute(params![judge_task, v.target, v.passed, json(&v.scores)?, at_ms])
            .map_err(db_err)?;
        Ok(())
    }

    fn claim_row(&mut self, req: &ClaimRequest) -> StoreResult<Option<TaskRecord>> {
        // One conditional update: the single writer serializes claims, the inner SELECT picks
        // the oldest claimable task (resumptions first) and the outer WHERE re-checks it.
        let sql = format!(
            "UPDATE tasks SET state = 'dispatched', claimant = ?1, epoch = epoch + 1, \
             lease_until_ms = ?2 + lease_ms, updated_ms = ?2 \
             WHERE state = 'queued' AND id = ( \
               SELECT t.id FROM tasks t WHERE t.state = 'queued' \
                 AND (?3 IS NULL OR t.id = ?3) \
                 AND (t.deadline_ms IS NULL OR t.deadline_ms > ?2) \
                 AND (t.resuming = 1 OR t.attempts - t.aborts < t.max_attempts) \
                 AND (t.excluded_claimant IS NULL OR t.excluded_claimant <> ?1) \
                 AND (t.profiles = '[]' OR EXISTS (SELECT 1 FROM json_each(t.profiles) p WHERE p.value = ?4)) \
                 AND (?5 = '[]' OR t.kind IN (SELECT value FROM json_each(?5))) \
                 AND (?6 = '[]' OR EXISTS (SELECT 1 FROM task_tags g WHERE g.task_id = t.id AND g.tag IN (SELECT value FROM json_each(?6)))) \
               ORDER BY t.resuming DESC, t.queued_ms, t.rowid LIMIT 1) \
             RETURNING {TASK_COLS}"
        );
        self.0
            .prepare_cached(&sql)
            .map_err(db_err)?
            .query_row(
                params![
                    req.claimant,
                    req.now_ms,
                    req.task_id,
                    req.profile,
                    json(&req.types)?,
                    json(&req.tags)?,
                ],
                task_row,
            )
            .optional()
            .map_err(read_err)
    }
    fn add_repair(&mut self, task_id: &str, n: u32) -> StoreResult<u32> {
        self.0
            .prepare_cached(
                "UPDATE task_attempts SET repairs = repairs + 1 WHERE task_id = ?1 AND n = ?2 RETURNING repairs",
            )
            .map_err(db_err)?
            .query_row(params![task_id, n], |r| r.get(0))
            .map_err(read_err)
    }

    fn repairs(&mut self, task_id: &str, n: u32) -> StoreResult<u32> {
        Ok(self
            .0
            .prepare_cached("SELECT repairs FROM task_attempts WHERE task_id = ?1 AND n = ?2")
            .map_err(db_err)?
            .query_row(params![task_id, n], |r| r.get(0))
            .optional()
            .map_err(read_err)?
            .unwrap_or(0))
    }
}

impl SqliteStore {
    fn board<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut dyn BoardTx) -> StoreResult<T> + Send + 'static,
    ) -> StoreResult<T> {
        self.write(move |c| f(&mut Tx(c)))
    }

    fn due_ids(&self, sql: &'static str, now_ms: i64) -> StoreResult<Vec<String>> {
        self.read(|c| {
            let mut st = c.prepare_cached(sql).map_err(db_err)?;
            let rows = st
                .query_map(params![now_ms, SWEEP_BATCH_MAX as i64], |r| r.get(0))
                .map_err(db_err)?;
            rows.collect::<rusqlite::Result<Vec<String>>>()
                .map_err(read_err)
        })
    }
}

impl BoardStore for SqliteStore {
    fn offer(&self, task: &NewTask) -> StoreResult<Offered> {
        let task = task.clone();
        self.board(move |tx| ops::offer(tx, &task))
    }

    fn task(&self, id: &str) -> StoreResult<Option<TaskRecord>> {
        self.read(|c| Tx(c).task(id, false))
    }

    fn tasks(&self, filter: &TaskFilter) -> StoreResult<Vec<TaskRecord>> {
        let limit = filter.limit.clamp(1, TASK_LIST_MAX) as i64;
        self.read(|c| {
            let mut st = c
                .prepare_cached(&format!(
                    "SELECT {TASK_COLS} FROM tasks t WHERE (?1 IS NULL OR t.state = ?1) \
                     AND (?2 IS NULL OR EXISTS (SELECT 1 FROM task_tags g WHERE g.task_id = t.id AND g.tag = ?2)) \
                     AND (?4 IS NULL OR t.correlation = ?4 OR t.id = ?4) \
                     ORDER BY t.created_ms, t.rowid LIMIT ?3"
                ))
                .map_err(db_err)?;
            let rows = st
                .query_map(
                    params![
                        filter.state.map(|s| s.as_str()),
                        filter.tag,
                        limit,
                        filter.correlation
                    ],
                    task_row,
                )
                .map_err(db_err)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
        })
    }

    fn attempts(&self, task_id: &str) -> StoreResult<Vec<AttemptRecord>> {
        self.read(|c| {
            let mut st = c
                .prepare_cached(&format!(
                    "SELECT {ATTEMPT_COLS} FROM task_attempts WHERE task_id = ?1 ORDER BY n"
                ))
                .map_err(db_err)?;
            let rows = st.query_map([task_id], attempt_row).map_err(db_err)?;
            let attempts = rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)?;
            let mut st = c
                .prepare_cached(
                    "SELECT task_id, n, run_id, turns, tokens, tool_calls, failed_tool_calls, at_ms FROM task_attempt_costs WHERE task_id = ?1",
                )
                .map_err(db_err)?;
            let costs = st
                .query_map([task_id], |r| {
                    Ok(AttemptCost {
                        task_id: r.get(0)?,
                        n: r.get(1)?,
                        run_id: r.get(2)?,
                        usage: Usage {
                            turns: r.get(3)?,
                            tokens: r.get(4)?,
                            tool_calls: r.get(5)?,
                            failed_tool_calls: r.get(6)?,
                        },
                        at_ms: r.get(7)?,
                    })
                })
                .map_err(db_err)?
                .collect::<rusqlite::Result<Vec<_>>>()
                .map_err(read_err)?;
            Ok(ops::with_costs(attempts, &costs))
        })
    }

    fn uncharged(&self, now_ms: i64) -> StoreResult<Vec<(String, u32, String)>> {
        self.read(|c| {
            let mut st = c.prepare_cached(ops::UNCHARGED_SQL).map_err(db_err)?;
            let rows = st
                .query_map(params![now_ms, SWEEP_BATCH_MAX as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .map_err(db_err)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
        })
    }

    fn charge(&self, cost: &AttemptCost) -> StoreResult<bool> {
        let c = cost.clone();
        let inserted = self.write(move |conn| {
            conn.prepare_cached(ops::CHARGE_SQL)
                .map_err(db_err)?
                .execute(params![
                    c.task_id,
                    c.n,
                    c.run_id,
                    c.usage.turns,
                    c.usage.tokens,
                    c.usage.tool_calls,
                    c.usage.failed_tool_calls,
                    c.at_ms
                ])
                .map_err(db_err)
        })?;
        if inserted == 1 {
            return Ok(true);
        }
        let a = self.read(|c| Tx(c).attempt(&cost.task_id, cost.n))?;
        ops::charge_refused(a.as_ref(), cost)
    }

    fn spend_nonce(
        &self,
        identity: &str,
        nonce: &str,
        at_ms: i64,
        now_ms: i64,
    ) -> StoreResult<bool> {
        let (who, n) = (identity.to_string(), nonce.to_string());
        let inserted = self.write(move |conn| {
            conn.prepare_cached(ops::PRUNE_NONCES_SQL)
                .map_err(db_err)?
                .execute(params![ops::nonces_kept_after(now_ms)])
                .map_err(db_err)?;
            conn.prepare_cached(ops::SPEND_NONCE_SQL)
                .map_err(db_err)?
                .execute(params![who, n, at_ms])
                .map_err(db_err)
        })?;
        Ok(inserted == 1)
    }

    fn claim(&self, req: &ClaimRequest) -> StoreResult<Option<Claim>> {
        let req = req.clone();
        self.board(move |tx| ops::claim(tx, &req))
    }

    fn heartbeat(&self, at: &AttemptRef, now_ms: i64) -> StoreResult<Heartbeat> {
        let at = at.clone();
        self.board(move |tx| ops::heartbeat(tx, &at, now_ms))
    }

    fn suspend(&self, at: &AttemptRef, run_id: &str, now_ms: i64) -> StoreResult<TaskRecord> {
        let (at, run) = (at.clone(), run_id.to_string());
        self.board(move |tx| ops::suspend(tx, &at, &run, now_ms))
    }

    fn attempt_of_run(&self, run_id: &str) -> StoreResult<Option<AttemptRecord>> {
        self.read(|c| {
            c.prepare_cached(&format!(
                "SELECT {ATTEMPT_COLS} FROM task_attempts WHERE run_id = ?1 ORDER BY task_id, n LIMIT 1"
            ))
            .map_err(db_err)?
            .query_row([run_id], attempt_row)
            .optional()
            .map_err(read_err)
        })
    }

    fn runs_of_ended_attempts(&self, limit: usize) -> StoreResult<Vec<String>> {
        self.read(|c| {
            c.prepare_cached(ops::ENDED_ATTEMPT_RUNS_SQL)
                .map_err(db_err)?
                .query_map([limit as i64], |r| r.get(0))
                .map_err(db_err)?
                .collect::<Result<Vec<String>, _>>()
                .map_err(read_err)
        })
    }

    fn resume_ready(&self, task_id: &str, now_ms: i64) -> StoreResult<TaskRecord> {
        let id = task_id.to_string();
        self.board(move |tx| ops::resume_ready(tx, &id, now_ms))
    }

    fn report(&self, report: &Report) -> StoreResult<Reported> {
        let r = report.clone();
        self.board(move |tx| ops::report(tx, &r))
    }

    fn suspended_with_ended_runs(&self, limit: usize) -> StoreResult<Vec<(String, u32, String)>> {
        self.read(|c| {
            c.prepare_cached(ops::SUSPENDED_ENDED_SQL)
                .map_err(db_err)?
                .query_map([limit as i64], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
                .map_err(db_err)?
                .collect::<Result<Vec<(String, u32, String)>, _>>()
                .map_err(read_err)
        })
    }

    fn settle_suspended(&self, report: &Report) -> StoreResult<Option<Reported>> {
        let r = report.clone();
        self.board(move |tx| ops::settle_suspended(tx, &r))
    }

    fn spend_repair(&self, at: &AttemptRef) -> StoreResult<u32> {
        let at = at.clone();
        self.board(move |tx| ops::spend_repair(tx, &at))
    }

    fn repairs_spent(&self, task_id: &str, n: u32) -> StoreResult<u32> {
        self.read(|c| Tx(c).repairs(task_id, n))
    }

    fn cancel(&self, task_id: &str, now_ms: i64) -> StoreResult<TaskRecord> {
        let id = task_id.to_string();
        self.board(move |tx| ops::cancel(tx, &id, now_ms))
    }

    fn sweep(&self, now_ms: i64) -> StoreResult<SweepReport> {
        let mut out = SweepReport::default();
        // First: a run durably suspended suspends its attempt instead of timing it out.
        let orphans: Vec<(String, i64, String)> = self.read(move |c| {
            let mut st = c
                .prepare_cached(ops::SUSPENDED_ORPHANS_SQL)
                .map_err(db_err)?;
            let rows = st
                .query_map(params![now_ms, SWEEP_BATCH_MAX as i64], |r| {
                    Ok((r.get(0)?, r.get(1)?, r.get(2)?))
                })
                .map_err(db_err)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
        })?;
        for (id, n, run) in orphans {
            let (tid, r) = (id.clone(), run.clone());
            let n = n as u32;
            if self.board(move |tx| ops::suspend_orphan(tx, &tid, n, &r, now_ms))? {
                out.suspended.push((id, n, run));
            }
        }
        for id in self.due_ids(
            "SELECT task_id FROM task_attempts WHERE state IN ('claimed', 'running') \
             AND (dispatch_deadline_ms <= ?1 OR lease_until_ms <= ?1 OR running_deadline_ms <= ?1) \
             ORDER BY task_id LIMIT ?2",
            now_ms,
        )? {
            let tid = id.clone();
            if let Some((n, clock)) = self.board(move |tx| ops::time_out(tx, &tid, now_ms))? {
                out.timed_out.push((id, n, clock));
            }
        }
        for id in self.due_ids(
            "SELECT id FROM tasks WHERE state IN ('waiting', 'queued') AND deadline_ms <= ?1 \
             ORDER BY created_ms LIMIT ?2",
            now_ms,
        )? {
            let tid = id.clone();
            if self.board(move |tx| ops::expire(tx, &tid, now_ms))? {
                out.expired.push(id);
            }
        }
        for id in self.due_ids(
            "SELECT id FROM tasks WHERE state = 'waiting' AND ?1 = ?1 ORDER BY created_ms LIMIT ?2",
            now_ms,
        )? {
            let tid = id.clone();
            if self.board(move |tx| ops::promote(tx, &tid, now_ms))? {
                out.promoted.push(id);
            }
        }
        for id in self.due_ids(
            "SELECT a.task_id FROM task_attempts a JOIN runs r ON r.id = a.run_id \
             WHERE a.state = 'suspended' AND r.state = 'suspended' AND ?1 = ?1 \
             AND NOT EXISTS (SELECT 1 FROM cards c WHERE c.run_id = a.run_id AND c.state = 'open') \
             ORDER BY a.task_id LIMIT ?2",
            now_ms,
        )? {
            let tid = id.clone();
            // Losing the race to the decider (it queued the task itself) changes nothing.
            if self
                .board(move |tx| ops::resume_ready(tx, &tid, now_ms))
                .is_ok()
            {
                out.resumed.push(id);
            }
        }
        Ok(out)
    }

    fn result(&self, id: &str) -> StoreResult<Option<Value>> {
        self.read(|c| {
            let body: Option<String> = c
                .query_row("SELECT body FROM task_results WHERE id = ?1", [id], |r| {
                    r.get(0)
                })
                .optional()
                .map_err(read_err)?;
            body.map(|b| {
                serde_json::from_str(&b)
                    .map_err(|e| StoreError::Corrupt(format!("result {id} does not parse: {e}")))
            })
            .transpose()
        })
    }

    fn verdicts(&self, target: &str) -> StoreResult<Vec<(String, Verdict)>> {
        self.read(|c| {
            let mut st = c
                .prepare_cached(
                    "SELECT judge_task, target, passed, scores FROM task_verdicts WHERE target = ?1 ORDER BY at_ms, judge_task",
                )
                .map_err(db_err)?;
            let rows = st
                .query_map([target], |r| {
                    Ok((
                        r.get::<_, String>(0)?,
                        Verdict {
                            target: r.get(1)?,
                            passed: r.get(2)?,
                            scores: json_col(&r.get::<_, String>(3)?)?,
                        },
                    ))
                })
                .map_err(db_err)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
        })
    }

    fn task_counts(&self) -> StoreResult<Vec<(TaskState, u64)>> {
        crate::aggregates::task_counts(self)
    }

    fn measures(&self, q: &MeasuresQuery) -> StoreResult<Vec<MeasureRow>> {
        let sql = ops::measures_sql(q.by, false);
        self.read(|c| {
            let mut st = c.prepare(&sql).map_err(db_err)?;
            let rows = st
                .query_map(
                    params![
                        q.since_ms,
                        q.friction_turns,
                        q.friction_failed_tools,
                        q.correlation
                    ],
                    |r| {
                        Ok(MeasureRow {
                            cohort: r.get(0)?,
                            tasks: r.get(1)?,
                            accepted: r.get(2)?,
                            first_attempt_accepted: r.get(3)?,
                            terminal_failed: r.get(4)?,
                            cancelled: r.get(5)?,
                            retried: r.get(6)?,
                            retry_recovered: r.get(7)?,
                            attempts: r.get(8)?,
                            tool_calls: r.get(9)?,
                            failed_tool_calls: r.get(10)?,
                            high_friction_attempts: r.get(11)?,
                            median_turns: r.get(12)?,
                            median_queued_to_accepted_ms: r.get(13)?,
                            tokens: r.get(14)?,
                            judged: r.get(15)?,
                            verdicts_passed: r.get(16)?,
                            failed_model_outage: r.get(17)?,
                            failed_tool_error: r.get(18)?,
                            failed_malformed_output: r.get(19)?,
                            failed_policy_refusal: r.get(20)?,
                            failed_worker_crash: r.get(21)?,
                            context_reads: r.get(22)?,
                            input_reads: r.get(23)?,
                            diary_reads: r.get(24)?,
                        })
                    },
                )
                .map_err(db_err)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
        })
    }
}
