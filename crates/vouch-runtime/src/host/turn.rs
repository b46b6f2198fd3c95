//! The turn loop: creating a run, rebuilding its chat, driving model turns, and routing
//! each tool call. Touches the run's state, lease and journal; no provider I/O.

use super::*;
use crate::turns::{Answered, Gate, Spent, Step, Turn};

/// Findings a refused run names (the rest are in `vouch journal verify`).
const FINDINGS_NAMED_MAX: usize = 5;

/// What a drive keeps between its turns.
struct Drive {
    model: Box<dyn Model>,
    tools: Arc<[ToolSpec]>,
    /// Turns, tokens and repairs the run has spent (the turn machine's count).
    spent: Spent,
    /// When this drive last took the run's lease.
    leased_at_ms: i64,
}

impl Host {
    // ------------------------------------------------------------------ starting runs

    /// Create a run (journal `run_created`) and drive it.
    pub fn start(&self, spec: &RunSpec) -> HostResult<(String, RunEnd)> {
        let id = new_id(self.clock.as_ref());
        // The record just written is the run as the store holds it: no need to read it back.
        let run = self.create_open(&id, spec, None)?;
        let end = self.drive_born(run).0?;
        Ok((id, end))
    }

    /// Create a run without driving it; the caller drives it with [`Host::drive`] where it
    /// chooses (the HTTP server: on a blocking thread, after answering with the run's id).
    pub fn begin(&self, spec: &RunSpec) -> HostResult<String> {
        let id = new_id(self.clock.as_ref());
        self.create(&id, spec, None, None)?;
        Ok(id)
    }

    pub fn create(
        &self,
        id: &str,
        spec: &RunSpec,
        parent: Option<&RunRecord>,
        slot: Option<(&str, i64)>,
    ) -> HostResult<RunRecord> {
        let (run, spec_sha256) = self.insert_run(id, spec, parent, slot)?;
        self.announce(&run, spec_sha256)?;
        Ok(run)
    }

    /// Create a run this call drives at once ([`Host::drive_born`]): its drive is opened
    /// before its first event, so every event it journals is folded into the drive's view
    /// and conversation as it is written, and the drive never reads back the journal it has
    /// just written. The caller drives it or closes the drive (`drives.close`).
    pub(super) fn create_open(
        &self,
        id: &str,
        spec: &RunSpec,
        parent: Option<&RunRecord>,
    ) -> HostResult<Arc<RunRecord>> {
        let (run, spec_sha256) = self.insert_run(id, spec, parent, None)?;
        // One record, shared by the drive's state and the caller (it holds the whole spec).
        let run = Arc::new(run);
        let opened = self.messages_of(&run, &[]).map(|messages| {
            self.drives.open(&run, RunView::default(), messages);
        });
        if let Err(e) = opened.and_then(|()| self.announce(&run, spec_sha256)) {
            self.drives.close(id);
            return Err(e);
        }
        Ok(run)
    }

    /// The run's row, born owned; with the hash of the spec it stores.
    fn insert_run(
        &self,
        id: &str,
        spec: &RunSpec,
        parent: Option<&RunRecord>,
        slot: Option<(&str, i64)>,
    ) -> HostResult<(RunRecord, Option<String>)> {
        // Refused before anything is written: a run no one can name is no run (§2).
        super::check_title(&spec.title).map_err(HostError::BadInput)?;
        let chain_root = parent
            .map(|p| p.chain_root.clone())
            .unwrap_or_else(|| id.to_string());
        let scope = parent
            .map(|p| p.scope.clone())
            .or(spec.scope.clone())
            .unwrap_or_else(|| chain_root.clone());
        let presence = spec
            .presence
            .unwrap_or(vouch_store::spec::default_presence(spec.trigger));
        let (stored_spec, spec_sha256) =
            run_spec_record(self.models.record(&spec.model), presence, spec);
        let run = NewRun {
            state: RunState::Running,
            id: id.to_string(),
            trigger: spec.trigger,
            title: spec.title.clone(),
            chain_root,
            parent: parent.map(|p| p.id.clone()),
            scope,
            spec: stored_spec,
            created_ms: self.now(),
            // Born owned: another process's start-up reconciliation must never take a run
            // that is being created for an orphan (issue 11 #10).
            lease: Some(vouch_store::RunLease {
                owner: self.owner.clone(),
                until_ms: self.now() + self.limits.lease_ms,
            }),
        };
        let born = match slot {
            Some((schedule, slot_ms)) => self.store.consume_slot(schedule, slot_ms, &run),
            None => self.store.create_run(&run).map(|()| true),
        };
        if !born.map_err(|e| self.damaged(e))? {
            let (schedule, slot_ms) = slot.unwrap_or_default();
            return Err(HostError::SlotTaken(format!("{schedule}@{slot_ms}")));
        }
        Ok((created_record(run), spec_sha256))
    }

