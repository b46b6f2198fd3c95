//! The invariants (contract §1, §8, §12, §13), checked on what the store holds and what the
//! simulated providers saw — never on what the host said it did.

use crate::world::{dedups, Effect};
use std::collections::{BTreeMap, BTreeSet};
use vouch_core::board::AttemptState;
use vouch_core::{DeliveryStatus, DestinationKind, Outcome, RunState, TriggerKind};
use vouch_runtime::view::RunView;
use vouch_store::board::BoardStore;
use vouch_store::{EventKind, Store, StoreError};

/// An invariant that does not hold, and what shows it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub invariant: &'static str,
    pub detail: String,
}

pub type Check = Result<(), Violation>;

pub fn violation(invariant: &'static str, detail: impl Into<String>) -> Violation {
    Violation {
        invariant,
        detail: detail.into(),
    }
}

impl From<StoreError> for Violation {
    fn from(e: StoreError) -> Self {
        violation("the store answers", e.to_string())
    }
}

/// One run: its chain is intact; ended ⇔ exactly one terminal record and one receipt; no claim
/// word on the receipt's line of a delivery that is not `verified` (I1, I6).
pub fn run(store: &dyn Store, id: &str) -> Check {
    let rec = store
        .run(id)?
        .ok_or_else(|| violation("runs are never lost", format!("run {id} is gone")))?;
    let journal = store.journal(id)?;
    vouch_store::verify_chain(&journal).map_err(|b| {
        violation(
            "chains intact",
            format!("run {id}: seq {}: {}", b.seq, b.reason),
        )
    })?;
    let terminals = journal
        .iter()
        .filter(|e| e.kind == EventKind::Terminal)
        .count();
    let receipt = store.receipt(id)?;
    let ended = rec.state == RunState::Ended;
    if ended != (terminals == 1) || terminals > 1 {
        return Err(violation(
            "every ended run has exactly one terminal record",
            format!(
                "run {id} is {} with {terminals} terminal records",
                rec.state.as_str()
            ),
        ));
    }
    let Some(receipt) = receipt.filter(|r| !r.trim().is_empty()) else {
        if ended {
            return Err(violation(
                "every ended run has exactly one receipt",
                format!("run {id} ended without a receipt"),
            ));
        }
        return Ok(());
    };
    if !ended {
        return Err(violation(
            "a receipt only for an ended run",
            format!("run {id} is {} and has a receipt", rec.state.as_str()),
        ));
    }
    claim_words(id, &journal, &receipt)
}

