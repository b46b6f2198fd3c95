//! `vouch`: the command-line interface. Output is for people by default; `--json` prints
//! one JSON document for programs. Exit codes: 0 success, 1 the work did not succeed or
//! scenarios disagree, 2 bad input (unknown run, bad flags, unreadable files), 3 the run
//! waits for you (an approval or an answer).

#[macro_use]
mod out;
mod args;
mod artifact;
mod bench;
mod bench_board;
mod bench_hosts;
mod cmd;
mod demo;
#[cfg(test)]
mod help_tests;
mod home;
mod http;
mod identity;
mod sim;
mod task;
mod token;
mod when;

use anyhow::{anyhow, Result};
use args::*;
use clap::Parser;
use serde_json::json;
use std::path::Path;
use std::sync::Arc;
use vouch_runtime::host::Progress;
use vouch_runtime::Host;

/// §17.0: the run stopped to wait for the person (an approval or an answer); not an error,
/// not done — `vouch approvals` shows what it waits for.
pub(crate) const EXIT_WAITING: i32 = 3;

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

/// §17.1: no string in a file the host reads (a script, a routine, a task's input, a payload)
/// holds NUL, on either backend: exit 2 naming the file and the field, before anything is written.
pub(crate) fn refuse_nul(v: &serde_json::Value, what: &str, path: &std::path::Path) -> Result<()> {
    match vouch_core::input::nul_in_json(v) {
        Some((at, e)) => Err(bad(format!("{what} {}: `{at}` {e}", path.display()))),
        None => Ok(()),
    }
}

/// mimalloc: a sixth of a run's instructions went to glibc's malloc and free
/// (docs/performance.md, "CPU per run").
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() {
    // Inside a patch attempt's sandbox: the relay to the host's egress proxy (§14.0.6), not
    // a command a person runs.
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("sandbox-relay") {
        std::process::exit(vouch_repo::egress::relay_main(&args[1..]));
    }
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
            let code = exit_code(&e);
            if json {
                outln!("{}", json!({"error": format!("{e:#}"), "exit_code": code}));
            } else {
                errln!("error: {e:#}");
            }
            std::process::exit(code);
        }
    }
}

/// §17.0: 2 for the user's input (or a write on a read-only home), 1 for everything else.
fn exit_code(e: &anyhow::Error) -> i32 {
    let read_only = matches!(
        e.downcast_ref::<vouch_store::StoreError>(),
        Some(vouch_store::StoreError::ReadOnly(_))
    );
    if e.downcast_ref::<BadInput>().is_some() || read_only {
        2
    } else {
        1
    }
}

pub(crate) fn progress(enabled: bool) -> Option<Progress> {
    enabled.then(|| Arc::new(|line: &str| errln!("{line}")) as Progress)
}

/// Exit 2 for what the user asked wrongly (bad input, an unknown id, a decision the run is
/// not waiting for); exit 1 for what did not succeed — including a run another live process
/// holds, where the same command may succeed later (§17.0).
pub(crate) fn host_err(e: vouch_runtime::HostError) -> anyhow::Error {
    use vouch_runtime::HostError as H;
    use vouch_store::StoreError as S;
    match e {
        H::BadInput(m) | H::NotWaiting(m) | H::WrongHash(m) => bad(m),
        H::NotFound { what, id } | H::Store(S::NotFound { what, id }) => bad(format!(
            "no {what} `{id}`; check the id with `vouch runs list` or `vouch approvals`"
        )),
        H::Store(S::Conflict(m)) => bad(m),
        H::Store(e @ S::ReadOnly(_)) => bad(format!("{e}; use a writable home for this command")),
        other @ (H::OwnedElsewhere(_)
        | H::Store(_)
        | H::Crashed(_)
        | H::SlotTaken(_)
        | H::Model(_)
        | H::Internal(_)) => anyhow!(other),
    }
}

