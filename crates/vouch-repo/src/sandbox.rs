//! The confinement every command an agent or a check runs goes through (contract §14.0.5):
//! bubblewrap (`bwrap`) in new user, PID, IPC, UTS and network namespaces; the system
//! read-only; writable only the attempt's worktree (or the folders of it the profile names)
//! and a private `/tmp`; no home, no vouch home, no identities; a scrubbed environment; and
//! limits on processes, memory and output (time is the caller's: [`crate::exec::run`]).
//!
//! There is no fallback: where bubblewrap cannot run, [`probe`] says why and nothing runs.
//! What this does not protect against is a kernel exploit: a namespace is the kernel's own
//! boundary, as good as the kernel.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

/// The program that builds the sandbox.
pub const BWRAP: &str = "bwrap";
/// `PATH` inside the sandbox.
pub const SANDBOX_PATH: &str = "/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/sbin";
/// The egress proxy's socket inside the sandbox (when the profile grants hosts).
pub const EGRESS_SOCKET: &str = "/run/vouch-egress.sock";
/// The loopback port, inside the sandbox's own network namespace, where the relay to the
/// egress proxy listens.
pub const EGRESS_PORT: u16 = 3128;
/// Where the attempt's certificate authority is inside the sandbox.
pub const EGRESS_CA: &str = "/run/vouch-egress-ca.pem";
/// The trust-store variables that point common clients at [`EGRESS_CA`]: OpenSSL's (and so
/// Python's `ssl`, git's, curl's), curl's, requests', pip's, git's and Node's own.
pub const CA_VARIABLES: [&str; 6] = [
    "SSL_CERT_FILE",
    "CURL_CA_BUNDLE",
    "REQUESTS_CA_BUNDLE",
    "PIP_CERT",
    "GIT_SSL_CAINFO",
    "NODE_EXTRA_CA_CERTS",
];
/// System folders the sandbox sees read-only (those that exist; symlinks stay symlinks).
const SYSTEM: [&str; 9] = [
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
];
/// Files of `/etc` the sandbox never reads (hidden behind an empty file).
const HIDDEN: [&str; 4] = [
    "/etc/shadow",
    "/etc/gshadow",
    "/etc/shadow-",
    "/etc/gshadow-",
];

/// Limits of one confined command, with units in their names. Time is separate (the caller
/// kills the whole sandbox at its deadline).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Processes alive in the sandbox at once; more and the host kills the sandbox.
    pub processes_max: u32,
    /// Data (heap and private mappings) of each process, in bytes (`RLIMIT_DATA`).
    pub memory_bytes_max: u64,
    /// The largest file a command may write, its output included (`RLIMIT_FSIZE`).
    pub output_bytes_max: u64,
    /// The size of the private `/tmp`, in bytes.
    pub tmp_bytes_max: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            processes_max: 64,
            memory_bytes_max: 2 << 30,
            output_bytes_max: 64 << 20,
            tmp_bytes_max: 256 << 20,
        }
    }
}

/// The way out of a sandbox whose profile grants hosts: a relay program run inside (it
/// listens on the sandbox's own loopback and forwards to the host's proxy socket) and the
/// environment that points HTTP clients at it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Egress {
    /// The host's proxy socket (bound into the sandbox at [`EGRESS_SOCKET`]).
    pub socket: PathBuf,
    /// The relay program: `RELAY sandbox-relay PORT SOCKET -- PROGRAM ARGS…`.
    pub relay: PathBuf,
    /// Extra variables: placeholders for keys the proxy swaps in on the way out.
    pub env: Vec<(String, String)>,
    /// The attempt's certificate authority (PEM), bound read-only at [`EGRESS_CA`] and named
    /// by the trust-store variables of common clients; `None`: HTTPS passes unopened.
    pub ca: Option<PathBuf>,
}

/// Everything that decides what one confined command can reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sandbox {
    /// The attempt's worktree: the working folder, writable.
    pub worktree: PathBuf,
    /// Folders of the worktree (relative, plain) that alone are writable; empty: all of it.
    pub writable: Vec<String>,
    /// Host folders the command may read (the repository's git folder, for `git` in checks).
    pub read_only: Vec<PathBuf>,
    pub limits: Limits,
    /// `None`: no network at all (the sandbox's own loopback only).
    pub egress: Option<Egress>,
}

