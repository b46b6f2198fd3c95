//! Schedules (§12): expected slots from a cron expression in a time zone, consumed before
//! their run starts, missed slots ended through the reconciler, catch-up and overlap.
//!
//! Daylight saving: a slot whose local time falls in a spring-forward gap runs at the first
//! valid instant after it; a local time that repeats in the fall-back hour runs once, at its
//! first occurrence (the cron crate's rules, tested below).

use crate::host::{Host, HostError, HostResult, ModelSpec, RunSpec};
use chrono::{TimeZone, Utc};
use chrono_tz::Tz;
use croner::Cron;
use serde_json::Value;
use vouch_core::{CatchUp, Overlap, Presence, RunState, TriggerKind};
use vouch_store::{CardState, RunRecord, Schedule};

/// Slots looked at per schedule and tick at most (a machine off for years stays bounded).
pub const SLOTS_PER_TICK_MAX: usize = 1000;

pub fn parse_cron(expr: &str) -> Result<Cron, String> {
    Cron::new(expr).parse().map_err(|e| {
        format!("cron expression `{expr}` is not valid ({e}); use five fields like `0 7 * * *`")
    })
}

pub fn parse_tz(tz: &str) -> Result<Tz, String> {
    tz.parse::<Tz>().map_err(|_| {
        format!("time zone `{tz}` is unknown; use an IANA name like `Europe/Berlin` or `UTC`")
    })
}

/// Slot instants (ms) in `(after_ms, until_ms]`, oldest first, at most `max`.
pub fn slots_between(cron: &Cron, tz: Tz, after_ms: i64, until_ms: i64, max: usize) -> Vec<i64> {
    let Some(start) = Utc.timestamp_millis_opt(after_ms).single() else {
        return vec![];
    };
    let mut out = vec![];
    for t in cron.iter_after(start.with_timezone(&tz)) {
        let ms = t.timestamp_millis();
        if ms > until_ms || out.len() >= max {
            break;
        }
        if ms > after_ms && out.last().map(|l| ms > *l).unwrap_or(true) {
            out.push(ms);
        }
    }
    // Keep the newest `max` when the window holds more.
    out
}

/// A schedule's next slot after `now_ms` (looking a year ahead at most), or `None` when its
/// cron or zone no longer parses or nothing falls within the year.
pub fn next_slot(cron: &str, tz: &str, now_ms: i64) -> Option<i64> {
    let c = parse_cron(cron).ok()?;
    let z = parse_tz(tz).ok()?;
    slots_between(&c, z, now_ms, now_ms + 366 * 86_400_000, 1)
        .first()
        .copied()
}

#[derive(Debug, Default, Clone, PartialEq)]
pub struct TickReport {
    /// (schedule, slot, run) started on time.
    pub started: Vec<(String, i64, String)>,
    /// (schedule, slot, run) ended as missed.
    pub missed: Vec<(String, i64, String)>,
    /// (schedule, slot, run) late runs started by catch-up `latest`.
    pub late: Vec<(String, i64, String)>,
    /// Slots another host consumed first.
    pub taken: usize,
}

/// Grace a schedule has when none is given (how late a slot may still start).
pub const GRACE_MS_DEFAULT: i64 = 15 * 60_000;

/// A schedule checked field by field; an error names the field at fault and what to do.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {message}")]
pub struct ScheduleInvalid {
    pub field: &'static str,
    pub message: String,
}

/// Build a schedule from what a person or program gave: cron and time zone parse, the
/// routine has a `prompt` and a `script` (an array of turns, stored as the scripted model) or
/// a `model` (default: the configured OpenAI endpoint). Catch-up and overlap arrive typed: a
/// wrong word is refused where it is read (the CLI's flag, the API's field).
#[allow(clippy::too_many_arguments)]
pub fn new_schedule(
    name: &str,
    cron: &str,
    tz: &str,
    routine: Value,
    catch_up: CatchUp,
    overlap: Overlap,
    grace_ms: i64,
    created_ms: i64,
) -> Result<Schedule, ScheduleInvalid> {
    let bad = |field: &'static str, message: String| ScheduleInvalid { field, message };
    if name.trim().is_empty() || name.len() > 200 {
        return Err(bad(
            "name",
            "give the schedule a name (1–200 characters)".into(),
        ));
    }
    // A name is printable text on both backends (PostgreSQL cannot hold a NUL).
    vouch_core::input::check_id(name).map_err(|e| bad("name", format!("the name {e}")))?;
    parse_cron(cron).map_err(|m| bad("cron", m))?;
    parse_tz(tz).map_err(|m| bad("tz", m))?;
    if grace_ms < 0 {
        return Err(bad("grace_ms", "must be zero or more milliseconds".into()));
    }
    let routine = check_routine(routine)?;
    Ok(Schedule {
        name: name.to_string(),
        cron: cron.to_string(),
        tz: tz.to_string(),
        routine,
        catch_up,
        overlap,
        grace_ms,
        created_ms,
    })
}

