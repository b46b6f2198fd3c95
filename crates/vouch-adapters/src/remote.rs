//! The worker loop against a remote host (§13.2): `RemoteBoard` is the `BoardClient` whose
//! calls are the host's HTTP routes, each statement signed with the worker's key. The model
//! runs here; the attempt's run is on the host (its claim opened it), and every tool call of
//! the model goes there through the run-bound call route, so the run, its cards, the ledger
//! and its receipt are the host's, and the host reports the attempt when the run ends. The
//! cycle itself (claim, heartbeat, run, report, the failure classes) is `WorkerLoop`'s, the
//! same as against the local board.

use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use vouch_runtime::clock::Clock;
use vouch_runtime::host::{AttemptJob, AttemptOutcome, HostError, ModelFactory, StopProbe};
use vouch_runtime::model::{ChatMessage, ModelError, ToolSpec};
use vouch_runtime::worker::{BoardClient, Signer, WorkerError};
use vouch_store::board::{
    call_statement, claim_statement, content_id, fresh_nonce, heartbeat_statement,
    report_statement, AttemptCall, AttemptRecord, AttemptRef, Claim, ClaimRequest, Heartbeat,
    Report, ReportKind, Reported, Stamp, TaskRecord, Usage,
};
use vouch_store::journal::TokenUsage;

/// How long one request to the host may take.
pub const REQUEST_TIMEOUT_S: u64 = 120;

/// A refusal or failure answered by the host (problem JSON), or no answer at all.
#[derive(Debug, Clone)]
struct HttpError {
    /// `None`: the host could not be reached.
    status: Option<u16>,
    code: String,
    detail: String,
}

impl HttpError {
    fn worker(self) -> WorkerError {
        let said = format!("{} ({})", self.detail, self.code);
        match self.status {
            None | Some(429 | 502 | 503 | 504) => WorkerError::Retry(said),
            Some(404 | 409) => WorkerError::Refused(said),
            Some(_) => WorkerError::Fatal(said),
        }
    }
}

/// What a claim answered beside the task and attempt: the run the host opened, its
/// conversation so far and the tools its model is offered.
struct Opened {
    run: String,
    conversation: Vec<ChatMessage>,
    tools: Vec<ToolSpec>,
}

/// The board and host at `base` (`http://host:port`), reached with a worker token.
pub struct RemoteBoard {
    base: String,
    token: String,
    agent: ureq::Agent,
    signer: Arc<dyn Signer>,
    models: Arc<dyn ModelFactory>,
    clock: Arc<dyn Clock>,
    opened: Mutex<HashMap<(String, u32), Opened>>,
}

impl RemoteBoard {
    pub fn new(
        base: &str,
        token: &str,
        signer: Arc<dyn Signer>,
        models: Arc<dyn ModelFactory>,
        clock: Arc<dyn Clock>,
    ) -> Self {
        RemoteBoard {
            base: base.trim_end_matches('/').to_string(),
            token: token.to_string(),
            agent: ureq::AgentBuilder::new()
                .timeout(Duration::from_secs(REQUEST_TIMEOUT_S))
                .build(),
            signer,
            models,
            clock,
            opened: Mutex::new(HashMap::new()),
        }
    }

    fn send(&self, method: &str, path: &str, body: Option<&Value>) -> Result<Value, HttpError> {
        let req = self
            .agent
            .request(method, &format!("{}{path}", self.base))
            .set("Authorization", &format!("Bearer {}", self.token));
        let answer = match body {
            Some(b) => req.send_json(b.clone()),
            None => req.call(),
        };
        match answer {
            Ok(r) => r.into_json::<Value>().map_err(|e| HttpError {
                status: Some(200),
                code: "unreadable".into(),
                detail: format!("the host's answer is not JSON: {e}"),
            }),
            Err(ureq::Error::Status(status, r)) => {
                let p: Value = r.into_json().unwrap_or_default();
                let said = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
                Err(HttpError {
                    status: Some(status),
                    code: said("code"),
                    detail: said("detail"),
                })
            }
            Err(ureq::Error::Transport(t)) => Err(HttpError {
                status: None,
                code: "unreachable".into(),
                detail: format!("the host at {} cannot be reached: {t}", self.base),
            }),
        }
    }

    /// A task's state on the host (`unknown` when it cannot be read).
    pub fn task_state(&self, task_id: &str) -> String {
        self.send("GET", &format!("/api/tasks/{task_id}"), None)
            .ok()
            .and_then(|d| d["task"]["state"].as_str().map(String::from))
            .unwrap_or_else(|| "unknown".into())
    }

