//! A task attempt's run opened by the host when a worker claims over HTTP or MCP (§13.2): a
//! run with trigger `task` that the worker drives from outside (its model is the agent), one
//! call at a time through `external_call`, so its deliveries get postures, cards, the ledger,
//! evidence and a receipt exactly as a CLI worker's do. Its `submit` goes through the one
//! `accept_submission`; its end decides the attempt's report as a CLI worker's run does
//! (a missing handoff fails the attempt). Touches the run's journal through the external
//! calls; the board's rows are the caller's.

use super::task::{ended_report, submit_spec, submitted_in, tools_for_run};
use super::*;
use vouch_store::board::{AttemptRef, BoardStore, Report, Reported, TaskRecord};

/// Where a claimed attempt stands after a step of its run, as the host told the board.
#[derive(Debug, Clone)]
pub enum AttemptStep {
    /// The run waits for the person: the attempt is suspended with it, the worker free.
    Suspended { reason: String },
    /// The run ended: the attempt was reported from the run's own end.
    Ended {
        outcome: vouch_core::Outcome,
        reported: Box<Reported>,
    },
}

impl Host {
    /// Open the run of a claimed attempt under the id the claim recorded: it waits for the
    /// worker's first call. The model is told the task as a CLI worker's model is (the spec
    /// holds it), and a continuation goes on from its pinned conversation.
    #[allow(clippy::too_many_arguments)]
    pub fn open_attempt_run(
        &self,
        run_id: &str,
        job: &AttemptJob,
        types: &TaskTypes,
        board: Option<&dyn BoardStore>,
        artifacts: Option<&dyn vouch_artifacts::ArtifactStore>,
        via: &str,
    ) -> HostResult<RunRecord> {
        let given = super::given::given_from(board, artifacts, job)?;
        let mut job = job.clone();
        job.model = super::external::external_model(via);
        let spec = self.attempt_spec(&job, types.get(&job.kind), &given, true)?;
        let run = self.create(run_id, &spec, None, None)?;
        self.idle(run_id)?;
        Ok(run)
    }

    /// The tools a worker's model is offered for an attempt's run: `declare`, `clarify`, the
    /// verbs and `submit` (its `result` is the task type's output schema).
    pub fn attempt_tools(&self, run_id: &str) -> HostResult<Vec<ToolSpec>> {
        let run = self.record(run_id)?;
        let base: Arc<[ToolSpec]> = self
            .tool_specs()
            .iter()
            .filter(|t| {
                t.name == "declare" || t.name == "clarify" || Verb::parse(&t.name).is_some()
            })
            .cloned()
            .chain(std::iter::once(submit_spec()))
            .collect();
        Ok(tools_for_run(&base, &run.spec).to_vec())
    }

    /// The attempt's `submit`, as one turn of its run: checked by `accept_submission` against
    /// `rules`, a malformed one costing a repair from `budget`; once one is accepted no other
    /// replaces it. The accepted output is handed over when the run ends. `spent`: the tokens
    /// the agent reported for the turn that made this call.
    pub fn external_submit(
        &self,
        run_id: &str,
        args: &Value,
        spent: j::TokenUsage,
        rules: &SubmitRules,
        budget: &dyn RepairBudget,
    ) -> HostResult<ExternalReply> {
        self.external_call_with(run_id, "submit", args, spent, &|run, call| {
            self.attempt_call(run, call, rules, budget)
        })
    }

    /// One whole turn of a remote worker's model in the attempt's run (§13.2.2): the turn
    /// machine's rules, the host's routing, and `submit` as [`Host::external_submit`] says.
    pub fn attempt_turn(
        &self,
        run_id: &str,
        turn: &AgentTurn,
        rules: &SubmitRules,
        budget: &dyn RepairBudget,
    ) -> HostResult<TurnReply> {
        self.external_turn_with(run_id, turn, &|run, call| {
            self.attempt_call(run, call, rules, budget)
        })
    }

