//! Artifacts in an S3-compatible bucket, so every host of one store sees the same artifacts
//! (§13.5): `PREFIX/sha256/ab/<hex>` holds the bytes, `PREFIX/pins/<hex>` (empty) marks a
//! pinned artifact. The same layout and the same rules as [`crate::LocalStore`]: a put is
//! one PUT of the whole object (a reader sees all of it or none), a repeated put rewrites the
//! same bytes (refreshing the time a sweep compares), and a get re-hashes what it read and
//! refuses bytes that no longer match their id — a bucket is not trusted more than a disk.
//!
//! The trait is synchronous; the `object_store` client is not. The store owns a small Tokio
//! runtime of its own and blocks on it — from a thread of another runtime (a server's
//! handler) through a scoped thread, since a runtime may not block inside another.

use crate::{
    content_id, parse_cid, ArtifactError, ArtifactResult, ArtifactStat, ArtifactStore, SweepReport,
};
use futures_util::TryStreamExt as _;
use object_store::aws::{AmazonS3, AmazonS3Builder};
use object_store::path::Path as ObjectPath;
use object_store::{BackoffConfig, ClientOptions, ObjectStore, PutPayload, RetryConfig};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::time::Duration;

/// Requests to the bucket end after this long (each retry included).
pub const S3_TIMEOUT: Duration = Duration::from_secs(30);
/// Retries of a failed request (with backoff) before the error is reported.
pub const S3_RETRIES_MAX: usize = 3;

/// Where the artifacts live and how to reach them; secrets already resolved by the caller.
#[derive(Clone, Default)]
pub struct S3Config {
    /// `s3://bucket` or `s3://bucket/prefix/…`.
    pub url: String,
    /// An S3-compatible endpoint (`http://127.0.0.1:9000`); AWS when absent.
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<String>,
    pub secret_access_key: Option<String>,
    /// Permit `http://` endpoints (a server on loopback); `https://` otherwise.
    pub allow_http: bool,
    pub bytes_max: u64,
}

impl std::fmt::Debug for S3Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the secret key.
        f.debug_struct("S3Config")
            .field("url", &self.url)
            .field("endpoint", &self.endpoint)
            .field("region", &self.region)
            .field("allow_http", &self.allow_http)
            .finish_non_exhaustive()
    }
}

/// `s3://bucket/prefix` → (bucket, prefix); names what is wrong otherwise.
pub fn parse_s3_url(url: &str) -> Result<(String, String), String> {
    let shown: String = url.chars().take(120).collect();
    let rest = url
        .strip_prefix("s3://")
        .ok_or_else(|| format!("`{shown}` is not an s3://bucket/prefix address"))?;
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    // S3's bucket names: 3–63 of lowercase letters, digits, dots and hyphens.
    let bucket_ok = (3..=63).contains(&bucket.len())
        && bucket
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-')
        && !bucket.starts_with(['.', '-'])
        && !bucket.ends_with(['.', '-']);
    if !bucket_ok {
        return Err(format!(
            "`{shown}`: the bucket must be 3 to 63 lowercase letters, digits, dots or hyphens"
        ));
    }
    let prefix = prefix.trim_end_matches('/');
    let prefix_ok = prefix.len() <= 512
        && prefix.split('/').all(|seg| {
            prefix.is_empty()
                || (!seg.is_empty()
                    && seg != "."
                    && seg != ".."
                    && seg
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)))
        });
    if !prefix_ok {
        return Err(format!(
            "`{shown}`: the prefix must be segments of letters, digits, `-`, `_` or `.` joined by `/`"
        ));
    }
    Ok((bucket.to_string(), prefix.to_string()))
}

pub struct S3Store {
    bucket: AmazonS3,
    prefix: String,
    bytes_max: u64,
    /// Always `Some` until dropped (then shut down without blocking: a server drops its
    /// state inside its own runtime, where a blocking shutdown would panic).
    rt: Option<tokio::runtime::Runtime>,
}

impl Drop for S3Store {
    fn drop(&mut self) {
        if let Some(rt) = self.rt.take() {
            rt.shutdown_background();
        }
    }
}

fn s3_err(what: String) -> impl FnOnce(object_store::Error) -> ArtifactError {
    move |e| ArtifactError::Io {
        what,
        error: std::io::Error::other(e.to_string()),
    }
}

