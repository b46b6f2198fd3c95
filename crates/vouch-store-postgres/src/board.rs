//! The task board on PostgreSQL (§13). Each write is one READ COMMITTED transaction; the
//! procedures of `vouch_store::board` lock the task row (`FOR UPDATE`) before deciding, and the
//! claim is one conditional `UPDATE … WHERE id = (SELECT … FOR UPDATE SKIP LOCKED) RETURNING`,
//! so contending workers never wait on each other's rows and exactly one wins each task.

use super::{col, corrupt, db_err, json_col, PostgresStore};
use postgres::Row;
use serde_json::Value;
use vouch_core::board::{AttemptState, Condition, TaskState};
use vouch_store::board::{
    self as ops, AttemptCost, AttemptRecord, AttemptRef, BoardStore, BoardTx, Claim, ClaimRequest,
    Heartbeat, MeasureRow, MeasuresQuery, NewTask, Offered, Report, Reported, SweepReport,
    TaskFilter, TaskRecord, TaskSpec, Usage, Verdict, SWEEP_BATCH_MAX, TASK_LIST_MAX,
};
use vouch_store::codec::{ATTEMPT_COLS, TASK_COLS};
use vouch_store::{StoreError, StoreResult};

/// A claim that found nothing while claimable rows exist (another claimant's lock hid them,
/// or its commit changed the row under our scan) tries again this many times.
const CLAIM_RESCANS_MAX: usize = 16;

fn de<T: serde::de::DeserializeOwned>(r: &Row, i: usize, what: &str) -> StoreResult<T> {
    let s: &str = col(r, i, what)?;
    serde_json::from_str(s).map_err(|e| corrupt(what, e))
}

fn small(r: &Row, i: usize, what: &str) -> StoreResult<u32> {
    let v: i64 = col(r, i, what)?;
    u32::try_from(v).map_err(|e| corrupt(what, e))
}

fn task_row(r: &Row) -> StoreResult<TaskRecord> {
    let state: &str = col(r, 3, "task state")?;
    let condition: Option<&str> = col(r, 14, "task condition")?;
    let accepted: Option<i64> = col(r, 21, "task accepted attempt")?;
    Ok(TaskRecord {
        id: col(r, 0, "task id")?,
        kind: col(r, 1, "task kind")?,
        owner: col(r, 2, "task owner")?,
        state: TaskState::parse(state).ok_or_else(|| corrupt("task state", state))?,
        max_attempts: small(r, 4, "task max attempts")?,
        attempts: small(r, 5, "task attempts")?,
        aborts: small(r, 6, "task aborts")?,
        epoch: col(r, 7, "task epoch")?,
        claimant: col(r, 8, "task claimant")?,
        lease_until_ms: col(r, 9, "task lease")?,
        deadline_ms: col(r, 10, "task deadline")?,
        profiles: de(r, 11, "task profiles")?,
        tags: de(r, 12, "task tags")?,
        excluded_claimant: col(r, 13, "task excluded claimant")?,
        condition: condition
            .map(|c| serde_json::from_str::<Condition>(c).map_err(|e| corrupt("task condition", e)))
            .transpose()?,
        idempotency_key: col(r, 15, "task idempotency key")?,
        request_id: col(r, 16, "task request id")?,
        spec: de::<TaskSpec>(r, 17, "task spec")?,
        created_ms: col(r, 18, "task created")?,
        queued_ms: col(r, 19, "task queued")?,
        ended_ms: col(r, 20, "task ended")?,
        accepted_attempt: accepted
            .map(|a| u32::try_from(a).map_err(|e| corrupt("task accepted attempt", e)))
            .transpose()?,
        result_id: col(r, 22, "task result id")?,
        resuming: col(r, 23, "task resuming")?,
        updated_ms: col(r, 24, "task updated")?,
    })
}

