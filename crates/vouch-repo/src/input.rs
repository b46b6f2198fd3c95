//! The patch task's input (§14): which repository, from which commit, what may change, what
//! must change, and the checks the host runs. Strict: an unknown field is an error, and every
//! error names the field at fault.

use globset::{GlobSet, GlobSetBuilder};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::path::{Component, Path};

/// Globs, targets and checks a task may name at most.
pub const LIST_MAX: usize = 256;
/// A check may run this long at most.
pub const CHECK_TIMEOUT_S_MAX: u64 = 3600;
/// A path, glob, name or command is this long at most.
pub const TEXT_BYTES_MAX: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PatchInput {
    /// The repository on the worker's machine (a path to a git work tree or bare repository).
    pub repo: String,
    /// The base revision: a full commit id (40 or 64 hex digits).
    pub base: String,
    /// Paths that may change (globs; `*` stays within one folder, `**` crosses folders).
    pub allow: Vec<String>,
    /// Paths that must change.
    pub targets: Vec<String>,
    /// Commands the host runs in the worktree after the attempt.
    pub checks: Vec<CheckSpec>,
    /// Keep an append-only trace of file events during the attempt (reports transient writes).
    #[serde(default)]
    pub trace: bool,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CheckSpec {
    /// `[a-z0-9_-]`, unique within the task.
    pub name: String,
    /// Run with `sh -c` in the worktree.
    pub cmd: String,
    /// 1–3600 seconds.
    pub timeout_s: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("patch input: {0}")]
pub struct InputError(pub String);

fn err(s: impl Into<String>) -> InputError {
    InputError(s.into())
}

/// True for a relative path of plain components (no `..`, no leading `/`, no `.git`).
pub fn plain_path(p: &str) -> bool {
    if p.is_empty() || p.len() > TEXT_BYTES_MAX || p.contains('\0') || p.contains('\\') {
        return false;
    }
    let path = Path::new(p);
    let mut n = 0;
    for c in path.components() {
        match c {
            Component::Normal(s) if s != ".git" => n += 1,
            _ => return false,
        }
    }
    n > 0 && !p.ends_with('/')
}

/// Is `s` a full commit id (SHA-1 or SHA-256, lower-case hex)?
pub fn full_commit_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64)
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// The allow-list as a matcher.
#[derive(Debug, Clone)]
pub struct AllowList {
    set: GlobSet,
}

impl AllowList {
    pub fn new(globs: &[String]) -> Result<Self, InputError> {
        let mut b = GlobSetBuilder::new();
        for (i, g) in globs.iter().enumerate() {
            if g.is_empty() || g.len() > TEXT_BYTES_MAX || g.starts_with('/') {
                return Err(err(format!(
                    "allow/{i} `{g}` must be a non-empty relative glob"
                )));
            }
            let glob = globset::GlobBuilder::new(g)
                .literal_separator(true)
                .build()
                .map_err(|e| err(format!("allow/{i} `{g}` is not a glob: {e}")))?;
            b.add(glob);
        }
        Ok(AllowList {
            set: b
                .build()
                .map_err(|e| err(format!("allow: cannot build the globs: {e}")))?,
        })
    }

    pub fn allows(&self, path: &str) -> bool {
        self.set.is_match(path)
    }
}

impl PatchInput {
    /// Parse a JSON value strictly; the error names the failing path.
    pub fn from_value(v: &Value) -> Result<Self, InputError> {
        let input: PatchInput = serde_path_to_error::deserialize(v).map_err(|e| {
            let path = e.path().to_string();
            err(format!(
                "at {}: {}",
                if path == "." { "/".into() } else { path },
                e.inner()
            ))
        })?;
        input.validate()?;
        Ok(input)
    }

    /// The checks that need no I/O: a task that can never be accepted is refused at offer.
    pub fn validate(&self) -> Result<(), InputError> {
        if self.repo.trim().is_empty() || self.repo.len() > TEXT_BYTES_MAX {
            return Err(err("repo: give the repository's path"));
        }
        if !full_commit_id(&self.base) {
            return Err(err(format!(
                "base `{}` must be a full commit id (40 or 64 lower-case hex digits); resolve a branch with `git rev-parse BRANCH`",
                self.base
            )));
        }
        for (what, n) in [
            ("allow", self.allow.len()),
            ("targets", self.targets.len()),
            ("checks", self.checks.len()),
        ] {
            if n > LIST_MAX {
                return Err(err(format!("{what}: {n} entries; at most {LIST_MAX}")));
            }
        }
        if self.allow.is_empty() {
            return Err(err(
                "allow: name at least one glob of paths that may change",
            ));
        }
        if self.targets.is_empty() {
            return Err(err("targets: name at least one path that must change"));
        }
        if self.checks.is_empty() {
            return Err(err(
                "checks: declare at least one check; only a check the host runs certifies behaviour",
            ));
        }
        let allow = AllowList::new(&self.allow)?;
        for (i, t) in self.targets.iter().enumerate() {
            if !plain_path(t) {
                return Err(err(format!(
                    "targets/{i} `{t}` must be a relative path inside the repository"
                )));
            }
            if !allow.allows(t) {
                return Err(err(format!(
                    "targets/{i} `{t}` is not matched by the allow-list, so the task could never be accepted; add it to allow"
                )));
            }
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, c) in self.checks.iter().enumerate() {
            let ok_name = !c.name.is_empty()
                && c.name.len() <= 64
                && c.name.bytes().all(|b| {
                    b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_' || b == b'-'
                });
            if !ok_name {
                return Err(err(format!(
                    "checks/{i}/name `{}` must be 1–64 of a-z 0-9 _ -",
                    c.name
                )));
            }
            if !names.insert(c.name.as_str()) {
                return Err(err(format!(
                    "checks/{i}/name `{}` is declared twice",
                    c.name
                )));
            }
            if c.cmd.trim().is_empty() || c.cmd.len() > TEXT_BYTES_MAX || c.cmd.contains('\0') {
                return Err(err(format!("checks/{i}/cmd must be a command line")));
            }
            if c.timeout_s == 0 || c.timeout_s > CHECK_TIMEOUT_S_MAX {
                return Err(err(format!(
                    "checks/{i}/timeout_s must be 1–{CHECK_TIMEOUT_S_MAX} seconds"
                )));
            }
        }
        Ok(())
    }
}

