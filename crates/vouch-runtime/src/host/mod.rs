//! The host: runs the agent loop, owns every effect, and ends every run through the one
//! reconciler (§9). The model proposes; the host decides, acts, observes and records.

use crate::capability::CapabilityRegistry;
use crate::clock::Clock;
use crate::crash::{CrashMode, CrashPlan};
use crate::model::{ChatMessage, Model, ModelError, ModelTurn, ToolCall, ToolSpec};
use crate::provider::{AttemptReply, AttemptRequest, Observation, Provider};
use crate::view::RunView;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::Arc;
use vouch_core::{
    canonical_json, is_irreversible, ledger_key, payload_hash, posture, ActFacts, Context,
    DeliveryStatus, Destination, DestinationKind, EndedBy, Manifest, Posture, PostureInput,
    Presence, RunState, TriggerKind, Verb,
};
pub use vouch_store::spec::{ModelSpec, StoredSpec};
use vouch_store::{journal as j, Event};
use vouch_store::{
    Card, CardState, Decision, EndResult, LedgerEntry, LedgerIntent, LedgerState, NewEvent,
    NewOutbox, NewRun, OutboxRow, RunRecord, Store, StoreError, Terminal,
};

// One file per transition; each says what it may touch (docs/architecture.md).
mod attempt;
mod attempt_run;
mod build;
mod decisions;
mod external;
mod given;
mod manifest;
mod orphans;
mod owner;
mod patch;
mod proposal;
mod reads;
mod reconcile;
mod recovery;
mod rooms;
mod submission;
mod task;
mod turn;

pub use attempt_run::AttemptStep;
pub use build::HostParts;
pub use decisions::Then;
pub use external::{external_model, is_external, AgentTurn, CallAnswer, ExternalReply, TurnReply};
pub use given::{Placement, READ_BYTES_MAX, READ_CONTEXT, READ_INPUT};
pub use orphans::Tended;
pub use owner::{
    process_owner, HostIdentity, HostProcesses, Liveness, LocalProcesses, Owner, HOST_ID_BYTES_MAX,
    HOST_ID_ENV,
};
pub use patch::{PatchWork, PATCH_TYPE};
pub use reconcile::DUTY_OUTBOX;
pub use recovery::{BOOT_THREADS_MAX, DUTY_BOOT};
pub use submission::{
    accept_submission, Accepted, BoardBudget, CountedBudget, RepairBudget, SubmitError, SubmitRules,
};
pub use task::{
    result_errors, usage_of, validate, verdict_of, AttemptJob, AttemptOutcome, Decided,
    RuntimeProfile, TaskDecision, TaskType, TaskTypes, TaskWork,
};

/// Bytes a run's title holds at most.
pub const TITLE_BYTES_MAX: usize = 4096;

/// A run's title as every interface takes it: words, printable, at most [`TITLE_BYTES_MAX`].
/// The error says what is wrong with the title and what to give instead.
pub fn check_title(title: &str) -> Result<(), String> {
    if title.trim().is_empty() {
        return Err("a run needs a title: say in words what the person asked for".into());
    }
    if let Err(e) = vouch_core::input::check_text(title) {
        return Err(format!("the title {e}"));
    }
    if title.len() > TITLE_BYTES_MAX {
        return Err(format!(
            "the title is {} bytes, more than the limit of {TITLE_BYTES_MAX}; give a shorter title",
            title.len()
        ));
    }
    Ok(())
}

pub use crate::turns::TURN_BYTES_MAX;

/// Bounds on one run. Units in names.
#[derive(Debug, Clone)]
pub struct Limits {
    pub turns_max: usize,
    pub tokens_max: u64,
    /// Recoverable errors (bad tool arguments) returned to the model before the run ends.
    pub repairs_max: u32,
    /// Same-key retries for providers that deduplicate by key (§8.3).
    pub key_retries_max: u32,
    pub lease_ms: i64,
    pub payload_bytes_max: usize,
    /// Orphans start-up reconciles at once (1: one after another, in a fixed order, as a
    /// deterministic world needs).
    pub boot_threads_max: usize,
}

impl Limits {
    /// What a run may spend, as the turn machine reads it.
    pub(crate) fn budget(&self) -> crate::turns::Budget {
        crate::turns::Budget {
            turns_max: self.turns_max,
            tokens_max: self.tokens_max,
            repairs_max: self.repairs_max,
        }
    }
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            turns_max: 400,
            tokens_max: 2_000_000,
            repairs_max: 3,
            key_retries_max: 3,
            lease_ms: 30_000,
            payload_bytes_max: 1 << 20,
            boot_threads_max: recovery::BOOT_THREADS_MAX,
        }
    }
}

