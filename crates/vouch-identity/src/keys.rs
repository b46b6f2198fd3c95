//! Key files: `$VOUCH_HOME/identities/NAME.key`, one JSON object each, mode 0600.
//!
//! A key file is created atomically and never overwritten: the key is written and synced to
//! a temporary file (created 0600 from the start, so the secret is never readable by others,
//! not even for an instant), then hard-linked to its name — a link fails when the name exists,
//! so two processes creating the same identity cannot both win — and the folder is synced.
//! A key file readable or writable by anyone but its owner is refused, as ssh does.

use crate::{validate_name, Identity, IdentityError, PUBLIC_KEY_PREFIX};
use serde_json::{json, Value};
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};

/// The folder of key files inside a home.
pub const KEYS_DIR: &str = "identities";
/// Largest key file read, in bytes (a real one is about 250).
pub const KEY_FILE_BYTES_MAX: u64 = 4096;

/// The key files of one home.
#[derive(Debug, Clone)]
pub struct KeyDir {
    dir: PathBuf,
}

impl KeyDir {
    /// The key folder of the home `home` (`home/identities`).
    pub fn in_home(home: &Path) -> KeyDir {
        KeyDir {
            dir: home.join(KEYS_DIR),
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(format!("{name}.key"))
    }

    pub fn exists(&self, name: &str) -> bool {
        validate_name(name).is_ok() && self.path(name).symlink_metadata().is_ok()
    }

    /// Names of the key files here, sorted.
    pub fn names(&self) -> Result<Vec<String>, IdentityError> {
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
            Err(error) => {
                return Err(IdentityError::Io {
                    what: format!("read the key folder {}", self.dir.display()),
                    error,
                })
            }
        };
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .filter_map(|e| {
                let file = e.file_name().to_str()?.to_string();
                let name = file.strip_suffix(".key")?;
                validate_name(name).ok().map(|_| name.to_string())
            })
            .collect();
        names.sort();
        Ok(names)
    }

    /// Write a new key file for `id`; `Exists` if one of that name is already there.
    pub fn write_new(&self, id: &Identity) -> Result<PathBuf, IdentityError> {
        let io = |what: String| move |error| IdentityError::Io { what, error };
        std::fs::create_dir_all(&self.dir)
            .map_err(io(format!("create the key folder {}", self.dir.display())))?;
        let _ = std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700));
        let path = self.path(id.name());
        if path.symlink_metadata().is_ok() {
            return Err(IdentityError::Exists {
                name: id.name().to_string(),
                path: path.display().to_string(),
            });
        }
        let body = json!({
            "name": id.name(),
            "algorithm": "ed25519",
            "public_key": id.public_key(),
            "secret_key": id.secret_hex(),
        });
        let tmp = self.dir.join(format!(
            ".{}.key.{}.{}.tmp",
            id.name(),
            std::process::id(),
            unique()
        ));
        let written = (|| -> Result<(), IdentityError> {
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&tmp)
                .map_err(io(format!("create {}", tmp.display())))?;
            writeln!(f, "{body}").map_err(io(format!("write {}", tmp.display())))?;
            f.sync_all()
                .map_err(io(format!("sync {}", tmp.display())))?;
            Ok(())
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            return Err(e);
        }
        let linked = std::fs::hard_link(&tmp, &path);
        let _ = std::fs::remove_file(&tmp);
        match linked {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                return Err(IdentityError::Exists {
                    name: id.name().to_string(),
                    path: path.display().to_string(),
                })
            }
            Err(error) => {
                return Err(IdentityError::Io {
                    what: format!("create {}", path.display()),
                    error,
                })
            }
        }
        std::fs::File::open(&self.dir)
            .and_then(|d| d.sync_all())
            .map_err(io(format!("sync the key folder {}", self.dir.display())))?;
        Ok(path)
    }

    /// Remove a key file this process has just written and nothing refers to.
    pub(crate) fn remove_own(&self, name: &str) {
        let _ = std::fs::remove_file(self.path(name));
    }

    /// Read a key file; checks its mode, its shape, its name and that its public key is the
    /// one its secret makes.
    pub fn load(&self, name: &str) -> Result<Identity, IdentityError> {
        validate_name(name)?;
        let path = self.path(name);
        let shown = path.display().to_string();
        let fail = |reason: String| IdentityError::KeyFile {
            path: shown.clone(),
            reason,
        };
        let meta = match path.symlink_metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(IdentityError::NotFound {
                    name: name.to_string(),
                    path: shown,
                })
            }
            Err(e) => return Err(fail(format!("cannot read it: {e}"))),
        };
        if !meta.is_file() {
            return Err(fail(
                "it is not a regular file (a symlink or folder is not accepted)".into(),
            ));
        }
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(fail(format!(
                "its permissions {mode:o} let others read or write the secret key; run `chmod 600 {shown}` if it is yours"
            )));
        }
        if meta.len() > KEY_FILE_BYTES_MAX {
            return Err(fail(format!(
                "it is {} bytes, more than a key file ever is ({KEY_FILE_BYTES_MAX})",
                meta.len()
            )));
        }
        // The length said nothing of a device or a FIFO (`/dev/zero` is 0 bytes long): the
        // read itself stops one byte past the limit.
        let mut bytes = vec![];
        std::io::Read::read_to_end(
            &mut std::io::Read::take(
                std::fs::File::open(&path).map_err(|e| fail(format!("cannot read it: {e}")))?,
                KEY_FILE_BYTES_MAX + 1,
            ),
            &mut bytes,
        )
        .map_err(|e| fail(format!("cannot read it: {e}")))?;
        if bytes.len() as u64 > KEY_FILE_BYTES_MAX {
            return Err(fail(format!(
                "it holds more than a key file ever does ({KEY_FILE_BYTES_MAX} bytes)"
            )));
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| fail("it is not a vouch key file (not UTF-8)".to_string()))?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| fail(format!("it is not a vouch key file (not JSON: {e})")))?;
        let field = |k: &str| {
            v.get(k)
                .and_then(Value::as_str)
                .ok_or_else(|| fail(format!("it has no `{k}` text field")))
        };
        if field("algorithm")? != "ed25519" {
            return Err(fail("its algorithm is not `ed25519`".into()));
        }
        if field("name")? != name {
            return Err(fail(format!(
                "it holds identity `{}`, not `{name}`",
                field("name")?
            )));
        }
        let secret: [u8; 32] = hex::decode(field("secret_key")?)
            .ok()
            .and_then(|b| b.try_into().ok())
            .ok_or_else(|| fail("its `secret_key` is not 64 hex digits".into()))?;
        let id = Identity::from_secret(name, &secret);
        let public = field("public_key")?;
        if !public.starts_with(PUBLIC_KEY_PREFIX) || public != id.public_key() {
            return Err(fail(format!(
                "its `public_key` {public} is not the key its secret makes ({}); the file was edited",
                id.public_key()
            )));
        }
        Ok(id)
    }
}

