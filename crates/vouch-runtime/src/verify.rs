//! `vouch journal verify`: the store's own check (chains, rows, integrity) and then the
//! host's — every journal body parses as its kind's type (§3.4.2), and every table agrees
//! with what binds it (§10.2): a run's row with its `run_created` event and terminal record,
//! its receipt with the hash its terminal record holds, its cards with the journal, each
//! payload with its hash, each ledger key with its fields. A body that does not parse is
//! reported like a broken chain; a row that disagrees is damage. What was found is kept in
//! the store, which refuses new runs until it is repaired or acknowledged.

use std::collections::{HashMap, HashSet};
use vouch_core::{ledger_key, payload_hash, sha256_hex};
use vouch_store::journal as j;
use vouch_store::{
    CardState, ChainBreak, DamageClosed, DamageRecord, Event, JournalEntry, RunRecord, Store,
    StoreResult, VerifyReport,
};

pub fn verify(store: &dyn Store) -> StoreResult<VerifyReport> {
    let mut report = store.verify()?;
    if !report.damage.is_empty() {
        // The store itself is damaged: what it names comes first; its rows cannot be trusted
        // to read back, so bodies are not checked on top of it.
        return Ok(report);
    }
    let runs = match store.runs(i64::MAX as usize) {
        Ok(r) => r,
        Err(e) => {
            report
                .damage
                .push(format!("runs: not every run can be read ({e})"));
            return Ok(report);
        }
    };
    let mut payloads = HashSet::new();
    for run in runs {
        if report.breaks.iter().any(|b| b.run_id == run.id) {
            continue;
        }
        let journal = match store.journal(&run.id) {
            Ok(j) => j,
            Err(e) => {
                report
                    .damage
                    .push(format!("run {}: its journal cannot be read ({e})", run.id));
                continue;
            }
        };
        let mut events = Vec::with_capacity(journal.len());
        let mut first_bad = None;
        for e in &journal {
            match Event::parse(e.kind, &e.body) {
                Ok(ev) => events.push((e, ev)),
                Err(err) => {
                    first_bad.get_or_insert((e.seq, err));
                }
            }
        }
        if let Some((seq, err)) = first_bad {
            report.breaks.push(ChainBreak {
                run_id: run.id.clone(),
                seq,
                reason: err.to_string(),
            });
        }
        let found = run_bindings(store, &run, &events, &mut payloads);
        report.damage.extend(found);
    }
    report.damage.extend(ledger_bindings(store));
    Ok(report)
}

/// The run's row against its `run_created` event and terminal record, its receipt against
/// the terminal record's hash, its cards against the journal, and the payloads they name.
fn run_bindings(
    store: &dyn Store,
    run: &RunRecord,
    events: &[(&JournalEntry, Event)],
    payloads: &mut HashSet<String>,
) -> Vec<String> {
    let mut found = vec![];
    let id = &run.id;
    if let Some((_, Event::RunCreated(c))) = events.first() {
        let spec_changed = c
            .spec_sha256
            .as_ref()
            .is_some_and(|h| payload_hash(&run.spec).ok().as_ref() != Some(h));
        for (field, differs) in [
            ("title", c.title != run.title),
            ("trigger", c.trigger != run.trigger),
            ("parent", c.parent != run.parent),
            ("scope", c.scope != run.scope),
            ("spec", spec_changed),
        ] {
            if differs {
                found.push(format!(
                    "table runs: run {id}: its {field} does not match its run_created event (changed after the run was created)"
                ));
            }
        }
    }
    let terminal = events.iter().find_map(|(_, e)| match e {
        Event::Terminal(t) => Some(t.as_ref()),
        _ => None,
    });
    found.extend(receipt_binding(store, run, terminal));
    found.extend(card_bindings(store, run, events, payloads));
    for (_, e) in events {
        if let Event::Drafted(d) = e {
            if !d.payload_hash.is_empty() {
                found.extend(payload_binding(store, &d.payload_hash, payloads));
            }
        }
    }
    found
}

