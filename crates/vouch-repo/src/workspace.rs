//! One attempt's isolated git worktree (§14): created at the recorded base under an exclusive
//! lease, worked in only through names resolved beneath its root, then observed by the host.

use crate::evaluate::{evaluate, CheckRun, DiffObs, Evaluation, Facts, Integrity};
use crate::exec::{self, TAIL_BYTES_MAX};
use crate::git::{self, Git, GitError};
use crate::input::{plain_path, PatchInput};
use crate::sandbox::{Egress, Limits, Sandbox};
use crate::trace::{Trace, TraceLog};
use cap_std::ambient_authority;
use cap_std::fs::Dir;
use serde::{Deserialize, Serialize};
use std::io::Read as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// Entries a `list` returns at most.
pub const LIST_ENTRIES_MAX: usize = 1000;
/// A command the agent runs may take this long at most.
pub const COMMAND_TIMEOUT_S_MAX: u64 = 600;
/// The lease and identity files in the worktree's git folder (never in the work tree itself).
const LEASE_FILE: &str = "vouch-lease";
const IDENTITY_FILE: &str = "vouch-identity";

#[derive(Debug, thiserror::Error)]
pub enum RepoError {
    /// The input names something that is not there (a repository, a commit): fix the task.
    #[error("{0}")]
    Input(String),
    /// Someone else holds the place this attempt needs (the worktree path, the branch).
    #[error("{0}")]
    Conflict(String),
    #[error(transparent)]
    Git(#[from] GitError),
    #[error("{0}")]
    Io(String),
}

/// What the host journals about the worktree before the attempt starts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceRecord {
    pub repo: String,
    pub path: String,
    pub base: String,
    pub head: String,
    /// A token unique to this attempt's worktree; the lease carries it too.
    pub identity: String,
    /// Where the host will commit the diff: `vouch/TASK/ATTEMPT`.
    pub branch: String,
}

/// Everything the host saw after the attempt, and its verdict.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Observed {
    pub workspace: WorkspaceRecord,
    pub integrity: Integrity,
    pub diff: DiffObs,
    pub checks: Vec<CheckRun>,
    pub reported_writes: Vec<String>,
    pub trace: Option<TraceLog>,
    pub evaluation: Evaluation,
    /// The host's commit of the diff on `workspace.branch` (none for an empty or unattributed
    /// diff).
    pub commit: Option<String>,
    /// Why the host could not commit a diff it read.
    pub commit_error: Option<String>,
}

pub struct Workspace {
    pub record: WorkspaceRecord,
    pub input: PatchInput,
    root: PathBuf,
    admin: PathBuf,
    /// The repository's git folder (read-only in the sandbox, so `git` works in checks).
    common: PathBuf,
    /// The worktree's `.git` file as created: rewritten, it points git elsewhere.
    dot_git: Vec<u8>,
    dev_ino: (u64, u64),
    trace: Option<Trace>,
    writes: Mutex<Vec<String>>,
    confinement: Confinement,
    /// What the sandbox and the tools refused during the attempt, in order (bounded).
    refusals: Mutex<Vec<String>>,
    /// The attempt's egress proxy, when its profile grants hosts.
    proxy: Option<crate::egress::Proxy>,
}

/// Refusals a workspace keeps at most (the first ones: a loop of refusals says no more).
pub const REFUSALS_MAX: usize = 50;

/// What the runtime profile grants the attempt's commands (§13.6.3): the programs, the
/// worktree folders they may write (empty: all of it), their limits and their way out.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Confinement {
    pub commands: Vec<String>,
    pub writable: Vec<String>,
    /// Hosts (`host` or `host:port`) the egress proxy lets the commands reach; empty: none.
    pub network: Vec<String>,
    /// Keys the commands use by placeholder (`(variable, key)`); the proxy swaps them in.
    pub keys: Vec<(String, crate::egress::Key)>,
    /// The program that relays the sandbox's loopback to the proxy (the `vouch` binary).
    pub relay: Option<PathBuf>,
    pub limits: Limits,
    pub egress: Option<Egress>,
}

