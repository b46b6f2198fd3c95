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
        // Opened first: the root is there on every save but the first, and creating what
        // exists would cost a `mkdir` and a `stat` each time.
        match Dir::open_ambient_dir(&self.root, ambient_authority()) {
            Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
                // The root is configuration, not model input: creating it by path is fine.
                std::fs::create_dir_all(&self.root).map_err(err)?;
                Dir::open_ambient_dir(&self.root, ambient_authority()).map_err(err)
            }
            opened => opened.map_err(err),
        }
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
            // Opened first, created beneath the root only when it is not there.
            Some(p) if !p.as_os_str().is_empty() => match root.open_dir(p) {
                Err(e) if create && e.kind() == io::ErrorKind::NotFound => {
                    root.create_dir_all(p).map_err(|e| Self::io(name, e))?;
                    root.open_dir(p).map_err(|e| Self::io(name, e))?
                }
                opened => opened.map_err(|e| Self::io(name, e))?,
            },
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
        // Saves landing in the same folder at once share one fsync of it (`folder_sync`).
        let mut read = cap_std::fs::OpenOptions::new();
        read.read(true);
        dir.open_with(".", &read)
            .and_then(|d| folder_sync::sync(&d))
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

/// Group commit for folders: saves that land in the same folder at once share one fsync of
/// it instead of paying one each (each is a journal commit and a flush of the disk's cache).
///
/// Each caller takes a ticket after its rename. An fsync of the folder started after a ticket
/// was taken makes that ticket's rename durable, whoever's descriptor it goes through (fsync
/// acts on the inode, and the folder is keyed by device and inode). So one caller at a time
/// leads: it syncs for every ticket taken so far, and the callers whose tickets that covers
/// return when it is done — none before. A ticket taken while an fsync is under way waits for
/// the next one. A failed fsync fails every caller it covered.
mod folder_sync {
    use std::collections::HashMap;
    use std::io;
    use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock};

    /// Folders with saves syncing at once, at most; a save beyond it syncs its folder alone.
    pub const FOLDERS_SYNCING_MAX: usize = 1024;

    type Key = (u64, u64);

    #[derive(Default)]
    struct Group {
        state: Mutex<State>,
        done: Condvar,
    }

    #[derive(Default)]
    struct State {
        /// Tickets taken; each is taken after its caller's rename.
        taken: u64,
        /// Every ticket up to this one is covered by an fsync that succeeded.
        synced: u64,
        /// An fsync is under way.
        syncing: bool,
        /// The last fsync that failed: the highest ticket it covered and its error.
        failed: Option<(u64, io::ErrorKind, String)>,
        /// Callers inside; the group leaves the table with the last of them.
        users: usize,
    }

    fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
        // The state is counters updated in single steps: a panic elsewhere leaves it whole.
        m.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn table() -> &'static Mutex<HashMap<Key, Arc<Group>>> {
        static TABLE: OnceLock<Mutex<HashMap<Key, Arc<Group>>>> = OnceLock::new();
        TABLE.get_or_init(Default::default)
    }

    /// Make the folder's entries durable: returns once an fsync of it that started after this
    /// call began has succeeded (or has failed: its error).
    pub fn sync(folder: &cap_std::fs::File) -> io::Result<()> {
        use cap_std::fs::MetadataExt;
        let meta = folder.metadata()?;
        let key = (meta.dev(), meta.ino());
        let Some(group) = enter(key) else {
            return folder.sync_all();
        };
        let out = wait_or_lead(&group, folder);
        leave(key, &group);
        out
    }

    fn enter(key: Key) -> Option<Arc<Group>> {
        let mut t = lock(table());
        if t.len() >= FOLDERS_SYNCING_MAX && !t.contains_key(&key) {
            return None;
        }
        let group = t.entry(key).or_default().clone();
        lock(&group.state).users += 1;
        Some(group)
    }

    fn leave(key: Key, group: &Arc<Group>) {
        let mut t = lock(table());
        let mut s = lock(&group.state);
        s.users -= 1;
        if s.users == 0 {
            t.remove(&key);
        }
    }

    fn wait_or_lead(group: &Group, folder: &cap_std::fs::File) -> io::Result<()> {
        let mut s = lock(&group.state);
        s.taken += 1;
        let ticket = s.taken;
        loop {
            if s.synced >= ticket {
                return Ok(());
            }
            if let Some((upto, kind, why)) = &s.failed {
                if *upto >= ticket {
                    return Err(io::Error::new(*kind, format!("sync the folder: {why}")));
                }
            }
            if !s.syncing {
                break;
            }
            s = group.done.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        // Lead: every ticket taken so far was taken after its rename, so this fsync covers it.
        let upto = s.taken;
        s.syncing = true;
        drop(s);
        let r = folder.sync_all();
        let mut s = lock(&group.state);
        s.syncing = false;
        match &r {
            Ok(()) => s.synced = s.synced.max(upto),
            Err(e) => s.failed = Some((upto, e.kind(), e.to_string())),
        }
        group.done.notify_all();
        r
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn saves_landing_together_share_the_folder_sync_and_each_returns_synced() {
            let tmp = tempfile::tempdir().expect("tempdir");
            let dir = cap_std::fs::Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority())
                .expect("open");
            let mut read = cap_std::fs::OpenOptions::new();
            read.read(true);
            std::thread::scope(|sc| {
                for _ in 0..8 {
                    let f = dir.open_with(".", &read).expect("open folder");
                    sc.spawn(move || {
                        for _ in 0..20 {
                            sync(&f).expect("sync");
                        }
                    });
                }
            });
            // Every caller has left: the folder's group is gone from the table.
            let meta = dir.dir_metadata().expect("metadata");
            use cap_std::fs::MetadataExt;
            assert!(!lock(table()).contains_key(&(meta.dev(), meta.ino())));
        }

        #[test]
        fn a_ticket_is_answered_only_by_an_fsync_that_started_after_it() {
            let g = Group::default();
            {
                let mut s = lock(&g.state);
                // An fsync covering tickets 1–2 is under way; ticket 3 must wait for another.
                s.taken = 2;
                s.syncing = true;
            }
            let tmp = tempfile::tempdir().expect("tempdir");
            let dir = cap_std::fs::Dir::open_ambient_dir(tmp.path(), cap_std::ambient_authority())
                .expect("open");
            let mut read = cap_std::fs::OpenOptions::new();
            read.read(true);
            let f = dir.open_with(".", &read).expect("open folder");
            std::thread::scope(|sc| {
                let waiter = sc.spawn(|| wait_or_lead(&g, &f));
                // Wait until the waiter holds ticket 3, then end the first fsync.
                while lock(&g.state).taken < 3 {
                    std::thread::yield_now();
                }
                {
                    let mut s = lock(&g.state);
                    s.syncing = false;
                    s.synced = 2;
                    g.done.notify_all();
                }
                waiter.join().expect("join").expect("sync");
            });
            // The waiter led an fsync of its own for ticket 3.
            assert_eq!(lock(&g.state).synced, 3);
        }

        #[test]
        fn a_failed_fsync_fails_every_ticket_it_covered() {
            let g = Group::default();
            {
                let mut s = lock(&g.state);
                s.taken = 4;
                s.failed = Some((5, io::ErrorKind::Other, "EIO".into()));
                s.synced = 1;
            }
            let tmp = tempfile::tempdir().expect("tempdir");
            let f = cap_std::fs::File::from_std(std::fs::File::open(tmp.path()).expect("open"));
            // Ticket 5 was covered by the failed fsync: its caller gets the error.
            let err = wait_or_lead(&g, &f).expect_err("covered by the failure");
            assert!(err.to_string().contains("EIO"), "{err}");
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
