//! Running the commands of a patch attempt: each check and the agent's allowed commands.
//! Every one runs confined ([`crate::sandbox`]), has a time limit (the whole sandbox is
//! killed when it passes) and a process limit the host watches, and keeps only a bounded
//! tail of its output. (The host's own `git` commands are [`crate::git`]'s.)

use crate::sandbox::{self, Sandbox};
use std::io::{Read, Seek, SeekFrom};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Output kept of a check or a command: its last bytes.
pub const TAIL_BYTES_MAX: usize = 4096;
/// How often a running command is looked at.
const POLL_MS: u64 = 20;

/// How one command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ran {
    pub exit: Option<i32>,
    pub timed_out: bool,
    /// The last `tail_bytes` of stdout and stderr together (lossy UTF-8).
    pub tail: String,
    /// Why it did not end with an exit status.
    pub error: Option<String>,
    /// What the sandbox refused or stopped (a process or output limit, the time limit, a
    /// command it would not start), for the receipt.
    pub refused: Option<String>,
}

/// Run `program args…` confined by `sandbox` (in its worktree) for at most `timeout`,
/// keeping the last `tail_bytes` of its output. Past the time limit or the process limit the
/// whole sandbox is killed (its PID namespace ends with its init).
pub fn run(
    sandbox: &Sandbox,
    program: &str,
    args: &[String],
    timeout: Duration,
    tail_bytes: usize,
) -> Ran {
    let failed = |e: String| Ran {
        exit: None,
        timed_out: false,
        tail: String::new(),
        refused: Some(e.clone()),
        error: Some(e),
    };
    // The filter files stay open until the command has started (bubblewrap reads them).
    let (mut cmd, _filters) = match sandbox.command(program, args) {
        Ok(c) => c.into_parts(),
        Err(e) => return failed(e),
    };
    let mut out = match tempfile::tempfile() {
        Ok(f) => f,
        Err(e) => return failed(format!("cannot make an output file: {e}")),
    };
    let (stdout, stderr) = match (out.try_clone(), out.try_clone()) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return failed(format!("cannot make an output file: {e}")),
    };
    cmd.stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot start the sandbox for `{program}`: {e}")),
    };
    let started = Instant::now();
    let processes_max = sandbox.limits.processes_max as usize;
    let (status, stopped) = loop {
        let over = match child.try_wait() {
            Ok(Some(s)) => break (Some(s), None),
            Err(e) => return failed(format!("cannot wait for `{program}`: {e}")),
            Ok(None) if started.elapsed() >= timeout => Stop::Time,
            Ok(None) => match sandbox::processes_under(child.id()) {
                Some(n) if n > processes_max => Stop::Processes(n),
                _ => {
                    std::thread::sleep(Duration::from_millis(POLL_MS));
                    continue;
                }
            },
        };
        kill(&mut child);
        break (None, Some(over));
    };
    let (error, refused) = ended(status, stopped, timeout, processes_max, sandbox);
    Ran {
        exit: status.and_then(|s| s.code()),
        timed_out: stopped == Some(Stop::Time),
        tail: tail_of(&mut out, tail_bytes),
        error,
        refused,
    }
}

/// Why the host stopped a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stop {
    Time,
    Processes(usize),
}

/// End the sandbox: `prlimit` became `bwrap`, whose death ends the sandbox's init
/// (`--die-with-parent`) and so every process in its PID namespace. Its group too, for the
/// moment before bubblewrap has made the namespace.
fn kill(child: &mut std::process::Child) {
    // Signalled directly: the `kill` program of procps-ng 4.0 reads `-KILL -PGID` as "every
    // process", which would end far more than this command.
    if let Some(pgid) = rustix::process::Pid::from_raw(child.id() as i32) {
        let _ = rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// The error and the refusal a command's end amounts to.
fn ended(
    status: Option<std::process::ExitStatus>,
    stopped: Option<Stop>,
    timeout: Duration,
    processes_max: usize,
    sandbox: &Sandbox,
) -> (Option<String>, Option<String>) {
    use std::os::unix::process::ExitStatusExt as _;
    let refusal = match stopped {
        Some(Stop::Time) => Some(format!(
            "killed after {} s (its time limit)",
            timeout.as_secs()
        )),
        Some(Stop::Processes(n)) => Some(format!(
            "killed at {n} processes (the limit is {processes_max})"
        )),
        // SIGXFSZ: a file (its output included) grew past the limit. bubblewrap reports a
        // child ended by a signal as 128 + the signal, and so does a shell.
        None => match status.and_then(|s| s.signal().or(s.code().map(|c| c - 128))) {
            Some(25) => Some(format!(
                "killed when a file it wrote passed {} bytes (its output limit)",
                sandbox.limits.output_bytes_max
            )),
            _ => None,
        },
    };
    let error = match (&refusal, status) {
        (Some(r), _) => Some(r.clone()),
        (None, Some(s)) if s.code().is_none() => Some(format!("ended by a signal ({s})")),
        _ => None,
    };
    (error, refusal)
}

/// The last `n` bytes of a file, as lossy UTF-8.
pub fn tail_of(f: &mut std::fs::File, n: usize) -> String {
    let len = f.seek(SeekFrom::End(0)).unwrap_or(0);
    let from = len.saturating_sub(n as u64);
    if f.seek(SeekFrom::Start(from)).is_err() {
        return String::new();
    }
    let mut buf = Vec::with_capacity(n);
    let _ = f.take(n as u64).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}