    /// The run's first event, `run_created`, and its first line.
    fn announce(&self, run: &RunRecord, spec_sha256: Option<String>) -> HostResult<()> {
        self.journal(
            &run.id,
            self.ev(j::RunCreated {
                title: run.title.clone(),
                trigger: run.trigger,
                parent: run.parent.clone(),
                scope: run.scope.clone(),
                spec_sha256,
            }),
        )?;
        self.say(&format!("▶ run {} started: {}", run.id, run.title));
        Ok(())
    }

    /// The store refuses new runs while damage found by verification is open (§10.2): the
    /// refusal names what was found, and what to do.
    fn damaged(&self, e: StoreError) -> HostError {
        let StoreError::Conflict(m) = &e else {
            return e.into();
        };
        if !m.contains(vouch_store::codec::DAMAGED_REFUSAL) {
            return e.into();
        }
        // The newest record holds everything its verification found.
        let open = self.store.open_damage().unwrap_or_default();
        let found = open.first().map(|r| r.found.as_slice()).unwrap_or_default();
        let mut named: Vec<&str> = found
            .iter()
            .take(FINDINGS_NAMED_MAX)
            .map(String::as_str)
            .collect();
        let more = format!(
            "and {} more",
            found.len().saturating_sub(FINDINGS_NAMED_MAX)
        );
        if found.len() > FINDINGS_NAMED_MAX {
            named.push(&more);
        }
        let found = if named.is_empty() {
            String::new()
        } else {
            format!("; found: {}", named.join("; "))
        };
        StoreError::Conflict(format!(
            "{m}{found}. Keep a copy of the store, read `vouch journal verify`, then repair it from a backup or acknowledge the damage"
        ))
        .into()
    }

    // ------------------------------------------------------------------ the loop

    /// The tools offered to one run's model: a task attempt's built once per shape.
    fn run_tools(&self, spec: &Value) -> Arc<[ToolSpec]> {
        let base = self.tool_specs();
        match super::task::tool_shape(&base, spec) {
            Some(shape) => self
                .tools
                .shaped(shape, |shape| super::task::shaped_tools(&base, shape)),
            None => base,
        }
    }

    pub(super) fn tool_specs(&self) -> Arc<[ToolSpec]> {
        self.tools.get(&self.work, || {
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
        })
    }

    pub(super) fn messages(&self, run: &RunRecord) -> HostResult<Vec<ChatMessage>> {
        self.messages_of(run, &self.store.journal_events(&run.id)?)
    }

    /// The conversation of `run` from its journal `entries` (read once by the caller).
    fn messages_of(
        &self,
        run: &RunRecord,
        entries: &[vouch_store::EventEntry],
    ) -> HostResult<Vec<ChatMessage>> {
        let mut system = String::from("You are an agent hosted by vouch. First call `declare` with the manifest of what you will deliver; then do the work with tools and perform each delivery with its verb tool. The host decides what may run and reports what really happened.");
        // Pinned context the attempt's profile places in the system message (§13.1.2).
        let spec = vouch_store::spec::SpecHead::read(&run.spec);
        if let Some(s) = spec.told("system").and_then(Value::as_str) {
            system.push_str(s);
        }
        let mut msgs = vec![ChatMessage::System { content: system }];
        // A task continuation (§13.5) goes on from the conversation of the run it continues,
        // read from that run's durable journal (so any worker can rebuild it).
        let prior = spec.prior();
        if let Some(prior) = prior.map(|p| p.run.as_str()) {
            if prior != run.id {
                if let Some(p) = self.store.run(prior)? {
                    msgs.extend(self.messages(&p)?.into_iter().skip(1));
                }
            }
        }
        // A task attempt is told its task (§13.4.3); any other run, the person's request.
        let first = spec
            .told("message")
            .and_then(Value::as_str)
            .map_or_else(|| run.title.clone(), String::from);
        msgs.push(ChatMessage::User { content: first });
        msgs.extend(entries.iter().filter_map(|e| {
            // A body that does not parse is not part of the conversation; the view
            // marks it corrupt and the receipt says so.
            chat_message(e.event.as_ref().ok()?, e.delivery.as_deref())
        }));
        Ok(msgs)
    }

