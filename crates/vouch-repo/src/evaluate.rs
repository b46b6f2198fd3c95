//! The evaluator (§14): a pure function from the host's observations to a verdict. It takes
//! no model text at all — what the model said about tests cannot reach it — and it never
//! turns an integrity fault into "no change".

use crate::input::{AllowList, PatchInput};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// One changed path with its blob ids at the base and in the worktree (`None`: absent).
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Change {
    pub path: String,
    pub before: Option<String>,
    pub after: Option<String>,
    /// The git modes on each side (`100644`, `100755`, `120000` a symlink, `160000` a
    /// submodule); `None`: absent on that side.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode_before: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode_after: Option<String>,
    /// A symlink's target after the change (read by the host from the blob).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link_target: Option<String>,
}

/// A symlink mode and a submodule (gitlink) mode in a git tree.
const SYMLINK_MODE: &str = "120000";
const GITLINK_MODE: &str = "160000";

/// Whether a symlink at `path` pointing at `target` leads outside the repository (or into
/// its `.git`): an absolute target, or one whose `..` climb above the top.
pub fn link_leaves(path: &str, target: &str) -> bool {
    if target.is_empty() || target.starts_with('/') {
        return true;
    }
    let mut depth: Vec<&str> = path.split('/').collect();
    depth.pop();
    for part in target.split('/') {
        match part {
            "" | "." => {}
            ".." if depth.pop().is_none() => return true,
            ".." => {}
            p if p.eq_ignore_ascii_case(".git") => return true,
            p => depth.push(p),
        }
    }
    false
}

/// Why a change is a trick the host never applies, or `None` (§14.0.3): a submodule, a
/// symlink that leads out of the repository, a mode change, `.gitmodules`, a `.git` name.
pub fn trick(c: &Change) -> Option<String> {
    let p = &c.path;
    let (mb, ma) = (c.mode_before.as_deref(), c.mode_after.as_deref());
    if mb == Some(GITLINK_MODE) || ma == Some(GITLINK_MODE) {
        return Some(format!("`{p}` is a submodule (a nested repository)"));
    }
    if p.split('/').any(|s| s.eq_ignore_ascii_case(".git")) {
        return Some(format!("`{p}` is inside a `.git` folder"));
    }
    if p.eq_ignore_ascii_case(".gitmodules") {
        return Some(format!("`{p}` declares submodules"));
    }
    if ma == Some(SYMLINK_MODE) {
        let t = c.link_target.as_deref().unwrap_or("");
        if link_leaves(p, t) {
            return Some(format!(
                "`{p}` is a symlink to `{t}`, outside the repository"
            ));
        }
    }
    match (mb, ma) {
        (Some(b), Some(a)) if a != b => Some(format!("`{p}` changed mode {b} → {a}")),
        _ => None,
    }
}

/// The fresh diff as the host read it, or why it could not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DiffObs {
    Read { changes: Vec<Change> },
    Unreadable { reason: String },
}

/// One check the host ran: its exit status (`None` when it was killed or could not start).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckRun {
    pub name: String,
    pub exit: Option<i32>,
    pub timed_out: bool,
    /// The last bytes of its output (stdout and stderr together), bounded.
    pub tail: String,
    /// Why it did not run to an exit status (could not start, killed by a signal).
    pub error: Option<String>,
}

impl CheckRun {
    pub fn passed(&self) -> bool {
        self.exit == Some(0) && !self.timed_out && self.error.is_none()
    }
}

/// What the host checked about the worktree itself after the attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Integrity {
    /// The worktree's lease still carries this attempt's token.
    pub lease_held: bool,
    /// HEAD is still the recorded base commit.
    pub head_matches: bool,
    /// The worktree is the one created for this attempt (same folder, same identity).
    pub identity_matches: bool,
}

impl Integrity {
    pub fn intact() -> Self {
        Integrity {
            lease_held: true,
            head_matches: true,
            identity_matches: true,
        }
    }
}

