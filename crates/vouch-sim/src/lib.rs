//! `vouch sim`: the real host, board and reconciler under a seeded, deterministic world.
//!
//! Everything the host does not own is injected and drawn from one seed: the clock (manual),
//! run ids, the scripted model's manifests and payloads, the providers' answers (accepted,
//! refused, the answer lost, slow), the board's workers (claiming, racing, reporting twice, out
//! of order, after their lease lapsed) and the person (approving the shown hash or a stale
//! one, denying, editing, answering, cancelling, resuming). Faults strike at the host's
//! durability points: a crash drops every in-memory state and a new host opens the same store,
//! as a restarted process would, and start-up reconciliation runs.
//!
//! After every step the invariants of [`check`] are checked on the store and on the providers'
//! own counts. A failure names the seed and the step; the same seed replays the same steps.

pub mod check;
mod person;
pub mod rng;
mod story;
mod tasks;
pub mod world;

use check::{Approvals, Violation};
use rng::Rng;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;
use vouch_runtime::capability::PatternCapabilities;
use vouch_runtime::clock::ManualClock;
use vouch_runtime::host::HostParts;
use vouch_runtime::{Host, HostError, Limits};
use vouch_store::board::BoardStore;
use vouch_store::Store;
use world::World;

/// Simulated runs one store holds before the simulator drains it, checks it whole and starts
/// a fresh one: the per-step checks stay cheap and a failure's world stays small.
pub const STORE_RUNS_MAX: usize = 100;
/// Steps one store may take (a bound on the loop whatever the draws).
pub const STORE_STEPS_MAX: u64 = 2_000;
/// Rounds of draining a store before its final check (each decides every open card).
pub const DRAIN_ROUNDS_MAX: usize = 20;
/// Step lines kept to show with a failure.
pub const TRACE_LINES_MAX: usize = 40;
/// Where the clock starts: 2026-12-01T06:00:00Z.
const START_MS: i64 = 1_796_104_800_000;

/// Which faults the world injects (`--faults`, comma-separated; `all` or `none`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Faults {
    /// Crashes at durability points: every in-memory state dropped, the store reopened.
    pub crash: bool,
    /// Provider answers lost after the effect happened.
    pub lost: bool,
    /// Providers refusing.
    pub errors: bool,
    /// Providers holding a request past leases.
    pub slow: bool,
    /// Worker leases lapsing (the clock jumps, the board sweeps).
    pub lease: bool,
    /// Two workers racing for one task, a dead worker's late report.
    pub race: bool,
    /// Worker reports, approvals and slot firings repeated.
    pub dup: bool,
    /// Worker reports delivered out of order.
    pub reorder: bool,
}

impl Faults {
    pub const NAMES: [&'static str; 8] = [
        "crash", "lost", "errors", "slow", "lease", "race", "dup", "reorder",
    ];

    pub fn all() -> Self {
        Faults::parse("all").unwrap_or(Faults::none())
    }

    pub fn none() -> Self {
        Faults {
            crash: false,
            lost: false,
            errors: false,
            slow: false,
            lease: false,
            race: false,
            dup: false,
            reorder: false,
        }
    }

    /// `all`, `none`, or names from [`Faults::NAMES`] separated by commas.
    pub fn parse(list: &str) -> Result<Self, String> {
        let mut f = Faults::none();
        for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            match name {
                "all" => {
                    for n in Faults::NAMES {
                        f.set(n);
                    }
                }
                "none" => {}
                n if Faults::NAMES.contains(&n) => f.set(n),
                other => {
                    return Err(format!(
                        "unknown fault `{other}`: use all, none or some of {}",
                        Faults::NAMES.join(", ")
                    ))
                }
            }
        }
        Ok(f)
    }

    fn set(&mut self, name: &str) {
        match name {
            "crash" => self.crash = true,
            "lost" => self.lost = true,
            "errors" => self.errors = true,
            "slow" => self.slow = true,
            "lease" => self.lease = true,
            "race" => self.race = true,
            "dup" => self.dup = true,
            _ => self.reorder = true,
        }
    }

    /// The canonical list, as `--faults` takes it.
    pub fn list(&self) -> String {
        let on = [
            self.crash,
            self.lost,
            self.errors,
            self.slow,
            self.lease,
            self.race,
            self.dup,
            self.reorder,
        ];
        let names: Vec<&str> = Faults::NAMES
            .iter()
            .zip(on)
            .filter(|(_, on)| *on)
            .map(|(n, _)| *n)
            .collect();
        if names.is_empty() {
            "none".into()
        } else {
            names.join(",")
        }
    }
}