fn receipt_binding(
    store: &dyn Store,
    run: &RunRecord,
    terminal: Option<&j::Terminal>,
) -> Vec<String> {
    let id = &run.id;
    let receipt = match store.receipt(id) {
        Ok(r) => r,
        Err(e) => {
            return vec![format!(
                "table receipts: run {id}: its receipt cannot be read ({e})"
            )]
        }
    };
    let Some(t) = terminal else {
        return match receipt {
            Some(_) => vec![format!(
                "table receipts: run {id} has a receipt but no terminal record"
            )],
            None => vec![],
        };
    };
    let mut found = vec![];
    if run.outcome != Some(t.outcome) || run.ended_by != Some(t.ended_by) {
        found.push(format!(
            "table runs: run {id}: its outcome or ended_by does not match its terminal record"
        ));
    }
    match (receipt, &t.receipt_sha256) {
        (None, _) => found.push(format!(
            "table receipts: run {id}: the receipt of this ended run is missing"
        )),
        (Some(text), Some(h)) if sha256_hex(text.as_bytes()) != *h => found.push(format!(
            "table receipts: run {id}: the receipt does not match the hash in its terminal record (changed after the run ended)"
        )),
        _ => {}
    }
    found
}

/// Each card against the journal: an approval card was requested with its hash, summary and
/// reason; a decision the journal holds is the card's state; a question was asked, and its
/// answer is the journal's. A card decided while the journal has no decision yet is the
/// window a crash can leave (§7.1) on a run that has not ended, and damage on one that has.
fn card_bindings(
    store: &dyn Store,
    run: &RunRecord,
    events: &[(&JournalEntry, Event)],
    payloads: &mut HashSet<String>,
) -> Vec<String> {
    let id = &run.id;
    let cards = match store.cards_for_run(id) {
        Ok(c) => c,
        Err(e) => {
            return vec![format!(
                "table cards: run {id}: its cards cannot be read ({e})"
            )]
        }
    };
    let mut requested: HashMap<(&str, &str), &j::ApprovalRequested> = HashMap::new();
    let mut decided: HashMap<(&str, &str), CardState> = HashMap::new();
    let (mut asked, mut answers) = (false, vec![]);
    for (e, ev) in events {
        let d = e.delivery.as_deref().unwrap_or("");
        match ev {
            Event::ApprovalRequested(r) => {
                requested.insert((d, r.payload_hash.as_str()), r);
            }
            Event::ApprovalGranted(g) if g.carried_from.is_none() => {
                decided.insert((d, g.payload_hash.as_str()), CardState::Approved);
            }
            Event::ApprovalDenied(x) => {
                decided.insert((d, x.payload_hash.as_str()), CardState::Denied);
            }
            Event::ClarifyAsked(_) => asked = true,
            Event::ClarifyAnswered(a) => answers.push(a.answer.as_str()),
            _ => {}
        }
    }
    let ended = run.state == vouch_core::RunState::Ended;
    let mut found = vec![];
    for c in &cards {
        let Some(d) = c.delivery.as_deref() else {
            let answer_differs = c
                .answer
                .as_deref()
                .is_some_and(|a| !answers.is_empty() && !answers.contains(&a));
            if !asked || answer_differs {
                found.push(format!(
                    "table cards: run {id}: its question card does not match the journal (no question asked, or another answer)"
                ));
            }
            continue;
        };
        let short = c.payload_hash.get(..12).unwrap_or(&c.payload_hash);
        let at = format!("table cards: run {id}: the card for `{d}` ({short}…)");
        match requested.get(&(d, c.payload_hash.as_str())) {
            None => found.push(format!(
                "{at} has no approval_requested event in the journal"
            )),
            Some(r) if r.summary != c.summary || (!c.reason.is_empty() && r.reason != c.reason) => {
                found.push(format!(
                    "{at}: its summary or reason does not match the journal"
                ))
            }
            Some(_) => {}
        }
        let journal_says = decided.get(&(d, c.payload_hash.as_str())).copied();
        let state_differs = match journal_says {
            Some(s) => c.state != s,
            // Approved with no grant journaled: start-up writes the grant before it ends a run.
            None => ended && c.state == CardState::Approved,
        };
        if state_differs {
            found.push(format!(
                "{at} is {} but the journal says otherwise",
                c.state.as_str()
            ));
        }
        found.extend(payload_binding(store, &c.payload_hash, payloads));
    }
    found
}

