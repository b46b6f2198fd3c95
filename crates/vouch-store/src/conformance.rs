//! One storage test suite for every backend (enable the `conformance` feature). A backend's
//! tests invoke [`store_conformance_tests!`] with a function giving a fresh store's guard and an
//! opener over the same data each time (so reopening shows what was durable): one `#[test]`
//! per check. Panics describe the broken rule.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::*;
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use vouch_core::{EndedBy, Outcome, RunState, TriggerKind};

pub type Opener<'a> = &'a dyn Fn() -> Arc<dyn Store>;

/// One `#[test]` per check of this suite, each on a fresh store, so a backend's test run
/// names the rule that broke. `$fresh` is an expression giving `(guard, opener)`: the guard
/// keeps the store's place (a folder, a schema) alive until the test ends; the opener opens
/// the store over the same data each time it is called.
#[macro_export]
macro_rules! store_conformance_tests {
    ($fresh:expr) => {
        $crate::store_conformance_tests!(@each $fresh;
            chains_are_gap_free_and_verify,
            one_terminal_event_per_run,
            ledger_rules,
            cards_supersede_and_decide,
            cancel_closes_every_open_card_and_question,
            slots_are_consumed_once,
            outbox_is_deduplicated_and_marked,
            outbox_failures_are_kept_until_sent,
            leases_and_orphans,
            runs_are_born_leased,
            durable_across_reopen,
            concurrent_appends_keep_chains,
            schedules_crud,
            ended_runs_are_closed,
            races_have_one_winner,
            batches_commit_together,
            lookups_cost_what_is_open,
            api_tokens,
            a_damaged_store_refuses_new_runs_until_acknowledged,
            journal_since_reads_the_tail,
            counts_are_aggregates_of_what_is_stored,
            request_keys_are_kept_once,
            runs_filter_alike_on_every_backend
        );
    };
    (@each $fresh:expr; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                let (_guard, open) = $fresh;
                $crate::conformance::$check(&open);
            }
        )*
    };
}

fn new_run(id: &str) -> NewRun {
    NewRun {
        state: vouch_core::RunState::Created,
        id: id.into(),
        trigger: TriggerKind::Interactive,
        title: format!("run {id}"),
        chain_root: id.into(),
        parent: None,
        scope: id.into(),
        spec: json!({"k": 1}),
        created_ms: 1,
        lease: None,
    }
}

fn ev(n: i64) -> NewEvent {
    NewEvent::new(EventKind::ToolCalled, n, json!({"n": n, "text": "é ✓"}))
}

fn terminal(route_notify: bool, run: &str) -> Terminal {
    Terminal {
        outcome: Outcome::Succeeded,
        ended_by: EndedBy::Loop,
        receipt: format!("Receipt for {run}"),
        body: json!({"outcome": "succeeded"}).into(),
        at_ms: 99,
        outbox: route_notify.then(|| NewOutbox {
            dedup_key: format!("{run}:terminal"),
            run_id: run.into(),
            route: "notify".into(),
            body: json!({}),
        }),
    }
}

pub fn chains_are_gap_free_and_verify(open: Opener<'_>) {
    let s = open();
    s.create_run(&new_run("c-chain")).unwrap();
    for n in 0..20 {
        let e = s.append("c-chain", &ev(n)).unwrap();
        assert_eq!(e.seq, n + 1);
    }
    let j = s.journal("c-chain").unwrap();
    assert_eq!(j.len(), 20);
    assert_eq!(j[0].prev_hash, GENESIS_HASH);
    assert!(verify_chain(&j).is_ok());
    assert_eq!(j[3].body, json!({"n": 3, "text": "é ✓"}));
    let report = s.verify().unwrap();
    assert!(report.breaks.is_empty(), "{:?}", report.breaks);
    // The store's own checks (integrity, rows read back, row checks) find nothing.
    assert!(report.damage.is_empty(), "{:?}", report.damage);
    assert!(report.intact());
    assert!(matches!(
        s.append("c-missing", &ev(1)),
        Err(StoreError::NotFound { .. })
    ));
    let run = s.run("c-chain").unwrap().unwrap();
    assert_eq!(run.spec, json!({"k": 1}));
    assert_eq!(run.state, RunState::Created);
}

pub fn one_terminal_event_per_run(open: Opener<'_>) {
    let s = open();
    s.create_run(&new_run("c-term")).unwrap();
    s.append("c-term", &ev(1)).unwrap();
    assert!(matches!(
        s.append("c-term", &NewEvent::new(EventKind::Terminal, 2, json!({}))),
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        s.end_run("c-term", &terminal(false, "c-term")).unwrap(),
        EndResult::Ended(_)
    ));
    let report = s.verify().unwrap();
    assert!(report.intact(), "an ended run is intact: {report:?}");
    assert_eq!(
        s.end_run("c-term", &terminal(false, "c-term")).unwrap(),
        EndResult::AlreadyEnded
    );
    // Closed after its terminal event: the conflict says so, whichever backend holds it.
    assert!(matches!(
        s.append("c-term", &ev(3)),
        Err(StoreError::Conflict(m)) if m.contains("run c-term has already ended")
    ));
    assert!(matches!(
        s.set_run_state("c-term", RunState::Running),
        Err(StoreError::Conflict(_))
    ));
    let j = s.journal("c-term").unwrap();
    assert_eq!(
        j.iter().filter(|e| e.kind == EventKind::Terminal).count(),
        1
    );
    let run = s.run("c-term").unwrap().unwrap();
    assert_eq!(run.state, RunState::Ended);
    assert_eq!(run.outcome, Some(Outcome::Succeeded));
    assert_eq!(
        s.receipt("c-term").unwrap().as_deref(),
        Some("Receipt for c-term")
    );
}

fn ledger_entry(key: &str) -> LedgerEntry {
    LedgerEntry {
        key: key.into(),
        scope: "s".into(),
        run_id: "c-ledger".into(),
        delivery: "d1".into(),
        payload_hash: "h".into(),
        state: LedgerState::Intended,
        attempts: 1,
        detail: json!({}),
        updated_ms: 1,
    }
}