fn attempt_row(r: &Row) -> StoreResult<AttemptRecord> {
    let state: &str = col(r, 2, "attempt state")?;
    Ok(AttemptRecord {
        task_id: col(r, 0, "attempt task")?,
        n: small(r, 1, "attempt number")?,
        state: AttemptState::parse(state).ok_or_else(|| corrupt("attempt state", state))?,
        claimant: col(r, 3, "attempt claimant")?,
        epoch: col(r, 4, "attempt epoch")?,
        profile: col(r, 5, "attempt profile")?,
        model: col(r, 6, "attempt model")?,
        policy_fingerprint: col(r, 7, "attempt policy fingerprint")?,
        claimed_ms: col(r, 8, "attempt claimed")?,
        started_ms: col(r, 9, "attempt started")?,
        lease_until_ms: col(r, 10, "attempt lease")?,
        dispatch_deadline_ms: col(r, 11, "attempt dispatch deadline")?,
        running_deadline_ms: col(r, 12, "attempt running deadline")?,
        running_left_ms: col(r, 13, "attempt running left")?,
        ended_ms: col(r, 14, "attempt ended")?,
        end_reason: col(r, 15, "attempt end reason")?,
        retryable: col(r, 16, "attempt retryable")?,
        run_id: col(r, 17, "attempt run")?,
        result_id: col(r, 18, "attempt result")?,
        usage: Usage {
            turns: col(r, 19, "attempt turns")?,
            tokens: col(r, 20, "attempt tokens")?,
            tool_calls: col(r, 21, "attempt tool calls")?,
            failed_tool_calls: col(r, 22, "attempt failed tool calls")?,
        },
        detail: json_col(r, 23, "attempt detail")?,
    })
}

fn json<T: serde::Serialize>(v: &T) -> StoreResult<String> {
    serde_json::to_string(v).map_err(|e| StoreError::Fatal(format!("serialize: {e}")))
}

struct Tx<'a, 'b, 'c>(&'a mut crate::Txn<'b, 'c>);

/// The claim's filters, shared by the update and the "is anything claimable?" re-check.
const CLAIMABLE: &str = "t.state = 'queued' \
     AND ($3::text IS NULL OR t.id = $3) \
     AND (t.deadline_ms IS NULL OR t.deadline_ms > $2) \
     AND (t.resuming OR t.attempts - t.aborts < t.max_attempts) \
     AND (t.excluded_claimant IS NULL OR t.excluded_claimant <> $1) \
     AND (t.profiles = '[]' OR jsonb_exists(t.profiles::jsonb, $4)) \
     AND (cardinality($5::text[]) = 0 OR t.kind = ANY($5)) \
     AND (cardinality($6::text[]) = 0 OR EXISTS (SELECT 1 FROM task_tags g WHERE g.task_id = t.id AND g.tag = ANY($6)))";