/// Why the host did not do what it was asked. Each variant says what the caller should do
/// next; the interfaces map variants (never message text) to HTTP statuses, problem codes and
/// exit codes (§17.0, §17.1). Messages name the input at fault and the next step.
#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An injected crash point was reached (scenario runner only).
    #[error("crash injected after {0}")]
    Crashed(String),
    /// The request itself is wrong (a payload that is not an object, a task input the host
    /// cannot use, a worker not set up for this kind of task): fix it and ask again.
    #[error("{0}")]
    BadInput(String),
    /// The named record does not exist: check the id (each interface says where to list them).
    #[error("no {what} `{id}`")]
    NotFound { what: &'static str, id: String },
    /// The run is not waiting for this (it has ended, waits for something else, has nothing
    /// to resume, or is not that kind of run): asking again will not help until it changes.
    #[error("{0}")]
    NotWaiting(String),
    /// Another live process (or another call in this one) is driving the run now: try again
    /// once it has finished, or stop that process.
    #[error("{0}")]
    OwnedElsewhere(String),
    /// An approval's hash matches no card of that delivery (§7): the caller copied it wrong.
    #[error("{0}")]
    WrongHash(String),
    /// Another host consumed this schedule slot first (§12.2).
    #[error("slot {0} was already consumed")]
    SlotTaken(String),
    /// The model gave no answer; the cause says what to fix (address, credentials, retry).
    #[error("model: {0}")]
    Model(#[from] ModelError),
    /// The host's own state does not hold together (a record gone that it just used, a
    /// value it cannot encode): not the caller's doing; report it.
    #[error("{0}")]
    Internal(String),
}

pub type HostResult<T> = Result<T, HostError>;

/// Work tools without delivery effect (read a file, write an artifact, search…).
pub trait WorkTools: Send + Sync {
    fn specs(&self) -> Vec<ToolSpec>;
    /// `Ok(result)` or `Err(error text)`; `None` if the tool is unknown.
    fn call(
        &self,
        run_id: &str,
        spec: &Value,
        call: &ToolCall,
        args: &Value,
    ) -> Option<Result<String, String>>;
}

/// Builds the model of a run from its stored spec, starting at a given completed-turn count.
pub trait ModelFactory: Send + Sync {
    fn model(&self, spec: &Value, start_turn: usize) -> Result<Box<dyn Model>, ModelError>;
    /// The model spec a new run records: what any process needs to continue it (an
    /// `openai` run's profile, never its key). As given by default.
    fn record(&self, model: &ModelSpec) -> ModelSpec {
        model.clone()
    }
}

/// Delivers one outbox row on its route (desktop notification, push webhook, test counter).
pub trait Notifier: Send + Sync {
    fn notify(&self, row: &OutboxRow) -> Result<(), NotifyError>;
}

/// Why a notification was not delivered, by what the outbox dispatcher does next. Either way
/// the row stays in the outbox until a route takes it (§11.4): a failure still reaches the
/// person, once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotifyError {
    /// The route cannot take it now (no answer, a notification service or push server that is
    /// busy or down): the next dispatch tries this row again; other rows are still tried.
    #[error("{0}; it stays queued and is tried again")]
    Retry(String),
    /// The route is set up wrong (a push URL that is not one, a push server that refuses the
    /// request, an inbox log that cannot be written): every row would fail the same way, so
    /// the dispatcher stops trying until the next start-up. The message says what to fix.
    #[error("{0}")]
    Misconfigured(String),
}

/// The longest route error kept on an outbox row, in bytes (the rest is cut at a character).
pub const FAILURE_TEXT_BYTES_MAX: usize = 1_000;

/// Where progress lines go (`--watch`), or nowhere.
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

/// How a call of `drive` ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    Ended { outcome: vouch_core::Outcome },
    Suspended { reason: String },
}

