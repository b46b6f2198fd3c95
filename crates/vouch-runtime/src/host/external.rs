//! Runs driven by an agent outside the host (MCP, HTTP, a remote worker, §17): the agent is
//! the model. A remote worker posts its model's whole turns; an agent calling tool by tool
//! makes each call one turn and its `finish` the final text (§13.2.2). Every turn goes through
//! the one turn machine (`crate::turns`) and the same `handle_call` as the host's own loop —
//! budgets, repairs, size limits, "not run" after a suspension, posture, approvals, the
//! ledger, evidence and the reconciler all apply. Between calls the run waits `suspended` with no lease
//! (for the agent, or for the person when a card is open), so any process — `vouch mcp` on
//! stdio, `/mcp`, the CLI, the HTTP API — can take the next step, and start-up reconciliation
//! never mistakes a run between two calls for an orphan. Touches the run's state, lease and
//! journal; no provider I/O of its own.

use super::turn::spent_of;
use super::*;
use crate::turns::Step;

/// One whole turn of an outside agent's model, as its worker posts it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AgentTurn {
    /// The model's text (its final text when there are no calls).
    pub content: Option<String>,
    /// The calls exactly as the model made them: the arguments as the text it sent.
    pub tool_calls: Vec<ToolCall>,
    /// The tokens the turn spent, as the worker reports them.
    pub usage: j::TokenUsage,
    /// The model failed to give a turn: the loop ends `model_error` with this reason.
    pub error: Option<String>,
    /// A scripted model made its last call: the loop ends with no turn journaled.
    pub exhausted: bool,
}

/// One call's answer within a turn.
#[derive(Debug, Clone, PartialEq)]
pub struct CallAnswer {
    pub call_id: String,
    pub ok: bool,
    pub text: String,
}

/// What one whole turn did.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnReply {
    /// Each call's answer, in the turn's order ("not run" ones included).
    pub results: Vec<CallAnswer>,
    /// Why the loop stopped without the work, when it did.
    pub stopped: Option<String>,
    /// Set when the turn suspended the run or ended it.
    pub end: Option<RunEnd>,
}