/// A confined command ready to start, with the open files bubblewrap reads its system-call
/// filters from: keep it whole until the command has started.
#[derive(Debug)]
pub struct Prepared {
    pub cmd: Command,
    filters: Vec<std::fs::File>,
}

impl Prepared {
    /// The command and the filter files (drop those only once it has started).
    pub fn into_parts(self) -> (Command, Vec<std::fs::File>) {
        (self.cmd, self.filters)
    }
}

/// Each filter program in a file of its own, at its start, left open across `exec` so
/// bubblewrap inherits it (a file made for one command: bubblewrap reads it to the end). Where
/// this machine has no filter, none (the doctor says so).
fn filter_files() -> Result<Vec<std::fs::File>, String> {
    use std::io::{Seek, Write};
    let Ok(programs) = crate::seccomp::programs() else {
        return Ok(vec![]);
    };
    let mut files = vec![];
    for p in programs {
        let made = (|| -> std::io::Result<std::fs::File> {
            let mut f = tempfile::tempfile()?;
            f.write_all(p)?;
            f.rewind()?;
            rustix::io::fcntl_setfd(&f, rustix::io::FdFlags::empty())?;
            Ok(f)
        })();
        files.push(made.map_err(|e| format!("cannot hand the system-call filter over: {e}"))?);
    }
    Ok(files)
}

/// Whether bubblewrap can build a sandbox on this machine; the reason when it cannot.
/// Asked once per process (the answer does not change while it runs).
pub fn probe() -> Result<(), String> {
    static PROBED: OnceLock<Result<(), String>> = OnceLock::new();
    PROBED.get_or_init(probe_now).clone()
}

fn probe_now() -> Result<(), String> {
    let mut cmd = Command::new(BWRAP);
    cmd.args(["--unshare-all", "--die-with-parent", "--cap-drop", "ALL"]);
    system_binds(&mut cmd);
    cmd.args(["--proc", "/proc", "--dev", "/dev", "--", "true"]);
    match cmd.output() {
        Err(e) => Err(format!(
            "bubblewrap (`{BWRAP}`) cannot be started ({e}); install the `bubblewrap` package"
        )),
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(format!(
            "bubblewrap cannot make a sandbox here ({}); user namespaces may be disabled (kernel.unprivileged_userns_clone, user.max_user_namespaces)",
            String::from_utf8_lossy(&o.stderr).trim()
        )),
    }
}

/// The system, read-only: each folder that exists, a symlink as the same symlink.
fn system_binds(cmd: &mut Command) {
    for p in SYSTEM {
        let path = Path::new(p);
        match std::fs::symlink_metadata(path) {
            Ok(m) if m.file_type().is_symlink() => {
                if let Ok(target) = std::fs::read_link(path) {
                    cmd.arg("--symlink").arg(target).arg(path);
                }
            }
            Ok(m) if m.is_dir() => {
                cmd.arg("--ro-bind").arg(path).arg(path);
            }
            _ => {}
        }
    }
    for p in HIDDEN {
        if Path::new(p).exists() {
            cmd.args(["--ro-bind", "/dev/null", p]);
        }
    }
}

impl Sandbox {
    /// A sandbox for `worktree` with the default limits and no network.
    pub fn new(worktree: impl Into<PathBuf>) -> Self {
        Sandbox {
            worktree: worktree.into(),
            writable: vec![],
            read_only: vec![],
            limits: Limits::default(),
            egress: None,
        }
    }

    /// The command that runs `program args…` confined: `prlimit` (process, memory and file
    /// size limits) around `bwrap` around the program, with the system-call filter. Refused
    /// when bubblewrap cannot run — never run unconfined.
    pub fn command(&self, program: &str, args: &[String]) -> Result<Prepared, String> {
        probe().map_err(|e| format!("commands are refused: {e}"))?;
        let filters = filter_files()?;
        let cmd = self.bwrap(program, args, &filters)?;
        Ok(Prepared { cmd, filters })
    }