/// The host. Built by [`Host::new`] and its `with_*` methods (`build.rs`); its fields are the
/// runtime's own, so an interface reaches it through its methods (`reads.rs` for what it
/// shows) and keeps its own handle on the store it built it from.
pub struct Host {
    pub(crate) store: Arc<dyn Store>,
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) caps: Arc<dyn CapabilityRegistry>,
    pub(crate) providers: BTreeMap<DestinationKind, Arc<dyn Provider>>,
    pub(crate) notifier: Arc<dyn Notifier>,
    pub(crate) models: Arc<dyn ModelFactory>,
    pub(crate) work: Arc<dyn WorkTools>,
    pub(crate) crash: Option<CrashPlan>,
    pub(crate) owner: String,
    pub(crate) drafts_dir: PathBuf,
    pub(crate) limits: Limits,
    pub(crate) progress: Option<Progress>,
    /// Runtime policy (§13.6): verbs forbidden per context.
    pub(crate) policy_forbid: Vec<(Context, Verb)>,
    /// Where the person is right now (§11.1); `None` uses the run's own setting.
    pub(crate) presence: Option<Arc<dyn PresenceSource>>,
    /// Whether a lease holder's process still runs (§9.2.5), injected like the clock.
    pub(crate) liveness: Arc<dyn Liveness>,
    /// The runs this host is driving now: their views and conversations in memory.
    pub(crate) drives: Drives,
    /// The tools offered to models, built once for the `work` tools they were built from.
    pub(crate) tools: ToolCache,
}

/// The host's tools and its work tools, built once: their JSON Schemas are the same for
/// every run, and building and cloning them was a tenth of a short run's CPU. Keyed by the
/// `work` tools they came from, so a host given other work tools builds them again. A task
/// attempt's tools (its type's output schema in `submit`, the readers its task has) are kept
/// too, a few shapes at most: cloning every schema for each attempt was a third of a board
/// task's CPU.
#[derive(Default)]
pub(crate) struct ToolCache {
    base: std::sync::Mutex<Option<(usize, Arc<[ToolSpec]>)>>,
    shaped: std::sync::Mutex<Vec<(ToolShape, Arc<[ToolSpec]>)>>,
}

/// What makes one task attempt's tools differ from another's: the tools they came from,
/// which readers the task has, and its output schema.
#[derive(PartialEq)]
pub(super) struct ToolShape {
    pub base: usize,
    pub judge: bool,
    pub inputs: bool,
    pub files: bool,
    pub output_schema: Option<Value>,
}

/// Shapes of task tools kept at most (a home has a few task types).
const TOOL_SHAPES_MAX: usize = 32;

impl ToolCache {
    fn get(
        &self,
        work: &Arc<dyn WorkTools>,
        build: impl FnOnce() -> Vec<ToolSpec>,
    ) -> Arc<[ToolSpec]> {
        let key = Arc::as_ptr(work) as *const () as usize;
        let mut c = self.base.lock().unwrap_or_else(|p| p.into_inner());
        match &*c {
            Some((k, specs)) if *k == key => specs.clone(),
            _ => {
                let specs: Arc<[ToolSpec]> = build().into();
                // Shapes built from the old tools go with them (an address can be reused).
                self.shaped
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clear();
                *c = Some((key, specs.clone()));
                specs
            }
        }
    }

    /// The tools of one shape, built by `build` the first time it is asked for.
    pub(super) fn shaped(
        &self,
        shape: ToolShape,
        build: impl FnOnce(&ToolShape) -> Arc<[ToolSpec]>,
    ) -> Arc<[ToolSpec]> {
        let mut c = self.shaped.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, specs)) = c.iter().find(|(s, _)| *s == shape) {
            return specs.clone();
        }
        let specs = build(&shape);
        if c.len() >= TOOL_SHAPES_MAX {
            c.clear();
        }
        c.push((shape, specs.clone()));
        specs
    }
}

/// What a drive keeps of its run while it drives: the view (§6.1 statuses, budgets) and the
/// conversation, each extended by every event appended, so a turn costs the same at turn 5,000
/// as at turn 5.
struct DriveState {
    view: RunView,
    messages: Vec<ChatMessage>,
    /// The run's record as the drive opened it (`None` for an external agent's call). Its
    /// trigger, scope and spec never change; its state and lease may have since.
    run: Option<Arc<RunRecord>>,
}

/// Asked at each turn boundary and before each tool call of a run: has its work been
/// cancelled (a task's owner cancelled it on the board, §9.4, §13.3)? A probe may read the
/// store; it answers `true` once the cancel is durable.
pub type StopProbe = Arc<dyn Fn() -> bool + Send + Sync>;

