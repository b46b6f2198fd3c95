//! The command line: every command, its arguments and their help (clap).

use crate::{artifact, identity, task, token};
use clap::{Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "vouch",
    version,
    about = "A durable host for AI-agent work: what the run promised, what really happened, and a receipt that says so."
)]
pub(crate) struct Cli {
    /// The vouch home (default: $VOUCH_HOME, else ./.vouch).
    #[arg(long, global = true)]
    pub home: Option<PathBuf>,
    /// Print JSON for programs instead of text for people.
    #[arg(long, global = true)]
    pub json: bool,
    #[command(subcommand)]
    pub cmd: Cmd,
}

#[derive(Subcommand)]
pub(crate) enum Cmd {
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
        /// With `verify`: acknowledge the damage found (and kept) so far, so new runs start
        /// again; keep a copy of the store first. Later, different damage refuses them again.
        #[arg(long)]
        acknowledge: bool,
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
        #[arg(value_parser = id_arg)]
        run: String,
    },
    /// Print a run's receipt.
    Receipt {
        /// The run id (or a unique prefix, or `last` for the newest run).
        #[arg(value_parser = id_arg)]
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
        /// The host's public key the receipt must be signed by (`ed25519:` + 64 hex digits, as
        /// `vouch identity host` prints it), or a file holding it.
        #[arg(long, value_name = "KEY|FILE")]
        host_key: Option<String>,
    },
    /// Finish an interrupted run: a continuation does what is left, never redoing what is done.
    Resume {
        /// The interrupted run's id (or a unique prefix, or `last`).
        #[arg(value_parser = id_arg)]
        run: String,
    },
    /// List open approval and clarify cards.
    Approvals,
    /// Approve the exact payload with this hash; the run resumes and executes it.
    Approve {
        /// The waiting run's id (or a unique prefix), as `vouch approvals` shows it, or `last`:
        /// the newest run waiting for approval of this delivery.
        #[arg(value_parser = id_arg)]
        run: String,
        /// The delivery id of the card, like `d1`.
        #[arg(value_parser = id_arg)]
        delivery: String,
        /// The payload's hash as shown: all 64 hex digits, or a unique prefix of at least 12.
        #[arg(long)]
        hash: String,
    },
    /// Refuse a pending delivery.
    Deny {
        /// The waiting run's id (or a unique prefix), or `last`: the newest run waiting for
        /// approval of this delivery.
        #[arg(value_parser = id_arg)]
        run: String,
        /// The delivery id of the card, like `d1`.
        #[arg(value_parser = id_arg)]
        delivery: String,
    },
    /// Replace a pending payload (a new card with a new hash).
    Edit {
        /// The waiting run's id (or a unique prefix), or `last`: the newest run waiting for
        /// approval of this delivery.
        #[arg(value_parser = id_arg)]
        run: String,
        /// The delivery id of the card, like `d1`.
        #[arg(value_parser = id_arg)]
        delivery: String,
        /// A JSON file with the new payload (an object, like the one `vouch approvals` shows).
        #[arg(long)]
        payload: PathBuf,
    },
    /// Answer a run's question.
    Answer {
        /// The waiting run's id (or a unique prefix), or `last`: the newest run waiting for an
        /// answer.
        #[arg(value_parser = id_arg)]
        run: String,
        /// Your answer, in words.
        text: String,
    },
    /// Cancel a run that has not ended.
    Cancel {
        /// The run's id (or a unique prefix, or `last`).
        #[arg(value_parser = id_arg)]
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
        /// Also answer requests whose `Host` is NAME (as `name` for any port, or `name:port`);
        /// on loopback only localhost, 127.0.0.1 and [::1] with the bound port are answered
        /// otherwise (DNS rebinding). Repeatable; vouch.toml's `[http] allowed_hosts` adds more.
        #[arg(long = "allow-host", value_name = "NAME")]
        allow_host: Vec<String>,
    },
    /// MCP on stdin/stdout for an agent (the board's worker tools and the host's own tools:
    /// declare, the verbs save/send/…, clarify, finish, run_status, receipt); see the README's
    /// MCP section.
    Mcp {
        /// Sign the worker tools' claims and reports with this identity (its key file in the
        /// home; created and registered on first use, as for `vouch worker --name`).
        #[arg(long)]
        name: Option<String>,
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
    /// The real host, board and reconciler under a seeded world with faults, checking the
    /// contract's invariants after every step; prints simulated runs per second.
    Sim {
        /// The seed: the same seed, runs and faults take the same steps.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Simulated runs (interactive runs, schedule slots and tasks).
        #[arg(long, default_value_t = 1000)]
        runs: usize,
        /// Faults to inject: all, none, or some of crash,lost,errors,slow,lease,race,dup,reorder.
        #[arg(long, default_value = "all")]
        faults: String,
        /// PostgreSQL instead of SQLite (each store a fresh schema, dropped afterwards).
        #[arg(long, value_name = "URL")]
        database_url: Option<String>,
        /// Print every step as it is taken (to replay a failure: the same seed, runs and faults).
        #[arg(long)]
        replay: bool,
    },
    /// Measure: `vouch bench runs` (scripted runs with one durable save each).
    Bench {
        #[command(subcommand)]
        cmd: BenchCmd,
    },
    /// Ed25519 identities: `vouch identity new NAME`, `vouch identity list`, `vouch identity host`.
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
    /// Print a completion script for your shell, generated from the same definitions as
    /// `--help` (bash: `vouch completions bash > ~/.local/share/bash-completion/completions/vouch`).
    Completions {
        /// The shell to complete in: bash, zsh, fish (also elvish, powershell).
        shell: clap_complete::Shell,
    },
    /// Print vouch's manual page (roff), generated from the same definitions as `--help`
    /// (`vouch man > vouch.1 && man ./vouch.1`).
    Man {
        /// Write vouch.1 and a page for every command (vouch-run.1, vouch-runs-list.1, …)
        /// into this existing folder instead, e.g. ~/.local/share/man/man1.
        #[arg(long, value_name = "DIR")]
        dir: Option<PathBuf>,
    },
    /// Show vouch working end to end in a fresh temporary home.
    Demo {
        /// Keep the demo home instead of deleting it.
        #[arg(long)]
        keep: bool,
    },
}

