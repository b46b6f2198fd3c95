//! Names beneath a folder root. Every read, write and delete goes through a directory handle
//! that resolves the name beneath the root (openat2 `RESOLVE_BENEATH` where the kernel has
//! it, a checked component walk otherwise), so `..`, an absolute name, or a symlink — one
//! that was there before, or one swapped in between a check and the write — can never reach
//! a file outside the root. A prefix check on a path string cannot give that guarantee: the
//! kernel follows the symlink after the check.

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

/// What went wrong with a name under the root; each variant says what the caller should do.
#[derive(Debug, thiserror::Error)]
pub enum RootError {
    /// The name is empty, absolute or climbs with `..`: refuse it, nothing was touched.
    #[error("path `{name}` is outside the folder root; give a relative path beneath it")]
    Outside { name: String },
    /// The name resolves (through a symlink) outside the root: refuse it, nothing was touched.
    #[error("path `{name}` leads outside the folder root (through a symlink); refused")]
    Escapes { name: String },
    /// The root itself cannot be opened or created: fix the configured folder.
    #[error("the folder root {} cannot be opened: {source}", root.display())]
    Root { root: PathBuf, source: io::Error },
    /// An ordinary I/O failure beneath the root (missing file, permissions, full disk).
    #[error("{name}: {source}")]
    Io { name: String, source: io::Error },
}

