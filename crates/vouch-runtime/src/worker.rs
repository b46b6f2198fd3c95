//! The board's worker loop (§13.2–§13.4) as one library type, driven by the injected clock:
//! claim, heartbeat, run the attempt as a vouch run, report — and the failure classes (the
//! board refused, a retryable outage, a cancel, a suspension). `vouch worker` drives it with
//! threads and real sleeps (`WorkerLoop::run`); the scenario runner drives single steps
//! (`WorkerLoop::attempt`) on a manual clock. The loop talks to the board only through
//! `BoardClient`, so the same cycle runs against the local store (`LocalBoard`) or any other
//! implementation of the calls. It decides nothing the board or the host decides: the board's
//! procedures guard every transition; the host decides the attempt's report.

use crate::clock::Clock;
use crate::host::{
    AttemptJob, AttemptOutcome, HostError, RuntimeProfile, StopProbe, TaskTypes, TaskWork,
};
use crate::model::{Outage, OutageBackoff};
use crate::Host;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use vouch_core::board::FailureClass;
use vouch_core::board::TaskState;
use vouch_store::board::{
    claim_statement, fresh_nonce, heartbeat_statement, report_statement, AttemptRef, BoardStore,
    Claim, ClaimRequest, Heartbeat, Report, ReportKind, Reported, Stamp, Usage,
};
use vouch_store::StoreError;

/// How long the loop waits between looks at an empty board.
pub const IDLE_POLL_MS: u64 = 200;
/// A resumption refused its run because another process still holds it tries again this
/// many times, this far apart, before it gives the claim back (an abort).
pub const RESUME_TRIES_MAX: u32 = 10;
pub const RESUME_RETRY_MS: u64 = 200;
/// How often the loop sweeps the board (orphaned attempts, deadlines, conditions).
pub const SWEEP_EVERY_MS: i64 = 500;

/// Why a board call did not do what was asked, by what the loop does next.
#[derive(Debug, Clone, thiserror::Error)]
pub enum WorkerError {
    /// The board refused (the attempt ended, another claimant holds it, a stale epoch):
    /// nothing changed; stop working on this attempt.
    #[error("{0}")]
    Refused(String),
    /// Busy or unreachable: try again.
    #[error("{0}; trying again")]
    Retry(String),
    /// Anything else: the worker cannot go on.
    #[error("{0}")]
    Fatal(String),
}

impl From<StoreError> for WorkerError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::Conflict(_) | StoreError::NotFound { .. } => Self::Refused(e.to_string()),
            StoreError::Retryable(_) => Self::Retry(e.to_string()),
            other => Self::Fatal(other.to_string()),
        }
    }
}

/// Signs the worker's claims and reports (§13.6): the board refuses any whose signature is
/// not the claimant's. `None` where the board verifies nothing (the scenario runner).
pub trait Signer: Send + Sync {
    fn sign(&self, statement: &str) -> Result<String, String>;
}

/// The calls one worker cycle makes. Implementations sign what they send with the worker's
/// key and map their failures onto `WorkerError`.
pub trait BoardClient: Send + Sync {
    /// End orphaned attempts, expire deadlines, promote waiting tasks (a host that sweeps
    /// itself may do nothing).
    fn sweep(&self, now_ms: i64) -> Result<(), WorkerError>;
    fn claim(&self, req: ClaimRequest) -> Result<Option<Claim>, WorkerError>;
    fn heartbeat(&self, at: &AttemptRef, now_ms: i64) -> Result<Heartbeat, WorkerError>;
    /// The attempt waits for a person with its run (§13.3); the worker is free.
    fn suspend(&self, at: &AttemptRef, run_id: &str, now_ms: i64) -> Result<(), WorkerError>;
    /// Report the attempt's end; an accepted output is read back by its content id.
    fn report(&self, report: Report) -> Result<Reported, WorkerError>;
    /// Has the task's owner cancelled it (the board's word, between heartbeats)?
    fn cancelled(&self, task_id: &str) -> bool;
    /// Run the claimed attempt as a vouch run — or continue the suspended run `resume` —
    /// asking `stop` at each turn boundary and before each tool call.
    fn run(
        &self,
        job: &AttemptJob,
        resume: Option<&str>,
        stop: StopProbe,
    ) -> Result<AttemptOutcome, HostError>;
}