/// I6: a delivery's receipt line says a claim word (or shows ✓) only if it is `verified`.
fn claim_words(id: &str, journal: &[vouch_store::JournalEntry], receipt: &str) -> Check {
    let view = RunView::from_journal(journal);
    let Some(t) = &view.terminal else {
        return Err(violation(
            "every ended run has exactly one terminal record",
            format!("run {id}: its terminal record does not read"),
        ));
    };
    for (d, status) in &t.statuses {
        if *status == DeliveryStatus::Verified {
            continue;
        }
        for line in receipt.lines().map(str::trim_start) {
            let mut words = line.splitn(3, ' ');
            let (mark, item) = (words.next(), words.next());
            if item != Some(d.as_str()) || mark.is_none_or(|m| m.chars().count() != 1) {
                continue;
            }
            if mark == Some("✓") || vouch_core::receipt::has_claim_word(line) {
                return Err(violation(
                    "no claim word without verified",
                    format!(
                        "run {id}: {d} is {} but its line reads {line:?}",
                        status.as_str()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// What the simulated person did that the effects are judged by.
#[derive(Debug, Default)]
pub struct Approvals {
    /// (ledger scope, delivery, payload hash) the person approved.
    pub granted: BTreeSet<(String, String, String)>,
}

/// The providers' side: no irreversible act twice per key (I5); every irreversible act
/// carries a key (I3) and executes a payload the person approved by its hash, or is trusted
/// automation of an autonomous run (I4, R8). Checks the effects from `from` on.
pub fn effects(
    store: &dyn Store,
    effects: &[Effect],
    from: usize,
    per_key: &mut BTreeMap<String, u32>,
    approvals: &Approvals,
) -> Check {
    for e in effects.iter().skip(from) {
        let kind = e.destination.split(':').next().unwrap_or_default();
        let irreversible_kind = matches!(kind, "email" | "webhook" | "payment");
        let Some(key) = &e.key else {
            if irreversible_kind {
                return Err(violation(
                    "an irreversible act is in the ledger before it is attempted",
                    format!(
                        "run {} {}: {} without a ledger key",
                        e.run_id, e.delivery, e.destination
                    ),
                ));
            }
            continue;
        };
        let n = per_key.entry(key.clone()).or_insert(0);
        *n += 1;
        let dest = destination_of(&e.destination);
        if *n > 1 && !dest.as_ref().is_some_and(dedups) {
            return Err(violation(
                "no act twice per key",
                format!(
                    "key {key} ({} of run {}) applied {n} times at {}",
                    e.delivery, e.run_id, e.destination
                ),
            ));
        }
        approved(store, e, approvals)?;
    }
    Ok(())
}

fn destination_of(key: &str) -> Option<vouch_core::Destination> {
    let (kind, address) = key.split_once(':')?;
    let kind: DestinationKind = serde_json::from_value(serde_json::json!(kind)).ok()?;
    Some(vouch_core::Destination {
        kind,
        address: address.to_string(),
    })
}

fn approved(store: &dyn Store, e: &Effect, approvals: &Approvals) -> Check {
    let run = store.run(&e.run_id)?.ok_or_else(|| {
        violation(
            "runs are never lost",
            format!("run {} applied an effect and is gone", e.run_id),
        )
    })?;
    let want = (
        run.scope.clone(),
        e.delivery.clone(),
        e.payload_hash.clone(),
    );
    if approvals.granted.contains(&want) {
        return Ok(());
    }
    let automated = run.trigger != TriggerKind::Interactive
        && e.destination
            .starts_with(&format!("webhook:{}", crate::world::DEDUP_WEBHOOK));
    if automated {
        return Ok(());
    }
    Err(violation(
        "approvals bound to the hash",
        format!(
            "run {} ({}) executed {} at {} with payload {} that no one approved",
            e.run_id,
            run.trigger.as_str(),
            e.delivery,
            e.destination,
            e.payload_hash
        ),
    ))
}

/// §13: a task is accepted at most once, and only by the attempt it names.
pub fn task(board: &dyn BoardStore, id: &str) -> Check {
    let Some(t) = board.task(id)? else {
        return Err(violation(
            "tasks are never lost",
            format!("task {id} is gone"),
        ));
    };
    let attempts = board.attempts(id)?;
    let accepted: Vec<u32> = attempts
        .iter()
        .filter(|a| a.state == AttemptState::Completed && a.result_id.is_some())
        .map(|a| a.n)
        .collect();
    if accepted.len() > 1
        || (accepted.first().copied() != t.accepted_attempt && !accepted.is_empty())
    {
        return Err(violation(
            "every task accepted at most once",
            format!(
                "task {id}: attempts {accepted:?} completed, the task names {:?}",
                t.accepted_attempt
            ),
        ));
    }
    Ok(())
}

/// §12: every slot ran once: of the runs created for a slot, at most one is not `missed`.
pub fn slot(store: &dyn Store, slot: &str, runs: &[String]) -> Check {
    let mut live = vec![];
    for id in runs {
        let Some(r) = store.run(id)? else {
            return Err(violation(
                "runs are never lost",
                format!("run {id} is gone"),
            ));
        };
        if r.outcome != Some(Outcome::Missed) {
            live.push(id.clone());
        }
    }
    if live.len() > 1 {
        return Err(violation(
            "every slot once",
            format!("slot {slot} ran as {live:?}"),
        ));
    }
    Ok(())
}