/// Everything the evaluator reads. Note what is absent: the model's text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts<'a> {
    pub input: &'a PatchInput,
    pub integrity: Integrity,
    pub diff: DiffObs,
    pub checks: Vec<CheckRun>,
    /// Paths the write tool reported writing during the attempt.
    pub reported_writes: Vec<String>,
    /// Paths the trace saw written during the attempt (`None` without a trace).
    pub traced: Option<Vec<String>>,
    /// The worktree's `.git` file no longer says what the host wrote there.
    pub git_rewritten: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Accepted,
    Rejected,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Attribution {
    /// The diff is this attempt's, read from the worktree it alone held.
    Attributed,
    /// The run cannot certify what changed (never "no change").
    Unknown,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Evaluation {
    pub verdict: Verdict,
    pub attribution: Attribution,
    /// Changed paths, sorted (empty when the diff could not be read).
    pub changed: Vec<String>,
    /// Changed paths outside the allow-list, and every trick.
    pub collateral: Vec<String>,
    /// What the diff tried that the host never applies (a symlink out, a mode change, a
    /// submodule, a `.git` write), one sentence each.
    #[serde(default)]
    pub tricks: Vec<String>,
    /// Targets that did not change.
    pub missing_targets: Vec<String>,
    /// Each declared check's exit status (`null`: it did not finish with one).
    pub checks: BTreeMap<String, Option<i32>>,
    /// Declared checks that did not pass (failed, timed out, or never ran).
    pub failed_checks: Vec<String>,
    /// A write was reported and the diff is empty: the attempt produced no effect.
    pub no_effect: bool,
    /// Reported writes whose path is not in the diff.
    pub writes_without_effect: Vec<String>,
    /// Paths written during the attempt that are not in the final diff (from the trace).
    pub transient: Vec<String>,
    /// Why, in order: integrity faults, then collateral, targets, checks.
    pub reasons: Vec<String>,
}

/// The verdict (§14): accepted only if the change is attributed, every declared check passed,
/// every target changed and nothing outside the allow-list changed.
pub fn evaluate(f: &Facts) -> Evaluation {
    let mut reasons = vec![];
    if !f.integrity.lease_held {
        reasons.push("the worktree's lease was lost during the attempt".to_string());
    }
    if !f.integrity.head_matches {
        reasons.push("the worktree's HEAD moved away from the recorded base".to_string());
    }
    if !f.integrity.identity_matches {
        reasons.push("the worktree was replaced during the attempt".to_string());
    }
    if f.git_rewritten {
        // Git read the worktree through that file: the diff may be another repository's.
        reasons.push("the worktree's `.git` was rewritten during the attempt".to_string());
    }
    let changed: Vec<String> = match &f.diff {
        DiffObs::Read { changes } => changes
            .iter()
            .map(|c| c.path.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        DiffObs::Unreadable { reason } => {
            reasons.push(format!("the diff could not be read: {reason}"));
            vec![]
        }
    };
    let attribution = if reasons.is_empty() {
        Attribution::Attributed
    } else {
        Attribution::Unknown
    };
    // An input that does not parse as globs cannot have been offered; treat it as allowing
    // nothing rather than panicking.
    let allow = AllowList::new(&f.input.allow).ok();
    let mut tricks: Vec<(String, String)> = match &f.diff {
        DiffObs::Read { changes } => changes
            .iter()
            .filter_map(|c| trick(c).map(|t| (c.path.clone(), t)))
            .collect(),
        DiffObs::Unreadable { .. } => vec![],
    };
    if f.git_rewritten {
        tricks.push((
            ".git".into(),
            "`.git` was rewritten (it would point git elsewhere)".into(),
        ));
    }
    let tricky: BTreeSet<&str> = tricks.iter().map(|(p, _)| p.as_str()).collect();
    let collateral: Vec<String> = changed
        .iter()
        .map(String::as_str)
        .chain(tricky.iter().copied())
        .filter(|p| tricky.contains(p) || !allow.as_ref().is_some_and(|a| a.allows(p)))
        .map(String::from)
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let tricks: Vec<String> = tricks.into_iter().map(|(_, t)| t).collect();
    let changed_set: BTreeSet<&str> = changed.iter().map(String::as_str).collect();
    let missing_targets: Vec<String> = f
        .input
        .targets
        .iter()
        .filter(|t| !changed_set.contains(t.as_str()))
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let mut checks = BTreeMap::new();
    let mut failed_checks = vec![];
    for c in &f.input.checks {
        // Only a run the host made counts; two results for one name count as the worse.
        let runs: Vec<&CheckRun> = f.checks.iter().filter(|r| r.name == c.name).collect();
        let passed = !runs.is_empty() && runs.iter().all(|r| r.passed());
        checks.insert(
            c.name.clone(),
            runs.iter()
                .find(|r| !r.passed())
                .or(runs.first())
                .and_then(|r| r.exit),
        );
        if !passed {
            failed_checks.push(c.name.clone());
        }
    }
    let writes: BTreeSet<&str> = f.reported_writes.iter().map(String::as_str).collect();
    let readable = matches!(f.diff, DiffObs::Read { .. });
    let no_effect = readable && !writes.is_empty() && changed.is_empty();
    let writes_without_effect: Vec<String> = if readable {
        writes
            .iter()
            .filter(|w| !changed_set.contains(*w))
            .map(|w| w.to_string())
            .collect()
    } else {
        vec![]
    };
    let transient: Vec<String> = match (&f.traced, readable) {
        (Some(t), true) => t
            .iter()
            .filter(|p| !changed_set.contains(p.as_str()))
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        _ => vec![],
    };
    if attribution == Attribution::Attributed {
        if no_effect {
            reasons.push("a write was reported but the diff is empty: no effect".to_string());
        }
        for t in &tricks {
            reasons.push(format!("{t}: never applied"));
        }
        for p in collateral.iter().filter(|p| !tricky_paths(&tricks, p)) {
            reasons.push(format!("`{p}` changed outside the allow-list"));
        }
        for t in &missing_targets {
            reasons.push(format!("target `{t}` did not change"));
        }
        for c in &failed_checks {
            let r = f.checks.iter().find(|r| r.name == *c && !r.passed());
            reasons.push(match r {
                None => format!("check `{c}` did not run"),
                Some(r) if r.timed_out => format!("check `{c}` timed out"),
                Some(CheckRun { exit: Some(x), .. }) => format!("check `{c}` exited {x}"),
                Some(r) => format!(
                    "check `{c}` did not finish: {}",
                    r.error.as_deref().unwrap_or("no exit status")
                ),
            });
        }
    }
    let verdict = if attribution == Attribution::Attributed
        && collateral.is_empty()
        && missing_targets.is_empty()
        && failed_checks.is_empty()
        && !f.input.checks.is_empty()
    {
        Verdict::Accepted
    } else {
        Verdict::Rejected
    };
    Evaluation {
        verdict,
        attribution,
        changed,
        collateral,
        tricks,
        missing_targets,
        checks,
        failed_checks,
        no_effect,
        writes_without_effect,
        transient,
        reasons,
    }
}

/// Whether a trick sentence names `path` (its sentence starts with the quoted path).
fn tricky_paths(tricks: &[String], path: &str) -> bool {
    let quoted = format!("`{path}`");
    tricks.iter().any(|t| t.starts_with(&quoted))
}

/// Receipt lines that say what the evidence shows (§14): changed paths, checks with exit
/// codes, collateral paths, attribution. Paths and names are the caller's to escape.
pub fn receipt_lines(e: &Evaluation) -> Vec<String> {
    let mut out = vec![];
    let verdict = match (e.verdict, e.attribution) {
        (Verdict::Accepted, _) => "Patch accepted: the host's diff and checks support it",
        (_, Attribution::Unknown) => {
            "Patch not certified: can't tell what this attempt changed — check the worktree before retrying"
        }
        (Verdict::Rejected, _) => "Patch rejected",
    };
    out.push(verdict.to_string());
    match e.attribution {
        Attribution::Attributed if e.changed.is_empty() => {
            out.push("Changed: nothing — the diff against the base is empty".to_string())
        }
        Attribution::Attributed => out.push(format!("Changed: {}", e.changed.join(", "))),
        Attribution::Unknown => out.push("Changed: unknown (not \"no change\")".to_string()),
    }
    if e.no_effect {
        out.push("No effect: the agent reported writing files, and nothing changed".to_string());
    } else if !e.writes_without_effect.is_empty() {
        out.push(format!(
            "Reported writes with no change: {}",
            e.writes_without_effect.join(", ")
        ));
    }
    if e.checks.is_empty() {
        out.push("Checks: none ran — nothing about behaviour is certified".to_string());
    } else {
        let parts: Vec<String> = e
            .checks
            .iter()
            .map(|(n, x)| match x {
                Some(x) => format!("{n} exit {x}"),
                None => format!("{n} no exit status"),
            })
            .collect();
        out.push(format!("Checks (run by the host): {}", parts.join(", ")));
    }
    if !e.collateral.is_empty() {
        out.push(format!(
            "Collateral (outside the allow-list): {}",
            e.collateral.join(", ")
        ));
    }
    for t in &e.tricks {
        out.push(format!("Trick (collateral, never applied): {t}"));
    }
    if !e.missing_targets.is_empty() {
        out.push(format!(
            "Targets unchanged: {}",
            e.missing_targets.join(", ")
        ));
    }
    if !e.transient.is_empty() {
        out.push(format!(
            "Transient (written during the attempt, not in the final diff): {}",
            e.transient.join(", ")
        ));
    }
    out.push(format!(
        "Attribution: {}",
        match e.attribution {
            Attribution::Attributed => "attributed to this attempt",
            Attribution::Unknown => "unknown",
        }
    ));
    for r in &e.reasons {
        out.push(format!("Why: {r}"));
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::input::CheckSpec;
    use proptest::prelude::*;

    fn input(targets: &[&str], allow: &[&str], checks: &[&str]) -> PatchInput {
        PatchInput {
            repo: "/r".into(),
            base: "a".repeat(40),
            allow: allow.iter().map(|s| s.to_string()).collect(),
            targets: targets.iter().map(|s| s.to_string()).collect(),
            checks: checks
                .iter()
                .map(|n| CheckSpec {
                    name: n.to_string(),
                    cmd: "true".into(),
                    timeout_s: 5,
                })
                .collect(),
            trace: false,
        }
    }

    fn change(p: &str) -> Change {
        Change {
            path: p.into(),
            before: Some("1".into()),
            after: Some("2".into()),
            ..Default::default()
        }
    }

    fn run(name: &str, exit: i32) -> CheckRun {
        CheckRun {
            name: name.into(),
            exit: Some(exit),
            timed_out: false,
            tail: String::new(),
            error: None,
        }
    }

    fn facts<'a>(i: &'a PatchInput, changed: &[&str], checks: Vec<CheckRun>) -> Facts<'a> {
        Facts {
            input: i,
            integrity: Integrity::intact(),
            diff: DiffObs::Read {
                changes: changed.iter().map(|p| change(p)).collect(),
            },
            checks,
            reported_writes: vec![],
            traced: None,
            git_rewritten: false,
        }
    }

    #[test]
    fn an_allowed_change_with_passing_checks_is_accepted() {
        let i = input(&["src/a.rs"], &["src/**"], &["tests"]);
        let e = evaluate(&facts(&i, &["src/a.rs", "src/b.rs"], vec![run("tests", 0)]));
        assert_eq!(e.verdict, Verdict::Accepted);
        assert_eq!(e.attribution, Attribution::Attributed);
        assert!(e.reasons.is_empty(), "{:?}", e.reasons);
    }

    #[test]
    fn a_collateral_edit_rejects_naming_the_path() {
        let i = input(&["src/a.rs"], &["src/**"], &["tests"]);
        let e = evaluate(&facts(
            &i,
            &["src/a.rs", "Cargo.toml"],
            vec![run("tests", 0)],
        ));
        assert_eq!(e.verdict, Verdict::Rejected);
        assert_eq!(e.collateral, vec!["Cargo.toml"]);
        assert!(e.reasons.iter().any(|r| r.contains("`Cargo.toml`")));
    }

    #[test]
    fn a_reported_write_with_an_empty_diff_has_no_effect() {
        let i = input(&["src/a.rs"], &["src/**"], &["tests"]);
        let mut f = facts(&i, &[], vec![run("tests", 0)]);
        f.reported_writes = vec!["src/a.rs".into()];
        let e = evaluate(&f);
        assert!(e.no_effect);
        assert_eq!(e.verdict, Verdict::Rejected);
        assert_eq!(e.attribution, Attribution::Attributed);
        assert!(receipt_lines(&e)
            .iter()
            .any(|l| l.contains("nothing changed")));
    }

    #[test]
    fn a_failing_check_rejects_with_its_exit_code() {
        let i = input(&["src/a.rs"], &["src/**"], &["tests", "types"]);
        let e = evaluate(&facts(
            &i,
            &["src/a.rs"],
            vec![run("tests", 3), run("types", 0)],
        ));
        assert_eq!(e.verdict, Verdict::Rejected);
        assert_eq!(e.checks["tests"], Some(3));
        assert!(e.reasons.iter().any(|r| r == "check `tests` exited 3"));
    }

    #[test]
    fn a_declared_check_that_did_not_run_is_not_passed() {
        let i = input(&["src/a.rs"], &["src/**"], &["tests"]);
        let e = evaluate(&facts(&i, &["src/a.rs"], vec![]));
        assert_eq!(e.verdict, Verdict::Rejected);
        assert_eq!(e.checks["tests"], None);
        assert!(e.reasons.iter().any(|r| r == "check `tests` did not run"));
    }

    #[test]
    fn integrity_faults_are_unknown_never_no_change() {
        let i = input(&["src/a.rs"], &["src/**"], &["tests"]);
        for k in 0..4 {
            let mut f = facts(&i, &[], vec![run("tests", 0)]);
            match k {
                0 => f.integrity.lease_held = false,
                1 => f.integrity.head_matches = false,
                2 => f.integrity.identity_matches = false,
                _ => {
                    f.diff = DiffObs::Unreadable {
                        reason: "git failed".into(),
                    }
                }
            }
            let e = evaluate(&f);
            assert_eq!(e.attribution, Attribution::Unknown, "case {k}");
            assert_eq!(e.verdict, Verdict::Rejected);
            let lines = receipt_lines(&e);
            assert!(
                !lines.iter().any(|l| l.contains("Changed: nothing")),
                "{lines:?}"
            );
        }
    }

    #[test]
    fn transient_writes_come_from_the_trace() {
        let i = input(&["src/a.rs"], &["src/**"], &["tests"]);
        let mut f = facts(&i, &["src/a.rs"], vec![run("tests", 0)]);
        f.traced = Some(vec!["src/a.rs".into(), "src/tmp.rs".into()]);
        let e = evaluate(&f);
        assert_eq!(e.transient, vec!["src/tmp.rs"]);
        assert_eq!(e.verdict, Verdict::Accepted);
    }

    fn arb_paths() -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec(
            prop_oneof![
                Just("src/a.rs"),
                Just("src/b.rs"),
                Just("docs/x.md"),
                Just("Cargo.toml")
            ]
            .prop_map(String::from),
            0..5,
        )
    }

    proptest! {
        #[test]
        fn accepted_means_every_rule_held(
            changed in arb_paths(),
            targets in proptest::collection::vec(prop_oneof![Just("src/a.rs"), Just("src/b.rs")].prop_map(String::from), 1..3),
            exits in proptest::collection::vec(0i32..3, 1..3),
            lease in any::<bool>(), head in any::<bool>(), ident in any::<bool>(),
            writes in arb_paths(),
        ) {
            let names: Vec<String> = (0..exits.len()).map(|i| format!("c{i}")).collect();
            let name_refs: Vec<&str> = names.iter().map(String::as_str).collect();
            let t: Vec<&str> = targets.iter().map(String::as_str).collect();
            let i = input(&t, &["src/**"], &name_refs);
            let c: Vec<&str> = changed.iter().map(String::as_str).collect();
            let runs = names.iter().zip(&exits).map(|(n, x)| run(n, *x)).collect();
            let mut f = facts(&i, &c, runs);
            f.integrity = Integrity { lease_held: lease, head_matches: head, identity_matches: ident };
            f.reported_writes = writes.clone();
            let e = evaluate(&f);
            if e.verdict == Verdict::Accepted {
                prop_assert!(lease && head && ident);
                prop_assert!(exits.iter().all(|x| *x == 0));
                prop_assert!(targets.iter().all(|t| changed.contains(t)));
                prop_assert!(changed.iter().all(|p| p.starts_with("src/")));
            }
            if !(lease && head && ident) {
                prop_assert_eq!(e.attribution, Attribution::Unknown);
                prop_assert_eq!(e.verdict, Verdict::Rejected);
            }
            prop_assert!(e.collateral.iter().all(|p| e.changed.contains(p)));
            // Reported writes never change the verdict: only the diff and the checks do.
            let mut g = f.clone();
            g.reported_writes = vec![];
            prop_assert_eq!(evaluate(&g).verdict, e.verdict);
        }
    }
}
