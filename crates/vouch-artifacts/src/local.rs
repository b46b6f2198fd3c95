//! The local content-addressed store: `ROOT/sha256/ab/<hex>` holds the bytes, `ROOT/pins/<hex>`
//! marks a pinned artifact, `ROOT/tmp/` holds writes in progress.
//!
//! A put writes a temporary file, syncs it, renames it into place (atomic: a reader sees the
//! whole artifact or none) and syncs the folder. Two puts of the same bytes race harmlessly:
//! both rename identical content onto the same name. A get re-hashes what it read and refuses
//! bytes that no longer match their id.

use crate::{
    content_id, parse_cid, ArtifactError, ArtifactResult, ArtifactStat, ArtifactStore, SweepReport,
};
use std::collections::BTreeSet;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Temporary files older than this are left-overs of a crashed put and are removed by a sweep.
pub const TMP_MAX_AGE_MS: i64 = 3_600_000;

pub struct LocalStore {
    root: PathBuf,
    bytes_max: u64,
}

fn io(what: String) -> impl FnOnce(std::io::Error) -> ArtifactError {
    move |error| ArtifactError::Io { what, error }
}

fn ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn sync_dir(dir: &Path) -> ArtifactResult<()> {
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io(format!("sync the folder {}", dir.display())))
}

impl LocalStore {
    /// A store under `root` (created on first write) accepting artifacts up to `bytes_max`.
    pub fn new(root: &Path, bytes_max: u64) -> LocalStore {
        LocalStore {
            root: root.to_path_buf(),
            bytes_max,
        }
    }

    /// The store of a vouch home: `HOME/objects`, with the default 25 MiB limit.
    pub fn in_home(home: &Path) -> LocalStore {
        LocalStore::new(&home.join("objects"), crate::ARTIFACT_BYTES_MAX_DEFAULT)
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    pub fn bytes_max(&self) -> u64 {
        self.bytes_max
    }

    fn object_path(&self, hex: &str) -> PathBuf {
        self.root.join("sha256").join(&hex[..2]).join(hex)
    }

    fn pin_path(&self, hex: &str) -> PathBuf {
        self.root.join("pins").join(hex)
    }

    /// Store the contents of a file without reading more than the limit into memory.
    pub fn put_file(&self, path: &Path) -> ArtifactResult<String> {
        self.put(&crate::read_file(path, self.bytes_max)?)
    }

    fn stat_hex(&self, cid: &str, hex: &str) -> ArtifactResult<Option<ArtifactStat>> {
        let meta = match std::fs::metadata(self.object_path(hex)) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(format!("read artifact {cid}"))(e)),
        };
        Ok(Some(ArtifactStat {
            cid: cid.to_string(),
            size_bytes: meta.len(),
            pinned: self.pin_path(hex).exists(),
            stored_ms: meta.modified().map(ms).unwrap_or(0),
        }))
    }

    /// Every stored artifact (pinned or not), by id.
    fn all(&self) -> ArtifactResult<Vec<ArtifactStat>> {
        let base = self.root.join("sha256");
        let mut out = vec![];
        let fans = match std::fs::read_dir(&base) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io(format!("read {}", base.display()))(e)),
        };
        for fan in fans.filter_map(Result::ok) {
            let Ok(files) = std::fs::read_dir(fan.path()) else {
                continue;
            };
            for f in files.filter_map(Result::ok) {
                let Some(name) = f.file_name().to_str().map(String::from) else {
                    continue;
                };
                let cid = format!("{}{name}", crate::CID_PREFIX);
                if parse_cid(&cid).is_err() {
                    continue;
                }
                if let Some(st) = self.stat_hex(&cid, &name)? {
                    out.push(st);
                }
            }
        }
        out.sort_by(|a, b| a.cid.cmp(&b.cid));
        Ok(out)
    }
}