    /// Drive a run until it suspends or ends. Safe to call on a run resumed after approval.
    /// While it drives, the run's view and conversation live in memory, extended by each
    /// append (per-turn cost does not grow with the run); they are rebuilt from the store
    /// whenever a run is (re)opened.
    pub fn drive(&self, run_id: &str) -> HostResult<RunEnd> {
        self.drive_run(self.record(run_id)?)
    }

    /// Drive a run from its record as the store holds it now (as `create` returns it).
    pub(super) fn drive_run(&self, run: RunRecord) -> HostResult<RunEnd> {
        self.drive_run_viewed(run).0
    }

    /// [`Host::drive_run`], with the run's view as the drive left it (every event it
    /// journaled applied; not the terminal), when the drive got as far as opening it.
    pub(super) fn drive_run_viewed(&self, run: RunRecord) -> (HostResult<RunEnd>, Option<RunView>) {
        self.drive_viewed(Arc::new(run), false)
    }

    /// Drive a run [`Host::create_open`] created, whose drive is open since its first event;
    /// with its view as the drive left it.
    pub(super) fn drive_born(&self, run: Arc<RunRecord>) -> (HostResult<RunEnd>, Option<RunView>) {
        self.drive_viewed(run, true)
    }

    fn drive_viewed(
        &self,
        run: Arc<RunRecord>,
        born: bool,
    ) -> (HostResult<RunEnd>, Option<RunView>) {
        let id = run.id.clone();
        let result = self.drive_open(run, born);
        let view = self.drives.close(&id);
        (result, view)
    }

    fn drive_open(&self, run: Arc<RunRecord>, born: bool) -> HostResult<RunEnd> {
        let run_id = run.id.as_str();
        if run.state == RunState::Ended {
            return Err(HostError::NotWaiting(format!(
                "run {run_id} has already ended; see `vouch receipt {run_id}`"
            )));
        }
        let leased_at_ms = self.open_drive(&run, born)?;
        let view = self.view(run_id)?;
        if self.drives.stop_requested(run_id) {
            return self.stop_cancelled(run_id, view.turns);
        }
        // Resume from the suspended step: execute an approved payload first (§7).
        for (id, item) in &view.items {
            if let Some(hash) = &item.granted {
                self.attempts().execute_approved(&run, id, hash)?;
            }
        }
        // An agent outside the host drives this run (MCP): the host carried out what the
        // person decided; the agent's next call goes on from here.
        if super::external::is_external(&run.spec) {
            self.store.set_run_state(run_id, RunState::Suspended)?;
            self.store.release_run(run_id, &self.owner)?;
            self.store.flush()?;
            return Ok(RunEnd::Suspended {
                reason: "waiting for the agent's next call (it drives this run over MCP)".into(),
            });
        }
        let view = self.view(run_id)?;
        let model = match self
            .models
            .model(&run.spec, view.turn_offset + view.turns_complete)
        {
            Ok(m) => m,
            Err(e) => {
                // A model that cannot even be built never answered: the run ends with the
                // reason, never silently (§3.4).
                return self.end_loop(
                    run_id,
                    Some((
                        "model_error",
                        format!("the model could not be started: {e}"),
                    )),
                );
            }
        };
        let mut drive = Drive {
            tools: self.run_tools(&run.spec),
            model,
            spent: spent_of(&view),
            leased_at_ms,
        };
        loop {
            match self.turn(&run, &mut drive)? {
                Step::Next => continue,
                Step::Stop(stopped) => return self.end_loop(run_id, stopped),
                Step::Cancelled => return self.stop_cancelled(run_id, drive.spent.turns),
                Step::Suspend(reason) => return self.suspend_drive(run_id, reason),
            }
        }
    }

