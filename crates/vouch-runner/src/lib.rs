//! The scenario runner (`vouch scenario run`): each scenario runs through the real agent
//! loop, journal, ledger, reconciler, receipts and attention on a fresh embedded store in a
//! temporary directory. Providers behave as the scenario's `world` says and count effects at
//! their side; crashes drop every in-memory state, reopen the store and run start-up
//! reconciliation; the person's decisions are applied as cards open.
//!
//! The runner takes the typed scenario of `vouch-scenario` (already validated) and returns
//! the report object of scenarios.md (without the comparison fields).

mod board;
mod cancel;
pub mod sim;

use serde_json::{json, Map, Value};
use sim::SimWorld;
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;
use std::sync::{Arc, Mutex};
use vouch_core::{DestinationKind, RunState, TriggerKind};
use vouch_runtime::capability::PatternCapabilities;
use vouch_runtime::clock::ManualClock;
use vouch_runtime::crash::{CrashMode, CrashPlan};
use vouch_runtime::host::{HostParts, Notifier, NotifyError};
use vouch_runtime::provider::Provider;
use vouch_runtime::view::RunView;
use vouch_runtime::{Host, HostError, RunSpec};
use vouch_scenario::{CatchUp, Decision, Fault, Scenario, World};
use vouch_store::{CardState, OutboxRow, Store, TamperForTests};
use vouch_store_sqlite::SqliteStore;

/// Crashes a scenario may inject before the runner gives up (each is a full reboot).
pub const CRASHES_MAX: usize = 16;
/// Decision applications per scenario.
pub const STEPS_MAX: usize = 256;

#[derive(Default)]
struct CountingNotifier {
    sent: Mutex<Vec<OutboxRow>>,
}

impl Notifier for CountingNotifier {
    fn notify(&self, row: &OutboxRow) -> Result<(), NotifyError> {
        self.sent
            .lock()
            .map_err(|e| NotifyError::Retry(format!("the counter is poisoned: {e}")))?
            .push(row.clone());
        Ok(())
    }
}

struct Ctx {
    dir: std::path::PathBuf,
    world: Arc<SimWorld>,
    caps: Arc<PatternCapabilities>,
    notifier: Arc<CountingNotifier>,
    clock: ManualClock,
    /// Crashes still to inject, in file order: each boot takes the first one left.
    crashes: VecDeque<Fault>,
    /// Deliveries whose stored payload is altered once the person approves it.
    tamper: Vec<String>,
    boots: usize,
    /// The store under the latest boot's host, for the faults that reach past the host.
    store: Option<Arc<SqliteStore>>,
}