    fn bwrap(
        &self,
        program: &str,
        args: &[String],
        filters: &[std::fs::File],
    ) -> Result<Command, String> {
        let l = &self.limits;
        let mut cmd = Command::new("prlimit");
        cmd.arg(format!("--data={}", l.memory_bytes_max))
            .arg(format!("--fsize={}", l.output_bytes_max))
            .arg("--core=0")
            .args(["--", BWRAP]);
        cmd.args([
            "--unshare-all",
            "--die-with-parent",
            "--new-session",
            "--cap-drop",
            "ALL",
            "--hostname",
            "sandbox",
        ]);
        system_binds(&mut cmd);
        for f in filters {
            cmd.arg("--add-seccomp-fd")
                .arg(std::os::fd::AsRawFd::as_raw_fd(f).to_string());
        }
        cmd.args(["--proc", "/proc", "--dev", "/dev"]);
        cmd.args(["--size", &l.tmp_bytes_max.to_string(), "--tmpfs", "/tmp"]);
        for p in &self.read_only {
            cmd.arg("--ro-bind-try").arg(p).arg(p);
        }
        self.bind_worktree(&mut cmd)?;
        cmd.arg("--chdir").arg(&self.worktree);
        cmd.args(["--clearenv", "--setenv", "PATH", SANDBOX_PATH]);
        for (k, v) in [("HOME", "/tmp"), ("TMPDIR", "/tmp"), ("LANG", "C.UTF-8")] {
            cmd.args(["--setenv", k, v]);
        }
        // Nothing of the host's environment reaches even bubblewrap.
        cmd.env_clear().env("PATH", SANDBOX_PATH);
        // The process limit is set inside the new user namespace: set outside, the kernel
        // would also hold the user's processes elsewhere on the machine against it.
        let nproc = format!("--nproc={}", l.processes_max);
        match &self.egress {
            None => {
                cmd.args(["--", "prlimit", &nproc, "--", program])
                    .args(args);
            }
            Some(e) => {
                let proxy = format!("http://127.0.0.1:{EGRESS_PORT}");
                for k in ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"] {
                    cmd.args(["--setenv", k, &proxy]);
                }
                for (k, v) in &e.env {
                    cmd.arg("--setenv").arg(k).arg(v);
                }
                if let Some(ca) = &e.ca {
                    cmd.arg("--ro-bind").arg(ca).arg(EGRESS_CA);
                    for k in CA_VARIABLES {
                        cmd.args(["--setenv", k, EGRESS_CA]);
                    }
                }
                cmd.arg("--bind").arg(&e.socket).arg(EGRESS_SOCKET);
                cmd.arg("--ro-bind").arg(&e.relay).arg("/run/vouch-relay");
                cmd.args([
                    "--",
                    "prlimit",
                    &nproc,
                    "--",
                    "/run/vouch-relay",
                    "sandbox-relay",
                ])
                .arg(EGRESS_PORT.to_string())
                .args([EGRESS_SOCKET, "--", program])
                .args(args);
            }
        }
        Ok(cmd)
    }

    /// The worktree at its own path: writable, or read-only with only the profile's
    /// `writable` folders writable (each a plain relative path, made if missing).
    fn bind_worktree(&self, cmd: &mut Command) -> Result<(), String> {
        if self.writable.is_empty() {
            cmd.arg("--bind").arg(&self.worktree).arg(&self.worktree);
            return Ok(());
        }
        cmd.arg("--ro-bind").arg(&self.worktree).arg(&self.worktree);
        for w in &self.writable {
            if !crate::input::plain_path(w) {
                return Err(format!(
                    "writable folder `{w}` is not a plain path inside the worktree"
                ));
            }
            let p = folder_beneath(&self.worktree, w)?;
            cmd.arg("--bind").arg(&p).arg(&p);
        }
        Ok(())
    }
}

/// The folder `rel` beneath `root`, each missing component made and every component looked at
/// without following a link: a link (or a file) on the way is refused, so neither the host's
/// folder-making nor bubblewrap's bind can land outside the worktree. Sound because no command
/// of the attempt runs between this and the bind (each runs in a sandbox of its own, ended
/// with its PID namespace).
pub fn folder_beneath(root: &Path, rel: &str) -> Result<PathBuf, String> {
    let mut at = root.to_path_buf();
    for part in Path::new(rel).components() {
        let std::path::Component::Normal(name) = part else {
            return Err(format!(
                "writable folder `{rel}` is not a plain path inside the worktree"
            ));
        };
        at.push(name);
        let shown = at.strip_prefix(root).unwrap_or(&at).display().to_string();
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.file_type().is_symlink() => {
                let to = std::fs::read_link(&at).map(|t| t.display().to_string());
                return Err(format!(
                    "writable folder `{rel}`: `{shown}` is a link (to {}); refused, a writable folder must be a real folder inside the worktree",
                    to.unwrap_or_else(|_| "somewhere unreadable".into())
                ));
            }
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "writable folder `{rel}`: `{shown}` is not a folder; refused"
                ))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => std::fs::create_dir(&at)
                .map_err(|e| format!("make the writable folder `{rel}`: {e}"))?,
            Err(e) => return Err(format!("writable folder `{rel}`: {e}")),
        }
    }
    Ok(at)
}