/// A routine as a schedule stores it: an object with a `prompt` (a string) and a `script`
/// (an array of turns, stored as the scripted model) or a `model` (default: the configured
/// OpenAI endpoint). The error's field is `routine`.
pub fn check_routine(mut routine: Value) -> Result<Value, ScheduleInvalid> {
    let bad = |message: &str| ScheduleInvalid {
        field: "routine",
        message: message.to_string(),
    };
    let Some(obj) = routine.as_object_mut() else {
        return Err(bad(
            "expected an object with `prompt` and `script` or `model`",
        ));
    };
    if obj.get("prompt").and_then(Value::as_str).is_none() {
        return Err(bad("`prompt` (a string) is required"));
    }
    if let Some(script) = obj.remove("script") {
        if !script.is_array() {
            return Err(bad("`script` must be an array of turns"));
        }
        obj.insert(
            "model".into(),
            serde_json::json!({"kind": "script", "turns": script}),
        );
    }
    if obj.get("model").is_none() {
        obj.insert("model".into(), serde_json::json!({"kind": "openai"}));
    }
    Ok(routine)
}

/// A routine (as [`check_routine`] answers it) run once because a person asked, outside any
/// schedule: an interactive run titled `title`, or the routine's prompt when none is given.
pub fn routine_run_spec(routine: &Value, title: Option<&str>) -> RunSpec {
    RunSpec {
        trigger: TriggerKind::Interactive,
        title: title
            .or_else(|| routine.get("prompt").and_then(Value::as_str))
            .unwrap_or_default()
            .to_string(),
        presence: routine
            .get("presence")
            .and_then(|p| serde_json::from_value::<Presence>(p.clone()).ok()),
        quiet: routine
            .get("quiet")
            .and_then(Value::as_bool)
            .unwrap_or(false),
        model: ModelSpec::from(routine.get("model").cloned().unwrap_or(Value::Null)),
        scope: None,
    }
}

pub fn routine_spec(s: &Schedule, slot_ms: i64) -> RunSpec {
    let r = &s.routine;
    RunSpec {
        trigger: TriggerKind::Scheduled,
        title: r
            .get("prompt")
            .and_then(Value::as_str)
            .unwrap_or(&s.name)
            .to_string(),
        presence: r
            .get("presence")
            .and_then(|p| serde_json::from_value::<Presence>(p.clone()).ok()),
        quiet: r.get("quiet").and_then(Value::as_bool).unwrap_or(false),
        model: ModelSpec::from(r.get("model").cloned().unwrap_or(Value::Null)),
        scope: Some(format!("{}@{slot_ms}", s.name)),
    }
}

/// A schedule's routine run now because the person asked (the console's "Run now"): the
/// routine's prompt, model and presence, but an interactive run outside the slots — it
/// consumes no slot and its ledger scope is its own, so the next slot still runs.
pub fn run_now_spec(s: &Schedule) -> RunSpec {
    RunSpec {
        trigger: TriggerKind::Interactive,
        scope: None,
        ..routine_spec(s, 0)
    }
}

impl Host {
    /// §12.3: a slot past its grace with no run. The slot is consumed by a run created
    /// directly as ended, outcome `missed`, through the same terminal path. With catch-up
    /// `latest` one late run starts for it (same ledger scope: the slot).
    pub fn missed_slot(
        &self,
        schedule: &str,
        slot_ms: i64,
        spec: &RunSpec,
        catch_up_latest: bool,
    ) -> HostResult<(String, Option<String>)> {
        let id = crate::host::new_id(self.clock.as_ref());
        self.create(&id, spec, None, Some((schedule, slot_ms)))?;
        self.end_missed(&id, None)?;
        if !catch_up_latest {
            return Ok((id, None));
        }
        let late = crate::host::new_id(self.clock.as_ref());
        let late_spec = RunSpec {
            title: format!("{} (late run for a missed slot)", spec.title),
            ..spec.clone()
        };
        self.create(&late, &late_spec, None, None)?;
        self.drive(&late)?;
        Ok((id, Some(late)))
    }

