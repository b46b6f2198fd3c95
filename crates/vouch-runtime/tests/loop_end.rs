#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 11 #2 and "Against real model servers": every way a loop ends without the work is
//! named — before a manifest the run is `failed` (contract §3.4.3) and reaches the person;
//! after one, the items the loop never reached say why it stopped (§3.4.4). A real SQLite
//! store, the scripted model, a counting notifier.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use vouch_adapters::folder::FolderProvider;
use vouch_core::{DestinationKind, Outcome, Presence, TriggerKind};
use vouch_runtime::capability::PatternCapabilities;
use vouch_runtime::clock::ManualClock;
use vouch_runtime::host::{HostParts, Notifier, NotifyError, RunEnd, RunSpec};
use vouch_runtime::provider::Provider;
use vouch_runtime::{Host, Limits};
use vouch_store::{OutboxRow, Store};
use vouch_store_sqlite::SqliteStore;

#[allow(dead_code)] // each test file uses part of the fake world
mod common;

#[derive(Default)]
struct Count(Mutex<Vec<OutboxRow>>);
impl Notifier for Count {
    fn notify(&self, row: &OutboxRow) -> Result<(), NotifyError> {
        self.0.lock().unwrap().push(row.clone());
        Ok(())
    }
}

const NOW_MS: i64 = 1_796_083_200_000;

fn host(
    dir: &std::path::Path,
    notes: Arc<dyn Notifier>,
    limits: Limits,
    world: Arc<common::FakeWorld>,
) -> Host {
    let store = Arc::new(SqliteStore::open(&dir.join("vouch.db")).unwrap());
    let clock = ManualClock::new(NOW_MS, 1);
    host_on(store, clock, dir, notes, world.providers()).with_limits(limits)
}

/// A host over the test's own `store` and `clock`, with the given providers.
fn host_on(
    store: Arc<dyn Store>,
    clock: ManualClock,
    dir: &std::path::Path,
    notes: Arc<dyn Notifier>,
    providers: BTreeMap<DestinationKind, Arc<dyn Provider>>,
) -> Host {
    let parts = HostParts {
        caps: Arc::new(PatternCapabilities::default()),
        providers,
        notifier: notes,
        ..vouch_adapters::local::parts(dir)
    };
    Host::new(store, Arc::new(clock), "test", dir.join("drafts"), parts)
}

fn event_run(h: &Host, turns: Value) -> (String, Outcome, String) {
    let (id, end) = h
        .start(&RunSpec {
            trigger: TriggerKind::Event,
            title: "nightly export".into(),
            presence: Some(Presence::Away),
            quiet: true,
            model: json!({"kind": "script", "turns": turns}).into(),
            scope: None,
        })
        .unwrap();
    let RunEnd::Ended { outcome } = end else {
        panic!("the run did not end: {end:?}");
    };
    let receipt = h.receipt(&id).unwrap().unwrap();
    (id, outcome, receipt)
}

#[test]
fn an_autonomous_run_that_never_declared_fails_and_reaches_the_person_even_when_quiet() {
    let dir = tempfile::tempdir().unwrap();
    let notes = Arc::new(Count::default());
    let h = host(
        dir.path(),
        notes.clone(),
        Limits::default(),
        common::FakeWorld::accepting(),
    );
    let (id, outcome, receipt) = event_run(&h, json!([{"final": "All done, exported."}]));
    assert_eq!(outcome, Outcome::Failed, "{receipt}");
    assert!(
        receipt.contains("Failed — the run declared nothing and delivered nothing"),
        "{receipt}"
    );
    assert!(
        receipt.contains("the model ended without declaring anything to deliver"),
        "{receipt}"
    );
    let sent = notes.0.lock().unwrap();
    assert_eq!(
        sent.len(),
        1,
        "a failure reaches the person, quiet or not (I7)"
    );
    assert_eq!(sent[0].run_id, id);
}

