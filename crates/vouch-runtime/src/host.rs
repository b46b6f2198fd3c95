//! The host: runs the agent loop, owns every effect, and ends every run through the one
//! reconciler (§9). The model proposes; the host decides, acts, observes and records.

use crate::capability::CapabilityRegistry;
use crate::clock::Clock;
use crate::crash::{CrashMode, CrashPlan};
use crate::model::{ChatMessage, Model, ModelError, ModelTurn, ToolCall, ToolSpec};
use crate::provider::{AttemptReply, AttemptRequest, Observation, Provider};
use crate::view::RunView;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use vouch_core::{
    canonical_json, is_irreversible, ledger_key, payload_hash, posture, ActFacts, Context,
    DeliveryStatus, Destination, DestinationKind, EndedBy, Manifest, Posture, PostureInput,
    Presence, RunState, TriggerKind, Verb,
};
use vouch_store::{
    Card, CardState, Decision, EndResult, EventKind, LedgerEntry, LedgerIntent, LedgerState,
    NewEvent, NewOutbox, NewRun, OutboxRow, RunRecord, Store, StoreError, Terminal,
};

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
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum HostError {
    #[error(transparent)]
    Store(#[from] StoreError),
    /// An injected crash point was reached (scenario runner only).
    #[error("crash injected after {0}")]
    Crashed(String),
    #[error("{0}")]
    Invalid(String),
    /// Another host consumed this schedule slot first (§12.2).
    #[error("slot {0} was already consumed")]
    SlotTaken(String),
    #[error("model: {0}")]
    Model(String),
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
    fn model(&self, spec: &Value, start_turn: usize) -> Result<Box<dyn Model>, String>;
}

/// Delivers one outbox row on its route (desktop notification, push webhook, test counter).
pub trait Notifier: Send + Sync {
    fn notify(&self, row: &OutboxRow) -> Result<(), String>;
}

/// Where progress lines go (`--watch`), or nowhere.
pub type Progress = Arc<dyn Fn(&str) + Send + Sync>;

/// How a call of `drive` ended.
#[derive(Debug, Clone, PartialEq)]
pub enum RunEnd {
    Ended { outcome: vouch_core::Outcome },
    Suspended { reason: String },
}

pub struct Host {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub caps: Arc<dyn CapabilityRegistry>,
    pub providers: BTreeMap<DestinationKind, Arc<dyn Provider>>,
    pub notifier: Arc<dyn Notifier>,
    pub models: Arc<dyn ModelFactory>,
    pub work: Arc<dyn WorkTools>,
    pub crash: Option<CrashPlan>,
    pub owner: String,
    pub drafts_dir: PathBuf,
    pub limits: Limits,
    pub progress: Option<Progress>,
    /// Runtime policy (§13.6): verbs forbidden per context.
    pub policy_forbid: Vec<(Context, Verb)>,
    /// Where the person is right now (§11.1); `None` uses the run's own setting.
    pub presence: Option<Arc<dyn PresenceSource>>,
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
    /// `{"kind":"script","turns":[...]}` or `{"kind":"openai"}`.
    pub model: Value,
    /// Ledger scope for scheduled runs (the slot); otherwise the chain root.
    pub scope: Option<String>,
}

struct CallResult {
    ok: bool,
    text: String,
    suspend: Option<String>,
    /// The host ends the run after this call (§5.3: a contradiction with the question spent).
    end: Option<String>,
}

impl CallResult {
    fn ok(text: impl Into<String>) -> Self {
        CallResult {
            ok: true,
            text: text.into(),
            suspend: None,
            end: None,
        }
    }
    fn err(text: impl Into<String>) -> Self {
        CallResult {
            ok: false,
            text: text.into(),
            suspend: None,
            end: None,
        }
    }
}

pub fn new_id(clock: &dyn Clock) -> String {
    let ms = clock.now_ms().max(0) as u64;
    let ts =
        uuid::Timestamp::from_unix(uuid::NoContext, ms / 1000, ((ms % 1000) * 1_000_000) as u32);
    uuid::Uuid::new_v7(ts).simple().to_string()[..20].to_string()
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
    fn journal(&self, run_id: &str, ev: NewEvent) -> HostResult<()> {
        let kind = ev.kind;
        let delivery = ev.delivery.clone();
        self.store.append(run_id, &ev)?;
        self.crash_point(kind.as_str(), delivery.as_deref())
    }

    fn crash_point(&self, point: &str, delivery: Option<&str>) -> HostResult<()> {
        if let Some(plan) = &self.crash {
            if plan.hit(point, delivery) {
                match plan.mode {
                    CrashMode::Abort => {
                        eprintln!("vouch: injected crash after {point}");
                        std::process::abort();
                    }
                    CrashMode::Simulate => return Err(HostError::Crashed(point.to_string())),
                }
            }
        }
        Ok(())
    }

    fn ev(&self, kind: EventKind, body: Value) -> NewEvent {
        NewEvent::new(kind, self.now(), body)
    }

    fn evd(&self, kind: EventKind, d: &str, body: Value) -> NewEvent {
        NewEvent::for_delivery(kind, d, self.now(), body)
    }

    fn lease(&self, run_id: &str) -> HostResult<()> {
        let now = self.now();
        let until = now + self.limits.lease_ms;
        if self.store.lease_run(run_id, &self.owner, now, until)? {
            return Ok(());
        }
        // The holder may be a process of this machine that died: its lease is void.
        if let Some(holder) = self.store.run(run_id)?.and_then(|r| r.owner) {
            if owner_is_dead(Some(&holder)) {
                self.store.release_run(run_id, &holder)?;
                if self.store.lease_run(run_id, &self.owner, now, until)? {
                    return Ok(());
                }
            }
        }
        Err(HostError::Invalid(format!(
            "run {run_id} is owned by another live process; wait for it or stop it first"
        )))
    }

    // ------------------------------------------------------------------ starting runs

    /// Create a run (journal `run_created`) and drive it.
    pub fn start(&self, spec: &RunSpec) -> HostResult<(String, RunEnd)> {
        let id = new_id(self.clock.as_ref());
        self.create(&id, spec, None, None)?;
        let end = self.drive(&id)?;
        Ok((id, end))
    }

    pub fn create(
        &self,
        id: &str,
        spec: &RunSpec,
        parent: Option<&RunRecord>,
        slot: Option<(&str, i64)>,
    ) -> HostResult<()> {
        let chain_root = parent
            .map(|p| p.chain_root.clone())
            .unwrap_or_else(|| id.to_string());
        let scope = parent
            .map(|p| p.scope.clone())
            .or(spec.scope.clone())
            .unwrap_or_else(|| chain_root.clone());
        let presence = spec
            .presence
            .unwrap_or(if spec.trigger == TriggerKind::Interactive {
                Presence::Watching
            } else {
                Presence::Away
            });
        let run = NewRun {
            id: id.to_string(),
            trigger: spec.trigger,
            title: spec.title.clone(),
            chain_root,
            parent: parent.map(|p| p.id.clone()),
            scope,
            spec: json!({"model": spec.model, "presence": presence, "presence_explicit": spec.presence.is_some(), "quiet": spec.quiet}),
            created_ms: self.now(),
        };
        match slot {
            Some((schedule, slot_ms)) => {
                if !self.store.consume_slot(schedule, slot_ms, &run)? {
                    return Err(HostError::SlotTaken(format!("{schedule}@{slot_ms}")));
                }
            }
            None => self.store.create_run(&run)?,
        }
        self.lease(id)?;
        self.journal(
            id,
            self.ev(
                EventKind::RunCreated,
                json!({"title": spec.title, "trigger": spec.trigger, "parent": run.parent, "scope": run.scope}),
            ),
        )?;
        self.say(&format!("▶ run {id} started: {}", spec.title));
        Ok(())
    }

    fn record(&self, run_id: &str) -> HostResult<RunRecord> {
        self.store.run(run_id)?.ok_or_else(|| {
            HostError::Invalid(format!(
                "no run `{run_id}`; list runs with `vouch runs list`"
            ))
        })
    }

    fn view(&self, run_id: &str) -> HostResult<RunView> {
        Ok(RunView::from_journal(&self.store.journal(run_id)?))
    }

    // ------------------------------------------------------------------ the loop

    fn tool_specs(&self) -> Vec<ToolSpec> {
        let mut specs = vec![
            ToolSpec {
                name: "declare".into(),
                description: "Declare the manifest: what this run will deliver. Call it first."
                    .into(),
                parameters: crate::schemas::declare(),
            },
            ToolSpec {
                name: "clarify".into(),
                description: "Ask the person one question (at most one per run).".into(),
                parameters: crate::schemas::clarify(),
            },
        ];
        for v in Verb::ALL {
            specs.push(ToolSpec {
                name: v.as_str().into(),
                description: format!("Perform a declared `{v}` delivery with this payload."),
                parameters: crate::schemas::perform(),
            });
        }
        specs.extend(self.work.specs());
        specs
    }

    fn messages(&self, run: &RunRecord) -> HostResult<Vec<ChatMessage>> {
        let mut msgs = vec![
            ChatMessage::System {
                content: "You are an agent hosted by vouch. First call `declare` with the manifest of what you will deliver; then do the work with tools and perform each delivery with its verb tool. The host decides what may run and reports what really happened.".into(),
            },
            ChatMessage::User { content: run.title.clone() },
        ];
        for e in self.store.journal(&run.id)? {
            match e.kind {
                EventKind::Turn => {
                    let calls: Vec<ToolCall> = e
                        .body
                        .get("tool_calls")
                        .and_then(|c| serde_json::from_value(c.clone()).ok())
                        .unwrap_or_default();
                    let content = e
                        .body
                        .get("content")
                        .and_then(Value::as_str)
                        .map(String::from);
                    msgs.push(ChatMessage::Assistant {
                        content,
                        tool_calls: calls,
                    });
                }
                EventKind::ToolCalled => msgs.push(ChatMessage::Tool {
                    tool_call_id: e
                        .body
                        .get("call_id")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .into(),
                    content: e
                        .body
                        .get("result")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .into(),
                }),
                EventKind::ClarifyAnswered => msgs.push(ChatMessage::User {
                    content: e
                        .body
                        .get("answer")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .into(),
                }),
                _ => {}
            }
        }
        Ok(msgs)
    }

    /// Drive a run until it suspends or ends. Safe to call on a run resumed after approval.
    pub fn drive(&self, run_id: &str) -> HostResult<RunEnd> {
        let run = self.record(run_id)?;
        if run.state == RunState::Ended {
            return Err(HostError::Invalid(format!(
                "run {run_id} has already ended; see `vouch receipt {run_id}`"
            )));
        }
        self.lease(run_id)?;
        self.store.set_run_state(run_id, RunState::Running)?;
        let view = self.view(run_id)?;
        // Resume from the suspended step: execute an approved payload first (§7).
        for (id, item) in &view.items {
            if let Some(hash) = &item.granted {
                self.execute_approved(&run, id, hash)?;
            }
        }
        let view = self.view(run_id)?;
        let mut model = self
            .models
            .model(&run.spec, view.turn_offset + view.turns_complete)
            .map_err(HostError::Model)?;
        let tools = self.tool_specs();
        let mut turns = view.turns;
        let mut tokens = view.prompt_tokens + view.completion_tokens;
        let mut repairs = 0u32;
        let end_reason: String;
        loop {
            if turns >= self.limits.turns_max {
                end_reason = format!("turn budget of {} reached", self.limits.turns_max);
                break;
            }
            if tokens >= self.limits.tokens_max {
                end_reason = format!("token budget of {} reached", self.limits.tokens_max);
                break;
            }
            self.lease(run_id)?;
            let messages = self.messages(&run)?;
            let turn: ModelTurn = match model.next_turn(&messages, &tools) {
                Ok(t) => t,
                Err(ModelError::ScriptExhausted) => {
                    end_reason = "the model made its last call".into();
                    break;
                }
                Err(e) => {
                    self.journal(
                        run_id,
                        self.ev(
                            EventKind::Turn,
                            json!({"index": turns, "error": e.to_string(), "tool_calls": []}),
                        ),
                    )?;
                    end_reason = format!("model error: {e}");
                    break;
                }
            };
            turns += 1;
            tokens += turn.usage.prompt_tokens + turn.usage.completion_tokens;
            self.journal(
                run_id,
                self.ev(
                    EventKind::Turn,
                    json!({"index": turns - 1, "content": turn.content, "tool_calls": turn.tool_calls, "usage": turn.usage}),
                ),
            )?;
            if turn.tool_calls.is_empty() {
                let text = turn.content.clone().unwrap_or_default();
                self.say(&format!(
                    "  model: {}",
                    if text.is_empty() {
                        "(no final text)".to_string()
                    } else {
                        text.clone()
                    }
                ));
                self.final_text_to_surface(&run, &text)?;
                end_reason = "the model gave its final text".into();
                break;
            }
            let mut suspended = None;
            let mut ended: Option<String> = None;
            for call in &turn.tool_calls {
                let res = if suspended.is_some() || ended.is_some() {
                    CallResult::err("not run: the run is suspended; call again after it resumes")
                } else {
                    self.handle_call(&run, call)?
                };
                if !res.ok && res.text.starts_with("invalid arguments") {
                    repairs += 1;
                }
                self.journal(
                    run_id,
                    self.ev(EventKind::ToolCalled, json!({"call_id": call.id, "name": call.name, "ok": res.ok, "result": res.text})),
                )?;
                if res.suspend.is_some() && suspended.is_none() {
                    suspended = res.suspend;
                }
                if res.end.is_some() && ended.is_none() {
                    ended = res.end;
                }
            }
            if let Some(reason) = ended {
                end_reason = reason;
                break;
            }
            if let Some(reason) = suspended {
                self.journal(
                    run_id,
                    self.ev(EventKind::Suspended, json!({"reason": reason})),
                )?;
                self.store.set_run_state(run_id, RunState::Suspended)?;
                self.store.release_run(run_id, &self.owner)?;
                self.say(&format!("⏸ run {run_id} is waiting for you: {reason}"));
                return Ok(RunEnd::Suspended { reason });
            }
            if repairs > self.limits.repairs_max {
                end_reason = format!("the model sent invalid tool arguments {repairs} times");
                break;
            }
        }
        self.say(&format!("  loop ended: {end_reason}"));
        let outcome = self.reconcile(run_id, EndedBy::Loop)?;
        Ok(RunEnd::Ended { outcome })
    }

    /// Interactive runs: final text with no manifest implies `{write → surface}` (§3.4); an
    /// unsettled `write → surface` item receives the final text as its payload.
    fn final_text_to_surface(&self, run: &RunRecord, text: &str) -> HostResult<()> {
        let view = self.view(&run.id)?;
        if text.is_empty() {
            return Ok(());
        }
        let target = match &view.manifest {
            None if run.trigger == TriggerKind::Interactive => {
                let m = Manifest {
                    deliveries: vec![vouch_core::Delivery {
                        id: "implied".into(),
                        verb: Verb::Write,
                        destination: Destination::new(DestinationKind::Surface, ""),
                        object: None,
                        confidence: vouch_core::Confidence::High,
                        required: true,
                        attendees: vec![],
                    }],
                    forbid: vec![],
                    order: vec![],
                };
                self.journal(
                    &run.id,
                    self.ev(EventKind::ManifestImplied, json!({"manifest": m})),
                )?;
                self.preflight(run, &m, &m.deliveries[0])?;
                Some("implied".to_string())
            }
            None => None,
            Some(m) => m
                .deliveries
                .iter()
                .find(|d| {
                    d.verb == Verb::Write
                        && d.destination.kind == DestinationKind::Surface
                        && view.status_now(&d.id).is_none()
                        && view
                            .items
                            .get(&d.id)
                            .map(|i| i.open_attempt.is_none())
                            .unwrap_or(true)
                })
                .map(|d| d.id.clone()),
        };
        if let Some(id) = target {
            let call = ToolCall {
                id: "final".into(),
                name: "write".into(),
                arguments: json!({"delivery": id, "payload": {"text": text}}).to_string(),
            };
            let res = self.handle_call(run, &call)?;
            if !res.ok {
                self.say(&format!("  final text not delivered: {}", res.text));
            }
        }
        Ok(())
    }

    fn handle_call(&self, run: &RunRecord, call: &ToolCall) -> HostResult<CallResult> {
        let args: Value = match serde_json::from_str(&call.arguments) {
            Ok(v) => v,
            Err(e) => {
                return Ok(CallResult::err(format!(
                    "invalid arguments for `{}`: {e}; send a JSON object",
                    call.name
                )))
            }
        };
        match call.name.as_str() {
            "declare" => self.declare(run, &args),
            "clarify" => {
                let q = args
                    .get("question")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                self.clarify(run, &q, None)
            }
            name => {
                if let Some(verb) = Verb::parse(name).or((name == "deliver").then_some(Verb::Write))
                {
                    self.propose(run, call, verb, name == "deliver", &args)
                } else {
                    self.work_tool(run, call, &args)
                }
            }
        }
    }

    fn work_tool(&self, run: &RunRecord, call: &ToolCall, args: &Value) -> HostResult<CallResult> {
        let view = self.view(&run.id)?;
        // §3.4: no tool with an effect before the manifest. Work tools without effect may
        // read, but we still require the manifest so intent is durable before work starts.
        if view.manifest.is_none() {
            self.reject(
                run,
                None,
                "no_manifest",
                "a tool was called before the manifest was declared",
                call,
            )?;
            return Ok(CallResult::err("rejected: declare the manifest first"));
        }
        match self.work.call(&run.id, &run.spec, call, args) {
            Some(Ok(text)) => Ok(CallResult::ok(text)),
            Some(Err(e)) => Ok(CallResult::err(e)),
            None => Ok(CallResult::err(format!("unknown tool `{}`", call.name))),
        }
    }

    fn reject(
        &self,
        run: &RunRecord,
        delivery: Option<&str>,
        code: &str,
        reason: &str,
        call: &ToolCall,
    ) -> HostResult<()> {
        self.say(&format!("  ✗ proposal rejected ({code}): {reason}"));
        let body = json!({"code": code, "reason": reason, "call_id": call.id, "tool": call.name});
        let ev = match delivery {
            Some(d) => self.evd(EventKind::ProposalRejected, d, body),
            None => self.ev(EventKind::ProposalRejected, body),
        };
        self.journal(&run.id, ev)
    }

    // ------------------------------------------------------------------ manifest (§3)

    fn declare(&self, run: &RunRecord, args: &Value) -> HostResult<CallResult> {
        let m: Manifest = match serde_json::from_value(crate::schemas::without_nulls(args)) {
            Ok(m) => m,
            Err(e) if !e.to_string().contains("unknown variant") => {
                // Not a vocabulary problem: a malformed call the model can repair.
                return Ok(CallResult::err(format!(
                    "invalid arguments for `declare`: {e}; send {{\"deliveries\": [{{\"id\", \"verb\", \"destination\": {{\"kind\", \"address\"}}}}]}}"
                )));
            }
            Err(e) => {
                // Outside the closed vocabulary (§3.3): the run asks.
                self.journal(
                    &run.id,
                    self.ev(
                        EventKind::ManifestRejected,
                        json!({"errors": [e.to_string()]}),
                    ),
                )?;
                return self.clarify(run, &format!("I could not map the request onto what I can deliver ({e}). What exactly should I deliver, and where?"), None);
            }
        };
        let view = self.view(&run.id)?;
        let (combined, amendment) = match &view.manifest {
            Some(existing) => {
                // A replayed identical item (a resumed run re-declaring) is not a duplicate.
                let mut am = m.clone();
                am.deliveries
                    .retain(|d| existing.delivery(&d.id) != Some(d));
                (existing.amended(&am), true)
            }
            None => (m.clone(), false),
        };
        if let Err(errors) = combined.validate() {
            let texts: Vec<String> = errors.iter().map(|e| e.to_string()).collect();
            let mut ids: Vec<String> = vec![];
            for e in &errors {
                match e {
                    vouch_core::ManifestError::ContradictsForbid { id, .. }
                    | vouch_core::ManifestError::DuplicateId { id } => ids.push(id.clone()),
                    vouch_core::ManifestError::UnknownOrderId { .. }
                    | vouch_core::ManifestError::OrderCycle { .. }
                    | vouch_core::ManifestError::EmptyId { .. } => {}
                }
            }
            ids.dedup();
            if !view.clarify_used {
                self.journal(
                    &run.id,
                    self.ev(EventKind::ManifestRejected, json!({"errors": texts})),
                )?;
                return self.clarify(
                    run,
                    &format!(
                        "Your request contradicts itself: {}. What should I do?",
                        texts.join("; ")
                    ),
                    None,
                );
            }
            // §5.3: the one question is spent. Keep the manifest, decline the contradicting items, end.
            let keep: Manifest = Manifest {
                forbid: combined.forbid.clone(),
                order: vec![],
                deliveries: dedup_items(&combined),
            };
            self.journal(
                &run.id,
                self.ev(
                    EventKind::ManifestDeclared,
                    json!({"manifest": keep, "amendment": amendment}),
                ),
            )?;
            self.journal(
                &run.id,
                self.ev(EventKind::ManifestRejected, json!({"errors": texts, "declined": ids, "reason": format!("the request contradicts itself: {}", texts.join("; "))})),
            )?;
            let why = format!(
                "the request contradicts itself and its one question was already asked: {}",
                texts.join("; ")
            );
            return Ok(CallResult {
                ok: false,
                text: format!("manifest rejected: {why}; the run ends"),
                suspend: None,
                end: Some(why),
            });
        }
        self.journal(
            &run.id,
            self.ev(
                EventKind::ManifestDeclared,
                json!({"manifest": combined, "amendment": amendment}),
            ),
        )?;
        self.say(&format!("  manifest: {}", summary(&combined)));
        let mut lines = vec![];
        let new_ids: Vec<String> = m.deliveries.iter().map(|d| d.id.clone()).collect();
        let mut suspend = None;
        for d in combined
            .deliveries
            .iter()
            .filter(|d| new_ids.contains(&d.id))
        {
            if view
                .items
                .get(&d.id)
                .map(|i| i.posture.is_some())
                .unwrap_or(false)
            {
                continue; // already pre-flighted (replayed declare)
            }
            let p = self.preflight(run, &combined, d)?;
            lines.push(format!("{}: {}", d.id, p));
            if p == Posture::Clarify && suspend.is_none() {
                let res = self.clarify(
                    run,
                    &format!(
                        "I am not sure about `{}` ({} → {}). Can you confirm what you want?",
                        d.id, d.verb, d.destination
                    ),
                    Some(&d.id),
                )?;
                suspend = res.suspend;
            }
        }
        Ok(CallResult {
            ok: true,
            text: format!("manifest recorded; postures: {}", lines.join(", ")),
            suspend,
            end: None,
        })
    }

    fn facts(&self, d: &vouch_core::Delivery) -> ActFacts {
        let overwrites = d.verb == Verb::Save
            && self
                .providers
                .get(&d.destination.kind)
                .map(|p| p.exists(&d.destination))
                .unwrap_or(false);
        ActFacts {
            verb: d.verb,
            kind: d.destination.kind,
            has_other_attendees: !d.attendees.is_empty(),
            overwrites_existing: overwrites,
        }
    }

    fn decide(
        &self,
        run: &RunRecord,
        m: &Manifest,
        d: &vouch_core::Delivery,
        clarify_used: bool,
    ) -> HostResult<(
        Posture,
        vouch_core::Rule,
        crate::capability::CapabilityAnswer,
        bool,
    )> {
        let context = run.trigger.context();
        let act = self.facts(d);
        let irreversible = is_irreversible(act);
        let mut cap = self
            .caps
            .probe(d.verb, &d.destination, context, irreversible);
        if cap.level >= vouch_core::Capability::Executable
            && !self.providers.contains_key(&d.destination.kind)
        {
            // Configured as executable but nothing here can carry it out.
            cap = crate::capability::CapabilityAnswer {
                level: vouch_core::Capability::Unavailable,
                connect_step: None,
            };
        }
        let forbidden = m.is_forbidden(d.verb, &d.destination)
            || self.policy_forbid.contains(&(context, d.verb));
        let (p, rule) = posture(PostureInput {
            act,
            capability: cap.level,
            confidence: d.confidence,
            context,
            clarify_used,
            forbidden,
        });
        Ok((p, rule, cap, irreversible))
    }

    fn preflight(
        &self,
        run: &RunRecord,
        m: &Manifest,
        d: &vouch_core::Delivery,
    ) -> HostResult<Posture> {
        let clarify_used = self.view(&run.id)?.clarify_used;
        let (p, rule, cap, irreversible) = self.decide(run, m, d, clarify_used)?;
        let reason = match rule {
            vouch_core::Rule::R1 => "forbidden for this run".to_string(),
            vouch_core::Rule::R2 => format!("{} is not available here", d.destination.kind),
            _ => String::new(),
        };
        self.journal(
            &run.id,
            self.evd(
                EventKind::Preflight,
                &d.id,
                json!({"capability": cap.level, "posture": p, "rule": rule.as_str(), "irreversible": irreversible, "connect_step": cap.connect_step, "reason": reason}),
            ),
        )?;
        Ok(p)
    }

    // ------------------------------------------------------------------ clarify (§5.3)

    fn clarify(
        &self,
        run: &RunRecord,
        question: &str,
        about: Option<&str>,
    ) -> HostResult<CallResult> {
        let view = self.view(&run.id)?;
        if view.clarify_used {
            return Ok(CallResult::err("rejected: the one question of this run was already asked; proceed with what you have (low-confidence items are drafted)"));
        }
        self.store.open_card(&Card {
            run_id: run.id.clone(),
            delivery: None,
            payload_hash: String::new(),
            summary: question.to_string(),
            state: CardState::Open,
            created_ms: self.now(),
            decided_ms: None,
            answer: None,
        })?;
        self.journal(
            &run.id,
            self.ev(
                EventKind::ClarifyAsked,
                json!({"question": question, "about": about}),
            ),
        )?;
        Ok(CallResult {
            ok: true,
            text: "question asked; the run waits for the answer".into(),
            suspend: Some(format!("question: {question}")),
            end: None,
        })
    }

    // ------------------------------------------------------------------ proposals (§6)

    fn propose(
        &self,
        run: &RunRecord,
        call: &ToolCall,
        verb: Verb,
        generic: bool,
        args: &Value,
    ) -> HostResult<CallResult> {
        let view = self.view(&run.id)?;
        let Some(m) = view.manifest.clone() else {
            self.reject(
                run,
                None,
                "no_manifest",
                "a delivery was proposed before the manifest was declared",
                call,
            )?;
            return Ok(CallResult::err("rejected: declare the manifest first"));
        };
        let id = args.get("delivery").and_then(Value::as_str).unwrap_or("");
        let Some(d) = m.delivery(id).cloned() else {
            self.reject(
                run,
                None,
                "undeclared",
                &format!("`{verb}` is not covered by any manifest item"),
                call,
            )?;
            return Ok(CallResult::err(
                "rejected: no manifest item covers this; amend the manifest with `declare` first",
            ));
        };
        if !generic && d.verb != verb {
            self.reject(
                run,
                Some(id),
                "verb_mismatch",
                &format!("item {id} is a `{}`, not a `{verb}`", d.verb),
                call,
            )?;
            return Ok(CallResult::err(format!(
                "rejected: item {id} is declared as `{}`",
                d.verb
            )));
        }
        let Some(payload) = args.get("payload").cloned().filter(|p| p.is_object()) else {
            return Ok(CallResult::err(
                "invalid arguments: `payload` must be a JSON object",
            ));
        };
        if canonical_json(&payload)
            .map(|c| c.len())
            .unwrap_or(usize::MAX)
            > self.limits.payload_bytes_max
        {
            return Ok(CallResult::err(format!(
                "invalid arguments: payload larger than {} bytes",
                self.limits.payload_bytes_max
            )));
        }
        let item = view.items.get(id).cloned().unwrap_or_default();
        if let Some(s) = item.status.filter(|s| s.is_settled()) {
            self.reject(
                run,
                Some(id),
                "already_settled",
                &format!("item {id} is already {s}"),
                call,
            )?;
            return Ok(CallResult::err(format!(
                "rejected: {id} is already settled ({s}); add a new item for different content"
            )));
        }
        if item.open_attempt.is_some() {
            self.reject(
                run,
                Some(id),
                "in_flight",
                &format!("item {id} has an attempt in flight"),
                call,
            )?;
            return Ok(CallResult::err(format!(
                "rejected: {id} is being attempted"
            )));
        }
        if item.status == Some(DeliveryStatus::Drafted)
            || item.status == Some(DeliveryStatus::Verified)
        {
            self.reject(
                run,
                Some(id),
                "already_settled",
                &format!("item {id} is already done"),
                call,
            )?;
            return Ok(CallResult::err(format!("rejected: {id} is already done")));
        }
        for dep in m.dependencies(id) {
            if view.status_now(dep) != Some(DeliveryStatus::Verified) {
                self.say(&format!("  ⏳ {id} held back: waits for {dep}"));
                let body = json!({"code": "blocked", "reason": format!("waits for {dep} to be verified"), "dependency": dep, "call_id": call.id});
                self.journal(&run.id, self.evd(EventKind::ProposalRejected, id, body))?;
                return Ok(CallResult::err(format!(
                    "rejected: {id} waits for {dep} to be verified"
                )));
            }
        }
        let hash = payload_hash(&payload).map_err(|e| HostError::Invalid(e.to_string()))?;
        if item.awaiting {
            if item.card_hash.as_deref() == Some(hash.as_str()) {
                return Ok(CallResult {
                    ok: true,
                    text: format!("{id} is still waiting for approval"),
                    suspend: Some(format!("approval of {id}")),
                    end: None,
                });
            }
            // A different payload for an item awaiting approval is an edit (§6, §7).
            return self.request_approval(run, &d, &payload, &hash, item.card_hash.as_deref());
        }
        // Posture again, right before the attempt (§4).
        let (p, rule, cap, irreversible) = self.decide(run, &m, &d, view.clarify_used)?;
        if item.posture != Some(p) {
            self.journal(
                &run.id,
                self.evd(EventKind::Preflight, id, json!({"capability": cap.level, "posture": p, "rule": rule.as_str(), "irreversible": irreversible, "connect_step": cap.connect_step, "recheck": true})),
            )?;
        }
        match p {
            Posture::Decline => {
                let reason = if rule == vouch_core::Rule::R1 {
                    "forbidden for this run"
                } else {
                    "not available here"
                };
                self.reject(run, Some(id), "declined", reason, call)?;
                self.journal(
                    &run.id,
                    self.evd(
                        EventKind::Evidence,
                        id,
                        json!({"status": "declined", "reason": reason}),
                    ),
                )?;
                Ok(CallResult::err(format!("declined: {reason}")))
            }
            Posture::Clarify => {
                let res = self.clarify(
                    run,
                    &format!("I am not sure about `{id}`. Can you confirm?"),
                    Some(id),
                )?;
                if res.suspend.is_some() {
                    return Ok(res);
                }
                self.draft(run, &d, &payload, &hash, cap.connect_step.as_deref())
            }
            Posture::Draft => self.draft(run, &d, &payload, &hash, cap.connect_step.as_deref()),
            Posture::Confirm => self.request_approval(run, &d, &payload, &hash, None),
            Posture::Answer | Posture::Execute => {
                let status = self.perform(run, &d, &payload, &hash, irreversible, p)?;
                Ok(CallResult {
                    ok: status == DeliveryStatus::Verified,
                    text: format!("{id}: {status}"),
                    suspend: None,
                    end: None,
                })
            }
        }
    }

    fn draft(
        &self,
        run: &RunRecord,
        d: &vouch_core::Delivery,
        payload: &Value,
        hash: &str,
        connect: Option<&str>,
    ) -> HostResult<CallResult> {
        let dir = self.drafts_dir.join(&run.id);
        let ext = if d.destination.kind == DestinationKind::Email {
            "eml"
        } else {
            "json"
        };
        let path = dir.join(format!("{}.{ext}", d.id));
        let content = if ext == "eml" {
            crate::provider::draft_eml(d, payload)
        } else {
            serde_json::to_string_pretty(payload).unwrap_or_default()
        };
        let written = std::fs::create_dir_all(&dir).and_then(|_| std::fs::write(&path, &content));
        let reread = std::fs::read_to_string(&path)
            .map(|c| c == content)
            .unwrap_or(false);
        self.journal(
            &run.id,
            self.evd(
                EventKind::Drafted,
                &d.id,
                json!({"path": path.display().to_string(), "payload_hash": hash}),
            ),
        )?;
        let (status, reason) = match (written, reread) {
            (Ok(()), true) => (DeliveryStatus::Drafted, String::new()),
            (Err(e), _) => (
                DeliveryStatus::Failed,
                format!("could not store the draft: {e}"),
            ),
            _ => (
                DeliveryStatus::Failed,
                "the stored draft did not read back".into(),
            ),
        };
        self.journal(
            &run.id,
            self.evd(EventKind::Evidence, &d.id, json!({"status": status, "evidence": format!("draft {}", path.display()), "reason": reason, "connect_step": connect})),
        )?;
        self.say(&format!("  ✎ {} drafted at {}", d.id, path.display()));
        Ok(CallResult::ok(format!(
            "{}: drafted (stored at {}), not executed",
            d.id,
            path.display()
        )))
    }

    fn request_approval(
        &self,
        run: &RunRecord,
        d: &vouch_core::Delivery,
        payload: &Value,
        hash: &str,
        old: Option<&str>,
    ) -> HostResult<CallResult> {
        let canonical = canonical_json(payload).map_err(|e| HostError::Invalid(e.to_string()))?;
        self.store.put_payload(hash, &canonical)?;
        let summary = format!(
            "{} → {}: {}",
            d.verb,
            d.destination,
            crate::provider::payload_text(payload)
                .chars()
                .take(120)
                .collect::<String>()
        );
        self.store.open_card(&Card {
            run_id: run.id.clone(),
            delivery: Some(d.id.clone()),
            payload_hash: hash.to_string(),
            summary: summary.clone(),
            state: CardState::Open,
            created_ms: self.now(),
            decided_ms: None,
            answer: None,
        })?;
        if let Some(old) = old {
            self.journal(
                &run.id,
                self.evd(
                    EventKind::ApprovalSuperseded,
                    &d.id,
                    json!({"old_hash": old, "new_hash": hash}),
                ),
            )?;
        }
        self.journal(
            &run.id,
            self.evd(
                EventKind::ApprovalRequested,
                &d.id,
                json!({"payload_hash": hash, "payload": payload, "summary": summary}),
            ),
        )?;
        self.say(&format!(
            "  ⏸ {} needs your approval (hash {})",
            d.id,
            &hash[..12]
        ));
        Ok(CallResult {
            ok: true,
            text: format!("{} awaits the person's approval", d.id),
            suspend: Some(format!("approval of {}", d.id)),
            end: None,
        })
    }

    /// The approved payload, read back by hash and re-hashed before execution (I4).
    fn execute_approved(&self, run: &RunRecord, id: &str, hash: &str) -> HostResult<()> {
        let view = self.view(&run.id)?;
        let Some(m) = view.manifest.clone() else {
            return Ok(());
        };
        let Some(d) = m.delivery(id).cloned() else {
            return Ok(());
        };
        let stored = self.store.payload(hash)?;
        let parsed = stored
            .as_deref()
            .and_then(|s| serde_json::from_str::<Value>(s).ok());
        let ok = parsed
            .as_ref()
            .and_then(|p| payload_hash(p).ok())
            .as_deref()
            == Some(hash);
        match (ok, parsed) {
            (true, Some(payload)) => {
                let irreversible = is_irreversible(self.facts(&d));
                self.perform(run, &d, &payload, hash, irreversible, Posture::Confirm)?;
            }
            _ => {
                self.journal(
                    &run.id,
                    self.evd(EventKind::Evidence, id, json!({"status": "refused_mismatch", "reason": "the stored payload no longer matches the approved hash", "posture": "confirm"})),
                )?;
                self.say(&format!(
                    "  ✋ {id} stopped: the content changed after approval"
                ));
            }
        }
        Ok(())
    }

    /// Attempt, observe, record evidence. Irreversible acts go through the ledger (§8).
    fn perform(
        &self,
        run: &RunRecord,
        d: &vouch_core::Delivery,
        payload: &Value,
        hash: &str,
        irreversible: bool,
        posture: Posture,
    ) -> HostResult<DeliveryStatus> {
        let Some(provider) = self.providers.get(&d.destination.kind).cloned() else {
            self.journal(
                &run.id,
                self.evd(
                    EventKind::Evidence,
                    &d.id,
                    json!({"status": "declined", "reason": "no provider for this destination"}),
                ),
            )?;
            return Ok(DeliveryStatus::Declined);
        };
        let key = irreversible.then(|| ledger_key(&run.scope, &d.id, hash));
        if let Some(key) = &key {
            let entry = LedgerEntry {
                key: key.clone(),
                scope: run.scope.clone(),
                run_id: run.id.clone(),
                delivery: d.id.clone(),
                payload_hash: hash.to_string(),
                state: LedgerState::Intended,
                attempts: 1,
                detail: json!({}),
                updated_ms: self.now(),
            };
            match self.store.ledger_intend(&entry)? {
                LedgerIntent::Proceed(_) => {
                    self.journal(
                        &run.id,
                        self.evd(
                            EventKind::LedgerIntent,
                            &d.id,
                            json!({"key": key, "payload_hash": hash, "payload": payload}),
                        ),
                    )?;
                }
                LedgerIntent::Recorded(prev) => {
                    // Never executed again: return the recorded outcome (§8.2).
                    let (status, reason) = match prev.state {
                        LedgerState::Done => (DeliveryStatus::Verified, String::new()),
                        _ => (
                            DeliveryStatus::Unknown,
                            format!(
                                "the ledger already holds this act as {}",
                                prev.state.as_str()
                            ),
                        ),
                    };
                    let evidence = prev
                        .detail
                        .get("evidence")
                        .and_then(Value::as_str)
                        .unwrap_or("ledger")
                        .to_string();
                    self.journal(
                        &run.id,
                        self.evd(EventKind::Evidence, &d.id, json!({"status": status, "evidence": evidence, "reason": reason, "posture": posture, "ledger": prev.state.as_str()})),
                    )?;
                    return Ok(status);
                }
            }
        }
        let req = AttemptRequest {
            run_id: run.id.clone(),
            delivery: d.id.clone(),
            verb: d.verb,
            destination: d.destination.clone(),
            payload: payload.clone(),
            payload_hash: hash.to_string(),
            idempotency_key: key.clone(),
        };
        self.journal(
            &run.id,
            self.evd(
                EventKind::AttemptStarted,
                &d.id,
                json!({"payload_hash": hash, "payload": payload, "key": key, "posture": posture}),
            ),
        )?;
        self.say(&format!("  → {} {} {}", d.id, d.verb, d.destination));
        let mut reply = provider.attempt(&req);
        self.crash_point("provider_effect", Some(&d.id))?;
        let mut retries = 0;
        while matches!(reply, AttemptReply::Lost { .. })
            && key.is_some()
            && provider.idempotent_by_key(&d.destination)
            && retries < self.limits.key_retries_max
        {
            // Same key: the provider's deduplication makes the retry safe (§8.3).
            retries += 1;
            self.journal(
                &run.id,
                self.evd(
                    EventKind::AttemptFinished,
                    &d.id,
                    json!({"reply": reply_json(&reply), "retrying_same_key": true}),
                ),
            )?;
            reply = provider.attempt(&req);
        }
        self.journal(
            &run.id,
            self.evd(
                EventKind::AttemptFinished,
                &d.id,
                json!({"reply": reply_json(&reply)}),
            ),
        )?;
        let obs = provider.observe(&req, Some(&reply));
        let (status, evidence, reason) = judge(&reply, &obs);
        self.settle(run, d, key.as_deref(), status, &evidence, &reason, posture)?;
        Ok(status)
    }

    #[allow(clippy::too_many_arguments)]
    fn settle(
        &self,
        run: &RunRecord,
        d: &vouch_core::Delivery,
        key: Option<&str>,
        status: DeliveryStatus,
        evidence: &str,
        reason: &str,
        posture: Posture,
    ) -> HostResult<()> {
        if let Some(key) = key {
            let state = match status {
                DeliveryStatus::Verified | DeliveryStatus::Unconfirmed => LedgerState::Done,
                DeliveryStatus::Failed | DeliveryStatus::NotAttempted => LedgerState::Failed,
                _ => LedgerState::Unknown,
            };
            self.store.ledger_settle(
                key,
                state,
                &json!({"status": status, "evidence": evidence}),
                self.now(),
            )?;
        }
        self.journal(&run.id, self.evd(EventKind::Evidence, &d.id, json!({"status": status, "evidence": evidence, "reason": reason, "posture": posture})))?;
        let mark = vouch_core::receipt::status_mark(status);
        self.say(&format!(
            "  {mark} {} {status}{}",
            d.id,
            if evidence.is_empty() {
                String::new()
            } else {
                format!(" ({evidence})")
            }
        ));
        Ok(())
    }

    // ------------------------------------------------------------------ decisions (§7)

    /// Decisions apply only to a run that is waiting for the person.
    fn waiting(&self, run_id: &str) -> HostResult<RunRecord> {
        let run = self.record(run_id)?;
        match run.state {
            RunState::Suspended => Ok(run),
            RunState::Ended => Err(HostError::Invalid(format!(
                "run {run_id} has already ended; there is nothing to decide (see `vouch receipt {run_id}`)"
            ))),
            _ => Err(HostError::Invalid(format!(
                "run {run_id} is not waiting for a decision (it is {}); see `vouch approvals`",
                run.state.as_str()
            ))),
        }
    }

    pub fn approve(&self, run_id: &str, delivery: &str, hash: &str) -> HostResult<RunEnd> {
        self.waiting(run_id)?;
        self.lease(run_id)?;
        self.store
            .decide_card(run_id, delivery, hash, Decision::Approve, self.now())?;
        // From here the run is ours and running: a crash leaves it interrupted, and the
        // continuation carries the approval over (it is never lost).
        self.store.set_run_state(run_id, RunState::Running)?;
        self.journal(
            run_id,
            self.evd(
                EventKind::ApprovalGranted,
                delivery,
                json!({"payload_hash": hash}),
            ),
        )?;
        self.journal(
            run_id,
            self.ev(
                EventKind::Resumed,
                json!({"by": "approval", "delivery": delivery}),
            ),
        )?;
        self.say(&format!("✓ approved {delivery} of run {run_id}"));
        self.continue_if_unblocked(run_id)
    }

    pub fn deny(&self, run_id: &str, delivery: &str) -> HostResult<RunEnd> {
        self.waiting(run_id)?;
        let cards = self.store.cards_for_run(run_id)?;
        let Some(card) = cards
            .iter()
            .find(|c| c.state == CardState::Open && c.delivery.as_deref() == Some(delivery))
        else {
            return Err(HostError::Invalid(format!(
                "run {run_id} has no open approval for `{delivery}`; see `vouch approvals`"
            )));
        };
        self.store.decide_card(
            run_id,
            delivery,
            &card.payload_hash,
            Decision::Deny,
            self.now(),
        )?;
        self.journal(
            run_id,
            self.evd(
                EventKind::ApprovalDenied,
                delivery,
                json!({"payload_hash": card.payload_hash}),
            ),
        )?;
        self.journal(
            run_id,
            self.ev(
                EventKind::Resumed,
                json!({"by": "denial", "delivery": delivery}),
            ),
        )?;
        self.continue_if_unblocked(run_id)
    }

    /// A new payload for a pending approval: new hash, new card; the old one is superseded.
    pub fn edit(&self, run_id: &str, delivery: &str, payload: &Value) -> HostResult<String> {
        self.waiting(run_id)?;
        let run = self.record(run_id)?;
        let view = self.view(run_id)?;
        let item = view
            .items
            .get(delivery)
            .filter(|i| i.awaiting)
            .ok_or_else(|| {
                HostError::Invalid(format!(
                    "run {run_id} has no open approval for `{delivery}`; see `vouch approvals`"
                ))
            })?;
        let d = view
            .manifest
            .as_ref()
            .and_then(|m| m.delivery(delivery))
            .cloned()
            .ok_or_else(|| HostError::Invalid(format!("`{delivery}` is not in the manifest")))?;
        if !payload.is_object() {
            return Err(HostError::Invalid(
                "the payload must be a JSON object".into(),
            ));
        }
        let hash = payload_hash(payload).map_err(|e| HostError::Invalid(e.to_string()))?;
        if item.card_hash.as_deref() == Some(hash.as_str()) {
            return Ok(hash);
        }
        self.request_approval(&run, &d, payload, &hash, item.card_hash.as_deref())?;
        Ok(hash)
    }

    pub fn answer(&self, run_id: &str, text: &str) -> HostResult<RunEnd> {
        self.waiting(run_id)?;
        self.store.answer_clarify(run_id, text, self.now())?;
        self.journal(
            run_id,
            self.ev(EventKind::ClarifyAnswered, json!({"answer": text})),
        )?;
        self.repreflight_clarified(run_id)?;
        self.journal(run_id, self.ev(EventKind::Resumed, json!({"by": "answer"})))?;
        self.continue_if_unblocked(run_id)
    }

    /// After the one question is answered, items that were waiting on it are pre-flighted
    /// again with the question spent (contract §5.3.1): low confidence now drafts.
    fn repreflight_clarified(&self, run_id: &str) -> HostResult<()> {
        let run = self.record(run_id)?;
        let view = self.view(run_id)?;
        if let Some(m) = view.manifest.clone() {
            for d in &m.deliveries {
                if view.items.get(&d.id).and_then(|i| i.posture) == Some(Posture::Clarify) {
                    self.preflight(&run, &m, d)?;
                }
            }
        }
        Ok(())
    }

    pub fn cancel(&self, run_id: &str) -> HostResult<vouch_core::Outcome> {
        if self.record(run_id)?.state == RunState::Ended {
            return Err(HostError::Invalid(format!(
                "run {run_id} has already ended; nothing to cancel (see `vouch receipt {run_id}`)"
            )));
        }
        for c in self.store.cards_for_run(run_id)? {
            if c.state == CardState::Open {
                if let Some(d) = &c.delivery {
                    let _ = self.store.decide_card(
                        run_id,
                        d,
                        &c.payload_hash,
                        Decision::Deny,
                        self.now(),
                    );
                }
            }
        }
        self.reconcile(run_id, EndedBy::Cancel)
    }

    fn continue_if_unblocked(&self, run_id: &str) -> HostResult<RunEnd> {
        let open = self
            .store
            .cards_for_run(run_id)?
            .iter()
            .any(|c| c.state == CardState::Open);
        if open {
            return Ok(RunEnd::Suspended {
                reason: "other decisions are still open".into(),
            });
        }
        self.drive(run_id)
    }

    // ------------------------------------------------------------------ the reconciler (§9)

    /// Start-up: end every run without a terminal record whose owner is gone; suspended runs
    /// stay suspended. Then deliver pending notifications. Returns the runs it ended.
    pub fn boot(&self) -> HostResult<Vec<String>> {
        let now = self.now();
        let mut ended = vec![];
        let mut candidates = self.store.orphaned_runs(now)?;
        // A lease held by a process of this machine that no longer exists is gone too.
        for r in self.store.runs(RUNS_SCAN_MAX)? {
            if r.state != RunState::Ended
                && owner_is_dead(r.owner.as_deref())
                && !candidates.iter().any(|c| c.id == r.id)
            {
                candidates.push(r);
            }
        }
        for run in candidates {
            if run.state == RunState::Suspended {
                continue;
            }
            // Interrupted right after opening a card: the card is still valid, so the run is
            // suspended, not ended (§9.2).
            if self
                .store
                .cards_for_run(&run.id)?
                .iter()
                .any(|c| c.state == CardState::Open)
            {
                self.journal(
                    &run.id,
                    self.ev(
                        EventKind::Suspended,
                        json!({"reason": "a card is open", "at_boot": true}),
                    ),
                )?;
                self.store.set_run_state(&run.id, RunState::Suspended)?;
                continue;
            }
            // A dead local owner may still hold an unexpired lease; it cannot renew it.
            if self.lease(&run.id).is_err() && !owner_is_dead(run.owner.as_deref()) {
                continue;
            }
            self.reconcile(&run.id, EndedBy::Boot)?;
            ended.push(run.id);
        }
        self.dispatch()?;
        Ok(ended)
    }

    /// Settle an attempt whose result was lost to a crash (§8.3, §9.2).
    fn settle_open_attempt(&self, run: &RunRecord, view: &RunView, id: &str) -> HostResult<()> {
        let Some(item) = view.items.get(id) else {
            return Ok(());
        };
        let Some(open) = &item.open_attempt else {
            return Ok(());
        };
        let Some(d) = view.manifest.as_ref().and_then(|m| m.delivery(id)).cloned() else {
            return Ok(());
        };
        let posture = item.posture.unwrap_or(Posture::Execute);
        let Some(provider) = self.providers.get(&d.destination.kind).cloned() else {
            return self.settle(
                run,
                &d,
                open.key.as_deref(),
                DeliveryStatus::Unknown,
                "",
                "interrupted; no provider to check with",
                posture,
            );
        };
        let req = AttemptRequest {
            run_id: run.id.clone(),
            delivery: id.to_string(),
            verb: d.verb,
            destination: d.destination.clone(),
            payload: open.payload.clone(),
            payload_hash: open.payload_hash.clone(),
            idempotency_key: open.key.clone(),
        };
        match provider.observe(&req, None) {
            Observation::Present { evidence } => self.settle(
                run,
                &d,
                open.key.as_deref(),
                DeliveryStatus::Verified,
                &evidence,
                "",
                posture,
            ),
            Observation::Absent { .. } if !open.started => self.settle(
                run,
                &d,
                open.key.as_deref(),
                DeliveryStatus::NotAttempted,
                "",
                "interrupted before it was attempted",
                posture,
            ),
            Observation::Absent { reason } => self.settle(
                run,
                &d,
                open.key.as_deref(),
                DeliveryStatus::Failed,
                "",
                &format!("interrupted before it took effect ({reason})"),
                posture,
            ),
            Observation::Unobservable => {
                if open.key.is_some() && provider.idempotent_by_key(&d.destination) {
                    // Retry with the same key: the provider deduplicates (§8.3).
                    self.journal(&run.id, self.evd(EventKind::AttemptStarted, id, json!({"payload_hash": open.payload_hash, "payload": open.payload, "key": open.key, "posture": posture, "retry_same_key": true})))?;
                    let reply = provider.attempt(&req);
                    self.journal(
                        &run.id,
                        self.evd(
                            EventKind::AttemptFinished,
                            id,
                            json!({"reply": reply_json(&reply)}),
                        ),
                    )?;
                    let obs = provider.observe(&req, Some(&reply));
                    let (status, evidence, reason) = judge(&reply, &obs);
                    self.settle(
                        run,
                        &d,
                        open.key.as_deref(),
                        status,
                        &evidence,
                        &reason,
                        posture,
                    )
                } else {
                    self.settle(
                        run,
                        &d,
                        open.key.as_deref(),
                        DeliveryStatus::Unknown,
                        "",
                        "the process stopped while it was being sent",
                        posture,
                    )
                }
            }
        }
    }

    /// The one terminal path (§9.2). Idempotent.
    pub fn reconcile(&self, run_id: &str, ended_by: EndedBy) -> HostResult<vouch_core::Outcome> {
        self.reconcile_with(run_id, ended_by, None)
    }

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
        let id = new_id(self.clock.as_ref());
        self.create(&id, spec, None, Some((schedule, slot_ms)))?;
        self.reconcile_with(&id, EndedBy::Schedule, Some(vouch_core::Outcome::Missed))?;
        if !catch_up_latest {
            return Ok((id, None));
        }
        let late = new_id(self.clock.as_ref());
        let late_spec = RunSpec {
            title: format!("{} (late run for a missed slot)", spec.title),
            ..spec.clone()
        };
        self.create(&late, &late_spec, None, None)?;
        self.drive(&late)?;
        Ok((id, Some(late)))
    }

    fn reconcile_with(
        &self,
        run_id: &str,
        ended_by: EndedBy,
        forced: Option<vouch_core::Outcome>,
    ) -> HostResult<vouch_core::Outcome> {
        let run = self.record(run_id)?;
        if run.state == RunState::Ended {
            return Ok(run.outcome.unwrap_or(vouch_core::Outcome::Failed));
        }
        let view = self.view(run_id)?;
        let open: Vec<String> = view
            .items
            .iter()
            .filter(|(_, i)| i.open_attempt.is_some())
            .map(|(k, _)| k.clone())
            .collect();
        for id in open {
            self.settle_open_attempt(&run, &view, &id)?;
        }
        // Items the run never pre-flighted (it died right after the manifest) get their
        // posture now, so the receipt can say what would have happened.
        let view = self.view(run_id)?;
        if let Some(m) = view.manifest.clone() {
            for d in &m.deliveries {
                let unflighted = view
                    .items
                    .get(&d.id)
                    .map(|i| i.posture.is_none() && i.status.is_none())
                    .unwrap_or(true);
                if unflighted {
                    self.preflight(&run, &m, d)?;
                }
            }
        }
        let view = self.view(run_id)?;
        let ids: Vec<String> = view
            .manifest
            .as_ref()
            .map(|m| m.deliveries.iter().map(|d| d.id.clone()).collect())
            .unwrap_or_default();
        let statuses: Vec<(String, DeliveryStatus)> = ids
            .iter()
            .map(|id| {
                let s = match view.final_status(id) {
                    DeliveryStatus::Awaiting => DeliveryStatus::NotAttempted,
                    s => s,
                };
                (id.clone(), s)
            })
            .collect();
        let required = |id: &str| {
            view.manifest
                .as_ref()
                .and_then(|m| m.delivery(id))
                .map(|d| d.required)
                .unwrap_or(true)
        };
        let items: Vec<(bool, DeliveryStatus)> =
            statuses.iter().map(|(id, s)| (required(id), *s)).collect();
        let outcome = forced.unwrap_or_else(|| vouch_core::outcome(&items));
        let needs_you: Vec<String> = statuses
            .iter()
            .filter(|(id, s)| {
                s.needs_person(
                    view.items
                        .get(id)
                        .map(|i| i.connect_step.is_some())
                        .unwrap_or(false),
                )
            })
            .map(|(id, _)| id.clone())
            .collect();
        let irreversible_verified = statuses.iter().any(|(id, s)| {
            *s == DeliveryStatus::Verified
                && view.items.get(id).map(|i| i.irreversible).unwrap_or(false)
        });
        let sig = vouch_core::significance(
            Some(outcome),
            false,
            !needs_you.is_empty(),
            irreversible_verified,
            false,
        );
        let (spec_presence, quiet) = presence_of(&run);
        let presence = self
            .presence
            .as_ref()
            .and_then(|p| p.presence(&run, self.now()))
            .unwrap_or(spec_presence);
        let route = vouch_core::route(sig, presence, quiet);
        let mut view = view;
        if forced == Some(vouch_core::Outcome::Missed) {
            let slot = run
                .scope
                .rsplit_once('@')
                .and_then(|(_, ms)| ms.parse::<i64>().ok())
                .and_then(chrono::DateTime::from_timestamp_millis)
                .map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string())
                .unwrap_or_else(|| run.scope.clone());
            view.rejections.clear();
            view.missed_note = Some(format!("The slot of {slot} passed its grace with nothing running (the machine was off, or `vouch serve` was not running)."));
        }
        let receipt = crate::receipt::render(
            run_id,
            run.trigger.as_str(),
            &view,
            &statuses,
            Some(outcome),
            Some(ended_by.as_str()),
            &needs_you,
        );
        let body = json!({
            "outcome": outcome, "ended_by": ended_by,
            "statuses": statuses.iter().map(|(k, v)| (k.clone(), json!(v))).collect::<serde_json::Map<_, _>>(),
            "needs_you": needs_you, "significance": sig, "route": route, "presence": presence, "quiet": quiet,
        });
        let outbox = (route == vouch_core::Route::Notify).then(|| NewOutbox {
            dedup_key: format!("{run_id}:terminal"),
            run_id: run_id.to_string(),
            route: route.as_str().to_string(),
            body: json!({"title": format!("vouch: {} — {}", outcome, view.title), "outcome": outcome, "significance": sig}),
        });
        let terminal = Terminal {
            outcome,
            ended_by,
            receipt,
            body,
            at_ms: self.now(),
            outbox,
        };
        if let EndResult::Ended(_) = self.store.end_run(run_id, &terminal)? {
            self.crash_point("terminal", None)?;
            self.say(&format!(
                "■ run {run_id} ended: {outcome} ({})",
                ended_by.as_str()
            ));
        }
        let _ = self.store.release_run(run_id, &self.owner);
        self.dispatch()?;
        Ok(outcome)
    }

    /// The outbox dispatcher: deliver every pending row once, then mark it (§11.4).
    pub fn dispatch(&self) -> HostResult<usize> {
        let mut n = 0;
        for row in self.store.outbox_pending()? {
            match self.notifier.notify(&row) {
                Ok(()) => {
                    self.store.outbox_mark_sent(row.id, self.now())?;
                    n += 1;
                }
                Err(e) => self.say(&format!(
                    "  notification for run {} not delivered yet: {e}",
                    row.run_id
                )),
            }
        }
        Ok(n)
    }

    /// §9.2: a continuation run with the same manifest and ledger scope; settled deliveries
    /// carry over as they are, the others are attempted again.
    pub fn resume(&self, parent_id: &str) -> HostResult<(String, RunEnd)> {
        let parent = self.record(parent_id)?;
        if parent.state != RunState::Ended {
            return Err(HostError::Invalid(format!(
                "run {parent_id} has not ended (it is {}); only an ended run can be resumed",
                parent.state.as_str()
            )));
        }
        if let Some(child) = self
            .store
            .runs(RUNS_SCAN_MAX)?
            .into_iter()
            .find(|r| r.parent.as_deref() == Some(parent_id))
        {
            // One continuation per run: resuming twice would redo what the first one did.
            return Err(HostError::Invalid(format!(
                "run {parent_id} was already resumed as run {}; resume that one instead (`vouch resume {}`)",
                child.id, child.id
            )));
        }
        let pview = self.view(parent_id)?;
        let left = pview
            .manifest
            .as_ref()
            .map(|m| {
                m.deliveries
                    .iter()
                    .any(|d| !pview.final_status(&d.id).is_settled())
            })
            // Interrupted before it declared anything: all of it is left.
            .unwrap_or(parent.ended_by == Some(EndedBy::Boot));
        if !left {
            return Err(HostError::Invalid(format!(
                "run {parent_id} has nothing left to do: every delivery is settled (see `vouch receipt {parent_id}`)"
            )));
        }
        let id = new_id(self.clock.as_ref());
        let (presence, quiet) = presence_of(&parent);
        let spec = RunSpec {
            trigger: parent.trigger,
            title: parent.title.clone(),
            presence: Some(presence),
            quiet,
            model: parent.spec.get("model").cloned().unwrap_or(Value::Null),
            scope: Some(parent.scope.clone()),
        };
        self.create(&id, &spec, Some(&parent), None)?;
        if let Some(m) = &pview.manifest {
            self.journal(
                &id,
                self.ev(
                    EventKind::ManifestDeclared,
                    json!({"manifest": m, "carried_from": parent_id}),
                ),
            )?;
            for d in &m.deliveries {
                let item = pview.items.get(&d.id).cloned().unwrap_or_default();
                if let Some(p) = item.posture {
                    self.journal(
                        &id,
                        self.evd(EventKind::Preflight, &d.id, json!({"capability": item.capability, "posture": p, "rule": item.rule, "irreversible": item.irreversible, "connect_step": item.connect_step, "carried_from": parent_id})),
                    )?;
                }
                if let Some(hash) = item
                    .approved
                    .as_ref()
                    .filter(|_| !item.status.map(|s| s.is_settled()).unwrap_or(false))
                {
                    // Approved in the parent and not settled there (never attempted, or definitely
                    // failed): the approval of this exact hash carries over (§7, §8.2).
                    self.journal(
                        &id,
                        self.evd(
                            EventKind::ApprovalGranted,
                            &d.id,
                            json!({"payload_hash": hash, "carried_from": parent_id}),
                        ),
                    )?;
                }
                if let Some(s) = item.status.filter(|s| s.is_settled()) {
                    self.journal(&id, self.evd(EventKind::Evidence, &d.id, json!({"status": s, "evidence": item.evidence, "reason": item.reason, "carried_from": parent_id})))?;
                }
            }
        }
        // The script continues from the first turn the parent did not complete.
        self.journal(&id, self.ev(EventKind::Resumed, json!({"by": "resume", "parent": parent_id, "start_turn": pview.turn_offset + pview.turns_complete})))?;
        let end = self.drive(&id)?;
        Ok((id, end))
    }
}