/// `[A-Za-z0-9_-]` only (a task id or attempt in a path or a branch name).
fn safe_part(s: &str) -> Result<&str, RepoError> {
    if s.is_empty()
        || s.len() > 128
        || !s
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    {
        return Err(RepoError::Input(format!(
            "`{s}` cannot name a worktree or branch (use letters, digits, _ and -)"
        )));
    }
    Ok(s)
}

fn io(what: &str, e: std::io::Error) -> RepoError {
    RepoError::Io(format!("{what}: {e}"))
}

fn dev_ino(p: &Path) -> Option<(u64, u64)> {
    std::fs::metadata(p).ok().map(|m| (m.dev(), m.ino()))
}

impl std::fmt::Debug for Workspace {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Workspace")
            .field("record", &self.record)
            .field("tracing", &self.trace.is_some())
            .finish()
    }
}

impl Workspace {
    /// Create the attempt's worktree at `worktrees/TASK-ATTEMPT`, detached at the base, and
    /// take its lease. Refuses if the repository, the commit or the branch is not as the input
    /// says, or if the worktree or branch already exists (one writer).
    pub fn create(
        input: &PatchInput,
        worktrees: &Path,
        task: &str,
        attempt: u32,
    ) -> Result<Workspace, RepoError> {
        input
            .validate()
            .map_err(|e| RepoError::Input(e.to_string()))?;
        let task = safe_part(task)?;
        let repo = Path::new(&input.repo)
            .canonicalize()
            .map_err(|e| RepoError::Input(format!("repository {}: {e}", input.repo)))?;
        let g = Git::new(&repo);
        g.text(&["rev-parse", "--git-dir"]).map_err(|e| {
            RepoError::Input(format!("{} is not a git repository: {e}", repo.display()))
        })?;
        let resolved = g.commit_id(&input.base).map_err(|_| {
            RepoError::Input(format!(
                "base {} is not a commit in {}",
                input.base,
                repo.display()
            ))
        })?;
        if resolved != input.base {
            return Err(RepoError::Input(format!(
                "base {} names {resolved}; give the full commit id",
                input.base
            )));
        }
        let branch = format!("vouch/{task}/{attempt}");
        if g.run(&[
            "rev-parse",
            "--verify",
            "--quiet",
            &format!("refs/heads/{branch}"),
        ])
        .is_ok()
        {
            return Err(RepoError::Conflict(format!(
                "branch {branch} already exists in {}; an attempt's branch is made once",
                repo.display()
            )));
        }
        std::fs::create_dir_all(worktrees).map_err(|e| io("create the worktrees folder", e))?;
        let path = worktrees
            .canonicalize()
            .map_err(|e| io("resolve the worktrees folder", e))?
            .join(format!("{task}-{attempt}"));
        if path.exists() {
            return Err(RepoError::Conflict(format!(
                "worktree {} already exists; another writer holds it",
                path.display()
            )));
        }
        let shown = path.to_string_lossy().into_owned();
        g.run(&[
            "worktree",
            "add",
            "--detach",
            "--quiet",
            &shown,
            &input.base,
        ])?;
        let wg = Git::new(&path); // made by the host just now, before any agent ran
        let admin = PathBuf::from(wg.text(&["rev-parse", "--absolute-git-dir"])?);
        let common = PathBuf::from(wg.text(&["rev-parse", "--git-common-dir"])?);
        let common = admin
            .join(common)
            .canonicalize()
            .map_err(|e| io("resolve the git folder", e))?;
        let dot_git =
            std::fs::read(path.join(".git")).map_err(|e| io("read the worktree's .git", e))?;
        let head = wg.text(&["rev-parse", "HEAD"])?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let identity = format!("{task}/{attempt}/{}/{nanos}", std::process::id());
        // The lease: created only if absent, so two hosts cannot both hold it.
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        let mut f = opts
            .open(admin.join(LEASE_FILE))
            .map_err(|e| RepoError::Conflict(format!("the worktree's lease is taken: {e}")))?;
        std::io::Write::write_all(&mut f, identity.as_bytes())
            .map_err(|e| io("write the lease", e))?;
        std::fs::write(admin.join(IDENTITY_FILE), identity.as_bytes())
            .map_err(|e| io("write the worktree identity", e))?;
        let dev_ino = dev_ino(&path).ok_or_else(|| RepoError::Io("stat the worktree".into()))?;
        let trace = if input.trace {
            Some(Trace::start(&path).map_err(RepoError::Io)?)
        } else {
            None
        };
        Ok(Workspace {
            record: WorkspaceRecord {
                repo: repo.to_string_lossy().into_owned(),
                path: shown,
                base: input.base.clone(),
                head,
                identity,
                branch,
            },
            input: input.clone(),
            root: path,
            admin,
            common,
            dot_git,
            dev_ino,
            trace,
            writes: Mutex::new(vec![]),
            confinement: Confinement::default(),
            refusals: Mutex::new(vec![]),
            proxy: None,
        })
    }

