//! The patch corpus (`corpus-repo/`, §14): every scenario through the real host in a real git
//! repository agrees with the oracle's reading of §14 and with its own `expect`.
#![allow(clippy::unwrap_used)]

use std::path::PathBuf;
use vouch_scenario::patch::load_patch_dir;

#[test]
fn every_patch_scenario_agrees_between_runner_oracle_and_expect() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../corpus-repo");
    let all = load_patch_dir(&dir).unwrap();
    assert!(all.len() >= 15, "{} patch scenarios", all.len());
    let mut bad = vec![];
    for (path, s) in &all {
        let oracle = vouch_oracle::patch::report(&vouch_oracle::patch::evaluate_scenario(s));
        let runner = vouch_runner::patch::run_patch(s).unwrap();
        if runner != oracle {
            bad.push(format!(
                "{}: runner {runner:?}\n   oracle {oracle:?}",
                path.display()
            ));
        }
        match &s.expect {
            Some(e) if *e != oracle => bad.push(format!(
                "{}: expect {e:?}\n   oracle {oracle:?}",
                path.display()
            )),
            None => bad.push(format!("{}: no expect", path.display())),
            _ => {}
        }
    }
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
