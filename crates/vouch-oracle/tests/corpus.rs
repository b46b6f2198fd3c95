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
