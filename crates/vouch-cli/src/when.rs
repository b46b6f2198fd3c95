//! Times for people: a schedule's slots in the schedule's own zone, never epoch milliseconds.

use chrono::TimeZone as _;

/// `2026-12-03 07:00 Europe/Berlin` for a slot of a schedule in zone `tz`; an unknown zone
/// falls back to UTC (the schedule was validated when it was added).
pub fn slot_time(ms: i64, tz: &str) -> String {
    let zone: chrono_tz::Tz = tz.parse().unwrap_or(chrono_tz::UTC);
    match zone.timestamp_millis_opt(ms).single() {
        Some(t) => format!("{} {}", t.format("%Y-%m-%d %H:%M"), zone.name()),
        None => format!("{ms} ms"),
    }
}

/// An instant in this machine's local zone (`TZ`), to the minute, for list columns.
pub fn local_time(ms: i64) -> String {
    match chrono::Local.timestamp_millis_opt(ms).single() {
        Some(t) => t.format("%Y-%m-%d %H:%M").to_string(),
        None => format!("{ms} ms"),
    }
}

/// The same instant for programs: RFC 3339 with the zone's offset.
pub fn slot_rfc3339(ms: i64, tz: &str) -> String {
    let zone: chrono_tz::Tz = tz.parse().unwrap_or(chrono_tz::UTC);
    zone.timestamp_millis_opt(ms)
        .single()
        .map(|t| t.to_rfc3339())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_print_in_the_schedules_zone() {
        // 2026-12-03T06:00:00Z is 07:00 in Berlin (CET, UTC+1).
        let ms = 1_764_741_600_000;
        assert_eq!(
            slot_time(ms, "Europe/Berlin"),
            "2025-12-03 07:00 Europe/Berlin"
        );
        assert_eq!(
            slot_rfc3339(ms, "Europe/Berlin"),
            "2025-12-03T07:00:00+01:00"
        );
        assert_eq!(slot_time(ms, "UTC"), "2025-12-03 06:00 UTC");
    }
}
