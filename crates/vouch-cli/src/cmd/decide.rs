//! The person's decisions (§7, §9.4): approvals listed, approve, deny, edit, answer, cancel, resume.

use crate::cmd::runs::{find_run, finish};
use crate::out;
use crate::{bad, host_err, open_host};
use anyhow::Result;
use serde_json::{json, Value};
use std::path::Path;
use vouch_runtime::host::{RunEnd, TaskDecision};

/// The person at this command line, named on each decision it journals (§17.1.1).
pub fn local_user() -> vouch_core::Principal {
    vouch_core::Principal::local_user(std::env::var("USER").ok().as_deref())
}

pub fn resume(dir: &Path, run: &str, json: bool) -> Result<i32> {
    let host = open_host(dir, !json)?;
    let rec = find_run(host.store.as_ref(), run)?;
    let (id, end) = host.resume(&rec.id).map_err(host_err)?;
    finish(&host, &id, &end, json)
}

pub fn approvals(dir: &Path, json: bool) -> Result<i32> {
    let host = open_host(dir, false)?;
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
    store: &dyn vouch_store::Store,
    run: &str,
    waits: Waits<'_>,
) -> Result<vouch_store::RunRecord> {
    if run != "last" || store.run(run)?.is_some() {
        return find_run(store, run);
    }
    let newest = store
        .open_cards()?
        .into_iter()
        .filter(|c| match waits {
            Waits::Approval(d) => c.delivery.as_deref() == Some(d),
            Waits::Question => c.delivery.is_none(),
        })
        .max_by_key(|c| c.created_ms);
    match newest {
        Some(c) => find_run(store, &c.run_id),
        None => Err(bad(match waits {
            Waits::Approval(d) => format!(
                "no run waits for your approval of {d}, so there is no `last` one; `vouch approvals` lists what waits"
            ),
            Waits::Question => "no run waits for an answer, so there is no `last` one; `vouch approvals` lists what waits".to_string(),
        })),
    }
}

pub fn approve(dir: &Path, run: &str, delivery: &str, hash: &str, json: bool) -> Result<i32> {
    let host = open_host(dir, !json)?;
    let rec = find_waiting(host.store.as_ref(), run, Waits::Approval(delivery))?;
    let d = TaskDecision::Approve {
        delivery: delivery.to_string(),
        hash: hash.to_string(),
    };
    decide(dir, &host, &rec.id, &d, json)
}

pub fn deny(dir: &Path, run: &str, delivery: &str, json: bool) -> Result<i32> {
    let host = open_host(dir, !json)?;
    let rec = find_waiting(host.store.as_ref(), run, Waits::Approval(delivery))?;
    let d = TaskDecision::Deny {
        delivery: delivery.to_string(),
    };
    decide(dir, &host, &rec.id, &d, json)
}

pub fn edit(dir: &Path, run: &str, delivery: &str, payload: &Path, json: bool) -> Result<i32> {
    let host = open_host(dir, false)?;
    let rec = find_waiting(host.store.as_ref(), run, Waits::Approval(delivery))?;
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
    let rec = find_waiting(host.store.as_ref(), run, Waits::Question)?;
    let d = TaskDecision::Answer {
        text: text.to_string(),
    };
    decide(dir, &host, &rec.id, &d, json)
}

pub fn cancel(dir: &Path, run: &str, json: bool) -> Result<i32> {
    let host = open_host(dir, false)?;
    let rec = find_run(host.store.as_ref(), run)?;
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
