//! Artifacts by content id (§13.5).
//!
//! An artifact's content id is `sha256:` + the hex SHA-256 of its bytes; a JSON value's is
//! taken over its RFC 8785 canonical form ([`json_content_id`]), so the same value has the same
//! id in every language and database. [`ArtifactStore`] is what the board uses; [`LocalStore`]
//! keeps artifacts in the home, and [`S3Store`] (feature `s3`) in an S3-compatible bucket.
//!
//! Every artifact is *staged* when stored and *pinned* once something durable refers to it (a
//! task's input, an accepted output). [`ArtifactStore::sweep`] removes staged artifacts that the
//! caller says nothing refers to and that were stored before a cut-off (so an upload whose
//! reference is not written yet survives a concurrent sweep).

mod local;
#[cfg(feature = "s3")]
mod s3;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeSet;

pub use local::LocalStore;
#[cfg(feature = "s3")]
pub use s3::{parse_s3_url, S3Config, S3Store};

/// The prefix of every content id.
pub const CID_PREFIX: &str = "sha256:";
/// The default largest artifact, in bytes (25 MiB).
pub const ARTIFACT_BYTES_MAX_DEFAULT: u64 = 25 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum ArtifactError {
    /// Not a content id; the caller should check what it passed.
    #[error("`{0}` is not a content id (expected `sha256:` and 64 lowercase hex digits)")]
    BadId(String),
    /// No artifact with that id here.
    #[error("no artifact {0} in this store")]
    NotFound(String),
    /// Larger than the store accepts; nothing was stored.
    #[error("the artifact is {size_bytes} bytes, more than the limit of {limit_bytes} bytes ({} MiB); store less, or split it", limit_bytes / (1024 * 1024))]
    TooLarge { size_bytes: u64, limit_bytes: u64 },
    /// The stored bytes no longer hash to their id: the copy was changed or damaged.
    #[error("artifact {cid} is corrupt: its stored bytes hash to {found}; the copy was changed or damaged, so it is not served")]
    Corrupt { cid: String, found: String },
    #[error("cannot put a JSON value in canonical form: {0}")]
    Canon(String),
    #[error("{what}: {error}")]
    Io { what: String, error: std::io::Error },
}

pub type ArtifactResult<T> = Result<T, ArtifactError>;

/// What the store knows about one artifact.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ArtifactStat {
    pub cid: String,
    pub size_bytes: u64,
    pub pinned: bool,
    /// When it was last stored (a repeated put refreshes it), milliseconds since the epoch.
    pub stored_ms: i64,
}

/// What a sweep did.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepReport {
    /// Removed: staged, unreferenced, stored before the cut-off.
    pub removed: Vec<String>,
    pub removed_bytes: u64,
    /// Staged artifacts kept because they are referenced or newer than the cut-off.
    pub kept_staged: usize,
}

/// The content id of some bytes.
pub fn content_id(bytes: &[u8]) -> String {
    format!("{CID_PREFIX}{}", hex::encode(Sha256::digest(bytes)))
}

/// The canonical bytes of a JSON value, which its content id covers.
pub fn json_bytes(value: &serde_json::Value) -> ArtifactResult<Vec<u8>> {
    vouch_core::canonical_json(value)
        .map(String::into_bytes)
        .map_err(|e| ArtifactError::Canon(e.to_string()))
}

/// The content id of a JSON value: over its RFC 8785 canonical form.
pub fn json_content_id(value: &serde_json::Value) -> ArtifactResult<String> {
    Ok(content_id(&json_bytes(value)?))
}

