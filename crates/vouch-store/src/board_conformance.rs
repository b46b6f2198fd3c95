//! The board's shared test suite (§13), run against every backend with the `conformance`
//! feature. Each case uses its own task ids, so one store can serve the whole suite.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::board::*;
use crate::StoreError;
use serde_json::json;
use std::sync::Arc;
use vouch_core::board::{AttemptState, Condition, FailureClass, TaskState};

pub type BoardOpener<'a> = &'a dyn Fn() -> Arc<dyn BoardStore>;

/// One `#[test]` per check of this suite, each on a fresh store, so a backend's test run
/// names the rule that broke. `$fresh` is an expression giving `(guard, opener)`: the guard
/// keeps the store's place (a folder, a schema) alive until the test ends; the opener opens
/// the store over the same data each time it is called.
#[macro_export]
macro_rules! board_conformance_tests {
    ($fresh:expr) => {
        $crate::board_conformance_tests!(@each $fresh;
            offer_and_idempotency,
            claim_order_and_filters,
            heartbeat_report_and_late_words,
            retries_make_new_attempts,
            cancel_wins,
            sweeper_clocks_deadlines_and_conditions,
            suspended_attempts_resume_first,
            aborts_are_retryable,
            judge_excludes_the_producer,
            durable_across_reopen,
            racing_claimants_get_each_task_once,
            cancel_races_report,
            measures_count_by_cohort,
            threads_are_listed_and_measured,
            ended_attempts_are_charged_once,
            failures_are_classified,
            task_counts_are_by_state,
            signatures_are_verified,
            nonces_are_spent_once,
            repairs_are_counted_on_the_attempt_row,
            a_claims_run_binds_the_report,
            a_suspended_attempt_is_settled_from_its_run
        );
    };
    (@each $fresh:expr; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                let (_guard, open) = $fresh;
                $crate::board_conformance::$check(&open);
            }
        )*
    };
}

pub fn new_task(id: &str, max_attempts: u32, at: i64) -> NewTask {
    NewTask {
        id: id.into(),
        kind: "freeform".into(),
        owner: "owner".into(),
        max_attempts,
        deadline_ms: None,
        profiles: vec![],
        tags: vec![],
        excluded_claimant: None,
        condition: None,
        idempotency_key: None,
        request_id: format!("sha256:{id}"),
        spec: TaskSpec {
            context: vec![],
            input_artifacts: vec![],
            brief: format!("brief of {id}"),
            input: json!({"brief": format!("brief of {id}")}),
            correlation: id.into(),
            criteria: None,
            references: vec![],
            lease_ms: 1_000,
            heartbeat_ms: 200,
            dispatch_timeout_ms: 5_000,
            running_timeout_ms: 60_000,
        },
        created_ms: at,
    }
}

pub fn claim_req(claimant: &str, task_id: Option<&str>, now: i64) -> ClaimRequest {
    ClaimRequest {
        claimant: claimant.into(),
        profile: "default".into(),
        model: Some("scripted".into()),
        policy_fingerprint: "sha256:policy".into(),
        types: vec![],
        tags: vec![],
        task_id: task_id.map(str::to_string),
        signature: None,
        nonce: None,
        policy: json!({}),
        now_ms: now,
        run_id: None,
    }
}

fn at(c: &Claim) -> AttemptRef {
    AttemptRef {
        task_id: c.task.id.clone(),
        n: c.attempt.n,
        claimant: c.attempt.claimant.clone(),
        epoch: c.attempt.epoch,
    }
}

fn report(c: &Claim, kind: ReportKind, now: i64) -> Report {
    Report {
        attempt: at(c),
        kind,
        run_id: Some(format!("run-{}-{}", c.task.id, c.attempt.n)),
        receipt: Some("receipt".into()),
        usage: Usage {
            turns: 3,
            tokens: 100,
            tool_calls: 2,
            failed_tool_calls: 0,
        },
        signature: None,
        stamp: None,
        now_ms: now,
    }
}

fn accepted(v: serde_json::Value) -> ReportKind {
    ReportKind::Accepted {
        result: v,
        self_assessment: None,
        verdict: None,
    }
}

fn conflict<T: std::fmt::Debug>(r: Result<T, StoreError>, what: &str) {
    match r {
        Err(StoreError::Conflict(_)) => {}
        other => panic!("{what}: expected a refusal (Conflict), got {other:?}"),
    }
}

/// Claim the given task by id (so cases do not take each other's tasks).
fn claim_id(s: &dyn BoardStore, claimant: &str, id: &str, now: i64) -> Claim {
    s.claim(&claim_req(claimant, Some(id), now))
        .unwrap()
        .unwrap_or_else(|| panic!("{claimant} could not claim {id}"))
}

pub fn offer_and_idempotency(open: BoardOpener<'_>) {
    let s = open();
    let mut t = new_task("o-1", 1, 10);
    t.idempotency_key = Some("key-1".into());
    let first = s.offer(&t).unwrap();
    assert!(matches!(first, Offered::Created(_)));
    assert_eq!(first.task().state, TaskState::Queued);
    assert_eq!(first.task().queued_ms, Some(10));
    // Same key, same request (a retried create with a new id): the same task.
    let mut again = t.clone();
    again.id = "o-1-retry".into();
    match s.offer(&again).unwrap() {
        Offered::Existing(x) => assert_eq!(x.id, "o-1"),
        other => panic!("expected the existing task, got {other:?}"),
    }
    assert!(s.task("o-1-retry").unwrap().is_none());
    // Same key, different request: refused.
    let mut other = again.clone();
    other.request_id = "sha256:different".into();
    conflict(s.offer(&other), "a reused key with another request");
    for bad in [0, 21] {
        conflict(
            s.offer(&new_task(&format!("o-bad-{bad}"), bad, 1)),
            "max attempts",
        );
    }
    // A second task with the same id is refused and changes nothing.
    conflict(s.offer(&new_task("o-1", 2, 11)), "a duplicate id");
    assert_eq!(s.task("o-1").unwrap().unwrap().max_attempts, 1);
    let back = s.task("o-1").unwrap().unwrap();
    assert_eq!(back.spec, t.spec);
    assert_eq!(back.idempotency_key.as_deref(), Some("key-1"));
}

pub fn claim_order_and_filters(open: BoardOpener<'_>) {
    let s = open();
    // A namespace of tags so that other cases' tasks are never claimed here.
    let mut a = new_task("f-a", 1, 100);
    a.tags = vec!["f-tag".into()];
    a.kind = "f-type".into();
    let mut b = new_task("f-b", 1, 50);
    b.tags = vec!["f-tag".into(), "f-other".into()];
    b.kind = "f-type".into();
    b.profiles = vec!["gpu".into()];
    let mut c = new_task("f-c", 1, 70);
    c.tags = vec!["f-tag".into()];
    c.kind = "f-type2".into();
    for t in [&a, &b, &c] {
        s.offer(t).unwrap();
    }
    let mut req = claim_req("w1", None, 1_000);
    req.tags = vec!["f-tag".into()];
    req.types = vec!["f-type".into()];
    // b is older but needs profile gpu; a is the oldest claimable for profile default.
    let got = s.claim(&req).unwrap().unwrap();
    assert_eq!(got.task.id, "f-a");
    assert_eq!(got.task.state, TaskState::Dispatched);
    assert_eq!(got.task.claimant.as_deref(), Some("w1"));
    assert_eq!(got.task.lease_until_ms, Some(1_000 + 1_000));
    assert_eq!(got.attempt.n, 1);
    assert_eq!(got.attempt.state, AttemptState::Claimed);
    assert_eq!(got.attempt.policy_fingerprint, "sha256:policy");
    assert!(!got.resumption);
    assert!(s.claim(&req).unwrap().is_none(), "nothing else matches");
    req.profile = "gpu".into();
    assert_eq!(s.claim(&req).unwrap().unwrap().task.id, "f-b");
    req.types = vec!["f-type2".into()];
    req.tags = vec!["f-missing".into()];
    assert!(s.claim(&req).unwrap().is_none());
    req.tags = vec![];
    req.task_id = Some("f-c".into());
    assert_eq!(s.claim(&req).unwrap().unwrap().task.id, "f-c");
    // claim-by-id of a task that is no longer queued: nothing.
    assert!(s.claim(&req).unwrap().is_none());
    let listed = s
        .tasks(&TaskFilter {
            state: Some(TaskState::Dispatched),
            tag: Some("f-other".into()),
            limit: 10,
            correlation: None,
        })
        .unwrap();
    assert_eq!(
        listed.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        vec!["f-b"]
    );
}

