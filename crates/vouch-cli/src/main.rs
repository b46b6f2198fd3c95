//! `vouch`: the command-line interface. Output is for people by default; `--json` prints
//! one JSON document for programs. Exit codes: 0 success, 1 the work did not succeed or
//! scenarios disagree, 2 bad input (unknown run, bad flags, unreadable files).

#[macro_use]
mod out;
mod artifact;
mod bench;
mod bench_board;
mod demo;
#[cfg(test)]
mod help_tests;
mod home;
mod http;
mod identity;
mod task;
mod token;
mod when;

use anyhow::{anyhow, Result};
use clap::{Parser, Subcommand};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use vouch_runtime::host::{Progress, RunEnd};
use vouch_runtime::{Host, RunSpec};
use vouch_store::{CardState, Store};

#[derive(Parser)]
#[command(
    name = "vouch",
    version,
    about = "A durable host for AI-agent work: what the run promised, what really happened, and a receipt that says so."
)]
struct Cli {
    /// The vouch home (default: $VOUCH_HOME, else ./.vouch).
    #[arg(long, global = true)]
    home: Option<PathBuf>,
    /// Print JSON for programs instead of text for people.
    #[arg(long, global = true)]
    json: bool,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create the home (the embedded store and its folders).
    Init,
    /// List or show runs.
    Runs {
        #[command(subcommand)]
        cmd: RunsCmd,
    },
    /// Show a run's journal, or verify every hash chain (`vouch journal verify`).
    Journal {
        /// A run id (a unique prefix, or `last`), or `verify` to check every chain and the store.
        target: String,
    },
    /// Run an agent on a prompt (scripted model with --script, else the configured provider).
    Run {
        /// What you ask for, in your words; it also titles the run and its receipt.
        prompt: String,
        /// A script of model turns (format: docs/scripts.md): a JSON array, or an object with `script`.
        #[arg(long)]
        script: Option<PathBuf>,
        /// Print each step on stderr as the run goes (without it, only the outcome is printed).
        #[arg(long)]
        watch: bool,
        /// Where you will be when it ends: `watching` (default), `nearby`, or `away`
        /// (you will be told through the desktop's notifications).
        #[arg(long, value_parser = ["watching", "nearby", "away"])]
        presence: Option<String>,
        /// Save it, but don't tell me (quiet never hides failures).
        #[arg(long)]
        quiet: bool,
    },
    /// Watch a run: hold its surface open (presence `watching`) and follow its journal.
    Watch {
        /// The run id (or a unique prefix, or `last` for the newest run).
        run: String,
    },
    /// Print a run's receipt.
    Receipt {
        /// The run id (or a unique prefix, or `last` for the newest run).
        run: String,
        /// Print the receipt as a statement signed by this host (JSON; check it with `vouch verify`).
        #[arg(long)]
        signed: bool,
    },
    /// Check a signed receipt: its signature, and with this home's store its journal.
    Verify {
        /// The signed receipt (a file written from `vouch receipt RUN --signed`).
        file: PathBuf,
        /// Check the signature only, without the store.
        #[arg(long)]
        offline: bool,
    },
    /// Finish an interrupted run: a continuation does what is left, never redoing what is done.
    Resume {
        /// The interrupted run's id (or a unique prefix, or `last`).
        run: String,
    },
    /// List open approval and clarify cards.
    Approvals,
    /// Approve the exact payload with this hash; the run resumes and executes it.
    Approve {
        /// The waiting run's id (or a unique prefix, or `last`), as `vouch approvals` shows it.
        run: String,
        /// The delivery id of the card, like `d1`.
        delivery: String,
        /// The payload's hash as shown: all 64 hex digits, or a unique prefix of at least 12.
        #[arg(long)]
        hash: String,
    },
    /// Refuse a pending delivery.
    Deny {
        /// The waiting run's id (or a unique prefix, or `last`).
        run: String,
        /// The delivery id of the card, like `d1`.
        delivery: String,
    },
    /// Replace a pending payload (a new card with a new hash).
    Edit {
        /// The waiting run's id (or a unique prefix, or `last`).
        run: String,
        /// The delivery id of the card, like `d1`.
        delivery: String,
        /// A JSON file with the new payload (an object, like the one `vouch approvals` shows).
        #[arg(long)]
        payload: PathBuf,
    },
    /// Answer a run's question.
    Answer {
        /// The waiting run's id (or a unique prefix, or `last`).
        run: String,
        /// Your answer, in words.
        text: String,
    },
    /// Cancel a run that has not ended.
    Cancel {
        /// The run's id (or a unique prefix, or `last`).
        run: String,
    },
    /// Every destination kind with its capability level, and how to connect what is missing.
    Doctor,
    /// List idempotency ledger keys and their states.
    Ledger,
    /// Receipts and open cards, newest first.
    Inbox {
        /// Print only the number of things waiting for you.
        #[arg(long)]
        count: bool,
    },
    /// Add, list or remove schedules (cron + time zone + routine).
    Schedule {
        #[command(subcommand)]
        cmd: ScheduleCmd,
    },
    /// The long-running host: scheduler, start-up reconciliation, notification dispatch.
    Serve {
        /// Milliseconds between scheduler ticks.
        #[arg(long, default_value_t = 1000, conflicts_with = "once")]
        tick_ms: u64,
        /// Reconcile, run one scheduler tick, report what it did, and exit.
        #[arg(long)]
        once: bool,
        /// Also serve the HTTP API and the web console (/console/) on this address (e.g.
        /// 127.0.0.1:7070; loopback only unless --allow-remote). TLS is a reverse proxy's job.
        #[arg(long, value_name = "ADDR")]
        http: Option<String>,
        /// Allow --http on an address beyond loopback.
        #[arg(long)]
        allow_remote: bool,
    },
    /// API tokens for `vouch serve --http`: new NAME, list, rm NAME.
    Token {
        #[command(subcommand)]
        cmd: token::TokenCmd,
    },
    /// What the contract prescribes for scenarios (files or folders of *.json).
    Oracle {
        /// Scenario files, or folders of them (`corpus/` holds the project's).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
        /// Print only the coverage line: scenarios, agreeing, disagreeing, GAPs.
        #[arg(long)]
        summary: bool,
    },
    /// Scenarios through the real host, compared with the oracle and with `expect`.
    Scenario {
        #[command(subcommand)]
        cmd: ScenarioCmd,
    },
    /// Measure: `vouch bench runs` (scripted runs with one durable save each).
    Bench {
        #[command(subcommand)]
        cmd: BenchCmd,
    },
    /// Ed25519 identities: `vouch identity new NAME`, `vouch identity list`.
    Identity {
        #[command(subcommand)]
        cmd: identity::IdentityCmd,
    },
    /// An identity's signed diary: list it, `--verify` every hash and signature, `--add TEXT`.
    Diary {
        /// The identity whose diary to show.
        name: String,
        /// Verify the chain and every signature; name the first bad entry (exit 1).
        #[arg(long, conflicts_with = "add")]
        verify: bool,
        /// Append a signed entry `{"text": TEXT}` (needs the identity's key file here).
        #[arg(long, value_name = "TEXT")]
        add: Option<String>,
    },
    /// Artifacts by content id: `vouch artifact put FILE`, `get CID [-o FILE]`, `list`.
    Artifact {
        #[command(subcommand)]
        cmd: artifact::ArtifactCmd,
    },
    /// The task board: offer, list, show, cancel and sweep tasks.
    Task {
        #[command(subcommand)]
        cmd: task::TaskCmd,
    },
    /// A board worker: claims tasks, runs each as a vouch run, heartbeats and reports.
    Worker(task::WorkerArgs),
    /// The board's measures per cohort, never collapsed into one rate.
    Measures(task::MeasuresArgs),
    /// Show vouch working end to end in a fresh temporary home.
    Demo {
        /// Keep the demo home instead of deleting it.
        #[arg(long)]
        keep: bool,
    },
}

