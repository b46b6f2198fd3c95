//! Schedules (§12) and `vouch serve` without HTTP: the tick loop that runs them.

use crate::args::*;
use crate::when;
use crate::{bad, home, host_err, open_host};
use anyhow::{anyhow, Result};
use serde_json::{json, Value};
use std::path::Path;
use vouch_runtime::Host;

pub fn parse_duration_ms(s: &str) -> Result<i64> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = num.parse().map_err(|_| {
        bad(format!(
            "duration `{s}`: expected a number with s, m or h, like 15m"
        ))
    })?;
    let mult = match unit {
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        other => {
            return Err(bad(format!(
                "duration `{s}`: unknown unit `{other}` (use s, m or h)"
            )))
        }
    };
    n.checked_mul(mult).ok_or_else(|| {
        bad(format!(
            "duration `{s}` is too long; give at most a few days"
        ))
    })
}

pub fn schedule(dir: &Path, cmd: ScheduleCmd, json: bool) -> Result<i32> {
    let store = home::open_store(dir)?;
    match cmd {
        ScheduleCmd::Add {
            name,
            cron,
            tz,
            routine,
            catch_up,
            overlap,
            grace,
        } => {
            let grace_ms = parse_duration_ms(&grace)?;
            let text = vouch_runtime::bounded::read_text(
                &routine,
                "routine",
                vouch_runtime::bounded::INPUT_FILE_BYTES_MAX,
            )
            .map_err(|e| bad(e.to_string()))?;
            let r: Value = serde_json::from_str(&text)
                .map_err(|e| bad(format!("routine {} is not JSON: {e}", routine.display())))?;
            crate::refuse_nul(&r, "routine", &routine)?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0);
            let sched = vouch_runtime::scheduler::new_schedule(
                &name,
                &cron,
                &tz,
                r,
                catch_up.into(),
                overlap.into(),
                grace_ms,
                now,
            )
            .map_err(|e| match e.field {
                "routine" => bad(format!("routine {}: {}", routine.display(), e.message)),
                _ => bad(e.message),
            })?;
            store.put_schedule(&sched).map_err(|e| match e {
                vouch_store::StoreError::Conflict(m) => bad(m),
                other => anyhow!(other),
            })?;
            if json {
                outln!("{}", serde_json::to_string(&sched)?);
            } else {
                houtln!("Schedule `{name}` added ({} {}). It runs while `vouch serve` is running; slots missed while it is not are reported as missed.", sched.cron, sched.tz);
            }
            Ok(0)
        }
        ScheduleCmd::List => list(store.as_ref(), json),
        ScheduleCmd::Rm { name } => {
            if !store.remove_schedule(&name)? {
                return Err(bad(format!(
                    "no schedule `{name}`; see `vouch schedule list`"
                )));
            }
            if !json {
                houtln!("Schedule `{name}` removed; its past runs and receipts stay.");
            }
            Ok(0)
        }
    }
}

/// `vouch schedule list`: each schedule with its next slot (in its own zone) and its last.
fn list(store: &dyn vouch_store::Store, json: bool) -> Result<i32> {
    let all = store.schedules()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0);
    if json {
        let mut rows = vec![];
        for s in &all {
            let next = vouch_runtime::scheduler::next_slot(&s.cron, &s.tz, now);
            let mut v = serde_json::to_value(s)?;
            v["next_slot_ms"] = json!(next);
            v["next_slot"] = json!(next.map(|t| when::slot_rfc3339(t, &s.tz)));
            rows.push(v);
        }
        outln!("{}", Value::Array(rows));
        return Ok(0);
    }
    if all.is_empty() {
        houtln!("No schedules. Add one with `vouch schedule add NAME --cron \"0 7 * * *\" --tz Europe/Berlin --routine FILE`.");
        return Ok(0);
    }
    let mut rows = vec![];
    for s in &all {
        let next = vouch_runtime::scheduler::next_slot(&s.cron, &s.tz, now)
            .map(|t| when::slot_time(t, &s.tz))
            .unwrap_or_else(|| "none within a year".into());
        let last = store
            .slots(&s.name)?
            .last()
            .map(|(t, r)| format!("{} → run {r}", when::slot_time(*t, &s.tz)))
            .unwrap_or_else(|| "no slot yet".into());
        rows.push(vec![
            s.name.clone(),
            s.cron.clone(),
            next,
            s.catch_up.to_string(),
            s.overlap.to_string(),
            format!("{} s", s.grace_ms / 1000),
            last,
        ]);
    }
    let header = [
        "NAME",
        "CRON",
        "NEXT SLOT",
        "CATCH-UP",
        "OVERLAP",
        "GRACE",
        "LAST SLOT",
    ];
    for l in crate::out::table(&header, &rows) {
        houtln!("{l}");
    }
    Ok(0)
}

