//! The `git` command, driven by the host. Nothing here trusts the agent: every command that
//! concerns an attempt names the host's own git folder (`--git-dir`), so a worktree's `.git`
//! is never read; every command runs with no file-system monitor, no hooks and no untracked
//! cache, whatever a configuration says; the tree of a worktree is built from what the host
//! reads itself ([`crate::snapshot`]); and the host's commit is made with `commit-tree` and a
//! create-only ref update.

use crate::evaluate::Change;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Output of one git command is this large at most.
pub const GIT_OUTPUT_BYTES_MAX: usize = 64 << 20;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GitError {
    /// git could not be started at all: install git.
    #[error("cannot run git: {0}")]
    Missing(String),
    /// git refused: the message is git's own.
    #[error("git {args}: {message}")]
    Failed { args: String, message: String },
}

/// Settings every host git command runs with, over anything a configuration says: nothing
/// git would start on its own (a file-system monitor, a hook) ever runs.
const OVERRIDES: [&str; 5] = [
    "core.fsmonitor=false",
    "core.hooksPath=/dev/null",
    "core.untrackedCache=false",
    "core.sshCommand=false",
    "protocol.allow=never",
];

/// A git command in one folder, or on one git folder the host owns.
#[derive(Debug, Clone)]
pub struct Git {
    pub dir: PathBuf,
    /// Extra environment (a temporary index, the host's author identity).
    pub env: Vec<(String, String)>,
    /// The git folder named explicitly (`--git-dir`): no `.git` is looked for or read.
    git_dir: Option<PathBuf>,
    /// The work tree named explicitly (`--work-tree`), with `git_dir` only.
    work_tree: Option<PathBuf>,
}