#[derive(Subcommand)]
enum ScheduleCmd {
    /// Add a schedule.
    Add {
        /// A name for the schedule, unique in this home.
        name: String,
        /// When it runs: five cron fields (minute hour day month weekday), like `0 7 * * *`.
        #[arg(long)]
        cron: String,
        /// The time zone the cron fields are read in: an IANA name like `Europe/Berlin`.
        #[arg(long, default_value = "UTC")]
        tz: String,
        /// A routine file (format: docs/scripts.md): {"prompt": …, "script": [...]}, or
        /// "model": {"kind": "openai"} for the configured model.
        #[arg(long)]
        routine: PathBuf,
        /// Slots missed while vouch was not serving: `skip` them (each reported as missed),
        /// or also run the `latest` one late.
        #[arg(long, default_value = "skip", value_parser = ["skip", "latest"])]
        catch_up: String,
        /// A slot due while the previous run is still going: `skip` it, or `allow` both.
        #[arg(long, default_value = "skip", value_parser = ["skip", "allow"])]
        overlap: String,
        /// How late a slot may still start: `900s`, `15m`, `1h` (default 15m).
        #[arg(long, default_value = "15m")]
        grace: String,
    },
    /// List schedules with their last slot.
    List,
    /// Remove a schedule; its past runs and receipts stay.
    Rm {
        /// The schedule's name, as `vouch schedule list` shows it.
        name: String,
    },
}

#[derive(Subcommand)]
enum ScenarioCmd {
    /// Run each scenario on a fresh embedded store in a temporary directory.
    Run {
        /// Scenario files, or folders of them (`corpus/` holds the project's).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
}

#[derive(Subcommand)]
enum BenchCmd {
    /// Durable journal appends per second (1 and N writers) beside the disk's fsync limit.
    Journal {
        /// Length of each of the four measurements, split over the rounds.
        #[arg(long, default_value_t = 6.0)]
        seconds: f64,
        /// Interleaved rounds (background load falls on all measurements alike).
        #[arg(long, default_value_t = 3)]
        rounds: usize,
        /// Concurrent writers in the N-writer measurement.
        #[arg(long, default_value_t = 8)]
        writers: usize,
        /// Folder on the disk to measure (default: the temporary folder).
        #[arg(long)]
        dir: Option<PathBuf>,
    },
    /// The board: offer → claim → run → submit → accepted, W workers racing.
    Board {
        /// How many tasks to offer.
        #[arg(long, default_value_t = 1000)]
        tasks: usize,
        /// Worker threads racing for them.
        #[arg(long, default_value_t = 4)]
        workers: usize,
    },
    /// Runs per second, sequentially and N at once, on a temporary embedded home.
    Runs {
        /// How many runs to measure.
        #[arg(long, default_value_t = 200)]
        runs: usize,
        /// Runs at once in the concurrent measurement.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
    },
    /// Start-up and inbox cost against the number of runs in the store (10, 1,000, 100,000).
    Scale {
        /// Store sizes to measure, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = [10usize, 1_000, 100_000])]
        sizes: Vec<usize>,
    },
    /// Runs interrupted mid-run, then start-up reconciliation and resuming them all.
    Recovery {
        /// How many runs to interrupt.
        #[arg(long, default_value_t = 1000)]
        runs: usize,
    },
    /// Approve → executed and ended, p50/p90, over runs waiting on a card.
    Approval {
        /// How many runs wait on a card.
        #[arg(long, default_value_t = 200)]
        runs: usize,
    },
    /// Host cost per turn in runs of 50, 500 and 5,000 read-only work-tool turns.
    Turns {
        /// Work-tool turns per run, comma-separated.
        #[arg(long, value_delimiter = ',', default_values_t = [50usize, 500, 5_000])]
        sizes: Vec<usize>,
    },
}

#[derive(Subcommand)]
enum RunsCmd {
    /// Newest first.
    List {
        /// Show at most this many runs (1 or more).
        #[arg(long, default_value_t = 50, value_parser = parse_limit)]
        limit: usize,
    },
    /// One run: state, outcome, deliveries.
    Show {
        /// The run id (or a unique prefix, or `last` for the newest run).
        run: String,
    },
}

/// `--limit`: a whole number of at least 1 (a limit of 0 would list nothing and look empty).
fn parse_limit(s: &str) -> std::result::Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1 (it is how many runs to show)".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "`{s}` is not a whole number; give how many runs to show, like 20"
        )),
    }
}

/// An error that is the user's input (exit 2), as opposed to work that did not succeed.
#[derive(Debug)]
struct BadInput(String);
impl std::fmt::Display for BadInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for BadInput {}