/// The local board: the home's store (signed through `signer`, when the store verifies)
/// and the host that runs attempts through the same store.
pub struct LocalBoard {
    pub board: Arc<dyn BoardStore>,
    pub host: Arc<Host>,
    pub work: Arc<TaskWork>,
    pub types: Arc<TaskTypes>,
    pub signer: Option<Arc<dyn Signer>>,
}

impl LocalBoard {
    fn sign(
        &self,
        statement: vouch_store::StoreResult<String>,
    ) -> Result<Option<String>, WorkerError> {
        let Some(signer) = &self.signer else {
            return Ok(None);
        };
        signer
            .sign(&statement?)
            .map(Some)
            .map_err(|e| WorkerError::Fatal(format!("sign: {e}")))
    }
}

impl BoardClient for LocalBoard {
    fn sweep(&self, now_ms: i64) -> Result<(), WorkerError> {
        // Fenced across hosts: when another process is sweeping, that sweep does this work.
        let swept =
            vouch_store::board::sweep_fenced(&*self.host.store, &*self.board, now_ms, false)?;
        // Every ended attempt whose run's cost nobody reported is charged from its run's
        // journal (§13.7.2); a failure is tried again at the next sweep.
        crate::cost::charge_uncharged(&*self.host.store, &*self.board, now_ms)?;
        // The sweeper that held the duty ends the runs whose attempt ended, and settles the
        // suspended attempts whose run ended (§13.3).
        if swept.is_some() {
            self.host
                .tend_task_runs(&*self.board)
                .map_err(|e| WorkerError::Retry(format!("tending task runs: {e}")))?;
        }
        Ok(())
    }
    fn claim(&self, mut req: ClaimRequest) -> Result<Option<Claim>, WorkerError> {
        if self.signer.is_some() {
            req.nonce = Some(fresh_nonce()?);
        }
        req.signature = self.sign(claim_statement(&req))?;
        Ok(self.board.claim(&req)?)
    }
    fn heartbeat(&self, at: &AttemptRef, now_ms: i64) -> Result<Heartbeat, WorkerError> {
        if self.signer.is_none() {
            return Ok(self.board.heartbeat(at, now_ms)?);
        }
        let stamp = Stamp {
            at_ms: now_ms,
            nonce: fresh_nonce()?,
        };
        let signature = self.sign(heartbeat_statement(at, &stamp))?;
        Ok(self
            .board
            .heartbeat_signed(at, now_ms, &stamp, signature.as_deref())?)
    }
    fn suspend(&self, at: &AttemptRef, run_id: &str, now_ms: i64) -> Result<(), WorkerError> {
        self.board.suspend(at, run_id, now_ms).map(|_| ())?;
        Ok(())
    }
    fn report(&self, mut r: Report) -> Result<Reported, WorkerError> {
        if self.signer.is_some() {
            r.stamp = Some(Stamp {
                at_ms: r.now_ms,
                nonce: fresh_nonce()?,
            });
        }
        r.signature = self.sign(report_statement(&r))?;
        let done = self.board.report(&r)?;
        // Acceptance is observed, not assumed: read the output back by its content id.
        if let (Some(id), ReportKind::Accepted { result, .. }) = (&done.task.result_id, &r.kind) {
            let back = self.board.result(id)?;
            if back.as_ref() != Some(result) {
                return Err(WorkerError::Fatal(format!(
                    "the board stored {id} but reads back something else"
                )));
            }
        }
        Ok(done)
    }
    fn cancelled(&self, task_id: &str) -> bool {
        matches!(self.board.task(task_id), Ok(Some(t)) if t.state == TaskState::Cancelled)
    }
    fn run(
        &self,
        job: &AttemptJob,
        resume: Option<&str>,
        stop: StopProbe,
    ) -> Result<AttemptOutcome, HostError> {
        self.host
            .run_task_attempt_until(&self.work, &self.types, job, resume, stop)
    }
}