/// Milliseconds since the epoch of an RFC 3339 UTC time like `2026-12-02T07:00:00Z`.
pub fn parse_utc_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 19 {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r).and_then(|x| x.parse::<i64>().ok());
    let (y, mo, d, h, mi, se) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    // Days from civil (Howard Hinnant's algorithm).
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = if y2 >= 0 { y2 } else { y2 - 399 } / 400;
    let yoe = y2 - era * 400;
    let doy = (153 * (if mo > 2 { mo - 3 } else { mo + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146097 + doe - 719468;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + se * 1000)
}

pub mod patch;

/// A host over a fresh store in `dir` with an empty simulated world (patch scenarios).
pub(crate) fn scenario_host(dir: &Path) -> Result<Host, String> {
    Ctx::with(&World::default(), None, &[], dir).host()
}

/// Where a scenario's manual clock starts when its trigger names no slot.
const START_MS: i64 = 1_796_194_800_000;

impl Ctx {
    fn new(s: &Scenario, dir: &Path) -> Ctx {
        Ctx::with(&s.world, s.trigger.slot.as_deref(), &s.faults, dir)
    }

    fn with(world: &World, slot: Option<&str>, faults: &[Fault], dir: &Path) -> Ctx {
        let start = slot.and_then(parse_utc_ms).unwrap_or(START_MS);
        Ctx {
            dir: dir.to_path_buf(),
            world: Arc::new(SimWorld::new(world.clone())),
            caps: Arc::new(PatternCapabilities {
                levels: world
                    .capabilities
                    .iter()
                    .map(|(p, c)| (p.clone(), *c))
                    .collect(),
                automation: world.automation.clone(),
                default_level: None,
            }),
            notifier: Arc::new(CountingNotifier::default()),
            clock: ManualClock::new(start, 1),
            crashes: faults
                .iter()
                .filter(|f| matches!(f, Fault::CrashAfter { .. }))
                .cloned()
                .collect(),
            tamper: faults
                .iter()
                .filter_map(|f| match f {
                    Fault::TamperPayload(d) => Some(d.clone()),
                    Fault::CrashAfter { .. } => None,
                })
                .collect(),
            boots: 0,
            store: None,
        }
    }

    /// A fresh host over the reopened store: nothing in memory survives from before.
    fn host(&mut self) -> Result<Host, String> {
        self.boots += 1;
        let store =
            Arc::new(SqliteStore::open(&self.dir.join("vouch.db")).map_err(|e| e.to_string())?);
        self.store = Some(store.clone());
        let providers: BTreeMap<DestinationKind, Arc<dyn Provider>> =
            self.world.providers().into_iter().collect();
        let crash = match self.crashes.pop_front() {
            Some(Fault::CrashAfter {
                event,
                delivery,
                nth,
            }) => Some(CrashPlan::new(
                event.as_str(),
                delivery.as_deref(),
                nth,
                CrashMode::Simulate,
            )),
            _ => None,
        };
        let parts = HostParts {
            caps: self.caps.clone(),
            providers,
            notifier: self.notifier.clone(),
            ..vouch_adapters::local::parts(&self.dir)
        };
        Ok(Host::new(
            Arc::new(vouch_runtime::durable::Durable::new(store)),
            Arc::new(self.clock.clone()),
            format!("runner-boot-{}", self.boots),
            self.dir.join("drafts"),
            parts,
        )
        .with_crash(crash))
    }

    fn tampered(&self, delivery: &str) -> bool {
        self.tamper.iter().any(|d| d == delivery)
    }

    /// The `tamper_payload` fault: the approved payload changes in the store behind the
    /// host's back, through the store's hook for verification tests.
    fn tamper_payload(&self, hash: &str) -> Result<(), String> {
        let store = self.store.as_ref().ok_or("no store to tamper with")?;
        match store.tamper_payload(hash, r#"{"text":"tampered"}"#) {
            Ok(true) => Ok(()),
            Ok(false) => Err(format!("no stored payload {hash} to tamper with")),
            Err(e) => Err(e.to_string()),
        }
    }
}

fn spec_of(s: &Scenario) -> Result<RunSpec, String> {
    let turns = serde_json::to_value(&s.script).map_err(|e| format!("script: {e}"))?;
    Ok(RunSpec {
        trigger: s.trigger.kind,
        title: s.prompt.clone(),
        presence: s.presence,
        quiet: s.quiet,
        model: vouch_runtime::host::ModelSpec::script_of(turns),
        scope: None,
    })
}

enum Next {
    Done,
}

/// Run one scenario in `dir` (which must be empty) and return its report.
pub fn run_scenario(s: &Scenario, dir: &Path) -> Result<Value, String> {
    if let Some(plan) = &s.task {
        return board::run_task_scenario(s, plan, dir);
    }
    let mut ctx = Ctx::new(s, dir);
    let spec = spec_of(s)?;
    let mut decisions: VecDeque<Decision> = s.decisions.iter().cloned().collect();
    let scheduled = spec.trigger == TriggerKind::Scheduled;
    let slot_ms = s
        .trigger
        .slot
        .as_deref()
        .and_then(parse_utc_ms)
        .unwrap_or(0);
    let schedule = format!("scenario:{}", s.id);
    let ran = s.trigger.ran;
    let mut run_id: Option<String> = None;
    let mut crashes = 0;
    let mut steps = 0;
    let mut started = false;
    loop {
        let host = ctx.host()?;
        if crashes > 0 {
            // Every in-memory state is gone; the leases of the dead boot have lapsed.
            ctx.clock.advance(host.limits().lease_ms + 1);
            match host.boot() {
                Ok(_) => {}
                Err(HostError::Crashed(_)) => {
                    crashes += 1;
                    continue;
                }
                Err(e) => return Err(e.to_string()),
            }
        }
        let result: Result<Next, HostError> = (|| {
            if !started {
                started = true;
                if scheduled {
                    let scope = format!("{schedule}@{slot_ms}");
                    let spec = RunSpec {
                        scope: Some(scope),
                        ..spec.clone()
                    };
                    if !ran {
                        let (id, late) = host.missed_slot(
                            &schedule,
                            slot_ms,
                            &spec,
                            s.trigger.catch_up == CatchUp::Latest,
                        )?;
                        run_id = Some(late.unwrap_or(id));
                    } else {
                        let id = vouch_runtime::host::new_id(&ctx.clock);
                        run_id = Some(id.clone());
                        host.create(&id, &spec, None, Some((&schedule, slot_ms)))?;
                        host.drive(&id)?;
                    }
                } else {
                    let id = vouch_runtime::host::new_id(&ctx.clock);
                    run_id = Some(id.clone());
                    host.create(&id, &spec, None, None)?;
                    host.drive(&id)?;
                }
            }
            loop {
                steps += 1;
                if steps > STEPS_MAX {
                    return Ok(Next::Done);
                }
                let id = match &run_id {
                    Some(id) => id.clone(),
                    None => match host.runs(1)?.first() {
                        Some(r) => r.id.clone(),
                        None => return Ok(Next::Done),
                    },
                };
                run_id = Some(id.clone());
                let rec = host
                    .run_record(&id)?
                    .ok_or_else(|| HostError::Internal(format!("run {id} vanished")))?;
                match rec.state {
                    RunState::Ended => {
                        if decisions.front() == Some(&Decision::Resume)
                            && rec.ended_by == Some(vouch_core::EndedBy::Boot)
                        {
                            decisions.pop_front();
                            let (child, _) = host.resume(&id)?;
                            run_id = Some(child);
                            continue;
                        }
                        return Ok(Next::Done);
                    }
                    RunState::Suspended => {
                        let cards: Vec<_> = host
                            .run_cards(&id)?
                            .into_iter()
                            .filter(|c| c.state == CardState::Open)
                            .collect();
                        let Some(d) = decisions.front().cloned() else {
                            return Ok(Next::Done);
                        };
                        let card_for = |did: &str| {
                            cards
                                .iter()
                                .find(|c| c.delivery.as_deref() == Some(did))
                                .cloned()
                        };
                        match d {
                            Decision::Approve(did) => {
                                let Some(card) = card_for(&did) else {
                                    return Ok(Next::Done);
                                };
                                decisions.pop_front();
                                if ctx.tampered(&did) {
                                    ctx.tamper_payload(&card.payload_hash)
                                        .map_err(HostError::Internal)?;
                                }
                                host.approve(&id, &did, &card.payload_hash)?;
                            }
                            Decision::Deny(did) => {
                                if card_for(&did).is_none() {
                                    return Ok(Next::Done);
                                }
                                decisions.pop_front();
                                host.deny(&id, &did)?;
                            }
                            Decision::Edit { id: did, payload } => {
                                if card_for(&did).is_none() {
                                    return Ok(Next::Done);
                                }
                                decisions.pop_front();
                                let payload = script_payload(&host, &id, &did, &payload)?;
                                host.edit(&id, &did, &payload)?;
                            }
                            Decision::Answer(text) => {
                                if !cards.iter().any(|c| c.delivery.is_none()) {
                                    return Ok(Next::Done);
                                }
                                decisions.pop_front();
                                host.answer(&id, &text)?;
                            }
                            Decision::Cancel => {
                                decisions.pop_front();
                                host.cancel(&id)?;
                            }
                            // A resume answers an ended run, not a waiting one.
                            Decision::Resume => return Ok(Next::Done),
                        }
                    }
                    _ => {
                        // Not ended, not suspended, owner gone: start-up reconciliation ends it.
                        let ended = host.boot()?;
                        if !ended.contains(&id) {
                            let r = host.run_record(&id)?;
                            if r.map(|r| r.state != RunState::Suspended).unwrap_or(true) {
                                host.drive(&id).map(|_| ())?;
                            }
                        }
                    }
                }
            }
        })();
        match result {
            Ok(Next::Done) => break,
            Err(HostError::Crashed(_)) => {
                // The crash may have come inside a new continuation: follow the newest run.
                if let Ok(store) = SqliteStore::open(&ctx.dir.join("vouch.db")) {
                    if let Some(newest) = store
                        .runs(1)
                        .ok()
                        .and_then(|r| r.first().map(|r| r.id.clone()))
                    {
                        run_id = Some(newest);
                    }
                }
                crashes += 1;
                if crashes > CRASHES_MAX {
                    return Err("too many crashes".into());
                }
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    let host = ctx.host()?;
    let id = match run_id.clone() {
        Some(id) => id,
        None => host
            .runs(1)
            .map_err(|e| e.to_string())?
            .first()
            .map(|r| r.id.clone())
            .ok_or("no run was created")?,
    };
    report(s, &host, &id, &ctx)
}

fn report(s: &Scenario, host: &Host, id: &str, ctx: &Ctx) -> Result<Value, String> {
    let rec = host
        .run_record(id)
        .map_err(|e| e.to_string())?
        .ok_or("run vanished")?;
    let view = RunView::from_journal(&host.events(id).map_err(|e| e.to_string())?);
    let ended = rec.state == RunState::Ended;
    let terminal = view.terminal.as_ref();
    let mut deliveries = Map::new();
    if let Some(m) = &view.manifest {
        for d in &m.deliveries {
            let item = view.items.get(&d.id).cloned().unwrap_or_default();
            let status = if ended {
                json!(terminal
                    .and_then(|t| t.statuses.get(&d.id).copied())
                    .unwrap_or(view.final_status(&d.id)))
            } else {
                json!(view.final_status(&d.id))
            };
            deliveries.insert(
                d.id.clone(),
                json!({"posture": item.posture, "status": status, "executions": ctx.world.executions(&d.id)}),
            );
        }
    }
    let (presence, quiet) = vouch_runtime::host::presence_of(&rec);
    let (needs_you, significance, attention) = if ended {
        (
            terminal.map(|t| json!(t.needs_you)).unwrap_or(json!([])),
            terminal
                .map(|t| json!(t.significance))
                .unwrap_or(Value::Null),
            terminal.map(|t| json!(t.route)).unwrap_or(Value::Null),
        )
    } else {
        let needs: Vec<String> = view
            .manifest
            .iter()
            .flat_map(|m| m.deliveries.iter())
            .filter(|d| {
                view.final_status(&d.id).needs_person(
                    view.items
                        .get(&d.id)
                        .map(|i| i.connect_step.is_some())
                        .unwrap_or(false),
                )
            })
            .map(|d| d.id.clone())
            .collect();
        let sig = vouch_core::significance(None, true, !needs.is_empty(), false, false);
        (
            json!(needs),
            json!(sig),
            json!(vouch_core::route(sig, presence, quiet)),
        )
    };
    let notifications = ctx
        .notifier
        .sent
        .lock()
        .map(|v| {
            v.iter()
                .filter(|r| r.run_id == id && r.route == "notify")
                .count()
        })
        .unwrap_or(0);
    let receipt = host
        .receipt(id)
        .map_err(|e| e.to_string())?
        .unwrap_or_default();
    Ok(json!({
        "id": s.id,
        "state": if ended { "ended" } else { "suspended" },
        "outcome": rec.outcome,
        "ended_by": rec.ended_by,
        "deliveries": deliveries,
        "needs_you": needs_you,
        "significance": significance,
        "attention": attention,
        "notifications": notifications,
        "handoff": handoff_of(&receipt),
        "receipt": receipt,
    }))
}

/// What a task run's receipt says became of its `result` item: the word of its
/// `result — …:` line (`accepted`, `missing`, `refused`, `cancelled`), none without one.
fn handoff_of(receipt: &str) -> Option<&'static str> {
    let line = receipt.lines().map(str::trim).find_map(|l| {
        l.strip_prefix("✓ result — ")
            .or_else(|| l.strip_prefix("✗ result — "))
    })?;
    let word = line.split(':').next().unwrap_or_default();
    match word {
        "accepted" => Some("accepted"),
        "handoff missing" => Some("missing"),
        "refused" => Some("refused"),
        "cancelled" => Some("cancelled"),
        _ => Some("unreadable"),
    }
}

/// Run a scenario given as JSON (scenarios.md) in a fresh temporary directory: it is read
/// into the typed scenario first, and refused with the offending field when it does not fit.
pub fn run_in_tempdir(s: &Value) -> Result<Value, String> {
    let text = s.to_string();
    let typed =
        vouch_scenario::parse_scenario(Path::new("scenario"), &text).map_err(|e| e.to_string())?;
    run_typed_in_tempdir(&typed)
}

/// Run a typed scenario in a fresh temporary directory.
fn run_typed_in_tempdir(s: &Scenario) -> Result<Value, String> {
    // Debugging aid: keep the store of one scenario where you can open it with `vouch --home`.
    if let Ok(keep) = std::env::var("VOUCH_RUNNER_KEEP") {
        let dir = std::path::PathBuf::from(keep);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        return run_scenario(s, &dir);
    }
    let tmp = tempfile::tempdir().map_err(|e| format!("temporary directory: {e}"))?;
    run_scenario(s, tmp.path())
}

/// Run a typed scenario (as loaded by `vouch-scenario`) and return its report.
pub fn run_typed(s: &Scenario) -> Result<vouch_scenario::ScenarioReport, String> {
    let report = run_typed_in_tempdir(s)?;
    serde_json::from_value(report).map_err(|e| format!("scenario {}: runner report: {e}", s.id))
}

/// A scenario's edit payload as the host is to receive it: `{"text": T}` is the script's
/// shorthand for the delivery's kind (`schemas::expand_script_text`).
fn script_payload(
    host: &Host,
    run: &str,
    delivery: &str,
    payload: &serde_json::Value,
) -> Result<serde_json::Value, HostError> {
    let view = vouch_runtime::view::RunView::from_journal(&host.events(run)?);
    Ok(
        match view.manifest.as_ref().and_then(|m| m.delivery(delivery)) {
            Some(d) => vouch_runtime::schemas::expand_script_text(d, payload),
            None => payload.clone(),
        },
    )
}