pub(crate) fn bad(msg: impl Into<String>) -> anyhow::Error {
    anyhow!(BadInput(msg.into()))
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let code = if e.use_stderr() { 2 } else { 0 };
            // `--json` means JSON for every answer, a refused command line included.
            if code == 2 && std::env::args_os().any(|a| a == "--json") {
                let msg = e.kind().to_string();
                let detail = e.render().to_string();
                outln!(
                    "{}",
                    json!({"error": detail.trim(), "kind": msg, "exit_code": 2})
                );
            } else {
                let _ = e.print();
            }
            std::process::exit(code);
        }
    };
    let json = cli.json;
    match run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            let corrupt = matches!(
                e.downcast_ref::<vouch_store::StoreError>(),
                Some(vouch_store::StoreError::Corrupt(_))
            ) || matches!(
                e.downcast_ref::<vouch_runtime::HostError>(),
                Some(vouch_runtime::HostError::Store(
                    vouch_store::StoreError::Corrupt(_)
                ))
            );
            let e = if corrupt {
                e.context("the store is damaged: `vouch journal verify` names what is damaged")
            } else {
                e
            };
            let read_only = matches!(
                e.downcast_ref::<vouch_store::StoreError>(),
                Some(vouch_store::StoreError::ReadOnly(_))
            );
            let code = if e.downcast_ref::<BadInput>().is_some() || read_only {
                2
            } else {
                1
            };
            if json {
                outln!("{}", json!({"error": format!("{e:#}"), "exit_code": code}));
            } else {
                errln!("error: {e:#}");
            }
            std::process::exit(code);
        }
    }
}

fn progress(enabled: bool) -> Option<Progress> {
    enabled.then(|| Arc::new(|line: &str| errln!("{line}")) as Progress)
}

fn host_err(e: vouch_runtime::HostError) -> anyhow::Error {
    match e {
        vouch_runtime::HostError::Invalid(m) => bad(m),
        vouch_runtime::HostError::Store(vouch_store::StoreError::NotFound { what, id }) => {
            bad(format!(
                "{what} `{id}` not found; check the id with `vouch runs list` or `vouch approvals`"
            ))
        }
        vouch_runtime::HostError::Store(vouch_store::StoreError::Conflict(m)) => bad(m),
        vouch_runtime::HostError::Store(e @ vouch_store::StoreError::ReadOnly(_)) => {
            bad(format!("{e}; use a writable home for this command"))
        }
        other => anyhow!(other),
    }
}

fn open_host(dir: &Path, watch: bool) -> Result<Host> {
    let host = home::host(dir, progress(watch))?;
    if let Some(why) = host.store.read_only() {
        // Reading a read-only home changes nothing there: no presence, no reconciliation.
        errln!("vouch: this home is read-only ({why}); showing what is stored, changing nothing.");
        return Ok(host);
    }
    // The person is using vouch now: `nearby` for the attention table (§11.1).
    home::FilePresence::new(dir).touch_active(host.clock.now_ms());
    // Start-up reconciliation: every run whose owner is gone ends here (§9.1 b).
    let ended = host.boot().map_err(host_err)?;
    for id in ended {
        errln!(
            "vouch: run {id} was interrupted; reconciled at start-up (see `vouch receipt {id}`)"
        );
    }
    Ok(host)
}