/// What the loop did, for the interface to render.
#[derive(Debug, Clone, PartialEq)]
pub enum WorkerEvent {
    Started,
    Claimed {
        task: String,
        attempt: u32,
        resumption: bool,
    },
    /// The attempt waits for a person with its run; the worker is free.
    Suspended {
        task: String,
        attempt: u32,
        run: String,
    },
    /// The owner cancelled the task; nothing is reported (the board's cancel won).
    Cancelled {
        task: String,
        run: Option<String>,
    },
    Reported {
        task: String,
        attempt: u32,
        attempt_state: String,
        task_state: String,
        result: Option<String>,
        run: Option<String>,
    },
    /// The board refused the report; nothing changed.
    Refused {
        task: String,
        attempt: u32,
        reason: String,
    },
    /// Something went wrong that the loop survives (a sweep, a heartbeat, a claim).
    Warning(String),
    Stopped,
}

/// How one attempt ended, as the loop saw it.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptEnd {
    /// The board took the report; `accepted` when it carried an accepted submission.
    Reported {
        run: Option<String>,
        accepted: bool,
    },
    /// The board refused the report (the attempt had ended or was no longer this worker's).
    Refused {
        run: Option<String>,
    },
    Suspended {
        run: String,
    },
    Cancelled {
        run: Option<String>,
    },
}

impl AttemptEnd {
    pub fn run(&self) -> Option<&str> {
        match self {
            Self::Reported { run, .. } | Self::Refused { run } | Self::Cancelled { run } => {
                run.as_deref()
            }
            Self::Suspended { run } => Some(run),
        }
    }
}

/// A seam between the run and its report (the scenario runner stalls or cancels there).
pub type BeforeReport = Arc<dyn Fn(&AttemptRef) + Send + Sync>;

/// Who the worker is and what it claims.
#[derive(Clone)]
pub struct WorkerConfig {
    /// The identity claiming and reporting.
    pub name: String,
    /// The runtime profile name claimed under.
    pub profile: String,
    /// Only these task types / tags (empty: any).
    pub types: Vec<String>,
    pub tags: Vec<String>,
    /// The model of every attempt's run: `{"kind":"script","turns":[…]}` or `{"kind":"openai"}`.
    pub model: Value,
    /// Malformed submissions an attempt may repair.
    pub repairs: u32,
    /// Attempts run at once (`run` only).
    pub concurrency: usize,
    /// `run` returns once nothing is claimable and no attempt is running.
    pub drain: bool,
    /// Hold each claimed attempt this long (heartbeating) before running it.
    pub attempt_delay_ms: u64,
    /// Heartbeat from a thread while the attempt runs (real workers; a manual clock: no).
    pub beat_while_running: bool,
}

/// The worker loop. Small on purpose: build it, then `run` (a real worker) or `attempt`
/// (one claimed attempt, for callers that claim themselves).
pub struct WorkerLoop {
    pub client: Arc<dyn BoardClient>,
    pub clock: Arc<dyn Clock>,
    pub config: WorkerConfig,
    /// The runtime profile, read again before every claim (§13.6).
    pub profile: Arc<dyn Fn() -> Result<RuntimeProfile, String> + Send + Sync>,
    /// Where the loop says what it did.
    pub events: Arc<dyn Fn(WorkerEvent) + Send + Sync>,
    /// Set to stop: no new claim; a held attempt aborts, retryably.
    pub stop: Arc<AtomicBool>,
    pub before_report: Option<BeforeReport>,
    backoff: Arc<Mutex<OutageBackoff>>,
}

