//! Running commands for the host: the `git` command, each check, and the agent's allowed
//! commands. Every run has a time limit (the whole process group is killed when it passes)
//! and keeps only a bounded tail of its output.

use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::process::{Command, Stdio};
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
}

/// Variables that would point git (or a check calling git) at another repository.
const GIT_ENV: [&str; 5] = [
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
];

/// Run `program args…` in `dir` for at most `timeout`, keeping the last `tail_bytes` of its
/// output. The command runs in its own process group, so a timeout ends its children too.
pub fn run(
    dir: &Path,
    program: &str,
    args: &[String],
    timeout: Duration,
    tail_bytes: usize,
) -> Ran {
    let failed = |e: String| Ran {
        exit: None,
        timed_out: false,
        tail: String::new(),
        error: Some(e),
    };
    let mut out = match tempfile::tempfile() {
        Ok(f) => f,
        Err(e) => return failed(format!("cannot make an output file: {e}")),
    };
    let (stdout, stderr) = match (out.try_clone(), out.try_clone()) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return failed(format!("cannot make an output file: {e}")),
    };
    let mut cmd = Command::new(program);
    cmd.args(args)
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr));
    for k in GIT_ENV {
        cmd.env_remove(k);
    }
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return failed(format!("cannot start `{program}`: {e}")),
    };
    let started = Instant::now();
    let (status, timed_out) = loop {
        match child.try_wait() {
            Ok(Some(s)) => break (Some(s), false),
            Ok(None) if started.elapsed() >= timeout => {
                // The whole group: a shell's children must not outlive the limit.
                // Signalled directly: the `kill` program of procps-ng 4.0 reads `-KILL -PGID`
                // as "every process", which would end far more than this check.
                if let Some(pgid) = rustix::process::Pid::from_raw(child.id() as i32) {
                    let _ =
                        rustix::process::kill_process_group(pgid, rustix::process::Signal::KILL);
                }
                let _ = child.kill();
                let _ = child.wait();
                break (None, true);
            }
            Ok(None) => std::thread::sleep(Duration::from_millis(POLL_MS)),
            Err(e) => return failed(format!("cannot wait for `{program}`: {e}")),
        }
    };
    let error = match status {
        _ if timed_out => Some(format!("killed after {} s", timeout.as_secs())),
        Some(s) if s.code().is_none() => Some(format!("ended by a signal ({s})")),
        _ => None,
    };
    Ran {
        exit: status.and_then(|s| s.code()),
        timed_out,
        tail: tail_of(&mut out, tail_bytes),
        error,
    }
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