pub fn ledger_rules(open: Opener<'_>) {
    let s = open();
    assert!(matches!(
        s.ledger_intend(&ledger_entry("k1")).unwrap(),
        LedgerIntent::Proceed(_)
    ));
    // intended → never executed again
    match s.ledger_intend(&ledger_entry("k1")).unwrap() {
        LedgerIntent::Recorded(e) => assert_eq!(e.state, LedgerState::Intended),
        other => panic!("{other:?}"),
    }
    s.ledger_settle("k1", LedgerState::Failed, &json!({"why": "550"}), 2)
        .unwrap();
    // failed → may be attempted again
    match s.ledger_intend(&ledger_entry("k1")).unwrap() {
        LedgerIntent::Proceed(e) => assert_eq!(e.attempts, 2),
        other => panic!("{other:?}"),
    }
    s.ledger_settle("k1", LedgerState::Done, &json!({"evidence": "250"}), 3)
        .unwrap();
    match s.ledger_intend(&ledger_entry("k1")).unwrap() {
        LedgerIntent::Recorded(e) => {
            assert_eq!(e.state, LedgerState::Done);
            assert_eq!(e.detail, json!({"evidence": "250"}));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        s.ledger_settle("k1", LedgerState::Failed, &json!({}), 4),
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        s.ledger_settle("nope", LedgerState::Done, &json!({}), 4),
        Err(StoreError::NotFound { .. })
    ));
    s.ledger_intend(&ledger_entry("k2")).unwrap();
    s.ledger_settle("k2", LedgerState::Unknown, &json!({}), 5)
        .unwrap();
    assert!(matches!(
        s.ledger_intend(&ledger_entry("k2")).unwrap(),
        LedgerIntent::Recorded(_)
    ));
    assert_eq!(
        s.ledger_get("k2").unwrap().unwrap().state,
        LedgerState::Unknown
    );
    assert!(s.ledger_list().unwrap().len() >= 2);
}

fn card(run: &str, d: Option<&str>, hash: &str) -> Card {
    Card {
        run_id: run.into(),
        delivery: d.map(String::from),
        payload_hash: hash.into(),
        summary: "s".into(),
        state: CardState::Open,
        created_ms: 1,
        decided_ms: None,
        answer: None,
        reason: format!("reason for {hash}"),
    }
}

pub fn cards_supersede_and_decide(open: Opener<'_>) {
    let s = open();
    s.create_run(&new_run("c-cards")).unwrap();
    s.open_card(&card("c-cards", Some("d1"), "h1")).unwrap();
    s.open_card(&card("c-cards", Some("d1"), "h2")).unwrap();
    let cards = s.cards_for_run("c-cards").unwrap();
    assert_eq!(
        cards.iter().map(|c| c.state).collect::<Vec<_>>(),
        vec![CardState::Superseded, CardState::Open]
    );
    // The reason is stored with the card and read back (§7).
    assert_eq!(cards[1].reason, "reason for h2");
    let open_now = s.open_cards().unwrap();
    let open_now = open_now.iter().find(|c| c.run_id == "c-cards").unwrap();
    assert_eq!(open_now.reason, "reason for h2");
    assert!(matches!(
        s.decide_card("c-cards", "d1", "h1", Decision::Approve, 2),
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        s.decide_card("c-cards", "d1", "zz", Decision::Approve, 2),
        Err(StoreError::NotFound { .. })
    ));
    assert_eq!(
        s.cards_for_run("c-cards").unwrap()[1].state,
        CardState::Open,
        "errors change nothing"
    );
    assert_eq!(
        s.decide_card("c-cards", "d1", "h2", Decision::Approve, 3)
            .unwrap()
            .state,
        CardState::Approved
    );
    assert!(matches!(
        s.decide_card("c-cards", "d1", "h2", Decision::Deny, 4),
        Err(StoreError::Conflict(_))
    ));
    s.open_card(&card("c-cards", None, "")).unwrap();
    assert!(s
        .open_cards()
        .unwrap()
        .iter()
        .any(|c| c.run_id == "c-cards" && c.delivery.is_none()));
    let answered = s.answer_clarify("c-cards", "blue", 5).unwrap();
    assert_eq!(answered.answer.as_deref(), Some("blue"));
    assert!(matches!(
        s.answer_clarify("c-cards", "again", 6),
        Err(StoreError::NotFound { .. })
    ));
    s.put_payload("h2", "{\"a\":1}").unwrap();
    s.put_payload("h2", "{\"a\":1}").unwrap();
    assert_eq!(s.payload("h2").unwrap().as_deref(), Some("{\"a\":1}"));
}

/// Issue 21: a cancelled run that waited on a question left the question open forever. Closing
/// a run's cards closes its approvals and its question, and nobody else's.
pub fn cancel_closes_every_open_card_and_question(open: Opener<'_>) {
    let s = open();
    s.create_run(&new_run("c-close")).unwrap();
    s.create_run(&new_run("c-other")).unwrap();
    s.open_card(&card("c-close", Some("d1"), "h1")).unwrap();
    s.open_card(&card("c-close", Some("d2"), "h2")).unwrap();
    s.decide_card("c-close", "d2", "h2", Decision::Approve, 2)
        .unwrap();
    s.open_card(&card("c-close", None, "")).unwrap();
    s.open_card(&card("c-other", None, "")).unwrap();
    assert_eq!(
        s.close_cards("c-close", 7).unwrap(),
        2,
        "the approval and the question"
    );
    let cards = s.cards_for_run("c-close").unwrap();
    assert_eq!(
        cards.iter().map(|c| c.state).collect::<Vec<_>>(),
        vec![CardState::Denied, CardState::Approved, CardState::Denied]
    );
    assert_eq!(cards[2].decided_ms, Some(7));
    assert!(s
        .open_cards()
        .unwrap()
        .iter()
        .all(|c| c.run_id != "c-close"));
    assert!(matches!(
        s.answer_clarify("c-close", "too late", 8),
        Err(StoreError::NotFound { .. })
    ));
    // Another run's question stays open; closing again finds nothing.
    assert_eq!(
        s.cards_for_run("c-other").unwrap()[0].state,
        CardState::Open
    );
    assert_eq!(s.close_cards("c-close", 9).unwrap(), 0);
}

pub fn slots_are_consumed_once(open: Opener<'_>) {
    let s = open();
    assert!(s.consume_slot("brief", 1000, &new_run("c-slot-1")).unwrap());
    assert!(!s.consume_slot("brief", 1000, &new_run("c-slot-2")).unwrap());
    assert!(
        s.run("c-slot-2").unwrap().is_none(),
        "a refused slot creates no run"
    );
    assert_eq!(
        s.slot_run("brief", 1000).unwrap().as_deref(),
        Some("c-slot-1")
    );
    assert!(s.consume_slot("brief", 2000, &new_run("c-slot-3")).unwrap());
    assert_eq!(
        s.slots("brief").unwrap(),
        vec![
            (1000, "c-slot-1".to_string()),
            (2000, "c-slot-3".to_string())
        ]
    );
}