/// One simulation: `runs` simulated runs from `seed`.
#[derive(Debug, Clone)]
pub struct SimConfig {
    pub seed: u64,
    pub runs: usize,
    pub faults: Faults,
    /// PostgreSQL instead of SQLite: each store is a fresh schema there, dropped afterwards.
    pub database_url: Option<String>,
    /// Print every step as it is taken (`--replay`).
    pub trace: bool,
}

/// An invariant that failed: where, and the steps that led there.
#[derive(Debug, Clone)]
pub struct Failure {
    pub seed: u64,
    pub step: u64,
    pub violation: Violation,
    pub trace: Vec<String>,
}

/// What a simulation did.
#[derive(Debug, Clone, Default)]
pub struct SimReport {
    pub seed: u64,
    pub runs: usize,
    pub steps: u64,
    pub stores: usize,
    pub crashes: u64,
    pub attempts: u64,
    pub effects: usize,
    pub tasks: usize,
    pub elapsed_ms: u128,
    pub failure: Option<Failure>,
}

impl SimReport {
    pub fn runs_per_s(&self) -> f64 {
        self.runs as f64 / (self.elapsed_ms.max(1) as f64 / 1000.0)
    }
}

/// Why a simulation could not run at all (not a finding: the setup failed).
#[derive(Debug)]
pub struct SetupError(pub String);

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SetupError {}

/// Run a simulation. A finding is `Ok` with [`SimReport::failure`] set.
pub fn simulate(cfg: &SimConfig) -> Result<SimReport, SetupError> {
    let started = Instant::now();
    let mut rep = SimReport {
        seed: cfg.seed,
        ..Default::default()
    };
    let mut rng = Rng::new(cfg.seed);
    let mut epoch = 0usize;
    while rep.runs < cfg.runs {
        let want = (cfg.runs - rep.runs).min(STORE_RUNS_MAX);
        let mut sim = Sim::new(cfg, rng.fork(), epoch, rep.steps)?;
        let result = sim.epoch(want);
        rep.runs += sim.runs;
        rep.steps = sim.step;
        rep.crashes += sim.crashes;
        rep.attempts += sim.world.attempts();
        rep.effects += sim.world.effects().len();
        rep.tasks += sim.tasks.len();
        rep.stores += 1;
        let trace: Vec<String> = sim.trace.iter().cloned().collect();
        sim.close();
        if let Err(violation) = result {
            rep.failure = Some(Failure {
                seed: cfg.seed,
                step: rep.steps,
                violation,
                trace,
            });
            break;
        }
        epoch += 1;
    }
    rep.elapsed_ms = started.elapsed().as_millis();
    Ok(rep)
}

/// Where a store lives.
enum Backend {
    Sqlite,
    Postgres { url: String, schema: String },
}

/// One store's simulation.
pub(crate) struct Sim<'a> {
    cfg: &'a SimConfig,
    rng: Rng,
    clock: ManualClock,
    world: Arc<World>,
    dir: tempfile::TempDir,
    backend: Backend,
    store: Arc<dyn Store>,
    board: Arc<dyn BoardStore>,
    host: Host,
    boots: u64,
    epoch: usize,
    ids: u64,
    pub(crate) step: u64,
    pub(crate) runs: usize,
    pub(crate) crashes: u64,
    trace: VecDeque<String>,
    /// Runs a step may have changed: checked after it.
    touched: BTreeSet<String>,
    approvals: Approvals,
    effects_checked: usize,
    per_key: BTreeMap<String, u32>,
    /// Runs created for each schedule slot (`schedule@slot_ms`).
    slots: BTreeMap<String, Vec<String>>,
    pub(crate) tasks: Vec<tasks::TaskSim>,
}

fn setup(e: impl std::fmt::Display) -> SetupError {
    SetupError(e.to_string())
}

/// A temporary folder in memory where there is one: the simulator tests the host's logic,
/// the crash tests test the disk.
fn temp_dir() -> Result<tempfile::TempDir, SetupError> {
    let shm = PathBuf::from("/dev/shm");
    let dir = if shm.is_dir() {
        tempfile::Builder::new().prefix("vouch-sim").tempdir_in(shm)
    } else {
        tempfile::Builder::new().prefix("vouch-sim").tempdir()
    };
    dir.map_err(|e| SetupError(format!("create a temporary folder: {e}")))
}

