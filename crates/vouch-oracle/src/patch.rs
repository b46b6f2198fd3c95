//! §14 as code: what the contract says a patch attempt's evidence must yield. A second,
//! independent reading of docs/contract.md §14 — its own glob reading and its own rules —
//! checked against the host's evaluator (`vouch-repo`) by a property test, so a misreading on
//! either side shows up as a disagreement. Every rule applied is cited with its section.

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use vouch_scenario::Citation;

/// What the host observed of one patch attempt, in the contract's words.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchCase {
    pub allow: Vec<String>,
    pub targets: Vec<String>,
    /// Declared checks in order.
    pub checks: Vec<String>,
    /// Exit status of each check the host ran (`None`: ran without an exit status). A
    /// declared check missing here did not run.
    #[serde(default)]
    pub exits: BTreeMap<String, Option<i32>>,
    /// Changed paths of the host's fresh diff; `None`: the diff could not be read.
    pub changed: Option<Vec<String>>,
    #[serde(default)]
    pub lease_lost: bool,
    #[serde(default)]
    pub head_moved: bool,
    #[serde(default)]
    pub worktree_replaced: bool,
    /// Paths the write tool reported writing.
    #[serde(default)]
    pub reported_writes: Vec<String>,
    /// Paths the trace saw written (`None`: no trace asked for).
    #[serde(default)]
    pub traced: Option<Vec<String>>,
    /// Symlinks in the diff: changed path → its target (§14.0.3).
    #[serde(default)]
    pub symlinks: BTreeMap<String, String>,
    /// Changed paths whose mode changed (both sides present).
    #[serde(default)]
    pub mode_changed: Vec<String>,
    /// Changed paths that are submodules (gitlinks) on either side.
    #[serde(default)]
    pub submodules: Vec<String>,
    /// The worktree's `.git` file was rewritten during the attempt.
    #[serde(default)]
    pub git_rewritten: bool,
    /// The model's final text. Read by nothing below (§14: it changes nothing).
    #[serde(default)]
    pub final_text: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PatchAnswer {
    /// `accepted` | `rejected`.
    pub verdict: String,
    /// `attributed` | `unknown`.
    pub attribution: String,
    pub changed: Vec<String>,
    pub collateral: Vec<String>,
    pub checks: BTreeMap<String, Option<i32>>,
    pub no_effect: bool,
    pub transient: Vec<String>,
    pub rules: Vec<Citation>,
}

const S14: &str = "§14";

/// The allow-list reading of §14.0.1: `*` and `?` stay within one path segment, `**` as a
/// whole segment matches any number of segments, everything else is literal.
pub fn glob_allows(glob: &str, path: &str) -> bool {
    fn segs(g: &[&str], p: &[&str]) -> bool {
        match (g.first(), p.first()) {
            (None, None) => true,
            (Some(&"**"), _) => segs(&g[1..], p) || (!p.is_empty() && segs(g, &p[1..])),
            (Some(gs), Some(ps)) => seg(gs.as_bytes(), ps.as_bytes()) && segs(&g[1..], &p[1..]),
            _ => false,
        }
    }
    fn seg(g: &[u8], p: &[u8]) -> bool {
        match (g.first(), p.first()) {
            (None, None) => true,
            (Some(b'*'), _) => seg(&g[1..], p) || (!p.is_empty() && seg(g, &p[1..])),
            (Some(b'?'), Some(_)) => seg(&g[1..], &p[1..]),
            (Some(a), Some(b)) if a == b => seg(&g[1..], &p[1..]),
            _ => false,
        }
    }
    let g: Vec<&str> = glob.split('/').collect();
    let p: Vec<&str> = path.split('/').collect();
    segs(&g, &p)
}

