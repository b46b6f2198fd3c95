//! MCP (§17) with the official Rust SDK: `vouch mcp` on stdio and `/mcp` on the HTTP server
//! (streamable HTTP, behind the same bearer token). Two sets of tools, each a thin call:
//!
//! - for workers, the board (§13): list, offer, claim, heartbeat, submit, fail, continue,
//!   cancel, and artifacts — the same operations as the HTTP routes (`work`), so a claim or a
//!   report is refused unless signed by the claimant's key. `vouch mcp --name NAME` holds a
//!   worker identity's key file and signs for the agent on its stdio; over HTTP the client
//!   passes `signature`, `at_ms` and `nonce` itself, as on the routes.
//! - for any agent, the host's own tools: `declare` a manifest, perform an item with its verb tool (`save`, `send`, …), `clarify`
//!   (the one question), `finish`, `run_status` and `receipt`. Each is one turn of a run the
//!   agent drives (`Host::external_call`), through the same code as the host's own model
//!   loop, so posture, approvals, the ledger and evidence all apply.

mod args;

use crate::problem::{ApiError, ApiResult};
use crate::work::{self, AbortBody, ClaimBody, FailBody, HeartbeatBody, SubmitBody};
use crate::AppState;
use args::{Abort, ArtifactPut, Attempt, Claim, Declare, Fail, Signed, Submit, TaskList, ToolCall};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, Implementation, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::{json, Map, Value};
use std::sync::Arc;
use vouch_core::{ContentId, Presence, RunId, TriggerKind, Verb};
use vouch_identity::Identity;
use vouch_runtime::host::ExternalReply;
use vouch_runtime::{RunEnd, RunSpec};
use vouch_store::board::{
    artifact_statement, claim_statement, fresh_nonce, heartbeat_statement, report_statement,
    AttemptRef, ClaimRequest, Report, ReportKind, Stamp, TaskFilter, Usage,
};

/// Instructions every client shows its model.
const INSTRUCTIONS: &str = "vouch hosts your work under its terminal contract. To deliver anything: call `declare` with the manifest (it opens a run and answers its id), then perform each item with the tool of its verb (`save`, `send`, …) and its exact payload, shaped as its destination kind takes it; the host decides what runs now, what waits for the person's approval, and records evidence. Ask at most one question with `clarify`. Call `finish` with your final text; `receipt` says what really happened. Workers: `task_claim` (it opens your attempt's run and answers its id as `run`: pass it to `declare`, the verbs and `finish`), then `task_heartbeat` while working, `artifact_put` for outputs, and `task_submit` (or `task_fail`) naming that `run`; `task_result` reads a task's accepted output.";

/// The MCP server over one host.
#[derive(Clone)]
pub struct VouchMcp {
    pub state: AppState,
    /// The worker identity this process signs claims and reports with (stdio only).
    pub signer: Option<Arc<Identity>>,
    /// `stdio` or `http`: recorded in the spec of the runs agents open.
    pub via: &'static str,
    /// Over HTTP, the token of the call being served: its scope admits the tool
    /// (`auth::MCP_TOOLS`) and a worker token acts only as its own identity. None on stdio,
    /// where the caller is whoever runs `vouch mcp` in this home.
    pub caller: Option<crate::auth::Caller>,
}