fn run(cli: Cli) -> Result<i32> {
    let dir = home::home_dir(cli.home.as_deref());
    let json = cli.json;
    // Options that would do nothing are refused, not silently ignored.
    let homeless = match &cli.cmd {
        Cmd::Demo { .. } => Some("demo"),
        Cmd::Oracle { .. } => Some("oracle"),
        Cmd::Scenario { .. } => Some("scenario"),
        Cmd::Bench { .. } => Some("bench"),
        _ => None,
    };
    if let (Some(name), Some(_)) = (homeless, &cli.home) {
        return Err(bad(format!(
            "`vouch {name}` does not use a home (it works in its own temporary folder); leave out --home"
        )));
    }
    if matches!(cli.cmd, Cmd::Demo { .. }) && json {
        return Err(bad(
            "`vouch demo` is a tour for people and has no JSON form; leave out --json (for programs: `vouch --json scenario run corpus/`)",
        ));
    }
    match cli.cmd {
        Cmd::Init => {
            let created = home::init(&dir)?;
            if json {
                outln!("{}", json!({"home": dir, "created": created}));
            } else if created {
                houtln!("Created a vouch home at {}.\nNext: `vouch demo` to see it work, or `vouch run \"PROMPT\" --script FILE`.", dir.display());
            } else {
                houtln!(
                    "{} is already a vouch home; nothing changed.",
                    dir.display()
                );
            }
            Ok(0)
        }
        Cmd::Runs {
            cmd: RunsCmd::List { limit },
        } => {
            let host = open_host(&dir, false)?;
            let runs = host.store.runs(limit)?;
            if json {
                outln!("{}", serde_json::to_string(&runs)?);
            } else if runs.is_empty() {
                houtln!("No runs yet in {}. Start one with `vouch run \"PROMPT\" --script FILE` or try `vouch demo`.", dir.display());
            } else {
                houtln!(
                    "{:<22} {:<12} {:<10} {:<10} TITLE",
                    "RUN",
                    "TRIGGER",
                    "STATE",
                    "OUTCOME"
                );
                for r in runs {
                    houtln!(
                        "{:<22} {:<12} {:<10} {:<10} {}",
                        r.id,
                        r.trigger.as_str(),
                        r.state.as_str(),
                        r.outcome.map(|o| o.as_str()).unwrap_or("—"),
                        out::short(&r.title, 60)
                    );
                }
            }
            Ok(0)
        }
        Cmd::Runs {
            cmd: RunsCmd::Show { run },
        } => {
            let host = open_host(&dir, false)?;
            let rec = find_run(host.store.as_ref(), &run)?;
            let view = vouch_runtime::view::RunView::from_journal(&host.store.journal(&rec.id)?);
            let cards = host.store.cards_for_run(&rec.id)?;
            let items: Vec<Value> = view
                .manifest
                .iter()
                .flat_map(|m| m.deliveries.iter())
                .map(|d| {
                    let iv = view.items.get(&d.id).cloned().unwrap_or_default();
                    // The open card of this item, with why the person is asked (§7).
                    let approval = cards
                        .iter()
                        .rev()
                        .find(|c| c.state == CardState::Open && c.delivery.as_deref() == Some(d.id.as_str()))
                        .map(|c| json!({"payload_hash": c.payload_hash, "reason": c.reason}));
                    json!({"id": d.id, "verb": d.verb, "destination": d.destination, "posture": iv.posture, "status": view.final_status(&d.id), "approval": approval})
                })
                .collect();
            if json {
                outln!("{}", json!({"run": rec, "deliveries": items}));
            } else {
                houtln!(
                    "Run {} · {} · {}",
                    rec.id,
                    rec.trigger.as_str(),
                    out::line(&rec.title)
                );
                houtln!(
                    "State: {}{}",
                    rec.state.as_str(),
                    rec.outcome
                        .map(|o| format!(" · outcome {}", o.as_str()))
                        .unwrap_or_default()
                );
                if let Some(e) = rec.ended_by {
                    houtln!("Ended by: {}", e.as_str());
                }
                if let Some(p) = &rec.parent {
                    houtln!("Continues: {p}");
                }
                for i in items {
                    houtln!(
                        "  {} {} → {}  posture {}  status {}",
                        i["id"].as_str().unwrap_or(""),
                        i["verb"].as_str().unwrap_or(""),
                        serde_json::from_value::<vouch_core::Destination>(i["destination"].clone())
                            .map(|d| d.to_string())
                            .unwrap_or_default(),
                        i["posture"].as_str().unwrap_or("—"),
                        i["status"].as_str().unwrap_or("")
                    );
                    if let Some(a) = i["approval"].as_object() {
                        houtln!(
                            "     waits for your approval: {}\n     hash {} — `vouch approvals` shows the payload",
                            out::line(a["reason"].as_str().unwrap_or("")),
                            a["payload_hash"].as_str().unwrap_or("")
                        );
                    }
                }
                houtln!(
                    "{} turns, {} events. Receipt: `vouch receipt {}`; journal: `vouch journal {}`",
                    view.turns,
                    host.store.journal(&rec.id)?.len(),
                    rec.id,
                    rec.id
                );
            }
            Ok(0)
        }
        Cmd::Journal { target } if target == "verify" => {
            let store = home::open_store(&dir)?;
            let report = store.verify()?;
            if json {
                outln!("{}", serde_json::to_string(&report)?);
            } else if report.intact() {
                houtln!(
                    "Store and journal intact: {} runs, {} events, every hash chain verifies and every row reads back.",
                    report.runs,
                    report.events
                );
            } else {
                let kept = if home::database_url().is_some() {
                    "a dump of the database".to_string()
                } else {
                    format!("a copy of {}", dir.join(home::DB_FILE).display())
                };
                for d in &report.damage {
                    houtln!("DAMAGED: {d}");
                }
                for b in &report.breaks {
                    houtln!("BROKEN: run {} event #{}: {}", b.run_id, b.seq, b.reason);
                }
                if !report.damage.is_empty() {
                    houtln!("The store itself is damaged ({} problems above). Keep {kept} before doing anything else; then restore it from a backup, or run `vouch init` in a new folder.", report.damage.len());
                }
                if !report.breaks.is_empty() {
                    houtln!("{} of {} runs have a broken chain. The journal was changed outside vouch; keep {kept} before doing anything else.", report.breaks.len(), report.runs);
                }
            }
            Ok(if report.intact() { 0 } else { 1 })
        }
        Cmd::Journal { target } => {
            let store = home::open_store(&dir)?;
            let rec = find_run(store.as_ref(), &target)?;
            let entries = store.journal(&rec.id)?;
            if json {
                outln!("{}", serde_json::to_string(&entries)?);
            } else {
                let t0 = entries.first().map(|e| e.at_ms).unwrap_or(0);
                for e in &entries {
                    houtln!(
                        "#{:<4} +{:>7.3}s  {:<20} {:<6} {}",
                        e.seq,
                        (e.at_ms - t0) as f64 / 1000.0,
                        e.kind.as_str(),
                        e.delivery.as_deref().unwrap_or(""),
                        describe(&e.body)
                    );
                }
            }
            Ok(0)
        }
        Cmd::Run {
            prompt,
            script,
            watch,
            presence,
            quiet,
        } => {
            let host = open_host(&dir, watch)?;
            let model = match &script {
                Some(path) => json!({"kind": "script", "turns": read_script(path)?}),
                None => {
                    // Settings are checked before a run exists: a missing or malformed model
                    // setting is bad input and leaves no run behind.
                    if let Err(e) = vouch_runtime::model::openai::OpenAiConfig::from_env() {
                        return Err(bad(format!("no model is configured: {e}")));
                    }
                    json!({"kind": "openai"})
                }
            };
            let spec = RunSpec {
                trigger: vouch_core::TriggerKind::Interactive,
                title: prompt,
                presence: presence.and_then(|p| serde_json::from_value(json!(p)).ok()),
                quiet,
                model,
                scope: None,
            };
            let (id, end) = host.start(&spec).map_err(host_err)?;
            finish(&host, &id, &end, json)
        }
        Cmd::Watch { run } => watch(&dir, &run, json),
        Cmd::Receipt { run, signed: true } => identity::signed_receipt(&dir, &run, json),
        Cmd::Receipt { run, .. } => {
            let host = open_host(&dir, false)?;
            let rec = find_run(host.store.as_ref(), &run)?;
            let text = match host.store.receipt(&rec.id)? {
                Some(t) => t,
                None => format!(
                    "Run {} has not ended yet ({}); no receipt. Open cards: `vouch approvals`.\n",
                    rec.id,
                    rec.state.as_str()
                ),
            };
            if json {
                outln!(
                    "{}",
                    json!({"run": rec.id, "state": rec.state, "outcome": rec.outcome, "receipt": text})
                );
            } else {
                hout!("{text}");
            }
            Ok(0)
        }
        Cmd::Resume { run } => {
            let host = open_host(&dir, !json)?;
            let rec = find_run(host.store.as_ref(), &run)?;
            let (id, end) = host.resume(&rec.id).map_err(host_err)?;
            finish(&host, &id, &end, json)
        }
        Cmd::Approvals => {
            let host = open_host(&dir, false)?;
            let cards = vouch_runtime::approvals::open_cards(host.store.as_ref())?;
            if json {
                outln!("{}", serde_json::to_string(&cards)?);
            } else if cards.is_empty() {
                houtln!("Nothing is waiting for you.");
            } else {
                for c in cards {
                    match &c.delivery {
                        Some(d) => {
                            let payload = c.payload_text.clone().unwrap_or_default();
                            houtln!("run {} · {} · {}\n  why:     {}\n  payload: {}\n  hash:    {}\n  approve: vouch approve {} {} --hash {}\n  deny:    vouch deny {} {}\n", c.run, d, out::line(&c.summary), out::line(&c.reason), out::line(&payload), c.payload_hash, c.run, d, c.payload_hash, c.run, d);
                        }
                        None => houtln!(
                            "run {} · question: {}\n  answer: vouch answer {} \"…\"\n",
                            c.run,
                            out::line(&c.summary),
                            c.run
                        ),
                    }
                }
            }
            Ok(0)
        }
        Cmd::Approve {
            run,
            delivery,
            hash,
        } => {
            let host = open_host(&dir, !json)?;
            let rec = find_run(host.store.as_ref(), &run)?;
            let end = host.approve(&rec.id, &delivery, &hash).map_err(host_err)?;
            finish(&host, &rec.id, &end, json)
        }
        Cmd::Deny { run, delivery } => {
            let host = open_host(&dir, !json)?;
            let rec = find_run(host.store.as_ref(), &run)?;
            let end = host.deny(&rec.id, &delivery).map_err(host_err)?;
            finish(&host, &rec.id, &end, json)
        }
        Cmd::Edit {
            run,
            delivery,
            payload,
        } => {
            let host = open_host(&dir, false)?;
            let rec = find_run(host.store.as_ref(), &run)?;
            let text = std::fs::read_to_string(&payload).map_err(|e| {
                bad(format!(
                    "cannot read payload file {}: {e}",
                    payload.display()
                ))
            })?;
            let value: Value = serde_json::from_str(&text).map_err(|e| {
                bad(format!(
                    "payload file {} is not JSON: {e}",
                    payload.display()
                ))
            })?;
            let hash = host.edit(&rec.id, &delivery, &value).map_err(host_err)?;
            if json {
                outln!(
                    "{}",
                    json!({"run": rec.id, "delivery": delivery, "payload_hash": hash})
                );
            } else {
                houtln!("New card for {delivery} (the previous one is superseded).\n  hash: {hash}\n  approve: vouch approve {} {delivery} --hash {hash}", rec.id);
            }
            Ok(0)
        }
        Cmd::Answer { run, text } => {
            let host = open_host(&dir, !json)?;
            let rec = find_run(host.store.as_ref(), &run)?;
            let end = host.answer(&rec.id, &text).map_err(host_err)?;
            finish(&host, &rec.id, &end, json)
        }
        Cmd::Cancel { run } => {
            let host = open_host(&dir, false)?;
            let rec = find_run(host.store.as_ref(), &run)?;
            host.cancel(&rec.id).map_err(host_err)?;
            finish(
                &host,
                &rec.id,
                &RunEnd::Ended {
                    outcome: vouch_core::Outcome::Withdrawn,
                },
                json,
            )
        }
        Cmd::Doctor => {
            let cfg = home::config(&dir)?;
            let _ = home::open_store(&dir)?;
            let report = vouch_runtime::doctor::doctor(&cfg, &home::providers(&dir, &cfg));
            if json {
                outln!(
                    "{}",
                    json!({"home": dir, "destinations": report.destinations, "overrides": report.overrides, "automation": report.automation})
                );
            } else {
                houtln!("vouch home {} — destinations:", dir.display());
                for r in &report.destinations {
                    houtln!(
                        "  {:<9} {:<12} {}",
                        r.kind.as_str(),
                        r.level.as_str(),
                        r.connect_step.as_deref().unwrap_or("")
                    );
                }
                for (p, l) in &report.overrides {
                    houtln!("  override  {p} → {}", l.as_str());
                }
            }
            Ok(0)
        }
        Cmd::Ledger => {
            let host = open_host(&dir, false)?;
            let entries = host.store.ledger_list()?;
            if json {
                outln!("{}", serde_json::to_string(&entries)?);
            } else if entries.is_empty() {
                houtln!("The ledger is empty: no irreversible act has been attempted.");
            } else {
                houtln!(
                    "{:<18} {:<10} {:<8} {:<22} DELIVERY",
                    "KEY",
                    "STATE",
                    "TRIES",
                    "RUN"
                );
                for e in entries {
                    houtln!(
                        "{:<18} {:<10} {:<8} {:<22} {}",
                        &e.key[..16.min(e.key.len())],
                        e.state.as_str(),
                        e.attempts,
                        e.run_id,
                        e.delivery
                    );
                }
            }
            Ok(0)
        }
        Cmd::Inbox { count } => {
            let host = open_host(&dir, false)?;
            if count {
                // Computed from openable items now (§11.4), never stored.
                let waiting = vouch_runtime::inbox::badge(host.store.as_ref())?;
                if json {
                    outln!("{}", json!({"waiting": waiting}));
                } else {
                    houtln!("{}", waiting);
                }
                return Ok(0);
            }
            let inbox = vouch_runtime::inbox::inbox(host.store.as_ref())?;
            if json {
                outln!("{}", json!({"cards": inbox.cards, "runs": inbox.runs}));
                return Ok(0);
            }
            if !inbox.cards.is_empty() {
                houtln!(
                    "{} waiting for you — see `vouch approvals`:",
                    inbox.cards.len()
                );
                for c in &inbox.cards {
                    houtln!(
                        "  • run {} {}: {}",
                        c.run_id,
                        c.delivery.as_deref().unwrap_or("question"),
                        out::short(&c.summary, 100)
                    );
                }
                outln!();
            }
            if inbox.cards.is_empty() && inbox.ended.is_empty() {
                houtln!("Your inbox is empty: no receipts and nothing waiting.");
            }
            for e in &inbox.ended {
                let r = &e.run;
                let todo = match &e.todo {
                    vouch_runtime::inbox::Todo::ResumedAs { run } => format!("resumed as {run}"),
                    vouch_runtime::inbox::Todo::NeedsYou { items } => {
                        format!("needs you: {} — `vouch receipt {}`", items.join(", "), r.id)
                    }
                    vouch_runtime::inbox::Todo::Interrupted => {
                        format!("interrupted — `vouch resume {}`", r.id)
                    }
                    vouch_runtime::inbox::Todo::SeeWhatFailed => {
                        format!("see what failed — `vouch receipt {}`", r.id)
                    }
                    vouch_runtime::inbox::Todo::Receipt => format!("`vouch receipt {}`", r.id),
                };
                houtln!(
                    "{:<10} {:<48} {}",
                    r.outcome.map(|o| o.as_str()).unwrap_or(""),
                    out::short(&r.title, 48),
                    todo
                );
            }
            Ok(0)
        }
        Cmd::Demo { keep } => demo::run(keep),
        Cmd::Identity { cmd } => identity::run(&dir, cmd, json),
        Cmd::Artifact { cmd } => artifact::run(&dir, cmd, json),
        Cmd::Verify { file, offline } => identity::verify(&dir, &file, offline, json),
        Cmd::Diary { name, verify, add } => identity::diary(&dir, &name, verify, add, json),
        Cmd::Task { cmd } => task::task(&dir, cmd, json),
        Cmd::Worker(a) => task::worker(&dir, a, json),
        Cmd::Measures(a) => task::measures(&dir, a, json),
        Cmd::Schedule { cmd } => schedule(&dir, cmd, json),
        Cmd::Oracle { paths, summary } => oracle(&paths, summary, json),
        Cmd::Scenario {
            cmd: ScenarioCmd::Run { paths },
        } => scenario_run(&paths, json),
        Cmd::Serve {
            tick_ms,
            once,
            http,
            allow_remote,
        } => match http {
            Some(addr) => {
                let host = Arc::new(open_host(&dir, !json)?);
                http::serve(&dir, host, &addr, allow_remote, tick_ms, json)
            }
            None => serve(&dir, tick_ms, once, json),
        },
        Cmd::Token { cmd } => token::run(&dir, cmd, json),
        Cmd::Bench {
            cmd: BenchCmd::Runs { runs, concurrency },
        } => bench::runs(runs, concurrency, json),
        Cmd::Bench {
            cmd: BenchCmd::Board { tasks, workers },
        } => bench_board::board(tasks, workers, json),
        Cmd::Bench {
            cmd: BenchCmd::Scale { sizes },
        } => bench::scale(&sizes, json),
        Cmd::Bench {
            cmd: BenchCmd::Turns { sizes },
        } => bench::turns(&sizes, json),
        Cmd::Bench {
            cmd: BenchCmd::Recovery { runs },
        } => bench::recovery(runs, json),
        Cmd::Bench {
            cmd: BenchCmd::Approval { runs },
        } => bench::approval(runs, json),
        Cmd::Bench {
            cmd:
                BenchCmd::Journal {
                    seconds,
                    rounds,
                    writers,
                    dir,
                },
        } => bench::journal(seconds, writers, rounds, dir, json),
    }
}