/// The runs driven by this host right now (several threads may drive different runs), and the
/// stop probes of the runs that have one.
#[derive(Default)]
pub(crate) struct Drives(
    std::sync::Mutex<HashMap<String, Arc<std::sync::Mutex<DriveState>>>>,
    std::sync::Mutex<HashMap<String, StopProbe>>,
);

impl Drives {
    /// Ask `probe` before every turn and tool call of `run_id` until `unwatch`.
    pub(super) fn watch(&self, run_id: &str, probe: StopProbe) {
        self.1
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(run_id.to_string(), probe);
    }

    pub(super) fn unwatch(&self, run_id: &str) {
        self.1
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(run_id);
    }

    /// Whether the run's work was cancelled (no probe: never).
    pub(super) fn stop_requested(&self, run_id: &str) -> bool {
        let probe = self
            .1
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(run_id)
            .cloned();
        probe.is_some_and(|p| p())
    }

    fn get(&self, run_id: &str) -> Option<Arc<std::sync::Mutex<DriveState>>> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(run_id)
            .cloned()
    }

    fn open(&self, run: &Arc<RunRecord>, view: RunView, messages: Vec<ChatMessage>) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).insert(
            run.id.clone(),
            Arc::new(std::sync::Mutex::new(DriveState {
                view,
                messages,
                run: Some(run.clone()),
            })),
        );
    }

    /// The record of a run being driven by this process, as its drive opened it (shared, not
    /// copied: it holds the run's whole spec).
    fn record(&self, run_id: &str) -> Option<Arc<RunRecord>> {
        let d = self.get(run_id)?;
        let d = d.lock().unwrap_or_else(|p| p.into_inner());
        d.run.clone()
    }

    /// Open a run's state unless a drive of this process already has it open (`false`).
    fn try_open(&self, run_id: &str, view: RunView) -> bool {
        let mut m = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if m.contains_key(run_id) {
            return false;
        }
        m.insert(
            run_id.to_string(),
            Arc::new(std::sync::Mutex::new(DriveState {
                view,
                messages: vec![],
                run: None,
            })),
        );
        true
    }

    /// The drive of `run_id` is over: its state goes, and its view comes back when nothing
    /// else holds it.
    fn close(&self, run_id: &str) -> Option<RunView> {
        let state = self
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(run_id)?;
        let state = Arc::into_inner(state)?;
        Some(state.into_inner().unwrap_or_else(|p| p.into_inner()).view)
    }

    fn apply(&self, run_id: &str, at_ms: i64, delivery: Option<&str>, event: &Event) {
        if let Some(d) = self.get(run_id) {
            let mut d = d.lock().unwrap_or_else(|p| p.into_inner());
            d.view.apply_event(at_ms, delivery, event);
            if let Some(m) = turn::chat_message(event, delivery) {
                d.messages.push(m);
            }
        }
    }

    fn view(&self, run_id: &str) -> Option<RunView> {
        let d = self.get(run_id)?;
        let d = d.lock().unwrap_or_else(|p| p.into_inner());
        Some(d.view.clone())
    }

    /// Run `f` over the conversation of a run being driven (no copy of it).
    fn with_messages<T>(&self, run_id: &str, f: impl FnOnce(&[ChatMessage]) -> T) -> Option<T> {
        let d = self.get(run_id)?;
        let d = d.lock().unwrap_or_else(|p| p.into_inner());
        Some(f(&d.messages))
    }
}

/// An event about to be journaled: typed (one serde type per kind, `vouch_store::journal`),
/// with the delivery it is about.
pub(super) struct Ev {
    event: Event,
    delivery: Option<String>,
}

/// The person's presence for a run at a moment (§11.1): `watching` while a surface of the
/// run holds a presence lease, `nearby` while they were active in the product recently.
pub trait PresenceSource: Send + Sync {
    fn presence(&self, run: &RunRecord, now_ms: i64) -> Option<Presence>;
}

/// What the person asked for, and how the run should be driven.
#[derive(Debug, Clone)]
pub struct RunSpec {
    pub trigger: TriggerKind,
    pub title: String,
    pub presence: Option<Presence>,
    pub quiet: bool,
    /// The model that drives the run (stored typed in the run's spec).
    pub model: ModelSpec,
    /// Ledger scope for scheduled runs (the slot); otherwise the chain root.
    pub scope: Option<String>,
}

