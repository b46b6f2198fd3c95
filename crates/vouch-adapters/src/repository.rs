//! `repository` (§14): applying a patch task's commit to a real branch is its own delivery,
//! `save → repository:PATH#BRANCH` with the payload `{"commit": …}`. The branch exists, so the
//! save overwrites what others share (§5.4) and waits for approval; the provider only
//! fast-forwards (`vouch_repo::apply`) and the host reads the branch back as the observation.

use serde_json::{json, Value};
use std::path::Path;
use vouch_core::{Destination, DestinationKind, TriggerKind, Verb};
use vouch_repo::git::Git;
use vouch_runtime::host::RunSpec;
use vouch_runtime::provider::{AttemptReply, AttemptRequest, Confirms, Observation, Provider};

/// `PATH#BRANCH` → (path, branch).
pub fn parse_address(address: &str) -> Result<(&str, &str), String> {
    match address.rsplit_once('#') {
        Some((p, b)) if !p.is_empty() && !b.is_empty() => Ok((p, b)),
        _ => Err(format!(
            "repository address `{address}` must be PATH#BRANCH"
        )),
    }
}

#[derive(Debug, Clone, Default)]
pub struct RepositoryProvider;

impl RepositoryProvider {
    fn branch_at(dest: &Destination) -> Result<String, String> {
        let (repo, branch) = parse_address(&dest.address)?;
        Git::new(repo)
            .text(&[
                "rev-parse",
                "--verify",
                "--end-of-options",
                &format!("refs/heads/{branch}"),
            ])
            .map_err(|e| e.to_string())
    }
}

impl Provider for RepositoryProvider {
    fn kind(&self) -> DestinationKind {
        DestinationKind::Repository
    }
    fn idempotent_by_key(&self, _dest: &Destination) -> bool {
        false
    }
    /// An existing branch is shared: moving it is irreversible for whoever fetched it.
    fn exists(&self, dest: &Destination) -> bool {
        Self::branch_at(dest).is_ok()
    }
    /// The diff from the branch as it is now to the commit the payload would move it to.
    /// The commit is from the payload: only a full hex object id is passed to git.
    fn preview(&self, dest: &Destination, payload: &Value, bytes_max: usize) -> Option<String> {
        let commit = payload.get("commit").and_then(Value::as_str)?;
        let hex = matches!(commit.len(), 40 | 64) && commit.bytes().all(|b| b.is_ascii_hexdigit());
        if !hex {
            return None;
        }
        let (repo, _) = parse_address(&dest.address).ok()?;
        let at = Self::branch_at(dest).ok()?;
        let out = Git::new(repo)
            .run(&[
                "diff",
                "--no-color",
                "--no-ext-diff",
                "--end-of-options",
                &at,
                commit,
            ])
            .ok()?;
        let cut = &out[..out.len().min(bytes_max)];
        Some(String::from_utf8_lossy(cut).into_owned())
    }
    fn attempt(&self, req: &AttemptRequest) -> AttemptReply {
        if req.verb != Verb::Save {
            return AttemptReply::Rejected {
                reason: format!(
                    "a repository takes `save` (apply a commit), not `{}`",
                    req.verb
                ),
            };
        }
        let (repo, branch) = match parse_address(&req.destination.address) {
            Ok(x) => x,
            Err(reason) => return AttemptReply::Rejected { reason },
        };
        let Some(commit) = req.payload.get("commit").and_then(Value::as_str) else {
            return AttemptReply::Rejected {
                reason: "the payload needs {\"commit\": FULL_ID}".into(),
            };
        };
        match vouch_repo::apply::fast_forward(Path::new(repo), branch, commit) {
            Ok(at) => AttemptReply::Accepted {
                reference: format!("{branch} at {at}"),
                confirms: Confirms::Reference,
            },
            Err(e) => AttemptReply::Rejected {
                reason: e.to_string(),
            },
        }
    }
    fn observe(&self, req: &AttemptRequest, _reply: Option<&AttemptReply>) -> Observation {
        let want = req
            .payload
            .get("commit")
            .and_then(Value::as_str)
            .unwrap_or("");
        match Self::branch_at(&req.destination) {
            Ok(at) if at == want => Observation::Present {
                evidence: format!("the branch reads back at {}", &at[..at.len().min(12)]),
            },
            Ok(at) => Observation::Absent {
                reason: format!("the branch is at {at}, not {want}"),
            },
            Err(e) => Observation::Absent { reason: e },
        }
    }
}