/// What one look at the board found.
enum Look {
    Claimed(Box<Claim>),
    /// Nothing claimable.
    Empty,
    /// The model is out, or the board busy: look again after this many milliseconds.
    Wait(u64),
}

impl WorkerLoop {
    pub fn new(
        client: Arc<dyn BoardClient>,
        clock: Arc<dyn Clock>,
        config: WorkerConfig,
        profile: Arc<dyn Fn() -> Result<RuntimeProfile, String> + Send + Sync>,
        events: Arc<dyn Fn(WorkerEvent) + Send + Sync>,
    ) -> Self {
        WorkerLoop {
            client,
            clock,
            config,
            profile,
            events,
            stop: Arc::new(AtomicBool::new(false)),
            before_report: None,
            backoff: Arc::new(Mutex::new(OutageBackoff::default())),
        }
    }

    fn now(&self) -> i64 {
        self.clock.now_ms()
    }

    fn say(&self, e: WorkerEvent) {
        (self.events)(e)
    }

    /// Claim and run attempts until stopped (or, with `drain`, until nothing is claimable and
    /// nothing runs): up to `concurrency` attempts at once, each on its own thread. Sweeps the
    /// board every `SWEEP_EVERY_MS`; after a retryable model outage no claim is made until
    /// the backoff has passed (§13.4.1). `Err` only when the board cannot be used at all.
    pub fn run(self: &Arc<Self>) -> Result<(), WorkerError> {
        let running = Arc::new(AtomicUsize::new(0));
        let mut handles: Vec<std::thread::JoinHandle<()>> = vec![];
        let mut profile = (self.profile)().map_err(WorkerError::Fatal)?;
        let mut swept_ms = i64::MIN;
        self.say(WorkerEvent::Started);
        while !self.stop.load(Ordering::SeqCst) {
            let now = self.now();
            if now.saturating_sub(swept_ms) >= SWEEP_EVERY_MS {
                // A sweep that loses a race or meets a busy store is tried again next time.
                if let Err(e) = self.client.sweep(now) {
                    self.say(WorkerEvent::Warning(format!("sweep: {e}")));
                }
                swept_ms = now;
            }
            if running.load(Ordering::SeqCst) >= self.config.concurrency.max(1) {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            }
            let claim = match self.look(&mut profile)? {
                Look::Claimed(c) => c,
                Look::Empty if self.config.drain && running.load(Ordering::SeqCst) == 0 => break,
                Look::Empty => {
                    std::thread::sleep(Duration::from_millis(IDLE_POLL_MS));
                    continue;
                }
                Look::Wait(ms) => {
                    std::thread::sleep(Duration::from_millis(ms));
                    continue;
                }
            };
            running.fetch_add(1, Ordering::SeqCst);
            let (me, running2) = (self.clone(), running.clone());
            handles.push(std::thread::spawn(move || {
                if let Err(e) = me.attempt(*claim) {
                    me.say(WorkerEvent::Warning(format!(
                        "attempt failed in the worker: {e}"
                    )));
                }
                running2.fetch_sub(1, Ordering::SeqCst);
            }));
            handles.retain(|h| !h.is_finished());
        }
        for h in handles {
            let _ = h.join();
        }
        self.say(WorkerEvent::Stopped);
        Ok(())
    }