impl S3Store {
    /// A store over the bucket of `cfg`. Nothing is sent until the first request.
    pub fn open(cfg: &S3Config) -> ArtifactResult<S3Store> {
        let bad = |msg: String| ArtifactError::Io {
            what: "open the artifact bucket".into(),
            error: std::io::Error::new(std::io::ErrorKind::InvalidInput, msg),
        };
        let (bucket, prefix) = parse_s3_url(&cfg.url).map_err(bad)?;
        let mut b = AmazonS3Builder::new()
            .with_bucket_name(bucket)
            .with_region(cfg.region.clone().unwrap_or_else(|| "us-east-1".into()))
            .with_client_options(
                ClientOptions::new()
                    .with_timeout(S3_TIMEOUT)
                    .with_allow_http(cfg.allow_http),
            )
            .with_retry(RetryConfig {
                backoff: BackoffConfig::default(),
                max_retries: S3_RETRIES_MAX,
                retry_timeout: S3_TIMEOUT,
            });
        if let Some(e) = &cfg.endpoint {
            b = b.with_endpoint(e);
        }
        match (&cfg.access_key_id, &cfg.secret_access_key) {
            (Some(k), Some(s)) => b = b.with_access_key_id(k).with_secret_access_key(s),
            (None, None) => {}
            _ => {
                return Err(bad(
                    "give both the access key id and the secret key, or neither".into(),
                ))
            }
        }
        let bucket = b.build().map_err(|e| bad(e.to_string()))?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("vouch-s3")
            .enable_all()
            .build()
            .map_err(|error| ArtifactError::Io {
                what: "start the artifact bucket's client".into(),
                error,
            })?;
        Ok(S3Store {
            bucket,
            prefix,
            bytes_max: cfg.bytes_max,
            rt: Some(rt),
        })
    }

    pub fn bytes_max(&self) -> u64 {
        self.bytes_max
    }

    /// Run `f` to its end on the store's runtime, from any thread.
    fn block<F: Future + Send>(&self, f: F) -> F::Output
    where
        F::Output: Send,
    {
        let Some(rt) = self.rt.as_ref() else {
            unreachable!("the runtime lives as long as the store")
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|s| {
                s.spawn(|| rt.block_on(f))
                    .join()
                    .unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
        } else {
            rt.block_on(f)
        }
    }

    fn key(&self, rest: &str) -> ObjectPath {
        if self.prefix.is_empty() {
            ObjectPath::from(rest)
        } else {
            ObjectPath::from(format!("{}/{rest}", self.prefix))
        }
    }

    fn object_key(&self, hex: &str) -> ObjectPath {
        self.key(&format!("sha256/{}/{hex}", &hex[..2]))
    }

    fn pin_key(&self, hex: &str) -> ObjectPath {
        self.key(&format!("pins/{hex}"))
    }

    /// Every object under `dir` (of the prefix): file name → (size, last modified ms).
    fn listing(&self, dir: &str) -> ArtifactResult<BTreeMap<String, (u64, i64)>> {
        let base = self.key(dir);
        self.block(async {
            let mut out = BTreeMap::new();
            let mut stream = self.bucket.list(Some(&base));
            while let Some(m) = stream
                .try_next()
                .await
                .map_err(s3_err(format!("list the bucket under {base}")))?
            {
                if let Some(name) = m.location.filename() {
                    out.insert(
                        name.to_string(),
                        (m.size, m.last_modified.timestamp_millis()),
                    );
                }
            }
            Ok(out)
        })
    }

    fn head(&self, key: &ObjectPath, cid: &str) -> ArtifactResult<Option<(u64, i64)>> {
        self.block(async {
            match self.bucket.head(key).await {
                Ok(m) => Ok(Some((m.size, m.last_modified.timestamp_millis()))),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(s3_err(format!("read artifact {cid}"))(e)),
            }
        })
    }
}

impl ArtifactStore for S3Store {
    fn put(&self, bytes: &[u8]) -> ArtifactResult<String> {
        let size = bytes.len() as u64;
        if size > self.bytes_max {
            return Err(ArtifactError::TooLarge {
                size_bytes: size,
                limit_bytes: self.bytes_max,
            });
        }
        let cid = content_id(bytes);
        let key = self.object_key(&cid[crate::CID_PREFIX.len()..]);
        // Rewriting identical bytes is harmless and refreshes the time a sweep compares.
        let payload = PutPayload::from(bytes.to_vec());
        self.block(self.bucket.put(&key, payload))
            .map_err(s3_err(format!("store artifact {cid}")))?;
        Ok(cid)
    }

