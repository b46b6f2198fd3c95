//! The tree of an attempt's worktree as the host reads it (contract §14.0.3): git never runs
//! with the worktree as its repository, so nothing the agent left there — a rewritten `.git`,
//! a filter in `.gitattributes`, a hook, a file-system monitor, an `include.path` — is
//! consulted or run.
//!
//! The host takes the paths (the base's, and the untracked ones `ls-files` finds outside the
//! ignore rules, on the host's git folder), looks at each itself without following a link
//! (a path under a link or a file is gone, as git sees it), hashes regular files and link
//! targets as they are (`hash-object --no-filters`), and writes the tree from those entries
//! through an index of its own.

use crate::git::{Git, GitError, LINK_TARGET_BYTES_MAX};
use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Component, Path, PathBuf};

/// What one path of the worktree is, looked at without following a link.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Found {
    File {
        exec: bool,
    },
    Link(Vec<u8>),
    /// A folder holding a `.git`: a nested repository (git records its commit).
    Repository,
    /// Absent, a plain folder, or a kind git does not keep (a socket, a FIFO, a device).
    Nothing,
}

/// One entry of the tree to write: mode and object id, or a file still to hash.
enum Entry {
    Known { mode: String, id: String },
    Hash { mode: &'static str, source: PathBuf },
}

fn failed(args: &str, message: String) -> GitError {
    GitError::Failed {
        args: args.into(),
        message,
    }
}

/// Look at `rel` beneath `root`, every component with `lstat`.
fn look(root: &Path, rel: &[u8]) -> Found {
    let rel = Path::new(OsStr::from_bytes(rel));
    let parts: Vec<Component> = rel.components().collect();
    let mut at = root.to_path_buf();
    for (i, part) in parts.iter().enumerate() {
        let Component::Normal(name) = part else {
            return Found::Nothing;
        };
        if name.as_bytes() == b".git" {
            return Found::Nothing;
        }
        at.push(name);
        let Ok(meta) = std::fs::symlink_metadata(&at) else {
            return Found::Nothing;
        };
        if i + 1 < parts.len() {
            if !meta.is_dir() {
                return Found::Nothing;
            }
            continue;
        }
        let kind = meta.file_type();
        return if kind.is_file() {
            Found::File {
                exec: meta.permissions().mode() & 0o100 != 0,
            }
        } else if kind.is_symlink() {
            std::fs::read_link(&at)
                .map(|t| Found::Link(t.as_os_str().as_bytes().to_vec()))
                .unwrap_or(Found::Nothing)
        } else if kind.is_dir() && std::fs::symlink_metadata(at.join(".git")).is_ok() {
            Found::Repository
        } else {
            Found::Nothing
        };
    }
    Found::Nothing
}

/// A file beneath `dir`, read only if it is a regular file and small.
fn small_file(dir: &Path, name: &str) -> Option<String> {
    let p = dir.join(name);
    let meta = std::fs::symlink_metadata(&p).ok()?;
    if !meta.is_file() || meta.len() > 1 << 20 {
        return None;
    }
    std::fs::read_to_string(p).ok()
}

fn is_id(s: &str, len: usize) -> bool {
    s.len() == len && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The commit a nested repository's HEAD names, read from its files (its git is never run);
/// a placeholder id when it cannot be read, so the diff still names it.
fn nested_commit(root: &Path, rel: &[u8], id_len: usize) -> String {
    let git = root.join(OsStr::from_bytes(rel)).join(".git");
    let head = small_file(&git, "HEAD").unwrap_or_default();
    let head = head.trim();
    if is_id(head, id_len) {
        return head.to_ascii_lowercase();
    }
    let named = head
        .strip_prefix("ref: ")
        .filter(|r| r.starts_with("refs/") && crate::input::plain_path(r));
    let resolved = named.and_then(|r| {
        small_file(&git, r)
            .map(|s| s.trim().to_string())
            .filter(|s| is_id(s, id_len))
            .or_else(|| {
                let packed = small_file(&git, "packed-refs")?;
                packed.lines().find_map(|l| {
                    let (id, name) = l.split_once(' ')?;
                    (name == r && is_id(id, id_len)).then(|| id.to_string())
                })
            })
    });
    resolved.unwrap_or_else(|| "1".repeat(id_len))
}

/// Split `git ls-tree -r -z` output into (mode, id, path).
fn tree_entries(out: &[u8]) -> Result<Vec<(String, String, Vec<u8>)>, GitError> {
    let mut v = vec![];
    for rec in out.split(|b| *b == 0).filter(|r| !r.is_empty()) {
        let tab = rec
            .iter()
            .position(|b| *b == b'\t')
            .ok_or_else(|| failed("ls-tree", "an entry without a path".into()))?;
        let meta = String::from_utf8_lossy(&rec[..tab]).into_owned();
        let f: Vec<&str> = meta.split(' ').collect();
        if f.len() != 3 {
            return Err(failed("ls-tree", format!("unexpected entry `{meta}`")));
        }
        v.push((f[0].to_string(), f[2].to_string(), rec[tab + 1..].to_vec()));
    }
    Ok(v)
}

/// What the tree holds at `rel` for what the host found there.
fn entry(root: &Path, rel: &[u8], id_len: usize, links: &Path, n: usize) -> Option<Entry> {
    match look(root, rel) {
        Found::File { exec } => Some(Entry::Hash {
            mode: if exec { "100755" } else { "100644" },
            source: root.join(OsStr::from_bytes(rel)),
        }),
        Found::Link(target) => {
            let target = if target.len() > LINK_TARGET_BYTES_MAX {
                b"/(a target too long to read)".to_vec()
            } else {
                target
            };
            let source = links.join(n.to_string());
            std::fs::write(&source, target).ok()?;
            Some(Entry::Hash {
                mode: "120000",
                source,
            })
        }
        Found::Repository => Some(Entry::Known {
            mode: "160000".into(),
            id: nested_commit(root, rel, id_len),
        }),
        Found::Nothing => None,
    }
}

/// A path for `--stdin-paths`: C-quoted when a plain line would not carry it.
fn quoted(p: &Path) -> Vec<u8> {
    let b = p.as_os_str().as_bytes();
    if !b
        .iter()
        .any(|c| *c == b'\n' || *c == b'"' || *c == b'\\' || *c < 0x20)
    {
        return b.to_vec();
    }
    let mut q = vec![b'"'];
    for c in b {
        match c {
            b'"' | b'\\' => q.extend([b'\\', *c]),
            c if *c < 0x20 || *c == 0x7f => q.extend(format!("\\{c:03o}").bytes()),
            c => q.push(*c),
        }
    }
    q.push(b'"');
    q
}

/// Hash every pending entry as it is (no filters), writing the objects, in one `git`.
fn hash_all(
    git: &Git,
    entries: BTreeMap<Vec<u8>, Entry>,
) -> Result<Vec<(String, String, Vec<u8>)>, GitError> {
    let mut input = vec![];
    for e in entries.values() {
        if let Entry::Hash { source, .. } = e {
            input.extend(quoted(source));
            input.push(b'\n');
        }
    }
    let out = if input.is_empty() {
        String::new()
    } else {
        let out = git.run_with(
            &["hash-object", "-w", "--no-filters", "--stdin-paths"],
            Some(input),
        )?;
        String::from_utf8_lossy(&out).into_owned()
    };
    let mut ids = out.lines();
    let mut v = vec![];
    for (path, e) in entries {
        let (mode, id) = match e {
            Entry::Known { mode, id } => (mode, id),
            Entry::Hash { mode, .. } => {
                let id = ids
                    .next()
                    .ok_or_else(|| failed("hash-object", "fewer ids than files".into()))?;
                (mode.to_string(), id.trim().to_string())
            }
        };
        v.push((mode, id, path));
    }
    Ok(v)
}

/// The tree of everything in `root` now (untracked files included, ignored ones not), as the
/// host reads it, built on the host's git folder `git_dir` against the commit `base`.
pub fn snapshot_tree(root: &Path, git_dir: &Path, base: &str) -> Result<String, GitError> {
    let tmp = tempfile::tempdir().map_err(|e| failed("snapshot", e.to_string()))?;
    let index = tmp.path().join("index");
    let links = tmp.path().join("links");
    std::fs::create_dir(&links).map_err(|e| failed("snapshot", e.to_string()))?;
    let index_s = index.to_string_lossy().into_owned();
    let repo = Git::at(git_dir, None).with_env("GIT_INDEX_FILE", &index_s);
    repo.run(&["read-tree", base])?;
    let tracked = tree_entries(&repo.run(&["ls-tree", "-r", "-z", "--full-tree", base])?)?;
    let others = Git::at(git_dir, Some(root))
        .with_env("GIT_INDEX_FILE", &index_s)
        .run(&["ls-files", "-z", "--others", "--exclude-standard"])?;
    let id_len = base.len();
    let mut entries: BTreeMap<Vec<u8>, Entry> = BTreeMap::new();
    for (mode, id, path) in tracked {
        let e = if mode == "160000" {
            Some(Entry::Known { mode, id })
        } else {
            entry(root, &path, id_len, &links, entries.len())
        };
        if let Some(e) = e {
            entries.insert(path, e);
        }
    }
    for path in others.split(|b| *b == 0).filter(|p| !p.is_empty()) {
        let path = path.strip_suffix(b"/").unwrap_or(path);
        if let Some(e) = entry(root, path, id_len, &links, entries.len()) {
            entries.insert(path.to_vec(), e);
        }
    }
    let mut info = vec![];
    for (mode, id, path) in hash_all(&repo, entries)? {
        info.extend(format!("{mode} {id}\t").bytes());
        info.extend(path);
        info.push(0);
    }
    std::fs::remove_file(&index).map_err(|e| failed("snapshot", e.to_string()))?;
    repo.run_with(&["update-index", "-z", "--index-info"], Some(info))?;
    repo.text(&["write-tree"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_a_line_cannot_carry_are_c_quoted() {
        assert_eq!(quoted(Path::new("/w/a b")), b"/w/a b".to_vec());
        assert_eq!(
            quoted(Path::new("/w/a\n\"b\\")),
            b"\"/w/a\\012\\\"b\\\\\"".to_vec()
        );
    }

    #[test]
    fn a_path_under_a_link_or_a_file_is_gone() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let r = d.path();
        std::fs::create_dir(r.join("real")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(r.join("real/f"), "x").unwrap_or_else(|e| panic!("{e}"));
        std::os::unix::fs::symlink("real", r.join("link")).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(look(r, b"real/f"), Found::File { exec: false });
        assert_eq!(look(r, b"link/f"), Found::Nothing);
        assert_eq!(look(r, b"real/f/g"), Found::Nothing);
        assert_eq!(look(r, b"link"), Found::Link(b"real".to_vec()));
        assert_eq!(look(r, b"../x"), Found::Nothing);
    }
}