/// `--catch-up`: a schedule's catch-up policy in the words the store keeps (a test holds the
/// two lists equal).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum CatchUpArg {
    Skip,
    Latest,
}

impl From<CatchUpArg> for vouch_core::CatchUp {
    fn from(a: CatchUpArg) -> Self {
        match a {
            CatchUpArg::Skip => vouch_core::CatchUp::Skip,
            CatchUpArg::Latest => vouch_core::CatchUp::Latest,
        }
    }
}

/// `--overlap`: a schedule's overlap policy in the words the store keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum OverlapArg {
    Skip,
    Allow,
}

impl From<OverlapArg> for vouch_core::Overlap {
    fn from(a: OverlapArg) -> Self {
        match a {
            OverlapArg::Skip => vouch_core::Overlap::Skip,
            OverlapArg::Allow => vouch_core::Overlap::Allow,
        }
    }
}

#[derive(Subcommand)]
pub(crate) enum ScheduleCmd {
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
        #[arg(long, value_enum, default_value_t = CatchUpArg::Skip)]
        catch_up: CatchUpArg,
        /// A slot due while the previous run is still going: `skip` it, or `allow` both.
        #[arg(long, value_enum, default_value_t = OverlapArg::Skip)]
        overlap: OverlapArg,
        /// How late a slot may still start: `900s`, `15m`, `1h` (default 15m).
        #[arg(long, default_value = "15m")]
        grace: String,
    },
    /// List schedules with their last slot.
    List,
    /// Remove a schedule; its past runs and receipts stay.
    Rm {
        /// The schedule's name, as `vouch schedule list` shows it.
        #[arg(value_parser = id_arg)]
        name: String,
    },
}