impl ArtifactStore for LocalStore {
    fn put(&self, bytes: &[u8]) -> ArtifactResult<String> {
        let size = bytes.len() as u64;
        if size > self.bytes_max {
            return Err(ArtifactError::TooLarge {
                size_bytes: size,
                limit_bytes: self.bytes_max,
            });
        }
        let cid = content_id(bytes);
        let hex = &cid[crate::CID_PREFIX.len()..];
        let path = self.object_path(hex);
        if let Ok(f) = std::fs::File::options().append(true).open(&path) {
            // Already stored: refresh its time so a sweep running now keeps it.
            if f.metadata().map(|m| m.len() == size).unwrap_or(false) {
                f.set_modified(SystemTime::now())
                    .map_err(io(format!("touch artifact {cid}")))?;
                return Ok(cid);
            }
        }
        let tmp_dir = self.root.join("tmp");
        let dir = path.parent().unwrap_or(&self.root).to_path_buf();
        for d in [&tmp_dir, &dir] {
            std::fs::create_dir_all(d).map_err(io(format!("create {}", d.display())))?;
        }
        static PUTS: AtomicU64 = AtomicU64::new(0);
        let tmp = tmp_dir.join(format!(
            "{hex}.{}.{}.{}",
            std::process::id(),
            ms(SystemTime::now()),
            PUTS.fetch_add(1, Ordering::Relaxed)
        ));
        let written = (|| {
            let mut f = std::fs::File::options()
                .write(true)
                .create_new(true)
                .open(&tmp)
                .map_err(io(format!("create {}", tmp.display())))?;
            f.write_all(bytes)
                .map_err(io(format!("write {}", tmp.display())))?;
            f.sync_all().map_err(io(format!("sync {}", tmp.display())))
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        if let Err(e) = std::fs::rename(&tmp, &path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(io(format!("store artifact {cid}"))(e));
        }
        sync_dir(&dir)?;
        Ok(cid)
    }

    fn get(&self, cid: &str) -> ArtifactResult<Vec<u8>> {
        let hex = parse_cid(cid)?;
        let bytes = match std::fs::read(self.object_path(hex)) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(ArtifactError::NotFound(cid.to_string()))
            }
            Err(e) => return Err(io(format!("read artifact {cid}"))(e)),
        };
        let found = content_id(&bytes);
        if found != cid {
            return Err(ArtifactError::Corrupt {
                cid: cid.to_string(),
                found,
            });
        }
        Ok(bytes)
    }

    fn exists(&self, cid: &str) -> ArtifactResult<bool> {
        let hex = parse_cid(cid)?;
        Ok(self.object_path(hex).is_file())
    }

    fn stat(&self, cid: &str) -> ArtifactResult<Option<ArtifactStat>> {
        let hex = parse_cid(cid)?;
        self.stat_hex(cid, hex)
    }

    fn pin(&self, cid: &str) -> ArtifactResult<()> {
        let hex = parse_cid(cid)?;
        if !self.object_path(hex).is_file() {
            return Err(ArtifactError::NotFound(cid.to_string()));
        }
        let dir = self.root.join("pins");
        std::fs::create_dir_all(&dir).map_err(io(format!("create {}", dir.display())))?;
        let pin = self.pin_path(hex);
        std::fs::File::create(&pin)
            .and_then(|f| f.sync_all())
            .map_err(io(format!("pin artifact {cid}")))?;
        sync_dir(&dir)
    }

    fn list_staged(&self) -> ArtifactResult<Vec<ArtifactStat>> {
        Ok(self.all()?.into_iter().filter(|a| !a.pinned).collect())
    }