    /// §12.1.2: a slot that comes due while an earlier run of its schedule has not ended is
    /// consumed as `missed`, and its receipt says why in `why` — which run it waits on — never
    /// that the machine was off (issue 22 #8).
    pub fn skipped_slot(
        &self,
        schedule: &str,
        slot_ms: i64,
        spec: &RunSpec,
        why: &str,
    ) -> HostResult<String> {
        let id = crate::host::new_id(self.clock.as_ref());
        self.create(&id, spec, None, Some((schedule, slot_ms)))?;
        self.end_missed(&id, Some(why))?;
        Ok(id)
    }

    /// The newest run of a schedule's slots that has not ended, with its slot time.
    fn unended_slot_run(&self, schedule: &str) -> HostResult<Option<(i64, RunRecord)>> {
        for (at, id) in self.store.slots(schedule)?.into_iter().rev() {
            if let Some(r) = self.store.run(&id)? {
                if r.state != RunState::Ended {
                    return Ok(Some((at, r)));
                }
            }
        }
        Ok(None)
    }

    /// Why a slot was skipped, naming the run it waits on by its slot's local time and what
    /// that run waits for: "skipped: the 07:00 run waits for your approval (run …)".
    fn skip_reason(&self, run: &RunRecord, slot_ms: i64, tz: Tz) -> HostResult<String> {
        let local = chrono::DateTime::from_timestamp_millis(slot_ms)
            .map(|t| t.with_timezone(&tz).format("%H:%M").to_string())
            .unwrap_or_else(|| "previous".into());
        let waits = if run.state == RunState::Suspended {
            let cards = self.store.cards_for_run(&run.id)?;
            let open = cards.iter().filter(|c| c.state == CardState::Open);
            if open.clone().any(|c| c.delivery.is_none()) {
                "waits for your answer"
            } else if open.count() > 0 {
                "waits for your approval"
            } else {
                "waits to be continued"
            }
        } else {
            "is still running"
        };
        Ok(format!("skipped: the {local} run {waits} (run {})", run.id))
    }

    /// One scheduler pass at the clock's now: start due slots, end missed ones.
    pub fn tick(&self) -> HostResult<TickReport> {
        let now = self.clock.now_ms();
        let mut report = TickReport::default();
        for s in self.store.schedules()? {
            self.tick_schedule(&s, now, &mut report)?;
        }
        self.dispatch()?;
        Ok(report)
    }

    /// One schedule's slots since the last it consumed: each slot past its grace is missed
    /// (the newest caught up under `latest`), each slot due now is started.
    fn tick_schedule(&self, s: &Schedule, now: i64, report: &mut TickReport) -> HostResult<()> {
        // Checked when the schedule was added: a stored one that no longer parses is the
        // store's inconsistency, not the ticking caller's input.
        let stored = |m: String| {
            HostError::Internal(format!(
                "stored schedule `{}`: {m}; remove it and add it again",
                s.name
            ))
        };
        let cron = parse_cron(&s.cron).map_err(stored)?;
        let tz = parse_tz(&s.tz).map_err(stored)?;
        let consumed: Vec<(i64, String)> = self.store.slots(&s.name)?;
        let after = consumed
            .last()
            .map(|(t, _)| *t)
            .unwrap_or(s.created_ms)
            .max(s.created_ms);
        let expected = slots_between(&cron, tz, after, now, SLOTS_PER_TICK_MAX);
        let pending: Vec<i64> = expected
            .into_iter()
            .filter(|t| !consumed.iter().any(|(c, _)| c == t))
            .collect();
        let (late, due): (Vec<i64>, Vec<i64>) =
            pending.into_iter().partition(|t| now - t > s.grace_ms);
        let newest_late = late.last().copied();
        for slot in &late {
            let latest =
                s.catch_up == CatchUp::Latest && Some(*slot) == newest_late && due.is_empty();
            match self.missed_slot(&s.name, *slot, &routine_spec(s, *slot), latest) {
                Ok((id, late_run)) => {
                    report.missed.push((s.name.clone(), *slot, id));
                    if let Some(l) = late_run {
                        report.late.push((s.name.clone(), *slot, l));
                    }
                }
                Err(HostError::SlotTaken(_)) => report.taken += 1,
                Err(e) => return Err(e),
            }
        }
        for slot in due {
            self.due_slot(s, slot, tz, report)?;
        }
        Ok(())
    }

