//! CI-blocking fixtures: the oracle's full answer for each file in corpus/fixtures/ must
//! equal the fixture's `expect`. Changing the oracle's answer without changing the fixture
//! in the same commit fails CI.

use std::path::PathBuf;

const FIELDS: [&str; 8] = [
    "state",
    "outcome",
    "ended_by",
    "deliveries",
    "needs_you",
    "significance",
    "attention",
    "notifications",
];

#[test]
fn fixtures_match_the_oracle_exactly() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus/fixtures");
    let all = vouch_scenario::load_paths(&[dir]).expect("fixtures load");
    assert_eq!(all.len(), 5, "five CI-blocking fixtures");
    for (path, s) in &all {
        let expect = s
            .expect
            .as_ref()
            .expect("a fixture has an expect")
            .to_value();
        for f in FIELDS {
            assert!(
                expect.get(f).is_some(),
                "{}: a fixture's expect names every field; `{f}` is missing",
                path.display()
            );
        }
        let answer = vouch_oracle::evaluate(s);
        // Full equality on the prescribed fields, in both directions (not a subset check).
        let got = answer.report.as_expectation();
        let want = serde_json::json!({
            "state": expect["state"], "outcome": expect["outcome"], "ended_by": expect["ended_by"],
            "deliveries": expect["deliveries"], "needs_you": expect["needs_you"],
            "significance": expect["significance"], "attention": expect["attention"],
            "notifications": expect["notifications"],
        });
        assert_eq!(got, want, "{}", path.display());
        assert!(
            answer.report.gaps.is_empty(),
            "{}: fixtures have no GAP",
            path.display()
        );
    }
}
