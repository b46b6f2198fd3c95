//! Runs driven by an agent outside the host (MCP, §17): the agent is the model. Each of its
//! tool calls is one turn, journaled and routed through the same `handle_call` as the host's
//! own loop — posture, approvals, the ledger, evidence and the reconciler all apply — and its
//! `finish` is the model's final text. Between calls the run waits `suspended` with no lease
//! (for the agent, or for the person when a card is open), so any process — `vouch mcp` on
//! stdio, `/mcp`, the CLI, the HTTP API — can take the next step, and start-up reconciliation
//! never mistakes a run between two calls for an orphan. Touches the run's state, lease and
//! journal; no provider I/O of its own.

use super::*;

/// The model spec of a run an outside agent drives.
pub fn external_model(via: &str) -> Value {
    json!({"kind": "external", "via": via})
}

/// True when an agent outside the host drives this run (its spec's model kind).
pub fn is_external(spec: &Value) -> bool {
    StoredSpec::is_external(spec)
}

/// What one outside call did.
#[derive(Debug, Clone, PartialEq)]
pub struct ExternalReply {
    /// The tool's answer, as the host's own model would read it.
    pub ok: bool,
    pub text: String,
    /// Set when the call suspended the run (an approval, the question) or ended it.
    pub end: Option<RunEnd>,
}

impl Host {
    /// Create a run that an outside agent drives; it waits for the agent's first call.
    /// Refuse a call an outside agent sends before it is journaled or opens a run: arguments
    /// larger than a turn (`TURN_BYTES_MAX`), or a `declare` whose manifest breaks §3.2.1.
    pub fn check_external_call(&self, name: &str, args: &Value) -> HostResult<()> {
        check_call_bytes(args)?;
        if name == "declare" {
            if let Ok(m) = serde_json::from_value::<Manifest>(crate::schemas::without_nulls(args)) {
                m.check_shape()
                    .map_err(|e| HostError::BadInput(format!("invalid `declare`: {e}")))?;
            }
        }
        Ok(())
    }

    pub fn open_external(&self, spec: &RunSpec) -> HostResult<String> {
        let id = new_id(self.clock.as_ref());
        self.create(&id, spec, None, None)?;
        self.idle(&id)?;
        Ok(id)
    }

    /// Take an outside agent's run for one step: refused when it ended, when the person has
    /// something open on it, or when it is not an outside agent's run.
    fn take_external(&self, run_id: &str) -> HostResult<RunRecord> {
        let run = self.record(run_id)?;
        if !is_external(&run.spec) {
            return Err(HostError::NotWaiting(format!(
                "run {run_id} is driven by the host's own model, not by an agent over MCP"
            )));
        }
        match run.state {
            RunState::Ended => {
                return Err(HostError::NotWaiting(format!(
                    "run {run_id} has already ended; read its receipt"
                )))
            }
            RunState::Suspended => {
                if let Some(card) = self
                    .store
                    .cards_for_run(run_id)?
                    .into_iter()
                    .find(|c| c.state == CardState::Open)
                {
                    return Err(HostError::NotWaiting(format!(
                        "run {run_id} waits for the person ({}: {}); call again once they decided",
                        card.delivery.as_deref().unwrap_or("the question"),
                        card.summary
                    )));
                }
            }
            _ => {}
        }
        self.lease(run_id)?;
        if run.state != RunState::Running {
            self.store.set_run_state(run_id, RunState::Running)?;
        }
        Ok(run)
    }

    /// Between two calls: waiting for the agent, with no lease, everything committed.
    pub(super) fn idle(&self, run_id: &str) -> HostResult<()> {
        self.store.set_run_state(run_id, RunState::Suspended)?;
        self.store.release_run(run_id, &self.owner)?;
        self.store.flush()?;
        Ok(())
    }

    /// Run one step of an outside agent's run: one step at a time per run in this process
    /// (another process is kept out by the run's lease); a step that fails part-way leaves the
    /// run waiting for the agent again rather than leased and running.
    fn external_step<T>(
        &self,
        run_id: &str,
        step: impl FnOnce() -> HostResult<T>,
    ) -> HostResult<T> {
        let view = RunView::from_events(&self.store.journal_events(run_id)?);
        if !self.drives.try_open(run_id, view) {
            return Err(HostError::OwnedElsewhere(format!(
                "another call on run {run_id} is in progress; call again when it has answered"
            )));
        }
        let out = step();
        self.drives.close(run_id);
        if out.is_err() {
            if let Ok(Some(r)) = self.store.run(run_id) {
                if r.state == RunState::Running && r.owner.as_deref() == Some(self.owner.as_str()) {
                    let _ = self.idle(run_id);
                }
            }
        }
        out
    }

    /// One tool call of the outside agent (`declare`, `deliver`, a verb, `clarify`, or a work
    /// tool), as one turn of the run.
    pub fn external_call(
        &self,
        run_id: &str,
        name: &str,
        args: &Value,
    ) -> HostResult<ExternalReply> {
        self.external_call_spent(run_id, name, args, j::TokenUsage::default())
    }

