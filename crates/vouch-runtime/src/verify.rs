//! `vouch journal verify`: the store's own check (chains, rows, integrity) and then the
//! host's — every journal body parses as its kind's type (§3.4.2). A body that does not is
//! reported like a broken chain: something wrote it outside the host.

use vouch_store::{ChainBreak, Event, Store, StoreResult, VerifyReport};

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
        let first_bad = journal
            .into_iter()
            .find_map(|e| Event::parse(e.kind, &e.body).err().map(|err| (e.seq, err)));
        if let Some((seq, err)) = first_bad {
            report.breaks.push(ChainBreak {
                run_id: run.id.clone(),
                seq,
                reason: err.to_string(),
            });
        }
    }
    Ok(report)
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