fn tool(
    name: impl Into<std::borrow::Cow<'static, str>>,
    description: impl Into<std::borrow::Cow<'static, str>>,
    schema: Value,
) -> Tool {
    let schema: Map<String, Value> = match schema {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    Tool::new(name, description, Arc::new(schema))
}

fn obj(props: Value, required: &[&str]) -> Value {
    json!({"type": "object", "properties": props, "required": required, "additionalProperties": false})
}

/// Every tool, with its input schema.
pub fn tools() -> Vec<Tool> {
    board_tools()
        .into_iter()
        .chain(run_tools())
        .chain(verb_tools())
        .collect()
}

/// The input schema of a tool on a live attempt: the attempt, the statement's signature,
/// and the tool's own `extra` properties.
fn with_attempt(extra: Value, required: &[&str]) -> Value {
    let mut p = json!({
        "task": {"type": "string", "description": "task id"},
        "attempt": {"type": "integer", "minimum": 1, "description": "attempt number (from the claim)"},
        "epoch": {"type": "integer", "description": "lease epoch (from the claim)"},
        "claimant": {"type": "string", "description": "the worker identity (default: this server's)"},
        "at_ms": {"type": "integer", "description": "your clock, within 60 s of the host's (needed with your own signature)"},
        "nonce": {"type": "string", "pattern": "^[A-Za-z0-9_-]{16,64}$", "description": "fresh per statement (needed with your own signature); a nonce used before is refused"},
        "signature": {"type": "string", "description": "Ed25519 signature of the statement (§13.6.2): the heartbeat, report or artifact statement of the tool; signed for you when this server holds the worker's key"},
    });
    if let (Value::Object(p), Value::Object(e)) = (&mut p, extra) {
        p.extend(e);
    }
    obj(p, required)
}

/// A report's `usage`: the worker's own count when it names no run.
fn usage_schema() -> Value {
    json!({"type": "object", "description": "without `run`: what the attempt cost, by your own count", "properties": {
        "turns": {"type": "integer", "minimum": 0}, "tokens": {"type": "integer", "minimum": 0},
        "tool_calls": {"type": "integer", "minimum": 0}, "failed_tool_calls": {"type": "integer", "minimum": 0},
    }, "required": ["turns", "tokens", "tool_calls", "failed_tool_calls"], "additionalProperties": false})
}

/// The board's tools (§13), for workers and for whoever offers tasks.
fn board_tools() -> Vec<Tool> {
    let usage = usage_schema();
    let with = with_attempt;
    vec![
        tool("task_list", "List tasks on the board, oldest first.", obj(json!({
            "state": {"type": "string", "enum": ["waiting", "queued", "dispatched", "running", "completed", "failed", "cancelled", "expired"]},
            "tag": {"type": "string"},
            "correlation": {"type": "string", "description": "only the tasks of this thread (§13.1)"},
            "limit": {"type": "integer", "minimum": 1, "maximum": 500},
        }), &[])),
        tool("task_offer", "Offer a task on the board (type, brief, input, tags, criteria, max_attempts, …).", obj(json!({
            "type": {"type": "string", "description": "freeform, judge, or a registered type"},
            "brief": {"type": "string"},
            "input": {"type": "object"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "criteria": {},
            "max_attempts": {"type": "integer", "minimum": 1, "maximum": 20},
            "correlation": {"type": "string", "description": "the thread of related tasks this one belongs to (§13.1)"},
            "context": {"type": "array", "items": {"type": "string"}, "description": "pinned context: content ids of stored UTF-8 texts given to the attempt's model"},
            "input_artifacts": {"type": "array", "items": {"type": "string"}, "maxItems": 32, "description": "input artifacts: content ids of stored artifacts the attempt's model reads with its `read_input` tool (an id nothing is stored under is refused)"},
            "idempotency_key": {"type": "string"},
        }), &["type", "brief"])),
        tool("task_claim", "Claim the oldest claimable task matching your filters; answers the task and your attempt (number, epoch), or claimed: false.", obj(json!({
            "claimant": {"type": "string"},
            "profile": {"type": "string"},
            "model": {"type": "string"},
            "types": {"type": "array", "items": {"type": "string"}},
            "tags": {"type": "array", "items": {"type": "string"}},
            "at_ms": {"type": "integer", "description": "your clock (needed with your own signature)"},
            "nonce": {"type": "string", "pattern": "^[A-Za-z0-9_-]{16,64}$", "description": "fresh per statement (needed with your own signature)"},
            "signature": {"type": "string"},
        }), &[])),
        tool("task_heartbeat", "Keep your attempt's lease; answers cancelled: true when the owner cancelled the task (stop then).", with(json!({}), &["task", "attempt", "epoch"])),
        tool("task_submit", "Submit your attempt's result (checked against the task type's output schema; a malformed one comes back naming the path and costs one repair).", with(json!({
            "result": {"type": "object"},
            "self_assessment": {"type": ["object", "null"]},
            "run": {"type": "string", "description": "your attempt's run (the claim's `run`): the submit ends it and its receipt goes with the report"},
            "usage": usage.clone(),
        }), &["task", "attempt", "epoch", "result"])),
        tool("task_fail", "Report that your attempt failed; it is retried while attempts remain only if retryable.", with(json!({
            "retryable": {"type": "boolean"},
            "reason": {"type": "string"},
            "run": {"type": "string"},
            "usage": usage,
            "class": {"type": "string", "enum": ["model_outage", "tool_error", "malformed_output", "policy_refusal", "worker_crash"], "description": "why it failed, when you know; it never decides the retry"},
        }), &["task", "attempt", "epoch", "retryable", "reason"])),
        tool("task_abort", "Give your attempt back because you are stopping (retryable; it does not count against the task's attempts).", with(json!({
            "reason": {"type": "string"},
        }), &["task", "attempt", "epoch", "reason"])),
        tool("task_continue", "Continue a completed task with new instructions (extend or fork).", obj(json!({
            "task": {"type": "string"},
            "instructions": {"type": "string"},
            "mode": {"type": "string", "enum": ["extend", "fork"]},
        }), &["task", "instructions"])),
        tool("task_result", "Read a task's accepted output, its self-assessment, the judges' verdicts and the artifacts it names.", obj(json!({
            "task": {"type": "string"},
        }), &["task"])),
        tool("task_cancel", "Cancel a task that has not ended (a live attempt becomes cancelled).", obj(json!({
            "task": {"type": "string"},
        }), &["task"])),
        tool("artifact_put", "Store an output artifact of your live attempt (text, or bytes as hex); answers its content id.", with(json!({
            "text": {"type": "string"},
            "hex": {"type": "string"},
        }), &["task", "attempt", "epoch"])),
        tool("artifact_get", "Read an artifact by content id (text when it is UTF-8, else hex).", obj(json!({
            "cid": {"type": "string"},
        }), &["cid"])),
    ]
}

/// The host's own tools of a run an agent drives (§17), beside the verbs.
fn run_tools() -> Vec<Tool> {
    vec![
        tool("declare", "Declare the manifest of what you will deliver. Without `run`, opens a new run and answers its id; with `run`, amends that run's manifest.", obj(json!({
            "run": {"type": "string"},
            "title": {"type": "string", "description": "what the person asked for (a new run's title)"},
            "task": {"type": "string", "description": "the task whose attempt this run does (trigger task)"},
            "deliveries": {"type": "array", "items": {"type": "object"}},
            "forbid": {"type": "array"},
            "order": {"type": "array"},
        }), &["deliveries"])),
        tool("clarify", "Ask the person the run's one question; the run waits for the answer (read it with run_status).", obj(json!({
            "run": {"type": "string"},
            "question": {"type": "string"},
        }), &["run", "question"])),
        tool("finish", "End your run with your final text; the host reconciles it and answers the outcome and receipt.", obj(json!({
            "run": {"type": "string"},
            "text": {"type": "string"},
        }), &["run"])),
        tool("run_status", "Where a run stands: state, each delivery's status, open cards, the answer to its question.", obj(json!({
            "run": {"type": "string"},
        }), &["run"])),
        tool("receipt", "A run's receipt (what really happened); signed: true for the host's signed statement.", obj(json!({
            "run": {"type": "string"},
            "signed": {"type": "boolean"},
        }), &["run"])),
    ]
}

/// One tool per verb, as the host's own model loop offers them (one vocabulary, §17.2): the
/// item's verb names the tool, and `payload` is its destination kind's payload, from the
/// same schemas the host checks it against.
fn verb_tools() -> Vec<Tool> {
    Verb::ALL
        .iter()
        .map(|v| {
            let mut schema = vouch_runtime::schemas::perform();
            schema["properties"]["run"] = json!({"type": "string"});
            if let Some(r) = schema["required"].as_array_mut() {
                r.insert(0, json!("run"));
            }
            tool(
                v.as_str(),
                format!("Perform a declared `{v}` item of your run with its exact payload (the shape of its destination kind). The host decides: done now, drafted, or waiting for the person's approval."),
                schema,
            )
        })
        .collect()
}

fn to_value<T: serde::Serialize>(v: &T) -> ApiResult<Value> {
    serde_json::to_value(v).map_err(|e| ApiError::internal(format!("encode: {e}")))
}

/// The receipt tool's answer without a signature: the run's state, outcome and receipt.
fn receipt_of(run: &RunId, st: &Value) -> Value {
    json!({"run": run, "state": st["state"], "outcome": st["outcome"], "receipt": st["receipt"]})
}

impl VouchMcp {
    fn claimant(&self, given: Option<&str>) -> ApiResult<String> {
        if let Some(c) = &self.caller {
            // A worker token's claimant is its identity, given or not.
            let name = given
                .map(String::from)
                .or_else(|| c.identity.clone())
                .unwrap_or_default();
            c.acts_as(&name)?;
            return Ok(name);
        }
        match (given, &self.signer) {
            (Some(c), _) => Ok(c.to_string()),
            (None, Some(id)) => Ok(id.name().to_string()),
            (None, None) => Err(ApiError::field(
                "claimant",
                "`claimant` is required: this server holds no worker key (start `vouch mcp --name NAME` to sign for you)",
            )),
        }
    }

    /// The signature given, or this server's when it holds the claimant's key.
    fn signature(&self, signed: &Signed, claimant: &str, statement: &str) -> ApiResult<String> {
        if let Some(s) = &signed.signature {
            return Ok(s.clone());
        }
        match &self.signer {
            Some(id) if id.name() == claimant => {
                vouch_identity::board::sign_statement(id, statement)
                    .map_err(|e| ApiError::internal(format!("sign: {e}")))
            }
            _ => Err(ApiError::field(
                "signature",
                format!("`signature` is required: sign the canonical JSON {statement} with `{claimant}`'s key"),
            )),
        }
    }

    fn attempt(&self, a: &Attempt) -> ApiResult<AttemptRef> {
        Ok(AttemptRef {
            task_id: a.task.to_string(),
            n: a.attempt,
            claimant: self.claimant(a.claimant.as_deref())?,
            epoch: a.epoch,
        })
    }

    /// The statement's clock and nonce: given with the caller's own signature, else this
    /// server's clock and a fresh nonce when it signs for the caller.
    fn stamp(&self, signed: &Signed) -> ApiResult<Stamp> {
        let own = signed.signature.is_some();
        let at_ms =
            match (signed.at_ms, own) {
                (Some(t), _) => t,
                (None, false) => self.state.host.now_ms(),
                (None, true) => return Err(ApiError::field(
                    "at_ms",
                    "`at_ms` (your clock, ms since the epoch) is required with your own signature",
                )),
            };
        let nonce = match (&signed.nonce, own) {
            (Some(n), _) => n.clone(),
            (None, false) => fresh_nonce()?,
            (None, true) => {
                return Err(ApiError::field(
                    "nonce",
                    "`nonce` (fresh per statement) is required with your own signature",
                ))
            }
        };
        Ok(Stamp { at_ms, nonce })
    }

    /// A report's attempt, stamp and signature: the signature is over the report statement
    /// of `kind`, given by the caller or made by this server for its own worker.
    fn signed_report(
        &self,
        a: &Attempt,
        kind: ReportKind,
        run: Option<&RunId>,
    ) -> ApiResult<(AttemptRef, Stamp, String)> {
        let at = self.attempt(a)?;
        let stamp = self.stamp(&a.signed)?;
        let statement = report_statement(&Report {
            attempt: at.clone(),
            kind,
            run_id: run.map(RunId::to_string),
            receipt: None,
            usage: Usage::default(),
            signature: None,
            now_ms: 0,
            stamp: Some(stamp.clone()),
        })?;
        let signature = self.signature(&a.signed, &at.claimant, &statement)?;
        Ok((at, stamp, signature))
    }

    fn run_spec(&self, title: Option<&str>, task: Option<&str>) -> ApiResult<RunSpec> {
        let title = match (title, task) {
            (Some(t), _) if !t.trim().is_empty() => t.to_string(),
            (_, Some(task)) => format!("task {task}"),
            _ => {
                return Err(ApiError::field(
                    "title",
                    "`title` is required for a new run: say what the person asked for",
                ))
            }
        };
        Ok(RunSpec {
            trigger: if task.is_some() {
                TriggerKind::Task
            } else {
                TriggerKind::Interactive
            },
            title,
            presence: task.is_some().then_some(Presence::Away),
            quiet: false,
            model: vouch_runtime::host::ModelSpec::external(self.via),
            scope: None,
        })
    }

    fn reply(&self, run: &str, r: ExternalReply) -> ApiResult<Value> {
        let mut v = json!({"run": run, "ok": r.ok, "result": r.text});
        match &r.end {
            Some(RunEnd::Suspended { reason }) => {
                v["waiting"] = Value::from(reason.clone());
            }
            Some(RunEnd::Ended { outcome }) => {
                v["ended"] = to_value(outcome)?;
                v["receipt"] = to_value(&self.state.store.receipt(run)?)?;
            }
            None => {}
        }
        Ok(v)
    }

    fn status(&self, run: &str) -> ApiResult<Value> {
        self.readable_run(run)?;
        let store = self.state.store.as_ref();
        let rec = store
            .run(run)?
            .ok_or_else(|| ApiError::not_found(format!("no run `{run}`; `declare` opens one")))?;
        // The run's answer as the typed journal's fold states it, read with its deliveries.
        let d = vouch_runtime::runs::detail(store, rec.clone())?;
        let cards: Vec<Value> = store
            .cards_for_run(run)?
            .iter()
            .filter(|c| c.state == vouch_store::CardState::Open)
            .map(|c| json!({"delivery": c.delivery, "summary": c.summary, "reason": c.reason, "payload_hash": c.payload_hash}))
            .collect();
        Ok(json!({
            "run": run,
            "state": crate::dto::word(rec.state),
            "outcome": rec.outcome.map(crate::dto::word),
            "deliveries": d.deliveries.iter().map(|x| json!({"id": x.id, "status": crate::dto::word(x.status), "posture": x.posture.map(crate::dto::word)})).collect::<Vec<_>>(),
            "open_cards": cards,
            "answer": d.answer,
            "receipt": store.receipt(run)?,
        }))
    }

    /// The live attempt whose run this is, when it is one: its host tools go through the
    /// attempt (`attempt::exec`), so the host reports the attempt when the run ends. A worker
    /// token drives only the runs of its own live attempts (its attempt's run was opened by
    /// its claim: `declare` names it in `run`).
    fn own_attempt(&self, run: Option<&str>) -> ApiResult<Option<AttemptRef>> {
        let worker = self
            .caller
            .as_ref()
            .filter(|c| c.scope == vouch_core::Scope::Worker);
        let found = match (run, &self.state.board) {
            (Some(run), Some(board)) => board.attempt_of_run(run)?,
            _ => None,
        };
        let live = found.filter(|a| a.state.is_leased()).map(|a| AttemptRef {
            task_id: a.task_id,
            n: a.n,
            claimant: a.claimant,
            epoch: a.epoch,
        });
        let Some(w) = worker else {
            return Ok(live);
        };
        match live {
            Some(a) if w.identity.as_deref() == Some(a.claimant.as_str()) => Ok(Some(a)),
            _ => Err(ApiError::forbidden(match run {
                None => "a worker token drives only its attempts' runs: its claim opened the run; pass it as `run`".to_string(),
                Some(r) => format!(
                    "run `{}` is not the run of a live attempt of `{}`; a worker token drives only its own attempts' runs",
                    vouch_core::escape_line(r),
                    w.identity.as_deref().unwrap_or_default()
                ),
            })),
        }
    }

    fn attempt_reply(&self, a: crate::attempt::CallAnswer) -> ApiResult<Value> {
        let mut v = json!({"run": a.run, "ok": a.ok, "result": a.text});
        if let Some(end) = a.end {
            v["end"] = end;
        }
        Ok(v)
    }

    /// A run the caller reads or acts on, by the same rule as the HTTP routes: a worker
    /// token's must be the run of one of its identity's attempts (`Caller::reads_run`).
    /// Over stdio there is no token and every run is the caller's.
    fn readable_run(&self, run: &str) -> ApiResult<()> {
        match &self.caller {
            Some(c) => c.reads_run(&self.state, run),
            None => Ok(()),
        }
    }

    /// A run named by the agent, which the caller may read and which must exist.
    fn existing_run(&self, run: &RunId) -> ApiResult<()> {
        self.readable_run(run.as_str())?;
        if self.state.store.run(run.as_str())?.is_none() {
            return Err(ApiError::not_found(format!(
                "no run `{run}`; `declare` without `run` opens one"
            )));
        }
        Ok(())
    }

    /// One of the host's own tools on an existing run: through the live attempt whose run it
    /// is, else as one turn of the run the agent drives.
    fn host_tool(&self, run: &RunId, tool: &str, args: &Value) -> ApiResult<Value> {
        self.existing_run(run)?;
        let s = &self.state;
        if let Some(at) = self.own_attempt(Some(run.as_str()))? {
            return self.attempt_reply(crate::attempt::exec(s, &at, tool, args)?);
        }
        let r = s.host.external_call(run.as_str(), tool, args)?;
        self.reply(run.as_str(), r)
    }

    /// One tool call, synchronously (on a blocking thread): the caller's scope admits the
    /// tool, the arguments are decoded once, and the call goes to its handler.
    pub fn call(&self, name: &str, args: &Value) -> ApiResult<Value> {
        // §17.1: no argument's text holds NUL, whichever backend; the agent can send it again.
        if let Some((path, e)) = vouch_core::input::nul_in_json(args) {
            let field = path.trim_start_matches('.').to_string();
            return Err(ApiError::field(field.clone(), format!("`{field}` {e}")));
        }
        if let Some(c) = &self.caller {
            let allowed = crate::auth::tool_scopes(name);
            if !allowed.contains(&c.scope) {
                return Err(crate::auth::refuse(
                    c.scope,
                    &format!("the MCP tool `{name}`"),
                    allowed,
                ));
            }
        }
        self.dispatch(ToolCall::decode(name, args)?)
    }

    fn dispatch(&self, call: ToolCall) -> ApiResult<Value> {
        let s = &self.state;
        match call {
            ToolCall::TaskList(a) => self.task_list(a),
            ToolCall::TaskOffer(a) => {
                let (created, task) = work::offer(s, &a.offer, a.idempotency_key)?;
                Ok(json!({"created": created, "task": task}))
            }
            ToolCall::TaskClaim(a) => self.task_claim(a),
            ToolCall::TaskHeartbeat(a) => self.task_heartbeat(a),
            ToolCall::TaskSubmit(a, b) => self.task_submit(a, b),
            ToolCall::TaskFail(a, b) => self.task_fail(a, b),
            ToolCall::TaskAbort(a, b) => self.task_abort(a, b),
            ToolCall::TaskContinue(a) => {
                let body = crate::attempt::ContinueBody {
                    brief: a.instructions.0,
                    mode: a.mode.unwrap_or_else(|| "extend".into()),
                };
                let (created, task) = crate::attempt::continue_task(s, a.task.as_str(), &body)?;
                Ok(json!({"created": created, "task": task}))
            }
            ToolCall::TaskResult(a) => to_value(&crate::attempt::result(s, a.task.as_str())?),
            ToolCall::TaskCancel(a) => {
                let board = work::board_of(s)?;
                let t = board.cancel(a.task.as_str(), s.host.now_ms())?;
                Ok(json!({"task": to_value(&t)?}))
            }
            ToolCall::ArtifactPut(a, b) => self.artifact_put(a, b),
            ToolCall::ArtifactGet(a) => self.artifact_get(&a.cid),
            ToolCall::Declare(a) => self.declare(a),
            ToolCall::Perform(verb, a) => {
                let call = json!({"delivery": a.delivery.0, "payload": a.payload});
                self.host_tool(&a.run, verb.as_str(), &call)
            }
            ToolCall::Clarify(a) => {
                self.host_tool(&a.run, "clarify", &json!({"question": a.question.0}))
            }
            ToolCall::Finish(a) => self.finish(&a.run, &a.text),
            ToolCall::RunStatus(a) => self.status(a.run.as_str()),
            ToolCall::Receipt(a) if a.signed => {
                self.readable_run(a.run.as_str())?;
                work::signed_receipt(s, a.run.as_str())
            }
            ToolCall::Receipt(a) => Ok(receipt_of(&a.run, &self.status(a.run.as_str())?)),
        }
    }

    fn task_list(&self, a: TaskList) -> ApiResult<Value> {
        let board = work::board_of(&self.state)?;
        let tasks = board.tasks(&TaskFilter {
            state: a.state,
            tag: a.tag,
            limit: a
                .limit
                .unwrap_or(100)
                .clamp(1, crate::tasks::PAGE_TASKS_MAX as u64) as usize,
            correlation: a.correlation,
        })?;
        Ok(json!({"tasks": to_value(&tasks)?}))
    }

    fn task_claim(&self, a: Claim) -> ApiResult<Value> {
        let claimant = self.claimant(a.claimant.as_deref())?;
        let profile = a.profile.unwrap_or_else(|| "default".into());
        let stamp = self.stamp(&a.signed)?;
        let policy = json!({"profile": profile, "context": "autonomous"});
        let statement = claim_statement(&ClaimRequest {
            claimant: claimant.clone(),
            profile: profile.clone(),
            model: None,
            policy_fingerprint: vouch_store::board::content_id(&policy)?,
            types: vec![],
            tags: vec![],
            task_id: None,
            signature: None,
            policy: policy.clone(),
            now_ms: stamp.at_ms,
            nonce: Some(stamp.nonce.clone()),
            run_id: None,
        })?;
        let signature = self.signature(&a.signed, &claimant, &statement)?;
        let body = ClaimBody {
            claimant,
            profile,
            model: a.model,
            types: a.types,
            tags: a.tags,
            policy: Some(policy),
            at_ms: stamp.at_ms,
            nonce: stamp.nonce,
            signature,
        };
        to_value(&work::claim_next(&self.state, &body, "mcp")?)
    }

    fn task_heartbeat(&self, a: Attempt) -> ApiResult<Value> {
        let at = self.attempt(&a)?;
        let stamp = self.stamp(&a.signed)?;
        let statement = heartbeat_statement(&at, &stamp)?;
        let signature = self.signature(&a.signed, &at.claimant, &statement)?;
        let body = HeartbeatBody {
            claimant: at.claimant.clone(),
            epoch: at.epoch,
            at_ms: stamp.at_ms,
            nonce: stamp.nonce,
            signature,
        };
        to_value(&work::heartbeat(&self.state, &at.task_id, at.n, &body)?)
    }

    fn task_submit(&self, a: Attempt, b: Submit) -> ApiResult<Value> {
        let kind = ReportKind::Accepted {
            result: b.result.clone(),
            self_assessment: None,
            verdict: None,
        };
        let (at, stamp, signature) = self.signed_report(&a, kind, b.run.as_ref())?;
        let body = SubmitBody {
            claimant: at.claimant.clone(),
            epoch: at.epoch,
            result: b.result,
            self_assessment: b.self_assessment,
            run: b.run.map(String::from),
            usage: b.usage,
            at_ms: stamp.at_ms,
            nonce: stamp.nonce,
            signature,
        };
        to_value(&work::submit(&self.state, &at.task_id, at.n, &body)?)
    }

    fn task_fail(&self, a: Attempt, b: Fail) -> ApiResult<Value> {
        let kind = ReportKind::Failed {
            retryable: b.retryable,
            reason: b.reason.0.clone(),
            class: None,
        };
        let (at, stamp, signature) = self.signed_report(&a, kind, b.run.as_ref())?;
        let body = FailBody {
            claimant: at.claimant.clone(),
            epoch: at.epoch,
            retryable: b.retryable,
            reason: b.reason.0,
            run: b.run.map(String::from),
            usage: b.usage,
            class: b.class,
            at_ms: stamp.at_ms,
            nonce: stamp.nonce,
            signature,
        };
        to_value(&work::fail(&self.state, &at.task_id, at.n, &body)?)
    }

    fn task_abort(&self, a: Attempt, b: Abort) -> ApiResult<Value> {
        let kind = ReportKind::Aborted {
            reason: b.reason.0.clone(),
        };
        let (at, stamp, signature) = self.signed_report(&a, kind, None)?;
        let body = AbortBody {
            claimant: at.claimant.clone(),
            epoch: at.epoch,
            reason: b.reason.0,
            at_ms: stamp.at_ms,
            nonce: stamp.nonce,
            signature,
        };
        to_value(&work::abort(&self.state, &at.task_id, at.n, &body)?)
    }

    fn artifact_put(&self, a: Attempt, b: ArtifactPut) -> ApiResult<Value> {
        let s = &self.state;
        let at = self.attempt(&a)?;
        let bytes = match (b.text, b.hex) {
            (Some(t), None) => t.into_bytes(),
            (None, Some(h)) => hex::decode(h.trim())
                .map_err(|e| ApiError::field("hex", format!("`hex` is not hex: {e}")))?,
            _ => {
                return Err(ApiError::field(
                    "text",
                    "give exactly one of `text` or `hex`",
                ))
            }
        };
        let max = work::artifact_bytes_max(s);
        if bytes.len() as u64 > max {
            return Err(ApiError::new(
                axum::http::StatusCode::PAYLOAD_TOO_LARGE,
                "too_large",
                format!(
                    "the artifact is {} bytes, more than the limit of {max}",
                    bytes.len()
                ),
            ));
        }
        let cid = vouch_artifacts::content_id(&bytes);
        let stamp = self.stamp(&a.signed)?;
        let statement = artifact_statement(&cid, &at, &stamp)?;
        let signature = self.signature(&a.signed, &at.claimant, &statement)?;
        to_value(&work::put_artifact(
            s,
            &cid,
            &at,
            (&stamp, &signature),
            &bytes,
        )?)
    }

    fn artifact_get(&self, cid: &ContentId) -> ApiResult<Value> {
        let bytes = work::get_artifact(&self.state, cid.as_str())?;
        let size = bytes.len();
        Ok(match String::from_utf8(bytes) {
            Ok(t) => json!({"cid": cid, "size_bytes": size, "text": t}),
            Err(e) => {
                json!({"cid": cid, "size_bytes": size, "hex": hex::encode(e.into_bytes())})
            }
        })
    }

    fn declare(&self, a: Declare) -> ApiResult<Value> {
        let s = &self.state;
        // Refused before a run exists (§3.2.1): a hostile id or an oversized call.
        s.host.check_external_call("declare", &a.manifest)?;
        if let Some(at) = self.own_attempt(a.run.as_ref().map(RunId::as_str))? {
            return self.attempt_reply(crate::attempt::exec(s, &at, "declare", &a.manifest)?);
        }
        let run = match a.run {
            Some(run) => {
                self.existing_run(&run)?;
                run.into_string()
            }
            None => s
                .host
                .open_external(&self.run_spec(a.title.as_deref(), a.task.as_deref())?)?,
        };
        let r = s.host.external_call(&run, "declare", &a.manifest)?;
        self.reply(&run, r)
    }

    fn finish(&self, run: &RunId, text: &str) -> ApiResult<Value> {
        self.existing_run(run)?;
        let s = &self.state;
        if let Some(at) = self.own_attempt(Some(run.as_str()))? {
            let t = json!({"text": text});
            return self.attempt_reply(crate::attempt::exec(s, &at, "finish", &t)?);
        }
        let end = s.host.external_finish(run.as_str(), text)?;
        let done = ExternalReply {
            ok: true,
            text: "the run has ended".into(),
            end: Some(end),
        };
        self.reply(run.as_str(), done)
    }
}

impl ServerHandler for VouchMcp {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("vouch", env!("CARGO_PKG_VERSION")))
            .with_instructions(INSTRUCTIONS)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        Ok(ListToolsResult::with_all_items(tools()))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let name = request.name.to_string();
        if !tools().iter().any(|t| t.name == name) {
            return Err(McpError::invalid_params(
                format!("no tool `{name}`; list the tools"),
                None,
            ));
        }
        let args = Value::Object(request.arguments.unwrap_or_default());
        let mut me = self.clone();
        if self.via == "http" {
            // The bearer check put the caller on the HTTP request (auth::require_token).
            me.caller = context
                .extensions
                .get::<axum::http::request::Parts>()
                .and_then(|p| p.extensions.get::<crate::auth::Caller>().cloned());
            if me.caller.is_none() {
                return Err(McpError::invalid_request("no authenticated caller", None));
            }
        }
        let started = std::time::Instant::now();
        let out = tokio::task::spawn_blocking(move || me.call(&name, &args))
            .await
            .map_err(ApiError::from)
            .and_then(|r| r);
        tracing::debug!(
            elapsed_ms = started.elapsed().as_millis() as u64,
            "mcp tool call"
        );
        Ok(match out {
            Ok(v) => CallToolResult::structured(v),
            // The agent reads the same problem object the HTTP API answers.
            Err(e) => CallToolResult::structured_error(to_value(&e.problem()).unwrap_or_default()),
        }
        .into())
    }
}