    /// One look at the board: the backoff, the profile as it is now, one signed claim.
    fn look(&self, profile: &mut RuntimeProfile) -> Result<Look, WorkerError> {
        let now = self.now();
        // The model is out: no new claim until the backoff has passed, so an outage does not
        // burn every attempt of the board in seconds (issue 22 #4).
        let wait_ms = self.backoff.lock().map(|b| b.wait_ms(now)).unwrap_or(0);
        if wait_ms > 0 {
            return Ok(Look::Wait((wait_ms as u64).min(IDLE_POLL_MS)));
        }
        match (self.profile)() {
            Ok(p) => *profile = p,
            Err(e) => self.say(WorkerEvent::Warning(format!(
                "{e}; claiming under the profile as it was last read"
            ))),
        }
        let c = &self.config;
        let req = ClaimRequest {
            claimant: c.name.clone(),
            profile: c.profile.clone(),
            model: Some(c.model["kind"].as_str().unwrap_or("openai").to_string()),
            policy_fingerprint: profile.fingerprint.clone(),
            types: c.types.clone(),
            tags: c.tags.clone(),
            task_id: None,
            signature: None,
            nonce: None,
            policy: profile.policy.clone(),
            now_ms: now,
            run_id: None,
        };
        match self.client.claim(req) {
            Ok(Some(claim)) => {
                self.say(WorkerEvent::Claimed {
                    task: claim.task.id.clone(),
                    attempt: claim.attempt.n,
                    resumption: claim.resumption,
                });
                Ok(Look::Claimed(Box::new(claim)))
            }
            Ok(None) => Ok(Look::Empty),
            Err(e @ (WorkerError::Retry(_) | WorkerError::Refused(_))) => {
                self.say(WorkerEvent::Warning(format!("claim: {e}")));
                Ok(Look::Wait(IDLE_POLL_MS))
            }
            Err(e) => Err(e),
        }
    }

    /// Run one claimed attempt to its end: the first heartbeat (which moves the task to
    /// running), the optional hold, the run under the profile snapshot its claim recorded,
    /// and the report the host decided — or nothing, when the owner cancelled (the board's
    /// cancel won) or the run waits for a person (the attempt is suspended with its run).
    pub fn attempt(&self, claim: Claim) -> Result<AttemptEnd, WorkerError> {
        let at = AttemptRef {
            task_id: claim.task.id.clone(),
            n: claim.attempt.n,
            claimant: claim.attempt.claimant.clone(),
            epoch: claim.attempt.epoch,
        };
        if self.client.heartbeat(&at, self.now())?.cancelled {
            return Ok(self.cancelled(&at, None));
        }
        let beat = Beat::start(self, &at, claim.task.spec.heartbeat_ms);
        let end = self.attempt_beating(&claim, &at, &beat);
        beat.end();
        end
    }

    fn attempt_beating(
        &self,
        claim: &Claim,
        at: &AttemptRef,
        beat: &Beat,
    ) -> Result<AttemptEnd, WorkerError> {
        if let Some(end) = self.hold(at, beat)? {
            return Ok(end);
        }
        // The run enforces the snapshot this claim recorded, not the file as it is now.
        let policy = claim.attempt.detail.get("policy").cloned();
        let profile = match RuntimeProfile::from_policy(policy.unwrap_or_default()) {
            Ok(p) if p.fingerprint == claim.attempt.policy_fingerprint => p,
            _ => {
                let why = "the attempt's recorded policy does not match its fingerprint";
                let class = FailureClass::PolicyRefusal;
                return self.finish(at, failed(false, why.into(), class), None);
            }
        };
        let t = &claim.task;
        let job = AttemptJob {
            task_id: t.id.clone(),
            attempt: claim.attempt.n,
            kind: t.kind.clone(),
            brief: t.spec.brief.clone(),
            input: t.spec.input.clone(),
            criteria: t.spec.criteria.clone(),
            model: self.config.model.clone(),
            repairs_max: self.config.repairs,
            profile: Some(profile),
            lease: Some(at.clone()),
        };
        // The run asks at each turn boundary and before each tool call whether the task was
        // cancelled: the heartbeat's answer, or the board itself, so nothing is attempted once
        // the cancel is durable even between heartbeats (issue 22 #5).
        let stop: StopProbe = {
            let (client, cancelled, task) =
                (self.client.clone(), beat.cancelled.clone(), t.id.clone());
            Arc::new(move || cancelled.load(Ordering::SeqCst) || client.cancelled(&task))
        };
        // A resumption continues the suspended attempt's own run, whoever started it (§13.3).
        let resume = match (claim.resumption, claim.attempt.run_id.as_deref()) {
            (true, Some(run)) => Some(run),
            _ => None,
        };
        let out = self.run_resumable(&job, resume, &stop);
        if let (Some(run), Err(HostError::OwnedElsewhere(e))) = (resume, &out) {
            // Still held by another process (the one carrying the decision through): the
            // claim goes back to the board, which does not count it against the attempts.
            let reason = format!("the resumption could not take run {run} yet: {e}");
            return self.finish(at, ReportKind::Aborted { reason }, None);
        }
        if stop() {
            // The board's cancel won: its attempt is already `cancelled`, so nothing is
            // reported; the run ended `cancel` with its receipt.
            return Ok(self.cancelled(at, out.ok().map(|o| o.run_id)));
        }
        self.after_run(at, out)
    }

