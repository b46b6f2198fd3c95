//! The home and what waits in it: init, the inbox and its badge, doctor, the ledger.

use crate::out;
use crate::{home, open_host};
use anyhow::Result;
use serde_json::json;
use std::path::Path;

pub fn init(dir: &Path, json: bool) -> Result<i32> {
    let created = home::init(dir)?;
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

pub fn doctor(dir: &Path, json: bool) -> Result<i32> {
    let cfg = home::config(dir)?;
    let pending = home::open_store(dir)?.outbox_pending()?;
    let report = vouch_adapters::doctor::doctor(&cfg, &home::providers(dir, &cfg), &pending);
    // Patch attempts run their commands only in a bubblewrap sandbox (§14.0.5).
    let sandbox = vouch_repo::sandbox::probe();
    let filter = vouch_repo::seccomp::programs().map(|_| ());
    if json {
        outln!(
            "{}",
            json!({"home": dir, "destinations": report.destinations, "overrides": report.overrides, "automation": report.automation, "stuck_routes": report.stuck_routes,
                "sandbox": {"available": sandbox.is_ok(), "reason": sandbox.as_ref().err(),
                    "syscall_filter": {"active": filter.is_ok(), "reason": filter.as_ref().err()},
                    "process_limit": vouch_repo::sandbox::PROCESS_LIMIT_NOTE}})
        );
    } else {
        houtln!("vouch home {} — destinations:", dir.display());
        for r in &report.destinations {
            houtln!(
                "  {:<10} {:<12} {}",
                r.kind.as_str(),
                r.level.as_str(),
                r.connect_step.as_deref().unwrap_or("")
            );
        }
        for (p, l) in &report.overrides {
            houtln!("  override  {p} → {}", l.as_str());
        }
        match &sandbox {
            Ok(()) => {
                houtln!(
                    "  {:<10} {:<12} patch commands and checks run under bubblewrap",
                    "sandbox",
                    "ready"
                );
                match &filter {
                    Ok(()) => houtln!(
                        "{:26}system calls: namespaces, mounts, tracing, keyrings, BPF refused",
                        ""
                    ),
                    Err(e) => houtln!("{:26}system calls: {e}", ""),
                }
                houtln!(
                    "{:26}processes: {}",
                    "",
                    vouch_repo::sandbox::PROCESS_LIMIT_NOTE
                );
            }
            Err(e) => houtln!(
                "  {:<10} {:<12} patch attempts refuse to run commands and checks: {e}",
                "sandbox",
                "unavailable"
            ),
        }
        for r in &report.stuck_routes {
            houtln!(
                "notification route `{}` is stuck: {} waiting, {} failed tries; last: {}",
                r.route,
                r.waiting,
                r.failures,
                r.last_error
            );
            houtln!("  next: {}", r.next_step);
        }
    }
    Ok(0)
}

pub fn ledger(dir: &Path, json: bool) -> Result<i32> {
    let host = open_host(dir, false)?;
    let entries = host.ledger()?;
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

pub fn inbox(dir: &Path, count: bool, json: bool) -> Result<i32> {
    let host = open_host(dir, false)?;
    if count {
        // Computed from openable items now (§11.4), never stored.
        let waiting = host.badge()?;
        if json {
            outln!("{}", json!({"waiting": waiting}));
        } else {
            houtln!("{}", waiting);
        }
        return Ok(0);
    }
    let inbox = host.inbox()?;
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