impl<'a> Sim<'a> {
    fn new(cfg: &'a SimConfig, mut rng: Rng, epoch: usize, step: u64) -> Result<Self, SetupError> {
        let dir = temp_dir()?;
        let backend = match &cfg.database_url {
            None => Backend::Sqlite,
            Some(url) => Backend::Postgres {
                url: url.clone(),
                schema: format!("vouch_sim_{}_{}_{epoch}", std::process::id(), cfg.seed),
            },
        };
        let clock = ManualClock::new(START_MS, 1);
        let world = World::new(rng.fork(), cfg.faults, clock.clone());
        let (store, board) = open(&backend, &dir)?;
        let host = host(&clock, &world, dir.path(), store.clone(), 0);
        Ok(Sim {
            cfg,
            rng,
            clock,
            world,
            dir,
            backend,
            store,
            board,
            host,
            boots: 0,
            epoch,
            ids: 0,
            step,
            runs: 0,
            crashes: 0,
            trace: VecDeque::new(),
            touched: BTreeSet::new(),
            approvals: Approvals::default(),
            effects_checked: 0,
            per_key: BTreeMap::new(),
            slots: BTreeMap::new(),
            tasks: vec![],
        })
    }

    /// Drop the store (and a PostgreSQL schema with it).
    fn close(self) {
        let Sim {
            backend,
            store,
            board,
            host,
            ..
        } = self;
        drop((host, store, board));
        if let Backend::Postgres { url, schema } = backend {
            if let Ok(mut c) = postgres::Client::connect(&url, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
            }
        }
    }

    /// A run id of this world: deterministic, in the host's own shape (20 hex digits).
    pub(crate) fn new_id(&mut self) -> String {
        self.ids += 1;
        format!("{:04x}{:016x}", self.epoch & 0xffff, self.ids)
    }

    pub(crate) fn note(&mut self, line: String) {
        if self.cfg.trace {
            println!("step {}: {line}", self.step);
        }
        self.trace.push_back(format!("step {}: {line}", self.step));
        while self.trace.len() > TRACE_LINES_MAX {
            self.trace.pop_front();
        }
    }

    /// Every in-memory state is gone: a new host over the reopened store, past the dead
    /// process's leases, reconciles at start-up (§9.2).
    pub(crate) fn reboot(&mut self, why: &str) -> Result<(), Violation> {
        self.crashes += 1;
        self.boots += 1;
        self.note(format!("crash ({why}); a new host reopens the store"));
        let (store, board) = open(&self.backend, &self.dir)
            .map_err(|e| check::violation("the store reopens", e.0))?;
        self.store = store.clone();
        self.board = board;
        self.host = host(&self.clock, &self.world, self.dir.path(), store, self.boots);
        self.clock.advance(self.host.limits().lease_ms + 1);
        let ended = self
            .host
            .boot()
            .map_err(|e| host_failed("start-up reconciliation", e))?;
        self.touched.extend(ended);
        for r in self.store.open_runs()? {
            self.touched.insert(r.id);
        }
        Ok(())
    }

    /// What a step's host call answered: a crash reboots; a refusal of a request that was
    /// wrong or late is the host doing its job; anything else is a finding.
    pub(crate) fn outcome<T>(
        &mut self,
        what: &str,
        r: Result<T, HostError>,
    ) -> Result<Option<T>, Violation> {
        self.host.arm_crash(None);
        match r {
            Ok(v) => Ok(Some(v)),
            Err(HostError::Crashed(point)) => {
                self.reboot(&format!("after {point} in {what}"))?;
                Ok(None)
            }
            Err(
                e @ (HostError::NotWaiting(_)
                | HostError::OwnedElsewhere(_)
                | HostError::WrongHash(_)
                | HostError::SlotTaken(_)
                | HostError::NotFound { .. }
                | HostError::BadInput(_)
                | HostError::Store(vouch_store::StoreError::Conflict(_))),
            ) => {
                self.note(format!("{what}: refused: {e}"));
                Ok(None)
            }
            Err(e) => Err(host_failed(what, e)),
        }
    }

    /// Arm a crash at a random durability point for the next host call.
    pub(crate) fn maybe_crash(&mut self) {
        const POINTS: [&str; 14] = [
            "manifest_declared",
            "preflight",
            "clarify_asked",
            "clarify_answered",
            "approval_requested",
            "approval_granted",
            "ledger_intent",
            "attempt_started",
            "provider_effect",
            "attempt_finished",
            "evidence",
            "suspended",
            "resumed",
            "terminal",
        ];
        if !self.cfg.faults.crash || !self.rng.chance(15) {
            return;
        }
        let point = *self.rng.pick(&POINTS).unwrap_or(&"evidence");
        let nth = 1 + self.rng.below(2) as u32;
        let mut plan = vouch_runtime::crash::CrashPlan::new(
            point,
            None,
            nth,
            vouch_runtime::crash::CrashMode::Simulate,
        );
        plan.volatile = self.rng.chance(30);
        let tilde = if plan.volatile { "~" } else { "" };
        self.note(format!("a crash is armed after {tilde}{point}@{nth}"));
        self.host.arm_crash(Some(plan));
    }