/// §14: the verdict, the attribution and the evidence's lists, with the rules applied.
pub fn patch(c: &PatchCase) -> PatchAnswer {
    let mut rules: Vec<Citation> = vec![];
    let mut cite = |r: &str| {
        if !rules.iter().any(|x| x.rule == r) {
            rules.push(Citation {
                rule: r.into(),
                section: S14.into(),
            })
        }
    };
    cite("patch.final_text_ignored");
    let faults = [
        (c.lease_lost, "patch.unknown.lease_lost"),
        (c.head_moved, "patch.unknown.head_moved"),
        (c.worktree_replaced, "patch.unknown.worktree_replaced"),
        (c.changed.is_none(), "patch.unknown.diff_unreadable"),
        (c.git_rewritten, "patch.unknown.git_rewritten"),
    ];
    let mut unknown = false;
    for (fault, rule) in faults {
        if fault {
            cite(rule);
            unknown = true;
        }
    }
    let changed: Vec<String> = c
        .changed
        .clone()
        .unwrap_or_default()
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let tricks = tricks(c, &changed);
    if !tricks.is_empty() {
        cite("patch.trick_is_collateral");
    }
    let collateral: Vec<String> = changed
        .iter()
        .filter(|p| tricks.contains(*p) || !c.allow.iter().any(|g| glob_allows(g, p)))
        .chain(&tricks)
        .cloned()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let checks: BTreeMap<String, Option<i32>> = c
        .checks
        .iter()
        .map(|n| (n.clone(), c.exits.get(n).copied().flatten()))
        .collect();
    let mut ok = !unknown;
    if !unknown {
        if !collateral.is_empty() {
            cite("patch.collateral_rejects");
            ok = false;
        }
        if c.targets.iter().any(|t| !changed.contains(t)) {
            cite("patch.target_unchanged_rejects");
            ok = false;
        }
        for n in &c.checks {
            match c.exits.get(n) {
                None => {
                    cite("patch.check_not_run_rejects");
                    ok = false;
                }
                Some(Some(0)) => {}
                Some(_) => {
                    cite("patch.check_failed_rejects");
                    ok = false;
                }
            }
        }
        if c.checks.is_empty() {
            cite("patch.no_check_certifies_nothing");
            ok = false;
        }
    }
    let no_effect = c.changed.is_some() && changed.is_empty() && !c.reported_writes.is_empty();
    if no_effect {
        cite("patch.write_without_diff_no_effect");
    }
    let transient: Vec<String> = match (&c.traced, &c.changed) {
        (Some(t), Some(_)) => t
            .iter()
            .filter(|p| !changed.contains(p))
            .cloned()
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect(),
        _ => vec![],
    };
    if !transient.is_empty() {
        cite("patch.trace_transient");
    }
    if ok {
        cite("patch.accepted");
    }
    PatchAnswer {
        verdict: if ok { "accepted" } else { "rejected" }.into(),
        attribution: if unknown { "unknown" } else { "attributed" }.into(),
        changed: if c.changed.is_some() { changed } else { vec![] },
        // Of an unreadable diff only a rewritten `.git` is known.
        collateral,
        checks,
        no_effect,
        transient,
        rules,
    }
}

/// §14.0.3: the paths of the diff the host never applies — a submodule, a name inside a
/// `.git` folder, `.gitmodules`, a mode change, a symlink whose target leaves the repository —
/// and `.git` itself when it was rewritten.
fn tricks(c: &PatchCase, changed: &[String]) -> BTreeSet<String> {
    let leaves = |path: &str, target: &str| {
        // Resolve the target against the link's folder, segment by segment.
        let mut at: Vec<&str> = path.split('/').collect();
        at.pop();
        target.is_empty()
            || target.starts_with('/')
            || target.split('/').any(|s| {
                if s == ".." {
                    at.pop().is_none()
                } else {
                    if !s.is_empty() && s != "." {
                        at.push(s);
                    }
                    s.eq_ignore_ascii_case(".git")
                }
            })
    };
    let mut out: BTreeSet<String> = changed
        .iter()
        .filter(|p| {
            c.submodules.contains(p)
                || c.mode_changed.contains(p)
                || p.eq_ignore_ascii_case(".gitmodules")
                || p.split('/').any(|s| s.eq_ignore_ascii_case(".git"))
                || c.symlinks.get(*p).is_some_and(|t| leaves(p, t))
        })
        .cloned()
        .collect();
    if c.git_rewritten {
        out.insert(".git".into());
    }
    out
}

/// A name the worktree's tools accept (§14.0.2): relative, plain components, not `.git`.
fn plain(p: &str) -> bool {
    !p.is_empty()
        && !p.starts_with('/')
        && !p.ends_with('/')
        && p.split('/')
            .all(|c| !c.is_empty() && c != "." && c != ".." && c != ".git")
}