    fn sign(&self, statement: vouch_store::StoreResult<String>) -> Result<String, WorkerError> {
        let statement = statement.map_err(|e| WorkerError::Fatal(e.to_string()))?;
        self.signer
            .sign(&statement)
            .map_err(|e| WorkerError::Fatal(format!("sign: {e}")))
    }

    // ---------------------------------------------------------------- statements, one each

    /// A claim (§13.6.2): signed over the claim statement, the policy's fingerprint as the
    /// host computes it.
    /// This worker's clock and a fresh nonce: every statement gets its own (§13.6.3).
    fn stamp(&self) -> Result<Stamp, WorkerError> {
        Ok(Stamp {
            at_ms: self.clock.now_ms(),
            nonce: fresh_nonce().map_err(|e| WorkerError::Fatal(e.to_string()))?,
        })
    }

    fn claim_body(&self, req: &ClaimRequest) -> Result<Value, WorkerError> {
        let stamp = self.stamp()?;
        let mut req = req.clone();
        req.now_ms = stamp.at_ms;
        req.nonce = Some(stamp.nonce.clone());
        let signature = self.sign(claim_statement(&req))?;
        Ok(json!({
            "claimant": req.claimant, "profile": req.profile, "model": req.model,
            "types": req.types, "tags": req.tags, "policy": req.policy,
            "at_ms": stamp.at_ms, "nonce": stamp.nonce, "signature": signature,
        }))
    }

    fn heartbeat_body(&self, at: &AttemptRef) -> Result<Value, WorkerError> {
        let stamp = self.stamp()?;
        let signature = self.sign(heartbeat_statement(at, &stamp))?;
        Ok(json!({
            "claimant": at.claimant, "epoch": at.epoch,
            "at_ms": stamp.at_ms, "nonce": stamp.nonce, "signature": signature,
        }))
    }

    /// A failure or abort, signed over the report statement.
    fn report_body(&self, r: &Report) -> Result<Value, WorkerError> {
        let stamp = self.stamp()?;
        let mut r = r.clone();
        r.stamp = Some(stamp.clone());
        let signature = self.sign(report_statement(&r))?;
        let a = &r.attempt;
        let (at_ms, nonce) = (stamp.at_ms, stamp.nonce);
        Ok(match &r.kind {
            ReportKind::Failed {
                retryable,
                reason,
                class,
            } => json!({
                "claimant": a.claimant, "epoch": a.epoch, "retryable": retryable,
                "reason": reason, "run": r.run_id, "class": class,
                "at_ms": at_ms, "nonce": nonce, "signature": signature,
            }),
            ReportKind::Aborted { reason } => json!({
                "claimant": a.claimant, "epoch": a.epoch, "reason": reason,
                "at_ms": at_ms, "nonce": nonce, "signature": signature,
            }),
            ReportKind::Accepted { .. } => {
                return Err(WorkerError::Fatal(
                    "an accepted output is handed over by the run's `submit`, not reported".into(),
                ))
            }
        })
    }

    /// One tool call of the attempt's run, signed over the call statement with a fresh nonce.
    /// `usage`: what the model spent on the turn that made the call (sent with its first call).
    fn call_body(
        &self,
        at: &AttemptRef,
        tool: &str,
        args: &Value,
        usage: Option<TokenUsage>,
    ) -> Result<Value, WorkerError> {
        let call = AttemptCall {
            attempt: at.clone(),
            tool: tool.to_string(),
            args: args.clone(),
            at_ms: self.clock.now_ms(),
            nonce: fresh_nonce().map_err(|e| WorkerError::Fatal(e.to_string()))?,
            usage,
        };
        let signature = self.sign(call_statement(&call))?;
        let mut body = json!({
            "claimant": at.claimant, "epoch": at.epoch, "tool": call.tool, "args": call.args,
            "at_ms": call.at_ms, "nonce": call.nonce, "signature": signature,
        });
        if let Some(u) = &call.usage {
            body["usage"] =
                json!({"prompt_tokens": u.prompt_tokens, "completion_tokens": u.completion_tokens});
        }
        Ok(body)
    }

    fn attempt_path(at: &AttemptRef, what: &str) -> String {
        format!("/api/tasks/{}/attempts/{}/{what}", at.task_id, at.n)
    }