pub fn outbox_is_deduplicated_and_marked(open: Opener<'_>) {
    let s = open();
    s.create_run(&new_run("c-out")).unwrap();
    s.end_run("c-out", &terminal(true, "c-out")).unwrap();
    s.end_run("c-out", &terminal(true, "c-out")).unwrap();
    let rows = s.outbox_for_run("c-out").unwrap();
    assert_eq!(rows.len(), 1);
    assert!(s
        .outbox_pending()
        .unwrap()
        .iter()
        .any(|r| r.run_id == "c-out"));
    s.outbox_mark_sent(rows[0].id, 7).unwrap();
    assert!(!s
        .outbox_pending()
        .unwrap()
        .iter()
        .any(|r| r.run_id == "c-out"));
    assert_eq!(s.outbox_for_run("c-out").unwrap()[0].sent_ms, Some(7));
}

/// Each failed delivery is counted on its row with the route's last words, for the doctor;
/// a sent row takes no more failures.
pub fn outbox_failures_are_kept_until_sent(open: Opener<'_>) {
    let s = open();
    s.create_run(&new_run("c-fail")).unwrap();
    s.end_run("c-fail", &terminal(true, "c-fail")).unwrap();
    let id = s.outbox_for_run("c-fail").unwrap()[0].id;
    assert_eq!(s.outbox_for_run("c-fail").unwrap()[0].failure, None);
    s.outbox_failed(id, "push server busy", false, 5).unwrap();
    s.outbox_failed(id, "push URL refused: fix it", true, 9)
        .unwrap();
    let expected = Some(crate::OutboxFailure {
        failures: 2,
        last_error: "push URL refused: fix it".into(),
        misconfigured: true,
        last_ms: 9,
    });
    let pending = s.outbox_pending().unwrap();
    let row = pending.iter().find(|r| r.run_id == "c-fail").unwrap();
    assert_eq!(row.failure, expected);
    assert_eq!(
        open().outbox_for_run("c-fail").unwrap()[0].failure,
        expected
    );
    s.outbox_mark_sent(id, 12).unwrap();
    s.outbox_failed(id, "after it was sent", false, 13).unwrap();
    let row = &s.outbox_for_run("c-fail").unwrap()[0];
    assert_eq!(row.sent_ms, Some(12));
    assert_eq!(row.failure, expected, "a sent row is left alone");
    // An id no row has changes nothing and is no error.
    s.outbox_failed(id + 1_000_000, "nobody", false, 14)
        .unwrap();
}

pub fn leases_and_orphans(open: Opener<'_>) {
    let s = open();
    s.create_run(&new_run("c-lease")).unwrap();
    assert!(
        s.orphaned_runs(10)
            .unwrap()
            .iter()
            .any(|r| r.id == "c-lease"),
        "no owner: orphaned"
    );
    assert!(s.lease_run("c-lease", "a", 10, 100).unwrap());
    assert!(
        !s.lease_run("c-lease", "b", 50, 150).unwrap(),
        "a live lease is exclusive"
    );
    assert!(!s
        .orphaned_runs(50)
        .unwrap()
        .iter()
        .any(|r| r.id == "c-lease"));
    assert!(
        s.orphaned_runs(101)
            .unwrap()
            .iter()
            .any(|r| r.id == "c-lease"),
        "a lapsed lease is orphaned"
    );
    assert!(
        s.lease_run("c-lease", "b", 101, 200).unwrap(),
        "a lapsed lease can be taken"
    );
    s.release_run("c-lease", "a").unwrap();
    assert_eq!(
        s.run("c-lease").unwrap().unwrap().owner.as_deref(),
        Some("b"),
        "only the owner releases"
    );
    s.release_run("c-lease", "b").unwrap();
    assert_eq!(s.run("c-lease").unwrap().unwrap().owner, None);
    assert!(matches!(
        s.lease_run("c-nope", "a", 1, 2),
        Err(StoreError::NotFound { .. })
    ));
    // Taking over from an owner known to have exited: its unexpired lease does not stand in
    // the way, but a lease some other owner holds does.
    assert!(s.lease_run("c-lease", "gone", 300, 400).unwrap());
    assert!(
        !s.take_over_run("c-lease", "other", "boot", 310, 500)
            .unwrap(),
        "only the named exited holder is taken over"
    );
    assert_eq!(
        s.run("c-lease").unwrap().unwrap().owner.as_deref(),
        Some("gone")
    );
    assert!(s
        .take_over_run("c-lease", "gone", "boot", 310, 500)
        .unwrap());
    let r = s.run("c-lease").unwrap().unwrap();
    assert_eq!(
        (r.owner.as_deref(), r.lease_until_ms),
        (Some("boot"), Some(500))
    );
    assert!(
        !s.take_over_run("c-lease", "gone", "late", 320, 600)
            .unwrap(),
        "a run taken over is no longer the exited holder's to give"
    );
    assert!(
        s.take_over_run("c-lease", "gone", "late", 501, 600)
            .unwrap(),
        "a lapsed lease can be taken as with lease_run"
    );
    assert!(matches!(
        s.take_over_run("c-nope", "gone", "a", 1, 2),
        Err(StoreError::NotFound { .. })
    ));
    // The store's selection and the record's own predicate (start-up uses the latter on
    // the open runs) agree, before and after the lease lapses.
    s.create_run(&new_run("c-free")).unwrap();
    for now in [10, 599, 600, 601] {
        let ids = |rs: Vec<RunRecord>| rs.into_iter().map(|r| r.id).collect::<Vec<_>>();
        let mut selected = ids(s.orphaned_runs(now).unwrap());
        let mut lapsed = ids(s
            .open_runs()
            .unwrap()
            .into_iter()
            .filter(|r| r.lease_lapsed(now))
            .collect());
        selected.sort();
        lapsed.sort();
        assert_eq!(selected, lapsed, "at {now}");
    }
}