/// How the process limit holds, for the doctor: the host counts a sandbox's processes and
/// kills it past the limit, so a fast fork can pass it by a few first. (An exact limit needs a
/// cgroup the host may make children in, which this build does not use.)
pub const PROCESS_LIMIT_NOTE: &str = "counted by the host every 20 ms and the sandbox killed past the limit (a fast fork can pass it by a few first; no cgroup pids.max is used)";

/// How many processes are alive in the PID namespace whose init is a child of `parent`
/// (bubblewrap's), counted from the host's `/proc`; `None` while that namespace is not up.
/// The host watches this number because `RLIMIT_NPROC` does not bind a sandbox started by
/// root (the kernel exempts the root user's processes).
pub fn processes_under(parent: u32) -> Option<usize> {
    let ours = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let pids: Vec<u32> = std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    let ns = |pid: u32| std::fs::read_link(format!("/proc/{pid}/ns/pid")).ok();
    let ppid = |pid: u32| -> Option<u32> {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        // `pid (comm) state ppid …`: comm may hold spaces and parentheses.
        let rest = &s[s.rfind(')')? + 1..];
        rest.split_whitespace().nth(1)?.parse().ok()
    };
    // The namespace: that of a descendant of `parent` that is not in ours (bubblewrap may
    // fork twice before the sandbox's init).
    let target = pids
        .iter()
        .filter(|p| ppid(**p) == Some(parent) || ppid(**p).and_then(ppid) == Some(parent))
        .filter_map(|p| ns(*p))
        .find(|n| *n != ours)?;
    Some(
        pids.iter()
            .filter(|p| ns(**p).as_ref() == Some(&target))
            .count(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(c: &Command) -> Vec<String> {
        std::iter::once(c.get_program())
            .chain(c.get_args())
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn the_command_unshares_every_namespace_and_scrubs_the_environment() {
        if probe().is_err() {
            // Without bubblewrap the command is refused, which the next test states.
            return;
        }
        let s = Sandbox::new("/w/t-1");
        let a = args(
            &s.command("sh", &["-c".into(), "true".into()])
                .unwrap_or_else(|e| {
                    panic!("{e}");
                })
                .cmd,
        );
        for want in [
            "--unshare-all",
            "--die-with-parent",
            "--clearenv",
            "--new-session",
        ] {
            assert!(a.iter().any(|x| x == want), "{want} in {a:?}");
        }
        assert!(!a.iter().any(|x| x == "--share-net"));
        assert!(a.windows(3).any(|w| w == ["--bind", "/w/t-1", "/w/t-1"]));
        assert!(a.ends_with(&["--".into(), "sh".into(), "-c".into(), "true".into()]));
        assert!(a.iter().any(|x| x == "--nproc=64"));
    }

    #[test]
    fn with_egress_every_bwrap_option_comes_before_the_command() {
        if probe().is_err() {
            return;
        }
        let mut s = Sandbox::new("/w/t-1");
        s.egress = Some(Egress {
            socket: "/s/egress.sock".into(),
            relay: "/bin/vouch".into(),
            env: vec![("K".into(), "vouch-placeholder-K".into())],
            ca: Some("/s/ca.pem".into()),
        });
        let a = args(&s.command("sh", &[]).unwrap_or_else(|e| panic!("{e}")).cmd);
        let end = a.iter().rposition(|x| x == "prlimit").unwrap_or(0);
        for opt in ["--setenv", "--bind", "--ro-bind"] {
            let last = a.iter().rposition(|x| x == opt).unwrap_or(usize::MAX);
            assert!(last < end, "{opt} after the command in {a:?}");
        }
        assert!(a.ends_with(&[
            "/run/vouch-relay".into(),
            "sandbox-relay".into(),
            "3128".into(),
            EGRESS_SOCKET.into(),
            "--".into(),
            "sh".into()
        ]));
    }

    #[test]
    fn a_writable_folder_must_be_a_plain_path() {
        if probe().is_err() {
            return;
        }
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut s = Sandbox::new(d.path());
        s.writable = vec!["../up".into()];
        let e = s.command("true", &[]).err().unwrap_or_default();
        assert!(e.contains("not a plain path"), "{e}");
    }
}