pub fn serve(dir: &Path, tick_ms: u64, once: bool, json: bool) -> Result<i32> {
    let host = open_host(dir, !json)?;
    if once {
        errln!(
            "vouch serve --once: home {} — one scheduler tick",
            dir.display()
        );
    } else {
        errln!(
            "vouch serve: home {} — scheduler every {tick_ms} ms (Ctrl-C to stop)",
            dir.display()
        );
    }
    loop {
        let (report, schedules) = scheduler_pass(&host, json)?;
        if once {
            if !json {
                let n = report.started.len() + report.missed.len() + report.late.len();
                if n == 0 && report.taken == 0 {
                    houtln!(
                        "One tick: nothing was due ({}; no slot fell in this tick).",
                        crate::out::count(schedules, "schedule", "schedules")
                    );
                } else {
                    houtln!(
                        "One tick: {} started, {} missed, {} running late, {} taken by another host.",
                        crate::out::count(report.started.len(), "slot", "slots"),
                        report.missed.len(),
                        report.late.len(),
                        report.taken
                    );
                }
            }
            return Ok(0);
        }
        std::thread::sleep(std::time::Duration::from_millis(tick_ms.max(50)));
        // Runs whose owner died while we serve are ended here (§9.1 b). A pass that fails
        // (the store busy, a run another host took meanwhile) is tried again next tick: it
        // never stops the host.
        if let Err(e) = host.boot() {
            errln!("vouch serve: start-up reconciliation pass failed, trying again next tick: {e}");
        }
    }
}

/// One scheduler pass: start due slots, report missed and late ones. Returns what the tick
/// did and how many schedules there are.
pub(crate) fn scheduler_pass(
    host: &Host,
    json: bool,
) -> Result<(vouch_runtime::scheduler::TickReport, usize)> {
    let report = host.tick().map_err(host_err)?;
    // Slots are shown as times in their schedule's zone, never as epoch milliseconds.
    let zones: std::collections::BTreeMap<String, String> = host
        .schedules()?
        .into_iter()
        .map(|s| (s.name, s.tz))
        .collect();
    let zone = |s: &str| zones.get(s).cloned().unwrap_or_else(|| "UTC".into());
    let at = |s: &str, slot: i64| when::slot_time(slot, &zone(s));
    for (s, slot, run) in &report.started {
        errln!("  {s}: the {} slot ran as {run}", at(s, *slot));
    }
    for (s, slot, run) in &report.missed {
        errln!(
            "  {s}: the {} slot was missed (receipt: `vouch receipt {run}`)",
            at(s, *slot)
        );
    }
    for (s, slot, run) in &report.late {
        errln!("  {s}: the {} slot runs late as {run}", at(s, *slot));
    }
    if json {
        let rows = |v: &[(String, i64, String)]| {
            v.iter()
                .map(|(s, slot, run)| json!({"schedule": s, "slot_ms": slot, "slot": when::slot_rfc3339(*slot, &zone(s)), "run": run}))
                .collect::<Vec<_>>()
        };
        outln!(
            "{}",
            json!({"started": rows(&report.started), "missed": rows(&report.missed), "late": rows(&report.late), "taken_by_another_host": report.taken})
        );
    }
    let schedules = zones.len();
    Ok((report, schedules))
}
