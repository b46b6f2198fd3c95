//! Patch attempts (§14): the task type `patch` runs as a vouch run whose work tools act only
//! inside the attempt's own git worktree; after the run the host observes the worktree itself
//! (`vouch_repo`) and the board hears the evaluator's verdict, never the model's. Touches the
//! run through `create`/`drive` and one `workspace` journal event; never a provider.

use super::task::{AttemptJob, AttemptOutcome, RuntimeProfile, TaskWork};
use super::*;
use std::sync::Mutex;
use vouch_repo::sandbox::Limits;
use vouch_repo::workspace::Confinement;
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
    /// The program run inside a sandbox to reach the egress proxy (the `vouch` binary's
    /// `sandbox-relay`); without one the attempt's commands have no network at all.
    pub relay: Option<PathBuf>,
    sessions: Mutex<HashMap<String, Arc<Workspace>>>,
}

impl PatchWork {
    pub fn new(worktrees_dir: PathBuf, commands: Vec<String>) -> Self {
        PatchWork {
            worktrees_dir,
            commands,
            relay: None,
            sessions: Mutex::new(HashMap::new()),
        }
    }

    /// Give the attempts' sandboxes a way to the egress proxy (§14.0.6).
    pub fn with_relay(mut self, relay: PathBuf) -> Self {
        self.relay = Some(relay);
        self
    }

    fn session(&self, run_id: &str) -> Option<Arc<Workspace>> {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(run_id)
            .cloned()
    }

    /// Run `f` with the worktree open to the run's tools, and closed again after.
    fn in_session<T>(&self, run_id: &str, ws: &Arc<Workspace>, f: impl FnOnce() -> T) -> T {
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(run_id.to_string(), ws.clone());
        let out = f();
        self.sessions
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(run_id);
        out
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
                // The proxy's refusals during this command join its result, so each refused
                // connection is journaled in the run with the call that made it (issue 38 #5).
                let seen = ws.proxy_refusals().len();
                ws.run(&argv, timeout_s).map(|r| {
                    let status = match (r.exit, r.timed_out) {
                        (_, true) => "timed out".to_string(),
                        (Some(x), _) => format!("exit {x}"),
                        (None, _) => r.error.clone().unwrap_or_else(|| "no exit status".into()),
                    };
                    let mut out = format!("{status}\n{}", r.tail);
                    let refused = r.refused.iter().cloned();
                    for why in refused.chain(ws.proxy_refusals().into_iter().skip(seen)) {
                        out.push_str(&format!("\nrefused by the sandbox: {why}"));
                    }
                    out
                })
            }
            other => Err(format!("unknown tool `{other}`")),
        })
    }
}

impl PatchWork {
    /// What the attempt's profile snapshot grants its commands (§13.6.3): the programs
    /// (`commands`, else `shell`, else this worker's `--allow-command`), the writable
    /// folders, the limits. Without a snapshot, the worker's own commands and the defaults.
    pub fn confinement(&self, profile: Option<&RuntimeProfile>) -> (Confinement, Vec<String>) {
        let policy = profile.map(|p| &p.policy);
        let strings = |k: &str| -> Option<Vec<String>> {
            policy?.get(k)?.as_array().map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
        };
        let limits = policy.and_then(|p| p.get("limits"));
        let limit = |k: &str| limits.and_then(|l| l.get(k)).and_then(Value::as_u64);
        let d = Limits::default();
        let (keys, problems) = keys_of(policy);
        let c = Confinement {
            commands: strings("commands")
                .or_else(|| strings("shell"))
                .unwrap_or_else(|| self.commands.clone()),
            writable: strings("writable").unwrap_or_default(),
            network: strings("network").unwrap_or_default(),
            keys,
            relay: self.relay.clone(),
            limits: Limits {
                processes_max: limit("processes_max")
                    .map_or(d.processes_max, |n| n.min(u32::MAX as u64) as u32),
                memory_bytes_max: limit("memory_mb_max").map_or(d.memory_bytes_max, |m| m << 20),
                output_bytes_max: limit("output_mb_max").map_or(d.output_bytes_max, |m| m << 20),
                tmp_bytes_max: d.tmp_bytes_max,
            },
            egress: None,
        };
        (c, problems)
    }
}