    fn sweep(
        &self,
        referenced: &BTreeSet<String>,
        staged_before_ms: i64,
    ) -> ArtifactResult<SweepReport> {
        let mut report = SweepReport::default();
        for a in self.list_staged()? {
            if referenced.contains(&a.cid) || a.stored_ms >= staged_before_ms {
                report.kept_staged += 1;
                continue;
            }
            let hex = &a.cid[crate::CID_PREFIX.len()..];
            match std::fs::remove_file(self.object_path(hex)) {
                Ok(()) => {
                    report.removed_bytes += a.size_bytes;
                    report.removed.push(a.cid);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(io(format!("remove artifact {}", a.cid))(e)),
            }
        }
        // Left-overs of puts that crashed before their rename.
        if let Ok(rd) = std::fs::read_dir(self.root.join("tmp")) {
            let now = ms(SystemTime::now());
            for f in rd.filter_map(Result::ok) {
                let old = f
                    .metadata()
                    .and_then(|m| m.modified())
                    .map(|t| now - ms(t) > TMP_MAX_AGE_MS)
                    .unwrap_or(false);
                if old {
                    let _ = std::fs::remove_file(f.path());
                }
            }
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn store(limit: u64) -> (tempfile::TempDir, LocalStore) {
        let d = tempfile::tempdir().unwrap();
        let s = LocalStore::new(&d.path().join("objects"), limit);
        (d, s)
    }

    #[test]
    fn put_get_stat_exists() {
        let (_d, s) = store(1024);
        let cid = s.put(b"hello").unwrap();
        assert_eq!(cid, content_id(b"hello"));
        assert_eq!(s.get(&cid).unwrap(), b"hello");
        assert!(s.exists(&cid).unwrap());
        let st = s.stat(&cid).unwrap().unwrap();
        assert_eq!((st.size_bytes, st.pinned), (5, false));
        assert_eq!(s.put(b"hello").unwrap(), cid, "idempotent");
        let missing = content_id(b"other");
        assert!(!s.exists(&missing).unwrap());
        assert!(s.stat(&missing).unwrap().is_none());
        assert!(matches!(s.get(&missing), Err(ArtifactError::NotFound(_))));
        assert!(matches!(s.get("sha256:../x"), Err(ArtifactError::BadId(_))));
        let j = s.put_json(&json!({"b": 2, "a": 1})).unwrap();
        assert_eq!(s.get(&j).unwrap(), br#"{"a":1,"b":2}"#);
        assert!(
            std::fs::read_dir(s.root().join("tmp"))
                .unwrap()
                .next()
                .is_none(),
            "no temporary file is left"
        );
    }

    #[test]
    fn the_size_limit_is_named_and_nothing_is_stored() {
        let (_d, s) = store(4);
        s.put(b"1234").unwrap();
        let e = s.put(b"12345").unwrap_err();
        assert!(matches!(
            e,
            ArtifactError::TooLarge {
                size_bytes: 5,
                limit_bytes: 4
            }
        ));
        assert!(!s.exists(&content_id(b"12345")).unwrap());
    }

    #[test]
    fn a_changed_copy_is_refused() {
        let (_d, s) = store(1024);
        let cid = s.put(b"original").unwrap();
        let path = s.object_path(&cid[7..]);
        std::fs::write(&path, b"tampered").unwrap();
        match s.get(&cid) {
            Err(ArtifactError::Corrupt { found, .. }) => assert_eq!(found, content_id(b"tampered")),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn sweep_keeps_pinned_referenced_and_recent() {
        let (_d, s) = store(1024);
        let pinned = s.put(b"input").unwrap();
        s.pin(&pinned).unwrap();
        let referenced = s.put(b"output").unwrap();
        let orphan = s.put(b"orphan").unwrap();
        assert!(matches!(
            s.pin(&content_id(b"absent")),
            Err(ArtifactError::NotFound(_))
        ));
        let staged: Vec<String> = s
            .list_staged()
            .unwrap()
            .into_iter()
            .map(|a| a.cid)
            .collect();
        let mut want = vec![referenced.clone(), orphan.clone()];
        want.sort();
        assert_eq!(staged, want);

        let refs: BTreeSet<String> = [referenced.clone()].into();
        // A cut-off before everything was stored: nothing is old enough to go.
        let r = s.sweep(&refs, 0).unwrap();
        assert!(r.removed.is_empty());
        assert_eq!(r.kept_staged, 2);
        let future = ms(SystemTime::now()) + 60_000;
        let r = s.sweep(&refs, future).unwrap();
        assert_eq!(r.removed, vec![orphan.clone()]);
        assert_eq!(r.removed_bytes, 6);
        assert!(!s.exists(&orphan).unwrap());
        assert!(s.exists(&pinned).unwrap() && s.exists(&referenced).unwrap());
        assert_eq!(s.get(&pinned).unwrap(), b"input");
    }

    #[test]
    fn concurrent_puts_of_the_same_bytes() {
        let (_d, s) = store(1 << 20);
        let data = vec![7u8; 100_000];
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| s.put(&data).unwrap());
            }
        });
        assert_eq!(s.get(&content_id(&data)).unwrap(), data);
    }
}
