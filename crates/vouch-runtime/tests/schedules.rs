#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Schedules and attention end to end on a real SQLite store with an injected clock:
//! slots that run, crash, never run, overlap; notifications that go out exactly once.

use serde_json::json;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use vouch_adapters::folder::FolderProvider;
use vouch_core::{CatchUp, DestinationKind, Outcome, Overlap, RunState};
use vouch_runtime::capability::{CapabilityRegistry, PatternCapabilities};
use vouch_runtime::clock::{Clock, ManualClock};
use vouch_runtime::crash::{CrashMode, CrashPlan};
use vouch_runtime::host::{HostParts, Notifier};
use vouch_runtime::provider::Provider;
use vouch_runtime::{Host, HostError};
use vouch_store::{OutboxRow, Schedule, Store};
use vouch_store_sqlite::SqliteStore;

mod common;
use common::FakeWorld;

#[derive(Default)]
struct Count(Mutex<Vec<OutboxRow>>);
impl Notifier for Count {
    fn notify(&self, row: &OutboxRow) -> Result<(), vouch_runtime::host::NotifyError> {
        self.0.lock().unwrap().push(row.clone());
        Ok(())
    }
}

struct World {
    dir: tempfile::TempDir,
    clock: ManualClock,
    sim: Arc<FakeWorld>,
    notes: Arc<Count>,
}

const DAY: i64 = 86_400_000;
/// 2026-12-01T00:00:00Z
const T0: i64 = 1_796_083_200_000;
const SEVEN: i64 = 7 * 3_600_000;

impl World {
    fn new(sim: Arc<FakeWorld>) -> World {
        World {
            dir: tempfile::tempdir().unwrap(),
            clock: ManualClock::new(T0, 1),
            sim,
            notes: Arc::new(Count::default()),
        }
    }
    fn host(&self, crash: Option<&str>) -> Host {
        let caps = Arc::new(PatternCapabilities::default());
        self.host_with(crash, caps, self.sim.providers())
    }
    /// A host whose capabilities and providers the test sets.
    fn host_with(
        &self,
        crash: Option<&str>,
        caps: Arc<dyn CapabilityRegistry>,
        providers: BTreeMap<DestinationKind, Arc<dyn Provider>>,
    ) -> Host {
        let store = SqliteStore::open(&self.dir.path().join("vouch.db")).unwrap();
        let parts = HostParts {
            caps,
            providers,
            notifier: self.notes.clone(),
            ..vouch_adapters::local::parts(self.dir.path())
        };
        Host::new(
            Arc::new(store),
            Arc::new(self.clock.clone()),
            format!("test-{}", self.clock.now_ms()),
            self.dir.path().join("drafts"),
            parts,
        )
        .with_crash(crash.and_then(|c| CrashPlan::parse(c, CrashMode::Simulate)))
    }
    /// The test's own handle on the store its hosts share, for what no host offers.
    fn store(&self) -> SqliteStore {
        SqliteStore::open(&self.dir.path().join("vouch.db")).unwrap()
    }
    fn schedule(
        &self,
        host: &Host,
        name: &str,
        catch_up: CatchUp,
        overlap: Overlap,
        quiet: bool,
        turns: serde_json::Value,
    ) {
        host.put_schedule(&Schedule {
                name: name.into(),
                cron: "0 7 * * *".into(),
                tz: "UTC".into(),
                routine: json!({"prompt": "7am brief", "quiet": quiet, "model": {"kind": "script", "turns": turns}}),
                catch_up,
                overlap,
                grace_ms: 15 * 60_000,
                created_ms: T0,
            })
            .unwrap();
    }
    fn notified(&self, run: &str) -> usize {
        self.notes
            .0
            .lock()
            .unwrap()
            .iter()
            .filter(|r| r.run_id == run)
            .count()
    }
}

fn brief() -> serde_json::Value {
    json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Briefs/today.md"}}]}},
        {"deliver": "d1", "payload": {"text": "# Brief"}}
    ])
}

