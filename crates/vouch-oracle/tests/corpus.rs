//! The whole corpus: the oracle agrees with every scenario's `expect`, quickly, and every
//! rule it cites names a section that exists in docs/contract.md.

use std::path::PathBuf;
use std::time::Instant;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn oracle_agrees_with_expect_on_the_whole_corpus() {
    let all = vouch_scenario::load_paths(&[root().join("corpus")]).expect("corpus loads");
    assert!(all.len() >= 100, "the corpus has {} scenarios", all.len());
    let start = Instant::now();
    let s = vouch_oracle::summary(&all);
    let took = start.elapsed();
    assert!(s.disagreeing.is_empty(), "{s}");
    assert_eq!(s.without_expect, 0, "every scenario has an expect");
    // Debug builds are slower; the release target is well under a second for the corpus.
    assert!(took.as_secs_f64() < 5.0, "the corpus took {took:?}");
}

#[test]
fn every_cited_section_exists_in_the_contract() {
    let doc = std::fs::read_to_string(root().join("docs/contract.md")).expect("docs/contract.md");
    let headings: Vec<&str> = doc.lines().filter(|l| l.starts_with('#')).collect();
    let all = vouch_scenario::load_paths(&[root().join("corpus")]).expect("corpus loads");
    for (_, sc) in &all {
        let a = vouch_oracle::evaluate(sc);
        for c in a.report.rules.iter().flatten() {
            let found = headings
                .iter()
                .any(|h| h.split_whitespace().any(|w| w == c.section.as_str()));
            assert!(
                found,
                "{}: rule {} cites {} which has no heading",
                sc.id, c.rule, c.section
            );
        }
    }
}

#[test]
fn the_corpus_covers_every_rule_status_cell_crash_point_and_behaviour() {
    use std::collections::BTreeSet;
    use vouch_core::{DeliveryStatus, Presence, Significance};
    use vouch_scenario::{Behavior, CrashEvent, Fault};
    let all = vouch_scenario::load_paths(&[root().join("corpus")]).expect("corpus loads");
    let (mut rules, mut statuses, mut cells) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let (mut crashes, mut behaviours) = (BTreeSet::new(), BTreeSet::new());
    for (_, s) in &all {
        let a = vouch_oracle::evaluate(s);
        for c in a.report.rules.iter().flatten() {
            rules.insert(c.rule.clone());
        }
        for d in a.report.deliveries.values() {
            if let Some(st) = d.status {
                statuses.insert(st.as_str());
            }
        }
        if let Some(sig) = a.report.significance {
            cells.insert((sig.as_str(), s.presence().as_str()));
        }
        for f in &s.faults {
            if let Fault::CrashAfter { event, .. } = f {
                crashes.insert(event.as_str());
            }
        }
        for b in s.world.behavior.values() {
            behaviours.insert(b.as_str());
        }
    }
    for r in ["R1", "R2", "R3", "R4", "R5", "R6", "R7", "R8", "R9"] {
        assert!(rules.contains(r), "no scenario exercises {r}");
    }
    for st in DeliveryStatus::ALL {
        assert!(statuses.contains(st.as_str()), "no scenario ends {st}");
    }
    for sig in Significance::ALL {
        for p in Presence::ALL {
            assert!(
                cells.contains(&(sig.as_str(), p.as_str())),
                "no scenario for {sig:?} × {p:?}"
            );
        }
    }
    for e in CrashEvent::ALL {
        assert!(
            crashes.contains(e.as_str()),
            "no crash after {}",
            e.as_str()
        );
    }
    for b in Behavior::ALL {
        assert!(
            behaviours.contains(b.as_str()),
            "no provider behaves {}",
            b.as_str()
        );
    }
}

#[test]
fn the_board_corpus_covers_every_task_and_attempt_state_and_every_board_event() {
    use std::collections::BTreeSet;
    use vouch_core::board::{AttemptState, TaskState};
    use vouch_scenario::{BoardStep, Does};
    let all =
        vouch_scenario::load_paths(&[root().join("corpus/board")]).expect("board corpus loads");
    assert!(all.len() >= 40, "corpus/board has {} scenarios", all.len());
    let (mut tasks, mut attempts, mut events) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    let mut results = BTreeSet::new();
    for (_, s) in &all {
        let plan = s.task.as_ref().expect("every board scenario is a task run");
        let a = vouch_oracle::evaluate(s);
        assert!(a.report.gaps.is_empty(), "{}: {:?}", s.id, a.report.gaps);
        let t = a.report.task.as_ref().expect("a task record");
        tasks.insert(t.state.as_str());
        for x in &t.attempts {
            attempts.insert(x.state.as_str());
        }
        if let Some(st) = a.report.deliveries.get("result").and_then(|d| d.status) {
            results.insert(st.as_str());
        }
        for e in plan.events() {
            events.insert(match e {
                BoardStep::Worker(w) => match w.does {
                    Does::Run if w.cancel.is_some() => "cancel_in_run",
                    Does::Run if w.stall_ms.is_some() => "stall",
                    Does::Run if w.impostor.is_some() => "impostor",
                    Does::Crash if w.crash_after.is_some() => "crash_in_run",
                    Does::Run => "run",
                    Does::Crash if w.late_report => "late_report",
                    Does::Crash => "crash",
                    Does::Fail => "fail",
                    Does::Abort => "abort",
                    Does::Hang => "hang",
                },
                BoardStep::Cancel => "cancel",
                BoardStep::Wait(_) => "wait",
                BoardStep::Prerequisite(_) => "prerequisite",
                BoardStep::OfferAgain(_) => "offer_again",
                BoardStep::Offer(_) => "offer",
            });
        }
        if plan.judge.is_some() {
            events.insert("judge");
        }
    }
    for st in TaskState::ALL {
        if *st != TaskState::Dispatched {
            // `dispatched` lasts from the claim to the first heartbeat, inside one event.
            assert!(tasks.contains(st.as_str()), "no board scenario ends {st}");
        }
    }
    for st in AttemptState::ALL {
        if !matches!(st, AttemptState::Claimed | AttemptState::Running) {
            assert!(attempts.contains(st.as_str()), "no attempt ends {st}");
        }
    }
    for st in ["verified", "failed", "not_attempted"] {
        assert!(results.contains(st), "no result item ends {st}");
    }
    for e in [
        "run",
        "crash",
        "late_report",
        "fail",
        "abort",
        "hang",
        "crash_in_run",
        "stall",
        "impostor",
        "cancel",
        "cancel_in_run",
        "wait",
        "prerequisite",
        "offer_again",
        "offer",
        "judge",
    ] {
        assert!(events.contains(e), "no board scenario has a `{e}` event");
    }
}