pub fn heartbeat_report_and_late_words(open: BoardOpener<'_>) {
    let s = open();
    s.offer(&new_task("h-1", 1, 1)).unwrap();
    let c = claim_id(&*s, "w1", "h-1", 10);
    // Someone else's heartbeat or report is refused and changes nothing.
    let mut other = at(&c);
    other.claimant = "intruder".into();
    conflict(s.heartbeat(&other, 11), "a non-claimant's heartbeat");
    let before = (s.task("h-1").unwrap(), s.attempts("h-1").unwrap());
    let mut r = report(&c, accepted(json!({"summary": "x"})), 12);
    r.attempt.claimant = "intruder".into();
    conflict(s.report(&r), "a non-claimant's report");
    assert_eq!(before, (s.task("h-1").unwrap(), s.attempts("h-1").unwrap()));

    let hb = s.heartbeat(&at(&c), 20).unwrap();
    assert!(!hb.cancelled);
    assert_eq!(hb.lease_until_ms, Some(1_020));
    let t = s.task("h-1").unwrap().unwrap();
    assert_eq!(t.state, TaskState::Running);
    let a = &s.attempts("h-1").unwrap()[0];
    assert_eq!((a.state, a.started_ms), (AttemptState::Running, Some(20)));
    s.heartbeat(&at(&c), 500).unwrap();
    assert_eq!(s.task("h-1").unwrap().unwrap().lease_until_ms, Some(1_500));

    let result = json!({"summary": "done", "n": [1, 2]});
    let done = s
        .report(&report(
            &c,
            ReportKind::Accepted {
                result: result.clone(),
                self_assessment: Some(json!({"criterion": "met"})),
                verdict: None,
            },
            600,
        ))
        .unwrap();
    assert_eq!(done.task.state, TaskState::Completed);
    assert_eq!(done.task.accepted_attempt, Some(1));
    assert_eq!(done.attempt.state, AttemptState::Completed);
    assert_eq!(done.attempt.usage.turns, 3);
    let id = done.task.result_id.clone().unwrap();
    assert_eq!(id, content_id(&result).unwrap());
    assert!(id.starts_with("sha256:"));
    assert_eq!(s.result(&id).unwrap(), Some(result));
    let a = &s.attempts("h-1").unwrap()[0];
    assert_eq!(a.detail["self_assessment"], json!({"criterion": "met"}));
    assert_eq!(a.detail["receipt"], json!("receipt"));
    // A second report, or a heartbeat, after the attempt ended: refused, nothing changes.
    let before = (s.task("h-1").unwrap(), s.attempts("h-1").unwrap());
    conflict(
        s.report(&report(
            &c,
            ReportKind::Failed {
                retryable: true,
                reason: "late".into(),
                class: None,
            },
            700,
        )),
        "a report after the attempt ended",
    );
    conflict(s.heartbeat(&at(&c), 700), "a heartbeat after the end");
    conflict(s.cancel("h-1", 700), "cancel of a completed task");
    assert_eq!(before, (s.task("h-1").unwrap(), s.attempts("h-1").unwrap()));
    assert!(matches!(
        s.heartbeat(
            &AttemptRef {
                task_id: "h-missing".into(),
                n: 1,
                claimant: "w1".into(),
                epoch: 1
            },
            1
        ),
        Err(StoreError::NotFound { .. })
    ));
}

pub fn retries_make_new_attempts(open: BoardOpener<'_>) {
    let s = open();
    s.offer(&new_task("r-1", 3, 1)).unwrap();
    let c1 = claim_id(&*s, "w1", "r-1", 10);
    let out = s
        .report(&report(
            &c1,
            ReportKind::Failed {
                retryable: true,
                reason: "flaky".into(),
                class: None,
            },
            20,
        ))
        .unwrap();
    assert_eq!(out.task.state, TaskState::Queued);
    let c2 = claim_id(&*s, "w2", "r-1", 30);
    assert_eq!((c2.attempt.n, c2.attempt.epoch), (2, c1.attempt.epoch + 1));
    // The first attempt's word after its end: refused.
    conflict(
        s.report(&report(&c1, accepted(json!({})), 31)),
        "the old attempt's late report",
    );
    let out = s
        .report(&report(
            &c2,
            ReportKind::Failed {
                retryable: false,
                reason: "bad input".into(),
                class: None,
            },
            40,
        ))
        .unwrap();
    assert_eq!(out.task.state, TaskState::Failed);
    let atts = s.attempts("r-1").unwrap();
    assert_eq!(
        atts.iter().map(|a| a.state).collect::<Vec<_>>(),
        vec![AttemptState::Failed, AttemptState::Failed]
    );
    assert_eq!(atts[0].end_reason.as_deref(), Some("flaky"));
    assert_eq!(atts[0].retryable, Some(true));
    assert_eq!(atts[0].claimant, "w1");
    assert!(s
        .claim(&claim_req("w3", Some("r-1"), 50))
        .unwrap()
        .is_none());
}

pub fn cancel_wins(open: BoardOpener<'_>) {
    let s = open();
    s.offer(&new_task("x-1", 2, 1)).unwrap();
    let c = claim_id(&*s, "w1", "x-1", 10);
    s.heartbeat(&at(&c), 11).unwrap();
    let t = s.cancel("x-1", 12).unwrap();
    assert_eq!(t.state, TaskState::Cancelled);
    assert_eq!(s.attempts("x-1").unwrap()[0].state, AttemptState::Cancelled);
    // The next heartbeat says so; a report after it is refused.
    assert!(s.heartbeat(&at(&c), 13).unwrap().cancelled);
    let before = (s.task("x-1").unwrap(), s.attempts("x-1").unwrap());
    conflict(
        s.report(&report(&c, accepted(json!({"late": true})), 14)),
        "a report after cancel",
    );
    assert_eq!(before, (s.task("x-1").unwrap(), s.attempts("x-1").unwrap()));
    assert!(s
        .claim(&claim_req("w2", Some("x-1"), 15))
        .unwrap()
        .is_none());
    // Cancel of a queued task, of an unknown task.
    s.offer(&new_task("x-2", 1, 1)).unwrap();
    assert_eq!(s.cancel("x-2", 5).unwrap().state, TaskState::Cancelled);
    assert!(matches!(
        s.cancel("x-none", 5),
        Err(StoreError::NotFound { .. })
    ));
}

