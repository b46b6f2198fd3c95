//! Repository evidence for patch tasks (contract §14).
//!
//! A patch task names a repository, a base commit, what may change (globs), what must change
//! (targets) and the checks to run. The host creates one isolated git worktree per attempt
//! under an exclusive lease ([`Workspace::create`]), the agent works in it only through names
//! resolved beneath its root, and afterwards the host observes it itself
//! ([`Workspace::observe`]): a fresh diff against the recorded base, each check run by the
//! host, and optionally a trace of file events. The verdict is the pure [`evaluate`]: it reads
//! only those observations, never the model's text.
//!
//! This crate drives the `git` command; it knows nothing of runs, stores or the board.

pub mod apply;
pub mod egress;
pub mod egress_tls;
pub mod evaluate;
pub mod exec;
pub mod git;
pub mod input;
pub mod sandbox;
pub mod seccomp;
pub mod snapshot;
pub mod trace;
pub mod workspace;

pub use evaluate::{
    evaluate, receipt_lines, Attribution, Change, CheckRun, DiffObs, Evaluation, Facts, Integrity,
    Verdict,
};
pub use input::{input_schema, output_schema, AllowList, CheckSpec, InputError, PatchInput};
pub use workspace::{Observed, RepoError, Workspace, WorkspaceRecord};
