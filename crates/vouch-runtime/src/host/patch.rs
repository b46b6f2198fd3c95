//! Patch attempts (§14): the task type `patch` runs as a vouch run whose work tools act only
//! inside the attempt's own git worktree; after the run the host observes the worktree itself
//! (`vouch_repo`) and the board hears the evaluator's verdict, never the model's. Touches the
//! run through `create`/`drive` and one `workspace` journal event; never a provider.

use super::task::{AttemptJob, AttemptOutcome, TaskWork};
use super::*;
use std::sync::Mutex;
use vouch_repo::{Attribution, Observed, PatchInput, RepoError, Verdict, Workspace};
use vouch_store::board::ReportKind;

/// The task type's name.
pub const PATCH_TYPE: &str = "patch";
/// Bytes `repo_read_file` returns at most.
pub const REPO_READ_BYTES_MAX: usize = 256 * 1024;
/// Bytes `repo_write_file` writes at most.
pub const REPO_WRITE_BYTES_MAX: usize = 4 << 20;
/// Default time limit of `repo_run`, in seconds.
pub const REPO_RUN_TIMEOUT_S: u64 = 60;

/// The worker's side of patch attempts: where worktrees live, which programs the runtime
/// profile lets the agent run, and the worktree of each running attempt (by run id).
pub struct PatchWork {
    pub worktrees_dir: PathBuf,
    pub commands: Vec<String>,
    sessions: Mutex<HashMap<String, Arc<Workspace>>>,
}

impl PatchWork {
    pub fn new(worktrees_dir: PathBuf, commands: Vec<String>) -> Self {
        PatchWork {
            worktrees_dir,
            commands,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    fn session(&self, run_id: &str) -> Option<Arc<Workspace>> {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(run_id)
            .cloned()
    }

    pub fn specs(&self) -> Vec<ToolSpec> {
        let path =
            json!({"type": "string", "description": "a path relative to the worktree's top"});
        vec![
            ToolSpec {
                name: "repo_read_file".into(),
                description: "Read a file of this patch attempt's worktree.".into(),
                parameters: json!({"type": "object", "properties": {"path": path}, "required": ["path"], "additionalProperties": false}),
            },
            ToolSpec {
                name: "repo_write_file".into(),
                description: "Write a whole file in this patch attempt's worktree (the host diffs the worktree itself afterwards).".into(),
                parameters: json!({"type": "object", "properties": {"path": path, "text": {"type": "string"}}, "required": ["path", "text"], "additionalProperties": false}),
            },
            ToolSpec {
                name: "repo_list".into(),
                description: "List a folder of this patch attempt's worktree (folders end with /).".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}, "additionalProperties": false}),
            },
            ToolSpec {
                name: "repo_run".into(),
                description: "Run a command the runtime profile allows, in the worktree, with a time limit; returns the exit status and the output's tail. It certifies nothing: only the host's checks do.".into(),
                parameters: json!({"type": "object", "properties": {
                    "argv": {"type": "array", "items": {"type": "string"}, "minItems": 1},
                    "timeout_s": {"type": "integer", "minimum": 1, "maximum": vouch_repo::workspace::COMMAND_TIMEOUT_S_MAX}
                }, "required": ["argv"], "additionalProperties": false}),
            },
        ]
    }

    /// Answer a `repo_*` tool; `None` for any other tool.
    pub fn call(
        &self,
        run_id: &str,
        call: &ToolCall,
        args: &Value,
    ) -> Option<Result<String, String>> {
        if !call.name.starts_with("repo_") {
            return None;
        }
        let Some(ws) = self.session(run_id) else {
            return Some(Err(format!(
                "`{}` works only in a patch attempt; this run has no worktree",
                call.name
            )));
        };
        let s = |k: &str| args.get(k).and_then(Value::as_str).unwrap_or("");
        Some(match call.name.as_str() {
            "repo_read_file" => ws
                .read(s("path"), REPO_READ_BYTES_MAX)
                .map(|b| String::from_utf8_lossy(&b).into_owned()),
            "repo_write_file" => {
                let text = s("text");
                if text.len() > REPO_WRITE_BYTES_MAX {
                    Err(format!(
                        "text is {} bytes; at most {REPO_WRITE_BYTES_MAX}",
                        text.len()
                    ))
                } else {
                    ws.write(s("path"), text.as_bytes())
                        .map(|()| format!("wrote {} bytes to {}", text.len(), s("path")))
                }
            }
            "repo_list" => ws.list(s("path")).map(|v| v.join("\n")),
            "repo_run" => {
                let argv: Vec<String> = args
                    .get("argv")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|x| x.as_str().map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                let timeout_s = args
                    .get("timeout_s")
                    .and_then(Value::as_u64)
                    .unwrap_or(REPO_RUN_TIMEOUT_S);
                ws.run(&argv, &self.commands, timeout_s).map(|r| {
                    let status = match (r.exit, r.timed_out) {
                        (_, true) => "timed out".to_string(),
                        (Some(x), _) => format!("exit {x}"),
                        (None, _) => r.error.clone().unwrap_or_else(|| "no exit status".into()),
                    };
                    format!("{status}\n{}", r.tail)
                })
            }
            other => Err(format!("unknown tool `{other}`")),
        })
    }
}

