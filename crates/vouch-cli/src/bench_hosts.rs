//! `vouch bench runs|board --hosts N`: N processes of this same binary, each a host with a home
//! of its own and its own `VOUCH_HOST_ID`, sharing one PostgreSQL schema and the work. The
//! parent sets the schema up, starts the hosts, and starts each phase in all of them at once;
//! a host prints one JSON line when it is ready and one after each phase, and waits for the
//! phase's name on its standard input. The aggregate rate is the work of every host over the
//! parent's wall time from the phase's start to its last host's end.

use anyhow::{anyhow, bail, Context, Result};
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

/// Hosts a bench starts at most.
pub const HOSTS_MAX: usize = 16;

/// `--hosts` checked: 1..=HOSTS_MAX, and only where the hosts can share a store.
pub fn check(hosts: usize) -> Result<()> {
    if hosts == 0 || hosts > HOSTS_MAX {
        return Err(crate::bad(format!("--hosts must be 1..={HOSTS_MAX}")));
    }
    if crate::home::database_url().is_none() {
        return Err(crate::bad(
            "--hosts needs a store the hosts share: set VOUCH_DATABASE_URL (PostgreSQL)",
        ));
    }
    Ok(())
}

struct Host {
    child: Child,
    stdin: ChildStdin,
    lines: std::io::Lines<BufReader<ChildStdout>>,
}

/// The host processes of one bench.
pub struct Hosts {
    hosts: Vec<Host>,
}

impl Hosts {
    /// Start `n` hosts: `vouch ARGS(k)` with `VOUCH_HOST_ID=bench-K` (the schema and the
    /// database URL are inherited), and wait until each says it is ready.
    pub fn start(n: usize, args: impl Fn(usize) -> Vec<String>) -> Result<Hosts> {
        let exe = std::env::current_exe().context("this binary's path")?;
        let mut hosts = Hosts { hosts: vec![] };
        for k in 0..n {
            let mut child = Command::new(&exe)
                .args(args(k))
                .env("VOUCH_HOST_ID", format!("bench-{k}"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::inherit())
                .spawn()
                .with_context(|| format!("start bench host {k}"))?;
            let (Some(stdin), Some(stdout)) = (child.stdin.take(), child.stdout.take()) else {
                bail!("bench host {k} has no pipes");
            };
            hosts.hosts.push(Host {
                child,
                stdin,
                lines: BufReader::new(stdout).lines(),
            });
        }
        hosts.collect()?;
        Ok(hosts)
    }

    /// Start `phase` in every host at once; the seconds until the last one ended, and what
    /// each printed.
    pub fn phase(&mut self, phase: &str) -> Result<(f64, Vec<Value>)> {
        let t = Instant::now();
        for (k, h) in self.hosts.iter_mut().enumerate() {
            writeln!(h.stdin, "{phase}").with_context(|| format!("bench host {k}"))?;
            h.stdin.flush()?;
        }
        let out = self.collect()?;
        Ok((t.elapsed().as_secs_f64(), out))
    }

    /// One JSON line from every host.
    fn collect(&mut self) -> Result<Vec<Value>> {
        let mut out = vec![];
        for (k, h) in self.hosts.iter_mut().enumerate() {
            let line = h
                .lines
                .next()
                .ok_or_else(|| anyhow!("bench host {k} ended early"))??;
            let v: Value = serde_json::from_str(&line)
                .with_context(|| format!("bench host {k} printed {line:?}"))?;
            if let Some(e) = v.get("error") {
                bail!("bench host {k}: {e}");
            }
            out.push(v);
        }
        Ok(out)
    }

    /// Wait for every host to exit.
    pub fn finish(mut self) -> Result<()> {
        for (k, h) in self.hosts.iter_mut().enumerate() {
            let status = h.child.wait()?;
            if !status.success() {
                bail!("bench host {k} exited with {status}");
            }
        }
        Ok(())
    }
}

impl Drop for Hosts {
    fn drop(&mut self) {
        for h in &mut self.hosts {
            if matches!(h.child.try_wait(), Ok(None)) {
                let _ = h.child.kill();
                let _ = h.child.wait();
            }
        }
    }
}

/// In a host: print one line for the parent.
pub fn say(v: &Value) {
    outln!("{v}");
}

/// In a host: wait for the parent to start `phase`.
pub fn wait_for(phase: &str) -> Result<()> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line)?;
    if line.trim() != phase {
        bail!("expected the phase {phase:?}, got {:?}", line.trim());
    }
    Ok(())
}

/// In a host: its own temporary home on the shared schema.
pub fn own_home(kind: &str, part: usize) -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!(
        "vouch-bench-{kind}-{}-host-{part}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    crate::home::init(&dir)?;
    Ok(dir)
}

/// The values of `key` in the hosts' lines, as numbers.
pub fn numbers(lines: &[Value], key: &str) -> Vec<f64> {
    lines.iter().filter_map(|v| v[key].as_f64()).collect()
}