/// The contents of a file, without reading more than `bytes_max` into memory (`TooLarge`
/// past it): what a store's put takes from a file.
pub fn read_file(path: &std::path::Path, bytes_max: u64) -> ArtifactResult<Vec<u8>> {
    use std::io::Read as _;
    let io = |error| ArtifactError::Io {
        what: format!("read {}", path.display()),
        error,
    };
    let f = std::fs::File::open(path).map_err(io)?;
    let len = f.metadata().map_err(io)?.len();
    if len > bytes_max {
        return Err(ArtifactError::TooLarge {
            size_bytes: len,
            limit_bytes: bytes_max,
        });
    }
    let mut bytes = Vec::with_capacity(len as usize);
    f.take(bytes_max + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > bytes_max {
        return Err(ArtifactError::TooLarge {
            size_bytes: bytes.len() as u64,
            limit_bytes: bytes_max,
        });
    }
    Ok(bytes)
}

/// Check a content id; returns its hex digest.
pub fn parse_cid(cid: &str) -> ArtifactResult<&str> {
    let hex_part = cid
        .strip_prefix(CID_PREFIX)
        .ok_or_else(|| ArtifactError::BadId(cid.chars().take(80).collect()))?;
    if hex_part.len() == 64
        && hex_part
            .chars()
            .all(|c| c.is_ascii_digit() || ('a'..='f').contains(&c))
    {
        Ok(hex_part)
    } else {
        Err(ArtifactError::BadId(cid.chars().take(80).collect()))
    }
}

/// Artifacts by content id. Writes are durable on return; reads verify the content id.
pub trait ArtifactStore: Send + Sync {
    /// Store bytes (staged unless already pinned); returns their content id. Storing what is
    /// already there stores nothing new and refreshes its stored time.
    fn put(&self, bytes: &[u8]) -> ArtifactResult<String>;
    /// Store a JSON value as its canonical bytes; returns its content id.
    fn put_json(&self, value: &serde_json::Value) -> ArtifactResult<String> {
        self.put(&json_bytes(value)?)
    }
    /// The bytes of an artifact, checked against its id (`Corrupt` if they changed).
    fn get(&self, cid: &str) -> ArtifactResult<Vec<u8>>;
    fn exists(&self, cid: &str) -> ArtifactResult<bool>;
    fn stat(&self, cid: &str) -> ArtifactResult<Option<ArtifactStat>>;
    /// Pin a stored artifact (a task's input, an accepted output): a sweep never removes it.
    fn pin(&self, cid: &str) -> ArtifactResult<()>;
    /// Staged (unpinned) artifacts, by id.
    fn list_staged(&self) -> ArtifactResult<Vec<ArtifactStat>>;
    /// Remove staged artifacts not in `referenced` and stored before `staged_before_ms`.
    fn sweep(
        &self,
        referenced: &BTreeSet<String>,
        staged_before_ms: i64,
    ) -> ArtifactResult<SweepReport>;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn ids() {
        assert_eq!(
            content_id(b""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            json_content_id(&json!({"b": 1, "a": [true, null]})).unwrap(),
            content_id(br#"{"a":[true,null],"b":1}"#)
        );
        parse_cid(&content_id(b"x")).unwrap();
        for bad in [
            "",
            "sha256:",
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
            "sha256:E3B0C44298FC1C149AFBF4C8996FB92427AE41E4649B934CA495991B7852B855",
            "sha256:../../etc/passwd",
            "md5:d41d8cd98f00b204e9800998ecf8427e",
        ] {
            assert!(parse_cid(bad).is_err(), "{bad}");
        }
    }

    proptest! {
        #[test]
        fn json_id_is_key_order_independent(m in proptest::collection::btree_map("[a-z]{0,4}", any::<i32>(), 0..8)) {
            let forward: serde_json::Map<String, serde_json::Value> =
                m.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            let backward: serde_json::Map<String, serde_json::Value> =
                m.iter().rev().map(|(k, v)| (k.clone(), json!(v))).collect();
            prop_assert_eq!(
                json_content_id(&serde_json::Value::Object(forward)).unwrap(),
                json_content_id(&serde_json::Value::Object(backward)).unwrap()
            );
        }
    }
}