    /// Take the run for this drive (lease, state `running`) and open its view and
    /// conversation from one read of the journal. Returns when the lease was last taken.
    fn open_drive(&self, run: &Arc<RunRecord>, born: bool) -> HostResult<i64> {
        let run_id = run.id.as_str();
        // A run this process created a moment ago already holds a fresh lease: taking it again
        // would be a commit for nothing.
        let now = self.now();
        let fresh = run.owner.as_deref() == Some(self.owner.as_str())
            && run
                .lease_until_ms
                .is_some_and(|until| until - now >= self.limits.lease_ms * 2 / 3);
        if !fresh {
            self.lease(run_id)?;
        }
        // The lease is renewed by elapsed time, not per turn: a renewal is a store commit, and
        // renewing once a third of the lease has passed keeps it alive with room to spare.
        let leased_at_ms = if fresh {
            run.lease_until_ms.unwrap_or(now) - self.limits.lease_ms
        } else {
            self.now()
        };
        if run.state != RunState::Running {
            self.store.set_run_state(run_id, RunState::Running)?;
        }
        if born {
            // Open since the run's first event: its view and conversation are the journal's.
            #[cfg(debug_assertions)]
            self.check_born(run)?;
            return Ok(leased_at_ms);
        }
        // One read of the journal opens both the view and the conversation.
        let journal = self.store.journal_events(run_id)?;
        self.drives.open(
            run,
            RunView::from_events(&journal),
            self.messages_of(run, &journal)?,
        );
        Ok(leased_at_ms)
    }

    /// Debug builds check that a drive open since its run's creation holds what opening it
    /// from the journal would: the same view and the same conversation.
    #[cfg(debug_assertions)]
    fn check_born(&self, run: &RunRecord) -> HostResult<()> {
        let journal = self.store.journal_events(&run.id)?;
        let from_journal = RunView::from_events(&journal);
        let messages = self.messages_of(run, &journal)?;
        let held = self.drives.view(&run.id);
        assert_eq!(
            held.as_ref(),
            Some(&from_journal),
            "run {}: born view",
            run.id
        );
        let same = self
            .drives
            .with_messages(&run.id, |m| m == messages.as_slice());
        assert_eq!(same, Some(true), "run {}: born conversation", run.id);
        Ok(())
    }

    /// One turn: the budgets, the lease, the model's answer, then its final text or its calls.
    /// Says what the loop does next; never calls back into the loop.
    fn turn(&self, run: &RunRecord, drive: &mut Drive) -> HostResult<Step> {
        let run_id = run.id.as_str();
        // A turn boundary: a cancelled run asks the model nothing more (issue 22 #5).
        let cancelled = self.drives.stop_requested(run_id);
        let budget = self.limits.budget();
        if let Some(step) = budget.before_turn("model", &drive.spent, cancelled) {
            return Ok(step);
        }
        if self.now() - drive.leased_at_ms >= self.limits.lease_ms / 3 {
            self.lease(run_id)?;
            drive.leased_at_ms = self.now();
        }
        let turn: ModelTurn = match self.ask_model(run, drive)? {
            Ok(t) => t,
            Err(ModelError::ScriptExhausted) => {
                self.say("  loop ended: the model made its last call");
                return Ok(Step::Stop(None));
            }
            Err(e) => return self.model_failed(run_id, drive.spent.turns, &e.to_string()),
        };
        let index = drive.spent.turns as u64;
        drive
            .spent
            .took(turn.usage.prompt_tokens + turn.usage.completion_tokens);
        self.journal(
            run_id,
            self.ev(j::Turn {
                index,
                content: turn.content.clone(),
                tool_calls: turn.tool_calls.iter().map(Into::into).collect(),
                usage: Some(turn.usage.into()),
                error: None,
            }),
        )?;
        if turn.tool_calls.is_empty() {
            return self.final_turn(run, &turn);
        }
        let (step, _) = self.calls(run, &turn.tool_calls, &mut drive.spent, &|r, c| {
            self.handle_call(r, c)
        })?;
        Ok(step)
    }

    /// The model failed to give a turn: the failed turn is journaled and the loop ends
    /// `model_error` (the same on every transport).
    pub(super) fn model_failed(&self, run_id: &str, turns: usize, error: &str) -> HostResult<Step> {
        self.journal(
            run_id,
            self.ev(j::Turn {
                index: turns as u64,
                content: None,
                tool_calls: vec![],
                usage: None,
                error: Some(error.to_string()),
            }),
        )?;
        Ok(Step::Stop(Some(("model_error", error.to_string()))))
    }