pub fn sweeper_clocks_deadlines_and_conditions(open: BoardOpener<'_>) {
    let s = open();
    // Lease lapse: attempt timed out, attempt 2 by another worker.
    s.offer(&new_task("s-lease", 2, 1)).unwrap();
    let c = claim_id(&*s, "w1", "s-lease", 100);
    s.heartbeat(&at(&c), 200).unwrap(); // lease until 1_200
    let sw = s.sweep(1_100).unwrap();
    assert!(!sw.timed_out.iter().any(|(t, ..)| t == "s-lease"));
    let sw = s.sweep(1_200).unwrap();
    assert!(sw
        .timed_out
        .contains(&("s-lease".to_string(), 1, "lease".to_string())));
    assert_eq!(s.task("s-lease").unwrap().unwrap().state, TaskState::Queued);
    conflict(s.heartbeat(&at(&c), 1_201), "a heartbeat after the lapse");
    conflict(
        s.report(&report(&c, accepted(json!({})), 1_202)),
        "a report after the lapse",
    );
    let c2 = claim_id(&*s, "w2", "s-lease", 1_300);
    assert_eq!(c2.attempt.n, 2);
    // Dispatch timeout: no first heartbeat (lease 1 s would also lapse; dispatch is first).
    let mut t = new_task("s-dispatch", 1, 1);
    t.spec.dispatch_timeout_ms = 500;
    s.offer(&t).unwrap();
    claim_id(&*s, "w1", "s-dispatch", 100);
    let sw = s.sweep(600).unwrap();
    assert!(sw
        .timed_out
        .contains(&("s-dispatch".to_string(), 1, "dispatch".to_string())));
    assert_eq!(
        s.task("s-dispatch").unwrap().unwrap().state,
        TaskState::Failed
    );
    // Running timeout: heartbeats keep the lease alive, the total still runs out.
    let mut t = new_task("s-running", 1, 1);
    t.spec.running_timeout_ms = 2_500;
    s.offer(&t).unwrap();
    let c = claim_id(&*s, "w1", "s-running", 0);
    for now in [500, 1_300, 2_100] {
        s.heartbeat(&at(&c), now).unwrap();
    }
    let sw = s.sweep(2_600).unwrap();
    assert!(sw
        .timed_out
        .contains(&("s-running".to_string(), 1, "running".to_string())));
    // Deadline: a queued task expires.
    let mut t = new_task("s-deadline", 1, 1);
    t.deadline_ms = Some(5_000);
    s.offer(&t).unwrap();
    assert!(s
        .claim(&claim_req("w1", Some("s-deadline"), 5_000))
        .unwrap()
        .is_none());
    let sw = s.sweep(5_000).unwrap();
    assert!(sw.expired.contains(&"s-deadline".to_string()));
    assert_eq!(
        s.task("s-deadline").unwrap().unwrap().state,
        TaskState::Expired
    );
    // Conditions: waiting until the dependency is accepted.
    s.offer(&new_task("s-dep", 1, 1)).unwrap();
    let mut t = new_task("s-after", 1, 2);
    t.condition = Some(Condition::TaskAccepted("s-dep".into()));
    assert_eq!(s.offer(&t).unwrap().task().state, TaskState::Waiting);
    assert!(s
        .claim(&claim_req("w1", Some("s-after"), 10))
        .unwrap()
        .is_none());
    assert!(!s
        .sweep(10)
        .unwrap()
        .promoted
        .contains(&"s-after".to_string()));
    let c = claim_id(&*s, "w1", "s-dep", 10);
    s.report(&report(&c, accepted(json!({"ok": 1})), 20))
        .unwrap();
    assert!(s
        .sweep(30)
        .unwrap()
        .promoted
        .contains(&"s-after".to_string()));
    let t = s.task("s-after").unwrap().unwrap();
    assert_eq!((t.state, t.queued_ms), (TaskState::Queued, Some(30)));
    // A condition that already holds at offer: queued at once.
    let mut t = new_task("s-after2", 1, 40);
    t.condition = Some(Condition::Any(vec![
        Condition::TaskEnded("s-missing".into()),
        Condition::TaskAccepted("s-dep".into()),
    ]));
    assert_eq!(s.offer(&t).unwrap().task().state, TaskState::Queued);
}

pub fn suspended_attempts_resume_first(open: BoardOpener<'_>) {
    let s = open();
    let mut t = new_task("u-1", 1, 1);
    t.tags = vec!["u".into()];
    t.spec.running_timeout_ms = 10_000;
    s.offer(&t).unwrap();
    let c = claim_id(&*s, "w1", "u-1", 1_000);
    s.heartbeat(&at(&c), 2_000).unwrap();
    let t = s.suspend(&at(&c), "run-u-1", 3_000).unwrap();
    assert_eq!(t.state, TaskState::Running);
    assert_eq!(t.claimant, None);
    let a = &s.attempts("u-1").unwrap()[0];
    assert_eq!(a.state, AttemptState::Suspended);
    // The run is recorded: a person deciding on it finds the task.
    assert_eq!(a.run_id.as_deref(), Some("run-u-1"));
    let found = s.attempt_of_run("run-u-1").unwrap().unwrap();
    assert_eq!((found.task_id.as_str(), found.n), ("u-1", 1));
    assert!(s.attempt_of_run("run-nope").unwrap().is_none());
    assert_eq!((a.lease_until_ms, a.running_left_ms), (None, Some(8_000)));
    // The clocks stopped: no sweep times it out, nobody can claim it.
    assert!(s
        .sweep(100_000)
        .unwrap()
        .timed_out
        .iter()
        .all(|(t, ..)| t != "u-1"));
    let mut req = claim_req("w2", None, 100_000);
    req.tags = vec!["u".into()];
    let mut other = new_task("u-0", 1, 0);
    other.tags = vec!["u".into()];
    s.offer(&other).unwrap();
    conflict(
        s.heartbeat(&at(&c), 100_001),
        "a heartbeat of a suspended attempt",
    );
    // The person decides: claim-next prefers the resumption over the older queued task.
    s.resume_ready("u-1", 100_002).unwrap();
    let r = s.claim(&req).unwrap().unwrap();
    assert_eq!(r.task.id, "u-1");
    assert!(r.resumption);
    assert_eq!((r.attempt.n, r.attempt.claimant.as_str()), (1, "w2"));
    assert_eq!(r.attempt.epoch, c.attempt.epoch + 1);
    assert_eq!(r.attempt.running_deadline_ms, Some(100_000 + 8_000));
    // The first claimant's old lease is gone.
    conflict(
        s.report(&report(&c, accepted(json!({})), 100_004)),
        "the first claimant after a resumption",
    );
    // The resumption reports with the attempt's run (§13.2: the run binds the report).
    let mut done = report(&r, accepted(json!({"resumed": true})), 100_005);
    done.run_id = Some("run-u-1".into());
    s.report(&done).unwrap();
    assert_eq!(s.task("u-1").unwrap().unwrap().state, TaskState::Completed);
    assert_eq!(s.claim(&req).unwrap().unwrap().task.id, "u-0");
}