    fn call(
        &self,
        at: &AttemptRef,
        tool: &str,
        args: &Value,
        usage: Option<TokenUsage>,
    ) -> Result<Value, HttpError> {
        let body = self
            .call_body(at, tool, args, usage)
            .map_err(|e| HttpError {
                status: None,
                code: "unsigned".into(),
                detail: e.to_string(),
            })?;
        self.send("POST", &Self::attempt_path(at, "call"), Some(&body))
    }

    /// The task and the attempt as the host holds them now.
    fn reported(&self, at: &AttemptRef) -> Result<Reported, WorkerError> {
        let d = self
            .send("GET", &format!("/api/tasks/{}", at.task_id), None)
            .map_err(HttpError::worker)?;
        let task: TaskRecord = decode(&d["task"])?;
        let attempts: Vec<AttemptRecord> = decode(&d["attempts"])?;
        let attempt = attempts
            .into_iter()
            .find(|a| a.n == at.n)
            .ok_or_else(|| WorkerError::Fatal(format!("the host has no attempt {}", at.n)))?;
        Ok(Reported { task, attempt })
    }
}

fn decode<T: serde::de::DeserializeOwned>(v: &Value) -> Result<T, WorkerError> {
    serde_json::from_value(v.clone())
        .map_err(|e| WorkerError::Fatal(format!("the host's answer does not read: {e}")))
}

impl BoardClient for RemoteBoard {
    /// The host sweeps its board before every claim.
    fn sweep(&self, _now_ms: i64) -> Result<(), WorkerError> {
        Ok(())
    }

    fn claim(&self, mut req: ClaimRequest) -> Result<Option<Claim>, WorkerError> {
        req.policy_fingerprint =
            content_id(&req.policy).map_err(|e| WorkerError::Fatal(e.to_string()))?;
        let body = self.claim_body(&req)?;
        let a = self
            .send("POST", "/api/tasks/claim-next", Some(&body))
            .map_err(HttpError::worker)?;
        if a["claimed"] != json!(true) {
            return Ok(None);
        }
        let claim = Claim {
            task: decode(&a["task"])?,
            attempt: decode(&a["attempt"])?,
            resumption: a["resumption"] == json!(true),
        };
        let opened = Opened {
            run: decode(&a["run"])?,
            conversation: decode(&a["conversation"])?,
            tools: decode(&a["tools"])?,
        };
        if let Ok(mut m) = self.opened.lock() {
            m.insert((claim.task.id.clone(), claim.attempt.n), opened);
        }
        Ok(Some(claim))
    }

    fn heartbeat(&self, at: &AttemptRef, _now_ms: i64) -> Result<Heartbeat, WorkerError> {
        let h = self
            .send(
                "POST",
                &Self::attempt_path(at, "heartbeat"),
                Some(&self.heartbeat_body(at)?),
            )
            .map_err(HttpError::worker)?;
        decode(&h)
    }

    /// The host suspended the attempt when its run began waiting for the person.
    fn suspend(&self, _at: &AttemptRef, _run_id: &str, _now_ms: i64) -> Result<(), WorkerError> {
        Ok(())
    }

    /// A run that ended was reported by the host; anything else (a failure before or
    /// outside the run, an abort) is reported here, naming the attempt's run.
    fn report(&self, mut r: Report) -> Result<Reported, WorkerError> {
        let now = self.reported(&r.attempt)?;
        if !now.attempt.state.is_leased() {
            return Ok(now);
        }
        let what = match r.kind {
            ReportKind::Aborted { .. } => "abort",
            _ => "fail",
        };
        if what == "fail" {
            r.run_id = now.attempt.run_id.clone();
        }
        let body = self.report_body(&r)?;
        let done = self
            .send("POST", &Self::attempt_path(&r.attempt, what), Some(&body))
            .map_err(HttpError::worker)?;
        Ok(Reported {
            task: decode(&done["task"])?,
            attempt: decode(&done["attempt"])?,
        })
    }

    fn cancelled(&self, task_id: &str) -> bool {
        self.send("GET", &format!("/api/tasks/{task_id}"), None)
            .is_ok_and(|d| d["task"]["state"] == json!("cancelled"))
    }

    fn run(
        &self,
        job: &AttemptJob,
        _resume: Option<&str>,
        stop: StopProbe,
    ) -> Result<AttemptOutcome, HostError> {
        let opened = self
            .opened
            .lock()
            .ok()
            .and_then(|mut m| m.remove(&(job.task_id.clone(), job.attempt)))
            .ok_or_else(|| {
                HostError::Internal(format!(
                    "no claim of task {} attempt {} holds a run",
                    job.task_id, job.attempt
                ))
            })?;
        let at = job
            .lease
            .clone()
            .ok_or_else(|| HostError::Internal("the attempt has no claim".into()))?;
        RemoteRun {
            board: self,
            at,
            run: opened.run,
            stop,
        }
        .drive(job, opened.conversation, &opened.tools)
    }
}