/// How an outside run's calls are answered: the host's own routing, or a task attempt's.
pub(super) type Handler<'a> = &'a dyn Fn(&RunRecord, &ToolCall) -> HostResult<CallResult>;

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

    /// One tool call of the outside agent (`declare`, a verb, `clarify`, or a work tool), as
    /// one turn of the run.
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
        self.external_call_with(run_id, name, args, spent, &|run, call| {
            self.handle_call(run, call)
        })
    }

    /// One call of an agent calling tool by tool: a turn of its own, with that one call.
    pub(super) fn external_call_with(
        &self,
        run_id: &str,
        name: &str,
        args: &Value,
        spent: j::TokenUsage,
        handle: Handler<'_>,
    ) -> HostResult<ExternalReply> {
        check_call_bytes(args)?;
        let turns = self.view(run_id)?.turns;
        let turn = AgentTurn {
            tool_calls: vec![ToolCall {
                id: format!("mcp-{turns}"),
                name: name.to_string(),
                arguments: args.to_string(),
            }],
            usage: spent,
            ..AgentTurn::default()
        };
        let reply = self.external_turn_with(run_id, &turn, handle)?;
        Ok(match reply.results.into_iter().next() {
            Some(a) => ExternalReply {
                ok: a.ok,
                text: a.text,
                end: reply.end,
            },
            None => ExternalReply {
                ok: false,
                text: format!(
                    "the run ended: {}",
                    reply.stopped.unwrap_or_else(|| "its loop is over".into())
                ),
                end: reply.end,
            },
        })
    }

    /// One whole turn of an outside agent's model, answered by the host's own routing.
    pub fn external_turn(&self, run_id: &str, turn: &AgentTurn) -> HostResult<TurnReply> {
        self.external_turn_with(run_id, turn, &|run, call| self.handle_call(run, call))
    }

    /// One whole turn through the turn machine: one step at a time per run.
    pub(super) fn external_turn_with(
        &self,
        run_id: &str,
        turn: &AgentTurn,
        handle: Handler<'_>,
    ) -> HostResult<TurnReply> {
        self.external_step(run_id, || self.external_turn_open(run_id, turn, handle))
    }

    fn external_turn_open(
        &self,
        run_id: &str,
        turn: &AgentTurn,
        handle: Handler<'_>,
    ) -> HostResult<TurnReply> {
        let run = self.take_external(run_id)?;
        let mut spent = spent_of(&self.view(run_id)?);
        let budget = self.limits.budget();
        let (step, results) = if let Some(step) = budget.before_turn("agent", &spent, false) {
            (step, vec![])
        } else if turn.exhausted {
            (Step::Stop(None), vec![])
        } else if let Some(e) = turn
            .error
            .clone()
            .or_else(|| crate::turns::admit(turn.content.as_deref(), &turn.tool_calls).err())
        {
            (self.model_failed(run_id, spent.turns, &e)?, vec![])
        } else {
            self.agent_turn(&run, turn, &mut spent, handle)?
        };
        let stopped = match &step {
            Step::Stop(Some((_, reason))) => Some(reason.clone()),
            _ => None,
        };
        let end = self.after_agent_turn(run_id, step)?;
        Ok(TurnReply {
            results,
            stopped,
            end,
        })
    }

    /// A turn the machine let in: journaled with its text, then its final text or its calls.
    fn agent_turn(
        &self,
        run: &RunRecord,
        turn: &AgentTurn,
        spent: &mut crate::turns::Spent,
        handle: Handler<'_>,
    ) -> HostResult<(Step, Vec<CallAnswer>)> {
        let index = spent.turns as u64;
        spent.took(turn.usage.prompt_tokens + turn.usage.completion_tokens);
        self.journal(
            &run.id,
            self.ev(j::Turn {
                index,
                content: turn.content.clone(),
                tool_calls: turn.tool_calls.iter().map(Into::into).collect(),
                usage: Some(turn.usage),
                error: None,
            }),
        )?;
        if !turn.tool_calls.is_empty() {
            return self.calls(run, &turn.tool_calls, spent, handle);
        }
        self.final_text_to_surface(run, turn.content.as_deref().unwrap_or_default())?;
        Ok((Step::Stop(None), vec![]))
    }

    /// After an outside agent's turn: the run ends (the turn ended it, or the machine did),
    /// waits for the person, or waits, unowned, for the agent's next turn.
    fn after_agent_turn(&self, run_id: &str, step: Step) -> HostResult<Option<RunEnd>> {
        let end = match step {
            Step::Next => {
                self.idle(run_id)?;
                return Ok(None);
            }
            Step::Suspend(reason) => {
                self.journal(
                    run_id,
                    self.ev(j::Suspended {
                        reason: reason.to_string(),
                        at_boot: false,
                    }),
                )?;
                self.idle(run_id)?;
                self.say(&format!("⏸ run {run_id} is waiting for you: {reason}"));
                return Ok(Some(RunEnd::Suspended { reason }));
            }
            Step::Stop(stopped) => self.end_loop(run_id, stopped)?,
            Step::Cancelled => {
                let turns = self.view(run_id)?.turns;
                self.stop_cancelled(run_id, turns)?
            }
        };
        self.store.flush()?;
        Ok(Some(end))
    }

    /// The agent is done: its final text (an interactive run's reply to the person), then the
    /// one reconciler ends the run (§9).
    pub fn external_finish(&self, run_id: &str, text: &str) -> HostResult<RunEnd> {
        self.external_finish_spent(run_id, text, j::TokenUsage::default())
    }

    /// [`Host::external_finish`] with the tokens the agent's model spent on its final turn,
    /// as the agent reports them: a turn with text and no calls.
    pub fn external_finish_spent(
        &self,
        run_id: &str,
        text: &str,
        spent: j::TokenUsage,
    ) -> HostResult<RunEnd> {
        let turn = AgentTurn {
            content: Some(text.to_string()),
            usage: spent,
            ..AgentTurn::default()
        };
        let reply = self.external_turn(run_id, &turn)?;
        reply.end.ok_or_else(|| {
            HostError::Internal(format!("run {run_id} did not end with its final turn"))
        })
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
