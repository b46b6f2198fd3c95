//! Patch scenarios (§14; scenarios.md, "Extending the format … for patches"): a repository's
//! files at the base, the allow-list, the targets, the checks and what each returns, the
//! model's turns in the worktree, and faults from another writer. Kept apart from the run
//! scenario format (its own files, `corpus-repo/`) until the `task` section lands; strict like
//! the rest: an unknown field is an error naming it.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Files in a patch scenario's repository at most.
pub const REPO_FILES_MAX: usize = 64;
/// Turns of a patch scenario at most.
pub const PATCH_TURNS_MAX: usize = 64;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchScenario {
    pub id: String,
    pub title: String,
    pub repo: RepoSection,
    pub script: Vec<PatchTurn>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<PatchReport>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepoSection {
    /// Path → text, committed as the base.
    pub files: IndexMap<String, String>,
    pub allow: Vec<String>,
    pub targets: Vec<String>,
    pub checks: Vec<CheckDecl>,
    #[serde(default)]
    pub trace: bool,
}

/// A check and the exit status its command returns.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckDecl {
    pub name: String,
    pub exit: i32,
}

/// Faults another writer causes during the attempt.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PatchFault {
    HeadMoved,
    LeaseLost,
    WorktreeReplaced,
    DiffUnreadable,
}

/// One turn: exactly one key.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "snake_case")]
pub enum PatchTurn {
    Read(String),
    List(String),
    Write { path: String, text: String },
    Fault(PatchFault),
    Submit(serde_json::Value),
    Final(String),
}

/// The `patch` output object of scenarios.md, plus `no_effect` and `transient`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchReport {
    pub changed: Vec<String>,
    pub collateral: Vec<String>,
    pub checks: BTreeMap<String, Option<i32>>,
    /// `attributed` | `unknown`.
    pub attribution: String,
    /// `accepted` | `rejected`.
    pub verdict: String,
    pub no_effect: bool,
    pub transient: Vec<String>,
}

/// Parse one patch scenario strictly; the error names the field.
pub fn parse_patch(path: &Path, text: &str) -> Result<PatchScenario, String> {
    let de = &mut serde_json::Deserializer::from_str(text);
    let s: PatchScenario = serde_path_to_error::deserialize(de)
        .map_err(|e| format!("{}: at {}: {}", path.display(), e.path(), e.inner()))?;
    if s.repo.files.len() > REPO_FILES_MAX || s.script.len() > PATCH_TURNS_MAX {
        return Err(format!(
            "{}: at most {REPO_FILES_MAX} files and {PATCH_TURNS_MAX} turns",
            path.display()
        ));
    }
    Ok(s)
}

/// Every `*.json` in `dir`, sorted by path; ids unique.
pub fn load_patch_dir(dir: &Path) -> Result<Vec<(PathBuf, PatchScenario)>, String> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    paths.sort();
    let mut out: Vec<(PathBuf, PatchScenario)> = vec![];
    for p in paths {
        let text = crate::load::read_bounded(&p).map_err(|e| format!("{}: {e}", p.display()))?;
        let s = parse_patch(&p, &text)?;
        if out.iter().any(|(_, o)| o.id == s.id) {
            return Err(format!("{}: id `{}` is used twice", p.display(), s.id));
        }
        out.push((p, s));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn unknown_fields_and_turns_are_errors() {
        let good = r#"{"id": "a", "title": "t", "repo": {"files": {"a.rs": "x"}, "allow": ["*"], "targets": ["a.rs"], "checks": [{"name": "t", "exit": 0}]}, "script": [{"write": {"path": "a.rs", "text": "y"}}, {"fault": "head_moved"}, {"final": "done"}]}"#;
        let s = parse_patch(Path::new("a.json"), good).unwrap();
        assert_eq!(s.script.len(), 3);
        let bad = good
            .replace("\"trace\"", "x")
            .replace("\"targets\"", "\"target\"");
        assert!(parse_patch(Path::new("a.json"), &bad)
            .unwrap_err()
            .contains("target"));
        let bad = good.replace("{\"final\": \"done\"}", "{\"shell\": \"rm\"}");
        assert!(parse_patch(Path::new("a.json"), &bad).is_err());
    }
}