/// A payload read back and hashed again (once per hash).
fn payload_binding(store: &dyn Store, hash: &str, seen: &mut HashSet<String>) -> Option<String> {
    if !seen.insert(hash.to_string()) {
        return None;
    }
    let why = match store.payload(hash) {
        Err(e) => format!("cannot be read ({e})"),
        Ok(None) => "is missing".to_string(),
        Ok(Some(text)) => match serde_json::from_str(&text).map(|v| payload_hash(&v)) {
            Ok(Ok(h)) if h == hash => return None,
            _ => "does not match its hash (changed after it was stored)".to_string(),
        },
    };
    Some(format!("table payloads: payload {hash} {why}"))
}

/// Each ledger key is the hash of its scope, delivery and payload hash (§8.1).
fn ledger_bindings(store: &dyn Store) -> Vec<String> {
    match store.ledger_list() {
        Err(e) => vec![format!("table ledger: it cannot be read ({e})")],
        Ok(entries) => entries
            .iter()
            .filter(|l| ledger_key(&l.scope, &l.delivery, &l.payload_hash) != l.key)
            .map(|l| {
                format!(
                    "table ledger: entry {} (run {}, `{}`): its scope, delivery or payload hash does not match its key",
                    l.key, l.run_id, l.delivery
                )
            })
            .collect(),
    }
}

/// What one `vouch journal verify` found and did about it.
#[derive(Debug, Clone)]
pub struct Verified {
    pub report: VerifyReport,
    /// Damage kept and still open: while there is any, new runs are refused.
    pub open: Vec<DamageRecord>,
    /// Records this verification closed (acknowledged, or repaired when intact).
    pub closed: usize,
    /// Why nothing could be kept (the store is read-only), if so.
    pub not_kept: Option<String>,
}

/// Verify, then keep what was found (§10.2): findings the store has not seen before become an
/// open record, which refuses new runs; an intact store closes open records as repaired;
/// `acknowledge` closes them as the person's choice to go on.
pub fn verify_and_keep(store: &dyn Store, now_ms: i64, acknowledge: bool) -> StoreResult<Verified> {
    let report = verify(store)?;
    let mut v = Verified {
        report,
        open: vec![],
        closed: 0,
        not_kept: store.read_only(),
    };
    if v.not_kept.is_none() {
        if !v.report.intact() {
            store.record_damage(&findings(&v.report), now_ms)?;
        }
        let how = if acknowledge {
            Some(DamageClosed::Acknowledged)
        } else if v.report.intact() {
            Some(DamageClosed::Repaired)
        } else {
            None
        };
        if let Some(how) = how {
            v.closed = store.close_damage(how, now_ms)?;
        }
    }
    v.open = store.open_damage()?;
    Ok(v)
}

/// A report's damage and broken chains, one line each, in the report's order.
pub fn findings(report: &VerifyReport) -> Vec<String> {
    report
        .damage
        .iter()
        .cloned()
        .chain(
            report
                .breaks
                .iter()
                .map(|b| format!("run {} event #{}: {}", b.run_id, b.seq, b.reason)),
        )
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;
    use vouch_core::TriggerKind;
    use vouch_store::{EventKind, NewEvent, NewRun};
    use vouch_store_sqlite::SqliteStore;

    #[test]
    fn a_body_written_outside_the_host_is_reported_with_its_seq_and_kind() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("v.db")).unwrap();
        for id in ["good", "bad"] {
            s.create_run(&NewRun {
                state: vouch_core::RunState::Created,
                id: id.into(),
                trigger: TriggerKind::Interactive,
                title: id.into(),
                chain_root: id.into(),
                parent: None,
                scope: id.into(),
                spec: json!({}),
                created_ms: 1,
                lease: None,
            })
            .unwrap();
            let created = Event::from(vouch_store::journal::RunCreated {
                title: id.into(),
                trigger: TriggerKind::Interactive,
                parent: None,
                scope: id.into(),
                spec_sha256: None,
            });
            s.append(id, &created.at(1)).unwrap();
        }
        // The chain is intact (written through the store), but the body is not an evidence.
        s.append(
            "bad",
            &NewEvent::for_delivery(EventKind::Evidence, "d1", 2, json!({"status": "sent!"})),
        )
        .unwrap();
        assert!(
            s.verify().unwrap().intact(),
            "the store's own check sees a sound chain"
        );
        let report = verify(&s).unwrap();
        assert_eq!(report.breaks.len(), 1, "{report:?}");
        let b = &report.breaks[0];
        assert_eq!((b.run_id.as_str(), b.seq), ("bad", 2));
        assert!(b.reason.contains("evidence"), "{}", b.reason);
    }
}