pub(super) struct CallResult {
    ok: bool,
    text: String,
    suspend: Option<String>,
    /// The host ends the run after this call (§5.3: a contradiction with the question spent).
    end: Option<String>,
    /// Malformed arguments the model can repair; counts against `repairs_max`.
    repair: bool,
}

impl CallResult {
    fn ok(text: impl Into<String>) -> Self {
        CallResult {
            ok: true,
            text: text.into(),
            suspend: None,
            end: None,
            repair: false,
        }
    }
    fn err(text: impl Into<String>) -> Self {
        CallResult {
            ok: false,
            text: text.into(),
            suspend: None,
            end: None,
            repair: false,
        }
    }
    /// Arguments the model sent malformed: returned to it to repair, and counted.
    fn repair(text: impl Into<String>) -> Self {
        CallResult {
            repair: true,
            ..CallResult::err(text)
        }
    }
}

/// A run or card id: 20 hex digits, the clock's milliseconds first (ids sort by when they
/// were made, as a UUIDv7's prefix does), then the clock's [`Clock::id_bits`] (random on the
/// system clock, counted on a manual one so a seeded world makes the same ids every time).
pub fn new_id(clock: &dyn Clock) -> String {
    let ms = clock.now_ms().max(0) as u64 & 0xffff_ffff_ffff;
    format!("{ms:012x}7{:07x}", clock.id_bits() & 0xfff_ffff)
}

impl Host {
    fn say(&self, line: &str) {
        if let Some(p) = &self.progress {
            p(line);
        }
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    /// Append an event and honour an injected crash point right after it is durable.
    /// Append one typed event to a run's journal (buffered until the next durability point,
    /// §3.4.2), fold it into the drive's view and conversation, then pass its crash point.
    fn journal(&self, run_id: &str, ev: Ev) -> HostResult<()> {
        let kind = ev.event.kind();
        let at_ms = self.now();
        let new = NewEvent {
            kind,
            delivery: ev.delivery.clone(),
            body: ev.event.encode(),
            at_ms,
        };
        self.store.append_owned(run_id, new)?;
        self.drives
            .apply(run_id, at_ms, ev.delivery.as_deref(), &ev.event);
        self.crash_point(kind.as_str(), ev.delivery.as_deref())
    }

    fn crash_point(&self, point: &str, delivery: Option<&str>) -> HostResult<()> {
        if let Some(plan) = &self.crash {
            if plan.hit(point, delivery) {
                // "Crash after EVENT": EVENT is durable when the process dies, unless the plan
                // asks for a crash between two durability points (`~EVENT`), which loses what
                // was still buffered.
                if !plan.volatile {
                    self.store.flush()?;
                }
                match plan.mode {
                    CrashMode::Abort => {
                        // A closed stderr must not turn the abort into a panic.
                        let _ = writeln!(std::io::stderr(), "vouch: injected crash after {point}");
                        std::process::abort();
                    }
                    CrashMode::Simulate => return Err(HostError::Crashed(point.to_string())),
                }
            }
        }
        Ok(())
    }

    /// A run-level event.
    fn ev(&self, event: impl Into<Event>) -> Ev {
        Ev {
            event: event.into(),
            delivery: None,
        }
    }

    /// An event about one delivery.
    fn evd(&self, d: &str, event: impl Into<Event>) -> Ev {
        Ev {
            event: event.into(),
            delivery: Some(d.to_string()),
        }
    }

    fn lease(&self, run_id: &str) -> HostResult<()> {
        let now = self.now();
        let until = now + self.limits.lease_ms;
        if self.store.lease_run(run_id, &self.owner, now, until)? {
            return Ok(());
        }
        // The holder may be a process of this machine that died: its lease is void.
        if let Some(holder) = self.store.run(run_id)?.and_then(|r| r.owner) {
            if self.owner_is_dead(Some(&holder)) {
                return self.take_over(run_id, &holder);
            }
        }
        Err(Self::owned_elsewhere(run_id))
    }

    /// Take the lease of a run whose holder `gone` is known to have exited (§9.2.5): one
    /// conditional write, which fails if the holder changed meanwhile.
    fn take_over(&self, run_id: &str, gone: &str) -> HostResult<()> {
        let now = self.now();
        if self
            .store
            .take_over_run(run_id, gone, &self.owner, now, now + self.limits.lease_ms)?
        {
            return Ok(());
        }
        Err(Self::owned_elsewhere(run_id))
    }

    fn owned_elsewhere(run_id: &str) -> HostError {
        HostError::OwnedElsewhere(format!(
            "run {run_id} is owned by another live process; wait for it or stop it first"
        ))
    }
}

/// Runs scanned at boot for dead local owners.
pub const RUNS_SCAN_MAX: usize = 100_000;

impl Host {
    /// A run's record as the store holds it now.
    pub(super) fn record(&self, run_id: &str) -> HostResult<RunRecord> {
        self.store.run(run_id)?.ok_or_else(|| HostError::NotFound {
            what: "run",
            id: run_id.to_string(),
        })
    }