/// The host's message to the model about its worktree (from the `workspace` event).
pub(super) fn workspace_message(w: &j::Workspace) -> String {
    format!(
        "This is a patch attempt. Your worktree is at base commit {}; work in it with repo_list, repo_read_file, repo_write_file and repo_run (paths relative to its top). Change: {}. You may change only: {}. After the run the host diffs the worktree and runs its checks ({}); what you say about tests does not count.",
        w.base,
        w.targets.join(", "),
        w.allow.join(", "),
        w.checks.join(", "),
    )
}

/// The evidence the accepted output carries (and the board keeps).
fn evidence(o: &Observed) -> Value {
    let e = &o.evaluation;
    json!({
        "verdict": e.verdict,
        "attribution": e.attribution,
        "changed": match &o.diff {
            vouch_repo::DiffObs::Read { changes } => json!(changes),
            vouch_repo::DiffObs::Unreadable { reason } => json!({"unreadable": reason}),
        },
        "collateral": e.collateral,
        "missing_targets": e.missing_targets,
        "checks": o.checks.iter().map(|c| json!({"name": c.name, "exit": c.exit, "timed_out": c.timed_out, "tail": c.tail, "error": c.error})).collect::<Vec<_>>(),
        "no_effect": e.no_effect,
        "writes_without_effect": e.writes_without_effect,
        "transient": e.transient,
        "trace": o.trace.as_ref().map(|t| json!({"events": t.events.len(), "overflowed": t.overflowed, "incomplete": t.incomplete})),
        "integrity": o.integrity,
        "workspace": o.workspace,
        "reasons": e.reasons,
    })
}

