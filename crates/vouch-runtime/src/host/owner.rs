//! Who holds a run's lease (§9.1): an owner is (host id, boot, pid, process start). A host
//! judges an owner from its own process table only when the owner is of its own host and
//! boot (the same machine, boot and PID namespace); any other owner — another machine, a
//! container, a worker in its own PID namespace, an earlier boot — is judged by its lease
//! alone, because a pid means nothing outside the namespace that gave it out.
//!
//! The owner string is `pid:<pid>+<start>@<host>/<boot>`: `start` is the process's start
//! time in clock ticks since boot (`/proc/<pid>/stat`, field 22), so a reused pid is not
//! mistaken for the owner; `boot` is the kernel's boot id and the PID namespace's inode.

use std::sync::OnceLock;

/// Environment variable that names this host, overriding `/etc/machine-id`: for tests that
/// play several hosts on one machine, and for machines whose id is not unique (a cloned image).
pub const HOST_ID_ENV: &str = "VOUCH_HOST_ID";
/// Longest host id kept; longer ones are cut (an owner string stays small).
pub const HOST_ID_BYTES_MAX: usize = 64;

/// This host as its owners name it: a stable host id and this boot of it, as seen from this
/// process's PID namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostIdentity {
    /// `VOUCH_HOST_ID`, else `/etc/machine-id`, else the host name.
    pub host: String,
    /// `<boot id>.<PID namespace inode>`; empty when this process cannot read its own
    /// processes (then no owner is ever judged from the process table).
    pub boot: String,
}

impl HostIdentity {
    /// This process's identity, read once.
    pub fn this() -> &'static HostIdentity {
        static THIS: OnceLock<HostIdentity> = OnceLock::new();
        THIS.get_or_init(HostIdentity::read)
    }

    fn read() -> HostIdentity {
        let env = std::env::var(HOST_ID_ENV).ok();
        let host = [
            env,
            read_trimmed("/etc/machine-id"),
            read_trimmed("/var/lib/dbus/machine-id"),
            read_trimmed("/proc/sys/kernel/hostname"),
        ]
        .into_iter()
        .flatten()
        .map(|h| clean_id(&h))
        .find(|h| !h.is_empty())
        .unwrap_or_else(|| "unknown-host".into());
        HostIdentity {
            host,
            boot: local_boot().unwrap_or_default(),
        }
    }

    /// The owner string of process `pid`, started at `start` (clock ticks since boot).
    pub fn owner(&self, pid: u32, start: u64) -> String {
        format!("pid:{pid}+{start}@{}/{}", self.host, self.boot)
    }

    /// Whether `owner` still runs, as far as this host can tell: `None` for an owner of
    /// another host or boot (judged by its lease alone), or one this host cannot read.
    pub fn judge(&self, owner: &str) -> Option<bool> {
        let o = Owner::parse(owner)?;
        if self.boot.is_empty() || o.host != self.host || o.boot != self.boot {
            return None;
        }
        Some(match process_start(o.pid) {
            None => o.pid == std::process::id() && o.start == 0,
            // A process with this pid that started at another time took a freed pid — this
            // one included: a restarted pid 1 in a namespace whose inode number was reused.
            Some(start) => o.start == 0 || start == o.start,
        })
    }
}

/// An owner string taken apart; see the module's documentation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Owner<'a> {
    pub pid: u32,
    /// 0 when unknown.
    pub start: u64,
    pub host: &'a str,
    pub boot: &'a str,
}