    /// A call of an attempt's run: `submit` by the one submission rule, the rest by the host.
    fn attempt_call(
        &self,
        run: &RunRecord,
        call: &ToolCall,
        rules: &SubmitRules,
        budget: &dyn RepairBudget,
    ) -> HostResult<CallResult> {
        if call.name != "submit" {
            return self.handle_call(run, call);
        }
        let Ok(args) = serde_json::from_str::<Value>(&call.arguments) else {
            return Ok(CallResult::repair(
                "invalid arguments for `submit`: send a JSON object with `result`",
            ));
        };
        let journal = self.store.journal_events(&run.id)?;
        if submitted_in(&journal).0.is_some() {
            return Ok(CallResult::err(
                "a result was already accepted for this attempt; it cannot be replaced",
            ));
        }
        let result = args.get("result").cloned().unwrap_or(Value::Null);
        let assessment = args.get("self_assessment");
        Ok(
            match accept_submission(rules, budget, &result, assessment) {
                Ok(_) => {
                    self.imply_empty_manifest(run)?;
                    CallResult::ok(
                        "accepted: the result is valid; it is handed to the board when you finish",
                    )
                }
                Err(SubmitError::Store(e)) => return Err(e.into()),
                Err(e) => CallResult::err(e.to_string()),
            },
        )
    }

    /// An attempt whose worker submits without declaring delivers nothing but its result: the
    /// accepted submission implies an empty manifest (§13.2.2), so the run's end reads as the
    /// board's does, not "declared nothing".
    fn imply_empty_manifest(&self, run: &RunRecord) -> HostResult<()> {
        if self.view(&run.id)?.manifest.is_some() {
            return Ok(());
        }
        let manifest = Manifest {
            deliveries: vec![],
            forbid: vec![],
            order: vec![],
        };
        self.journal(&run.id, self.ev(j::ManifestImplied { manifest }))
    }

    /// After a step of a claimed attempt's run (a call or a turn of its worker): a run waiting
    /// for the person suspends its attempt (§13.3); a run that ended is the only report of
    /// the attempt's end, derived from the run's terminal record (§13.2.2) — the accepted
    /// output is the one the run submitted, so board and receipt agree by construction.
    #[allow(clippy::too_many_arguments)]
    pub fn report_attempt_step(
        &self,
        board: &dyn BoardStore,
        at: &AttemptRef,
        task: &TaskRecord,
        run: &str,
        end: Option<&RunEnd>,
        repairs_max: u32,
        signed: Option<(String, vouch_store::board::Stamp)>,
    ) -> HostResult<Option<AttemptStep>> {
        let now = self.now_ms();
        match end {
            None => Ok(None),
            Some(RunEnd::Suspended { reason }) => {
                board.suspend(at, run, now)?;
                Ok(Some(AttemptStep::Suspended {
                    reason: reason.clone(),
                }))
            }
            Some(RunEnd::Ended { outcome }) => {
                let o = self.attempt_outcome(run, &task.kind, &task.spec.input, repairs_max)?;
                let kind = o.report.ok_or_else(|| {
                    HostError::Internal(format!("run {run} ended and its outcome says otherwise"))
                })?;
                let reported = board.report(&Report {
                    attempt: at.clone(),
                    kind,
                    run_id: Some(run.to_string()),
                    receipt: o.receipt,
                    usage: o.usage,
                    signature: signed.as_ref().map(|(sig, _)| sig.clone()),
                    now_ms: now,
                    stamp: signed.map(|(_, st)| st),
                })?;
                Ok(Some(AttemptStep::Ended {
                    outcome: *outcome,
                    reported: Box::new(reported),
                }))
            }
        }
    }

    /// Where an attempt's run stands: its report once it ended (the accepted output, or why
    /// not — the same decision as a CLI worker's run), `None` while it goes on or waits.
    pub fn attempt_outcome(
        &self,
        run_id: &str,
        kind: &str,
        input: &Value,
        repairs_max: u32,
    ) -> HostResult<AttemptOutcome> {
        let run = self.record(run_id)?;
        let journal = self.store.journal_events(run_id)?;
        let report = (run.state == RunState::Ended).then(|| {
            let cancelled = RunView::from_events(&journal)
                .loop_end
                .is_some_and(|l| l.cause == "cancelled");
            let (accepted, invalid) = submitted_in(&journal);
            ended_report(
                kind,
                input,
                super::task::model_outage(&journal),
                cancelled,
                Some((accepted, invalid > repairs_max)),
            )
        });
        Ok(AttemptOutcome {
            run_id: run_id.to_string(),
            report,
            receipt: self.store.receipt(run_id)?,
            usage: usage_of(&journal),
            evidence: None,
        })
    }
}
