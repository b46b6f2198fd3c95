#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 21 #5: `vouch journal verify` missed rows changed behind vouch's back — receipts,
//! payloads (their hash was not recomputed), cards and `runs.spec`. Each table is now checked
//! against what binds it (§10.2), what was found is kept in the store, and a store found
//! damaged refuses new runs — reading stays possible — until the damage is repaired or
//! acknowledged (`vouch journal verify --acknowledge`). Raw SQL alters one table at a time,
//! on SQLite and on PostgreSQL.

mod support;

use serde_json::json;
use std::process::Output;
use support::{email_waiting_for_approval, Backend, Home, SmtpSink};

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn verify_checks_every_table_and_a_damaged_store_refuses_new_runs() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        damaged_store_refuses_new_runs(backend);
    }
}

fn damaged_store_refuses_new_runs(backend: Backend) {
    let tmp = tempfile::tempdir().unwrap();
    let sink = SmtpSink::start(&tmp.path().join("mail"));
    let (h, card) = email_waiting_for_approval(backend, &sink, "The approved numbers.");
    let run = card["run"].as_str().unwrap().to_string();
    let hash = card["payload_hash"].as_str().unwrap().to_string();
    let out = h.vouch(&["approve", &run, "d1", "--hash", &hash], &[]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(sink.count(), 1);
    // A whole life (card, approval, ledger, receipt) verifies intact: no false alarm.
    let out = h.vouch(&["journal", "verify"], &[]);
    assert_eq!(out.status.code(), Some(0), "{backend:?}: {}", text(&out));

    let quiet = h.script(&json!([{"final": "nothing to do"}]));
    let tampers = [
        (
            format!("UPDATE receipts SET text = text || ' (edited)' WHERE run_id = '{run}'"),
            format!("table receipts: run {run}: the receipt does not match"),
        ),
        (
            "UPDATE payloads SET body = replace(body, 'approved', 'other')".to_string(),
            format!("table payloads: payload {hash} does not match its hash"),
        ),
        (
            format!("UPDATE cards SET state = 'denied' WHERE run_id = '{run}'"),
            format!("table cards: run {run}: the card for `d1`"),
        ),
        (
            format!(
                "UPDATE runs SET spec = replace(spec, 'board@example.com', 'thief@example.com') WHERE id = '{run}'"
            ),
            format!("table runs: run {run}: its spec does not match"),
        ),
        (
            "UPDATE ledger SET delivery = 'd2'".to_string(),
            "table ledger: entry".to_string(),
        ),
    ];
    for (sql, named) in tampers {
        let at = format!("{backend:?} after `{sql}`");
        h.raw_sql(&sql);
        let out = h.vouch(&["journal", "verify"], &[]);
        assert_eq!(out.status.code(), Some(1), "{at}: {}", text(&out));
        assert!(
            text(&out).contains(&named),
            "{at}: verify names it: {}",
            text(&out)
        );
        assert!(
            text(&out).contains("vouch journal verify --acknowledge"),
            "{at}: {}",
            text(&out)
        );

        // New runs are refused, naming the damage and the command; nothing is created.
        let runs_before = h.json(&["runs", "list"]).as_array().unwrap().len();
        let out = h.vouch(&["run", "Anything", "--script", &quiet], &[]);
        assert_eq!(out.status.code(), Some(2), "{at}: {}", text(&out));
        let said = text(&out);
        assert!(said.contains("marked damaged"), "{at}: {said}");
        assert!(
            said.contains("vouch journal verify --acknowledge"),
            "{at}: {said}"
        );
        assert!(
            said.contains(&named),
            "{at}: the refusal names the damage: {said}"
        );
        // Reading stays possible.
        assert_eq!(
            h.json(&["runs", "list"]).as_array().unwrap().len(),
            runs_before,
            "{at}"
        );
        assert!(h.vouch(&["receipt", &run], &[]).status.success(), "{at}");

        // Acknowledged: runs start again, though verify still reports the damage.
        let out = h.vouch(&["journal", "verify", "--acknowledge"], &[]);
        assert_eq!(out.status.code(), Some(1), "{at}: {}", text(&out));
        assert!(text(&out).contains("Acknowledged"), "{at}: {}", text(&out));
        let out = h.vouch(&["run", "After acknowledging", "--script", &quiet], &[]);
        assert!(out.status.success(), "{at}: {}", text(&out));
        // Verifying again the same damage does not refuse again.
        assert_eq!(h.vouch(&["journal", "verify"], &[]).status.code(), Some(1));
        let out = h.vouch(&["run", "Still fine", "--script", &quiet], &[]);
        assert!(out.status.success(), "{at}: {}", text(&out));
    }
    assert_eq!(sink.count(), 1, "nothing was sent again");
}

#[test]
fn acknowledge_goes_with_verify_only() {
    let h = Home::new("");
    let out = h.vouch(&["journal", "last", "--acknowledge"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let out = h.vouch(&["journal", "verify", "--acknowledge"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert!(
        text(&out).contains("Nothing to acknowledge"),
        "{}",
        text(&out)
    );
}

/// A store put back as it was (repaired from a backup, or the row restored) verifies intact,
/// and that verification closes the damage it kept: runs start again without acknowledging.
#[test]
fn a_repaired_store_starts_runs_again() {
    for backend in [Backend::Sqlite, Backend::Postgres] {
        let h = Home::on(backend, "");
        let s = h.script(&json!([{"final": "nothing to do"}]));
        assert!(h
            .vouch(&["run", "Quiet", "--script", &s], &[])
            .status
            .success());
        h.raw_sql("UPDATE runs SET title = 'Loud'");
        let out = h.vouch(&["journal", "verify"], &[]);
        assert_eq!(out.status.code(), Some(1), "{backend:?}: {}", text(&out));
        assert!(
            text(&out).contains("its title does not match"),
            "{}",
            text(&out)
        );
        let out = h.vouch(&["run", "Refused", "--script", &s], &[]);
        assert_eq!(out.status.code(), Some(2), "{backend:?}: {}", text(&out));
        h.raw_sql("UPDATE runs SET title = 'Quiet'");
        let out = h.vouch(&["journal", "verify"], &[]);
        assert_eq!(out.status.code(), Some(0), "{backend:?}: {}", text(&out));
        assert!(text(&out).contains("repaired"), "{}", text(&out));
        let out = h.vouch(&["run", "Again", "--script", &s], &[]);
        assert!(out.status.success(), "{backend:?}: {}", text(&out));
    }
}