    /// Set what the profile grants the attempt's commands (before the run starts). With a
    /// relay program the attempt gets its egress proxy — allowing the profile's hosts, or none
    /// (then every try is a named 403); without one the commands have no network at all.
    pub fn confine(&mut self, mut c: Confinement) {
        self.proxy = None;
        c.egress = None;
        if let Some(relay) = &c.relay {
            let keys = c.keys.iter().map(|(_, k)| k.clone()).collect();
            match crate::egress::Proxy::start(c.network.clone(), keys) {
                Ok(p) => {
                    c.egress = Some(Egress {
                        socket: p.socket.clone(),
                        relay: relay.clone(),
                        env: c
                            .keys
                            .iter()
                            .map(|(var, k)| (var.clone(), k.placeholder.clone()))
                            .collect(),
                        ca: p.ca.clone(),
                    });
                    self.proxy = Some(p);
                }
                Err(e) => self.refused(format!("network: {e}; the commands have none")),
            }
        } else if !c.network.is_empty() {
            self.refused(
                "network: no relay program to reach the egress proxy; the commands have none"
                    .into(),
            );
        }
        self.confinement = c;
    }

    pub fn confinement(&self) -> &Confinement {
        &self.confinement
    }

    /// Note something refused during the attempt (the receipt names it).
    pub fn refused(&self, what: String) {
        let mut r = self.refusals.lock().unwrap_or_else(|p| p.into_inner());
        if r.len() < REFUSALS_MAX {
            r.push(what);
        }
    }

    /// What the egress proxy refused so far, in order (the commands' connections).
    pub fn proxy_refusals(&self) -> Vec<String> {
        self.proxy.iter().flat_map(|p| p.refusals()).collect()
    }

    /// What was refused so far: the tools' and the sandbox's, then the egress proxy's.
    pub fn refusals(&self) -> Vec<String> {
        let mut r = self
            .refusals
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        r.extend(self.proxy.iter().flat_map(|p| p.refusals()));
        r
    }

    /// The sandbox a command runs in: the worktree (all of it writable for a check, the
    /// profile's folders for the agent), the git folder read-only, the profile's limits and
    /// network.
    pub fn sandbox(&self, for_check: bool) -> Sandbox {
        Sandbox {
            worktree: self.root.clone(),
            writable: if for_check {
                vec![]
            } else {
                self.confinement.writable.clone()
            },
            read_only: vec![self.common.clone()],
            limits: self.confinement.limits,
            egress: self.confinement.egress.clone(),
        }
    }

    pub fn path(&self) -> &Path {
        &self.root
    }

    fn dir(&self) -> Result<Dir, String> {
        Dir::open_ambient_dir(&self.root, ambient_authority())
            .map_err(|e| format!("the worktree cannot be opened: {e}"))
    }