    /// Run the attempt. A resumption whose run another process still holds (a decider
    /// releases it within moments, §13.3) is tried again a few times before it gives up:
    /// `owned_elsewhere` on a resumption is transient, never the attempt's failure.
    fn run_resumable(
        &self,
        job: &AttemptJob,
        resume: Option<&str>,
        stop: &StopProbe,
    ) -> Result<AttemptOutcome, HostError> {
        let mut tries = 0;
        loop {
            let out = self.client.run(job, resume, stop.clone());
            match out {
                Err(HostError::OwnedElsewhere(_))
                    if resume.is_some() && tries < RESUME_TRIES_MAX && !stop() =>
                {
                    tries += 1;
                    std::thread::sleep(Duration::from_millis(RESUME_RETRY_MS));
                }
                out => return out,
            }
        }
    }

    /// The host decided the run's end: report it, or suspend the attempt with its run.
    fn after_run(
        &self,
        at: &AttemptRef,
        out: Result<AttemptOutcome, HostError>,
    ) -> Result<AttemptEnd, WorkerError> {
        let o = match out {
            Ok(o) => o,
            Err(e) => {
                return self.finish(
                    at,
                    failed(
                        true,
                        format!("the run could not go on: {e}"),
                        FailureClass::ToolError,
                    ),
                    None,
                )
            }
        };
        let Some(kind) = o.report.clone() else {
            self.client.suspend(at, &o.run_id, self.now())?;
            self.say(WorkerEvent::Suspended {
                task: at.task_id.clone(),
                attempt: at.n,
                run: o.run_id.clone(),
            });
            return Ok(AttemptEnd::Suspended { run: o.run_id });
        };
        self.finish(at, kind, Some(o))
    }

    /// The optional hold (demos, crash tests): a shutdown now aborts the attempt, retryably.
    fn hold(&self, at: &AttemptRef, beat: &Beat) -> Result<Option<AttemptEnd>, WorkerError> {
        let mut waited = 0u64;
        while waited < self.config.attempt_delay_ms {
            if self.stop.load(Ordering::SeqCst) {
                let kind = ReportKind::Aborted {
                    reason: "the worker shut down".into(),
                };
                return self.finish(at, kind, None).map(Some);
            }
            if beat.cancelled.load(Ordering::SeqCst) {
                return Ok(Some(self.cancelled(at, None)));
            }
            let step = (self.config.attempt_delay_ms - waited).min(50);
            std::thread::sleep(Duration::from_millis(step));
            waited += step;
        }
        Ok(None)
    }

    fn cancelled(&self, at: &AttemptRef, run: Option<String>) -> AttemptEnd {
        self.say(WorkerEvent::Cancelled {
            task: at.task_id.clone(),
            run: run.clone(),
        });
        AttemptEnd::Cancelled { run }
    }