#[test]
fn a_slot_runs_once_and_is_never_replayed() {
    let w = World::new(FakeWorld::accepting());
    let host = w.host(None);
    w.schedule(&host, "brief", CatchUp::Skip, Overlap::Skip, false, brief());
    w.clock.set(T0 + SEVEN + 5_000);
    let r = host.tick().unwrap();
    assert_eq!(r.started.len(), 1);
    let run = host.run_record(&r.started[0].2).unwrap().unwrap();
    assert_eq!(run.outcome, Some(Outcome::Succeeded));
    assert_eq!(host.tick().unwrap(), Default::default());
    drop(host);
    let host = w.host(None);
    assert_eq!(host.tick().unwrap(), Default::default());
    assert_eq!(w.sim.executions("d1"), 1);
    // A reversible save that succeeded is routine: inbox, no interruption.
    assert_eq!(w.notified(&run.id), 0);
}

#[test]
fn a_crash_mid_run_leaves_an_interrupted_receipt_and_no_replay() {
    let w = World::new(FakeWorld::accepting());
    let host = w.host(Some("attempt_started:d1"));
    w.schedule(&host, "brief", CatchUp::Skip, Overlap::Skip, false, brief());
    w.clock.set(T0 + SEVEN + 1_000);
    assert!(matches!(host.tick(), Err(HostError::Crashed(_))));
    drop(host);
    w.clock.advance(60_000);
    let host = w.host(None);
    let ended = host.boot().unwrap();
    assert_eq!(ended.len(), 1);
    let run = host.run_record(&ended[0]).unwrap().unwrap();
    assert_eq!(run.state, RunState::Ended);
    assert_eq!(run.ended_by, Some(vouch_core::EndedBy::Boot));
    assert!(host
        .receipt(&run.id)
        .unwrap()
        .unwrap()
        .contains("interrupted"));
    assert_eq!(
        host.tick().unwrap(),
        Default::default(),
        "the consumed slot is not replayed"
    );
    assert_eq!(w.store().slots("brief").unwrap().len(), 1);
    assert_eq!(
        w.notified(&run.id),
        1,
        "a failed scheduled run notifies the person"
    );
}

#[test]
fn a_machine_off_across_three_slots_reports_three_missed() {
    let w = World::new(FakeWorld::accepting());
    let host = w.host(None);
    w.schedule(&host, "brief", CatchUp::Skip, Overlap::Skip, false, brief());
    w.clock.set(T0 + 2 * DAY + SEVEN + 3 * 3_600_000);
    let r = host.tick().unwrap();
    assert_eq!(r.missed.len(), 3);
    assert!(r.started.is_empty() && r.late.is_empty());
    for (_, _, run) in &r.missed {
        let rec = host.run_record(run).unwrap().unwrap();
        assert_eq!(rec.outcome, Some(Outcome::Missed));
        assert_eq!(rec.ended_by, Some(vouch_core::EndedBy::Schedule));
        assert!(host.receipt(run).unwrap().unwrap().contains("Missed"));
        assert_eq!(w.notified(run), 1);
    }
    assert_eq!(w.sim.executions("d1"), 0);
}

#[test]
fn catch_up_latest_starts_one_late_run_for_the_newest_missed_slot() {
    let w = World::new(FakeWorld::accepting());
    let host = w.host(None);
    w.schedule(
        &host,
        "brief",
        CatchUp::Latest,
        Overlap::Skip,
        false,
        brief(),
    );
    w.clock.set(T0 + 2 * DAY + SEVEN + 3 * 3_600_000);
    let r = host.tick().unwrap();
    assert_eq!(r.missed.len(), 3);
    assert_eq!(r.late.len(), 1);
    assert_eq!(
        r.late[0].1,
        T0 + 2 * DAY + SEVEN,
        "the late run is for the newest slot"
    );
    let late = host.run_record(&r.late[0].2).unwrap().unwrap();
    assert_eq!(late.outcome, Some(Outcome::Succeeded));
    assert_eq!(w.sim.executions("d1"), 1);
    assert_eq!(host.tick().unwrap(), Default::default());
}