    fn get(&self, cid: &str) -> ArtifactResult<Vec<u8>> {
        let hex = parse_cid(cid)?;
        let key = self.object_key(hex);
        let limit = self.bytes_max;
        let bytes = self.block(async {
            let got = match self.bucket.get(&key).await {
                Ok(g) => g,
                Err(object_store::Error::NotFound { .. }) => {
                    return Err(ArtifactError::NotFound(cid.to_string()))
                }
                Err(e) => return Err(s3_err(format!("read artifact {cid}"))(e)),
            };
            // A replaced object may be any size: never read more than an artifact may be.
            if got.meta.size > limit {
                return Err(ArtifactError::Corrupt {
                    cid: cid.to_string(),
                    found: format!("{} bytes, more than the limit of {limit}", got.meta.size),
                });
            }
            got.bytes()
                .await
                .map_err(s3_err(format!("read artifact {cid}")))
        })?;
        let found = content_id(&bytes);
        if found != cid {
            return Err(ArtifactError::Corrupt {
                cid: cid.to_string(),
                found,
            });
        }
        Ok(bytes.to_vec())
    }

    fn exists(&self, cid: &str) -> ArtifactResult<bool> {
        let hex = parse_cid(cid)?;
        Ok(self.head(&self.object_key(hex), cid)?.is_some())
    }

    fn stat(&self, cid: &str) -> ArtifactResult<Option<ArtifactStat>> {
        let hex = parse_cid(cid)?;
        let Some((size_bytes, stored_ms)) = self.head(&self.object_key(hex), cid)? else {
            return Ok(None);
        };
        let pinned = self.head(&self.pin_key(hex), cid)?.is_some();
        Ok(Some(ArtifactStat {
            cid: cid.to_string(),
            size_bytes,
            pinned,
            stored_ms,
        }))
    }

    fn pin(&self, cid: &str) -> ArtifactResult<()> {
        let hex = parse_cid(cid)?;
        if !self.exists(cid)? {
            return Err(ArtifactError::NotFound(cid.to_string()));
        }
        let key = self.pin_key(hex);
        self.block(self.bucket.put(&key, PutPayload::new()))
            .map_err(s3_err(format!("pin artifact {cid}")))?;
        Ok(())
    }

    fn list_staged(&self) -> ArtifactResult<Vec<ArtifactStat>> {
        let pins = self.listing("pins")?;
        let objects = self.listing("sha256")?;
        Ok(objects
            .into_iter()
            .filter(|(hex, _)| !pins.contains_key(hex))
            .map(|(hex, (size_bytes, stored_ms))| ArtifactStat {
                cid: format!("{}{hex}", crate::CID_PREFIX),
                size_bytes,
                pinned: false,
                stored_ms,
            })
            .filter(|a| parse_cid(&a.cid).is_ok())
            .collect())
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
            let key = self.object_key(&a.cid[crate::CID_PREFIX.len()..]);
            match self.block(self.bucket.delete(&key)) {
                Ok(()) | Err(object_store::Error::NotFound { .. }) => {
                    report.removed_bytes += a.size_bytes;
                    report.removed.push(a.cid);
                }
                Err(e) => return Err(s3_err(format!("remove artifact {}", a.cid))(e)),
            }
        }
        Ok(report)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn addresses() {
        assert_eq!(
            parse_s3_url("s3://my-bucket").unwrap(),
            ("my-bucket".into(), "".into())
        );
        assert_eq!(
            parse_s3_url("s3://my.bucket/team/vouch/").unwrap(),
            ("my.bucket".into(), "team/vouch".into())
        );
        for bad in [
            "",
            "file:///etc",
            "s3://",
            "s3://ab",
            "s3://Upper",
            "s3://-bucket",
            "s3://bucket/../up",
            "s3://bucket/a//b",
            "s3://bucket/a b",
            "https://bucket/x",
        ] {
            assert!(parse_s3_url(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let c = S3Config {
            url: "s3://bucket".into(),
            secret_access_key: Some("hunter2".into()),
            ..S3Config::default()
        };
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