/// A patch scenario's answer: the writes replayed over the base files (a refused name writes
/// nothing), the faults, and the checks' declared exits (not run on a worktree with a fault).
pub fn evaluate_scenario(s: &vouch_scenario::patch::PatchScenario) -> PatchAnswer {
    use vouch_scenario::patch::{PatchFault, PatchTurn};
    let mut files: BTreeMap<String, String> = s
        .repo
        .files
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let mut case = PatchCase {
        allow: s.repo.allow.clone(),
        targets: s.repo.targets.clone(),
        checks: s.repo.checks.iter().map(|c| c.name.clone()).collect(),
        ..Default::default()
    };
    let mut written = vec![];
    for t in &s.script {
        match t {
            PatchTurn::Write { path, text } if plain(path) => {
                files.insert(path.clone(), text.clone());
                written.push(path.clone());
            }
            PatchTurn::Fault(PatchFault::HeadMoved) => case.head_moved = true,
            PatchTurn::Fault(PatchFault::LeaseLost) => case.lease_lost = true,
            PatchTurn::Fault(PatchFault::WorktreeReplaced) => case.worktree_replaced = true,
            // A worktree whose git link is rewritten (§14.0.3): the host still reads the diff
            // and HEAD itself (never through that link), `.git` is a trick, attribution is
            // unknown and no check runs on a worktree the agent tampered with.
            PatchTurn::Fault(PatchFault::DiffUnreadable) => case.git_rewritten = true,
            PatchTurn::Final(text) => case.final_text = text.clone(),
            _ => {}
        }
    }
    let changed: Vec<String> = files
        .iter()
        .filter(|(k, v)| s.repo.files.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .collect();
    case.changed = Some(changed);
    let intact =
        !(case.head_moved || case.lease_lost || case.worktree_replaced || case.git_rewritten);
    if intact {
        case.exits = s
            .repo
            .checks
            .iter()
            .map(|c| (c.name.clone(), Some(c.exit)))
            .collect();
    }
    case.reported_writes = written.clone();
    case.traced = s.repo.trace.then_some(written);
    patch(&case)
}

/// The answer in the scenario report's shape.
pub fn report(a: &PatchAnswer) -> vouch_scenario::patch::PatchReport {
    vouch_scenario::patch::PatchReport {
        changed: a.changed.clone(),
        collateral: a.collateral.clone(),
        checks: a.checks.clone(),
        attribution: a.attribution.clone(),
        verdict: a.verdict.clone(),
        no_effect: a.no_effect,
        transient: a.transient.clone(),
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn case() -> PatchCase {
        PatchCase {
            allow: vec!["src/**".into()],
            targets: vec!["src/a.rs".into()],
            checks: vec!["tests".into()],
            exits: [("tests".to_string(), Some(0))].into_iter().collect(),
            changed: Some(vec!["src/a.rs".into()]),
            ..Default::default()
        }
    }

    fn rules(a: &PatchAnswer) -> Vec<&str> {
        a.rules.iter().map(|c| c.rule.as_str()).collect()
    }

    #[test]
    fn globs_read_as_the_contract_says() {
        assert!(glob_allows("src/**", "src/a/b.rs"));
        assert!(glob_allows("src/*.rs", "src/a.rs"));
        assert!(!glob_allows("src/*.rs", "src/a/b.rs"));
        assert!(glob_allows("**/*.md", "README.md"));
        assert!(!glob_allows("src/**", "Cargo.toml"));
    }

    #[test]
    fn each_rule_cites_section_14() {
        let a = patch(&case());
        assert_eq!(a.verdict, "accepted");
        assert!(a.rules.iter().all(|c| c.section == "§14"));
        let mut c = case();
        c.changed = Some(vec![]);
        c.reported_writes = vec!["src/a.rs".into()];
        c.final_text = "implemented retry handling; all tests pass".into();
        let a = patch(&c);
        assert_eq!((a.verdict.as_str(), a.no_effect), ("rejected", true));
        assert!(rules(&a).contains(&"patch.write_without_diff_no_effect"));
        let mut c = case();
        c.head_moved = true;
        let a = patch(&c);
        assert_eq!(a.attribution, "unknown");
        assert!(rules(&a).contains(&"patch.unknown.head_moved"));
        let mut c = case();
        c.exits.clear();
        assert!(rules(&patch(&c)).contains(&"patch.check_not_run_rejects"));
    }
}