    /// [`Host::external_call`] with the tokens the agent's model spent on the turn that made
    /// this call, as the agent reports them (a remote worker's model runs on its machine, so
    /// the host cannot see them): journaled as the turn's usage, counted in the run's cost and
    /// against its token budget.
    pub fn external_call_spent(
        &self,
        run_id: &str,
        name: &str,
        args: &Value,
        spent: j::TokenUsage,
    ) -> HostResult<ExternalReply> {
        self.external_step(run_id, || {
            self.external_call_open(run_id, name, args, spent, |run, call| {
                self.handle_call(run, call)
            })
        })
    }

    /// One call of the outside agent as one turn, answered by `handle` (the host's own
    /// routing, or a call the caller answers itself, as a task attempt's `submit`).
    pub(super) fn external_call_with(
        &self,
        run_id: &str,
        name: &str,
        args: &Value,
        spent: j::TokenUsage,
        handle: impl FnOnce(&RunRecord, &ToolCall) -> HostResult<CallResult>,
    ) -> HostResult<ExternalReply> {
        self.external_step(run_id, || {
            self.external_call_open(run_id, name, args, spent, handle)
        })
    }

    fn external_call_open(
        &self,
        run_id: &str,
        name: &str,
        args: &Value,
        spent: j::TokenUsage,
        handle: impl FnOnce(&RunRecord, &ToolCall) -> HostResult<CallResult>,
    ) -> HostResult<ExternalReply> {
        let run = self.take_external(run_id)?;
        check_call_bytes(args)?;
        let view = self.view(run_id)?;
        if let Some((cause, reason)) = self.external_budget_spent(&view) {
            let text = format!("the run ended: {reason}");
            let end = self.end_loop(run_id, Some((cause, reason)))?;
            self.store.flush()?;
            return Ok(ExternalReply {
                ok: false,
                text,
                end: Some(end),
            });
        }
        let call = ToolCall {
            id: format!("mcp-{}", view.turns),
            name: name.to_string(),
            arguments: args.to_string(),
        };
        self.journal(
            run_id,
            self.ev(j::Turn {
                index: view.turns as u64,
                content: None,
                tool_calls: vec![(&call).into()],
                usage: Some(spent),
                error: None,
            }),
        )?;
        let res = handle(&run, &call)?;
        self.journal(
            run_id,
            self.ev(j::ToolCalled {
                call_id: call.id.clone(),
                name: call.name.clone(),
                ok: res.ok,
                result: res.text.clone(),
            }),
        )?;
        let end = self.after_external_call(run_id, &res)?;
        Ok(ExternalReply {
            ok: res.ok,
            text: res.text,
            end,
        })
    }

    /// After an outside agent's call: the run ends (the call ended it), waits for the person,
    /// or waits, unowned, for the agent's next call.
    fn after_external_call(&self, run_id: &str, res: &CallResult) -> HostResult<Option<RunEnd>> {
        Ok(if res.end.is_some() {
            let end = self.end_loop(run_id, None)?;
            self.store.flush()?;
            Some(end)
        } else if let Some(reason) = res.suspend.clone() {
            self.journal(
                run_id,
                self.ev(j::Suspended {
                    reason: reason.to_string(),
                    at_boot: false,
                }),
            )?;
            self.idle(run_id)?;
            self.say(&format!("⏸ run {run_id} is waiting for you: {reason}"));
            Some(RunEnd::Suspended { reason })
        } else {
            self.idle(run_id)?;
            None
        })
    }

    /// The agent is done: its final text (an interactive run's reply to the person), then the
    /// one reconciler ends the run (§9).
    pub fn external_finish(&self, run_id: &str, text: &str) -> HostResult<RunEnd> {
        self.external_finish_spent(run_id, text, j::TokenUsage::default())
    }

    /// [`Host::external_finish`] with the tokens the agent's model spent on its final turn,
    /// as the agent reports them.
    pub fn external_finish_spent(
        &self,
        run_id: &str,
        text: &str,
        spent: j::TokenUsage,
    ) -> HostResult<RunEnd> {
        self.external_step(run_id, || self.external_finish_open(run_id, text, spent))
    }

    /// The budget an outside agent's run has spent, if it has: its turns, or the tokens its
    /// agent reported (§13.7.2) — the cause and the reason its end says.
    fn external_budget_spent(&self, view: &RunView) -> Option<(&'static str, String)> {
        let tokens = view.prompt_tokens + view.completion_tokens;
        self.limits.spent("agent", view.turns, tokens)
    }

    fn external_finish_open(
        &self,
        run_id: &str,
        text: &str,
        spent: j::TokenUsage,
    ) -> HostResult<RunEnd> {
        let run = self.take_external(run_id)?;
        let view = self.view(run_id)?;
        self.journal(
            run_id,
            self.ev(j::Turn {
                index: view.turns as u64,
                content: Some(text.to_string()),
                tool_calls: vec![],
                usage: Some(spent),
                error: None,
            }),
        )?;
        self.final_text_to_surface(&run, text)?;
        let end = self.end_loop(run_id, None)?;
        self.store.flush()?;
        Ok(end)
    }
}

fn check_call_bytes(args: &Value) -> HostResult<()> {
    let bytes = args.to_string().len();
    if bytes > TURN_BYTES_MAX {
        return Err(HostError::BadInput(format!(
            "the call's arguments are {bytes} bytes, more than the limit of {TURN_BYTES_MAX}; send less (a payload is at most 1 MiB)"
        )));
    }
    Ok(())
}