fn finish(host: &Host, id: &str, end: &RunEnd, json: bool) -> Result<i32> {
    let rec = host
        .store
        .run(id)?
        .ok_or_else(|| anyhow!("run {id} vanished"))?;
    let receipt = host.store.receipt(id)?;
    let cards: Vec<_> = host
        .store
        .cards_for_run(id)?
        .into_iter()
        .filter(|c| c.state == CardState::Open)
        .collect();
    if json {
        outln!(
            "{}",
            json!({"run": id, "state": rec.state, "outcome": rec.outcome, "ended_by": rec.ended_by, "receipt": receipt, "open_cards": cards, "why": run_why(host, id)?})
        );
    } else {
        match end {
            RunEnd::Ended { .. } => hout!("\n{}", receipt.unwrap_or_default()),
            RunEnd::Suspended { reason } => {
                houtln!("\nRun {id} is waiting for you ({}).", out::line(reason));
                for c in cards {
                    match c.delivery {
                        Some(d) => houtln!("  {d} waits for your approval: {}\n  approve: vouch approve {id} {d} --hash {}\n  deny:    vouch deny {id} {d}", out::line(&c.reason), c.payload_hash),
                        None => houtln!("  answer:  vouch answer {id} \"…\""),
                    }
                }
            }
        }
    }
    Ok(match rec.outcome {
        Some(vouch_core::Outcome::Succeeded) | None => 0,
        Some(vouch_core::Outcome::Withdrawn) => 0,
        Some(_) => 1,
    })
}