/// Issue 11 #10: a run is created with its owner's lease in the same transaction, so between
/// its creation and its first lease no other process's start-up reconciliation sees it as
/// orphaned. The same holds for a run created by consuming a schedule slot (§12.2).
pub fn runs_are_born_leased(open: Opener<'_>) {
    let s = open();
    let leased = |id: &str| NewRun {
        state: vouch_core::RunState::Running,
        lease: Some(RunLease {
            owner: "pid:1".into(),
            until_ms: 100,
        }),
        ..new_run(id)
    };
    s.create_run(&leased("c-born")).unwrap();
    let r = s.run("c-born").unwrap().unwrap();
    assert_eq!(r.owner.as_deref(), Some("pid:1"), "created with its owner");
    assert_eq!(r.lease_until_ms, Some(100));
    assert_eq!(
        r.state,
        vouch_core::RunState::Running,
        "a run its creator drives at once is born running, in the creating transaction"
    );
    assert!(
        s.create_run(&NewRun {
            state: vouch_core::RunState::Ended,
            ..new_run("c-born-ended")
        })
        .is_err(),
        "a run is never born ended"
    );
    assert!(s.run("c-born-ended").unwrap().is_none());
    assert!(
        !s.orphaned_runs(50)
            .unwrap()
            .iter()
            .any(|r| r.id == "c-born"),
        "a run born leased is not orphaned while its lease lives"
    );
    assert!(
        !s.lease_run("c-born", "pid:2", 50, 150).unwrap(),
        "another owner cannot take a newborn run"
    );
    assert!(
        s.lease_run("c-born", "pid:1", 50, 150).unwrap(),
        "its owner renews it"
    );
    assert!(s
        .orphaned_runs(151)
        .unwrap()
        .iter()
        .any(|r| r.id == "c-born"));
    assert!(s
        .consume_slot("c-born-sched", 7, &leased("c-born-slot"))
        .unwrap());
    let r = s.run("c-born-slot").unwrap().unwrap();
    assert_eq!(
        r.owner.as_deref(),
        Some("pid:1"),
        "a slot's run is born leased too"
    );
    assert_eq!(r.state, vouch_core::RunState::Running);
    assert!(!s
        .orphaned_runs(50)
        .unwrap()
        .iter()
        .any(|r| r.id == "c-born-slot"));
}

pub fn durable_across_reopen(open: Opener<'_>) {
    {
        let s = open();
        s.create_run(&new_run("c-durable")).unwrap();
        for n in 0..5 {
            s.append("c-durable", &ev(n)).unwrap();
        }
        s.ledger_intend(&ledger_entry("k-durable")).unwrap();
    }
    let s = open();
    assert_eq!(s.journal("c-durable").unwrap().len(), 5);
    assert!(s.ledger_get("k-durable").unwrap().is_some());
    assert!(s.verify().unwrap().breaks.is_empty());
}

pub fn concurrent_appends_keep_chains(open: Opener<'_>) {
    let s = open();
    for w in 0..4 {
        s.create_run(&new_run(&format!("c-conc-{w}"))).unwrap();
    }
    std::thread::scope(|scope| {
        for t in 0..8 {
            let s = s.clone();
            scope.spawn(move || {
                for n in 0..50 {
                    // Two threads per run: appends to the same run interleave.
                    s.append(&format!("c-conc-{}", t % 4), &ev(n)).unwrap();
                }
            });
        }
    });
    for w in 0..4 {
        let j = s.journal(&format!("c-conc-{w}")).unwrap();
        assert_eq!(j.len(), 100);
        assert!(verify_chain(&j).is_ok());
    }
    // All eight on one run: every append gets its own seq, none lost, none repeated.
    s.create_run(&new_run("c-conc-all")).unwrap();
    let seqs = std::sync::Mutex::new(vec![]);
    std::thread::scope(|scope| {
        for _ in 0..8 {
            let (s, seqs) = (s.clone(), &seqs);
            scope.spawn(move || {
                for n in 0..25 {
                    let e = s.append("c-conc-all", &ev(n)).unwrap();
                    seqs.lock().unwrap().push(e.seq);
                }
            });
        }
    });
    let mut seqs = seqs.into_inner().unwrap();
    seqs.sort_unstable();
    assert_eq!(seqs, (1..=200).collect::<Vec<i64>>());
    let j = s.journal("c-conc-all").unwrap();
    assert!(verify_chain(&j).is_ok());
    assert!(s.verify().unwrap().breaks.is_empty());
}

pub fn ended_runs_are_closed(open: Opener<'_>) {
    let s = open();
    assert!(matches!(
        s.end_run("c-nobody", &terminal(false, "c-nobody")),
        Err(StoreError::NotFound { .. })
    ));
    s.create_run(&new_run("c-closed")).unwrap();
    assert!(s.lease_run("c-closed", "a", 1, 100).unwrap());
    s.append("c-closed", &ev(1)).unwrap();
    let EndResult::Ended(t) = s.end_run("c-closed", &terminal(true, "c-closed")).unwrap() else {
        panic!("the first end_run ends the run");
    };
    assert_eq!(t.seq, 2);
    let j = s.journal("c-closed").unwrap();
    let last = j.last().expect("the ended run has a journal");
    assert_eq!(
        (last.kind, last.seq, &last.prev_hash, &last.hash),
        (EventKind::Terminal, t.seq, &t.prev_hash, &t.hash),
        "the terminal event closes the chain where end_run placed it"
    );
    assert_eq!(
        last.body,
        json!({"outcome": "succeeded"}),
        "its body is the terminal's, as given"
    );
    assert!(verify_chain(&j).is_ok());
    let run = s.run("c-closed").unwrap().unwrap();
    assert_eq!(run.ended_by, Some(EndedBy::Loop));
    assert_eq!(run.ended_ms, Some(99));
    assert_eq!(run.owner, None, "ending releases the lease");
    assert!(
        !s.orphaned_runs(i64::MAX)
            .unwrap()
            .iter()
            .any(|r| r.id == "c-closed"),
        "an ended run is never orphaned"
    );
    assert!(
        !s.lease_run("c-closed", "b", 1, 100).unwrap(),
        "an ended run cannot be leased"
    );
    assert!(
        !s.take_over_run("c-closed", "a", "b", 1, 100).unwrap(),
        "an ended run cannot be taken over"
    );
    // The outbox key is unique across runs too: one notification per key, ever.
    s.create_run(&new_run("c-closed-2")).unwrap();
    let mut t2 = terminal(true, "c-closed-2");
    t2.outbox.as_mut().unwrap().dedup_key = "c-closed:terminal".into();
    assert!(matches!(
        s.end_run("c-closed-2", &t2).unwrap(),
        EndResult::Ended(_)
    ));
    assert!(s.outbox_for_run("c-closed-2").unwrap().is_empty());
    assert_eq!(s.outbox_for_run("c-closed").unwrap().len(), 1);
    assert_eq!(s.payload("no-such-hash").unwrap(), None);
    assert_eq!(s.receipt("c-nobody").unwrap(), None);
}