    /// A run's view: the drive's own while this process drives it, else folded from the store.
    pub(super) fn view(&self, run_id: &str) -> HostResult<RunView> {
        if let Some(v) = self.drives.view(run_id) {
            return Ok(v);
        }
        let events = self.store.journal_events(run_id)?;
        let view = RunView::from_events(&events);
        // Debug builds check the typed read builds the view the entries build, on every view
        // every test and scenario reads (unless the journal grew in between).
        #[cfg(debug_assertions)]
        {
            let entries = self.store.journal(run_id)?;
            if entries.len() == events.len() {
                assert_eq!(
                    view,
                    RunView::from_journal(&entries),
                    "run {run_id}: the view from typed events differs from the journal's"
                );
            }
        }
        Ok(view)
    }

    /// True when `owner` is a process known to be running (this one included).
    pub(super) fn owner_is_alive(&self, owner: Option<&str>) -> bool {
        owner.and_then(|o| self.liveness.of(o)) == Some(true)
    }

    /// True when `owner` is a process known to have exited.
    pub(super) fn owner_is_dead(&self, owner: Option<&str>) -> bool {
        owner.and_then(|o| self.liveness.of(o)) == Some(false)
    }
}

fn dedup_items(m: &Manifest) -> Vec<vouch_core::Delivery> {
    let mut seen = std::collections::BTreeSet::new();
    m.deliveries
        .iter()
        .filter(|d| seen.insert(d.id.clone()))
        .cloned()
        .collect()
}

pub fn presence_of(run: &RunRecord) -> (Presence, bool) {
    let spec = vouch_store::spec::SpecHead::read(&run.spec);
    (spec.presence_or_default(run.trigger), spec.quiet)
}

fn summary(m: &Manifest) -> String {
    m.deliveries
        .iter()
        .map(|d| format!("{} {} → {}", d.id, d.verb, d.destination))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The provider's reply as the journal records it.
fn reply_record(r: &AttemptReply) -> j::ProviderReply {
    match r.clone() {
        AttemptReply::Accepted { reference, .. } => j::ProviderReply::Accepted { reference },
        AttemptReply::AcceptedUnverifiable { reference } => {
            j::ProviderReply::AcceptedUnverifiable { reference }
        }
        AttemptReply::Rejected { reason } => j::ProviderReply::Rejected { reason },
        AttemptReply::Lost { reason } => j::ProviderReply::Lost { reason },
    }
}

/// Evidence (§6): the status follows the host's observation, then the provider's reply.
fn judge(reply: &AttemptReply, obs: &Observation) -> (DeliveryStatus, String, String) {
    match (reply, obs) {
        (_, Observation::Present { evidence }) => {
            (DeliveryStatus::Verified, evidence.clone(), String::new())
        }
        (AttemptReply::Rejected { reason }, _) => {
            (DeliveryStatus::Failed, String::new(), reason.clone())
        }
        (AttemptReply::Accepted { .. }, Observation::Absent { reason }) => (
            DeliveryStatus::Failed,
            String::new(),
            format!("the tool reported success but {reason}"),
        ),
        (AttemptReply::Lost { reason }, Observation::Absent { .. }) => {
            (DeliveryStatus::Failed, String::new(), reason.clone())
        }
        (AttemptReply::AcceptedUnverifiable { reference }, _) => (
            DeliveryStatus::Unconfirmed,
            reference.clone(),
            String::new(),
        ),
        (AttemptReply::Lost { .. }, Observation::Unobservable) => (
            DeliveryStatus::Unknown,
            String::new(),
            "the response was lost".into(),
        ),
        (AttemptReply::Accepted { reference, .. }, Observation::Unobservable) => {
            (DeliveryStatus::Verified, reference.clone(), String::new())
        }
    }
}