/// The JSON Schema of the patch type's input (the board validates offers with it; the strict
/// parse above runs too).
pub fn input_schema() -> Value {
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["repo", "base", "allow", "targets", "checks"],
        "properties": {
            "repo": {"type": "string", "minLength": 1},
            "base": {"type": "string", "pattern": "^([0-9a-f]{40}|[0-9a-f]{64})$"},
            "allow": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
            "targets": {"type": "array", "minItems": 1, "items": {"type": "string", "minLength": 1}},
            "checks": {"type": "array", "minItems": 1, "items": {
                "type": "object",
                "additionalProperties": false,
                "required": ["name", "cmd", "timeout_s"],
                "properties": {
                    "name": {"type": "string", "pattern": "^[a-z0-9_-]{1,64}$"},
                    "cmd": {"type": "string", "minLength": 1},
                    "timeout_s": {"type": "integer", "minimum": 1, "maximum": CHECK_TIMEOUT_S_MAX}
                }
            }},
            "trace": {"type": "boolean"}
        }
    })
}

/// The patch type's output: what the host built from its own observation.
pub fn output_schema() -> Value {
    json!({
        "type": "object",
        "required": ["commit", "branch", "base", "evidence"],
        "properties": {
            "commit": {"type": "string"},
            "branch": {"type": "string"},
            "base": {"type": "string"},
            "evidence": {"type": "object"}
        }
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn good() -> Value {
        json!({"repo": "/r", "base": "a".repeat(40), "allow": ["src/**"], "targets": ["src/lib.rs"],
               "checks": [{"name": "tests", "cmd": "true", "timeout_s": 5}]})
    }

    #[test]
    fn a_good_input_parses() {
        let i = PatchInput::from_value(&good()).unwrap();
        assert!(!i.trace);
        assert_eq!(i.checks[0].name, "tests");
    }

    #[test]
    fn unknown_fields_are_errors_naming_the_field() {
        let mut v = good();
        v["extra"] = json!(1);
        let e = PatchInput::from_value(&v).unwrap_err().to_string();
        assert!(e.contains("extra"), "{e}");
        let mut v = good();
        v["checks"][0]["shell"] = json!("bash");
        let e = PatchInput::from_value(&v).unwrap_err().to_string();
        assert!(e.contains("checks[0]") && e.contains("shell"), "{e}");
    }

    #[test]
    fn bad_values_name_what_is_wrong() {
        let cases = [
            ("base", json!("main"), "full commit id"),
            ("allow", json!([]), "allow"),
            ("targets", json!(["../x"]), "targets/0"),
            (
                "targets",
                json!(["docs/x.md"]),
                "not matched by the allow-list",
            ),
            ("checks", json!([]), "at least one check"),
            (
                "checks",
                json!([{"name": "T", "cmd": "x", "timeout_s": 1}]),
                "checks/0/name",
            ),
            (
                "checks",
                json!([{"name": "t", "cmd": "x", "timeout_s": 0}]),
                "timeout_s",
            ),
            ("allow", json!(["src/[x"]), "not a glob"),
        ];
        for (k, val, want) in cases {
            let mut v = good();
            v[k] = val;
            let e = PatchInput::from_value(&v).unwrap_err().to_string();
            assert!(e.contains(want), "{k}: {e}");
        }
    }

    #[test]
    fn globs_keep_star_within_a_folder() {
        let a = AllowList::new(&["src/*.rs".into(), "tests/**".into()]).unwrap();
        assert!(a.allows("src/lib.rs"));
        assert!(!a.allows("src/a/lib.rs"));
        assert!(a.allows("tests/a/b.rs"));
        assert!(!a.allows("Cargo.toml"));
    }

    #[test]
    fn plain_paths() {
        assert!(plain_path("a/b.rs"));
        for p in ["", "/a", "a/../b", "..", ".git/config", "a/", "a\\b"] {
            assert!(!plain_path(p), "{p}");
        }
    }
}
