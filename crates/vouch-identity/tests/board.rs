#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The board's signature seam with real Ed25519 identities on a real SQLite store: a claim or
//! report that is unsigned, signed by another identity or signed over something else is
//! refused and changes nothing; signed by the claimant, it is written with its signature.

use serde_json::json;
use std::sync::Arc;
use vouch_core::board::TaskState;
use vouch_identity::board::{sign_statement, StoreVerifier};
use vouch_identity::Identity;
use vouch_store::board::{
    claim_statement, report_statement, AttemptRef, BoardStore, Report, ReportKind, Usage, Verified,
};
use vouch_store::board_conformance::{claim_req, new_task};
use vouch_store::{IdentityStore, StoreError};
use vouch_store_sqlite::SqliteStore;

fn refused<T: std::fmt::Debug>(r: Result<T, StoreError>, what: &str) {
    match r {
        Err(StoreError::Conflict(_)) => {}
        other => panic!("{what} must be refused, got {other:?}"),
    }
}

#[test]
fn claims_and_reports_are_checked_with_the_stored_keys() {
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(SqliteStore::open(&dir.path().join("vouch.db")).unwrap());
    let worker = Identity::from_secret("worker-1", &[1; 32]);
    let intruder = Identity::from_secret("intruder", &[2; 32]);
    store.put_identity(&worker.record(1)).unwrap();
    store.put_identity(&intruder.record(1)).unwrap();
    let board = Verified {
        inner: store.clone(),
        verifier: Arc::new(StoreVerifier {
            store: store.clone(),
        }),
    };
    board.offer(&new_task("t1", 1, 1)).unwrap();

    let mut req = claim_req("worker-1", Some("t1"), 10);
    req.nonce = Some("claim-nonce-00000001".into());
    refused(board.claim(&req), "an unsigned claim");
    req.signature = Some(sign_statement(&intruder, &claim_statement(&req).unwrap()).unwrap());
    refused(board.claim(&req), "a claim signed by another identity");
    assert_eq!(board.task("t1").unwrap().unwrap().state, TaskState::Queued);
    req.signature = Some(sign_statement(&worker, &claim_statement(&req).unwrap()).unwrap());
    let c = board
        .claim(&req)
        .unwrap()
        .expect("the signed claim wins the task");

    let mut r = Report {
        attempt: AttemptRef {
            task_id: c.task.id.clone(),
            n: c.attempt.n,
            claimant: c.attempt.claimant.clone(),
            epoch: c.attempt.epoch,
        },
        kind: ReportKind::Accepted {
            result: json!({"summary": "done"}),
            self_assessment: None,
            verdict: None,
        },
        run_id: Some("run-1".into()),
        receipt: Some("receipt".into()),
        usage: Usage {
            turns: 1,
            tokens: 10,
            tool_calls: 1,
            failed_tool_calls: 0,
        },
        signature: None,
        now_ms: 20,
        stamp: Some(vouch_store::board::Stamp {
            at_ms: 20,
            nonce: "report-nonce-0000001".into(),
        }),
    };
    let mut other = r.clone();
    other.kind = ReportKind::Accepted {
        result: json!({"summary": "something else"}),
        self_assessment: None,
        verdict: None,
    };
    let before = (board.task("t1").unwrap(), board.attempts("t1").unwrap());
    refused(board.report(&r), "an unsigned report");
    r.signature = Some(sign_statement(&worker, &report_statement(&other).unwrap()).unwrap());
    refused(board.report(&r), "a report signed over another output");
    r.signature = Some(sign_statement(&intruder, &report_statement(&r).unwrap()).unwrap());
    refused(board.report(&r), "a report signed by another identity");
    assert_eq!(
        before,
        (board.task("t1").unwrap(), board.attempts("t1").unwrap()),
        "nothing changed"
    );
    r.signature = Some(sign_statement(&worker, &report_statement(&r).unwrap()).unwrap());
    let done = board.report(&r).unwrap();
    assert_eq!(done.task.state, TaskState::Completed);
    assert_eq!(done.attempt.detail["report_signature"], json!(r.signature));
    // The same signed report again is a replay: refused before the board looks at it.
    match board.report(&r) {
        Err(StoreError::Conflict(m)) => assert!(m.contains("already used"), "{m}"),
        other => panic!("a replayed report must be refused, got {other:?}"),
    }
}