/// One attempt's model loop here, its calls on the host's run.
struct RemoteRun<'a> {
    board: &'a RemoteBoard,
    at: AttemptRef,
    run: String,
    stop: StopProbe,
}

impl RemoteRun<'_> {
    /// Ask the model and post each of its turns whole to the host (`turn`, §13.2.2): the
    /// host's turn machine journals the text, runs the calls, counts the budgets and repairs
    /// and answers each call; the worker relays, deciding nothing. Until a turn suspends or
    /// ends the run.
    fn drive(
        &self,
        job: &AttemptJob,
        mut messages: Vec<ChatMessage>,
        tools: &[ToolSpec],
    ) -> Result<AttemptOutcome, HostError> {
        // A resumed run goes on from the turns its model already made.
        let made = messages
            .iter()
            .filter(|m| matches!(m, ChatMessage::Assistant { .. }))
            .count();
        let mut model = match self.board.models.model(&json!({"model": job.model}), made) {
            Ok(m) => m,
            Err(e) => {
                let error = format!("the model could not be started: {e}");
                return self.post_final(&json!({"error": error}), None);
            }
        };
        loop {
            if (self.stop)() {
                return Err(HostError::Internal("the task was cancelled".into()));
            }
            let turn = match model.next_turn(&messages, tools) {
                Ok(t) => t,
                Err(ModelError::ScriptExhausted) => {
                    return self.post_final(&json!({"exhausted": true}), None)
                }
                Err(e) => return self.post_final(&json!({"error": e.to_string()}), None),
            };
            let calls: Vec<Value> = turn
                .tool_calls
                .iter()
                .map(|c| json!({"id": c.id, "name": c.name, "arguments": c.arguments}))
                .collect();
            let args = json!({"content": turn.content, "tool_calls": calls});
            let answer = self.post(&args, Some(TokenUsage::from(turn.usage)))?;
            if let Some(end) = answer.get("end").filter(|e| !e.is_null()) {
                return Ok(self.outcome(end));
            }
            messages.push(ChatMessage::Assistant {
                content: turn.content.clone(),
                tool_calls: turn.tool_calls.clone(),
            });
            for r in answer["results"].as_array().into_iter().flatten() {
                messages.push(ChatMessage::Tool {
                    tool_call_id: r["call_id"].as_str().unwrap_or_default().to_string(),
                    content: r["text"].as_str().unwrap_or_default().to_string(),
                });
            }
        }
    }

    /// One whole turn on the host: its answer. Any refusal ends the attempt here (the turn's
    /// malformed calls are the host's to answer and count, not a refusal).
    fn post(&self, args: &Value, spent: Option<TokenUsage>) -> Result<Value, HostError> {
        self.board.call(&self.at, "turn", args, spent).map_err(|e| {
            HostError::Internal(format!(
                "the host refused the model's turn: {} ({})",
                e.detail, e.code
            ))
        })
    }

    /// A turn that must end the run (the model's last, or its failure).
    fn post_final(
        &self,
        args: &Value,
        spent: Option<TokenUsage>,
    ) -> Result<AttemptOutcome, HostError> {
        let answer = self.post(args, spent)?;
        let end = answer.get("end").filter(|e| !e.is_null()).ok_or_else(|| {
            HostError::Internal(format!("run {} did not end with its last turn", self.run))
        })?;
        Ok(self.outcome(end))
    }

    /// What the host did: the run waits for the person (the attempt is suspended there), or
    /// it ended and the host reported the attempt.
    fn outcome(&self, end: &Value) -> AttemptOutcome {
        let report = (end["state"] == json!("ended")).then(|| {
            if end["attempt_state"] == json!("completed") {
                ReportKind::Accepted {
                    result: Value::Null,
                    self_assessment: None,
                    verdict: None,
                }
            } else {
                ReportKind::Failed {
                    retryable: true,
                    reason: format!(
                        "the run ended without an accepted submission (attempt {})",
                        end["attempt_state"].as_str().unwrap_or("ended")
                    ),
                    class: None,
                }
            }
        });
        AttemptOutcome {
            run_id: self.run.clone(),
            report,
            receipt: None,
            usage: Usage::default(),
            evidence: None,
        }
    }
}