impl RootError {
    /// True when the file simply is not there (not an escape, not a broken root).
    pub fn is_not_found(&self) -> bool {
        matches!(self, RootError::Io { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// A folder root; names are resolved beneath it on every operation (no cached handle, so a
/// root replaced on disk is reopened, and no handle leaks across threads).
#[derive(Debug, Clone)]
pub struct FolderRoot {
    root: PathBuf,
}

/// The lexical half of the check: a non-empty relative name made of plain components.
/// The kernel-side half (symlinks) happens in the directory handle.
/// Did cap-std refuse a name because resolving it led outside the root (a symlink, `..`)?
/// cap-std has no error type of its own for this: it answers `PermissionDenied` with a fixed
/// message it builds itself. The operating system's own `PermissionDenied` always carries its
/// errno, so "denied, and not by the OS" is the typed test, and no message text is read.
fn is_escape(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied && e.raw_os_error().is_none()
}

fn plain_name(name: &str) -> Result<PathBuf, RootError> {
    let outside = || RootError::Outside { name: name.into() };
    let rel = Path::new(name);
    if name.is_empty() || rel.is_absolute() {
        return Err(outside());
    }
    let mut out = PathBuf::new();
    for c in rel.components() {
        match c {
            Component::Normal(p) => out.push(p),
            Component::CurDir => {}
            _ => return Err(outside()),
        }
    }
    if out.as_os_str().is_empty() {
        return Err(outside());
    }
    Ok(out)
}

/// The file name the host gives a string it did not choose (a delivery id, a run id, an
/// artifact name): the string itself when it is a plain id (§3.2.1), else `h.` and 16 hex
/// digits of its SHA-256 — no plain id holds a dot, so the two forms never meet, and neither
/// is `.`, `..`, absolute, empty or longer than 64 bytes.
pub fn host_name(untrusted: &str) -> String {
    if vouch_core::is_plain_id(untrusted) {
        untrusted.to_string()
    } else {
        format!("h.{}", &vouch_core::sha256_hex(untrusted.as_bytes())[..16])
    }
}

impl FolderRoot {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FolderRoot { root: root.into() }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where a name would live, for people (receipts, references); never opened by path.
    pub fn display_path(&self, name: &str) -> Result<PathBuf, RootError> {
        Ok(self.root.join(plain_name(name)?))
    }

    fn open_root(&self, create: bool) -> Result<Dir, RootError> {
        let err = |source| RootError::Root {
            root: self.root.clone(),
            source,
        };
        if create {
            // The root is configuration, not model input: creating it by path is fine.
            std::fs::create_dir_all(&self.root).map_err(err)?;
        }
        Dir::open_ambient_dir(&self.root, ambient_authority()).map_err(err)
    }

    fn io(name: &str, source: io::Error) -> RootError {
        if is_escape(&source) {
            RootError::Escapes { name: name.into() }
        } else {
            RootError::Io {
                name: name.into(),
                source,
            }
        }
    }

    /// Split into the parent directory handle (created if asked) and the file's own name.
    fn parent(&self, name: &str, create: bool) -> Result<(Dir, PathBuf), RootError> {
        let rel = plain_name(name)?;
        let file = PathBuf::from(
            rel.file_name()
                .ok_or_else(|| RootError::Outside { name: name.into() })?,
        );
        let root = self.open_root(create)?;
        let parent = match rel.parent() {
            Some(p) if !p.as_os_str().is_empty() => {
                if create {
                    root.create_dir_all(p).map_err(|e| Self::io(name, e))?;
                }
                root.open_dir(p).map_err(|e| Self::io(name, e))?
            }
            _ => root,
        };
        Ok((parent, file))
    }

    /// Read at most `bytes_max` bytes of the file.
    pub fn read(&self, name: &str, bytes_max: usize) -> Result<Vec<u8>, RootError> {
        let (dir, file) = self.parent(name, false)?;
        let f = dir.open(&file).map_err(|e| Self::io(name, e))?;
        let mut out = Vec::new();
        f.take(bytes_max as u64)
            .read_to_end(&mut out)
            .map_err(|e| Self::io(name, e))?;
        Ok(out)
    }

    /// Write the whole file: a temporary name, fsync, rename, fsync of the folder — whole or
    /// absent, and on disk when this returns. A symlink at the final name is refused
    /// (`Escapes`), never written through or replaced.
    pub fn write_atomic(&self, name: &str, bytes: &[u8]) -> Result<(), RootError> {
        let (dir, file) = self.parent(name, true)?;
        let mut tmp = file.clone().into_os_string();
        tmp.push(".vouch-tmp");
        let tmp = PathBuf::from(tmp);
        // A stale temporary (or a symlink planted there) is removed, never written through.
        match dir.remove_file(&tmp) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(Self::io(name, e)),
        }
        let mut opts = cap_std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        // A symlink at the destination is refused like an escape: writing through it could
        // reach outside the root, and replacing it would silently undo what someone set up.
        if dir
            .symlink_metadata(&file)
            .map(|m| m.file_type().is_symlink())
            .unwrap_or(false)
        {
            return Err(RootError::Escapes { name: name.into() });
        }
        let mut f = dir.open_with(&tmp, &opts).map_err(|e| Self::io(name, e))?;
        io::Write::write_all(&mut f, bytes).map_err(|e| Self::io(name, e))?;
        f.sync_all().map_err(|e| Self::io(name, e))?;
        dir.rename(&tmp, &dir, &file)
            .map_err(|e| Self::io(name, e))?;
        // The new name is on disk only once its folder is: without this a machine crash could
        // lose a file whose save the receipt already reported.
        // (The folder handle itself may be a path-only descriptor, which cannot be synced.)
        let mut read = cap_std::fs::OpenOptions::new();
        read.read(true);
        dir.open_with(".", &read)
            .and_then(|d| d.sync_all())
            .map_err(|e| Self::io(name, e))
    }

    /// Remove the file (a symlink at the name is removed itself, its target untouched).
    pub fn remove(&self, name: &str) -> Result<(), RootError> {
        let (dir, file) = self.parent(name, false)?;
        dir.remove_file(&file).map_err(|e| Self::io(name, e))
    }

    /// Is there a file at the name, resolved beneath the root?
    pub fn exists(&self, name: &str) -> bool {
        match self.parent(name, false) {
            Ok((dir, file)) => dir.exists(&file),
            Err(_) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_escape_is_caps_own_refusal_not_the_os_denying_access() {
        let caps = io::Error::new(
            io::ErrorKind::PermissionDenied,
            "a path led outside of the filesystem",
        );
        assert!(matches!(
            FolderRoot::io("x", caps),
            RootError::Escapes { .. }
        ));
        // EACCES from the OS is a permission problem at the destination, not an escape.
        let os = io::Error::from_raw_os_error(13);
        assert_eq!(os.kind(), io::ErrorKind::PermissionDenied);
        assert!(matches!(FolderRoot::io("x", os), RootError::Io { .. }));
    }
}
