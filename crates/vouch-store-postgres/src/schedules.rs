//! Schedules (§12.1) and their consumed slots (§12.2) on PostgreSQL.

use super::runs::insert_run;
use super::*;

fn schedule_row(r: &Row) -> StoreResult<Schedule> {
    Ok(Schedule {
        name: col(r, 0, "schedule name")?,
        cron: col(r, 1, "schedule cron")?,
        tz: col(r, 2, "schedule tz")?,
        routine: json_col(r, 3, "schedule routine")?,
        catch_up: parse_enum(col(r, 4, "schedule catch_up")?, "schedule catch_up")?,
        overlap: parse_enum(col(r, 5, "schedule overlap")?, "schedule overlap")?,
        grace_ms: col(r, 6, "schedule grace_ms")?,
        created_ms: col(r, 7, "schedule created_ms")?,
    })
}

pub(super) fn consume_slot(
    store: &PostgresStore,
    schedule: &str,
    slot_ms: i64,
    run: &NewRun,
) -> StoreResult<bool> {
    let mut conn = store.pool.get()?;
    let mut t = conn.transaction().map_err(db_err)?;
    let taken = t
        .query_opt(
            "SELECT 1 FROM slots WHERE schedule = $1 AND slot_ms = $2",
            &[&schedule, &slot_ms],
        )
        .map_err(db_err)?;
    if taken.is_some() {
        return Ok(false);
    }
    insert_run(&mut t, run)?;
    // A concurrent consumer of the same slot blocks here until the first commits, then
    // inserts nothing and rolls its run back: a refused slot creates no run.
    let n = t
        .execute(
            "INSERT INTO slots (schedule, slot_ms, run_id) VALUES ($1, $2, $3) ON CONFLICT (schedule, slot_ms) DO NOTHING",
            &[&schedule, &slot_ms, &run.id],
        )
        .map_err(db_err)?;
    if n == 0 {
        t.rollback().map_err(db_err)?;
        return Ok(false);
    }
    t.commit().map_err(commit_err)?;
    Ok(true)
}

pub(super) fn slot_run(
    store: &PostgresStore,
    schedule: &str,
    slot_ms: i64,
) -> StoreResult<Option<String>> {
    store
        .query_opt(
            "SELECT run_id FROM slots WHERE schedule = $1 AND slot_ms = $2",
            &[&schedule, &slot_ms],
        )?
        .map(|r| col(&r, 0, "slot run_id"))
        .transpose()
}

pub(super) fn slots(store: &PostgresStore, schedule: &str) -> StoreResult<Vec<(i64, String)>> {
    store
        .query(
            "SELECT slot_ms, run_id FROM slots WHERE schedule = $1 ORDER BY slot_ms",
            &[&schedule],
        )?
        .iter()
        .map(|r| Ok((col(r, 0, "slot_ms")?, col(r, 1, "slot run_id")?)))
        .collect()
}

pub(super) fn put_schedule(store: &PostgresStore, s: &Schedule) -> StoreResult<()> {
    let routine = json_text(&s.routine)?;
    store
        .pool
        .get()?
        .execute(
            &format!("INSERT INTO schedules ({SCHEDULE_COLS}) VALUES ($1,$2,$3,$4,$5,$6,$7,$8)"),
            &[
                &s.name,
                &s.cron,
                &s.tz,
                &routine,
                &s.catch_up.as_str(),
                &s.overlap.as_str(),
                &s.grace_ms,
                &s.created_ms,
            ],
        )
        // The name is taken when the primary key says so (by constraint name, not wording).
        .map_err(|e| match e.as_db_error().and_then(|d| d.constraint()) {
            Some("schedules_pkey") => codec::schedule_exists(&s.name),
            _ => db_err(e),
        })?;
    Ok(())
}

pub(super) fn schedules(store: &PostgresStore) -> StoreResult<Vec<Schedule>> {
    rows(
        store.query(
            &format!("SELECT {SCHEDULE_COLS} FROM schedules ORDER BY name COLLATE \"C\""),
            &[],
        )?,
        schedule_row,
    )
}

pub(super) fn remove_schedule(store: &PostgresStore, name: &str) -> StoreResult<bool> {
    Ok(store.exec("DELETE FROM schedules WHERE name = $1", &[&name])? == 1)
}