/// A suspended attempt whose run ended while it waited is settled by the host (§13.3): only
/// a suspended attempt, only from its own run, never as an abort, once; a live attempt is its
/// worker's to report.
pub fn a_suspended_attempt_is_settled_from_its_run(open: BoardOpener<'_>) {
    let s = open();
    s.offer(&new_task("v-1", 2, 1)).unwrap();
    let c = claim_id(&*s, "w1", "v-1", 1_000);
    let mut r = report(&c, accepted(json!({"from": "journal"})), 2_000);
    r.run_id = Some("run-v-1".into());
    assert_eq!(s.settle_suspended(&r).unwrap(), None, "a live attempt");
    s.suspend(&at(&c), "run-v-1", 1_500).unwrap();
    let mut other = r.clone();
    other.run_id = Some("run-v-2".into());
    conflict(s.settle_suspended(&other), "another run");
    let mut abort = r.clone();
    abort.kind = ReportKind::Aborted {
        reason: "no".into(),
    };
    conflict(s.settle_suspended(&abort), "an abort");
    let done = s.settle_suspended(&r).unwrap().expect("settled");
    assert_eq!(done.task.state, TaskState::Completed);
    assert_eq!(done.attempt.state, AttemptState::Completed);
    assert_eq!(done.attempt.run_id.as_deref(), Some("run-v-1"));
    let id = done.task.result_id.clone().unwrap();
    assert_eq!(s.result(&id).unwrap(), Some(json!({"from": "journal"})));
    assert_eq!(s.settle_suspended(&r).unwrap(), None, "once");
}

/// The repair budget is the attempt row's (§13.4.1): only the live claimant spends it, the
/// count survives a reopen, and an ended attempt's count no longer moves.
pub fn repairs_are_counted_on_the_attempt_row(open: BoardOpener<'_>) {
    let s = open();
    s.offer(&new_task("r-1", 1, 1)).unwrap();
    let c = claim_id(&*s, "w1", "r-1", 10);
    assert_eq!(s.repairs_spent("r-1", 1).unwrap(), 0);
    assert_eq!(s.spend_repair(&at(&c)).unwrap(), 1);
    assert_eq!(s.spend_repair(&at(&c)).unwrap(), 2);
    let stranger = AttemptRef {
        claimant: "w2".into(),
        ..at(&c)
    };
    conflict(s.spend_repair(&stranger), "another claimant's repair");
    let stale = AttemptRef {
        epoch: c.attempt.epoch + 1,
        ..at(&c)
    };
    conflict(s.spend_repair(&stale), "a stale epoch's repair");
    drop(s);
    let s = open();
    assert_eq!(s.repairs_spent("r-1", 1).unwrap(), 2, "durable");
    let kind = ReportKind::Failed {
        retryable: false,
        reason: "no repairs left".into(),
        class: Some(vouch_core::board::FailureClass::MalformedOutput),
    };
    s.report(&report(&c, kind, 20)).unwrap();
    conflict(s.spend_repair(&at(&c)), "an ended attempt's repair");
    assert_eq!(s.repairs_spent("r-1", 1).unwrap(), 2);
    assert_eq!(s.repairs_spent("nope", 1).unwrap(), 0);
}

/// A claim that names the attempt's run (the host opened it, §13.2) records it on the new
/// attempt's row at once; a report naming no run, or another, is refused and changes
/// nothing; the run's own report ends the attempt. An abort names none and keeps the run.
pub fn a_claims_run_binds_the_report(open: BoardOpener<'_>) {
    let s = open();
    s.offer(&new_task("b-1", 2, 1)).unwrap();
    let mut req = claim_req("w1", Some("b-1"), 10);
    req.run_id = Some("run-b1".into());
    let c = s.claim(&req).unwrap().unwrap();
    assert_eq!(c.attempt.run_id.as_deref(), Some("run-b1"));
    let row = |n: u32| {
        s.attempts("b-1")
            .unwrap()
            .into_iter()
            .find(|a| a.n == n)
            .unwrap()
    };
    assert_eq!(row(1).run_id.as_deref(), Some("run-b1"));
    for named in [None, Some("run-other".to_string())] {
        let mut r = report(&c, accepted(serde_json::json!({"summary": "s"})), 20);
        r.run_id = named;
        conflict(s.report(&r), "a report not naming the attempt's run");
    }
    assert!(row(1).state.is_leased(), "nothing changed");
    let mut r = report(
        &c,
        ReportKind::Aborted {
            reason: "stopping".into(),
        },
        30,
    );
    r.run_id = None;
    let out = s.report(&r).unwrap();
    assert_eq!(out.attempt.state, AttemptState::Aborted);
    assert_eq!(out.attempt.run_id.as_deref(), Some("run-b1"), "kept");
    let mut req = claim_req("w1", Some("b-1"), 40);
    req.run_id = Some("run-b2".into());
    let c2 = s.claim(&req).unwrap().unwrap();
    let mut r = report(&c2, accepted(serde_json::json!({"summary": "s"})), 50);
    r.run_id = Some("run-b2".into());
    let out = s.report(&r).unwrap();
    assert_eq!(out.task.state, TaskState::Completed);
    assert_eq!(out.attempt.run_id.as_deref(), Some("run-b2"));
}

pub fn aborts_are_retryable(open: BoardOpener<'_>) {
    let s = open();
    s.offer(&new_task("a-1", 1, 1)).unwrap();
    let c = claim_id(&*s, "w1", "a-1", 10);
    let out = s
        .report(&report(
            &c,
            ReportKind::Aborted {
                reason: "SIGTERM".into(),
            },
            20,
        ))
        .unwrap();
    assert_eq!(out.task.state, TaskState::Queued);
    assert_eq!(out.attempt.state, AttemptState::Aborted);
    let c2 = claim_id(&*s, "w2", "a-1", 30);
    assert_eq!(c2.attempt.n, 2);
    let out = s
        .report(&report(
            &c2,
            ReportKind::Failed {
                retryable: true,
                reason: "x".into(),
                class: None,
            },
            40,
        ))
        .unwrap();
    // One counted attempt of one allowed: the retryable failure ends it.
    assert_eq!(out.task.state, TaskState::Failed);
}

pub fn judge_excludes_the_producer(open: BoardOpener<'_>) {
    let s = open();
    let mut t = new_task("j-1", 1, 1);
    t.kind = "judge".into();
    t.excluded_claimant = Some("producer".into());
    s.offer(&t).unwrap();
    assert!(s
        .claim(&claim_req("producer", Some("j-1"), 10))
        .unwrap()
        .is_none());
    let c = claim_id(&*s, "judge-w", "j-1", 11);
    s.report(&report(
        &c,
        ReportKind::Accepted {
            result: json!({"passed": true}),
            self_assessment: None,
            verdict: Some(Box::new(Verdict {
                target: "h-1".into(),
                passed: true,
                scores: json!({"clarity": 1.0}),
            })),
        },
        12,
    ))
    .unwrap();
    let v = s.verdicts("h-1").unwrap();
    assert_eq!(v.len(), 1);
    assert_eq!(v[0].0, "j-1");
    assert!(v[0].1.passed);
}

pub fn durable_across_reopen(open: BoardOpener<'_>) {
    {
        let s = open();
        s.offer(&new_task("d-1", 2, 1)).unwrap();
        let c = claim_id(&*s, "w1", "d-1", 10);
        s.heartbeat(&at(&c), 11).unwrap();
    }
    let s = open();
    let t = s.task("d-1").unwrap().unwrap();
    assert_eq!(
        (t.state, t.claimant.as_deref()),
        (TaskState::Running, Some("w1"))
    );
    assert_eq!(s.attempts("d-1").unwrap().len(), 1);
}

