//! The evaluator and the oracle's reading of §14 agree on every case (the contract is code
//! twice over: a misreading on either side is a disagreement).
#![allow(clippy::unwrap_used)]

use proptest::prelude::*;
use std::collections::BTreeMap;
use vouch_oracle::patch::{patch, PatchCase};
use vouch_repo::{
    evaluate, Attribution, Change, CheckRun, CheckSpec, DiffObs, Facts, Integrity, PatchInput,
    Verdict,
};

const PATHS: [&str; 6] = [
    "src/a.rs",
    "src/b/c.rs",
    "README.md",
    "docs/x.md",
    "Cargo.toml",
    "docs/ab.md",
];
const GLOBS: [&str; 6] = [
    "src/**",
    "src/*.rs",
    "**/*.md",
    "docs/?.md",
    "*",
    "Cargo.toml",
];

fn pick(from: &'static [&'static str]) -> impl Strategy<Value = Vec<String>> {
    proptest::collection::vec(proptest::sample::select(from).prop_map(String::from), 0..4)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn evaluator_and_oracle_agree(
        allow in pick(&GLOBS),
        targets in pick(&PATHS),
        changed in proptest::option::weighted(0.9, pick(&PATHS)),
        exits in proptest::collection::vec(proptest::option::of(proptest::option::of(0i32..3)), 0..3),
        faults in (any::<bool>(), any::<bool>(), any::<bool>()),
        writes in pick(&PATHS),
        traced in proptest::option::of(pick(&PATHS)),
    ) {
        let names: Vec<String> = (0..exits.len()).map(|i| format!("c{i}")).collect();
        let input = PatchInput {
            repo: "/r".into(),
            base: "a".repeat(40),
            allow: allow.clone(),
            targets: targets.clone(),
            checks: names.iter().map(|n| CheckSpec { name: n.clone(), cmd: "true".into(), timeout_s: 1 }).collect(),
            trace: traced.is_some(),
        };
        // A check that ran: `Some(exit)`; `None` inside: it ran without an exit status.
        let runs: Vec<CheckRun> = names.iter().zip(&exits).filter_map(|(n, e)| e.map(|x| CheckRun {
            name: n.clone(), exit: x, timed_out: x.is_none(), tail: String::new(), error: None,
        })).collect();
        let facts = Facts {
            input: &input,
            integrity: Integrity { lease_held: !faults.0, head_matches: !faults.1, identity_matches: !faults.2 },
            diff: match &changed {
                Some(c) => DiffObs::Read { changes: c.iter().map(|p| Change { path: p.clone(), before: None, after: Some("b".into()) }).collect() },
                None => DiffObs::Unreadable { reason: "x".into() },
            },
            checks: runs,
            reported_writes: writes.clone(),
            traced: traced.clone(),
        };
        let e = evaluate(&facts);
        let o = patch(&PatchCase {
            allow, targets, checks: names.clone(),
            exits: names.iter().zip(&exits).filter_map(|(n, e)| e.map(|x| (n.clone(), x))).collect::<BTreeMap<_, _>>(),
            changed, lease_lost: faults.0, head_moved: faults.1, worktree_replaced: faults.2,
            reported_writes: writes, traced, final_text: "all tests pass".into(),
        });
        prop_assert_eq!(o.verdict == "accepted", e.verdict == Verdict::Accepted, "{:?} {:?}", o, e);
        prop_assert_eq!(o.attribution == "unknown", e.attribution == Attribution::Unknown);
        prop_assert_eq!(&o.changed, &e.changed);
        prop_assert_eq!(&o.collateral, &e.collateral);
        prop_assert_eq!(&o.checks, &e.checks);
        prop_assert_eq!(o.no_effect, e.no_effect);
        prop_assert_eq!(&o.transient, &e.transient);
    }
}