#[test]
fn the_turn_budget_is_named_on_the_receipt_and_on_each_unreached_item() {
    let dir = tempfile::tempdir().unwrap();
    let notes = Arc::new(Count::default());
    let limits = Limits {
        turns_max: 3,
        ..Limits::default()
    };
    let world = common::FakeWorld::accepting();
    let h = host(dir.path(), notes, limits, world.clone());
    let mut turns = vec![
        json!({"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "export.csv"}}]}}),
    ];
    for _ in 0..5 {
        turns.push(json!({"tool": "search_notes", "args": {"q": "x"}}));
    }
    turns.push(json!({"deliver": "d1", "payload": {"text": "a,b"}}));
    let (id, outcome, receipt) = event_run(&h, json!(turns));
    assert_eq!(outcome, Outcome::Failed, "{receipt}");
    assert!(
        receipt.contains("Why it stopped: the model used its whole turn budget (3 turns)"),
        "{receipt}"
    );
    assert!(
        receipt.contains(
            "Not done: the run stopped before it was attempted: the model used its whole turn budget"
        ),
        "{receipt}"
    );
    let journal = h.events(&id).unwrap();
    let end = journal
        .iter()
        .find(|e| e.kind == vouch_store::EventKind::LoopEnded)
        .expect("loop_ended is journaled");
    assert_eq!(end.body["cause"], "turn_budget");
    assert_eq!(
        world.executions("d1"),
        0,
        "the loop stopped before the delivery"
    );
}

/// A route whose answer the test sets: every call is counted.
#[derive(Default)]
struct Route {
    answer: Mutex<Option<NotifyError>>,
    calls: Mutex<usize>,
}
impl Notifier for Route {
    fn notify(&self, _: &OutboxRow) -> Result<(), NotifyError> {
        *self.calls.lock().unwrap() += 1;
        match self.answer.lock().unwrap().clone() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[test]
fn the_dispatcher_retries_what_could_not_go_and_stops_at_a_misconfigured_route_losing_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let route = Arc::new(Route::default());
    *route.answer.lock().unwrap() = Some(NotifyError::Misconfigured("push URL wrong".into()));
    let h = host(
        dir.path(),
        route.clone(),
        Limits::default(),
        common::FakeWorld::accepting(),
    );
    let never_declares = json!([{"final": "All done."}]);
    event_run(&h, never_declares.clone());
    event_run(&h, never_declares);
    let pending = || h.outbox_pending().unwrap().len();
    // Each run's end dispatched once; the second pass stopped at its first row.
    assert_eq!(*route.calls.lock().unwrap(), 2);
    assert_eq!(pending(), 2, "a failure is never dropped");

    // A route that cannot take it now: every row is tried, each stays queued.
    *route.answer.lock().unwrap() = Some(NotifyError::Retry("no answer".into()));
    assert_eq!(h.dispatch().unwrap(), 0);
    assert_eq!(*route.calls.lock().unwrap(), 4);
    assert_eq!(pending(), 2);

    // Fixed: both go, once.
    *route.answer.lock().unwrap() = None;
    assert_eq!(h.dispatch().unwrap(), 2);
    assert_eq!(pending(), 0);
    assert_eq!(h.dispatch().unwrap(), 0);
    assert_eq!(*route.calls.lock().unwrap(), 6);
}

/// Liveness as the test says it is: owners it names are running (`true`) or have exited
/// (`false`); any other owner is one this machine cannot tell about.
struct Owners(Vec<(&'static str, bool)>);

impl vouch_runtime::host::Liveness for Owners {
    fn of(&self, owner: &str) -> Option<bool> {
        self.0.iter().find(|(o, _)| *o == owner).map(|(_, a)| *a)
    }
}

/// §9.2.5, with liveness injected: start-up ends a run whose owner has exited even while its
/// lease has time left, and leaves alone a run whose lease lapsed while its owner still runs
/// (a slow call outlived the lease) — decided by what the host is told, not by which
/// processes happen to exist on the test machine.
#[test]
fn start_up_reconciles_by_the_owner_it_is_told_is_gone_not_by_the_lease_alone() {
    use vouch_store::{NewRun, RunLease};
    let dir = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&dir.path().join("vouch.db")).unwrap());
    let host = |owners: Owners| {
        let world = Arc::new(common::FakeWorld::default());
        let notes = Arc::new(Count::default());
        let clock = ManualClock::new(NOW_MS, 1);
        host_on(store.clone(), clock, dir.path(), notes, world.providers())
            .with_liveness(Arc::new(owners))
    };
    let h = host(Owners(vec![("gone:1", false), ("busy:2", true)]));
    let now = NOW_MS;
    let run = |id: &str, owner: &str, until_ms: i64| NewRun {
        state: vouch_core::RunState::Running,
        id: id.into(),
        trigger: TriggerKind::Interactive,
        title: format!("run {id}"),
        chain_root: id.into(),
        parent: None,
        scope: id.into(),
        spec: json!({"model": {"kind": "script", "turns": []}}),
        created_ms: now - 60_000,
        lease: Some(RunLease {
            owner: owner.into(),
            until_ms,
        }),
    };
    // Lease with an hour left, owner exited.
    store
        .create_run(&run("dead-owner", "gone:1", now + 3_600_000))
        .unwrap();
    // Lease lapsed a minute ago, owner still running.
    store
        .create_run(&run("slow-owner", "busy:2", now - 60_000))
        .unwrap();
    let ended = h.boot().unwrap();
    assert_eq!(
        ended,
        vec!["dead-owner".to_string()],
        "only the run whose owner is gone"
    );
    let state = |id: &str| store.run(id).unwrap().unwrap().state;
    assert_eq!(state("dead-owner"), vouch_core::RunState::Ended);
    assert_eq!(state("slow-owner"), vouch_core::RunState::Running);
    // Told the slow owner exited too, the next start-up takes it.
    let h = host(Owners(vec![("busy:2", false)]));
    assert_eq!(h.boot().unwrap(), vec!["slow-owner".to_string()]);
    assert_eq!(state("slow-owner"), vouch_core::RunState::Ended);
}

/// Issue 10: start-up reconciles many orphans at once (a bounded pool, group commits shared)
/// with the outcome of one at a time. 50 runs, each interrupted right after the first of its
/// two saves by an owner that has exited, over the host's real write path and folder
/// provider; one start-up ends every one of them exactly once, in the order they were
/// created, with one terminal record each, no save repeated and no notification doubled; a
/// second start-up finds nothing left.
#[test]
fn start_up_ends_fifty_orphans_each_exactly_once_with_their_files_as_left() {
    use vouch_core::{EndedBy, RunState};
    use vouch_runtime::crash::{CrashMode, CrashPlan};
    use vouch_runtime::durable::Durable;
    use vouch_store::EventKind;
    const RUNS: usize = 50;
    let dir = tempfile::tempdir().unwrap();
    let files = dir.path().join("files");
    let clock = ManualClock::new(1_796_083_200_000, 1);
    let notes = Arc::new(Count::default());
    // The host's real write path over the store on disk, and the test's handle on it.
    let host_on_disk = || {
        let sqlite = Arc::new(SqliteStore::open(&dir.path().join("vouch.db")).unwrap());
        let store: Arc<dyn Store> = Arc::new(Durable::new(sqlite));
        let mut providers = Arc::new(common::FakeWorld::default()).providers();
        providers.insert(
            DestinationKind::Folder,
            Arc::new(FolderProvider::new(&files)),
        );
        let h = host_on(
            store.clone(),
            clock.clone(),
            dir.path(),
            notes.clone(),
            providers,
        )
        .with_liveness(Arc::new(Owners(vec![("gone:1", false)])));
        (h, store)
    };
    let mut ids = vec![];
    {
        let (h, store) = host_on_disk();
        let mut h = h.with_owner("gone:1");
        for i in 0..RUNS {
            h.arm_crash(Some(CrashPlan::new(
                "evidence",
                Some("d1"),
                1,
                CrashMode::Simulate,
            )));
            let spec = RunSpec {
                trigger: TriggerKind::Interactive,
                title: format!("two saves {i}"),
                presence: Some(Presence::Away),
                quiet: false,
                model: json!({"kind": "script", "turns": [
                    {"declare": {"deliveries": [
                        {"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": format!("rec/{i}-a.md")}},
                        {"id": "d2", "verb": "save", "destination": {"kind": "folder", "address": format!("rec/{i}-b.md")}}
                    ]}},
                    {"deliver": "d1", "payload": {"text": "first\n"}},
                    {"deliver": "d2", "payload": {"text": "second\n"}},
                    {"final": "Saved both."}
                ]}).into(),
                scope: None,
            };
            let before = store.open_runs().unwrap().len();
            assert!(matches!(
                h.start(&spec),
                Err(vouch_runtime::HostError::Crashed(_))
            ));
            let open = store.open_runs().unwrap();
            assert_eq!(open.len(), before + 1);
            ids.push(open.last().unwrap().id.clone());
        }
    }
    // The process is gone; a new one over the reopened store starts up.
    let (h, _) = host_on_disk();
    let ended = h.boot().unwrap();
    assert_eq!(
        ended, ids,
        "every orphan ended, in the order they were created"
    );
    for (i, id) in ids.iter().enumerate() {
        let run = h.run_record(id).unwrap().unwrap();
        assert_eq!(run.state, RunState::Ended);
        assert_eq!(run.ended_by, Some(EndedBy::Boot));
        assert_eq!(run.outcome, Some(Outcome::Partial), "run {i}");
        assert_eq!(
            run.owner, None,
            "the terminal transaction lets the lease go"
        );
        let journal = h.events(id).unwrap();
        let count = |kind: EventKind, d: Option<&str>| {
            journal
                .iter()
                .filter(|e| e.kind == kind && (d.is_none() || e.delivery.as_deref() == d))
                .count()
        };
        assert_eq!(count(EventKind::Terminal, None), 1, "run {i}");
        assert_eq!(count(EventKind::AttemptStarted, Some("d1")), 1, "run {i}");
        assert_eq!(count(EventKind::AttemptStarted, Some("d2")), 0, "run {i}");
        assert!(h.receipt(id).unwrap().is_some(), "run {i}");
        assert_eq!(
            std::fs::read_to_string(files.join(format!("rec/{i}-a.md"))).unwrap(),
            "first\n"
        );
        assert!(!files.join(format!("rec/{i}-b.md")).exists(), "run {i}");
    }
    assert!(h.verify_store().unwrap().breaks.is_empty());
    // Each ended run that notifies did so once, and nothing waits in the outbox.
    let sent: Vec<String> = notes
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.run_id.clone())
        .collect();
    let mut unique = sent.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), sent.len(), "no notification sent twice");
    assert_eq!(sent.len(), RUNS, "away: every partial run notifies");
    assert!(h.outbox_pending().unwrap().is_empty());
    assert!(h.boot().unwrap().is_empty(), "nothing is ended twice");
}

