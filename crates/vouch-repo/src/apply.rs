//! Applying an accepted patch to a real branch (§14): a separate delivery, approval-gated by
//! the host. This only moves the branch, fast-forward only, and reads it back.

use crate::git::{Git, GitError};
use crate::input::full_commit_id;
use std::path::Path;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApplyError {
    /// The request is malformed (not a commit id, not a branch name): nothing was touched.
    #[error("{0}")]
    Invalid(String),
    /// The branch is not where the patch expects it (moved on, or not an ancestor): nothing
    /// was touched; rebase the patch on the branch and offer it again.
    #[error("{0}")]
    NotFastForward(String),
    #[error(transparent)]
    Git(#[from] GitError),
}

/// Move `branch` in `repo` to `commit` if that is a fast-forward. When the branch is checked
/// out in the repository's main work tree, that work tree must be clean and is updated with it
/// (`git merge --ff-only`); otherwise only the ref moves, guarded by its old value. Returns the
/// branch's commit as read back afterwards.
pub fn fast_forward(repo: &Path, branch: &str, commit: &str) -> Result<String, ApplyError> {
    if !full_commit_id(commit) {
        return Err(ApplyError::Invalid(format!(
            "`{commit}` is not a full commit id"
        )));
    }
    let g = Git::new(repo);
    if g.run(&["check-ref-format", "--branch", branch]).is_err() || branch.starts_with('-') {
        return Err(ApplyError::Invalid(format!(
            "`{branch}` is not a branch name"
        )));
    }
    let refname = format!("refs/heads/{branch}");
    let old = g
        .text(&["rev-parse", "--verify", "--end-of-options", &refname])
        .map_err(|_| ApplyError::Invalid(format!("no branch `{branch}` in {}", repo.display())))?;
    if old == commit {
        return Ok(old);
    }
    if g.run(&["merge-base", "--is-ancestor", &old, commit])
        .is_err()
    {
        return Err(ApplyError::NotFastForward(format!(
            "branch {branch} is at {old}, which {commit} does not build on; rebase the patch on the branch"
        )));
    }
    let checked_out = g
        .text(&["symbolic-ref", "--quiet", "HEAD"])
        .is_ok_and(|h| h == refname)
        && g.text(&["rev-parse", "--is-bare-repository"]).as_deref() == Ok("false");
    if checked_out {
        let status = g.text(&["status", "--porcelain", "--untracked-files=no"])?;
        if !status.is_empty() {
            return Err(ApplyError::NotFastForward(format!(
                "branch {branch} is checked out in {} with uncommitted changes; commit or stash them first",
                repo.display()
            )));
        }
        g.run(&["merge", "--ff-only", "--quiet", commit])?;
    } else {
        g.run(&["update-ref", &refname, commit, &old])?;
    }
    Ok(g.text(&["rev-parse", "--verify", &refname])?)
}
