//! Building a host. What every host needs is given to [`Host::new`]; the rest starts at the
//! value almost every host wants and is changed by a `with_*` method before the host is used.
//! The fields stay inside the runtime, so an interface reaches the host through its methods
//! only (`reads.rs` for what it shows) and keeps its own handle on the store it built the host
//! from when it needs the store itself.

use super::{
    CapabilityRegistry, Clock, CrashPlan, DestinationKind, Host, Limits, Liveness, LocalProcesses,
    ModelFactory, Notifier, PresenceSource, Progress, Provider, WorkTools,
};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use vouch_core::{Context, Verb};
use vouch_store::Store;

/// What a host acts through, chosen by its interface — the CLI from the home's `vouch.toml`,
/// the runner and the simulator from their world, a test from its fakes — so the host never
/// names an adapter.
pub struct HostParts {
    /// What each destination allows (§5).
    pub caps: Arc<dyn CapabilityRegistry>,
    /// Who performs an act, by the kind of its destination (§8).
    pub providers: BTreeMap<DestinationKind, Arc<dyn Provider>>,
    /// Where an outbox row goes (§11.4).
    pub notifier: Arc<dyn Notifier>,
    /// Each run's model, from its stored spec.
    pub models: Arc<dyn ModelFactory>,
    /// The work tools offered beside the host's own.
    pub work: Arc<dyn WorkTools>,
}

impl Host {
    /// A host over `store` on `clock`, holding run leases as `owner` and writing drafts into
    /// `drafts_dir`. It starts with no crash plan, [`Limits::default`], no progress lines, no
    /// runtime policy, each run's own presence, and this machine's processes as the judge of
    /// whether a lease holder still runs ([`LocalProcesses`]).
    pub fn new(
        store: Arc<dyn Store>,
        clock: Arc<dyn Clock>,
        owner: impl Into<String>,
        drafts_dir: impl Into<PathBuf>,
        parts: HostParts,
    ) -> Host {
        let HostParts {
            caps,
            providers,
            notifier,
            models,
            work,
        } = parts;
        Host {
            store,
            clock,
            caps,
            providers,
            notifier,
            models,
            work,
            crash: None,
            owner: owner.into(),
            drafts_dir: drafts_dir.into(),
            limits: Limits::default(),
            progress: None,
            policy_forbid: vec![],
            presence: None,
            liveness: Arc::new(LocalProcesses),
            drives: Default::default(),
            tools: Default::default(),
        }
    }

    /// The same host under another owner (a board worker's host on a shared store).
    pub fn with_owner(mut self, owner: impl Into<String>) -> Host {
        self.owner = owner.into();
        self
    }

    /// The crash plan the host honours (scenario runner, simulator, `VOUCH_CRASH_AFTER`).
    pub fn with_crash(mut self, plan: Option<CrashPlan>) -> Host {
        self.crash = plan;
        self
    }

    /// Arm (or, with `None`, disarm) the crash plan of a host in use, between two of its
    /// steps; the plan it had comes back.
    pub fn arm_crash(&mut self, plan: Option<CrashPlan>) -> Option<CrashPlan> {
        std::mem::replace(&mut self.crash, plan)
    }

    pub fn with_limits(mut self, limits: Limits) -> Host {
        self.limits = limits;
        self
    }

    /// Where progress lines go (`--watch`); `None`: nowhere.
    pub fn with_progress(mut self, progress: Option<Progress>) -> Host {
        self.progress = progress;
        self
    }

    /// Where the person is right now (§11.1), instead of each run's own setting.
    pub fn with_presence(mut self, presence: Arc<dyn PresenceSource>) -> Host {
        self.presence = Some(presence);
        self
    }

    /// Who tells whether a lease holder's process still runs (§9.2.5).
    pub fn with_liveness(mut self, liveness: Arc<dyn Liveness>) -> Host {
        self.liveness = liveness;
        self
    }

    /// Runtime policy (§13.6): verbs forbidden per context.
    pub fn with_policy_forbid(mut self, forbid: Vec<(Context, Verb)>) -> Host {
        self.policy_forbid = forbid;
        self
    }

    /// Other work tools: task and patch attempts wrap the ones the host was built with
    /// ([`Host::work`]) in their own.
    pub fn with_work(mut self, work: Arc<dyn WorkTools>) -> Host {
        self.work = work;
        self
    }

    /// Another model factory (a test's or the runner's, wrapping [`Host::models`]).
    pub fn with_models(mut self, models: Arc<dyn ModelFactory>) -> Host {
        self.models = models;
        self
    }

    /// The work tools the host offers.
    pub fn work(&self) -> &Arc<dyn WorkTools> {
        &self.work
    }

    /// The model factory the host builds each run's model with.
    pub fn models(&self) -> &Arc<dyn ModelFactory> {
        &self.models
    }

    /// The host's bounds on a run.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
}