/// Why an ended run ended as it did, from its terminal record: how the loop stopped (if it
/// stopped without the work) and the reason of every delivery that is not verified.
fn run_why(host: &Host, id: &str) -> Result<Value> {
    let body = host
        .store
        .journal(id)?
        .into_iter()
        .rev()
        .find(|e| e.kind == vouch_store::EventKind::Terminal)
        .map(|e| e.body)
        .unwrap_or(Value::Null);
    Ok(
        json!({"loop_end": body.get("loop_end").cloned().unwrap_or(Value::Null), "deliveries": body.get("reasons").cloned().unwrap_or(Value::Null)}),
    )
}

/// Resolve a run id, a unique prefix of one, or `last` (the newest run).
fn find_run(store: &dyn Store, id: &str) -> Result<vouch_store::RunRecord> {
    if let Some(r) = store.run(id)? {
        return Ok(r);
    }
    if id == "last" {
        return store.runs(1)?.into_iter().next().ok_or_else(|| {
            bad("there is no run yet, so no `last` one; start one with `vouch run \"PROMPT\" --script FILE`")
        });
    }
    // Two are enough to tell "unique" from "ambiguous".
    let matches = if id.is_empty() {
        vec![]
    } else {
        store.runs_by_prefix(id, 2)?
    };
    match matches.len() {
        1 => Ok(matches
            .into_iter()
            .next()
            .ok_or_else(|| anyhow!("unreachable"))?),
        0 => Err(bad(format!(
            "no run `{id}` in this home; list runs with `vouch runs list`"
        ))),
        _ => Err(bad(format!(
            "`{id}` matches more than one run; give more of the id"
        ))),
    }
}

