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

const PATHS: [&str; 8] = [
    ".gitmodules",
    "src/.git/config",
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

/// A change's shape: a plain edit, a mode change, a submodule, or a symlink to a target.
const SHAPES: [(&str, &str, Option<&str>); 7] = [
    ("100644", "100644", None),
    ("100644", "100755", None),
    ("160000", "160000", None),
    ("100644", "120000", Some("../../etc/passwd")),
    ("100644", "120000", Some("/etc/passwd")),
    ("100644", "120000", Some("b/c.rs")),
    ("100644", "120000", Some("../.git/config")),
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
        shapes in proptest::collection::vec(0..SHAPES.len(), PATHS.len()),
        git_rewritten in proptest::bool::weighted(0.1),
    ) {
        // One shape per path, so a path listed twice is one change in both readings.
        let shape = |p: &str| SHAPES[shapes[PATHS.iter().position(|x| *x == p).unwrap_or(0)]];
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
                Some(c) => DiffObs::Read { changes: c.iter().map(|p| {
                    let (mb, ma, link) = shape(p);
                    Change { path: p.clone(), before: Some("a".into()), after: Some("b".into()),
                        mode_before: Some(mb.into()), mode_after: Some(ma.into()), link_target: link.map(String::from) }
                }).collect() },
                None => DiffObs::Unreadable { reason: "x".into() },
            },
            checks: runs,
            reported_writes: writes.clone(),
            traced: traced.clone(),
            git_rewritten,
        };
        let seen = changed.clone().unwrap_or_default();
        let symlinks = seen.iter().filter_map(|p| shape(p).2.map(|t| (p.clone(), t.to_string()))).collect();
        let mode_changed = seen.iter().filter(|p| { let (b, a, _) = shape(p); b != a }).cloned().collect();
        let submodules = seen.iter().filter(|p| shape(p).0 == "160000").cloned().collect();
        let e = evaluate(&facts);
        let o = patch(&PatchCase {
            allow, targets, checks: names.clone(),
            exits: names.iter().zip(&exits).filter_map(|(n, e)| e.map(|x| (n.clone(), x))).collect::<BTreeMap<_, _>>(),
            changed, lease_lost: faults.0, head_moved: faults.1, worktree_replaced: faults.2,
            reported_writes: writes, traced, final_text: "all tests pass".into(),
            symlinks, mode_changed, submodules, git_rewritten,
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
