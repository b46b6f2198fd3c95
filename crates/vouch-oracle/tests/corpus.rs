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
