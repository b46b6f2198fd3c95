//! The board's commands (§13): `vouch task offer|list|show|cancel|sweep`, `vouch worker`,
//! `vouch measures`. They decide nothing: the store's board procedures and the host's task
//! runs do; this module parses, calls, and prints (`--json` for programs).

use crate::{bad, home};
use anyhow::{anyhow, Context as _, Result};
use clap::{Args, Subcommand};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use vouch_core::board::{self as core_board, TaskState};
use vouch_identity::KeyDir;
use vouch_runtime::clock::{Clock, SystemClock};
use vouch_runtime::host::{PatchWork, RuntimeProfile, TaskTypes, TaskWork};
use vouch_runtime::worker::{
    BoardClient, LocalBoard, Signer, WorkerConfig, WorkerError, WorkerEvent, WorkerLoop,
};
use vouch_store::board::{
    rates, BoardStore, Cohort, MeasuresQuery, Offered, SignatureVerifier, TaskFilter, TaskRecord,
    Verified,
};
use vouch_store::{IdentityStore, Store, StoreError};

/// Tasks listed at most.
const LIST_MAX: usize = 1000;
/// Workers run this many attempts at once at most.
const CONCURRENCY_MAX: usize = 64;
/// A result's characters `vouch task thread` shows at most.
const THREAD_RESULT_CHARS_MAX: usize = 200;

#[derive(Subcommand)]
pub enum TaskCmd {
    /// Offer a task on the board → {"id", "state"}.
    Offer(Box<OfferArgs>),
    /// Tasks, oldest first.
    List {
        /// Only tasks in this state (waiting, queued, dispatched, running, completed, failed,
        /// cancelled, expired).
        #[arg(long)]
        state: Option<String>,
        /// Only tasks with this tag.
        #[arg(long)]
        tag: Option<String>,
        /// Only the tasks of this thread (their correlation, or the thread's first task's id).
        #[arg(long)]
        correlation: Option<String>,
    },
    /// Every task of a thread (a correlation id, or its first task's id), in the order they
    /// were offered, with their attempts, results and verdicts.
    Thread {
        /// The correlation id (or the thread's first task's id).
        #[arg(value_parser = crate::args::id_arg)]
        id: String,
    },
    /// One task: its attempts, result and receipts.
    Show {
        /// The task id.
        #[arg(value_parser = crate::args::id_arg)]
        id: String,
    },
    /// Cancel a task that has not ended (a live attempt becomes `cancelled`).
    Cancel {
        /// The task id.
        #[arg(value_parser = crate::args::id_arg)]
        id: String,
    },
    /// End attempts whose clocks ran out, expire passed deadlines, promote waiting tasks.
    Sweep,
    /// Continue a completed task with new instructions: a new task that goes on from the
    /// accepted attempt's conversation → {"id", "state"}.
    Continue {
        /// The completed task.
        #[arg(value_parser = crate::args::id_arg)]
        id: String,
        /// The new instructions.
        #[arg(long)]
        brief: String,
        /// `extend`: the same thread (correlation) goes on; `fork`: a new thread branches from
        /// the parent's tip.
        #[arg(long, default_value = "extend", value_parser = ["extend", "fork"])]
        mode: String,
    },
    /// Offer a `judge` task on a task's accepted output → {"id", "state"}.
    Judge {
        /// The task whose accepted output is judged.
        #[arg(value_parser = crate::args::id_arg)]
        id: String,
        /// The criteria (JSON file: an array of strings).
        #[arg(long)]
        criteria: PathBuf,
    },
    /// Apply a completed patch task's commit to a real branch: a run with one `save` to the
    /// repository, which waits for your approval (`vouch approve RUN apply --hash …`).
    Apply {
        /// The patch task's id.
        #[arg(value_parser = crate::args::id_arg)]
        id: String,
        /// The branch to fast-forward to the task's commit.
        #[arg(long)]
        branch: String,
    },
}

#[derive(Args)]
pub struct OfferArgs {
    /// The task type: `freeform`, `judge`, or a type registered in the home's `types/`.
    #[arg(long = "type")]
    kind: String,
    /// What the task asks for, in words (the worker's prompt).
    #[arg(long)]
    brief: String,
    /// The input (JSON file), validated against the type's input schema.
    #[arg(long)]
    input: Option<PathBuf>,
    /// A tag for filtering and measures (repeatable).
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// Success criteria (JSON file); the producer must self-assess against them.
    #[arg(long)]
    criteria: Option<PathBuf>,
    /// 1–20 (default 1).
    #[arg(long, default_value_t = core_board::DEFAULT_MAX_ATTEMPTS)]
    max_attempts: u32,
    /// Claimable only once this task has an accepted output (repeatable: all of them).
    #[arg(long = "after")]
    after: Vec<String>,
    /// The same key with the same request returns the same task.
    #[arg(long)]
    idempotency_key: Option<String>,
    /// Runtime profiles allowed to claim (default: any).
    #[arg(long = "profile")]
    profiles: Vec<String>,
    /// Expire the task if nobody claimed it within this many seconds.
    #[arg(long)]
    deadline_s: Option<i64>,
    /// How long a claim holds without a heartbeat, in milliseconds.
    #[arg(long, default_value_t = core_board::DEFAULT_LEASE_MS)]
    lease_ms: i64,
    /// How often a worker heartbeats, in milliseconds.
    #[arg(long, default_value_t = core_board::DEFAULT_HEARTBEAT_MS)]
    heartbeat_ms: i64,
    /// Time from claim to the first heartbeat before the attempt times out, in milliseconds.
    #[arg(long, default_value_t = core_board::DEFAULT_DISPATCH_TIMEOUT_MS)]
    dispatch_timeout_ms: i64,
    /// Total time an attempt may run, in milliseconds.
    #[arg(long, default_value_t = core_board::DEFAULT_RUNNING_TIMEOUT_MS)]
    running_timeout_ms: i64,
    /// patch: the repository (its path on the workers' machine).
    #[arg(long)]
    repo: Option<PathBuf>,
    /// patch: the base revision; resolved now to its full commit id.
    #[arg(long)]
    base: Option<String>,
    /// patch: a glob of paths that may change (repeatable; `*` within a folder, `**` across).
    #[arg(long = "allow")]
    allow: Vec<String>,
    /// patch: a path that must change (repeatable).
    #[arg(long = "target")]
    targets: Vec<String>,
    /// patch: a check the host runs after the attempt, NAME=COMMAND (repeatable).
    #[arg(long = "check")]
    checks: Vec<String>,
    /// patch: each check's time limit, in seconds.
    #[arg(long, default_value_t = 600)]
    check_timeout_s: u64,
    /// patch: trace file events in the worktree during the attempt (reports transient writes).
    #[arg(long)]
    trace: bool,
    /// The input as a value (continuations), instead of `--input FILE`.
    #[arg(skip)]
    input_value: Option<Value>,
    /// The criteria as a value (continuations), instead of `--criteria FILE`.
    #[arg(skip)]
    criteria_value: Option<Value>,
    /// Tasks this one refers to (a continuation's parent).
    #[arg(skip)]
    references: Vec<String>,
    /// Pinned context: a UTF-8 text file given to the attempt's model with the task, stored and
    /// pinned by content id (repeatable; at most 16 files, 256 KiB together).
    #[arg(long = "context")]
    context: Vec<PathBuf>,
    /// Pinned context by content id (continuations keep the parent's).
    #[arg(skip)]
    context_ids: Vec<String>,
    /// An input artifact: a FILE (stored first) or the content id of a stored artifact, bound
    /// to the task and pinned; the attempt's model reads it with its `read_input` tool and a
    /// judge of the task sees it (repeatable; at most 32).
    #[arg(long = "input-artifact", value_name = "FILE|CID")]
    input_artifacts: Vec<String>,
    /// The thread of related tasks this one belongs to (default: its own); `vouch task thread
    /// ID` shows a thread.
    #[arg(long)]
    correlation: Option<String>,
}