#[derive(Subcommand)]
pub(crate) enum ScenarioCmd {
    /// Run each scenario on a fresh embedded store in a temporary directory.
    Run {
        /// Scenario files, or folders of them (`corpus/` holds the project's).
        #[arg(required = true)]
        paths: Vec<PathBuf>,
    },
}

#[derive(Subcommand)]
pub(crate) enum BenchCmd {
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
        /// Worker threads racing for them (in each host, with `--hosts`).
        #[arg(long, default_value_t = 4)]
        workers: usize,
        /// Host processes of this binary sharing the work on one PostgreSQL schema
        /// (`VOUCH_DATABASE_URL`), each with a home of its own; the rate is their sum.
        #[arg(long)]
        hosts: Option<usize>,
        /// Set by `--hosts` in the processes it starts: this one is host K.
        #[arg(long, hide = true)]
        part: Option<usize>,
    },
    /// Runs per second, sequentially and N at once, on a temporary embedded home.
    Runs {
        /// How many runs to measure.
        #[arg(long, default_value_t = 200)]
        runs: usize,
        /// Runs at once in the concurrent measurement (in each host, with `--hosts`).
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
        /// Host processes of this binary sharing the work on one PostgreSQL schema
        /// (`VOUCH_DATABASE_URL`), each with a home of its own; the rate is their sum.
        #[arg(long)]
        hosts: Option<usize>,
        /// Set by `--hosts` in the processes it starts: this one is host K.
        #[arg(long, hide = true)]
        part: Option<usize>,
    },
    /// Only N one-save runs one after another, nothing bound to the clock: the entry point
    /// whose instructions scripts/cpu.sh counts (N and 2N runs, so start-up cancels out).
    Cpu {
        /// How many runs, one after another.
        #[arg(long, default_value_t = 20)]
        runs: usize,
    },
    /// The disk's floor for a one-save run: its synced commit before the save, the file's
    /// write, fsync, rename and folder fsync, its terminal synced commit — no host logic.
    Floor {
        /// How long to loop.
        #[arg(long, default_value_t = 3.0)]
        seconds: f64,
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
        /// Runs resumed at once after the restart.
        #[arg(long, default_value_t = 8)]
        concurrency: usize,
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
pub(crate) enum RunsCmd {
    /// Newest first.
    List(RunsListArgs),
    /// One run: state, outcome, deliveries.
    Show {
        /// The run id (or a unique prefix, or `last` for the newest run).
        #[arg(value_parser = id_arg)]
        run: String,
    },
}

/// `vouch runs list`: which runs, newest first. Every filter given must match.
#[derive(clap::Args)]
pub(crate) struct RunsListArgs {
    /// Show at most this many runs (1 or more).
    #[arg(long, default_value_t = 50, value_parser = parse_limit)]
    pub limit: usize,
    /// Only runs in this state.
    #[arg(long, value_parser = RUN_STATES)]
    pub state: Option<String>,
    /// Only ended runs with this outcome.
    #[arg(long, value_parser = OUTCOMES)]
    pub outcome: Option<String>,
    /// Only runs started this way.
    #[arg(long, value_parser = TRIGGERS)]
    pub trigger: Option<String>,
    /// Only runs of this schedule's slots (its name, as `vouch schedule list` shows it).
    #[arg(long, value_parser = id_arg)]
    pub schedule: Option<String>,
    /// Only the attempts of this board task (its id, as `vouch task list` shows it).
    #[arg(long, value_parser = id_arg)]
    pub task: Option<String>,
    /// Only runs started within this window: a whole number and s, m, h or d, like 24h or 7d.
    #[arg(long)]
    pub since: Option<String>,
    /// Only runs whose title holds this text (ASCII letters match in either case).
    #[arg(long)]
    pub title: Option<String>,
}

/// The words `--state`, `--outcome` and `--trigger` take: the ones the store keeps (a test
/// holds them equal).
pub(crate) const RUN_STATES: [&str; 5] = ["created", "declaring", "running", "suspended", "ended"];
pub(crate) const OUTCOMES: [&str; 5] = ["succeeded", "partial", "failed", "withdrawn", "missed"];
pub(crate) const TRIGGERS: [&str; 4] = ["interactive", "scheduled", "event", "task"];

/// A run id, a delivery id or a name to look up: printable text (no NUL or control
/// character), refused the same before either store backend sees it (exit 2).
pub(crate) fn id_arg(s: &str) -> std::result::Result<String, String> {
    vouch_core::input::check_id(s)
        .map(|()| s.to_string())
        .map_err(|e| {
            format!("the id {e}; give it as `vouch runs list` or `vouch approvals` shows it")
        })
}

/// The most runs one `runs list` shows.
pub(crate) const RUNS_LIMIT_MAX: usize = 1_000_000;

/// `--limit`: a whole number of at least 1 (a limit of 0 would list nothing and look empty).
pub(crate) fn parse_limit(s: &str) -> std::result::Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("must be at least 1 (it is how many runs to show)".into()),
        // Beyond i64 a store's LIMIT would turn negative: SQLite reads it as "no limit",
        // PostgreSQL refuses it; one answer for both is to refuse it here.
        Ok(n) if n > RUNS_LIMIT_MAX => Err(format!(
            "`{s}` is more than {RUNS_LIMIT_MAX} runs; give a smaller number"
        )),
        Ok(n) => Ok(n),
        Err(_) => Err(format!(
            "`{s}` is not a whole number; give how many runs to show, like 20"
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_runs_limit_beyond_the_bound_is_refused_not_negative_in_sql() {
        assert_eq!(parse_limit("20"), Ok(20));
        assert!(parse_limit("0").is_err());
        assert!(parse_limit("18446744073709551615").is_err());
        assert!(parse_limit(&(RUNS_LIMIT_MAX + 1).to_string()).is_err());
        assert_eq!(id_arg("01J9"), Ok("01J9".into()));
        assert!(id_arg("a\u{0}b").is_err());
    }

    #[test]
    fn run_filters_take_exactly_the_stored_words() {
        for w in RUN_STATES {
            assert_eq!(vouch_core::RunState::parse(w).map(|s| s.as_str()), Some(w));
        }
        for w in OUTCOMES {
            let o: vouch_core::Outcome = serde_json::from_value(serde_json::json!(w)).unwrap();
            assert_eq!(o.as_str(), w);
        }
        for w in TRIGGERS {
            let t: vouch_core::TriggerKind = serde_json::from_value(serde_json::json!(w)).unwrap();
            assert_eq!(t.as_str(), w);
        }
    }

    #[test]
    fn schedule_policy_flags_take_exactly_the_stored_words() {
        let names = |vs: &[Option<clap::builder::PossibleValue>]| -> Vec<String> {
            vs.iter()
                .flatten()
                .map(|v| v.get_name().to_string())
                .collect()
        };
        let flags: Vec<_> = CatchUpArg::value_variants()
            .iter()
            .map(|v| v.to_possible_value())
            .collect();
        assert_eq!(
            names(&flags),
            vouch_core::CatchUp::ALL.map(|c| c.as_str().to_string())
        );
        for v in CatchUpArg::value_variants() {
            let stored = vouch_core::CatchUp::from(*v);
            assert_eq!(
                v.to_possible_value().map(|p| p.get_name().to_string()),
                Some(stored.as_str().into())
            );
        }
        let flags: Vec<_> = OverlapArg::value_variants()
            .iter()
            .map(|v| v.to_possible_value())
            .collect();
        assert_eq!(
            names(&flags),
            vouch_core::Overlap::ALL.map(|o| o.as_str().to_string())
        );
        for v in OverlapArg::value_variants() {
            let stored = vouch_core::Overlap::from(*v);
            assert_eq!(
                v.to_possible_value().map(|p| p.get_name().to_string()),
                Some(stored.as_str().into())
            );
        }
    }
}