/// Bytes one MCP message over stdio (one line) holds at most: a call of at most a turn
/// (`TURN_BYTES_MAX`, refused with its limit named when larger) with room for JSON escapes.
/// A longer line ends the session: it is never read into memory whole.
pub const STDIO_LINE_BYTES_MAX: usize = 2 * vouch_runtime::host::TURN_BYTES_MAX + 64 * 1024;

/// Stdin that refuses a line longer than `max` bytes as it is read.
struct LineLimited<R> {
    inner: R,
    since_newline: usize,
    max: usize,
}

impl<R: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for LineLimited<R> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        use std::task::Poll;
        let before = buf.filled().len();
        let this = &mut *self;
        match std::pin::Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {}
            other => return other,
        }
        for &b in &buf.filled()[before..] {
            if b == b'\n' {
                this.since_newline = 0;
            } else {
                this.since_newline += 1;
                if this.since_newline > this.max {
                    return Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "an MCP message is larger than the limit of {} bytes",
                            this.max
                        ),
                    )));
                }
            }
        }
        Poll::Ready(Ok(()))
    }
}

/// `vouch mcp`: serve MCP on this process's stdin and stdout until the client closes them.
pub async fn serve_stdio(server: VouchMcp) -> Result<(), String> {
    use rmcp::ServiceExt as _;
    let stdin = LineLimited {
        inner: tokio::io::stdin(),
        since_newline: 0,
        max: STDIO_LINE_BYTES_MAX,
    };
    let running = server
        .serve((stdin, tokio::io::stdout()))
        .await
        .map_err(|e| format!("MCP over stdio: {e}"))?;
    running
        .waiting()
        .await
        .map_err(|e| format!("MCP over stdio: {e}"))?;
    Ok(())
}

/// `/mcp` on the HTTP server: streamable HTTP, stateless (every call stands alone; the runs
/// and the board are the state).
pub fn http_service(
    state: AppState,
) -> rmcp::transport::streamable_http_server::StreamableHttpService<
    VouchMcp,
    rmcp::transport::streamable_http_server::session::local::LocalSessionManager,
> {
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    StreamableHttpService::new(
        move || {
            Ok(VouchMcp {
                state: state.clone(),
                signer: None,
                via: "http",
                caller: None,
            })
        },
        Default::default(),
        // Every request carries the bearer token, so the Host header check adds nothing and
        // would refuse a server behind a reverse proxy.
        StreamableHttpServerConfig::default()
            .with_legacy_session_mode(false)
            .with_json_response(true)
            .disable_allowed_hosts(),
    )
}