/// Runs scanned at boot for dead local owners.
pub const RUNS_SCAN_MAX: usize = 100_000;

/// The owner string of this process: `pid:<pid>`.
pub fn process_owner() -> String {
    format!("pid:{}", std::process::id())
}

/// True when `owner` names a process of this machine that has exited.
pub fn owner_is_dead(owner: Option<&str>) -> bool {
    let Some(pid) = owner
        .and_then(|o| o.strip_prefix("pid:"))
        .and_then(|p| p.parse::<u32>().ok())
    else {
        return false;
    };
    pid != std::process::id() && !std::path::Path::new(&format!("/proc/{pid}")).exists()
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
    let presence = run
        .spec
        .get("presence")
        .and_then(|p| serde_json::from_value(p.clone()).ok())
        .unwrap_or(if run.trigger == TriggerKind::Interactive {
            Presence::Watching
        } else {
            Presence::Away
        });
    let quiet = run
        .spec
        .get("quiet")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    (presence, quiet)
}

fn summary(m: &Manifest) -> String {
    m.deliveries
        .iter()
        .map(|d| format!("{} {} → {}", d.id, d.verb, d.destination))
        .collect::<Vec<_>>()
        .join("; ")
}

fn reply_json(r: &AttemptReply) -> Value {
    match r {
        AttemptReply::Accepted { reference } => json!({"kind": "accepted", "reference": reference}),
        AttemptReply::AcceptedUnverifiable { reference } => {
            json!({"kind": "accepted_unverifiable", "reference": reference})
        }
        AttemptReply::Rejected { reason } => json!({"kind": "rejected", "reason": reason}),
        AttemptReply::Lost { reason } => json!({"kind": "lost", "reason": reason}),
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
        (AttemptReply::Accepted { reference }, Observation::Unobservable) => {
            (DeliveryStatus::Verified, reference.clone(), String::new())
        }
    }
}