/// Each limit a profile may set, with its bounds.
const LIMITS: [(&str, u64, u64); 3] = [
    ("processes_max", 1, 4096),
    ("memory_mb_max", 16, 65536),
    ("output_mb_max", 1, 4096),
];

/// A profile's sandbox policy read strictly (§13.6.3): `writable` folders are plain relative
/// paths, `limits` known and in bounds, each of `keys` a variable, a host and a secret by
/// reference. The error names the field and what is wrong.
pub fn check_sandbox_policy(name: &str, o: &serde_json::Map<String, Value>) -> Result<(), String> {
    let bad = |m: String| Err(format!("runtime profile `{name}`: {m}"));
    for w in o
        .get("writable")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
    {
        let w = w.as_str().unwrap_or("");
        if !vouch_repo::input::plain_path(w) || w.contains(['*', '?', '[']) {
            return bad(format!(
                "writable `{}` must be a folder inside the worktree (a plain relative path, no globs, no ..)",
                vouch_core::escape_line(w)
            ));
        }
    }
    if let Some(l) = o.get("limits") {
        let Some(l) = l.as_object() else {
            return bad("limits must be an object".into());
        };
        for (k, v) in l {
            let Some((_, lo, hi)) = LIMITS.iter().find(|(n, _, _)| n == k) else {
                return bad(format!(
                    "limits.{} is not a limit (processes_max, memory_mb_max, output_mb_max)",
                    vouch_core::escape_line(k)
                ));
            };
            match v.as_u64() {
                Some(n) if (*lo..=*hi).contains(&n) => {}
                _ => {
                    return bad(format!(
                        "limits.{k} must be a whole number from {lo} to {hi}"
                    ))
                }
            }
        }
    }
    if let Some(keys) = o.get("keys") {
        let Some(keys) = keys.as_array().filter(|a| a.len() <= 16) else {
            return bad("keys must be an array of at most 16 keys".into());
        };
        for (i, k) in keys.iter().enumerate() {
            let s = |f: &str| k.get(f).and_then(Value::as_str).unwrap_or("");
            let var = s("env");
            let var_ok = !var.is_empty()
                && var.len() <= 64
                && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
            let secret_ok = k.get("secret").is_some_and(|v| {
                serde_json::from_value::<crate::secret::SecretRef>(v.clone()).is_ok()
            });
            if !var_ok || s("host").is_empty() || !secret_ok {
                return bad(format!(
                    "keys[{i}] must be {{\"env\": VARIABLE, \"host\": HOST, \"secret\": {{\"env\": NAME}} or {{\"file\": PATH}}}}"
                ));
            }
        }
    }
    Ok(())
}