fn unique() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn written_0600_read_back_never_overwritten() {
        let home = tempfile::tempdir().unwrap();
        let keys = KeyDir::in_home(home.path());
        let id = Identity::generate("w1").unwrap();
        let path = keys.write_new(&id).unwrap();
        assert_eq!(
            std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        assert_eq!(keys.load("w1").unwrap().public_key(), id.public_key());
        let other = Identity::generate("w1").unwrap();
        assert!(matches!(
            keys.write_new(&other),
            Err(IdentityError::Exists { .. })
        ));
        assert_eq!(
            keys.load("w1").unwrap().public_key(),
            id.public_key(),
            "the first key is kept"
        );
        assert_eq!(keys.names().unwrap(), ["w1"], "no temporary file is left");
        assert_eq!(
            std::fs::read_dir(keys.dir()).unwrap().count(),
            1,
            "no temporary file is left"
        );
    }

    #[test]
    fn bad_key_files_are_refused_with_the_reason() {
        let home = tempfile::tempdir().unwrap();
        let keys = KeyDir::in_home(home.path());
        assert!(matches!(
            keys.load("nobody"),
            Err(IdentityError::NotFound { .. })
        ));
        let id = Identity::generate("w").unwrap();
        let path = keys.write_new(&id).unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = keys.load("w").unwrap_err().to_string();
        assert!(e.contains("chmod 600"), "{e}");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let mut v: Value = serde_json::from_str(&text).unwrap();
        v["public_key"] = Value::from(Identity::generate("x").unwrap().public_key());
        std::fs::write(&path, v.to_string()).unwrap();
        let e = keys.load("w").unwrap_err().to_string();
        assert!(e.contains("was edited"), "{e}");
        std::fs::write(&path, "not json").unwrap();
        let e = keys.load("w").unwrap_err().to_string();
        assert!(e.contains("not a vouch key file"), "{e}");
    }

    #[test]
    fn concurrent_creations_have_one_winner() {
        let home = tempfile::tempdir().unwrap();
        let keys = KeyDir::in_home(home.path());
        let wins: usize = std::thread::scope(|s| {
            let handles: Vec<_> = (0..8)
                .map(|_| {
                    let keys = keys.clone();
                    s.spawn(move || keys.write_new(&Identity::generate("same").unwrap()).is_ok())
                })
                .collect();
            handles
                .into_iter()
                .map(|h| usize::from(h.join().unwrap()))
                .sum()
        });
        assert_eq!(wins, 1);
        keys.load("same").unwrap();
    }
}