    fn name(rel: &str) -> Result<&str, String> {
        if plain_path(rel) {
            Ok(rel)
        } else {
            Err(format!(
                "path `{rel}` is outside the worktree; give a relative path inside it (not .git)"
            ))
        }
    }

    fn escape_msg(rel: &str, e: std::io::Error) -> String {
        // cap-std has no error type for an escape: it answers `PermissionDenied` with a message
        // it builds itself, while the OS's own `PermissionDenied` always carries its errno. So
        // "denied, and not by the OS" names the escape without reading the message.
        if e.kind() == std::io::ErrorKind::PermissionDenied && e.raw_os_error().is_none() {
            format!("path `{rel}` leads outside the worktree (through a symlink); refused")
        } else {
            format!("{rel}: {e}")
        }
    }

    /// Read at most `bytes_max` bytes of a file beneath the worktree.
    pub fn read(&self, rel: &str, bytes_max: usize) -> Result<Vec<u8>, String> {
        self.read_inner(rel, bytes_max)
            .inspect_err(|e| self.note_escape(e))
    }

    /// An escape is a refusal the receipt names; a missing file is only an error.
    fn note_escape(&self, e: &str) {
        if e.contains("outside the worktree") {
            self.refused(e.to_string());
        }
    }

    fn read_inner(&self, rel: &str, bytes_max: usize) -> Result<Vec<u8>, String> {
        let rel = Self::name(rel)?;
        let f = self
            .dir()?
            .open(rel)
            .map_err(|e| Self::escape_msg(rel, e))?;
        let mut out = vec![];
        f.take(bytes_max as u64)
            .read_to_end(&mut out)
            .map_err(|e| Self::escape_msg(rel, e))?;
        Ok(out)
    }

    /// Write a whole file beneath the worktree (folders created); the write is recorded as
    /// reported, so the evaluator can tell a write that changed nothing.
    pub fn write(&self, rel: &str, bytes: &[u8]) -> Result<(), String> {
        self.write_inner(rel, bytes)
            .inspect_err(|e| self.refused(e.clone()))
    }

    fn write_inner(&self, rel: &str, bytes: &[u8]) -> Result<(), String> {
        let rel = Self::name(rel)?;
        let w = &self.confinement.writable;
        if !w.is_empty() && !w.iter().any(|f| Path::new(rel).starts_with(f)) {
            return Err(format!(
                "path `{rel}` is not in a folder this runtime profile makes writable ({})",
                w.join(", ")
            ));
        }
        let dir = self.dir()?;
        if let Some(parent) = Path::new(rel)
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
        {
            dir.create_dir_all(parent)
                .map_err(|e| Self::escape_msg(rel, e))?;
        }
        dir.write(rel, bytes)
            .map_err(|e| Self::escape_msg(rel, e))?;
        self.writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(rel.to_string());
        Ok(())
    }

    /// Names in a folder beneath the worktree (`""` or `.` for its top), folders with a `/`.
    pub fn list(&self, rel: &str) -> Result<Vec<String>, String> {
        self.list_inner(rel).inspect_err(|e| self.note_escape(e))
    }