    /// One store: `want` simulated runs, then drained and checked whole.
    fn epoch(&mut self, want: usize) -> Result<(), Violation> {
        let first = self.step;
        while self.runs < want && self.step - first < STORE_STEPS_MAX {
            self.step += 1;
            self.one_step()?;
            self.check_step()?;
        }
        self.drain()?;
        self.check_all()
    }

    fn one_step(&mut self) -> Result<(), Violation> {
        let roll = self.rng.below(100);
        match roll {
            0..=29 => self.start_run(),
            30..=49 => self.decide(),
            50..=54 => self.resume(),
            55..=64 => self.fire_slot(),
            65..=89 => self.task_step(),
            90..=94 if self.cfg.faults.lease => self.lapse(),
            95..=99 if self.cfg.faults.crash => self.reboot("between steps"),
            _ => self.start_run(),
        }
    }

    /// Time passes past every lease; the board sweeps.
    fn lapse(&mut self) -> Result<(), Violation> {
        let ms = vouch_core::board::DEFAULT_LEASE_MS + 1 + self.rng.below(60_000) as i64;
        self.clock.advance(ms);
        let swept = self
            .board
            .sweep(vouch_runtime::clock::Clock::now_ms(&self.clock))?;
        self.note(format!("{ms} ms pass; the board sweeps: {swept:?}"));
        Ok(())
    }

    fn check_step(&mut self) -> Result<(), Violation> {
        for id in std::mem::take(&mut self.touched) {
            check::run(self.store.as_ref(), &id)?;
        }
        let effects = self.world.effects();
        check::effects(
            self.store.as_ref(),
            &effects,
            self.effects_checked,
            &mut self.per_key,
            &self.approvals,
        )?;
        self.effects_checked = effects.len();
        for t in &self.tasks {
            check::task(self.board.as_ref(), &t.id)?;
        }
        for (slot, runs) in &self.slots {
            check::slot(self.store.as_ref(), slot, runs)?;
        }
        Ok(())
    }

    /// Every run of the store, every chain, and the store's own verification; after the drain
    /// every run has ended (I1: no run is left waiting forever once nothing waits for it).
    fn check_all(&mut self) -> Result<(), Violation> {
        self.check_step()?;
        for r in self.store.runs(usize::MAX >> 1)? {
            check::run(self.store.as_ref(), &r.id)?;
            if r.state != vouch_core::RunState::Ended {
                return Err(check::violation(
                    "every run ends",
                    format!(
                        "run {} ({}) is still {} after every card was decided and every task ended",
                        r.id,
                        r.trigger.as_str(),
                        r.state.as_str()
                    ),
                ));
            }
        }
        let report = self.store.verify()?;
        if !report.intact() {
            return Err(check::violation(
                "chains intact",
                format!(
                    "verify: breaks {:?}, damage {:?}",
                    report.breaks, report.damage
                ),
            ));
        }
        Ok(())
    }
}

pub(crate) fn host_failed(what: &str, e: HostError) -> Violation {
    check::violation("the host answers", format!("{what}: {e}"))
}

/// One store, seen as the run store and as the board.
type Stores = (Arc<dyn Store>, Arc<dyn BoardStore>);

fn open(backend: &Backend, dir: &tempfile::TempDir) -> Result<Stores, SetupError> {
    match backend {
        Backend::Sqlite => {
            let s = Arc::new(
                vouch_store_sqlite::SqliteStore::open(&dir.path().join("vouch.db"))
                    .map_err(setup)?,
            );
            Ok((s.clone(), s))
        }
        Backend::Postgres { url, schema } => {
            let s =
                Arc::new(vouch_store_postgres::PostgresStore::open(url, schema).map_err(setup)?);
            Ok((s.clone(), s))
        }
    }
}

/// A fresh host of the simulated world over `store`, its files in `dir`: nothing in memory
/// from any earlier one.
pub fn host(
    clock: &ManualClock,
    world: &Arc<World>,
    dir: &std::path::Path,
    store: Arc<dyn Store>,
    boot: u64,
) -> Host {
    let parts = HostParts {
        caps: Arc::new(PatternCapabilities {
            levels: vec![],
            automation: vec![format!("send:webhook:{}*", world::DEDUP_WEBHOOK)],
            default_level: None,
        }),
        providers: world.providers(),
        ..vouch_adapters::local::parts(dir)
    };
    Host::new(
        Arc::new(vouch_runtime::durable::Durable::new(store)),
        Arc::new(clock.clone()),
        format!("sim-boot-{boot}"),
        dir.join("drafts"),
        parts,
    )
    // One orphan after another at start-up: threads would interleave the clock's reads.
    .with_limits(Limits {
        boot_threads_max: 1,
        ..Limits::default()
    })
}