    /// Report the attempt's end (after the `before_report` seam); a refusal is an answer.
    fn finish(
        &self,
        at: &AttemptRef,
        kind: ReportKind,
        out: Option<AttemptOutcome>,
    ) -> Result<AttemptEnd, WorkerError> {
        let outage = match &kind {
            ReportKind::Failed { reason, .. } => Outage::of(reason),
            _ => None,
        };
        if let Ok(mut b) = self.backoff.lock() {
            b.record(outage, self.now());
        }
        if let Some(hook) = &self.before_report {
            hook(at);
        }
        let accepted = matches!(kind, ReportKind::Accepted { .. });
        let (run, receipt, usage) = match out {
            Some(o) => (Some(o.run_id), o.receipt, o.usage),
            None => (None, None, Usage::default()),
        };
        let report = Report {
            attempt: at.clone(),
            kind,
            run_id: run.clone(),
            receipt,
            usage,
            signature: None,
            stamp: None,
            now_ms: self.now(),
        };
        match self.client.report(report) {
            Ok(done) => {
                self.say(WorkerEvent::Reported {
                    task: at.task_id.clone(),
                    attempt: at.n,
                    attempt_state: done.attempt.state.to_string(),
                    task_state: done.task.state.to_string(),
                    result: done.task.result_id.clone(),
                    run: run.clone(),
                });
                Ok(AttemptEnd::Reported { run, accepted })
            }
            Err(WorkerError::Refused(reason)) => {
                self.say(WorkerEvent::Refused {
                    task: at.task_id.clone(),
                    attempt: at.n,
                    reason,
                });
                Ok(AttemptEnd::Refused { run })
            }
            Err(e) => Err(e),
        }
    }
}

/// A failed report with its class (§13.3.2): what went wrong, never whether to retry.
fn failed(retryable: bool, reason: String, class: FailureClass) -> ReportKind {
    ReportKind::Failed {
        retryable,
        reason,
        class: Some(class),
    }
}

/// The heartbeats of one attempt while it runs: from a thread (real workers) or none (a
/// manual clock, whose caller heartbeats itself). `cancelled` is the heartbeat's answer.
struct Beat {
    done: Arc<AtomicBool>,
    cancelled: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Beat {
    fn start(w: &WorkerLoop, at: &AttemptRef, heartbeat_ms: i64) -> Beat {
        let done = Arc::new(AtomicBool::new(false));
        let cancelled = Arc::new(AtomicBool::new(false));
        let thread = w.config.beat_while_running.then(|| {
            let (client, clock, events) = (w.client.clone(), w.clock.clone(), w.events.clone());
            let (at, done, cancelled) = (at.clone(), done.clone(), cancelled.clone());
            let every = heartbeat_ms.max(10) as u64;
            std::thread::spawn(move || {
                while sleep_unless(&done, every) {
                    match client.heartbeat(&at, clock.now_ms()) {
                        Ok(h) if h.cancelled => {
                            cancelled.store(true, Ordering::SeqCst);
                            break;
                        }
                        Ok(_) => {}
                        // The attempt ended or the lease is gone: stop heartbeating.
                        Err(e @ WorkerError::Refused(_)) => {
                            events(WorkerEvent::Warning(format!("heartbeat: {e}")));
                            break;
                        }
                        // Anything else may pass: keep the lease alive and say so.
                        Err(e) => events(WorkerEvent::Warning(format!("heartbeat: {e}"))),
                    }
                }
            })
        });
        Beat {
            done,
            cancelled,
            thread,
        }
    }

    fn end(self) {
        self.done.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread {
            let _ = t.join();
        }
    }
}

/// Sleep `ms` in short steps so the attempt's end is not held up by a long heartbeat
/// interval; `false` once `done` is set.
fn sleep_unless(done: &AtomicBool, ms: u64) -> bool {
    let mut slept = 0;
    while slept < ms {
        if done.load(Ordering::SeqCst) {
            return false;
        }
        let step = (ms - slept).min(50);
        std::thread::sleep(Duration::from_millis(step));
        slept += step;
    }
    !done.load(Ordering::SeqCst)
}