pub fn racing_claimants_get_each_task_once(open: BoardOpener<'_>) {
    let s = open();
    const TASKS: usize = 200;
    for i in 0..TASKS {
        let mut t = new_task(&format!("race-{i:04}"), 1, 1_000 + i as i64);
        t.kind = "race".into();
        s.offer(&t).unwrap();
    }
    let claims: Vec<Vec<(String, String, u32)>> = std::thread::scope(|scope| {
        let hs: Vec<_> = (0..8)
            .map(|w| {
                let s = s.clone();
                scope.spawn(move || {
                    let mut got = vec![];
                    let mut req = claim_req(&format!("racer-{w}"), None, 10_000);
                    req.types = vec!["race".into()];
                    loop {
                        match s.claim(&req) {
                            Ok(Some(c)) => {
                                s.report(&report(&c, accepted(json!({"by": w})), 10_001))
                                    .unwrap();
                                got.push((c.task.id, c.attempt.claimant, c.attempt.n));
                            }
                            Ok(None) => break,
                            Err(StoreError::Retryable(_)) => continue,
                            Err(e) => panic!("claim failed: {e}"),
                        }
                    }
                    got
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut all: Vec<_> = claims.into_iter().flatten().collect();
    assert_eq!(all.len(), TASKS, "every task claimed exactly once");
    all.sort();
    all.dedup_by(|a, b| a.0 == b.0);
    assert_eq!(all.len(), TASKS, "no task claimed twice");
    for (id, who, n) in &all {
        let t = s.task(id).unwrap().unwrap();
        assert_eq!(t.state, TaskState::Completed);
        assert_eq!((t.attempts, *n), (1, 1));
        assert_eq!(&s.attempts(id).unwrap()[0].claimant, who);
    }
}

pub fn cancel_races_report(open: BoardOpener<'_>) {
    let s = open();
    for i in 0..40 {
        let id = format!("cr-{i}");
        s.offer(&new_task(&id, 1, 1)).unwrap();
        let c = claim_id(&*s, "w1", &id, 10);
        let (cancel, rep) = std::thread::scope(|scope| {
            let s1 = s.clone();
            let s2 = s.clone();
            let id2 = id.clone();
            let c2 = c.clone();
            let h1 = scope.spawn(move || s1.cancel(&id2, 20));
            let h2 = scope.spawn(move || s2.report(&report(&c2, accepted(json!({"i": i})), 20)));
            (h1.join().unwrap(), h2.join().unwrap())
        });
        // Exactly one of them took effect, and the stored state says which.
        let t = s.task(&id).unwrap().unwrap();
        match (cancel.is_ok(), rep.is_ok()) {
            (true, false) => assert_eq!(t.state, TaskState::Cancelled),
            (false, true) => assert_eq!(t.state, TaskState::Completed),
            other => panic!("cancel and report both {other:?} for {id}"),
        }
    }
}

pub fn measures_count_by_cohort(open: BoardOpener<'_>) {
    let s = open();
    let tag = |id: &str, max| {
        let mut t = new_task(id, max, 1_000_000);
        t.tags = vec!["m-tag".into()];
        t.kind = "m-type".into();
        t
    };
    for (id, max) in [("m-1", 1), ("m-2", 2), ("m-3", 1), ("m-4", 1)] {
        s.offer(&tag(id, max)).unwrap();
    }
    let c = claim_id(&*s, "w1", "m-1", 1_000_100);
    s.report(&report(&c, accepted(json!({"m": 1})), 1_000_200))
        .unwrap();
    let c = claim_id(&*s, "w1", "m-2", 1_000_100);
    s.report(&report(
        &c,
        ReportKind::Failed {
            retryable: true,
            reason: "x".into(),
            class: None,
        },
        1_000_150,
    ))
    .unwrap();
    let c = claim_id(&*s, "w2", "m-2", 1_000_160);
    s.report(&report(&c, accepted(json!({"m": 2})), 1_000_400))
        .unwrap();
    let c = claim_id(&*s, "w2", "m-3", 1_000_100);
    s.report(&report(
        &c,
        ReportKind::Failed {
            retryable: false,
            reason: "x".into(),
            class: None,
        },
        1_000_150,
    ))
    .unwrap();
    s.cancel("m-4", 1_000_100).unwrap();
    let rows = s
        .measures(&MeasuresQuery {
            by: Cohort::Type,
            since_ms: 1_000_000,
            friction_turns: 3,
            friction_failed_tools: 3,
            correlation: None,
        })
        .unwrap();
    let m = rows
        .iter()
        .find(|r| r.cohort == "m-type")
        .unwrap_or_else(|| panic!("no m-type cohort in {rows:?}"));
    assert_eq!(m.tasks, 4);
    assert_eq!(m.accepted, 2);
    assert_eq!(m.first_attempt_accepted, 1);
    assert_eq!(m.terminal_failed, 1);
    assert_eq!(m.cancelled, 1);
    assert_eq!(m.retried, 1);
    assert_eq!(m.retry_recovered, 1);
    assert_eq!(m.attempts, 4);
    assert_eq!(m.tool_calls, 8);
    assert_eq!(m.high_friction_attempts, 4);
    assert_eq!(m.median_turns, Some(3.0));
    // Queued at 1_000_000; accepted at 1_000_200 and 1_000_400: median 300.
    assert_eq!(m.median_queued_to_accepted_ms, Some(300.0));
    assert_eq!(m.tokens, 400);
    let r = rates(m);
    assert_eq!(r["accepted_output_rate"], json!(0.5));
    assert_eq!(r["retry_recovery"], json!(1.0));
    let by_claimant = s
        .measures(&MeasuresQuery {
            by: Cohort::Claimant,
            since_ms: 1_000_000,
            friction_turns: 8,
            friction_failed_tools: 3,
            correlation: None,
        })
        .unwrap();
    let w2 = by_claimant.iter().find(|r| r.cohort == "w2").unwrap();
    assert_eq!((w2.tasks, w2.accepted), (2, 1));
    assert_eq!(w2.high_friction_attempts, 0);
    let by_tag = s
        .measures(&MeasuresQuery {
            by: Cohort::Tag,
            since_ms: 1_000_000,
            friction_turns: 8,
            friction_failed_tools: 3,
            correlation: None,
        })
        .unwrap();
    assert_eq!(
        by_tag.iter().find(|r| r.cohort == "m-tag").map(|r| r.tasks),
        Some(4)
    );
}

/// A thread (§13.1) is the tasks whose correlation names it and the task of that id (its
/// first task); the listing, the measures and the thread view all take exactly those, in the
/// order they were offered.
pub fn threads_are_listed_and_measured(open: BoardOpener<'_>) {
    let s = open();
    let in_thread = |id: &str, correlation: &str, at| {
        let mut t = new_task(id, 1, at);
        t.spec.correlation = correlation.into();
        t
    };
    s.offer(&in_thread("c-root", "", 2_000_000)).unwrap();
    s.offer(&in_thread("c-other", "c-elsewhere", 2_000_001))
        .unwrap();
    s.offer(&in_thread("c-next", "c-root", 2_000_002)).unwrap();
    s.offer(&in_thread("c-last", "c-root", 2_000_003)).unwrap();
    let c = claim_id(&*s, "w1", "c-root", 2_000_010);
    s.report(&report(&c, accepted(json!({"c": 1})), 2_000_020))
        .unwrap();
    let c = claim_id(&*s, "w1", "c-next", 2_000_030);
    s.report(&report(
        &c,
        ReportKind::Failed {
            retryable: false,
            reason: "x".into(),
            class: None,
        },
        2_000_040,
    ))
    .unwrap();
    let listed = s
        .tasks(&TaskFilter {
            correlation: Some("c-root".into()),
            limit: 10,
            ..TaskFilter::default()
        })
        .unwrap();
    assert_eq!(
        listed.iter().map(|t| t.id.as_str()).collect::<Vec<_>>(),
        vec!["c-root", "c-next", "c-last"]
    );
    let nobody = s
        .tasks(&TaskFilter {
            correlation: Some("c-none".into()),
            limit: 10,
            ..TaskFilter::default()
        })
        .unwrap();
    assert!(nobody.is_empty(), "{nobody:?}");
    let rows = s
        .measures(&MeasuresQuery {
            by: Cohort::All,
            since_ms: 2_000_000,
            friction_turns: 8,
            friction_failed_tools: 3,
            correlation: Some("c-root".into()),
        })
        .unwrap();
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(
        (rows[0].tasks, rows[0].accepted, rows[0].terminal_failed),
        (3, 1, 1)
    );
    let thread = thread(&*s, "c-root").unwrap();
    assert_eq!(thread.len(), 3);
    assert_eq!(thread[0].result, Some(json!({"c": 1})));
    assert_eq!(thread[0].attempts.len(), 1);
    assert_eq!(thread[1].attempts[0].state, AttemptState::Failed);
    assert_eq!(thread[2].result, None);
}

/// An attempt that ended without a report (§13.7.2) is charged its run's cost once, beside
/// its row; the attempt shows it; a live attempt or one whose report carried its run is
/// refused; the measures count every attempt's tokens, and a crashed attempt's go to its own
/// claimant, not to the one who finished the task.
pub fn ended_attempts_are_charged_once(open: BoardOpener<'_>) {
    let s = open();
    let cost = |id: &str, n, run: &str, tokens| AttemptCost {
        task_id: id.into(),
        n,
        run_id: run.into(),
        usage: Usage {
            turns: 2,
            tokens,
            tool_calls: 1,
            failed_tool_calls: 0,
        },
        at_ms: 3_000_500,
    };
    // A cancelled attempt.
    s.offer(&new_task("k-1", 1, 3_000_000)).unwrap();
    claim_id(&*s, "w1", "k-1", 3_000_010);
    conflict(s.charge(&cost("k-1", 1, "run-k1", 50)), "a live attempt");
    s.cancel("k-1", 3_000_020).unwrap();
    assert!(s.charge(&cost("k-1", 1, "run-k1", 50)).unwrap());
    assert!(!s.charge(&cost("k-1", 1, "run-k1", 50)).unwrap(), "once");
    assert!(!s.charge(&cost("k-1", 1, "run-k1b", 99)).unwrap(), "once");
    let a = &s.attempts("k-1").unwrap()[0];
    assert_eq!(a.state, AttemptState::Cancelled);
    assert_eq!(a.run_id.as_deref(), Some("run-k1"));
    assert_eq!(a.usage.tokens, 50);
    assert_eq!(a.detail["charged"]["after_end"], json!(true));
    // A crashed attempt (timed out by the sweeper), then another claimant finishes the task.
    s.offer(&new_task("k-2", 2, 3_000_000)).unwrap();
    claim_id(&*s, "w-crashed", "k-2", 3_000_010);
    s.sweep(3_100_000).unwrap();
    assert_eq!(s.attempts("k-2").unwrap()[0].state, AttemptState::TimedOut);
    assert!(s.charge(&cost("k-2", 1, "run-k2", 70)).unwrap());
    let c = claim_id(&*s, "w-finisher", "k-2", 3_100_010);
    s.report(&report(&c, accepted(json!({"k": 2})), 3_100_020))
        .unwrap();
    conflict(
        s.charge(&cost("k-2", 2, "run-k2b", 1)),
        "an attempt whose report carried its run",
    );
    let q = |by| MeasuresQuery {
        by,
        since_ms: 3_000_000,
        friction_turns: 8,
        friction_failed_tools: 3,
        correlation: Some("k-2".into()),
    };
    let all = s.measures(&q(Cohort::All)).unwrap();
    assert_eq!(
        (all[0].tokens, all[0].accepted, all[0].attempts),
        (170, 1, 2)
    );
    assert_eq!(rates(&all[0])["tokens_per_accepted_output"], json!(170.0));
    let by = s.measures(&q(Cohort::Claimant)).unwrap();
    let crashed = by.iter().find(|r| r.cohort == "w-crashed").unwrap();
    assert_eq!(
        (crashed.tasks, crashed.attempts, crashed.tokens),
        (0, 1, 70)
    );
    let finisher = by.iter().find(|r| r.cohort == "w-finisher").unwrap();
    assert_eq!(
        (finisher.tasks, finisher.attempts, finisher.tokens),
        (1, 1, 100)
    );
}

/// A failure's class (§13.3.2) is recorded on the attempt as the reporter says it, never
/// decides the retry, a lapsed lease is a worker crash (a running timeout is not), and the
/// measures count each class.
pub fn failures_are_classified(open: BoardOpener<'_>) {
    let s = open();
    s.offer(&new_task("fc-1", 3, 4_000_000)).unwrap();
    let c = claim_id(&*s, "w1", "fc-1", 4_000_010);
    let r = s
        .report(&report(
            &c,
            ReportKind::Failed {
                retryable: false,
                reason: "the model server answered 503".into(),
                class: Some(FailureClass::ModelOutage),
            },
            4_000_020,
        ))
        .unwrap();
    assert_eq!(r.attempt.detail["failure_class"], "model_outage");
    assert_eq!(r.task.state, TaskState::Failed, "retryable: false decides");
    s.offer(&new_task("fc-2", 3, 4_000_000)).unwrap();
    let c = claim_id(&*s, "w1", "fc-2", 4_000_010);
    let r = s
        .report(&report(
            &c,
            ReportKind::Failed {
                retryable: true,
                reason: "no repairs left".into(),
                class: Some(FailureClass::MalformedOutput),
            },
            4_000_020,
        ))
        .unwrap();
    assert_eq!(r.task.state, TaskState::Queued, "retryable: true decides");
    claim_id(&*s, "w-dies", "fc-2", 4_000_030);
    s.sweep(4_100_000).unwrap();
    let a = &s.attempts("fc-2").unwrap()[1];
    assert_eq!(a.state, AttemptState::TimedOut);
    assert_eq!(a.detail["failure_class"], "worker_crash");
    let rows = s
        .measures(&MeasuresQuery {
            by: Cohort::Claimant,
            since_ms: 4_000_000,
            friction_turns: 8,
            friction_failed_tools: 3,
            correlation: None,
        })
        .unwrap();
    let w1 = rows.iter().find(|r| r.cohort == "w1").unwrap();
    assert_eq!(
        (
            w1.failed_model_outage,
            w1.failed_malformed_output,
            w1.failed_worker_crash
        ),
        (1, 1, 0)
    );
    let dies = rows.iter().find(|r| r.cohort == "w-dies").unwrap();
    assert_eq!(dies.failed_worker_crash, 1);
}

/// A stand-in for Ed25519 in the seam's test: the "signature" is SHA-256 over the identity's
/// secret and the statement; the verifier knows every identity's secret.
struct TestKeys;

/// `task_counts` names every state, in `TaskState::ALL` order, with exactly the tasks in it
/// (zero for a state no task is in), and agrees with the listing of each state.
pub fn task_counts_are_by_state(open: BoardOpener<'_>) {
    let s = open();
    let zeros: Vec<(TaskState, u64)> = TaskState::ALL.iter().map(|st| (*st, 0)).collect();
    assert_eq!(s.task_counts().unwrap(), zeros, "an empty board");
    for id in ["n-q1", "n-q2", "n-q3", "n-run", "n-done", "n-cancel"] {
        s.offer(&new_task(id, 1, 1)).unwrap();
    }
    let mut t = new_task("n-wait", 1, 1);
    t.condition = Some(Condition::TaskAccepted("n-q1".into()));
    s.offer(&t).unwrap();
    let c = claim_id(&*s, "w1", "n-run", 10);
    s.heartbeat(&at(&c), 11).unwrap();
    let c = claim_id(&*s, "w1", "n-done", 10);
    s.report(&report(&c, accepted(json!({"n": 1})), 12))
        .unwrap();
    s.cancel("n-cancel", 13).unwrap();
    let counts = s.task_counts().unwrap();
    let expected: Vec<(TaskState, u64)> = TaskState::ALL
        .iter()
        .map(|st| {
            let n = match st {
                TaskState::Queued => 3,
                TaskState::Waiting
                | TaskState::Running
                | TaskState::Completed
                | TaskState::Cancelled => 1,
                _ => 0,
            };
            (*st, n)
        })
        .collect();
    assert_eq!(counts, expected);
    for (st, n) in counts {
        let listed = s
            .tasks(&TaskFilter {
                state: Some(st),
                tag: None,
                limit: TASK_LIST_MAX,
                correlation: None,
            })
            .unwrap();
        assert_eq!(listed.len() as u64, n, "{st:?}");
    }
}

fn test_sign(identity: &str, statement: &str) -> String {
    vouch_core::sha256_hex(format!("{identity}-secret\n{statement}").as_bytes())
}

impl SignatureVerifier for TestKeys {
    fn verify(&self, identity: &str, statement: &str, sig: Option<&str>) -> Result<(), String> {
        match sig {
            None => Err(format!("`{identity}` did not sign it")),
            Some(s) if s == test_sign(identity, statement) => Ok(()),
            Some(_) => Err(format!(
                "the signature is not `{identity}`'s over this statement"
            )),
        }
    }
}

pub fn signatures_are_verified(open: BoardOpener<'_>) {
    let s = Verified {
        inner: open(),
        verifier: Arc::new(TestKeys),
    };
    s.offer(&new_task("sig-1", 1, 1)).unwrap();
    let mut req = claim_req("signer", Some("sig-1"), 10);
    conflict(s.claim(&req), "an unsigned claim");
    req.signature = Some(test_sign("signer", &claim_statement(&req).unwrap()));
    conflict(s.claim(&req), "a claim without a nonce");
    req.nonce = Some("claim-nonce-0000001".into());
    req.signature = Some(test_sign("intruder", &claim_statement(&req).unwrap()));
    conflict(s.claim(&req), "a claim signed by someone else");
    assert_eq!(s.task("sig-1").unwrap().unwrap().state, TaskState::Queued);
    req.signature = Some(test_sign("signer", &claim_statement(&req).unwrap()));
    let c = s.claim(&req).unwrap().unwrap();
    assert_eq!(c.attempt.detail["claim_signature"], json!(req.signature));
    // The same signed claim again is a replay: refused, even for a task that is claimable.
    s.offer(&new_task("sig-2", 1, 1)).unwrap();
    let mut again = req.clone();
    again.task_id = None;
    again.signature = Some(test_sign("signer", &claim_statement(&again).unwrap()));
    conflict(s.claim(&again), "a replayed claim nonce");
    assert_eq!(s.task("sig-2").unwrap().unwrap().state, TaskState::Queued);
    // Heartbeats too: unsigned or another's refused, signed once accepted, replayed refused.
    let a = at(&c);
    let beat = crate::board::Stamp {
        at_ms: 15,
        nonce: "beat-nonce-00000001".into(),
    };
    let beat_sig = |who: &str| test_sign(who, &heartbeat_statement(&a, &beat).unwrap());
    conflict(s.heartbeat(&a, 15), "an unsigned heartbeat");
    let other = beat_sig("intruder");
    conflict(
        s.heartbeat_signed(&a, 15, &beat, Some(&other)),
        "a heartbeat signed by someone else",
    );
    let mine = beat_sig("signer");
    assert!(
        !s.heartbeat_signed(&a, 15, &beat, Some(&mine))
            .unwrap()
            .cancelled
    );
    conflict(
        s.heartbeat_signed(&a, 16, &beat, Some(&mine)),
        "a replayed heartbeat",
    );
    let mut r = report(&c, accepted(json!({"signed": true})), 20);
    r.stamp = Some(crate::board::Stamp {
        at_ms: 20,
        nonce: "report-nonce-000001".into(),
    });
    // Signed over a different output: refused, nothing changes.
    let mut other = r.clone();
    other.kind = accepted(json!({"signed": false}));
    r.signature = Some(test_sign("signer", &report_statement(&other).unwrap()));
    let before = (s.task("sig-1").unwrap(), s.attempts("sig-1").unwrap());
    conflict(s.report(&r), "a report signed over another output");
    r.signature = None;
    conflict(s.report(&r), "an unsigned report");
    assert_eq!(
        before,
        (s.task("sig-1").unwrap(), s.attempts("sig-1").unwrap())
    );
    r.signature = Some(test_sign("signer", &report_statement(&r).unwrap()));
    let done = s.report(&r).unwrap();
    assert_eq!(done.task.state, TaskState::Completed);
    assert_eq!(done.attempt.detail["report_signature"], json!(r.signature));
}

/// A nonce is spent once per identity (§13.6.3): the conditional insert answers a replay
/// `false`, whichever process or host asks — of racing spends of one nonce exactly one wins —
/// and a nonce is forgotten only once no statement bearing it could still be fresh.
pub fn nonces_are_spent_once(open: BoardOpener<'_>) {
    use crate::board::{nonces_kept_after, spend_stamp, Stamp, StampError};
    let s = open();
    let now = 1_000_000_000;
    assert!(s.spend_nonce("w1", "n-0000000000000001", now, now).unwrap());
    assert!(!s.spend_nonce("w1", "n-0000000000000001", now, now).unwrap());
    // Another identity's nonce space is its own; another opener sees the same nonces.
    assert!(s.spend_nonce("w2", "n-0000000000000001", now, now).unwrap());
    assert!(!open()
        .spend_nonce("w1", "n-0000000000000001", now, now)
        .unwrap());
    // Racing spends of one nonce: exactly one wins.
    let wins: usize = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..4)
            .map(|_| {
                let b = open();
                sc.spawn(move || b.spend_nonce("w3", "n-race-000000001", now, now).unwrap())
            })
            .collect();
        hs.into_iter().map(|h| usize::from(h.join().unwrap())).sum()
    });
    assert_eq!(wins, 1);
    // Remembered as long as a statement bearing it could be fresh; forgotten after.
    let later = now + (now - nonces_kept_after(now));
    assert!(!s
        .spend_nonce("w1", "n-0000000000000001", later, later)
        .unwrap());
    let much_later = later + 1;
    assert!(s
        .spend_nonce("w1", "n-0000000000000002", much_later, much_later)
        .unwrap());
    assert!(s
        .spend_nonce("w1", "n-0000000000000001", much_later, much_later)
        .unwrap());
    // The one check: stale, malformed, replayed — each named.
    let stamp = |at_ms: i64, nonce: &str| Stamp {
        at_ms,
        nonce: nonce.into(),
    };
    let t = much_later;
    assert!(matches!(
        spend_stamp(&*s, "w1", &stamp(t - 61_000, "n-0000000000000003"), t),
        Err(StampError::Stale { .. })
    ));
    for bad in [
        "short",
        "has space in it 0000",
        &"x".repeat(65),
        "n-ünïcode-000000000",
    ] {
        assert!(
            matches!(
                spend_stamp(&*s, "w1", &stamp(t, bad), t),
                Err(StampError::BadNonce)
            ),
            "{bad}"
        );
    }
    spend_stamp(&*s, "w1", &stamp(t, "n-0000000000000003"), t).unwrap();
    assert!(matches!(
        spend_stamp(&*s, "w1", &stamp(t, "n-0000000000000003"), t),
        Err(StampError::Replayed { .. })
    ));
}

/// Issue 22 #6: a worker that dies after its run suspended but before telling the board left
/// the attempt to time out — retried, with a second card. The sweep sees the run durably
/// suspended and suspends the attempt instead (no retry, no second card). Needs the run store
/// beside the board (one store, two views).
pub fn sweep_suspends_an_attempt_whose_run_is_durably_suspended(
    runs: Arc<dyn crate::Store>,
    s: Arc<dyn BoardStore>,
) {
    let mut t = new_task("o-1", 3, 1);
    t.spec.running_timeout_ms = 10_000;
    s.offer(&t).unwrap();
    let c = claim_id(&*s, "w1", "o-1", 1_000);
    s.heartbeat(&at(&c), 2_000).unwrap();
    // An older suspended run of the task, before this claim, is not this attempt's.
    let run = |id: &str, created_ms: i64| crate::NewRun {
        state: vouch_core::RunState::Running,
        id: id.into(),
        trigger: vouch_core::TriggerKind::Task,
        title: format!("task o-1: {id}"),
        chain_root: id.into(),
        parent: None,
        scope: "task:o-1".into(),
        spec: json!({}),
        created_ms,
        lease: None,
    };
    for (id, born) in [("run-o-old", 500), ("run-o-1", 2_500)] {
        runs.create_run(&run(id, born)).unwrap();
        runs.set_run_state(id, vouch_core::RunState::Suspended)
            .unwrap();
    }
    // The run waits on its card: the person decides, then the board resumes it.
    runs.open_card(&crate::Card {
        run_id: "run-o-1".into(),
        delivery: Some("d1".into()),
        payload_hash: "sha256:o1".into(),
        summary: "send d1".into(),
        state: crate::CardState::Open,
        created_ms: 2_600,
        decided_ms: None,
        answer: None,
        reason: "sending cannot be undone".into(),
    })
    .unwrap();
    // The worker dies here; its lease lapses and the sweep comes.
    let r = s.sweep(5_000).unwrap();
    assert_eq!(
        r.suspended,
        vec![("o-1".to_string(), 1, "run-o-1".to_string())]
    );
    assert!(r.timed_out.is_empty(), "{r:?}");
    let a = &s.attempts("o-1").unwrap()[0];
    assert_eq!(a.state, AttemptState::Suspended);
    assert_eq!(a.run_id.as_deref(), Some("run-o-1"));
    let task = s.task("o-1").unwrap().unwrap();
    assert_eq!(task.state, TaskState::Running, "not queued for a retry");
    // A later sweep changes nothing; a running attempt with no suspended run still times out.
    let r = s.sweep(6_000).unwrap();
    assert!(r.suspended.is_empty() && r.timed_out.is_empty(), "{r:?}");
    s.offer(&new_task("o-2", 1, 1)).unwrap();
    let c = claim_id(&*s, "w2", "o-2", 7_000);
    s.heartbeat(&at(&c), 7_100).unwrap();
    let r = s.sweep(20_000).unwrap();
    assert!(r.suspended.is_empty(), "{r:?}");
    assert_eq!(r.timed_out.len(), 1, "{r:?}");
}

/// Knowledge leverage (§13.7.3): the measures count the successful reads of pinned context,
/// input artifacts and the diary that the host journaled in each attempt's run — its own or
/// the one it was charged (§13.7.2) — by the attempt's own claimant; a failed read, another
/// tool, or a run no attempt of the cohort names counts nothing. Needs the run store beside
/// the board (one store, two views).
pub fn measures_count_reads_from_the_journal(runs: Arc<dyn crate::Store>, s: Arc<dyn BoardStore>) {
    let run = |id: &str, created_ms: i64| crate::NewRun {
        state: vouch_core::RunState::Running,
        id: id.into(),
        trigger: vouch_core::TriggerKind::Task,
        title: format!("task lv-1: {id}"),
        chain_root: id.into(),
        parent: None,
        scope: "task:lv-1".into(),
        spec: json!({}),
        created_ms,
        lease: None,
    };
    let read = |run_id: &str, name: &str, ok: bool| {
        let body = json!({"call_id": "c", "name": name, "ok": ok, "result": "{}"});
        runs.append(
            run_id,
            &crate::NewEvent::new(crate::EventKind::ToolCalled, 1, body),
        )
        .unwrap();
    };
    s.offer(&new_task("lv-1", 2, 4_000_000)).unwrap();
    // The first claimant reads, then crashes: its reads are charged to it with its run.
    claim_id(&*s, "w-crash", "lv-1", 4_000_010);
    runs.create_run(&run("run-lv-crash", 4_000_020)).unwrap();
    read("run-lv-crash", "read_context", true);
    read("run-lv-crash", "read_input", true);
    s.sweep(4_100_000).unwrap();
    assert!(s
        .charge(&AttemptCost {
            task_id: "lv-1".into(),
            n: 1,
            run_id: "run-lv-crash".into(),
            usage: Usage::default(),
            at_ms: 4_100_001,
        })
        .unwrap());
    // The second reads (one read refused), uses another tool, and is accepted.
    let c = claim_id(&*s, "w-done", "lv-1", 4_100_010);
    runs.create_run(&run("run-lv-1-2", 4_100_020)).unwrap();
    read("run-lv-1-2", "read_input", true);
    read("run-lv-1-2", "read_input", false);
    read("run-lv-1-2", "read_diary", true);
    read("run-lv-1-2", "search_news", true);
    s.report(&report(&c, accepted(json!({"lv": 1})), 4_100_030))
        .unwrap();
    // A run of the task no attempt names counts nothing.
    runs.create_run(&run("run-lv-stray", 4_100_040)).unwrap();
    read("run-lv-stray", "read_input", true);
    let q = |by| MeasuresQuery {
        by,
        since_ms: 0,
        friction_turns: 8,
        friction_failed_tools: 3,
        correlation: None,
    };
    let all = s.measures(&q(Cohort::All)).unwrap();
    assert_eq!(all.len(), 1, "{all:?}");
    let m = &all[0];
    assert_eq!(
        (m.accepted, m.context_reads, m.input_reads, m.diary_reads),
        (1, 1, 2, 1),
        "{m:?}"
    );
    let r = rates(m);
    assert_eq!(r["input_reads_per_accepted_output"], json!(2.0));
    assert_eq!(r["diary_reads_per_accepted_output"], json!(1.0));
    let by = s.measures(&q(Cohort::Claimant)).unwrap();
    let of = |who: &str| {
        by.iter()
            .find(|r| r.cohort == who)
            .map(|r| (r.context_reads, r.input_reads, r.diary_reads))
    };
    assert_eq!(of("w-crash"), Some((1, 1, 0)), "{by:?}");
    assert_eq!(of("w-done"), Some((0, 1, 1)), "{by:?}");
}