#[test]
fn overlap_skip_does_not_start_a_slot_while_the_previous_run_waits() {
    let w = World::new(FakeWorld::accepting());
    let host = w.host(None);
    w.schedule(&host, "mail", CatchUp::Skip, Overlap::Skip, false, json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "email", "address": "me@example.com"}}]}},
        {"deliver": "d1", "payload": {"text": "hi"}}
    ]));
    w.clock.set(T0 + SEVEN + 1_000);
    let r = host.tick().unwrap();
    assert_eq!(r.started.len(), 1);
    assert_eq!(
        host.run_record(&r.started[0].2).unwrap().unwrap().state,
        RunState::Suspended
    );
    w.clock.set(T0 + DAY + SEVEN + 1_000);
    let r = host.tick().unwrap();
    assert!(r.started.is_empty());
    assert_eq!(
        r.missed.len(),
        1,
        "the overlapping slot is skipped and reported"
    );
    assert_eq!(w.sim.executions("d1"), 0);
}

#[test]
fn a_crash_between_terminal_and_dispatch_notifies_exactly_once() {
    let w = World::new(FakeWorld::refusing());
    let host = w.host(Some("terminal"));
    w.schedule(&host, "brief", CatchUp::Skip, Overlap::Skip, false, brief());
    w.clock.set(T0 + SEVEN + 1_000);
    assert!(matches!(host.tick(), Err(HostError::Crashed(_))));
    let run = w.store().slots("brief").unwrap()[0].1.clone();
    assert_eq!(
        host.run_record(&run).unwrap().unwrap().state,
        RunState::Ended
    );
    assert_eq!(w.notified(&run), 0);
    drop(host);
    for _ in 0..3 {
        let host = w.host(None);
        host.boot().unwrap();
        host.tick().unwrap();
    }
    assert_eq!(w.notified(&run), 1);
}

#[test]
fn quiet_never_lowers_a_failure() {
    let w = World::new(FakeWorld::refusing());
    let host = w.host(None);
    w.schedule(
        &host,
        "quiet-fail",
        CatchUp::Skip,
        Overlap::Skip,
        true,
        brief(),
    );
    w.clock.set(T0 + SEVEN + 1_000);
    let r = host.tick().unwrap();
    let run = &r.started[0].2;
    let term = host.events(run).unwrap().last().unwrap().body.clone();
    assert_eq!(term["significance"], "failure");
    assert_eq!(term["route"], "notify");
    assert_eq!(w.notified(run), 1);
}

#[test]
fn quiet_caps_notable_news_at_the_inbox() {
    let w = World::new(FakeWorld::accepting());
    // Trusted automation: an irreversible verified send in an autonomous run is notable.
    let caps = Arc::new(PatternCapabilities {
        automation: vec!["send:webhook:*".into()],
        ..Default::default()
    });
    let host = w.host_with(None, caps, w.sim.providers());
    w.schedule(&host, "quiet-ok", CatchUp::Skip, Overlap::Skip, true, json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": "https://h"}}]}},
        {"deliver": "d1", "payload": {"text": "x"}}
    ]));
    w.clock.set(T0 + SEVEN + 1_000);
    let r = host.tick().unwrap();
    let run = &r.started[0].2;
    let term = host.events(run).unwrap().last().unwrap().body.clone();
    assert_eq!(term["significance"], "notable");
    assert_eq!(term["route"], "inbox");
    assert_eq!(w.notified(run), 0);
    assert_eq!(w.sim.executions("d1"), 1);
}

