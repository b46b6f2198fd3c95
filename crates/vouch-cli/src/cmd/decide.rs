//! The person's decisions (§7, §9.4): approvals listed, approve, deny, edit, answer, cancel, resume.

use crate::cmd::runs::{finish, host_run, the_run};
use crate::out;
use crate::{bad, host_err, open_host};
use anyhow::Result;
use serde_json::{json, Value};
use std::path::Path;
use vouch_runtime::host::{RunEnd, TaskDecision};
use vouch_runtime::runs::Named;

/// The person at this command line, named on each decision it journals (§17.1.1).
pub fn local_user() -> vouch_core::Principal {
    vouch_core::Principal::local_user(std::env::var("USER").ok().as_deref())
}

pub fn resume(dir: &Path, run: &str, json: bool) -> Result<i32> {
    let host = open_host(dir, !json)?;
    let rec = host_run(&host, run)?;
    let (id, end) = host.resume(&rec.id).map_err(host_err)?;
    finish(&host, &id, &end, json)
}

pub fn approvals(dir: &Path, json: bool) -> Result<i32> {
    let host = open_host(dir, false)?;
    let cards = host.approvals()?;
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

/// The host routes the decision (a run inside a task attempt, or a plain run); this renders.
fn decide(
    dir: &Path,
    host: &vouch_runtime::Host,
    run: &str,
    d: &TaskDecision,
    json: bool,
) -> Result<i32> {
    let (_, board) = crate::task::open_board(dir)?;
    let decided = host
        .decide(Some(&*board), run, d, Some(&local_user()))
        .map_err(host_err)?;
    match &decided.task {
        Some(task) => crate::task::decided_on_board(run, &decided.end, task, json),
        None => finish(host, run, &decided.end, json),
    }
}

/// What a decision answers: an approval card of a delivery, or the run's question.
#[derive(Clone, Copy)]
enum Waits<'a> {
    Approval(&'a str),
    Question,
}

/// A run a decision addresses: `last` means the newest run that waits for this decision (an
/// open card of that delivery, or a question), not the newest run — the newest run is often
/// one that already ended. Anything else is a run id or a unique prefix, as everywhere.
fn find_waiting(
    host: &vouch_runtime::Host,
    run: &str,
    waits: Waits<'_>,
) -> Result<vouch_store::RunRecord> {
    let delivery = match waits {
        Waits::Approval(d) => Some(d),
        Waits::Question => None,
    };
    match host.named_waiting(run, delivery)? {
        Named::NothingWaits => Err(bad(match waits {
            Waits::Approval(d) => format!(
                "no run waits for your approval of {d}, so there is no `last` one; `vouch approvals` lists what waits"
            ),
            Waits::Question => "no run waits for an answer, so there is no `last` one; `vouch approvals` lists what waits".to_string(),
        })),
        named => the_run(run, named),
    }
}

pub fn approve(dir: &Path, run: &str, delivery: &str, hash: &str, json: bool) -> Result<i32> {
    let host = open_host(dir, !json)?;
    let rec = find_waiting(&host, run, Waits::Approval(delivery))?;
    let d = TaskDecision::Approve {
        delivery: delivery.to_string(),
        hash: hash.to_string(),
    };
    decide(dir, &host, &rec.id, &d, json)
}

pub fn deny(dir: &Path, run: &str, delivery: &str, json: bool) -> Result<i32> {
    let host = open_host(dir, !json)?;
    let rec = find_waiting(&host, run, Waits::Approval(delivery))?;
    let d = TaskDecision::Deny {
        delivery: delivery.to_string(),
    };
    decide(dir, &host, &rec.id, &d, json)
}

pub fn edit(dir: &Path, run: &str, delivery: &str, payload: &Path, json: bool) -> Result<i32> {
    let host = open_host(dir, false)?;
    let rec = find_waiting(&host, run, Waits::Approval(delivery))?;
    let text = vouch_runtime::bounded::read_text(
        payload,
        "payload file",
        vouch_runtime::bounded::INPUT_FILE_BYTES_MAX,
    )
    .map_err(|e| bad(e.to_string()))?;
    let value: Value = serde_json::from_str(&text).map_err(|e| {
        bad(format!(
            "payload file {} is not JSON: {e}",
            payload.display()
        ))
    })?;
    crate::refuse_nul(&value, "payload file", payload)?;
    let hash = host
        .edit_by(&rec.id, delivery, &value, &local_user())
        .map_err(host_err)?;
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

pub fn answer(dir: &Path, run: &str, text: &str, json: bool) -> Result<i32> {
    let host = open_host(dir, !json)?;
    let rec = find_waiting(&host, run, Waits::Question)?;
    let d = TaskDecision::Answer {
        text: text.to_string(),
    };
    decide(dir, &host, &rec.id, &d, json)
}

pub fn cancel(dir: &Path, run: &str, json: bool) -> Result<i32> {
    let host = open_host(dir, false)?;
    let rec = host_run(&host, run)?;
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