    fn list_inner(&self, rel: &str) -> Result<Vec<String>, String> {
        let dir = self.dir()?;
        let rd = if rel.is_empty() || rel == "." {
            dir.entries()
        } else {
            let rel = Self::name(rel)?;
            dir.read_dir(rel)
        }
        .map_err(|e| Self::escape_msg(rel, e))?;
        let mut out = vec![];
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name == ".git" {
                continue;
            }
            let folder = e.file_type().map(|t| t.is_dir()).unwrap_or(false);
            out.push(if folder { format!("{name}/") } else { name });
        }
        out.sort();
        out.truncate(LIST_ENTRIES_MAX);
        Ok(out)
    }

    /// Run a command, confined, in the worktree if the profile allows its program;
    /// `timeout_s` is capped. A refusal (a program not allowed, a limit reached) is noted.
    pub fn run(&self, argv: &[String], timeout_s: u64) -> Result<exec::Ran, String> {
        let Some(program) = argv.first() else {
            return Err("give the command as a list: [program, args…]".into());
        };
        let allowed = &self.confinement.commands;
        if !allowed.iter().any(|a| a == program) {
            let e = format!(
                "`{program}` is not a command this runtime profile allows{}",
                if allowed.is_empty() {
                    " (it allows none)".to_string()
                } else {
                    format!(" (allowed: {})", allowed.join(", "))
                }
            );
            self.refused(e.clone());
            return Err(e);
        }
        let timeout = Duration::from_secs(timeout_s.clamp(1, COMMAND_TIMEOUT_S_MAX));
        let seen = self.proxy.as_ref().map_or(0, |p| p.refusals().len());
        let mut ran = exec::run(
            &self.sandbox(false),
            program,
            &argv[1..],
            timeout,
            TAIL_BYTES_MAX,
        );
        if let Some(r) = &ran.refused {
            self.refused(format!("`{program}`: {r}"));
        }
        // What the proxy refused during this command is part of its answer (and so of the
        // run's journal, where the tool's result is kept).
        let network: Vec<String> = self
            .proxy
            .iter()
            .flat_map(|p| p.refusals().into_iter().skip(seen))
            .collect();
        if !network.is_empty() {
            let mut all: Vec<String> = ran.refused.take().into_iter().collect();
            all.extend(network);
            ran.refused = Some(all.join("; "));
        }
        Ok(ran)
    }

    /// What the worktree says about itself now.
    fn integrity(&self) -> Integrity {
        let read = |f: &str| std::fs::read_to_string(self.admin.join(f)).ok();
        let lease_held = read(LEASE_FILE).as_deref() == Some(self.record.identity.as_str());
        let identity_matches = read(IDENTITY_FILE).as_deref()
            == Some(self.record.identity.as_str())
            && dev_ino(&self.root) == Some(self.dev_ino);
        // The worktree's HEAD as its git folder (the host's, read-only to the sandbox) holds
        // it: the worktree's `.git` is never followed.
        let head_matches = Git::at(&self.admin, None)
            .commit_id("HEAD")
            .is_ok_and(|h| h == self.record.base);
        Integrity {
            lease_held,
            head_matches,
            identity_matches,
        }
    }

    /// After the attempt: stop the trace, check the worktree is still this attempt's, take a
    /// fresh diff against the base, run every declared check, evaluate, and commit the diff on
    /// the attempt's branch when it is attributed and not empty.
    pub fn observe(mut self) -> (Observed, Workspace) {
        let trace = self.trace.take().map(Trace::stop);
        let integrity = self.integrity();
        let base = &self.record.base;
        let snap = crate::snapshot::snapshot_tree(&self.root, &self.common, base)
            .and_then(|tree| git::diff(&self.common, base, &tree).map(|c| (tree, c)));
        let (tree, diff) = match snap {
            Ok((tree, changes)) => (Some(tree), DiffObs::Read { changes }),
            Err(e) => (
                None,
                DiffObs::Unreadable {
                    reason: e.to_string(),
                },
            ),
        };
        let git_rewritten = self.dot_git_now().as_ref() != Some(&self.dot_git);
        // A rewritten `.git` is tampering: a check that runs git would read the agent's own
        // repository, so none runs (the diff, read by the host, is still reported).
        let intact = integrity == Integrity::intact() && tree.is_some() && !git_rewritten;
        // Checks on a worktree the attempt no longer holds would certify someone else's work.
        let checks: Vec<CheckRun> = if intact {
            self.input
                .checks
                .iter()
                .map(|c| {
                    let r = exec::run(
                        &self.sandbox(true),
                        "sh",
                        &["-c".to_string(), c.cmd.clone()],
                        Duration::from_secs(c.timeout_s),
                        TAIL_BYTES_MAX,
                    );
                    if let Some(why) = &r.refused {
                        self.refused(format!("check `{}`: {why}", c.name));
                    }
                    CheckRun {
                        name: c.name.clone(),
                        exit: r.exit,
                        timed_out: r.timed_out,
                        tail: r.tail,
                        error: r.error,
                    }
                })
                .collect()
        } else {
            vec![]
        };
        let reported_writes = self
            .writes
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let evaluation = evaluate(&Facts {
            input: &self.input,
            integrity: integrity.clone(),
            diff: diff.clone(),
            checks: checks.clone(),
            reported_writes: reported_writes.clone(),
            traced: trace.as_ref().map(TraceLog::touched),
            git_rewritten,
        });
        let (mut commit, mut commit_error) = (None, None);
        if let (Some(tree), crate::evaluate::Attribution::Attributed, false) =
            (&tree, evaluation.attribution, evaluation.changed.is_empty())
        {
            match self.commit(tree, &evaluation) {
                Ok(c) => commit = Some(c),
                Err(e) => commit_error = Some(e.to_string()),
            }
        }
        (
            Observed {
                workspace: self.record.clone(),
                integrity,
                diff,
                checks,
                reported_writes,
                trace,
                evaluation,
                commit,
                commit_error,
            },
            self,
        )
    }

    /// The worktree's `.git` now, if it is still a small regular file (a link, a folder, a
    /// FIFO or a large file is a rewrite, and is never followed or read).
    fn dot_git_now(&self) -> Option<Vec<u8>> {
        let p = self.root.join(".git");
        let meta = std::fs::symlink_metadata(&p).ok()?;
        if !meta.is_file() || meta.len() > 4096 {
            return None;
        }
        std::fs::read(p).ok()
    }

    fn commit(&self, tree: &str, e: &Evaluation) -> Result<String, GitError> {
        let msg = format!(
            "vouch: {} ({})\n\nchanged: {}\nverdict: {:?}\n",
            self.record.branch,
            self.record.identity,
            e.changed.join(", "),
            e.verdict
        );
        let g = Git::at(&self.common, None)
            .with_env("GIT_AUTHOR_NAME", "vouch")
            .with_env("GIT_AUTHOR_EMAIL", "vouch@localhost")
            .with_env("GIT_COMMITTER_NAME", "vouch")
            .with_env("GIT_COMMITTER_EMAIL", "vouch@localhost");
        let commit = g.text(&["commit-tree", tree, "-p", &self.record.base, "-m", &msg])?;
        // Create-only: an existing branch of that name is never moved.
        g.run(&[
            "update-ref",
            &format!("refs/heads/{}", self.record.branch),
            &commit,
            "",
        ])?;
        Ok(commit)
    }

    /// Remove the worktree (the branch and its commit stay). Only this attempt's worktree is
    /// removed: one that was replaced or whose lease was taken is left to its holder.
    pub fn remove(self) -> Result<(), RepoError> {
        let held = self.integrity();
        if held.lease_held && held.identity_matches {
            // The host removes the folder itself (never following a link in it) and then its
            // git folder: `git worktree remove` would read the worktree's `.git` first.
            std::fs::remove_dir_all(&self.root).map_err(|e| io("remove the worktree", e))?;
            std::fs::remove_dir_all(&self.admin)
                .map_err(|e| io("remove the worktree's git folder", e))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io;

    #[test]
    fn an_escape_is_caps_own_refusal_not_the_os_denying_access() {
        let caps = io::Error::new(
            io::ErrorKind::PermissionDenied,
            "a path led outside of the filesystem",
        );
        assert!(Workspace::escape_msg("src/link/x", caps).contains("leads outside the worktree"));
        let os = io::Error::from_raw_os_error(13);
        assert!(!Workspace::escape_msg("src/x", os).contains("leads outside"));
    }
}