impl Host {
    /// One patch attempt: create the worktree (journaled before the first turn), drive the
    /// run with the worktree's tools, then observe, evaluate and report what the host saw.
    pub(super) fn run_patch_attempt(
        &self,
        work: &TaskWork,
        job: &AttemptJob,
    ) -> HostResult<AttemptOutcome> {
        let patch = work.patch.as_ref().ok_or_else(|| {
            HostError::BadInput(
                "this worker does not take patch tasks (no worktrees folder configured)".into(),
            )
        })?;
        let input =
            PatchInput::from_value(&job.input).map_err(|e| HostError::BadInput(e.to_string()))?;
        let ws = Workspace::create(&input, &patch.worktrees_dir, &job.task_id, job.attempt)
            .map_err(|e| {
                let m = format!("patch worktree: {e}");
                match e {
                    RepoError::Input(_) => HostError::BadInput(m),
                    // Another attempt holds the worktree path or the branch.
                    RepoError::Conflict(_) => HostError::OwnedElsewhere(m),
                    RepoError::Git(_) | RepoError::Io(_) => HostError::Internal(m),
                }
            })?;
        let run_id = new_id(self.clock.as_ref());
        let spec = RunSpec {
            trigger: TriggerKind::Task,
            title: format!("task {} ({}): {}", job.task_id, job.kind, job.brief),
            presence: Some(Presence::Away),
            quiet: false,
            model: job.model.clone(),
            // Every attempt of a task shares one ledger scope (§8.1): a retry never repeats an
            // irreversible act an earlier attempt did.
            scope: Some(format!("task:{}", job.task_id)),
        };
        let record = ws.record.clone();
        let ws = Arc::new(ws);
        let body = j::Workspace {
            repo: record.repo.clone(),
            path: record.path.clone(),
            base: record.base.clone(),
            head: record.head.clone(),
            identity: record.identity.clone(),
            branch: record.branch.clone(),
            allow: input.allow.clone(),
            targets: input.targets.clone(),
            checks: input.checks.iter().map(|c| c.name.clone()).collect(),
            trace: input.trace,
        };
        // The model's own submission, if it makes one, is advisory only (a self-assessment).
        work.open_advisory(&run_id, job.profile.as_ref());
        let driven = self
            .create(&run_id, &spec, None, None)
            .and_then(|_| self.journal(&run_id, self.ev(body)))
            .and_then(|()| {
                patch
                    .sessions
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(run_id.clone(), ws.clone());
                self.drive(&run_id)
            });
        patch
            .sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&run_id);
        let claimed = work.take_advisory(&run_id);
        let ws = Arc::try_unwrap(ws).map_err(|_| {
            HostError::Internal("the worktree is still in use by a tool call".into())
        })?;
        let end = match driven {
            Ok(end) => end,
            Err(e) => {
                let _ = ws.remove();
                return Err(e);
            }
        };
        let journal = self.store.journal(&run_id)?;
        let usage = super::task::usage_of(&journal);
        let run_receipt = self.store.receipt(&run_id)?;
        if let RunEnd::Suspended { .. } = end {
            // The worktree stays for the resumption; it is observed when the run ends.
            return Ok(AttemptOutcome {
                run_id,
                report: None,
                receipt: run_receipt,
                usage,
                evidence: None,
            });
        }
        let (observed, ws) = ws.observe();
        let e = &observed.evaluation;
        let lines: Vec<String> = vouch_repo::receipt_lines(e)
            .into_iter()
            .map(|l| vouch_core::escape_line(&l).into_owned())
            .collect();
        let mut receipt = run_receipt.unwrap_or_default();
        if !receipt.is_empty() && !receipt.ends_with('\n') {
            receipt.push('\n');
        }
        for l in &lines {
            receipt.push_str(l);
            receipt.push('\n');
        }
        if let Some(c) = &observed.commit {
            receipt.push_str(&format!(
                "Committed by the host: {c} on {}\n",
                observed.workspace.branch
            ));
        }
        let report = match (e.verdict, e.attribution, &observed.commit) {
            (Verdict::Accepted, _, Some(commit)) => ReportKind::Accepted {
                result: json!({
                    "commit": commit,
                    "branch": observed.workspace.branch,
                    "base": observed.workspace.base,
                    "repo": observed.workspace.repo,
                    "evidence": evidence(&observed),
                }),
                self_assessment: claimed,
                verdict: None,
            },
            (Verdict::Accepted, _, None) => ReportKind::Failed {
                retryable: false,
                reason: format!(
                    "the host could not commit the accepted diff: {}",
                    observed.commit_error.as_deref().unwrap_or("unknown error")
                ),
                class: None,
            },
            (_, Attribution::Unknown, _) => ReportKind::Failed {
                retryable: false,
                reason: format!(
                    "attribution unknown: {}; the worktree is kept at {} — check it before retrying",
                    e.reasons.join("; "),
                    observed.workspace.path
                ),
                class: None,
            },
            (Verdict::Rejected, Attribution::Attributed, _) => ReportKind::Failed {
                retryable: true,
                reason: format!("patch rejected: {}", e.reasons.join("; ")),
                class: None,
            },
        };
        // Only a worktree this attempt still holds is removed; an unknown one is kept.
        if e.attribution == Attribution::Attributed {
            if let Err(err) = ws.remove() {
                receipt.push_str(&format!(
                    "The worktree could not be removed: {}\n",
                    vouch_core::escape_line(&err.to_string())
                ));
            }
        }
        Ok(AttemptOutcome {
            run_id,
            report: Some(report),
            receipt: Some(receipt),
            usage,
            evidence: Some(evidence(&observed)),
        })
    }
}