fn read_script(path: &Path) -> Result<Value> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| bad(format!("cannot read script {}: {e}", path.display())))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| bad(format!("script {} is not valid JSON: {e}", path.display())))?;
    let turns = match v {
        Value::Array(_) => v,
        Value::Object(ref o) if o.contains_key("script") => o["script"].clone(),
        _ => {
            return Err(bad(format!(
                "script {}: expected a JSON array of turns or an object with `script`",
                path.display()
            )))
        }
    };
    // Check every turn against the scenario format, naming the first bad one.
    if let Some(items) = turns.as_array() {
        for (i, t) in items.iter().enumerate() {
            if let Err(e) = serde_json::from_value::<vouch_scenario::Turn>(t.clone()) {
                return Err(bad(format!("script {}: turn {i} is not a valid turn ({e}); see the script format in docs/scripts.md", path.display())));
            }
        }
    } else {
        return Err(bad(format!(
            "script {}: `script` must be an array of turns",
            path.display()
        )));
    }
    Ok(turns)
}

/// A journal body on one line: JSON escapes C0 controls but not C1 or bidirectional ones.
fn describe(body: &Value) -> String {
    out::short(&body.to_string(), 140)
}

fn parse_duration_ms(s: &str) -> Result<i64> {
    let s = s.trim();
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let n: i64 = num.parse().map_err(|_| {
        bad(format!(
            "duration `{s}`: expected a number with s, m or h, like 15m"
        ))
    })?;
    let mult = match unit {
        "" | "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        other => {
            return Err(bad(format!(
                "duration `{s}`: unknown unit `{other}` (use s, m or h)"
            )))
        }
    };
    Ok(n * mult)
}

fn schedule(dir: &Path, cmd: ScheduleCmd, json: bool) -> Result<i32> {
    let store = home::open_store(dir)?;
    match cmd {
        ScheduleCmd::Add {
            name,
            cron,
            tz,
            routine,
            catch_up,
            overlap,
            grace,
        } => {
            let grace_ms = parse_duration_ms(&grace)?;
            let text = std::fs::read_to_string(&routine)
                .map_err(|e| bad(format!("cannot read routine {}: {e}", routine.display())))?;
            let r: Value = serde_json::from_str(&text)
                .map_err(|e| bad(format!("routine {} is not JSON: {e}", routine.display())))?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0);
            let sched = vouch_runtime::scheduler::new_schedule(
                &name, &cron, &tz, r, &catch_up, &overlap, grace_ms, now,
            )
            .map_err(|e| match e.field {
                "routine" => bad(format!("routine {}: {}", routine.display(), e.message)),
                _ => bad(e.message),
            })?;
            store.put_schedule(&sched).map_err(|e| match e {
                vouch_store::StoreError::Conflict(m) => bad(m),
                other => anyhow!(other),
            })?;
            if json {
                outln!("{}", serde_json::to_string(&sched)?);
            } else {
                houtln!("Schedule `{name}` added ({} {}). It runs while `vouch serve` is running; slots missed while it is not are reported as missed.", sched.cron, sched.tz);
            }
            Ok(0)
        }
        ScheduleCmd::List => {
            let all = store.schedules()?;
            if json {
                outln!("{}", serde_json::to_string(&all)?);
            } else if all.is_empty() {
                houtln!("No schedules. Add one with `vouch schedule add NAME --cron \"0 7 * * *\" --tz Europe/Berlin --routine FILE`.");
            } else {
                for s in all {
                    let last = store
                        .slots(&s.name)?
                        .last()
                        .map(|(t, r)| format!("last slot {} → run {r}", when::slot_time(*t, &s.tz)))
                        .unwrap_or_else(|| "no slot yet".into());
                    houtln!(
                        "{:<16} {:<14} {:<16} catch-up {:<6} overlap {:<5} grace {}s  {last}",
                        s.name,
                        s.cron,
                        s.tz,
                        s.catch_up,
                        s.overlap,
                        s.grace_ms / 1000
                    );
                }
            }
            Ok(0)
        }
        ScheduleCmd::Rm { name } => {
            if !store.remove_schedule(&name)? {
                return Err(bad(format!(
                    "no schedule `{name}`; see `vouch schedule list`"
                )));
            }
            if !json {
                houtln!("Schedule `{name}` removed; its past runs and receipts stay.");
            }
            Ok(0)
        }
    }
}

fn serve(dir: &Path, tick_ms: u64, once: bool, json: bool) -> Result<i32> {
    let host = open_host(dir, !json)?;
    if once {
        errln!(
            "vouch serve --once: home {} — one scheduler tick",
            dir.display()
        );
    } else {
        errln!(
            "vouch serve: home {} — scheduler every {tick_ms} ms (Ctrl-C to stop)",
            dir.display()
        );
    }
    loop {
        let (report, schedules) = scheduler_pass(&host, json)?;
        if once {
            if !json {
                let n = report.started.len() + report.missed.len() + report.late.len();
                if n == 0 && report.taken == 0 {
                    houtln!(
                        "One tick: nothing was due ({} schedules; no slot fell in this tick).",
                        schedules
                    );
                } else {
                    houtln!(
                        "One tick: {} slots started, {} missed, {} running late, {} taken by another host.",
                        report.started.len(),
                        report.missed.len(),
                        report.late.len(),
                        report.taken
                    );
                }
            }
            return Ok(0);
        }
        std::thread::sleep(std::time::Duration::from_millis(tick_ms.max(50)));
        host.boot().map_err(host_err)?;
    }
}

/// One scheduler pass: start due slots, report missed and late ones. Returns what the tick
/// did and how many schedules there are.
pub(crate) fn scheduler_pass(
    host: &Host,
    json: bool,
) -> Result<(vouch_runtime::scheduler::TickReport, usize)> {
    let report = host.tick().map_err(host_err)?;
    // Slots are shown as times in their schedule's zone, never as epoch milliseconds.
    let zones: std::collections::BTreeMap<String, String> = host
        .store
        .schedules()?
        .into_iter()
        .map(|s| (s.name, s.tz))
        .collect();
    let zone = |s: &str| zones.get(s).cloned().unwrap_or_else(|| "UTC".into());
    let at = |s: &str, slot: i64| when::slot_time(slot, &zone(s));
    for (s, slot, run) in &report.started {
        errln!("  {s}: the {} slot ran as {run}", at(s, *slot));
    }
    for (s, slot, run) in &report.missed {
        errln!(
            "  {s}: the {} slot was missed (receipt: `vouch receipt {run}`)",
            at(s, *slot)
        );
    }
    for (s, slot, run) in &report.late {
        errln!("  {s}: the {} slot runs late as {run}", at(s, *slot));
    }
    if json {
        let rows = |v: &[(String, i64, String)]| {
            v.iter()
                .map(|(s, slot, run)| json!({"schedule": s, "slot_ms": slot, "slot": when::slot_rfc3339(*slot, &zone(s)), "run": run}))
                .collect::<Vec<_>>()
        };
        outln!(
            "{}",
            json!({"started": rows(&report.started), "missed": rows(&report.missed), "late": rows(&report.late), "taken_by_another_host": report.taken})
        );
    }
    let schedules = zones.len();
    Ok((report, schedules))
}