/// The profile's `keys` (`[{"env": VARIABLE, "host": HOST, "secret": {"env" | "file"}}]`):
/// the sandbox gets `VARIABLE=vouch-placeholder-VARIABLE`, the proxy the real key, read here
/// on the host, for `HOST` only. A key that cannot be read is named, not given.
fn keys_of(policy: Option<&Value>) -> (Vec<(String, vouch_repo::egress::Key)>, Vec<String>) {
    let (mut keys, mut problems) = (vec![], vec![]);
    let entries = policy
        .and_then(|p| p.get("keys"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for k in entries.iter().take(16) {
        let s = |f: &str| k.get(f).and_then(Value::as_str).unwrap_or("").to_string();
        let (var, host) = (s("env"), s("host"));
        let var_ok = !var.is_empty()
            && var.len() <= 64
            && var.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
        if !var_ok || host.is_empty() {
            problems.push(format!(
                "key: each needs `env` (a variable name) and `host`; `{}` was not given",
                vouch_core::escape_line(&var)
            ));
            continue;
        }
        let secret = k
            .get("secret")
            .cloned()
            .ok_or_else(|| "no `secret`".to_string())
            .and_then(|v| {
                serde_json::from_value::<crate::secret::SecretRef>(v).map_err(|e| e.to_string())
            })
            .and_then(|r| r.resolve());
        match secret {
            Ok(secret) => keys.push((
                var.clone(),
                vouch_repo::egress::Key {
                    placeholder: format!("vouch-placeholder-{var}"),
                    secret,
                    host,
                },
            )),
            Err(e) => problems.push(format!("key {var}: {e}; not given")),
        }
    }
    (keys, problems)
}

/// The policy the attempt's commands ran under, as the receipt and the evidence name it.
fn sandbox_record(profile: Option<&RuntimeProfile>, c: &Confinement) -> Value {
    json!({
        "confinement": "bubblewrap",
        "profile": profile.map(|p| p.name.as_str()).unwrap_or("(none)"),
        "policy_fingerprint": profile.map(|p| p.fingerprint.as_str()),
        "commands": c.commands,
        "network": c.network,
        "writable": if c.writable.is_empty() { json!(["(the worktree)"]) } else { json!(c.writable) },
        "limits": {
            "processes_max": c.limits.processes_max,
            "memory_bytes_max": c.limits.memory_bytes_max,
            "output_bytes_max": c.limits.output_bytes_max,
            "tmp_bytes_max": c.limits.tmp_bytes_max,
        },
    })
}

/// Receipt lines for the sandbox: the policy it enforced and each refusal.
fn sandbox_lines(record: &Value, refused: &[String]) -> Vec<String> {
    let list = |k: &str| {
        let v: Vec<&str> = record[k]
            .as_array()
            .map(|a| a.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    let l = &record["limits"];
    let mut out = vec![format!(
        "Sandbox: bubblewrap under profile {} ({}); commands: {}; network: {}; writable: {}; limits: {} processes, {} MiB memory, {} MiB output",
        record["profile"].as_str().unwrap_or("(none)"),
        record["policy_fingerprint"].as_str().unwrap_or("no fingerprint"),
        list("commands"),
        list("network"),
        list("writable"),
        l["processes_max"],
        l["memory_bytes_max"].as_u64().unwrap_or(0) >> 20,
        l["output_bytes_max"].as_u64().unwrap_or(0) >> 20,
    )];
    out.extend(
        refused
            .iter()
            .map(|r| format!("Refused by the sandbox: {r}")),
    );
    out
}

/// The evidence the accepted output carries (and the board keeps).
fn evidence(o: &Observed, sandbox: &Value, refused: &[String]) -> Value {
    let e = &o.evaluation;
    json!({
        "sandbox": sandbox,
        "refused": refused,
        "tricks": e.tricks,
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
        let (patch, input, ws) = open_workspace(work, job)?;
        let run_id = new_id(self.clock.as_ref());
        let spec = RunSpec {
            trigger: TriggerKind::Task,
            title: format!("task {} ({}): {}", job.task_id, job.kind, job.brief),
            presence: Some(Presence::Away),
            quiet: false,
            model: ModelSpec::from(job.model.clone()),
            // Every attempt of a task shares one ledger scope (§8.1): a retry never repeats an
            // irreversible act an earlier attempt did.
            scope: Some(format!("task:{}", job.task_id)),
        };
        let body = workspace_event(&ws, &input);
        let ws = Arc::new(ws);
        // The model's own submission, if it makes one, is advisory only (a self-assessment).
        work.open_advisory(&run_id, job.profile.as_ref());
        let driven = self
            .create(&run_id, &spec, None, None)
            .and_then(|_| self.journal(&run_id, self.ev(body)))
            .and_then(|()| patch.in_session(&run_id, &ws, || self.drive(&run_id)));
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
        let usage = super::task::usage_of(&self.store.journal_events(&run_id)?);
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
        let refused = ws.refusals();
        let sandbox = sandbox_record(job.profile.as_ref(), ws.confinement());
        let mut receipt = patch_receipt(run_receipt, &observed, &sandbox, &refused);
        let report = patch_report(&observed, claimed, &sandbox, &refused);
        // Only a worktree this attempt still holds is removed; an unknown one is kept.
        if observed.evaluation.attribution == Attribution::Attributed {
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
            evidence: Some(evidence(&observed, &sandbox, &refused)),
        })
    }
}

/// The `workspace` event a patch attempt's run opens with: where the model works and what the
/// host will check.
fn workspace_event(ws: &Workspace, input: &PatchInput) -> j::Workspace {
    let record = &ws.record;
    j::Workspace {
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
    }
}

/// The attempt's own worktree, confined by its runtime profile, with the patch input it was
/// made from.
fn open_workspace<'w>(
    work: &'w TaskWork,
    job: &AttemptJob,
) -> HostResult<(&'w PatchWork, PatchInput, Workspace)> {
    let patch = work.patch.as_ref().ok_or_else(|| {
        HostError::BadInput(
            "this worker does not take patch tasks (no worktrees folder configured)".into(),
        )
    })?;
    let input =
        PatchInput::from_value(&job.input).map_err(|e| HostError::BadInput(e.to_string()))?;
    let mut ws = Workspace::create(&input, &patch.worktrees_dir, &job.task_id, job.attempt)
        .map_err(|e| {
            let m = format!("patch worktree: {e}");
            match e {
                RepoError::Input(_) => HostError::BadInput(m),
                // Another attempt holds the worktree path or the branch.
                RepoError::Conflict(_) => HostError::OwnedElsewhere(m),
                RepoError::Git(_) | RepoError::Io(_) => HostError::Internal(m),
            }
        })?;
    let (confinement, problems) = patch.confinement(job.profile.as_ref());
    ws.confine(confinement);
    for p in problems {
        ws.refused(p);
    }
    Ok((patch, input, ws))
}

/// The run's receipt with the evaluation's lines, the sandbox's and the host's commit.
fn patch_receipt(
    run_receipt: Option<String>,
    observed: &Observed,
    sandbox: &Value,
    refused: &[String],
) -> String {
    let e = &observed.evaluation;
    let lines: Vec<String> = vouch_repo::receipt_lines(e)
        .into_iter()
        .chain(sandbox_lines(sandbox, refused))
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
    receipt
}

/// The report the board hears: the evaluator's verdict, never the model's (§14).
fn patch_report(
    observed: &Observed,
    claimed: Option<Value>,
    sandbox: &Value,
    refused: &[String],
) -> ReportKind {
    let e = &observed.evaluation;
    match (e.verdict, e.attribution, &observed.commit) {
        (Verdict::Accepted, _, Some(commit)) => ReportKind::Accepted {
            result: json!({
                "commit": commit,
                "branch": observed.workspace.branch,
                "base": observed.workspace.base,
                "repo": observed.workspace.repo,
                "evidence": evidence(observed, sandbox, refused),
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
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(v: Value) -> Result<(), String> {
        check_sandbox_policy("p", v.as_object().unwrap_or(&serde_json::Map::new()))
    }

    #[test]
    fn a_profiles_sandbox_policy_is_read_strictly() {
        assert!(
            check(json!({"writable": ["src", "docs/out"], "limits": {"processes_max": 8}})).is_ok()
        );
        let refused = [
            (json!({"writable": ["../up"]}), "writable `../up`"),
            (json!({"writable": ["src/**"]}), "no globs"),
            (json!({"limits": {"cpu": 1}}), "limits.cpu is not a limit"),
            (json!({"limits": {"processes_max": 0}}), "from 1 to 4096"),
            (
                json!({"keys": [{"env": "K", "host": "h"}]}),
                "keys[0] must be",
            ),
            (
                json!({"keys": [{"env": "A B", "host": "h", "secret": {"env": "X"}}]}),
                "keys[0]",
            ),
        ];
        for (v, want) in refused {
            let e = check(v.clone()).unwrap_err();
            assert!(e.contains(want), "{v}: {e}");
        }
    }

    #[test]
    fn the_confinement_comes_from_the_snapshot_not_the_worker() {
        let w = PatchWork::new(PathBuf::from("/w"), vec!["cargo".into()]);
        let (c, problems) = w.confinement(None);
        assert_eq!(c.commands, vec!["cargo"]);
        assert!(problems.is_empty());
        let p = RuntimeProfile::from_policy(json!({"name": "p", "shell": ["make"], "network": ["example.com"],
            "writable": ["src"], "limits": {"processes_max": 9, "memory_mb_max": 100},
            "keys": [{"env": "K", "host": "example.com", "secret": {"env": "VOUCH_TEST_NO_SUCH_VARIABLE"}}]}))
        .unwrap_or_else(|e| panic!("{e}"));
        let (c, problems) = w.confinement(Some(&p));
        assert_eq!(c.commands, vec!["make"]);
        assert_eq!(c.network, vec!["example.com"]);
        assert_eq!(c.writable, vec!["src"]);
        assert_eq!(
            (c.limits.processes_max, c.limits.memory_bytes_max),
            (9, 100 << 20)
        );
        // A key the host cannot read is named and not given.
        assert!(c.keys.is_empty());
        assert!(
            problems[0].contains("VOUCH_TEST_NO_SUCH_VARIABLE"),
            "{problems:?}"
        );
    }
}