/// The patch input from the offer's flags (§14); the base is resolved to a full commit id.
fn patch_input(a: &OfferArgs) -> Result<Value> {
    let repo = a
        .repo
        .as_ref()
        .ok_or_else(|| bad("--type patch needs --repo PATH (or --input FILE)"))?;
    let repo = repo
        .canonicalize()
        .map_err(|e| bad(format!("--repo {}: {e}", repo.display())))?;
    let rev = a
        .base
        .as_deref()
        .ok_or_else(|| bad("--type patch needs --base REV (a commit, branch or tag)"))?;
    let base = vouch_repo::git::Git::new(&repo)
        .commit_id(rev)
        .map_err(|e| {
            bad(format!(
                "--base {rev} is not a commit in {}: {e}",
                repo.display()
            ))
        })?;
    let mut checks = vec![];
    for c in &a.checks {
        let (name, cmd) = c
            .split_once('=')
            .ok_or_else(|| bad(format!("--check `{c}`: write it as NAME=COMMAND")))?;
        checks.push(json!({"name": name, "cmd": cmd, "timeout_s": a.check_timeout_s}));
    }
    Ok(json!({
        "repo": repo.to_string_lossy(), "base": base, "allow": a.allow, "targets": a.targets,
        "checks": checks, "trace": a.trace,
    }))
}

#[derive(Args)]
pub struct WorkerArgs {
    /// The worker's identity name (the claimant on every claim and report).
    #[arg(long)]
    name: Option<String>,
    /// A script of model turns (JSON array) for every attempt; default: the configured model.
    #[arg(long)]
    script: Option<PathBuf>,
    /// Only these task types (comma-separated).
    #[arg(long, value_delimiter = ',')]
    types: Vec<String>,
    /// Only tasks with this tag (repeatable).
    #[arg(long = "tag")]
    tags: Vec<String>,
    /// The runtime profile the worker claims under: `default`, or `profiles/NAME.json` in the
    /// home (read again before every claim; each attempt runs under its claim's snapshot).
    #[arg(long, default_value = "default")]
    profile: String,
    /// Attempts run at once by this worker.
    #[arg(long, default_value_t = 1)]
    concurrency: usize,
    /// Exit once nothing is claimable and no attempt is running.
    #[arg(long)]
    drain: bool,
    /// Wait this long (heartbeating) before running each claimed attempt: for demos and
    /// crash tests that need an attempt in flight.
    #[arg(long, default_value_t = 0)]
    attempt_delay_ms: u64,
    /// Malformed submissions the run may repair before its attempt fails.
    #[arg(long, default_value_t = core_board::DEFAULT_REPAIRS_MAX)]
    repairs: u32,
    /// Where patch attempts' git worktrees are made (default: `worktrees/` in the home).
    #[arg(long)]
    worktrees: Option<PathBuf>,
    /// A program the agent may run in a patch worktree (repeatable; part of the profile's
    /// policy and its fingerprint).
    #[arg(long = "allow-command")]
    allow_commands: Vec<String>,
    /// Work for the host at this URL (`http://host:port` of its `vouch serve --http`) instead
    /// of this home's board: the model runs here, each attempt's run is on that host.
    #[arg(long, requires = "token")]
    server: Option<String>,
    /// The worker token for `--server` (`vouch token new NAME --scope worker --identity
    /// NAME` on that host); the identity's key is this home's (`--name`).
    #[arg(long, env = "VOUCH_WORKER_TOKEN", hide_env_values = true)]
    token: Option<String>,
}

#[derive(Args)]
pub struct MeasuresArgs {
    /// Split the figures by cohort: tag, type, claimant, profile or model (default: all tasks).
    #[arg(long, default_value = "all", value_parser = ["all", "tag", "type", "claimant", "profile", "model"])]
    by: String,
    /// Only tasks queued within this window: `3600s`, `90m`, `24h`, `7d` (default: all).
    #[arg(long)]
    since: Option<String>,
    /// An attempt with at least this many turns is high-friction.
    #[arg(long, default_value_t = 8)]
    friction_turns: i64,
    /// An attempt with at least this many failed tool calls is high-friction.
    #[arg(long, default_value_t = 3)]
    friction_failed_tools: i64,
    /// Only the tasks of this thread (a correlation id, or its first task's id).
    #[arg(long)]
    correlation: Option<String>,
}

/// Human output never carries control or bidi characters from task or model text.
pub fn clean(s: &str) -> String {
    s.chars()
        .flat_map(|c| {
            let bidi = matches!(c, '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}' | '\u{200E}' | '\u{200F}');
            if c.is_control() || bidi {
                c.escape_unicode().collect::<Vec<_>>()
            } else {
                vec![c]
            }
        })
        .collect()
}

/// One store, seen as the run store and as the board.
pub fn open_board(dir: &Path) -> Result<(Arc<dyn Store>, Arc<dyn BoardStore>)> {
    let (s, b, _) = open_all(dir)?;
    Ok((s, b))
}

/// One store seen three ways: runs, the board, identities.
type Stores = (Arc<dyn Store>, Arc<dyn BoardStore>, Arc<dyn IdentityStore>);