    /// A slot come due: its run starts, unless an earlier run of an overlap-skip schedule has
    /// not ended — then the slot is consumed as skipped, naming the run it waits on.
    fn due_slot(&self, s: &Schedule, slot: i64, tz: Tz, report: &mut TickReport) -> HostResult<()> {
        let active = self.unended_slot_run(&s.name)?;
        let spec = routine_spec(s, slot);
        if let (Some((at, run)), Overlap::Skip) = (active, s.overlap) {
            // The previous run is still going: this slot does not start (§12.1.2), and
            // its receipt names the run it waits on.
            let why = self.skip_reason(&run, at, tz)?;
            match self.skipped_slot(
                &s.name,
                slot,
                &RunSpec {
                    title: format!("{} ({why})", spec.title),
                    ..spec
                },
                &why,
            ) {
                Ok(id) => report.missed.push((s.name.clone(), slot, id)),
                Err(HostError::SlotTaken(_)) => report.taken += 1,
                Err(e) => return Err(e),
            }
            return Ok(());
        }
        let id = crate::host::new_id(self.clock.as_ref());
        match self.create(&id, &spec, None, Some((&s.name, slot))) {
            Ok(_) => {}
            Err(HostError::SlotTaken(_)) => {
                report.taken += 1;
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        self.drive(&id)?;
        report.started.push((s.name.clone(), slot, id));
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_cron_expressions_are_refused_or_bounded_never_a_panic() {
        let start = std::time::Instant::now();
        for expr in [
            "*/0 * * * *",
            "0 0 31 2 *",
            "59-0 * * * *",
            "0 0 * * 8",
            "0 0 L * *",
            "0 0 * * 5#6",
            "99999999999999999999 * * * *",
            "€ * * * *",
            "* * * * * * * *",
            "",
            "\u{0}",
            "0 0 29 2 1",
        ] {
            if let Ok(c) = parse_cron(expr) {
                let _ = slots_between(&c, Tz::UTC, 0, 400 * 86_400_000, 10);
            }
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
    }

    fn ms(s: &str) -> i64 {
        chrono::DateTime::parse_from_rfc3339(s)
            .unwrap()
            .timestamp_millis()
    }

    #[test]
    fn daily_slots_in_a_time_zone() {
        let c = parse_cron("0 7 * * *").unwrap();
        let tz = parse_tz("Europe/Berlin").unwrap();
        let v = slots_between(
            &c,
            tz,
            ms("2026-12-01T00:00:00Z"),
            ms("2026-12-03T23:00:00Z"),
            10,
        );
        assert_eq!(
            v,
            vec![
                ms("2026-12-01T06:00:00Z"),
                ms("2026-12-02T06:00:00Z"),
                ms("2026-12-03T06:00:00Z")
            ]
        );
    }

    #[test]
    fn spring_forward_gap_runs_once_after_the_gap() {
        // 2026-03-29 in Berlin: 02:00 → 03:00. A 02:30 slot runs at 03:00 local (01:00Z).
        let c = parse_cron("30 2 * * *").unwrap();
        let tz = parse_tz("Europe/Berlin").unwrap();
        let v = slots_between(
            &c,
            tz,
            ms("2026-03-28T12:00:00Z"),
            ms("2026-03-30T12:00:00Z"),
            10,
        );
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(v[0], ms("2026-03-29T01:00:00Z"));
        assert_eq!(v[1], ms("2026-03-30T00:30:00Z"));
    }

    #[test]
    fn fall_back_repeated_hour_runs_once() {
        // 2026-10-25 in Berlin: 03:00 → 02:00. 02:30 happens twice; the slot runs once.
        let c = parse_cron("30 2 * * *").unwrap();
        let tz = parse_tz("Europe/Berlin").unwrap();
        let v = slots_between(
            &c,
            tz,
            ms("2026-10-24T12:00:00Z"),
            ms("2026-10-26T12:00:00Z"),
            10,
        );
        assert_eq!(
            v,
            vec![ms("2026-10-25T00:30:00Z"), ms("2026-10-26T01:30:00Z")],
            "{v:?}"
        );
    }

    #[test]
    fn bad_input_names_what_is_wrong() {
        assert!(parse_cron("61 * * * *").unwrap_err().contains("61 * * * *"));
        assert!(parse_tz("Mars/Olympus")
            .unwrap_err()
            .contains("Mars/Olympus"));
    }
}