    /// The model's next turn over the drive's conversation, refused when larger than a turn
    /// may be.
    fn ask_model(
        &self,
        run: &RunRecord,
        drive: &mut Drive,
    ) -> HostResult<Result<ModelTurn, ModelError>> {
        let (model, tools) = (&mut drive.model, &drive.tools);
        let next = self
            .drives
            .with_messages(&run.id, |messages| model.next_turn(messages, tools));
        let next = match next {
            Some(n) => n,
            None => model.next_turn(&self.messages(run)?, tools),
        };
        Ok(next.and_then(|t| {
            crate::turns::admit(t.content.as_deref(), &t.tool_calls)
                .map_err(ModelError::Protocol)?;
            Ok(t)
        }))
    }

    /// A turn with no calls: the model's final text, delivered to the surface if it may be.
    fn final_turn(&self, run: &RunRecord, turn: &ModelTurn) -> HostResult<Step> {
        if self.drives.stop_requested(&run.id) {
            // The final text is not delivered either.
            return Ok(Step::Cancelled);
        }
        let text = turn.content.clone().unwrap_or_default();
        self.say(&format!(
            "  model: {}",
            if text.is_empty() {
                "(no final text)".to_string()
            } else {
                text.clone()
            }
        ));
        self.final_text_to_surface(run, &text)?;
        self.say(if text.is_empty() {
            "  loop ended: the model ended its turn with no text and no calls"
        } else {
            "  loop ended: the model gave its final text"
        });
        Ok(Step::Stop(None))
    }

    /// Route each of a turn's calls through `handle` as the turn machine gates them, and
    /// journal each answer; the machine says where the run goes next. Every transport's
    /// turns come through here. Returns the step and each call's answer, in order.
    pub(super) fn calls(
        &self,
        run: &RunRecord,
        calls: &[ToolCall],
        spent: &mut Spent,
        handle: super::external::Handler<'_>,
    ) -> HostResult<(Step, Vec<super::external::CallAnswer>)> {
        let run_id = run.id.as_str();
        let mut turn = Turn::start(spent);
        let mut answers = Vec::with_capacity(calls.len());
        for call in calls {
            // Asked before each call: nothing is attempted once the cancel is durable.
            let res = match turn.gate(self.drives.stop_requested(run_id)) {
                Gate::Run => handle(run, call)?,
                Gate::NotRun(text) => CallResult::err(text),
            };
            self.journal(
                run_id,
                self.ev(j::ToolCalled {
                    call_id: call.id.clone(),
                    name: call.name.clone(),
                    ok: res.ok,
                    result: res.text.clone(),
                    repair: res.repair,
                }),
            )?;
            answers.push(super::external::CallAnswer {
                call_id: call.id.clone(),
                ok: res.ok,
                text: res.text,
            });
            turn.answered(Answered {
                repair: res.repair,
                suspend: res.suspend,
                end: res.end,
            });
        }
        spent.repairs = turn.repairs();
        let (step, ended) = turn.next(&self.limits.budget());
        if let Some(reason) = ended {
            self.say(&format!("  loop ended: {reason}"));
        }
        Ok((step, answers))
    }

    /// The run waits for the person: say why in the journal, then let it go unowned.
    pub(super) fn suspend_drive(&self, run_id: &str, reason: String) -> HostResult<RunEnd> {
        self.journal(
            run_id,
            self.ev(j::Suspended {
                reason: reason.to_string(),
                at_boot: false,
            }),
        )?;
        self.store.set_run_state(run_id, RunState::Suspended)?;
        self.store.release_run(run_id, &self.owner)?;
        self.say(&format!("⏸ run {run_id} is waiting for you: {reason}"));
        Ok(RunEnd::Suspended { reason })
    }

    /// The run's work was cancelled (its stop probe said so): the loop stops here, says why
    /// in the journal, and the run ends `cancel` like a person's cancel (§9.4): what was done
    /// before keeps its status, the rest is withdrawn.
    pub(super) fn stop_cancelled(&self, run_id: &str, turns: usize) -> HostResult<RunEnd> {
        let reason = format!(
            "the task was cancelled; the run stopped after {turns} turn(s), before any further model or provider call"
        );
        self.say(&format!("  loop ended: {reason}"));
        self.journal(
            run_id,
            self.ev(j::LoopEnded {
                cause: "cancelled".into(),
                reason,
            }),
        )?;
        let outcome = self.cancel_owned(run_id)?;
        Ok(RunEnd::Ended { outcome })
    }

