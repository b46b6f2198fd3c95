//! Patch scenarios through the real host (§14): a real git repository built from the
//! scenario's files, the scenario's turns as a scripted model in a real worktree, faults caused
//! by a real second writer (a command the runner runs in the worktree, outside the attempt's
//! sandbox — the agent's own commands cannot reach the git folder), and the host's own
//! observation and verdict read back as the scenario report. Kept apart from the run
//! scenarios' runner.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use vouch_runtime::host::{AttemptJob, PatchWork, TaskTypes, TaskWork, WorkTools};
use vouch_runtime::model::{ToolCall, ToolSpec};

/// The fault turns' tool: another writer of the worktree, played by the runner on the host
/// (unconfined: it stands for a second process, not for the agent).
const SECOND_WRITER: &str = "second_writer";

struct SecondWriter {
    inner: Arc<dyn WorkTools>,
    worktree: std::path::PathBuf,
}

impl WorkTools for SecondWriter {
    fn specs(&self) -> Vec<ToolSpec> {
        self.inner.specs()
    }
    fn call(
        &self,
        run_id: &str,
        spec: &Value,
        call: &ToolCall,
        args: &Value,
    ) -> Option<Result<String, String>> {
        if call.name != SECOND_WRITER {
            return self.inner.call(run_id, spec, call, args);
        }
        let cmd = args.get("cmd").and_then(Value::as_str).unwrap_or("false");
        Some(
            Command::new("sh")
                .args(["-c", cmd])
                .current_dir(&self.worktree)
                .output()
                .map_err(|e| e.to_string())
                .and_then(|o| {
                    o.status
                        .success()
                        .then(String::new)
                        .ok_or_else(|| String::from_utf8_lossy(&o.stderr).into_owned())
                }),
        )
    }
}
use vouch_scenario::patch::{PatchFault, PatchReport, PatchScenario, PatchTurn};

/// The second writer's command for each fault (run by `sh -c` in the worktree).
fn fault_cmd(f: PatchFault) -> &'static str {
    match f {
        PatchFault::HeadMoved => {
            "git -c user.name=other -c user.email=other@localhost commit --quiet --allow-empty -m other"
        }
        PatchFault::LeaseLost => "echo other-host > \"$(git rev-parse --absolute-git-dir)/vouch-lease\"",
        PatchFault::WorktreeReplaced => {
            "d=$(pwd) && c=$(git rev-parse --path-format=absolute --git-common-dir) && b=$(git rev-parse HEAD) && cd / && git --git-dir=\"$c\" worktree remove --force \"$d\" && git --git-dir=\"$c\" worktree add --detach --quiet \"$d\" \"$b\""
        }
        PatchFault::DiffUnreadable => "printf 'gitdir: /nonexistent\\n' > .git",
    }
}

fn git(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args([
            "-c",
            "user.name=runner",
            "-c",
            "user.email=runner@localhost",
        ])
        .args(args)
        .output()
        .map_err(|e| format!("git: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Run one patch scenario in a temporary folder and report what the host observed.
pub fn run_patch(s: &PatchScenario) -> Result<PatchReport, String> {
    let tmp = tempfile::tempdir().map_err(|e| e.to_string())?;
    let dir = tmp.path();
    let repo = dir.join("repo");
    for (name, text) in &s.repo.files {
        if !vouch_repo::input::plain_path(name) {
            return Err(format!("repo file `{name}` is not a plain relative path"));
        }
        let p = repo.join(name);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).map_err(|e| e.to_string())?;
        }
        std::fs::write(&p, text).map_err(|e| e.to_string())?;
    }
    std::fs::create_dir_all(&repo).map_err(|e| e.to_string())?;
    git(&repo, &["init", "--quiet", "-b", "main"])?;
    git(&repo, &["add", "-A"])?;
    git(&repo, &["commit", "--quiet", "--allow-empty", "-m", "base"])?;
    let base = String::from_utf8_lossy(
        &Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["rev-parse", "HEAD"])
            .output()
            .map_err(|e| e.to_string())?
            .stdout,
    )
    .trim()
    .to_string();
    let mut turns = vec![json!({"declare": {"deliveries": []}})];
    for t in &s.script {
        turns.push(match t {
            PatchTurn::Read(p) => json!({"tool": "repo_read_file", "args": {"path": p}}),
            PatchTurn::List(p) => json!({"tool": "repo_list", "args": {"path": p}}),
            PatchTurn::Write { path, text } => {
                json!({"tool": "repo_write_file", "args": {"path": path, "text": text}})
            }
            PatchTurn::Fault(f) => {
                json!({"tool": SECOND_WRITER, "args": {"cmd": fault_cmd(*f)}})
            }
            PatchTurn::Submit(v) => json!({"submit": v}),
            PatchTurn::Final(text) => json!({"final": text}),
        });
    }
    let host = crate::scenario_host(dir)?;
    // The fault turns are the only commands: the second writer, played by the runner.
    let second = Arc::new(SecondWriter {
        inner: host.work().clone(),
        worktree: dir.join("worktrees").join("scenario-1"),
    });
    let work =
        Arc::new(TaskWork::new(second).with_patch(PatchWork::new(dir.join("worktrees"), vec![])));
    let host = host.with_work(work.clone());
    let job = AttemptJob {
        task_id: "scenario".into(),
        attempt: 1,
        kind: "patch".into(),
        brief: s.title.clone(),
        input: json!({
            "repo": repo.to_string_lossy(), "base": base, "allow": s.repo.allow,
            "targets": s.repo.targets, "trace": s.repo.trace,
            "checks": s.repo.checks.iter().map(|c| json!({"name": c.name, "cmd": format!("exit {}", c.exit), "timeout_s": 30})).collect::<Vec<_>>(),
        }),
        criteria: None,
        model: json!({"kind": "script", "turns": turns}),
        repairs_max: 0,
        profile: None,
        lease: None,
    };
    let out = host
        .run_task_attempt(&work, &TaskTypes::builtin(), &job)
        .map_err(|e| format!("the patch attempt could not run: {e}"))?;
    let e = out
        .evidence
        .ok_or_else(|| "the attempt left no evidence (did it suspend?)".to_string())?;
    let strs = |k: &str| -> Vec<String> {
        e.get(k)
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut changed: Vec<String> = e
        .get("changed")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| c.get("path").and_then(Value::as_str).map(String::from))
                .collect()
        })
        .unwrap_or_default();
    changed.sort();
    changed.dedup();
    let ran: BTreeMap<String, Option<i32>> = e
        .get("checks")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| {
                    let n = c.get("name")?.as_str()?.to_string();
                    Some((n, c.get("exit").and_then(Value::as_i64).map(|x| x as i32)))
                })
                .collect()
        })
        .unwrap_or_default();
    let checks = s
        .repo
        .checks
        .iter()
        .map(|c| (c.name.clone(), ran.get(&c.name).copied().flatten()))
        .collect();
    let s_of = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    Ok(PatchReport {
        changed,
        collateral: strs("collateral"),
        checks,
        attribution: s_of("attribution"),
        verdict: s_of("verdict"),
        no_effect: e.get("no_effect").and_then(Value::as_bool) == Some(true),
        transient: strs("transient"),
    })
}