/// One store, seen as the run store, the board and the identity store.
pub fn open_all(dir: &Path) -> Result<Stores> {
    if let Some((url, schema)) = home::database_url() {
        if !dir.exists() {
            return Err(bad(format!(
                "no vouch home at {} — run `vouch init` first (or set VOUCH_HOME to your home)",
                dir.display()
            )));
        }
        let s = Arc::new(
            vouch_store_postgres::PostgresStore::open(&url, &schema).map_err(|e| anyhow!("{e}"))?,
        );
        return Ok((s.clone(), s.clone(), s));
    }
    let db = dir.join(home::DB_FILE);
    if !db.exists() {
        return Err(bad(format!(
            "no vouch home at {} — run `vouch init` first (or set VOUCH_HOME to your home)",
            dir.display()
        )));
    }
    let s = Arc::new(vouch_store_sqlite::SqliteStore::open(&db).map_err(|e| anyhow!("{e}"))?);
    Ok((s.clone(), s.clone(), s))
}

/// The host's check of every claim and report (§13.6): the signature must be the claimant's,
/// over the statement, with the public key the store records for that name.
pub struct IdentityVerifier {
    pub store: Arc<dyn IdentityStore>,
}

impl SignatureVerifier for IdentityVerifier {
    fn verify(
        &self,
        identity: &str,
        statement: &str,
        signature: Option<&str>,
    ) -> std::result::Result<(), String> {
        let sig = signature.ok_or_else(|| format!("`{identity}` did not sign it"))?;
        let value: Value =
            serde_json::from_str(statement).map_err(|e| format!("unreadable statement: {e}"))?;
        vouch_identity::verify_by(&*self.store, identity, &value, sig).map_err(|e| e.to_string())
    }
}

fn sign(id: &vouch_identity::Identity, statement: &str) -> Result<String> {
    let value: Value = serde_json::from_str(statement)?;
    id.sign(&value).map_err(|e| anyhow!("sign: {e}"))
}

fn store_err(e: StoreError) -> anyhow::Error {
    match e {
        StoreError::NotFound { .. } | StoreError::Conflict(_) => bad(e.to_string()),
        other => anyhow!("{other}"),
    }
}

fn now_ms() -> i64 {
    SystemClock.now_ms()
}

fn read_json(path: &Path, what: &str) -> Result<Value> {
    let text =
        vouch_runtime::bounded::read_text(path, what, vouch_runtime::bounded::INPUT_FILE_BYTES_MAX)
            .map_err(|e| bad(e.to_string()))?;
    let v = serde_json::from_str(&text)
        .map_err(|e| bad(format!("{what} {} is not JSON: {e}", path.display())))?;
    crate::refuse_nul(&v, what, path)?;
    Ok(v)
}

fn types(dir: &Path) -> Result<TaskTypes> {
    TaskTypes::with_dir(&dir.join("types")).map_err(bad)
}