    /// The loop is over: when it stopped without the work, say why in the journal (so the
    /// receipt and `--json` name it, §3.4, §10), then reconcile.
    pub(super) fn end_loop(
        &self,
        run_id: &str,
        stopped: Option<(&str, String)>,
    ) -> HostResult<RunEnd> {
        if let Some((cause, reason)) = stopped {
            self.say(&format!("  loop ended: {reason}"));
            self.journal(
                run_id,
                self.ev(j::LoopEnded {
                    cause: cause.to_string(),
                    reason: reason.to_string(),
                }),
            )?;
        }
        let outcome = self.reconcile(run_id, EndedBy::Loop)?;
        Ok(RunEnd::Ended { outcome })
    }

    /// Interactive runs: final text with no manifest implies `{write → surface}` (§3.4); an
    /// unsettled `write → surface` item receives the final text as its payload.
    pub(super) fn final_text_to_surface(&self, run: &RunRecord, text: &str) -> HostResult<()> {
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
                    self.ev(j::ManifestImplied {
                        manifest: m.clone(),
                    }),
                )?;
                self.preflight().item(run, &m, &m.deliveries[0])?;
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

    pub(super) fn handle_call(&self, run: &RunRecord, call: &ToolCall) -> HostResult<CallResult> {
        let args: Value = match serde_json::from_str(&call.arguments) {
            Ok(v) => v,
            Err(e) => {
                return Ok(CallResult::repair(format!(
                    "invalid arguments for `{}`: {e}; send a JSON object",
                    call.name
                )))
            }
        };
        // §17.1: free text holds no NUL, on either backend; the model can send it again.
        if let Some((path, e)) = vouch_core::input::nul_in_json(&args) {
            return Ok(CallResult::repair(format!(
                "invalid arguments for `{}`: `{path}` {e}",
                call.name
            )));
        }
        match call.name.as_str() {
            "declare" => self.declare().call(run, &args),
            "clarify" => {
                let q = args
                    .get("question")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_string();
                self.clarify().ask(run, &q, None)
            }
            name => {
                if let Some(verb) = Verb::parse(name).or((name == "deliver").then_some(Verb::Write))
                {
                    self.route()
                        .propose(run, call, verb, name == "deliver", &args)
                } else {
                    self.work_tool(run, call, &args)
                }
            }
        }
    }

