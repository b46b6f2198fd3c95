//! Schedules (§12.1) and their consumed slots (§12.2) on SQLite.

use super::runs::insert_run;
use super::*;

pub(super) fn consume_slot(
    store: &SqliteStore,
    schedule: &str,
    slot_ms: i64,
    run: &NewRun,
) -> StoreResult<bool> {
    let (schedule, run) = (schedule.to_string(), run.clone());
    store.write(move |c| {
        let taken: Option<String> = c
            .query_row(
                "SELECT run_id FROM slots WHERE schedule = ?1 AND slot_ms = ?2",
                params![schedule, slot_ms],
                |r| r.get(0),
            )
            .optional()
            .map_err(db_err)?;
        if taken.is_some() {
            return Ok(false);
        }
        insert_run(c, &run)?;
        execute_cached(
            c,
            "INSERT INTO slots (schedule, slot_ms, run_id) VALUES (?1, ?2, ?3)",
            params![schedule, slot_ms, run.id],
        )
        .map_err(db_err)?;
        Ok(true)
    })
}

pub(super) fn slot_run(
    store: &SqliteStore,
    schedule: &str,
    slot_ms: i64,
) -> StoreResult<Option<String>> {
    store.read(|c| {
        query_row_cached(
            c,
            "SELECT run_id FROM slots WHERE schedule = ?1 AND slot_ms = ?2",
            params![schedule, slot_ms],
            |r| r.get(0),
        )
        .optional()
        .map_err(db_err)
    })
}

pub(super) fn slots(store: &SqliteStore, schedule: &str) -> StoreResult<Vec<(i64, String)>> {
    store.read(|c| {
        let mut st = c
            .prepare_cached(
                "SELECT slot_ms, run_id FROM slots WHERE schedule = ?1 ORDER BY slot_ms",
            )
            .map_err(db_err)?;
        let rows = st
            .query_map([schedule], |r| Ok((r.get(0)?, r.get(1)?)))
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

pub(super) fn put_schedule(store: &SqliteStore, s: &Schedule) -> StoreResult<()> {
    let s = s.clone();
    let routine = json_text(&s.routine)?;
    store.write(move |c| {
        execute_cached(
            c,
            &format!("INSERT INTO schedules ({SCHEDULE_COLS}) VALUES (?1,?2,?3,?4,?5,?6,?7,?8)"),
            params![
                s.name,
                s.cron,
                s.tz,
                routine,
                s.catch_up.as_str(),
                s.overlap.as_str(),
                s.grace_ms,
                s.created_ms
            ],
        )
        .map_err(|e| match db_err(e) {
            StoreError::Conflict(_) => codec::schedule_exists(&s.name),
            other => other,
        })?;
        Ok(())
    })
}

pub(super) fn schedules(store: &SqliteStore) -> StoreResult<Vec<Schedule>> {
    store.read(|c| {
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {SCHEDULE_COLS} FROM schedules ORDER BY name"
            ))
            .map_err(db_err)?;
        let rows = st
            .query_map([], |r| {
                let routine: String = r.get(3)?;
                Ok(Schedule {
                    name: r.get(0)?,
                    cron: r.get(1)?,
                    tz: r.get(2)?,
                    routine: json_col(&routine)?,
                    catch_up: parse(&r.get::<_, String>(4)?, "catch_up")?,
                    overlap: parse(&r.get::<_, String>(5)?, "overlap")?,
                    grace_ms: r.get(6)?,
                    created_ms: r.get(7)?,
                })
            })
            .map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

pub(super) fn remove_schedule(store: &SqliteStore, name: &str) -> StoreResult<bool> {
    let name = name.to_string();
    store.write(move |c| {
        Ok(
            execute_cached(c, "DELETE FROM schedules WHERE name = ?1", [name]).map_err(db_err)?
                == 1,
        )
    })
}