/// The diff shown on an apply card is this long at most; the rest is counted, not shown.
pub const APPLY_DIFF_BYTES_MAX: usize = 16 * 1024;

/// The diff the commit applies on its base (its first parent when the output names none):
/// modes, symlinks and all, bounded.
fn applied_diff(repo: &str, base: Option<&str>, commit: &str) -> Result<String, String> {
    let parent = format!("{commit}^");
    let base = base.unwrap_or(&parent);
    let out = Git::new(repo)
        .run(&[
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-textconv",
            "--stat",
            "--patch",
            "--end-of-options",
            base,
            commit,
        ])
        .map_err(|e| format!("read the diff the patch applies: {e}"))?;
    let text = String::from_utf8_lossy(&out);
    if text.len() <= APPLY_DIFF_BYTES_MAX {
        return Ok(text.into_owned());
    }
    let mut cut = APPLY_DIFF_BYTES_MAX;
    while !text.is_char_boundary(cut) {
        cut -= 1;
    }
    Ok(format!(
        "{}\n… ({} more bytes; see `git diff {base} {commit}`)",
        &text[..cut],
        text.len() - cut
    ))
}

/// The run that applies an accepted patch output to `branch`: one declared `save` to the
/// repository with the host's commit as payload. The host's posture decides whether it waits
/// for approval (an existing branch does).
pub fn apply_run(task_id: &str, result: &Value, branch: &str) -> Result<RunSpec, String> {
    let s = |k: &str| {
        result
            .get(k)
            .and_then(Value::as_str)
            .ok_or_else(|| format!("task {task_id}'s output has no `{k}`; is it a patch task?"))
    };
    let (repo, commit) = (s("repo")?, s("commit")?);
    let address = format!("{repo}#{branch}");
    // The card shows what moving the branch applies, and the approval is bound to it (the
    // payload's hash covers the diff).
    let diff = applied_diff(repo, result.get("base").and_then(Value::as_str), commit)?;
    Ok(RunSpec {
        trigger: TriggerKind::Interactive,
        title: format!("apply task {task_id}'s patch to {branch}"),
        presence: None,
        quiet: false,
        model: vouch_runtime::host::ModelSpec::script(vec![
            json!({"declare": {"deliveries": [{"id": "apply", "verb": "save",
                "destination": {"kind": "repository", "address": address}}]}}),
            json!({"deliver": "apply", "payload": {"commit": commit, "task": task_id, "diff": diff}}),
            json!({"final": format!("apply {commit} to {branch}")}),
        ]),
        scope: None,
    })
}

#[cfg(test)]
mod preview_tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) -> String {
        let out = Command::new("git")
            .current_dir(dir)
            .args([
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_string()
    }

    #[test]
    fn a_patch_card_previews_the_diff_it_would_apply() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        git(dir, &["init", "-q", "-b", "main"]);
        std::fs::write(dir.join("a.txt"), "one\n").unwrap();
        git(dir, &["add", "a.txt"]);
        git(dir, &["commit", "-q", "-m", "base"]);
        git(dir, &["checkout", "-q", "-b", "work"]);
        std::fs::write(dir.join("a.txt"), "one\ntwo\n").unwrap();
        git(dir, &["commit", "-q", "-am", "two"]);
        let commit = git(dir, &["rev-parse", "HEAD"]);
        let dest = Destination {
            kind: DestinationKind::Repository,
            address: format!("{}#main", dir.display()),
        };
        let p = RepositoryProvider;
        let diff = p
            .preview(&dest, &json!({"commit": commit}), 1 << 20)
            .unwrap();
        assert!(diff.contains("+two"), "{diff}");
        assert!(p
            .preview(&dest, &json!({"commit": "--output=/tmp/x"}), 1 << 20)
            .is_none());
        assert!(
            p.preview(&dest, &json!({"commit": commit}), 10)
                .unwrap()
                .len()
                <= 10
        );
    }
}