/// Concurrent callers racing for the same one-time thing: exactly one wins.
pub fn races_have_one_winner(open: Opener<'_>) {
    let s = open();
    s.create_run(&new_run("c-race")).unwrap();
    let results: Vec<(EndResult, bool, LedgerIntent)> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..8)
            .map(|t| {
                let s = s.clone();
                scope.spawn(move || {
                    let ended = s.end_run("c-race", &terminal(true, "c-race")).unwrap();
                    let slot = s
                        .consume_slot("c-race-sched", 5000, &new_run(&format!("c-race-slot-{t}")))
                        .unwrap();
                    let intent = s.ledger_intend(&ledger_entry("k-race")).unwrap();
                    (ended, slot, intent)
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let ended = results
        .iter()
        .filter(|r| matches!(r.0, EndResult::Ended(_)))
        .count();
    let slots = results.iter().filter(|r| r.1).count();
    let proceeds = results
        .iter()
        .filter(|r| matches!(r.2, LedgerIntent::Proceed(_)))
        .count();
    assert_eq!((ended, slots, proceeds), (1, 1, 1));
    let j = s.journal("c-race").unwrap();
    assert_eq!(
        j.iter().filter(|e| e.kind == EventKind::Terminal).count(),
        1
    );
    assert_eq!(s.outbox_for_run("c-race").unwrap().len(), 1);
    assert_eq!(s.slots("c-race-sched").unwrap().len(), 1);
}

pub fn schedules_crud(open: Opener<'_>) {
    let s = open();
    let sched = Schedule {
        name: "c-brief".into(),
        cron: "0 7 * * *".into(),
        tz: "UTC".into(),
        routine: json!({"prompt": "p"}),
        catch_up: CatchUp::Skip,
        overlap: Overlap::Skip,
        grace_ms: 900_000,
        created_ms: 1,
    };
    s.put_schedule(&sched).unwrap();
    // The conflict names the schedule and the way out, whichever backend holds it.
    assert!(matches!(
        s.put_schedule(&sched),
        Err(StoreError::Conflict(m)) if m.contains("`c-brief` already exists")
    ));
    assert!(s.schedules().unwrap().contains(&sched));
    // The other policy of each kind reads back as itself, not as the default.
    let other = Schedule {
        name: "c-late".into(),
        catch_up: CatchUp::Latest,
        overlap: Overlap::Allow,
        ..sched.clone()
    };
    s.put_schedule(&other).unwrap();
    assert!(s.schedules().unwrap().contains(&other));
    assert!(s.remove_schedule("c-late").unwrap());
    assert!(s.remove_schedule("c-brief").unwrap());
    assert!(!s.remove_schedule("c-brief").unwrap());
}

/// `append_batch` and `end_run_after` (the durability points of §3.4/§9.2): a batch extends the
/// chain in order and is durable across a reopen; the events before a terminal record commit
/// with it; after the end nothing more is appended, and a second end changes nothing.
pub fn batches_commit_together(open: Opener<'_>) {
    let s = open();
    s.create_run(&new_run("batch-1")).unwrap();
    s.append("batch-1", &ev(0)).unwrap();
    let batch: Vec<NewEvent> = (1..5).map(ev).collect();
    let out = s.append_batch("batch-1", &batch).unwrap();
    assert_eq!(
        out.iter().map(|e| e.seq).collect::<Vec<_>>(),
        vec![2, 3, 4, 5]
    );
    assert!(s.append_batch("batch-1", &[]).unwrap().is_empty());
    let before_end: Vec<NewEvent> = (5..8).map(ev).collect();
    match s
        .end_run_after("batch-1", &before_end, &terminal(false, "batch-1"))
        .unwrap()
    {
        EndResult::Ended(t) => assert_eq!(t.seq, 9, "the terminal event follows the batch"),
        EndResult::AlreadyEnded => panic!("a live run must end"),
    }
    drop(s);
    let s = open();
    let j = s.journal("batch-1").unwrap();
    assert_eq!(j.len(), 9, "every batched event is durable across a reopen");
    verify_chain(&j).unwrap();
    assert_eq!(j[8].kind, EventKind::Terminal);
    assert_eq!(j[7].body["n"], json!(7));
    // Ended: a second end with more events changes nothing; a batch is refused whole.
    assert_eq!(
        s.end_run_after("batch-1", &[ev(9)], &terminal(false, "batch-1"))
            .unwrap(),
        EndResult::AlreadyEnded
    );
    assert!(s.append_batch("batch-1", &[ev(10), ev(11)]).is_err());
    assert_eq!(s.journal("batch-1").unwrap().len(), 9);
    // A terminal event inside a batch is refused, and nothing of the batch is written.
    s.create_run(&new_run("batch-2")).unwrap();
    let bad = vec![ev(0), NewEvent::new(EventKind::Terminal, 1, json!({}))];
    assert!(s.append_batch("batch-2", &bad).is_err());
    assert!(s.journal("batch-2").unwrap().is_empty());
}

/// `open_runs`, `continuation_of` and `runs_by_prefix` answer from indexes (start-up, resume
/// and a typed id cost what is open or asked for, not the history).
pub fn lookups_cost_what_is_open(open: Opener<'_>) {
    let s = open();
    for id in ["look-a1", "look-a2", "look-b1"] {
        s.create_run(&new_run(id)).unwrap();
    }
    s.end_run("look-a1", &terminal(false, "look-a1")).unwrap();
    let open_ids: Vec<String> = s.open_runs().unwrap().into_iter().map(|r| r.id).collect();
    assert!(!open_ids.contains(&"look-a1".to_string()), "{open_ids:?}");
    assert!(open_ids.contains(&"look-a2".to_string()) && open_ids.contains(&"look-b1".to_string()));
    let mut child = new_run("look-c1");
    child.parent = Some("look-a1".into());
    child.chain_root = "look-a1".into();
    s.create_run(&child).unwrap();
    assert_eq!(
        s.continuation_of("look-a1").unwrap().map(|r| r.id),
        Some("look-c1".into())
    );
    assert_eq!(s.continuation_of("look-a2").unwrap(), None);
    let a: Vec<String> = s
        .runs_by_prefix("look-a", 10)
        .unwrap()
        .into_iter()
        .map(|r| r.id)
        .collect();
    assert_eq!(a, vec!["look-a1".to_string(), "look-a2".to_string()]);
    assert_eq!(s.runs_by_prefix("look-a", 1).unwrap().len(), 1);
    assert!(s.runs_by_prefix("look-z", 10).unwrap().is_empty());
    assert_eq!(s.runs_by_prefix("look-b1", 10).unwrap().len(), 1);
}

/// API tokens (§17): stored by hash only, names unique, found by hash, removable, durable;
/// each keeps its scope, and a worker token (only a worker token) its identity (§17.1.1).
pub fn api_tokens(open: Opener<'_>) {
    let s = open();
    assert!(s.tokens().unwrap().is_empty());
    let t = ApiToken {
        name: "ci".into(),
        hash: "a".repeat(64),
        created_ms: 5,
        scope: vouch_core::Scope::Person,
        identity: None,
    };
    s.put_token(&t).unwrap();
    let w = ApiToken {
        name: "w1".into(),
        hash: "c".repeat(64),
        created_ms: 6,
        scope: vouch_core::Scope::Worker,
        identity: Some("py1".into()),
    };
    s.put_token(&w).unwrap();
    // The schema refuses a worker token with no identity and any other token with one.
    for bad in [
        ApiToken {
            name: "w2".into(),
            hash: "d".repeat(64),
            identity: None,
            ..w.clone()
        },
        ApiToken {
            name: "r1".into(),
            hash: "e".repeat(64),
            scope: vouch_core::Scope::Reader,
            ..w.clone()
        },
    ] {
        assert!(s.put_token(&bad).is_err(), "{bad:?}");
    }
    assert_eq!(s.token_by_hash(&w.hash).unwrap(), Some(w.clone()));
    assert!(s.remove_token("w1").unwrap());
    assert!(matches!(
        s.put_token(&ApiToken {
            hash: "b".repeat(64),
            ..t.clone()
        }),
        Err(StoreError::Conflict(_))
    ));
    assert!(matches!(
        s.put_token(&ApiToken {
            name: "other".into(),
            ..t.clone()
        }),
        Err(StoreError::Conflict(_))
    ));
    let s = open();
    assert_eq!(s.token_by_hash(&t.hash).unwrap(), Some(t.clone()));
    assert_eq!(s.token_by_hash(&"b".repeat(64)).unwrap(), None);
    assert_eq!(s.tokens().unwrap(), vec![t.clone()]);
    assert!(s.remove_token("ci").unwrap());
    assert!(!s.remove_token("ci").unwrap());
    assert_eq!(s.token_by_hash(&t.hash).unwrap(), None);
}

/// Issue 21 #5 (§10.2): damage a verification found is kept, and while it is open the store
/// itself refuses new runs (plain and slot runs) with a refusal that names the command to
/// acknowledge; reading and the runs already there go on. The same findings acknowledged once
/// stay acknowledged; new findings refuse again until closed (repaired).
pub fn a_damaged_store_refuses_new_runs_until_acknowledged(open: Opener<'_>) {
    let s = open();
    s.create_run(&new_run("dmg-before")).unwrap();
    assert!(s.open_damage().unwrap().is_empty());
    let found = vec!["run r1: its receipt does not match".to_string()];
    assert!(s.record_damage(&found, 10).unwrap());
    assert!(
        !s.record_damage(&found, 11).unwrap(),
        "the same findings are one record"
    );
    let open_now = s.open_damage().unwrap();
    assert_eq!(open_now.len(), 1);
    assert_eq!(open_now[0].found, found);
    assert_eq!(open_now[0].found_ms, 10);
    assert_eq!(open_now[0].fingerprint, damage_fingerprint(&found));
    let refused = |e: StoreError| match e {
        StoreError::Conflict(m) => {
            assert!(m.contains(codec::DAMAGED_REFUSAL), "{m}");
            assert!(m.contains("vouch journal verify --acknowledge"), "{m}");
        }
        other => panic!("a damaged store refuses a new run as a conflict, not {other:?}"),
    };
    refused(s.create_run(&new_run("dmg-new")).unwrap_err());
    refused(
        s.consume_slot("brief", 1, &new_run("dmg-slot"))
            .unwrap_err(),
    );
    assert!(s.run("dmg-new").unwrap().is_none(), "nothing was created");
    assert!(
        s.slot_run("brief", 1).unwrap().is_none(),
        "the slot is not consumed"
    );
    // Reading and the runs already there go on.
    s.append("dmg-before", &ev(1)).unwrap();
    assert!(s.run("dmg-before").unwrap().is_some());
    // Reopened: still refused (the record is durable).
    let s = open();
    refused(s.create_run(&new_run("dmg-new")).unwrap_err());
    assert_eq!(s.close_damage(DamageClosed::Acknowledged, 20).unwrap(), 1);
    assert_eq!(s.close_damage(DamageClosed::Acknowledged, 21).unwrap(), 0);
    assert!(s.open_damage().unwrap().is_empty());
    s.create_run(&new_run("dmg-new")).unwrap();
    assert!(
        !s.record_damage(&found, 30).unwrap(),
        "damage acknowledged once stays acknowledged"
    );
    s.create_run(&new_run("dmg-after-ack")).unwrap();
    let more = vec![
        found[0].clone(),
        "payload p1 does not match its hash".to_string(),
    ];
    assert!(
        s.record_damage(&more, 40).unwrap(),
        "new findings are a new record"
    );
    refused(s.create_run(&new_run("dmg-refused-again")).unwrap_err());
    assert_eq!(s.close_damage(DamageClosed::Repaired, 50).unwrap(), 1);
    s.create_run(&new_run("dmg-repaired")).unwrap();
    // A taken id is still named as such.
    match s.create_run(&new_run("dmg-repaired")).unwrap_err() {
        StoreError::Conflict(m) => assert!(m.contains("already exists"), "{m}"),
        other => panic!("{other:?}"),
    }
}

/// One operation on the ledger: intend key `k`, or settle key `k` with a state.
#[derive(Debug, Clone, Copy)]
pub enum LedgerOp {
    Intend(u8),
    Settle(u8, LedgerState),
}

/// §8.2 as a state machine, checked against a model for any sequence of operations (the
/// backends drive it with generated sequences): intending a new key or a `failed` one proceeds
/// (attempts counted), any other state answers with the record and never proceeds; only an
/// `intended` key can be settled; an unknown key is not found.
pub fn ledger_follows_its_state_machine(s: &dyn Store, ns: &str, ops: &[LedgerOp]) {
    let mut model: std::collections::BTreeMap<u8, (LedgerState, i64)> = Default::default();
    let key = |k: u8| format!("{ns}-{k}");
    for (i, op) in ops.iter().enumerate() {
        match *op {
            LedgerOp::Intend(k) => {
                let entry = LedgerEntry {
                    key: key(k),
                    scope: ns.into(),
                    run_id: format!("{ns}-run"),
                    delivery: format!("d{k}"),
                    payload_hash: "h".into(),
                    state: LedgerState::Intended,
                    attempts: 1,
                    detail: json!({}),
                    updated_ms: i as i64,
                };
                let got = s.ledger_intend(&entry).unwrap();
                match model.get(&k).copied() {
                    None => {
                        assert!(
                            matches!(got, LedgerIntent::Proceed(_)),
                            "op {i}: new key must proceed: {got:?}"
                        );
                        model.insert(k, (LedgerState::Intended, 1));
                    }
                    Some((LedgerState::Failed, n)) => {
                        let LedgerIntent::Proceed(e) = got else {
                            panic!("op {i}: a failed key may be tried again: {got:?}")
                        };
                        assert_eq!(
                            (e.state, e.attempts),
                            (LedgerState::Intended, n + 1),
                            "op {i}"
                        );
                        model.insert(k, (LedgerState::Intended, n + 1));
                    }
                    Some((state, n)) => {
                        let LedgerIntent::Recorded(e) = got else {
                            panic!("op {i}: a {state:?} key must never proceed again: {got:?}")
                        };
                        assert_eq!((e.state, e.attempts), (state, n), "op {i}");
                    }
                }
            }
            LedgerOp::Settle(k, to) => {
                let got = s.ledger_settle(&key(k), to, &json!({"op": i}), i as i64);
                match model.get(&k).copied() {
                    None => assert!(
                        matches!(got, Err(StoreError::NotFound { .. })),
                        "op {i}: {got:?}"
                    ),
                    Some((LedgerState::Intended, n)) => {
                        got.unwrap();
                        model.insert(k, (to, n));
                    }
                    Some((state, _)) => assert!(
                        matches!(got, Err(StoreError::Conflict(_))),
                        "op {i}: settling a {state:?} key must be refused: {got:?}"
                    ),
                }
            }
        }
        // The stored rows agree with the model after every step.
        for (k, (state, n)) in &model {
            let e = s.ledger_get(&key(*k)).unwrap().expect("the key exists");
            assert_eq!((e.state, e.attempts), (*state, *n), "op {i}: key {k}");
        }
    }
}

/// `journal_since` returns exactly the events after a seq, in order, on every backend.
pub fn journal_since_reads_the_tail(open: Opener<'_>) {
    let s = open();
    s.create_run(&new_run("tail")).unwrap();
    for n in 1..=5 {
        s.append("tail", &ev(n)).unwrap();
    }
    let all = s.journal("tail").unwrap();
    for after in 0..=6 {
        let tail = s.journal_since("tail", after).unwrap();
        let expected: Vec<_> = all.iter().filter(|e| e.seq > after).cloned().collect();
        assert_eq!(tail, expected, "after {after}");
    }
    assert!(s.journal_since("no-such-run", 0).unwrap().is_empty());
    // The typed read reads what the entries read: a body of its kind's type, and bodies that
    // are not (the error the same words).
    s.create_run(&new_run("typed")).unwrap();
    let ended = crate::journal::LoopEnded {
        cause: "turn_budget".into(),
        reason: "é \"x\"\n".into(),
    };
    s.append("typed", &Event::from(ended).at(1)).unwrap();
    s.append(
        "typed",
        &NewEvent::for_delivery(EventKind::Evidence, "d1", 2, json!({"n": 1.5})),
    )
    .unwrap();
    s.append("typed", &ev(3)).unwrap();
    let typed = s.journal_events("typed").unwrap();
    let read: Vec<_> = s
        .journal("typed")
        .unwrap()
        .iter()
        .map(crate::EventEntry::of)
        .collect();
    assert_eq!(typed, read);
    assert!(typed[0].event.is_ok() && typed[1].event.is_err() && typed[2].event.is_err());
    assert!(s.journal_events("no-such-run").unwrap().is_empty());
}

/// Every field of a [`RunFilter`] selects in the backend exactly what [`RunFilter::matches`]
/// selects, newest first, paged by offset and limit.
pub fn runs_filter_alike_on_every_backend(open: Opener<'_>) {
    let s = open();
    let runs = [
        ("f1", TriggerKind::Interactive, "Save my Notes", "f1", 10),
        (
            "f2",
            TriggerKind::Scheduled,
            "Morning brief",
            "brief@1000",
            20,
        ),
        (
            "f3",
            TriggerKind::Scheduled,
            "Morning brief",
            "briefly@1000",
            30,
        ),
        ("f4", TriggerKind::Task, "Summarise Q3 ÉTÉ", "task:t1", 40),
        ("f5", TriggerKind::Interactive, "notes again", "f5", 50),
    ];
    for (id, trigger, title, scope, at) in runs {
        s.create_run(&NewRun {
            trigger,
            title: title.into(),
            scope: scope.into(),
            created_ms: at,
            ..new_run(id)
        })
        .unwrap();
    }
    s.end_run("f1", &terminal(false, "f1")).unwrap();
    s.end_run(
        "f4",
        &Terminal {
            outcome: Outcome::Failed,
            ..terminal(false, "f4")
        },
    )
    .unwrap();
    let filters = [
        RunFilter::default(),
        RunFilter {
            state: Some(RunState::Ended),
            ..Default::default()
        },
        RunFilter {
            state: Some(RunState::Created),
            ..Default::default()
        },
        RunFilter {
            outcome: Some(Outcome::Failed),
            ..Default::default()
        },
        RunFilter {
            trigger: Some(TriggerKind::Scheduled),
            ..Default::default()
        },
        RunFilter {
            schedule: Some("brief".into()),
            ..Default::default()
        },
        RunFilter {
            task: Some("t1".into()),
            ..Default::default()
        },
        RunFilter {
            since_ms: Some(20),
            until_ms: Some(50),
            ..Default::default()
        },
        RunFilter {
            title: Some("NOTES".into()),
            ..Default::default()
        },
        RunFilter {
            title: Some("été".into()),
            ..Default::default()
        },
        RunFilter {
            title: Some("ÉTÉ".into()),
            ..Default::default()
        },
        RunFilter {
            title: Some("%".into()),
            ..Default::default()
        },
    ];
    let all = s.runs(100).unwrap();
    for f in filters {
        let want: Vec<String> = all
            .iter()
            .filter(|r| f.matches(r))
            .map(|r| r.id.clone())
            .collect();
        let got: Vec<String> = s
            .runs_filtered(&f, 0, 100)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        assert_eq!(got, want, "{f:?}");
        let paged: Vec<String> = s
            .runs_filtered(&f, 1, 2)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect();
        let want_page: Vec<String> = want.iter().skip(1).take(2).cloned().collect();
        assert_eq!(paged, want_page, "page of {f:?}");
    }
    let one = |f: RunFilter| -> Vec<String> {
        s.runs_filtered(&f, 0, 100)
            .unwrap()
            .into_iter()
            .map(|r| r.id)
            .collect()
    };
    assert_eq!(
        one(RunFilter {
            schedule: Some("brief".into()),
            ..Default::default()
        }),
        ["f2"],
        "a schedule is its name, not a prefix of another's"
    );
    assert_eq!(
        one(RunFilter {
            title: Some("NOTES".into()),
            ..Default::default()
        }),
        ["f5", "f1"]
    );
    assert_eq!(
        one(RunFilter {
            title: Some("%".into()),
            ..Default::default()
        }),
        Vec::<String>::new(),
        "search text is literal"
    );
}

/// The tampering hook of verification tests changes exactly the payload it names, keeps its
/// hash, and says when there is nothing to change. (A backend's tests call this with a store
/// that implements [`TamperForTests`]; it is not part of [`store_conformance_tests!`], which
/// works on `dyn Store`.)
pub fn tamper_hook_alters_one_payload(s: &dyn TamperForTests) {
    s.put_payload("h1", r#"{"text":"one"}"#).unwrap();
    s.put_payload("h2", r#"{"text":"two"}"#).unwrap();
    assert!(s.tamper_payload("h1", r#"{"text":"tampered"}"#).unwrap());
    assert_eq!(
        s.payload("h1").unwrap().as_deref(),
        Some(r#"{"text":"tampered"}"#),
        "the named payload is changed under its old hash"
    );
    assert_eq!(
        s.payload("h2").unwrap().as_deref(),
        Some(r#"{"text":"two"}"#),
        "no other payload changes"
    );
    assert!(
        !s.tamper_payload("missing", "{}").unwrap(),
        "an unknown hash is reported, not invented"
    );
    assert_eq!(s.payload("missing").unwrap(), None);
}

/// `counts` adds up exactly what the store holds: runs by state, ended runs by outcome, the
/// final statuses each terminal record states, notifications by route and whether sent.
pub fn counts_are_aggregates_of_what_is_stored(open: Opener<'_>) {
    let s = open();
    assert_eq!(
        s.counts().unwrap(),
        StoreCounts::default(),
        "an empty store"
    );
    let end = |id: &str, outcome: Outcome, statuses: serde_json::Value, notify: bool| {
        s.create_run(&new_run(id)).unwrap();
        let t = Terminal {
            outcome,
            body: json!({"outcome": outcome.as_str(), "statuses": statuses}).into(),
            ..terminal(notify, id)
        };
        assert!(matches!(s.end_run(id, &t).unwrap(), EndResult::Ended(_)));
        // A second end changes nothing, so it counts nothing.
        assert_eq!(s.end_run(id, &t).unwrap(), EndResult::AlreadyEnded);
    };
    end(
        "c-agg-1",
        Outcome::Succeeded,
        json!({"d1": "verified", "d2": "verified"}),
        true,
    );
    end(
        "c-agg-2",
        Outcome::Failed,
        json!({"d1": "failed", "d2": "not_attempted", "d3": "verified"}),
        true,
    );
    end("c-agg-3", Outcome::Partial, json!({"d1": "unknown"}), false);
    // A terminal record without statuses (a run that declared nothing) adds no delivery.
    s.create_run(&new_run("c-agg-4")).unwrap();
    s.end_run("c-agg-4", &terminal(false, "c-agg-4")).unwrap();
    s.create_run(&new_run("c-agg-5")).unwrap();
    s.create_run(&new_run("c-agg-6")).unwrap();
    s.set_run_state("c-agg-6", RunState::Suspended).unwrap();
    let sent = s.outbox_for_run("c-agg-1").unwrap();
    s.outbox_mark_sent(sent[0].id, 5).unwrap();

    let words = |pairs: &[(&str, u64)]| -> BTreeMap<String, u64> {
        pairs.iter().map(|(k, n)| (k.to_string(), *n)).collect()
    };
    let c = s.counts().unwrap();
    assert_eq!(
        c.runs_by_state,
        words(&[("created", 1), ("ended", 4), ("suspended", 1)])
    );
    assert_eq!(
        c.ended_by_outcome,
        words(&[("failed", 1), ("partial", 1), ("succeeded", 2)])
    );
    assert_eq!(
        c.deliveries_by_status,
        words(&[
            ("failed", 1),
            ("not_attempted", 1),
            ("unknown", 1),
            ("verified", 3)
        ])
    );
    assert_eq!(
        c.notifications,
        BTreeMap::from([
            (("notify".to_string(), false), 1),
            (("notify".to_string(), true), 1)
        ])
    );
    assert_eq!(c.notifications_pending, 1);
    // Reopened, the same figures: they are the store's, not a cache's.
    assert_eq!(open().counts().unwrap(), c);
}

/// An `Idempotency-Key` is kept once per scope (§17.1): the first keeps its request and
/// answer; every later use of the key — another opener, or racing — gets what the first kept,
/// and changes nothing. Another scope's key of the same text is its own.
pub fn request_keys_are_kept_once(open: Opener<'_>) {
    use crate::request_keys::{KeptRequest, RequestKey};
    let s = open();
    let key = |scope: &str, request: &str, answer: &str| RequestKey {
        scope: scope.into(),
        key: "k-1".into(),
        request: request.into(),
        answer: answer.into(),
    };
    assert_eq!(s.keep_request(&key("runs:p", "h1", "r1"), 1).unwrap(), None);
    let first = Some(KeptRequest {
        request: "h1".into(),
        answer: "r1".into(),
    });
    assert_eq!(
        s.keep_request(&key("runs:p", "h2", "r2"), 2).unwrap(),
        first
    );
    assert_eq!(
        open().keep_request(&key("runs:p", "h1", "r3"), 3).unwrap(),
        first
    );
    assert_eq!(s.keep_request(&key("runs:q", "h1", "r4"), 4).unwrap(), None);
    // Racing keeps of one key: exactly one keeps, and every one answers its answer.
    let answers: Vec<String> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4)
            .map(|i| {
                let b = open();
                sc.spawn(move || {
                    let mine = format!("r-race-{i}");
                    match b.keep_request(&key("runs:race", "h", &mine), 5).unwrap() {
                        None => mine,
                        Some(k) => k.answer,
                    }
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert!(answers.iter().all(|a| a == &answers[0]), "{answers:?}");
}