fn watch(dir: &Path, run: &str, json: bool) -> Result<i32> {
    let host = open_host(dir, false)?;
    let rec = find_run(host.store.as_ref(), run)?;
    let presence = home::FilePresence::new(dir);
    let mut seen = 0usize;
    let mut told = false;
    if !json {
        errln!(
            "watching run {} — {} (Ctrl-C to stop)",
            rec.id,
            out::line(&rec.title)
        );
    }
    loop {
        let now = host.clock.now_ms();
        presence.hold_watch(&rec.id, now + 5_000);
        let entries = host.store.journal(&rec.id)?;
        for e in entries.iter().skip(seen) {
            if json {
                outln!("{}", serde_json::to_string(e)?);
            } else {
                houtln!(
                    "#{:<4} {:<20} {:<6} {}",
                    e.seq,
                    e.kind.as_str(),
                    e.delivery.as_deref().unwrap_or(""),
                    describe(&e.body)
                );
            }
        }
        seen = entries.len();
        let cur = host
            .store
            .run(&rec.id)?
            .ok_or_else(|| anyhow!("run vanished"))?;
        match cur.state {
            vouch_core::RunState::Ended => {
                presence.release_watch(&rec.id);
                if !json {
                    hout!("\n{}", host.store.receipt(&rec.id)?.unwrap_or_default());
                }
                return Ok(0);
            }
            vouch_core::RunState::Suspended if !json && !told => {
                told = true;
                errln!("the run is waiting for you: `vouch approvals` (still watching)");
            }
            _ => {}
        }
        std::thread::sleep(std::time::Duration::from_millis(1_000));
    }
}

fn load_scenarios(paths: &[PathBuf]) -> Result<Vec<(PathBuf, vouch_scenario::Scenario)>> {
    vouch_scenario::load_paths(paths).map_err(|e| bad(e.to_string()))
}

fn oracle(paths: &[PathBuf], summary: bool, json: bool) -> Result<i32> {
    let all = load_scenarios(paths)?;
    if summary {
        let s = vouch_oracle::summary(&all);
        if json {
            outln!(
                "{}",
                json!({"scenarios": s.scenarios, "agreeing": s.agreeing, "disagreeing": s.disagreeing.len(), "without_expect": s.without_expect, "gaps": s.gaps.iter().map(|(id, q)| json!({"id": id, "question": q})).collect::<Vec<_>>()})
            );
        } else {
            houtln!("{s}");
        }
        return Ok(s.exit_code());
    }
    let mut code = 0;
    for (_, s) in &all {
        let answer = vouch_oracle::evaluate(s);
        let out = answer.output(s);
        if out.expect_ok == Some(false) {
            code = 1;
        }
        if json {
            outln!("{}", out.to_json_line());
        } else {
            hout!("{}", vouch_oracle::render_human(&answer));
            if out.expect_ok == Some(false) {
                for d in out.disagreements.iter().flatten() {
                    houtln!(
                        "  DISAGREES WITH EXPECT {}: expected {} got {}",
                        d.field,
                        d.expected,
                        d.actual
                    );
                }
            }
            outln!();
        }
    }
    Ok(code)
}

fn scenario_run(paths: &[PathBuf], json: bool) -> Result<i32> {
    let all = load_scenarios(paths)?;
    let total = all.len();
    let started = std::time::Instant::now();
    let (mut agreeing, mut failing) = (0usize, vec![]);
    let mut gaps = 0usize;
    for (i, (path, s)) in all.iter().enumerate() {
        let oracle = vouch_oracle::evaluate(s);
        let mut report = match vouch_runner::run_typed(s) {
            Ok(r) => r,
            Err(e) => {
                failing.push(format!("{}: the runner failed: {e}", s.id));
                if !json {
                    errln!(
                        "[{}/{total}] {} ERROR {e} ({})",
                        i + 1,
                        s.id,
                        path.display()
                    );
                }
                continue;
            }
        };
        report.gaps = oracle.report.gaps.clone();
        let mut dis = vouch_scenario::compare_reports(&oracle.report, &report);
        let has_gaps = !oracle.report.gaps.is_empty();
        let expect_ok = s.expect.as_ref().map(|e| {
            // Where the oracle reports a GAP, `expect` holds null for "open": the runner's
            // choice there is not a disagreement.
            let d: Vec<_> = vouch_scenario::compare(&e.to_value(), &report.to_value())
                .into_iter()
                .filter(|x| !(has_gaps && x.expected.is_null()))
                .collect();
            let ok = d.is_empty();
            for x in d {
                dis.push(vouch_scenario::Disagreement {
                    field: format!("expect.{}", x.field),
                    ..x
                });
            }
            ok
        });
        gaps += oracle.report.gaps.len();
        report.agrees = Some(dis.iter().all(|d| d.field.starts_with("expect.")));
        report.expect_ok = expect_ok;
        let ok = dis.is_empty();
        report.disagreements = Some(dis.clone());
        if ok {
            agreeing += 1;
        } else {
            failing.push(format!(
                "{}: {}",
                s.id,
                dis.iter()
                    .map(|d| format!("{} expected {} got {}", d.field, d.expected, d.actual))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        if json {
            outln!("{}", report.to_json_line());
        } else {
            errln!(
                "[{}/{total}] {:<48} {}",
                i + 1,
                s.id,
                if ok {
                    "agrees".to_string()
                } else {
                    format!("DISAGREES ({} fields)", dis.len())
                }
            );
        }
    }
    if !json {
        houtln!(
            "{total} scenarios run through the host in {:.1} s: {agreeing} agree, {} disagree, {gaps} oracle GAPs",
            started.elapsed().as_secs_f64(),
            failing.len()
        );
        for f in &failing {
            houtln!("  {f}");
        }
    }
    Ok(if failing.is_empty() { 0 } else { 1 })
}