    pub(super) fn work_tool(
        &self,
        run: &RunRecord,
        call: &ToolCall,
        args: &Value,
    ) -> HostResult<CallResult> {
        let view = self.view(&run.id)?;
        // §3.4: no tool with an effect before the manifest. Work tools without effect may
        // read, but we still require the manifest so intent is durable before work starts.
        if view.manifest.is_none() {
            self.proposals().reject(
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
}

/// The record of a run just created, as the store now holds it (no need to read it back).
fn created_record(run: NewRun) -> RunRecord {
    RunRecord {
        id: run.id,
        trigger: run.trigger,
        title: run.title,
        chain_root: run.chain_root,
        parent: run.parent,
        scope: run.scope,
        spec: run.spec,
        state: run.state,
        outcome: None,
        ended_by: None,
        created_ms: run.created_ms,
        ended_ms: None,
        owner: run.lease.as_ref().map(|l| l.owner.clone()),
        lease_until_ms: run.lease.as_ref().map(|l| l.until_ms),
    }
}

/// The chat message a journal event adds to the conversation the model sees, if any: the same
/// mapping builds the conversation from the journal when a drive opens and extends it with
/// each event the drive appends.
///
/// What happened while the run waited for the person — an approval carried out, a denial — and
/// what a continuation carried over is told to the model as the host's own message before its
/// next turn, so it never works from "awaits the person's approval" (issue 11). Statuses still
/// come only from evidence (I2): these messages only report it.
/// What a run has spent, as its journal says.
pub(super) fn spent_of(view: &RunView) -> Spent {
    Spent {
        turns: view.turns,
        tokens: view.prompt_tokens + view.completion_tokens,
        repairs: view.repairs,
    }
}

pub(super) fn chat_message(event: &Event, delivery: Option<&str>) -> Option<ChatMessage> {
    let d = delivery.unwrap_or("");
    let host = |text: String| {
        Some(ChatMessage::User {
            content: format!("[vouch host] {text}"),
        })
    };
    match event {
        Event::ApprovalGranted(b) => host(format!(
            "The person approved {d}; the host carries out exactly the approved payload{}.",
            if b.carried_from.is_some() {
                " (approved in the run this one continues)"
            } else {
                ""
            }
        )),
        Event::ApprovalDenied(_) => host(format!(
            "The person denied {d}: it is withdrawn and will not be done; do not attempt it again."
        )),
        // The outcome of an approved act (it follows the wait, so no tool result carries it),
        // or a status carried over from the interrupted run this one continues.
        Event::Evidence(b) if b.carried_from.is_some() || b.posture == Some(Posture::Confirm) => {
            let detail = [&b.evidence, &b.reason]
                .into_iter()
                .find(|t| !t.is_empty())
                .map(|t| format!(" ({t})"))
                .unwrap_or_default();
            host(format!(
                "{d} is now {}{detail}{}.",
                b.status.as_str(),
                if b.carried_from.is_some() {
                    ", settled by the interrupted run this one continues"
                } else {
                    ""
                }
            ))
        }
        Event::Turn(b) => Some(ChatMessage::Assistant {
            content: b.content.clone(),
            tool_calls: b.tool_calls.iter().map(Into::into).collect(),
        }),
        // A patch attempt: the model is told where it works and what the host will check.
        Event::Workspace(b) => host(workspace_message(b)),
        Event::ToolCalled(b) => Some(ChatMessage::Tool {
            tool_call_id: b.call_id.clone(),
            content: b.result.clone(),
        }),
        Event::ClarifyAnswered(b) => Some(ChatMessage::User {
            content: b.answer.clone(),
        }),
        _ => None,
    }
}

/// The spec a run records: its model (moved in, not copied as `json!` would copy it), its
/// presence, and whether the presence and quietness were asked for. The members' order is
/// the stored order.
fn run_spec_record(
    model: ModelSpec,
    presence: Presence,
    spec: &RunSpec,
) -> (Value, Option<String>) {
    let stored = StoredSpec {
        model,
        presence: Some(presence),
        presence_explicit: spec.presence.is_some(),
        quiet: spec.quiet,
    };
    let value = stored.to_value();
    // Its hash for `run_created` from the typed form (the `Value`'s canonical form sorts
    // every object's members again); the `Value` form when the typed one refuses (a float).
    let hash = match vouch_core::canonical_typed(&stored) {
        Ok(text) => Some(vouch_core::sha256_hex(text.as_bytes())),
        Err(_) => vouch_core::payload_hash(&value).ok(),
    };
    (value, hash)
}

/// The host's message to the model in a patch attempt about its worktree (from the
/// `workspace` event).
pub(super) fn workspace_message(w: &j::Workspace) -> String {
    format!(
        "This is a patch attempt. Your worktree is at base commit {}; work in it with repo_list, repo_read_file, repo_write_file and repo_run (paths relative to its top). Change: {}. You may change only: {}. After the run the host diffs the worktree and runs its checks ({}); what you say about tests does not count.",
        w.base,
        w.targets.join(", "),
        w.allow.join(", "),
        w.checks.join(", "),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The recorded spec is, byte for byte, what `json!` wrote before (its text is stored and
    /// its hash journaled).
    #[test]
    fn the_spec_record_is_what_json_wrote() {
        let model = json!({"kind": "script", "turns": [{"final": "é\n\"x\""}, {"n": 1.5}]});
        for (presence, asked, quiet) in [
            (Presence::Watching, None, false),
            (Presence::Away, Some(Presence::Away), true),
            (Presence::Nearby, Some(Presence::Watching), false),
        ] {
            let spec = RunSpec {
                trigger: TriggerKind::Interactive,
                title: "t".into(),
                presence: asked,
                quiet,
                model: ModelSpec::from(model.clone()),
                scope: None,
            };
            let before = json!({"model": model.clone(), "presence": presence, "presence_explicit": spec.presence.is_some(), "quiet": spec.quiet});
            let (now, hash) = run_spec_record(spec.model.clone(), presence, &spec);
            assert_eq!(hash, vouch_core::payload_hash(&now).ok());
            assert_eq!(now.to_string(), before.to_string());
            assert_eq!(now, before);
        }
    }
}