/// §11.4: runs ending on several threads at once each dispatch the outbox; every row is still
/// delivered once, never by two passes that read it pending at the same moment.
#[test]
fn runs_ending_on_eight_threads_at_once_notify_each_exactly_once() {
    let dir = tempfile::tempdir().unwrap();
    let notes = Arc::new(Count::default());
    let h = host(
        dir.path(),
        notes.clone(),
        Limits::default(),
        Arc::new(common::FakeWorld::default()),
    );
    let never_declares = json!([{"final": ""}]);
    std::thread::scope(|s| {
        for _ in 0..8 {
            s.spawn(|| {
                for _ in 0..10 {
                    event_run(&h, never_declares.clone());
                }
            });
        }
    });
    let mut sent: Vec<String> = notes
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.run_id.clone())
        .collect();
    assert_eq!(sent.len(), 80, "each failed run notifies once: {sent:?}");
    sent.sort();
    sent.dedup();
    assert_eq!(sent.len(), 80, "no run notified twice");
    assert!(h.outbox_pending().unwrap().is_empty());
}

/// An outside agent's run (a remote worker's attempt, §13.7.2) counts the tokens its agent
/// reports with each call: past the budget, the host ends the run at the agent's next call,
/// named on the receipt, and the reported tokens are the run's cost.
#[test]
fn an_outside_agents_reported_tokens_count_against_the_token_budget() {
    let dir = tempfile::tempdir().unwrap();
    let limits = Limits {
        tokens_max: 50,
        ..Limits::default()
    };
    let world = common::FakeWorld::accepting();
    let h = host(
        dir.path(),
        Arc::new(Count::default()),
        limits,
        world.clone(),
    );
    let id = h
        .open_external(&RunSpec {
            trigger: TriggerKind::Event,
            title: "remote export".into(),
            presence: Some(Presence::Away),
            quiet: true,
            model: vouch_runtime::host::ModelSpec::external("http"),
            scope: None,
        })
        .unwrap();
    let manifest = json!({"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "export.csv"}}]});
    let spent = vouch_store::journal::TokenUsage {
        prompt_tokens: 40,
        completion_tokens: 20,
    };
    let r = h
        .external_call_spent(&id, "declare", &manifest, spent)
        .unwrap();
    assert!(r.ok && r.end.is_none(), "{r:?}");
    let save = json!({"delivery": "d1", "payload": {"text": "a,b"}});
    let r = h.external_call(&id, "save", &save).unwrap();
    assert!(!r.ok, "{r:?}");
    assert!(matches!(r.end, Some(RunEnd::Ended { .. })), "{r:?}");
    assert_eq!(world.executions("d1"), 0, "nothing past the budget is done");
    let receipt = h.receipt(&id).unwrap().unwrap();
    assert!(
        receipt.contains("the agent used its whole token budget (50 tokens)"),
        "{receipt}"
    );
    assert!(receipt.contains("60 tokens"), "{receipt}");
}