pub(crate) fn open_host(dir: &Path, watch: bool) -> Result<Host> {
    let host = home::host(dir, progress(watch))?;
    if let Some(why) = host.read_only() {
        // Reading a read-only home changes nothing there: no presence, no reconciliation.
        errln!("vouch: this home is read-only ({why}); showing what is stored, changing nothing.");
        return Ok(host);
    }
    // The person is using vouch now: `nearby` for the attention table (§11.1).
    home::FilePresence::new(dir).touch_active(host.now_ms());
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
    // --home on a command that makes its own home would mislead (the work would not be in
    // that home): refused. On one whose output no home changes, ignored with a note, as other
    // tools ignore a global option that does not apply.
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
    let unaffected = match &cli.cmd {
        Cmd::Completions { .. } => Some("completions"),
        Cmd::Man { .. } => Some("man"),
        _ => None,
    };
    if let (Some(name), Some(_)) = (unaffected, &cli.home) {
        eprintln!("note: `vouch {name}` does not use a home; --home is ignored");
    }
    if matches!(cli.cmd, Cmd::Demo { .. }) && json {
        return Err(bad(
            "`vouch demo` is a tour for people and has no JSON form; leave out --json (for programs: `vouch --json scenario run corpus/`)",
        ));
    }
    if let (Cmd::Completions { .. } | Cmd::Man { .. }, true) = (&cli.cmd, json) {
        return Err(bad(
            "`vouch completions` and `vouch man` print a script and a manual page, not JSON; leave out --json",
        ));
    }
    match cli.cmd {
        Cmd::Completions { shell } => completions(shell),
        Cmd::Man { dir } => manual(dir.as_deref()),
        Cmd::Init => cmd::status::init(&dir, json),
        Cmd::Runs {
            cmd: RunsCmd::List(a),
        } => cmd::runs::list(&dir, &a, json),
        Cmd::Runs {
            cmd: RunsCmd::Show { run },
        } => cmd::runs::show(&dir, &run, json),
        Cmd::Journal {
            target,
            acknowledge,
        } if target == "verify" => cmd::runs::journal_verify(&dir, acknowledge, json),
        Cmd::Journal {
            acknowledge: true, ..
        } => Err(bad(
            "`--acknowledge` goes with `vouch journal verify` (it acknowledges the damage verify found)",
        )),
        Cmd::Journal { target, .. } => cmd::runs::journal(&dir, &target, json),
        Cmd::Run {
            prompt,
            script,
            watch,
            presence,
            quiet,
        } => cmd::runs::run(&dir, prompt, script, watch, presence, quiet, json),
        Cmd::Watch { run } => cmd::runs::watch(&dir, &run, json),
        Cmd::Receipt { run, signed: true } => identity::signed_receipt(&dir, &run, json),
        Cmd::Receipt { run, .. } => cmd::runs::receipt(&dir, &run, json),
        Cmd::Resume { run } => cmd::decide::resume(&dir, &run, json),
        Cmd::Approvals => cmd::decide::approvals(&dir, json),
        Cmd::Approve {
            run,
            delivery,
            hash,
        } => cmd::decide::approve(&dir, &run, &delivery, &hash, json),
        Cmd::Deny { run, delivery } => cmd::decide::deny(&dir, &run, &delivery, json),
        Cmd::Edit {
            run,
            delivery,
            payload,
        } => cmd::decide::edit(&dir, &run, &delivery, &payload, json),
        Cmd::Answer { run, text } => cmd::decide::answer(&dir, &run, &text, json),
        Cmd::Cancel { run } => cmd::decide::cancel(&dir, &run, json),
        Cmd::Doctor => cmd::status::doctor(&dir, json),
        Cmd::Ledger => cmd::status::ledger(&dir, json),
        Cmd::Inbox { count } => cmd::status::inbox(&dir, count, json),
        Cmd::Demo { keep } => demo::run(keep),
        Cmd::Identity { cmd } => identity::run(&dir, cmd, json),
        Cmd::Artifact { cmd } => artifact::run(&dir, cmd, json),
        Cmd::Verify {
            file,
            offline,
            host_key,
        } => identity::verify(&dir, &file, offline, host_key.as_deref(), json),
        Cmd::Diary { name, verify, add } => identity::diary(&dir, &name, verify, add, json),
        Cmd::Task { cmd } => task::task(&dir, cmd, json),
        Cmd::Worker(a) => task::worker(&dir, a, json),
        Cmd::Measures(a) => task::measures(&dir, a, json),
        Cmd::Schedule { cmd } => cmd::schedule::schedule(&dir, cmd, json),
        Cmd::Oracle { paths, summary } => cmd::corpus::oracle(&paths, summary, json),
        Cmd::Scenario {
            cmd: ScenarioCmd::Run { paths },
        } => cmd::corpus::scenario_run(&paths, json),
        Cmd::Serve {
            tick_ms,
            once,
            http,
            allow_remote,
            allow_host,
        } => match http {
            Some(addr) => {
                let host = Arc::new(open_host(&dir, !json)?);
                let reach = http::Reach {
                    allow_remote,
                    allow_host,
                };
                http::serve(&dir, host, &addr, reach, tick_ms, json)
            }
            None => cmd::schedule::serve(&dir, tick_ms, once, json),
        },
        Cmd::Mcp { name } => {
            let host = Arc::new(open_host(&dir, false)?);
            http::mcp(&dir, host, name.as_deref())
        }
        Cmd::Token { cmd } => token::run(&dir, cmd, json),
        Cmd::Sim {
            seed,
            runs,
            faults,
            database_url,
            replay,
        } => sim::run(seed, runs, &faults, database_url, replay, json),
        Cmd::Bench {
            cmd:
                BenchCmd::Runs {
                    runs,
                    concurrency,
                    hosts,
                    part,
                },
        } => match (hosts, part) {
            (_, Some(k)) => bench::runs_part(runs, concurrency, k),
            (Some(n), None) => bench::runs_hosts(runs, concurrency, n, json),
            (None, None) => bench::runs(runs, concurrency, json),
        },
        Cmd::Bench {
            cmd: BenchCmd::Cpu { runs },
        } => bench::cpu(runs, json),
        Cmd::Bench {
            cmd: BenchCmd::Floor { seconds },
        } => bench::floor(seconds, json),
        Cmd::Bench {
            cmd:
                BenchCmd::Board {
                    tasks,
                    workers,
                    hosts,
                    part,
                },
        } => match (hosts, part) {
            (_, Some(k)) => bench_board::board_part(workers, k),
            (Some(n), None) => bench_board::board_hosts(tasks, workers, n, json),
            (None, None) => bench_board::board(tasks, workers, json),
        },
        Cmd::Bench {
            cmd: BenchCmd::Scale { sizes },
        } => bench::scale(&sizes, json),
        Cmd::Bench {
            cmd: BenchCmd::Turns { sizes },
        } => bench::turns(&sizes, json),
        Cmd::Bench {
            cmd: BenchCmd::Recovery { runs, concurrency },
        } => bench::recovery(runs, concurrency, json),
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

/// `vouch completions SHELL`: from the clap definitions `--help` is drawn from.
fn completions(shell: clap_complete::Shell) -> Result<i32> {
    use clap::CommandFactory as _;
    let mut cmd = Cli::command();
    let mut text = Vec::new();
    clap_complete::generate(shell, &mut cmd, "vouch", &mut text);
    out!("{}", String::from_utf8_lossy(&text));
    Ok(0)
}

/// The exit codes of §17.0, as the manual page states them.
const EXIT_STATUS_ROFF: &str = r#".SH "EXIT STATUS"
.TP
\fB0\fR
Done: the run succeeded (or was withdrawn), the command did what it said.
.TP
\fB1\fR
The work did not succeed (or the store is damaged, scenarios disagree, or another live process holds the run).
.TP
\fB2\fR
Bad input: a refused command line, an unknown id, a bad file, a decision the run is not waiting for.
.TP
\fB3\fR
Waiting for you: the run stopped to ask for your approval or an answer (\fBvouch approvals\fR).
.SH ENVIRONMENT
.TP
\fBVOUCH_HOME\fR
The home (default ./.vouch).
.TP
\fBVOUCH_DATABASE_URL\fR
Keep runs in PostgreSQL instead of the home's SQLite store.
"#;

/// `vouch man`: the manual page (roff), from the same definitions as `--help`; with a folder,
/// a page for every command too.
fn manual(dir: Option<&Path>) -> Result<i32> {
    use clap::CommandFactory as _;
    let mut page = Vec::new();
    clap_mangen::Man::new(Cli::command()).render(&mut page)?;
    let page = String::from_utf8_lossy(&page);
    // The exit codes and environment go before the version, as manual pages order them.
    let page = match page.find(".SH VERSION") {
        Some(at) => format!("{}{EXIT_STATUS_ROFF}{}", &page[..at], &page[at..]),
        None => format!("{page}{EXIT_STATUS_ROFF}"),
    };
    let Some(dir) = dir else {
        out!("{page}");
        return Ok(0);
    };
    if !dir.is_dir() {
        return Err(bad(format!(
            "--dir {}: no such folder; create it first (mkdir -p)",
            dir.display()
        )));
    }
    clap_mangen::generate_to(Cli::command(), dir)
        .map_err(|e| anyhow!("write the manual pages into {}: {e}", dir.display()))?;
    std::fs::write(dir.join("vouch.1"), page)
        .map_err(|e| anyhow!("write {}: {e}", dir.join("vouch.1").display()))?;
    houtln!(
        "Manual pages written to {} (`man vouch`, `man vouch-run`, …).",
        dir.display()
    );
    Ok(0)
}

#[cfg(test)]
mod exit_code_tests {
    use super::*;
    use vouch_runtime::model::ModelError;
    use vouch_runtime::HostError as H;
    use vouch_store::StoreError as S;

    /// Each host error's exit code follows from its variant (§17.0), never from its words.
    #[test]
    fn host_errors_exit_by_variant() {
        let cases: Vec<(H, i32)> = vec![
            (H::BadInput("the payload must be a JSON object".into()), 2),
            (
                H::NotFound {
                    what: "run",
                    id: "r1".into(),
                },
                2,
            ),
            (H::NotWaiting("run r1 has already ended".into()), 2),
            (H::WrongHash("hash".into()), 2),
            (
                H::Store(S::NotFound {
                    what: "card",
                    id: "c1".into(),
                }),
                2,
            ),
            (H::Store(S::Conflict("decided".into())), 2),
            (H::Store(S::ReadOnly("write-protected".into())), 2),
            (
                H::OwnedElsewhere("run r1 is owned by another live process".into()),
                1,
            ),
            (
                H::Model(ModelError::Timeout {
                    attempts: 3,
                    timeout_ms: 10,
                }),
                1,
            ),
            (H::Internal("task t1 is gone from the board".into()), 1),
            (H::SlotTaken("s@1".into()), 1),
            (H::Crashed("commit".into()), 1),
            (H::Store(S::Retryable("busy".into())), 1),
            (H::Store(S::Corrupt("bad hash".into())), 1),
        ];
        for (e, code) in cases {
            let shown = format!("{e:?}");
            assert_eq!(exit_code(&host_err(e)), code, "{shown}");
        }
    }

    #[test]
    fn an_unknown_id_names_where_to_find_the_right_one() {
        let e = host_err(H::NotFound {
            what: "run",
            id: "r9".into(),
        });
        assert_eq!(
            e.to_string(),
            "no run `r9`; check the id with `vouch runs list` or `vouch approvals`"
        );
    }
}