pub fn task(dir: &Path, cmd: TaskCmd, json: bool) -> Result<i32> {
    if let TaskCmd::Cancel { id } = &cmd {
        return cancel(dir, id, json);
    }
    let (store, board) = open_board(dir)?;
    match cmd {
        TaskCmd::Offer(a) => offer(dir, &*board, *a, json),
        TaskCmd::Thread { id } => show_thread(&*board, &id, json),
        TaskCmd::List {
            state,
            tag,
            correlation,
        } => {
            let state = state
                .map(|s| {
                    TaskState::parse(&s).ok_or_else(|| {
                        bad(format!(
                            "unknown state `{s}`; use one of {}",
                            TaskState::ALL
                                .iter()
                                .map(|s| s.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        ))
                    })
                })
                .transpose()?;
            let tasks = board
                .tasks(&TaskFilter {
                    state,
                    tag,
                    limit: LIST_MAX,
                    correlation,
                })
                .map_err(store_err)?;
            if json {
                outln!("{}", serde_json::to_string(&tasks)?);
            } else if tasks.is_empty() {
                outln!("No tasks. Offer one with `vouch task offer --type freeform --brief TEXT`.");
            } else {
                let rows: Vec<Vec<String>> = tasks
                    .iter()
                    .map(|t| {
                        vec![
                            t.id.clone(),
                            t.state.to_string(),
                            clean(&t.kind),
                            format!("{}/{}", t.attempts, t.max_attempts),
                            crate::out::short(&t.spec.brief, 60),
                        ]
                    })
                    .collect();
                let header = ["TASK", "STATE", "TYPE", "ATTEMPTS", "BRIEF"];
                for l in crate::out::table(&header, &rows) {
                    outln!("{l}");
                }
            }
            Ok(0)
        }
        TaskCmd::Show { id } => {
            let t = board
                .task(&id)
                .map_err(store_err)?
                .ok_or_else(|| bad(format!("no task `{id}`; list tasks with `vouch task list`")))?;
            let attempts = board.attempts(&id).map_err(store_err)?;
            let result = match &t.result_id {
                Some(r) => board.result(r).map_err(store_err)?,
                None => None,
            };
            let verdicts = board.verdicts(&id).map_err(store_err)?;
            if json {
                outln!(
                    "{}",
                    json!({"task": t, "attempts": attempts, "result": result, "verdicts": verdicts})
                );
                return Ok(0);
            }
            outln!("Task {} ({}) — {}", t.id, clean(&t.kind), t.state);
            outln!("  brief: {}", clean(&t.spec.brief));
            if !t.tags.is_empty() {
                outln!("  tags: {}", clean(&t.tags.join(", ")));
            }
            // What the task gives its attempts, by content id (§13.1.2, §13.1.3).
            for (label, ids) in [
                ("pinned context", &t.spec.context),
                ("input artifacts", &t.spec.input_artifacts),
            ] {
                if !ids.is_empty() {
                    outln!("  {label}: {}", clean(&ids.join(", ")));
                }
            }
            outln!("  attempts: {} of {} allowed", t.attempts, t.max_attempts);
            for a in &attempts {
                outln!(
                    "  #{} {} by {} (profile {}){}{}",
                    a.n,
                    a.state,
                    clean(&a.claimant),
                    clean(&a.profile),
                    a.end_reason
                        .as_deref()
                        .map(|r| format!(" — {}", clean(r)))
                        .unwrap_or_default(),
                    a.run_id
                        .as_deref()
                        .map(|r| format!(" [run {r}]"))
                        .unwrap_or_default()
                );
                if let Some(receipt) = a.detail.get("receipt").and_then(Value::as_str) {
                    for line in receipt.lines() {
                        outln!("      {}", clean(line));
                    }
                }
            }
            if let (Some(id), Some(r)) = (&t.result_id, &result) {
                outln!("  accepted output {id}:");
                outln!("    {}", clean(&r.to_string()));
            }
            for (judge, v) in &verdicts {
                outln!(
                    "  verdict by {judge}: {} {}",
                    if v.passed { "passed" } else { "did not pass" },
                    clean(&v.scores.to_string())
                );
            }
            Ok(0)
        }
        // Handled above, with a host: it may end the attempt's waiting run.
        TaskCmd::Cancel { id } => cancel(dir, &id, json),
        TaskCmd::Continue { id, brief, mode } => {
            continue_task(dir, &*board, &id, brief, &mode, json)
        }
        TaskCmd::Judge { id, criteria } => {
            let list = read_json(&criteria, "criteria")?;
            let ok = list
                .as_array()
                .is_some_and(|l| !l.is_empty() && l.iter().all(Value::is_string));
            if !ok {
                return Err(bad(format!(
                    "criteria {} must be a non-empty JSON array of strings",
                    criteria.display()
                )));
            }
            let mut a = offer_args("judge", format!("Judge task {id} against the criteria"));
            a.input_value = Some(json!({"target": id, "criteria": list}));
            offer(dir, &*board, a, json)
        }
        TaskCmd::Apply { id, branch } => {
            let t = board
                .task(&id)
                .map_err(store_err)?
                .ok_or_else(|| bad(format!("no task `{id}`; list tasks with `vouch task list`")))?;
            if t.kind != vouch_runtime::host::PATCH_TYPE {
                return Err(bad(format!(
                    "task `{id}` is a {} task, not a patch",
                    t.kind
                )));
            }
            let result = match &t.result_id {
                Some(r) => board.result(r).map_err(store_err)?,
                None => None,
            }
            .ok_or_else(|| {
                bad(format!(
                    "task `{id}` has no accepted patch to apply (it is {})",
                    t.state
                ))
            })?;
            let spec = vouch_adapters::repository::apply_run(&id, &result, &branch).map_err(bad)?;
            let host = crate::open_host(dir, !json)?;
            let (run, end) = host.start(&spec).map_err(crate::host_err)?;
            crate::cmd::runs::finish(&host, &run, &end, json)
        }
        TaskCmd::Sweep => {
            // Fenced across every host on the store: this waits for a sweep running elsewhere,
            // then sweeps what that one left (§13.3.1).
            let swept = vouch_store::board::sweep_fenced(&*store, &*board, now_ms(), true)
                .map_err(store_err)?;
            let Some(r) = swept else {
                if json {
                    outln!("{}", json!({"busy": true}));
                } else {
                    outln!("Another process kept sweeping the board for longer than a lock is waited for; its sweep does this work.");
                }
                return Ok(0);
            };
            let charged = vouch_runtime::cost::charge_uncharged(&*store, &*board, now_ms())
                .map_err(store_err)?;
            // Runs whose attempt ended wait for nothing: ended here with their receipt.
            let host = home::host_on(dir, store, None)?;
            let tended = host.tend_task_runs(&*board).map_err(crate::host_err)?;
            if json {
                let mut v = serde_json::to_value(&r)?;
                v["charged"] = json!(charged);
                v["runs_ended"] = json!(tended.runs_ended);
                v["settled"] = json!(tended.settled);
                outln!("{v}");
            } else {
                outln!(
                    "Swept: {} attempt(s) timed out, {} suspended with their waiting run, {} task(s) expired, {} promoted, {} queued for resumption, {} ended attempt(s) charged with their run's cost, {} run(s) of ended attempts ended, {} suspended attempt(s) settled by their ended run.",
                    r.timed_out.len(),
                    r.suspended.len(),
                    r.expired.len(),
                    r.promoted.len(),
                    r.resumed.len(),
                    charged,
                    tended.runs_ended.len(),
                    tended.settled.len()
                );
            }
            Ok(0)
        }
    }
}

/// `vouch task cancel`: the board's cancel, and the end of a run its attempt left waiting for
/// a person (§13.3, issue 22 #6).
fn cancel(dir: &Path, id: &str, json: bool) -> Result<i32> {
    let (store, board, _) = open_all(dir)?;
    let host = home::host_on(dir, store, None)?;
    let (t, run) = host.cancel_task(&*board, id).map_err(crate::host_err)?;
    if json {
        outln!("{}", json!({"id": t.id, "state": t.state, "run": run}));
    } else if let Some(run) = run {
        outln!(
            "Task {} is cancelled; its run {run}, which waited for you, ended cancelled: `vouch receipt {run}`.",
            t.id
        );
    } else {
        outln!(
            "Task {} is cancelled; a worker on it stops at its run's next turn.",
            t.id
        );
    }
    Ok(0)
}

/// Offer arguments with every default of `vouch task offer`.
fn offer_args(kind: &str, brief: String) -> OfferArgs {
    OfferArgs {
        kind: kind.into(),
        brief,
        input: None,
        tags: vec![],
        criteria: None,
        max_attempts: core_board::DEFAULT_MAX_ATTEMPTS,
        after: vec![],
        idempotency_key: None,
        profiles: vec![],
        deadline_s: None,
        lease_ms: core_board::DEFAULT_LEASE_MS,
        heartbeat_ms: core_board::DEFAULT_HEARTBEAT_MS,
        dispatch_timeout_ms: core_board::DEFAULT_DISPATCH_TIMEOUT_MS,
        running_timeout_ms: core_board::DEFAULT_RUNNING_TIMEOUT_MS,
        input_value: None,
        criteria_value: None,
        references: vec![],
        correlation: None,
        context: vec![],
        context_ids: vec![],
        input_artifacts: vec![],
        repo: None,
        base: None,
        allow: vec![],
        targets: vec![],
        checks: vec![],
        check_timeout_s: 600,
        trace: false,
    }
}

/// `vouch task continue` (§13.5): the parent's accepted attempt's conversation is pinned by
/// content id (and stored as an artifact in the home); the new task carries the parent's
/// type, input, tags, criteria and limits, references the parent, and its run goes on from
/// that conversation on whichever worker claims it.
fn continue_task(
    dir: &Path,
    board: &dyn BoardStore,
    id: &str,
    brief: String,
    mode: &str,
    json: bool,
) -> Result<i32> {
    let (store, _) = open_board(dir)?;
    let host = home::host_on(dir, store, None)?;
    let artifacts = crate::home::open_artifacts(dir)?;
    let req = vouch_runtime::offer::continuation(&host, board, &*artifacts, id, brief, mode)
        .map_err(|e| match e {
            vouch_runtime::offer::ContinueError::NoTask(_) => {
                bad(format!("no task `{id}`; list tasks with `vouch task list`"))
            }
            vouch_runtime::offer::ContinueError::Refused(m) => bad(m),
            vouch_runtime::offer::ContinueError::Field { field, message } => {
                bad(format!("--{field} {message}"))
            }
            vouch_runtime::offer::ContinueError::Host(e) => crate::host_err(e),
            other => anyhow!("{other}"),
        })?;
    let mut a = offer_args(&req.kind, req.brief);
    a.input_value = req.input;
    a.tags = req.tags;
    a.max_attempts = req.max_attempts;
    a.profiles = req.profiles;
    a.lease_ms = req.lease_ms;
    a.heartbeat_ms = req.heartbeat_ms;
    a.dispatch_timeout_ms = req.dispatch_timeout_ms;
    a.running_timeout_ms = req.running_timeout_ms;
    a.criteria_value = req.criteria;
    a.references = req.references;
    a.context_ids = req.context;
    a.input_artifacts = req.input_artifacts;
    a.correlation = req.correlation;
    offer(dir, board, a, json)
}

fn offer(dir: &Path, board: &dyn BoardStore, a: OfferArgs, json: bool) -> Result<i32> {
    let types = types(dir)?;
    let patch_flags = a.repo.is_some()
        || a.base.is_some()
        || !a.allow.is_empty()
        || !a.targets.is_empty()
        || !a.checks.is_empty()
        || a.trace;
    let is_patch = a.kind == vouch_runtime::host::PATCH_TYPE;
    if patch_flags && (!is_patch || a.input.is_some()) {
        return Err(bad(if is_patch {
            "give the patch either as --input FILE or as --repo/--base/--allow/--target/--check, not both"
        } else {
            "--repo, --base, --allow, --target, --check and --trace are for --type patch"
        }));
    }
    let input = match (&a.input_value, &a.input) {
        (Some(v), _) => Some(v.clone()),
        (None, Some(p)) => Some(read_json(p, "input")?),
        (None, None) if is_patch => Some(patch_input(&a)?),
        (None, None) => None,
    };
    if let (true, Some(i)) = (is_patch, &input) {
        // Strict (unknown fields are errors) and checked beyond the schema: a task that could
        // never be accepted is refused now.
        vouch_repo::PatchInput::from_value(i).map_err(|e| bad(e.to_string()))?;
    }
    let req = vouch_runtime::offer::TaskOffer {
        kind: a.kind,
        brief: a.brief,
        input,
        tags: a.tags,
        criteria: match a.criteria_value {
            Some(v) => Some(v),
            None => a
                .criteria
                .as_deref()
                .map(|p| read_json(p, "criteria"))
                .transpose()?,
        },
        max_attempts: a.max_attempts,
        after: a.after,
        profiles: a.profiles,
        deadline_s: a.deadline_s,
        lease_ms: a.lease_ms,
        heartbeat_ms: a.heartbeat_ms,
        dispatch_timeout_ms: a.dispatch_timeout_ms,
        running_timeout_ms: a.running_timeout_ms,
        references: a.references,
        correlation: a.correlation,
        context: stored_context(dir, &a.context, a.context_ids)?,
        input_artifacts: stored_inputs(dir, &a.input_artifacts)?,
    };
    let id = format!("t{}", vouch_runtime::host::new_id(&SystemClock));
    let artifacts = crate::home::open_artifacts(dir)?;
    let offered = vouch_runtime::offer::offer(
        board,
        &types,
        Some(&*artifacts),
        &req,
        a.idempotency_key,
        "person",
        id,
        now_ms(),
    )
    .map_err(|e| match e {
        // The API's field names are the flags' names with dashes.
        vouch_runtime::offer::OfferError::Field { field, message } => {
            let flag = match field {
                "tags" => "--tag".to_string(),
                "profiles" => "--profile".to_string(),
                "input_artifacts" => "--input-artifact".to_string(),
                f => format!("--{}", f.replace('_', "-")),
            };
            bad(format!("{flag} {message}"))
        }
        vouch_runtime::offer::OfferError::Store(e) => store_err(e),
    })?;
    let t = offered.task();
    if json {
        outln!(
            "{}",
            json!({"id": t.id, "state": t.state, "existing": matches!(offered, Offered::Existing(_))})
        );
    } else {
        match offered {
            Offered::Existing(_) => outln!(
                "Task {} already exists for this idempotency key ({}); nothing new was offered.",
                t.id,
                t.state
            ),
            Offered::Created(_) => outln!(
                "Offered task {} ({}). Watch it with `vouch task show {}`.",
                t.id,
                t.state,
                t.id
            ),
        }
    }
    Ok(0)
}

/// `vouch task thread ID` (§13.1): every task of the thread in the order offered, each with
/// its attempts (end and reason), its accepted output and the verdicts on it.
fn show_thread(board: &dyn BoardStore, id: &str, json: bool) -> Result<i32> {
    let thread = vouch_store::board::thread(board, id).map_err(store_err)?;
    if thread.is_empty() {
        return Err(bad(format!(
            "no task has correlation `{}` and none has that id; offer one with `vouch task offer --correlation ID`",
            clean(id)
        )));
    }
    if json {
        outln!("{}", json!({"correlation": id, "tasks": thread}));
        return Ok(0);
    }
    outln!("Thread {} ({} tasks)", clean(id), thread.len());
    for t in &thread {
        outln!(
            "{}  {}  {}  {}",
            t.task.id,
            t.task.state,
            clean(&t.task.kind),
            clean(&t.task.spec.brief)
        );
        for a in &t.attempts {
            let end = a.end_reason.as_deref().map(clean).unwrap_or_default();
            let run = a.run_id.as_deref().unwrap_or("no run");
            outln!(
                "    attempt {}  {}  {}  {} tokens  {}  {end}",
                a.n,
                a.state,
                clean(&a.claimant),
                a.usage.tokens,
                run
            );
        }
        if let Some(r) = &t.result {
            // A result may be a megabyte: the line shows its start (`--json` has it whole).
            let text: String = r
                .to_string()
                .chars()
                .take(THREAD_RESULT_CHARS_MAX)
                .collect();
            outln!("    result  {}", clean(&text));
        }
        for (judge, v) in &t.verdicts {
            let word = if v.passed { "passed" } else { "not passed" };
            outln!(
                "    verdict {word} by {judge}  {}",
                clean(&v.scores.to_string())
            );
        }
    }
    Ok(0)
}

/// `--context FILE`: each file stored in the home's artifact store by content id (the offer
/// checks and pins them, §13.1.2), after the ids a continuation carries over.
fn stored_context(dir: &Path, files: &[PathBuf], mut ids: Vec<String>) -> Result<Vec<String>> {
    let store = crate::home::open_artifacts(dir)?;
    for f in files {
        let max = vouch_runtime::offer::CONTEXT_BYTES_MAX as u64;
        let bytes = vouch_runtime::bounded::read_bytes(f, "--context", max)
            .map_err(|e| bad(e.to_string()))?;
        if std::str::from_utf8(&bytes).is_err() {
            return Err(bad(format!(
                "--context {}: not UTF-8 text; pin text the model can read",
                f.display()
            )));
        }
        ids.push(
            store
                .put(&bytes)
                .map_err(|e| bad(format!("--context {}: {e}", f.display())))?,
        );
    }
    Ok(ids)
}

/// `--input-artifact FILE|CID`: a content id is taken as given (the offer checks it is stored,
/// §13.1.3); anything else names a file, stored first (at most the artifact limit).
fn stored_inputs(dir: &Path, given: &[String]) -> Result<Vec<String>> {
    if given.is_empty() {
        return Ok(vec![]);
    }
    let store = crate::home::open_artifacts(dir)?;
    let mut ids = Vec::with_capacity(given.len());
    for g in given {
        if g.starts_with(vouch_artifacts::CID_PREFIX) {
            ids.push(g.clone());
            continue;
        }
        let path = Path::new(g);
        if !path.is_file() {
            return Err(bad(format!(
                "--input-artifact {g}: neither a content id (sha256:…) nor a readable file"
            )));
        }
        let cid = vouch_artifacts::read_file(path, vouch_artifacts::ARTIFACT_BYTES_MAX_DEFAULT)
            .and_then(|b| store.put(&b))
            .map_err(|e| bad(format!("--input-artifact {g}: {e}")))?;
        ids.push(cid);
    }
    Ok(ids)
}

fn say(json: bool, v: Value, human: String) {
    if json {
        outln!("{v}");
    } else {
        outln!("{human}");
    }
}

/// Patch attempts reach the egress proxy through this binary's `sandbox-relay` (§14.0.6).
fn relayed(p: PatchWork) -> PatchWork {
    match std::env::current_exe() {
        Ok(exe) => p.with_relay(exe),
        Err(_) => p,
    }
}

/// The worker's model: a script file's turns, or the configured model.
fn worker_model(script: Option<&Path>) -> Result<Value> {
    let Some(p) = script else {
        return Ok(json!({"kind": "openai"}));
    };
    let v = read_json(p, "script")?;
    let turns = v.get("script").cloned().unwrap_or(v);
    if !turns.is_array() {
        return Err(bad(format!(
            "script {} must be a JSON array of turns (scenarios.md)",
            p.display()
        )));
    }
    Ok(json!({"kind": "script", "turns": turns}))
}

/// `vouch worker`: the runtime's worker loop (`vouch_runtime::worker`) against this home's
/// board, signing with the worker's identity; this renders what the loop says.
pub fn worker(dir: &Path, a: WorkerArgs, json: bool) -> Result<i32> {
    if a.concurrency == 0 || a.concurrency > CONCURRENCY_MAX {
        return Err(bad(format!(
            "--concurrency must be between 1 and {CONCURRENCY_MAX}"
        )));
    }
    let name = a
        .name
        .clone()
        .unwrap_or_else(|| format!("worker-{}", std::process::id()));
    let model = worker_model(a.script.as_deref())?;
    let (client, state_of): (Arc<dyn BoardClient>, Box<StateOf>) = match (&a.server, &a.token) {
        (Some(url), Some(token)) => {
            let remote = remote_board(dir, &name, url, token)?;
            let states = remote.clone();
            (remote, Box::new(move |id: &str| states.task_state(id)))
        }
        _ => (local_board(dir, &a, &name)?, local_states(dir)?),
    };
    // The runtime profile (§13.6): read again before every claim, so an edit applies to the
    // next claim; each attempt runs under the snapshot its claim recorded. The commands a
    // patch attempt may run (`--allow-command`) are part of that policy and its fingerprint.
    let (profiles_dir, profile, commands) = (
        dir.join("profiles"),
        a.profile.clone(),
        a.allow_commands.clone(),
    );
    let load_profile = move || -> std::result::Result<RuntimeProfile, String> {
        let p = RuntimeProfile::load(&profiles_dir, &profile)?;
        if commands.is_empty() {
            return Ok(p);
        }
        let mut policy = p.policy;
        policy["commands"] = json!(commands);
        RuntimeProfile::from_policy(policy)
    };
    load_profile().map_err(bad)?;
    let config = WorkerConfig {
        name: name.clone(),
        profile: a.profile.clone(),
        types: a.types.clone(),
        tags: a.tags.clone(),
        model,
        repairs: a.repairs,
        concurrency: a.concurrency,
        drain: a.drain,
        attempt_delay_ms: a.attempt_delay_ms,
        beat_while_running: true,
    };
    // Every task this worker claimed, for the counter and the summary it ends with.
    let claimed = std::sync::Mutex::new(Vec::<String>::new());
    let events = Arc::new(move |e: WorkerEvent| {
        let mut claimed = claimed.lock().unwrap_or_else(|p| p.into_inner());
        render(json, &name, &*state_of, &mut claimed, e)
    });
    let lp = Arc::new(WorkerLoop::new(
        client,
        Arc::new(SystemClock),
        config,
        Arc::new(load_profile),
        events,
    ));
    {
        let stop = lp.stop.clone();
        ctrlc::set_handler(move || stop.store(true, Ordering::SeqCst))
            .context("install the SIGTERM/SIGINT handler")?;
    }
    lp.run().map_err(|e| match e {
        WorkerError::Refused(m) => bad(m),
        other => anyhow!("{other}"),
    })?;
    if a.server.is_some() {
        return Ok(0);
    }
    // The attempts this worker saw cancelled ended their runs just before it stopped: they
    // are charged now rather than at some later sweep (§13.7.2).
    let (store, board) = open_board(dir)?;
    if let Err(e) = vouch_runtime::cost::charge_uncharged(&*store, &*board, now_ms()) {
        errln!("charge ended attempts: {e}");
    }
    Ok(0)
}

/// The home's board as the worker loop's client: the store, signed with the worker's own
/// Ed25519 identity (the board refuses any claim or report whose signature is not the
/// claimant's, §13.6), and a host writing through the same store (one store per process).
fn local_board(dir: &Path, a: &WorkerArgs, name: &str) -> Result<Arc<dyn BoardClient>> {
    let types = Arc::new(types(dir)?);
    let (store, board, ids) = open_all(dir)?;
    let identity = vouch_identity::open_or_create(&KeyDir::in_home(dir), &*ids, name, now_ms())
        .map_err(|e| bad(format!("worker identity `{name}`: {e}")))?;
    let board: Arc<dyn BoardStore> = Arc::new(Verified {
        inner: board,
        verifier: Arc::new(IdentityVerifier { store: ids.clone() }),
    });
    let host = home::host_on(dir, store, None)?;
    let worktrees = a.worktrees.clone().unwrap_or_else(|| dir.join("worktrees"));
    let work = Arc::new(
        TaskWork::new(host.work().clone())
            .with_patch(relayed(PatchWork::new(worktrees, a.allow_commands.clone())))
            .with_artifacts(crate::home::open_artifacts(dir)?)
            .with_board(board.clone())
            .with_diary(ids.clone(), name),
    );
    Ok(Arc::new(LocalBoard {
        board,
        host: Arc::new(host.with_work(work.clone())),
        work,
        types,
        signer: Some(Arc::new(IdentitySigner(identity))),
    }))
}

/// The state of a task as the worker's board holds it now (the home's, or the host's).
type StateOf = dyn Fn(&str) -> String + Send + Sync;

fn local_states(dir: &Path) -> Result<Box<StateOf>> {
    let (_, board) = open_board(dir)?;
    Ok(Box::new(move |id: &str| match board.task(id) {
        Ok(Some(t)) => t.state.to_string(),
        _ => "unknown".to_string(),
    }))
}

/// The host at `url` as the worker loop's client (§13.2): claims, heartbeats and every tool
/// call of the model signed with this home's key of identity `name`, sent with the worker
/// token; the model runs here under this home's `[model]`.
fn remote_board(
    dir: &Path,
    name: &str,
    url: &str,
    token: &str,
) -> Result<Arc<vouch_adapters::remote::RemoteBoard>> {
    if !(url.starts_with("http://") || url.starts_with("https://")) {
        return Err(bad(format!(
            "--server `{}` is not an http:// or https:// URL",
            clean(url)
        )));
    }
    let identity = KeyDir::in_home(dir).load(name).map_err(|e| {
        bad(format!(
            "worker identity `{name}`: {e}; make it with `vouch identity new {name}` and register its public key on the host"
        ))
    })?;
    let models = Arc::new(vouch_adapters::models::ConfiguredModels {
        profile: home::config(dir)?.model,
    });
    Ok(Arc::new(vouch_adapters::remote::RemoteBoard::new(
        url,
        token,
        Arc::new(IdentitySigner(identity)),
        models,
        Arc::new(SystemClock),
    )))
}

/// The worker's last line: how many claims it made and where those tasks are now.
fn stopped(name: &str, state_of: &StateOf, claimed: &[String]) -> (Value, String) {
    let by_state = worker_summary(state_of, claimed);
    let said: Vec<String> = by_state.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let noun = if claimed.len() == 1 {
        "claim"
    } else {
        "claims"
    };
    let now = if said.is_empty() {
        String::new()
    } else {
        format!(": the tasks are now {}", said.join(", "))
    };
    (
        json!({"event": "worker_stopped", "worker": name, "claimed": claimed.len(), "tasks_by_state": by_state}),
        format!(
            "Worker {} stopped after {} {noun}{now}.",
            clean(name),
            claimed.len()
        ),
    )
}

/// How many of the tasks a worker claimed are in each state now (a task claimed twice counts
/// once).
fn worker_summary(
    state_of: &StateOf,
    claimed: &[String],
) -> std::collections::BTreeMap<String, usize> {
    let unique: std::collections::BTreeSet<&String> = claimed.iter().collect();
    let mut by_state = std::collections::BTreeMap::new();
    for id in unique {
        *by_state.entry(state_of(id)).or_insert(0) += 1;
    }
    by_state
}

/// Signs with the worker's identity key.
struct IdentitySigner(vouch_identity::Identity);

impl Signer for IdentitySigner {
    fn sign(&self, statement: &str) -> std::result::Result<String, String> {
        sign(&self.0, statement).map_err(|e| e.to_string())
    }
}

/// What the worker loop says, as JSON lines (`--json`) or sentences.
fn render(json: bool, name: &str, state_of: &StateOf, claimed: &mut Vec<String>, e: WorkerEvent) {
    let (v, human) = match e {
        WorkerEvent::Started => (
            json!({"event": "worker_started", "worker": name}),
            format!("Worker {} is looking for tasks.", clean(name)),
        ),
        WorkerEvent::Stopped => stopped(name, state_of, claimed),
        WorkerEvent::Claimed {
            task,
            attempt,
            resumption,
        } => {
            claimed.push(task.clone());
            (
                json!({"event": "claimed", "task": task, "attempt": attempt, "resumption": resumption, "claimed": claimed.len()}),
                format!(
                    "[{}] Claimed task {task} (attempt {attempt}{}).",
                    claimed.len(),
                    if resumption { ", resumed" } else { "" }
                ),
            )
        }
        WorkerEvent::Suspended { task, attempt, run } => (
            json!({"event": "suspended", "task": task, "attempt": attempt, "run": run}),
            format!("Task {task} waits for a person (run {run}); the worker is free."),
        ),
        WorkerEvent::Cancelled { task, run } => {
            let receipt = run
                .as_deref()
                .map(|r| format!(" Its run {r} ended cancelled: `vouch receipt {r}`."))
                .unwrap_or_default();
            (
                json!({"event": "cancelled", "task": task, "run": run}),
                format!("Task {task} was cancelled by its owner; stopped.{receipt}"),
            )
        }
        WorkerEvent::Reported {
            task,
            attempt,
            attempt_state,
            task_state,
            result,
            run,
        } => (
            json!({"event": "reported", "task": task, "attempt": attempt, "attempt_state": attempt_state, "task_state": task_state, "result": result, "run": run}),
            format!("Task {task} attempt {attempt}: {attempt_state} (task {task_state})."),
        ),
        WorkerEvent::Refused {
            task,
            attempt,
            reason,
        } => (
            json!({"event": "refused", "task": task, "attempt": attempt, "reason": reason}),
            format!(
                "Task {task} attempt {attempt}: report refused ({})",
                clean(&reason)
            ),
        ),
        WorkerEvent::Warning(m) => {
            errln!("{m}");
            return;
        }
    };
    say(json, v, human);
}

fn parse_window(s: &str) -> Result<i64> {
    // The server's `since` takes the same windows (vouch_core::input::window_ms).
    vouch_core::input::window_ms(s).ok_or_else(|| {
        bad(format!(
            "--since `{s}`: use a positive whole number and a unit s, m, h or d, e.g. 90m, 24h, 7d"
        ))
    })
}

pub fn measures(dir: &Path, a: MeasuresArgs, json: bool) -> Result<i32> {
    let (_, board) = open_board(dir)?;
    let by = Cohort::parse(&a.by).ok_or_else(|| bad(format!("unknown cohort `{}`", a.by)))?;
    let since_ms = match &a.since {
        Some(s) => now_ms().saturating_sub(parse_window(s)?),
        None => i64::MIN,
    };
    let rows = board
        .measures(&MeasuresQuery {
            by,
            since_ms,
            friction_turns: a.friction_turns,
            friction_failed_tools: a.friction_failed_tools,
            correlation: a.correlation.clone(),
        })
        .map_err(store_err)?;
    let thresholds = json!({"friction_turns": a.friction_turns, "friction_failed_tool_calls": a.friction_failed_tools});
    if json {
        let rows: Vec<Value> = rows
            .iter()
            .map(|r| json!({"cohort": r.cohort, "counts": r, "rates": rates(r)}))
            .collect();
        outln!(
            "{}",
            json!({"by": a.by, "thresholds": thresholds, "cohorts": rows})
        );
        return Ok(0);
    }
    if rows.is_empty() {
        outln!("No tasks in this window yet.");
        return Ok(0);
    }
    let pct = |v: &Value| {
        v.as_f64()
            .map(|f| format!("{:.1}%", f * 100.0))
            .unwrap_or_else(|| "—".into())
    };
    for r in &rows {
        let q = rates(r);
        let noun = if r.tasks == 1 { "task" } else { "tasks" };
        outln!("{} ({} {noun})", clean(&r.cohort), r.tasks);
        outln!(
            "  accepted outputs        {} ({})",
            r.accepted,
            pct(&q["accepted_output_rate"])
        );
        outln!(
            "  first-attempt accepted  {}",
            pct(&q["first_attempt_acceptance"])
        );
        outln!(
            "  terminal failure        {} (cancelled apart: {})",
            pct(&q["terminal_failure"]),
            r.cancelled
        );
        outln!("  retry recovery          {}", pct(&q["retry_recovery"]));
        outln!(
            "  failed tool calls       {} of {}",
            r.failed_tool_calls,
            r.tool_calls
        );
        outln!(
            "  high-friction attempts  {} of {} (≥ {} turns or ≥ {} failed tool calls)",
            r.high_friction_attempts,
            r.attempts,
            a.friction_turns,
            a.friction_failed_tools
        );
        let opt = |v: Option<f64>, unit: &str| {
            v.map(|x| format!("{x:.0}{unit}"))
                .unwrap_or_else(|| "—".into())
        };
        outln!("  median turns/attempt    {}", opt(r.median_turns, ""));
        outln!(
            "  median queued→accepted  {}",
            opt(r.median_queued_to_accepted_ms, " ms")
        );
        outln!(
            "  tokens per accepted     {}",
            q["tokens_per_accepted_output"]
                .as_f64()
                .map(|x| format!("{x:.0}"))
                .unwrap_or_else(|| "—".into())
        );
        outln!(
            "  verdict pass rate       {} of {} judged",
            r.verdicts_passed,
            r.judged
        );
        outln!(
            "  failures by class       model outage {} · tool error {} · malformed output {} · policy refusal {} · worker crash {}",
            r.failed_model_outage,
            r.failed_tool_error,
            r.failed_malformed_output,
            r.failed_policy_refusal,
            r.failed_worker_crash
        );
        // Knowledge leverage (§13.7.3): each kind of read on its own line, per accepted output.
        let per = |n: i64, k: &str| match q[k].as_f64() {
            Some(x) => format!("{n} ({x:.2} per accepted output)"),
            None => format!("{n}"),
        };
        outln!(
            "  reads                   pinned context {} · input artifacts {} · diary {}",
            per(r.context_reads, "context_reads_per_accepted_output"),
            per(r.input_reads, "input_reads_per_accepted_output"),
            per(r.diary_reads, "diary_reads_per_accepted_output")
        );
    }
    Ok(0)
}

/// A person's decision on a run that waited inside a task attempt (§13.3), as the host
/// decided it: the attempt is queued as a resumption for the board's next claimant once no
/// card of the run is open.
pub fn decided_on_board(
    run: &str,
    end: &vouch_runtime::RunEnd,
    task: &TaskRecord,
    json: bool,
) -> Result<i32> {
    let waiting = match end {
        vouch_runtime::RunEnd::Suspended { reason } => reason.clone(),
        _ => String::new(),
    };
    if json {
        outln!(
            "{}",
            json!({"run": run, "task": task.id, "task_state": task.state, "state": "suspended", "reason": waiting})
        );
    } else if task.state == TaskState::Queued {
        outln!(
            "Decided. Task {} is queued again; the next worker to claim it continues run {run}.",
            task.id
        );
    } else {
        outln!("Decided; run {run} still waits: {}", clean(&waiting));
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn human_output_escapes_control_and_bidi_characters() {
        assert_eq!(clean("ok ✓"), "ok ✓");
        assert_eq!(clean("a\u{1b}[31mb"), "a\\u{1b}[31mb");
        assert_eq!(clean("x\u{202E}y\nz"), "x\\u{202e}y\\u{a}z");
    }

    #[test]
    fn signatures_are_checked_against_the_stored_key() {
        let dir = tempfile::tempdir().unwrap();
        let store =
            Arc::new(vouch_store_sqlite::SqliteStore::open(&dir.path().join("v.db")).unwrap());
        let w =
            vouch_identity::open_or_create(&KeyDir::in_home(dir.path()), &*store, "w1", 1).unwrap();
        let other = vouch_identity::Identity::generate("w2").unwrap();
        let v = IdentityVerifier { store };
        let statement = r#"{"claim":{"claimant":"w1"}}"#;
        let good = sign(&w, statement).unwrap();
        assert!(v.verify("w1", statement, Some(&good)).is_ok());
        assert!(v.verify("w1", statement, None).is_err(), "unsigned");
        let forged = sign(&other, statement).unwrap();
        assert!(
            v.verify("w1", statement, Some(&forged)).is_err(),
            "another key"
        );
        assert!(
            v.verify("w1", r#"{"claim":{"claimant":"w2"}}"#, Some(&good))
                .is_err(),
            "another statement"
        );
        assert!(
            v.verify("nobody", statement, Some(&good)).is_err(),
            "unknown identity"
        );
    }

    #[test]
    fn windows_parse_with_units() {
        assert_eq!(parse_window("90m").unwrap(), 90 * 60_000);
        assert_eq!(parse_window("7d").unwrap(), 7 * 86_400_000);
        assert!(parse_window("3 weeks").is_err());
        assert!(parse_window("h").is_err());
        assert!(parse_window("€").is_err());
        assert!(parse_window("-999999999999999d").is_err());
    }
}