impl<'a> Owner<'a> {
    /// `None` for any other form (an owner written by an older version, a task worker, a
    /// made-up owner in a test): such an owner is judged by its lease alone.
    pub fn parse(owner: &'a str) -> Option<Owner<'a>> {
        let (proc_part, place) = owner.strip_prefix("pid:")?.split_once('@')?;
        let (pid, start) = proc_part.split_once('+')?;
        let (host, boot) = place.split_once('/')?;
        Some(Owner {
            pid: pid.parse().ok()?,
            start: start.parse().ok()?,
            host,
            boot,
        })
    }
}

/// The owner string of this process.
pub fn process_owner() -> String {
    let pid = std::process::id();
    HostIdentity::this().owner(pid, process_start(pid).unwrap_or(0))
}

/// Whether the process holding a run's lease still runs (§9.2.5). The host asks it, never
/// the operating system directly, so start-up reconciliation and lease takeover are decided
/// the same way in tests with made-up owners as with real processes.
pub trait Liveness: Send + Sync {
    /// `Some(true)`: running; `Some(false)`: exited; `None`: not a process this host can
    /// tell about (another host's or boot's owner, or no owner at all): its lease decides.
    fn of(&self, owner: &str) -> Option<bool>;
}

/// This process's own host and boot ([`HostIdentity::this`]): owners of it are alive while
/// their process exists (this process always); any other owner is left to its lease.
pub struct LocalProcesses;

impl Liveness for LocalProcesses {
    fn of(&self, owner: &str) -> Option<bool> {
        HostIdentity::this().judge(owner)
    }
}

/// The processes of a given host identity: a test plays several hosts in one process with
/// one of these per host.
pub struct HostProcesses(pub HostIdentity);

impl Liveness for HostProcesses {
    fn of(&self, owner: &str) -> Option<bool> {
        self.0.judge(owner)
    }
}

/// A host id as kept in owner strings: letters, digits, `.`, `_` and `-` (others become
/// `_`), at most [`HOST_ID_BYTES_MAX`] bytes.
fn clean_id(raw: &str) -> String {
    raw.trim()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(HOST_ID_BYTES_MAX)
        .collect()
}

fn read_trimmed(path: &str) -> Option<String> {
    std::fs::read_to_string(path)
        .ok()
        .map(|s| s.trim().to_string())
}

/// `<boot id>.<PID namespace inode>` of this process, or `None` when `/proc` is not this
/// process's own (mounted for another PID namespace: its pids are not ours to judge).
fn local_boot() -> Option<String> {
    let me = std::fs::read_link("/proc/self").ok()?;
    if me.to_str()?.parse::<u32>().ok()? != std::process::id() {
        return None;
    }
    let boot_id = clean_id(&read_trimmed("/proc/sys/kernel/random/boot_id")?);
    let ns = std::fs::read_link("/proc/self/ns/pid").ok()?;
    let ns: String = ns
        .to_str()?
        .chars()
        .filter(|c| c.is_ascii_digit())
        .collect();
    (!boot_id.is_empty() && !ns.is_empty()).then(|| format!("{boot_id}.{ns}"))
}

/// When process `pid` started, in clock ticks since boot (`/proc/<pid>/stat`, field 22);
/// `None` when there is no such process.
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces and parentheses.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(19)?.parse().ok()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn me() -> HostIdentity {
        HostIdentity {
            host: "h1".into(),
            boot: local_boot().unwrap(),
        }
    }

    #[test]
    fn an_owner_string_round_trips() {
        let id = me();
        let s = id.owner(42, 7);
        let o = Owner::parse(&s).unwrap();
        assert_eq!((o.pid, o.start, o.host), (42, 7, "h1"));
        assert_eq!(o.boot, id.boot);
        assert_eq!(Owner::parse("pid:42"), None);
        assert_eq!(Owner::parse("pid:x+1@h/b"), None);
        assert_eq!(Owner::parse("worker-1"), None);
    }

    #[test]
    fn this_process_is_alive_and_a_missing_pid_is_dead_on_its_own_host() {
        let id = me();
        let pid = std::process::id();
        assert_eq!(id.judge(&id.owner(pid, 0)), Some(true));
        let start = process_start(pid).unwrap();
        assert_eq!(id.judge(&id.owner(pid, start)), Some(true));
        // This pid, given out before to a process that started earlier (a restarted pid 1).
        assert_eq!(id.judge(&id.owner(pid, start - 1)), Some(false));
        // Pids are below 2^22 on Linux: this one never exists.
        assert_eq!(id.judge(&id.owner(u32::MAX - 1, 5)), Some(false));
    }

    #[test]
    fn a_reused_pid_is_not_the_owner() {
        let id = me();
        let parent = std::os::unix::process::parent_id();
        let start = process_start(parent).unwrap();
        assert_eq!(id.judge(&id.owner(parent, start)), Some(true));
        assert_eq!(id.judge(&id.owner(parent, start + 1)), Some(false));
    }

    #[test]
    fn an_owner_of_another_host_or_boot_or_namespace_is_left_to_its_lease() {
        let id = me();
        let pid = std::process::id();
        let other_host = HostIdentity {
            host: "h2".into(),
            ..id.clone()
        };
        assert_eq!(id.judge(&other_host.owner(u32::MAX - 1, 5)), None);
        let other_boot = HostIdentity {
            boot: format!("{}x", id.boot),
            ..id.clone()
        };
        // Pid 1 of another namespace (a container's) is not this namespace's pid 1.
        assert_eq!(id.judge(&other_boot.owner(1, 0)), None);
        assert_eq!(id.judge(&other_boot.owner(pid, 0)), None);
        // The old form says nothing about where the pid lived.
        assert_eq!(id.judge(&format!("pid:{pid}")), None);
        assert_eq!(id.judge("pid:1"), None);
    }

    #[test]
    fn a_host_id_keeps_only_safe_characters() {
        assert_eq!(clean_id(" a/b@c d\n"), "a_b_c_d");
        assert_eq!(clean_id(&"x".repeat(200)).len(), HOST_ID_BYTES_MAX);
    }
}