impl Git {
    /// Git in `dir`, finding its git folder as git does (the host's own repositories only).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        Git {
            dir: dir.into(),
            env: vec![],
            git_dir: None,
            work_tree: None,
        }
    }

    /// Git on a git folder the host owns, with no work tree (or `work_tree` named): what an
    /// attempt's worktree holds — its `.git` above all — is never consulted for it.
    pub fn at(git_dir: &Path, work_tree: Option<&Path>) -> Self {
        Git {
            dir: work_tree.unwrap_or(git_dir).to_path_buf(),
            env: vec![],
            git_dir: Some(git_dir.to_path_buf()),
            work_tree: work_tree.map(Path::to_path_buf),
        }
    }

    pub fn with_env(mut self, k: &str, v: &str) -> Self {
        self.env.push((k.into(), v.into()));
        self
    }

    /// Run git; stdout on success, git's stderr as the error otherwise.
    pub fn run(&self, args: &[&str]) -> Result<Vec<u8>, GitError> {
        self.run_with(args, None)
    }

    /// Run git with `input` on its stdin (written from another thread, so a large output
    /// cannot block it).
    pub fn run_with(&self, args: &[&str], input: Option<Vec<u8>>) -> Result<Vec<u8>, GitError> {
        let mut cmd = self.command(args);
        cmd.stdin(if input.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
        let mut child = cmd.spawn().map_err(|e| GitError::Missing(e.to_string()))?;
        let writer = match (input, child.stdin.take()) {
            (Some(bytes), Some(mut stdin)) => Some(std::thread::spawn(move || {
                let _ = stdin.write_all(&bytes);
            })),
            _ => None,
        };
        let out = child
            .wait_with_output()
            .map_err(|e| GitError::Missing(e.to_string()))?;
        if let Some(w) = writer {
            let _ = w.join();
        }
        Self::checked(args, out)
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("git");
        match &self.git_dir {
            Some(gd) => {
                cmd.arg("--git-dir").arg(gd);
                if let Some(wt) = &self.work_tree {
                    cmd.arg("--work-tree").arg(wt);
                }
                cmd.current_dir(&self.dir);
            }
            None => {
                cmd.arg("-C").arg(&self.dir);
            }
        }
        for o in OVERRIDES {
            cmd.args(["-c", o]);
        }
        cmd.args(args);
        for k in [
            "GIT_DIR",
            "GIT_WORK_TREE",
            "GIT_INDEX_FILE",
            "GIT_OBJECT_DIRECTORY",
            "GIT_COMMON_DIR",
        ] {
            cmd.env_remove(k);
        }
        // No pager, no prompts, no config from the agent's environment changing output.
        cmd.env("GIT_TERMINAL_PROMPT", "0").env("GIT_PAGER", "cat");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        cmd
    }

    fn checked(args: &[&str], out: std::process::Output) -> Result<Vec<u8>, GitError> {
        if !out.status.success() {
            return Err(GitError::Failed {
                args: args.join(" "),
                message: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        if out.stdout.len() > GIT_OUTPUT_BYTES_MAX {
            return Err(GitError::Failed {
                args: args.join(" "),
                message: format!("output larger than {GIT_OUTPUT_BYTES_MAX} bytes"),
            });
        }
        Ok(out.stdout)
    }

    /// Run git and return its trimmed stdout as text.
    pub fn text(&self, args: &[&str]) -> Result<String, GitError> {
        Ok(String::from_utf8_lossy(&self.run(args)?).trim().to_string())
    }

    /// The full id of the commit `rev` names.
    pub fn commit_id(&self, rev: &str) -> Result<String, GitError> {
        self.text(&[
            "rev-parse",
            "--verify",
            "--end-of-options",
            &format!("{rev}^{{commit}}"),
        ])
    }
}

/// Parse `git diff-tree -r -z --raw --no-renames` output into changes.
pub fn parse_raw_diff(out: &[u8]) -> Result<Vec<Change>, String> {
    let mut changes = vec![];
    let mut parts = out.split(|b| *b == 0).filter(|p| !p.is_empty());
    while let Some(meta) = parts.next() {
        let meta = String::from_utf8_lossy(meta);
        let fields: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
        if fields.len() < 5 {
            return Err(format!("unexpected diff line `{meta}`"));
        }
        let path = parts
            .next()
            .ok_or_else(|| format!("diff line `{meta}` has no path"))?;
        let blob = |s: &str| (!s.bytes().all(|b| b == b'0')).then(|| s.to_string());
        let mode = |s: &str| (!s.bytes().all(|b| b == b'0')).then(|| s.to_string());
        changes.push(Change {
            path: String::from_utf8_lossy(path).into_owned(),
            before: blob(fields[2]),
            after: blob(fields[3]),
            mode_before: mode(fields[0]),
            mode_after: mode(fields[1]),
            link_target: None,
        });
    }
    Ok(changes)
}

/// A symlink's target is this long at most (longer is read as leaving the repository).
pub const LINK_TARGET_BYTES_MAX: usize = 4096;

/// Changed paths between the base commit and a tree, with their blob ids, modes and, for a
/// symlink, its target: read from the host's git folder `git_dir` alone.
pub fn diff(git_dir: &Path, base: &str, tree: &str) -> Result<Vec<Change>, GitError> {
    let g = Git::at(git_dir, None);
    let out = g.run(&["diff-tree", "-r", "-z", "--raw", "--no-renames", base, tree])?;
    let mut changes = parse_raw_diff(&out).map_err(|message| GitError::Failed {
        args: "diff-tree".into(),
        message,
    })?;
    for c in &mut changes {
        if let (Some("120000"), Some(blob)) = (c.mode_after.as_deref(), c.after.as_deref()) {
            let target = g.run(&["cat-file", "blob", blob])?;
            c.link_target = Some(if target.len() > LINK_TARGET_BYTES_MAX {
                "/(a target too long to read)".into()
            } else {
                String::from_utf8_lossy(&target).into_owned()
            });
        }
    }
    Ok(changes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn raw_diff_lines_parse_with_absent_blobs() {
        let z = "0".repeat(40);
        let a = "a".repeat(40);
        let b = "b".repeat(40);
        let out = format!(
            ":100644 100644 {a} {b} M\0src/x y.rs\0:000000 100644 {z} {b} A\0new.rs\0:100644 000000 {a} {z} D\0gone.rs\0"
        );
        let c = parse_raw_diff(out.as_bytes()).unwrap();
        assert_eq!(c.len(), 3);
        assert_eq!(c[0].path, "src/x y.rs");
        assert_eq!(c[1].before, None);
        assert_eq!(c[2].after, None);
        assert!(parse_raw_diff(b":100644\0x\0").is_err());
    }
}