#[test]
fn two_hosts_on_one_home_never_both_run_a_slot() {
    let w = World::new(FakeWorld::accepting());
    let setup = w.host(None);
    w.schedule(
        &setup,
        "brief",
        CatchUp::Skip,
        Overlap::Skip,
        false,
        brief(),
    );
    drop(setup);
    w.clock.set(T0 + SEVEN + 1_000);
    let hosts: Vec<Host> = (0..4).map(|_| w.host(None)).collect();
    std::thread::scope(|s| {
        for h in &hosts {
            s.spawn(move || {
                for _ in 0..5 {
                    let _ = h.tick();
                }
            });
        }
    });
    let host = w.host(None);
    assert_eq!(w.store().slots("brief").unwrap().len(), 1);
    assert_eq!(host.runs(100).unwrap().len(), 1);
    assert_eq!(w.sim.executions("d1"), 1);
}

/// Issue 22 #8: a slot skipped by the overlap policy read "the machine was off". Its receipt
/// now says it was skipped and names the run it waits on, by that run's slot time.
#[test]
fn an_overlap_skip_names_the_run_it_waits_on() {
    let w = World::new(FakeWorld::accepting());
    let host = w.host(None);
    w.schedule(&host, "mail", CatchUp::Skip, Overlap::Skip, false, json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "email", "address": "me@example.com"}}]}},
        {"deliver": "d1", "payload": {"text": "hi"}}
    ]));
    w.clock.set(T0 + SEVEN + 1_000);
    let first = host.tick().unwrap().started[0].2.clone();
    w.clock.set(T0 + DAY + SEVEN + 1_000);
    let r = host.tick().unwrap();
    let skipped = &r.missed[0].2;
    let rec = host.run_record(skipped).unwrap().unwrap();
    assert_eq!(rec.outcome, Some(Outcome::Missed));
    let receipt = host.receipt(skipped).unwrap().unwrap();
    assert!(
        receipt.contains(&format!(
            "skipped: the 07:00 run waits for your approval (run {first})"
        )),
        "{receipt}"
    );
    assert!(!receipt.contains("machine was off"), "{receipt}");
    assert!(
        rec.title.contains("skipped: the 07:00 run"),
        "{}",
        rec.title
    );
}

/// Issue 22 #8: saving identical bytes over a file is no change — verified by reading it, with
/// no approval — so a routine that rewrites the same file does not stall its schedule.
#[test]
fn saving_identical_bytes_is_no_change_and_never_stalls_a_schedule() {
    let w = World::new(FakeWorld::accepting());
    let files = w.dir.path().join("files");
    let mut providers = w.sim.providers();
    providers.insert(
        DestinationKind::Folder,
        Arc::new(FolderProvider::new(&files)),
    );
    let host = w.host_with(None, Arc::new(PatternCapabilities::default()), providers);
    w.schedule(&host, "brief", CatchUp::Skip, Overlap::Skip, false, json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "brief.md"}}]}},
        {"deliver": "d1", "payload": {"text": "the same brief"}}
    ]));
    for day in 0..3 {
        w.clock.set(T0 + day * DAY + SEVEN + 1_000);
        let r = host.tick().unwrap();
        assert_eq!(r.started.len(), 1, "day {day}: {r:?}");
        let rec = host.run_record(&r.started[0].2).unwrap().unwrap();
        assert_eq!(
            rec.state,
            RunState::Ended,
            "day {day}: no approval is asked"
        );
        assert_eq!(rec.outcome, Some(Outcome::Succeeded), "day {day}");
        assert!(host.open_cards().unwrap().is_empty());
    }
    assert_eq!(
        std::fs::read_to_string(files.join("brief.md")).unwrap(),
        "the same brief"
    );
    // Different bytes over the file are still an overwrite: the person is asked.
    std::fs::write(files.join("brief.md"), "yesterday's brief").unwrap();
    w.clock.set(T0 + 3 * DAY + SEVEN + 1_000);
    let r = host.tick().unwrap();
    let rec = host.run_record(&r.started[0].2).unwrap().unwrap();
    assert_eq!(rec.state, RunState::Suspended);
}