impl BoardTx for Tx<'_, '_, '_> {
    fn task(&mut self, id: &str, lock: bool) -> StoreResult<Option<TaskRecord>> {
        let sql = format!(
            "SELECT {TASK_COLS} FROM tasks WHERE id = $1{}",
            if lock { " FOR UPDATE" } else { "" }
        );
        self.0
            .query_opt(&sql, &[&id])
            .map_err(db_err)?
            .map(|r| task_row(&r))
            .transpose()
    }

    fn task_by_key(&mut self, key: &str) -> StoreResult<Option<TaskRecord>> {
        self.0
            .query_opt(
                &format!("SELECT {TASK_COLS} FROM tasks WHERE idempotency_key = $1"),
                &[&key],
            )
            .map_err(db_err)?
            .map(|r| task_row(&r))
            .transpose()
    }

    fn insert_task(&mut self, t: &TaskRecord) -> StoreResult<()> {
        let condition = t.condition.as_ref().map(json).transpose()?;
        self.0
            .execute(
                &format!(
                    "INSERT INTO tasks ({TASK_COLS}, lease_ms, correlation) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25, $26, $27)"
                ),
                &[
                    &t.id,
                    &t.kind,
                    &t.owner,
                    &t.state.as_str(),
                    &i64::from(t.max_attempts),
                    &i64::from(t.attempts),
                    &i64::from(t.aborts),
                    &t.epoch,
                    &t.claimant,
                    &t.lease_until_ms,
                    &t.deadline_ms,
                    &json(&t.profiles)?,
                    &json(&t.tags)?,
                    &t.excluded_claimant,
                    &condition,
                    &t.idempotency_key,
                    &t.request_id,
                    &json(&t.spec)?,
                    &t.created_ms,
                    &t.queued_ms,
                    &t.ended_ms,
                    &t.accepted_attempt.map(i64::from),
                    &t.result_id,
                    &t.resuming,
                    &t.updated_ms,
                    &t.spec.lease_ms,
                    &t.spec.correlation,
                ],
            )
            .map_err(db_err)?;
        for tag in &t.tags {
            self.0
                .execute(
                    "INSERT INTO task_tags (task_id, tag) VALUES ($1, $2) ON CONFLICT DO NOTHING",
                    &[&t.id, tag],
                )
                .map_err(db_err)?;
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
            .execute(
                "UPDATE tasks SET state = $1, attempts = $2, aborts = $3, epoch = $4, claimant = $5, lease_until_ms = $6, queued_ms = $7, ended_ms = $8, accepted_attempt = $9, result_id = $10, resuming = $11, updated_ms = $12 WHERE id = $13 AND state = $14 AND epoch = $15",
                &[
                    &t.state.as_str(),
                    &i64::from(t.attempts),
                    &i64::from(t.aborts),
                    &t.epoch,
                    &t.claimant,
                    &t.lease_until_ms,
                    &t.queued_ms,
                    &t.ended_ms,
                    &t.accepted_attempt.map(i64::from),
                    &t.result_id,
                    &t.resuming,
                    &t.updated_ms,
                    &t.id,
                    &old_state.as_str(),
                    &old_epoch,
                ],
            )
            .map_err(db_err)?;
        Ok(n == 1)
    }

    fn attempt(&mut self, task_id: &str, n: u32) -> StoreResult<Option<AttemptRecord>> {
        self.0
            .query_opt(
                &format!("SELECT {ATTEMPT_COLS} FROM task_attempts WHERE task_id = $1 AND n = $2"),
                &[&task_id, &i64::from(n)],
            )
            .map_err(db_err)?
            .map(|r| attempt_row(&r))
            .transpose()
    }

    fn insert_attempt(&mut self, a: &AttemptRecord) -> StoreResult<()> {
        self.0
            .execute(
                &format!(
                    "INSERT INTO task_attempts ({ATTEMPT_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, $21, $22, $23, $24)"
                ),
                &[
                    &a.task_id,
                    &i64::from(a.n),
                    &a.state.as_str(),
                    &a.claimant,
                    &a.epoch,
                    &a.profile,
                    &a.model,
                    &a.policy_fingerprint,
                    &a.claimed_ms,
                    &a.started_ms,
                    &a.lease_until_ms,
                    &a.dispatch_deadline_ms,
                    &a.running_deadline_ms,
                    &a.running_left_ms,
                    &a.ended_ms,
                    &a.end_reason,
                    &a.retryable,
                    &a.run_id,
                    &a.result_id,
                    &a.usage.turns,
                    &a.usage.tokens,
                    &a.usage.tool_calls,
                    &a.usage.failed_tool_calls,
                    &json(&a.detail)?,
                ],
            )
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
            .execute(
                "UPDATE task_attempts SET state = $1, claimant = $2, epoch = $3, started_ms = $4, lease_until_ms = $5, dispatch_deadline_ms = $6, running_deadline_ms = $7, running_left_ms = $8, ended_ms = $9, end_reason = $10, retryable = $11, run_id = $12, result_id = $13, turns = $14, tokens = $15, tool_calls = $16, failed_tool_calls = $17, detail = $18 WHERE task_id = $19 AND n = $20 AND state = $21 AND epoch = $22",
                &[
                    &a.state.as_str(),
                    &a.claimant,
                    &a.epoch,
                    &a.started_ms,
                    &a.lease_until_ms,
                    &a.dispatch_deadline_ms,
                    &a.running_deadline_ms,
                    &a.running_left_ms,
                    &a.ended_ms,
                    &a.end_reason,
                    &a.retryable,
                    &a.run_id,
                    &a.result_id,
                    &a.usage.turns,
                    &a.usage.tokens,
                    &a.usage.tool_calls,
                    &a.usage.failed_tool_calls,
                    &json(&a.detail)?,
                    &a.task_id,
                    &i64::from(a.n),
                    &old_state.as_str(),
                    &old_epoch,
                ],
            )
            .map_err(db_err)?;
        Ok(n == 1)
    }

    fn put_result(&mut self, id: &str, task_id: &str, body: &str) -> StoreResult<()> {
        self.0
            .execute(
                "INSERT INTO task_results (id, task_id, body) VALUES ($1, $2, $3) ON CONFLICT (id) DO NOTHING",
                &[&id, &task_id, &body],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn put_verdict(&mut self, judge_task: &str, v: &Verdict, at_ms: i64) -> StoreResult<()> {
        self.0
            .execute(
                "INSERT INTO task_verdicts (judge_task, target, passed, scores, at_ms) VALUES ($1, $2, $3, $4, $5)",
                &[&judge_task, &v.target, &v.passed, &json(&v.scores)?, &at_ms],
            )
            .map_err(db_err)?;
        Ok(())
    }

    fn claim_row(&mut self, req: &ClaimRequest) -> StoreResult<Option<TaskRecord>> {
        let sql = format!(
            "UPDATE tasks SET state = 'dispatched', claimant = $1, epoch = epoch + 1, \
             lease_until_ms = $2 + lease_ms, updated_ms = $2 \
             WHERE state = 'queued' AND id = ( \
               SELECT t.id FROM tasks t WHERE {CLAIMABLE} \
               ORDER BY t.resuming DESC, t.queued_ms, t.ord LIMIT 1 FOR UPDATE SKIP LOCKED) \
             RETURNING {TASK_COLS}"
        );
        let exists = format!("SELECT EXISTS (SELECT 1 FROM tasks t WHERE {CLAIMABLE})");
        let params: [&(dyn postgres::types::ToSql + Sync); 6] = [
            &req.claimant,
            &req.now_ms,
            &req.task_id,
            &req.profile,
            &req.types,
            &req.tags,
        ];
        for _ in 0..CLAIM_RESCANS_MAX {
            if let Some(r) = self.0.query_opt(&sql, &params).map_err(db_err)? {
                return task_row(&r).map(Some);
            }
            // Under READ COMMITTED a row another claimant just took can leave the LIMIT 1
            // scan empty while other rows are still claimable: look again, bounded.
            let any: bool = self
                .0
                .query_one(&exists, &params)
                .and_then(|r| r.try_get(0))
                .map_err(db_err)?;
            if !any {
                return Ok(None);
            }
        }
        Ok(None)
    }

    fn add_repair(&mut self, task_id: &str, n: u32) -> StoreResult<u32> {
        let row = self
            .0
            .query_opt(
                "UPDATE task_attempts SET repairs = repairs + 1 WHERE task_id = $1 AND n = $2 RETURNING repairs",
                &[&task_id, &i64::from(n)],
            )
            .map_err(db_err)?
            .ok_or_else(|| StoreError::NotFound {
                what: "attempt",
                id: format!("{task_id}#{n}"),
            })?;
        let v: i32 = col(&row, 0, "repairs")?;
        Ok(v.max(0) as u32)
    }

    fn repairs(&mut self, task_id: &str, n: u32) -> StoreResult<u32> {
        let row = self
            .0
            .query_opt(
                "SELECT repairs FROM task_attempts WHERE task_id = $1 AND n = $2",
                &[&task_id, &i64::from(n)],
            )
            .map_err(db_err)?;
        Ok(match row {
            Some(r) => col::<i32>(&r, 0, "repairs")?.max(0) as u32,
            None => 0,
        })
    }
}

impl PostgresStore {
    fn board<T>(&self, f: impl FnOnce(&mut dyn BoardTx) -> StoreResult<T>) -> StoreResult<T> {
        self.tx(|t| f(&mut Tx(t)))
    }

    fn due_ids(&self, sql: &str, now_ms: i64) -> StoreResult<Vec<String>> {
        let rows = self.query(sql, &[&now_ms, &(SWEEP_BATCH_MAX as i64)])?;
        rows.iter().map(|r| col(r, 0, "task id")).collect()
    }
}

impl BoardStore for PostgresStore {
    fn offer(&self, task: &NewTask) -> StoreResult<Offered> {
        self.board(|tx| ops::offer(tx, task))
    }

    fn task(&self, id: &str) -> StoreResult<Option<TaskRecord>> {
        self.query_opt(
            &format!("SELECT {TASK_COLS} FROM tasks WHERE id = $1"),
            &[&id],
        )?
        .map(|r| task_row(&r))
        .transpose()
    }

    fn tasks(&self, filter: &TaskFilter) -> StoreResult<Vec<TaskRecord>> {
        let limit = filter.limit.clamp(1, TASK_LIST_MAX) as i64;
        let state = filter.state.map(|s| s.as_str());
        let rows = self.query(
            &format!(
                "SELECT {TASK_COLS} FROM tasks t WHERE ($1::text IS NULL OR t.state = $1) \
                 AND ($2::text IS NULL OR EXISTS (SELECT 1 FROM task_tags g WHERE g.task_id = t.id AND g.tag = $2)) \
                 AND ($4::text IS NULL OR t.correlation = $4 OR t.id = $4) \
                 ORDER BY t.created_ms, t.ord LIMIT $3"
            ),
            &[&state, &filter.tag, &limit, &filter.correlation],
        )?;
        rows.iter().map(task_row).collect()
    }

    fn attempts(&self, task_id: &str) -> StoreResult<Vec<AttemptRecord>> {
        let rows = self.query(
            &format!("SELECT {ATTEMPT_COLS} FROM task_attempts WHERE task_id = $1 ORDER BY n"),
            &[&task_id],
        )?;
        let attempts = rows
            .iter()
            .map(attempt_row)
            .collect::<StoreResult<Vec<_>>>()?;
        let costs = self
            .query(
                "SELECT task_id, n, run_id, turns, tokens, tool_calls, failed_tool_calls, at_ms FROM task_attempt_costs WHERE task_id = $1",
                &[&task_id],
            )?
            .iter()
            .map(|r| {
                let n: i64 = col(r, 1, "cost attempt")?;
                Ok(AttemptCost {
                    task_id: col(r, 0, "cost task")?,
                    n: u32::try_from(n).map_err(|e| corrupt("cost attempt", e))?,
                    run_id: col(r, 2, "cost run")?,
                    usage: Usage {
                        turns: col(r, 3, "cost turns")?,
                        tokens: col(r, 4, "cost tokens")?,
                        tool_calls: col(r, 5, "cost tool calls")?,
                        failed_tool_calls: col(r, 6, "cost failed tool calls")?,
                    },
                    at_ms: col(r, 7, "cost time")?,
                })
            })
            .collect::<StoreResult<Vec<_>>>()?;
        Ok(ops::with_costs(attempts, &costs))
    }

    fn uncharged(&self, now_ms: i64) -> StoreResult<Vec<(String, u32, String)>> {
        let sql = ops::UNCHARGED_SQL.replace("?1", "$1").replace("?2", "$2");
        self.query(&sql, &[&now_ms, &(SWEEP_BATCH_MAX as i64)])?
            .iter()
            .map(|r| {
                let n: i64 = col(r, 1, "attempt n")?;
                Ok((col(r, 0, "task id")?, n as u32, col(r, 2, "run id")?))
            })
            .collect()
    }

    fn spend_nonce(
        &self,
        identity: &str,
        nonce: &str,
        at_ms: i64,
        now_ms: i64,
    ) -> StoreResult<bool> {
        let dollars = |sql: &str| {
            sql.replace("?1", "$1")
                .replace("?2", "$2")
                .replace("?3", "$3")
        };
        self.exec(
            &dollars(ops::PRUNE_NONCES_SQL),
            &[&ops::nonces_kept_after(now_ms)],
        )?;
        let inserted = self.exec(&dollars(ops::SPEND_NONCE_SQL), &[&identity, &nonce, &at_ms])?;
        Ok(inserted == 1)
    }

    fn charge(&self, cost: &AttemptCost) -> StoreResult<bool> {
        let mut sql = ops::CHARGE_SQL.to_string();
        for i in (1..=8).rev() {
            sql = sql.replace(&format!("?{i}"), &format!("${i}"));
        }
        let inserted = self.exec(
            &sql,
            &[
                &cost.task_id,
                &i64::from(cost.n),
                &cost.run_id,
                &cost.usage.turns,
                &cost.usage.tokens,
                &cost.usage.tool_calls,
                &cost.usage.failed_tool_calls,
                &cost.at_ms,
            ],
        )?;
        if inserted == 1 {
            return Ok(true);
        }
        let a = self
            .attempts(&cost.task_id)?
            .into_iter()
            .find(|a| a.n == cost.n);
        // Read through `attempts`, a charged attempt shows its cost's run: read the row's own.
        let own = a.map(|mut a| {
            if a.detail.get("charged").is_some() {
                a.run_id = None;
            }
            a
        });
        ops::charge_refused(own.as_ref(), cost)
    }

    fn claim(&self, req: &ClaimRequest) -> StoreResult<Option<Claim>> {
        self.board(|tx| ops::claim(tx, req))
    }

    fn heartbeat(&self, at: &AttemptRef, now_ms: i64) -> StoreResult<Heartbeat> {
        self.board(|tx| ops::heartbeat(tx, at, now_ms))
    }

    fn suspend(&self, at: &AttemptRef, run_id: &str, now_ms: i64) -> StoreResult<TaskRecord> {
        self.board(|tx| ops::suspend(tx, at, run_id, now_ms))
    }

    fn attempt_of_run(&self, run_id: &str) -> StoreResult<Option<AttemptRecord>> {
        let rows = self.query(
            &format!(
                "SELECT {ATTEMPT_COLS} FROM task_attempts WHERE run_id = $1 ORDER BY task_id, n LIMIT 1"
            ),
            &[&run_id],
        )?;
        rows.first().map(attempt_row).transpose()
    }

    fn runs_of_ended_attempts(&self, limit: usize) -> StoreResult<Vec<String>> {
        let sql = ops::ENDED_ATTEMPT_RUNS_SQL.replace("?1", "$1");
        let rows = self.query(&sql, &[&(limit as i64)])?;
        Ok(rows.iter().map(|r| r.get(0)).collect())
    }

    fn resume_ready(&self, task_id: &str, now_ms: i64) -> StoreResult<TaskRecord> {
        self.board(|tx| ops::resume_ready(tx, task_id, now_ms))
    }

    fn report(&self, report: &Report) -> StoreResult<Reported> {
        self.board(|tx| ops::report(tx, report))
    }

    fn suspended_with_ended_runs(&self, limit: usize) -> StoreResult<Vec<(String, u32, String)>> {
        let sql = ops::SUSPENDED_ENDED_SQL.replace("?1", "$1");
        let rows = self.query(&sql, &[&(limit as i64)])?;
        Ok(rows
            .iter()
            .map(|r| (r.get(0), r.get::<_, i64>(1) as u32, r.get(2)))
            .collect())
    }

    fn settle_suspended(&self, report: &Report) -> StoreResult<Option<Reported>> {
        self.board(|tx| ops::settle_suspended(tx, report))
    }

    fn spend_repair(&self, at: &AttemptRef) -> StoreResult<u32> {
        self.board(|tx| ops::spend_repair(tx, at))
    }

    fn repairs_spent(&self, task_id: &str, n: u32) -> StoreResult<u32> {
        let row = self.query_opt(
            "SELECT repairs FROM task_attempts WHERE task_id = $1 AND n = $2",
            &[&task_id, &i64::from(n)],
        )?;
        Ok(match row {
            Some(r) => col::<i32>(&r, 0, "repairs")?.max(0) as u32,
            None => 0,
        })
    }

    fn cancel(&self, task_id: &str, now_ms: i64) -> StoreResult<TaskRecord> {
        self.board(|tx| ops::cancel(tx, task_id, now_ms))
    }

    fn sweep(&self, now_ms: i64) -> StoreResult<SweepReport> {
        let mut out = SweepReport::default();
        // First: a run durably suspended suspends its attempt instead of timing it out.
        let sql = ops::SUSPENDED_ORPHANS_SQL
            .replace("?1", "$1")
            .replace("?2", "$2");
        for r in self.query(&sql, &[&now_ms, &(SWEEP_BATCH_MAX as i64)])? {
            let id: String = col(&r, 0, "task id")?;
            let n: i64 = col(&r, 1, "attempt n")?;
            let run: String = col(&r, 2, "run id")?;
            let n = n as u32;
            if self.board(|tx| ops::suspend_orphan(tx, &id, n, &run, now_ms))? {
                out.suspended.push((id, n, run));
            }
        }
        for id in self.due_ids(
            "SELECT task_id FROM task_attempts WHERE state IN ('claimed', 'running') \
             AND (dispatch_deadline_ms <= $1 OR lease_until_ms <= $1 OR running_deadline_ms <= $1) \
             ORDER BY task_id LIMIT $2",
            now_ms,
        )? {
            if let Some((n, clock)) = self.board(|tx| ops::time_out(tx, &id, now_ms))? {
                out.timed_out.push((id, n, clock));
            }
        }
        for id in self.due_ids(
            "SELECT id FROM tasks WHERE state IN ('waiting', 'queued') AND deadline_ms <= $1 \
             ORDER BY created_ms LIMIT $2",
            now_ms,
        )? {
            if self.board(|tx| ops::expire(tx, &id, now_ms))? {
                out.expired.push(id);
            }
        }
        for id in self.due_ids(
            "SELECT id FROM tasks WHERE state = 'waiting' AND $1::bigint IS NOT NULL \
             ORDER BY created_ms LIMIT $2",
            now_ms,
        )? {
            if self.board(|tx| ops::promote(tx, &id, now_ms))? {
                out.promoted.push(id);
            }
        }
        for id in self.due_ids(
            "SELECT a.task_id FROM task_attempts a JOIN runs r ON r.id = a.run_id \
             WHERE a.state = 'suspended' AND r.state = 'suspended' AND $1::bigint IS NOT NULL \
             AND NOT EXISTS (SELECT 1 FROM cards c WHERE c.run_id = a.run_id AND c.state = 'open') \
             ORDER BY a.task_id LIMIT $2",
            now_ms,
        )? {
            // Losing the race to the decider (it queued the task itself) changes nothing.
            if self.board(|tx| ops::resume_ready(tx, &id, now_ms)).is_ok() {
                out.resumed.push(id);
            }
        }
        Ok(out)
    }

    fn result(&self, id: &str) -> StoreResult<Option<Value>> {
        self.query_opt("SELECT body FROM task_results WHERE id = $1", &[&id])?
            .map(|r| json_col(&r, 0, "result"))
            .transpose()
    }

    fn verdicts(&self, target: &str) -> StoreResult<Vec<(String, Verdict)>> {
        let rows = self.query(
            "SELECT judge_task, target, passed, scores FROM task_verdicts WHERE target = $1 ORDER BY at_ms, judge_task",
            &[&target],
        )?;
        rows.iter()
            .map(|r| {
                Ok((
                    col(r, 0, "verdict judge")?,
                    Verdict {
                        target: col(r, 1, "verdict target")?,
                        passed: col(r, 2, "verdict passed")?,
                        scores: json_col(r, 3, "verdict scores")?,
                    },
                ))
            })
            .collect()
    }

    fn task_counts(&self) -> StoreResult<Vec<(TaskState, u64)>> {
        crate::aggregates::task_counts(self)
    }

    fn measures(&self, q: &MeasuresQuery) -> StoreResult<Vec<MeasureRow>> {
        let rows = self.query(
            &ops::measures_sql(q.by, true),
            &[
                &q.since_ms,
                &q.friction_turns,
                &q.friction_failed_tools,
                &q.correlation,
            ],
        )?;
        rows.iter()
            .map(|r| {
                let n = |i: usize| col::<i64>(r, i, "measure");
                Ok(MeasureRow {
                    cohort: col(r, 0, "measure cohort")?,
                    tasks: n(1)?,
                    accepted: n(2)?,
                    first_attempt_accepted: n(3)?,
                    terminal_failed: n(4)?,
                    cancelled: n(5)?,
                    retried: n(6)?,
                    retry_recovered: n(7)?,
                    attempts: n(8)?,
                    tool_calls: n(9)?,
                    failed_tool_calls: n(10)?,
                    high_friction_attempts: n(11)?,
                    median_turns: col(r, 12, "measure median turns")?,
                    median_queued_to_accepted_ms: col(r, 13, "measure median time")?,
                    tokens: n(14)?,
                    judged: n(15)?,
                    verdicts_passed: n(16)?,
                    failed_model_outage: n(17)?,
                    failed_tool_error: n(18)?,
                    failed_malformed_output: n(19)?,
                    failed_policy_refusal: n(20)?,
                    failed_worker_crash: n(21)?,
                    context_reads: n(22)?,
                    input_reads: n(23)?,
                    diary_reads: n(24)?,
                })
            })
            .collect()
    }
}
