//! The local providers: `folder` (files beneath a configured root) and `surface` (the run's
//! own record under the home). Every name is resolved beneath its root by
//! `vouch_runtime::fsroot`, so neither `..`, an absolute name nor a symlink reaches a file
//! outside it.

use std::path::PathBuf;
use vouch_core::{sha256_hex, Destination, DestinationKind, Verb};
use vouch_runtime::fsroot::{host_name, FolderRoot, RootError};
use vouch_runtime::provider::{
    payload_text, AttemptReply, AttemptRequest, Confirms, Observation, Provider,
};

/// The bytes a `folder` payload holds: `{"base64": …}` decoded, else its text form.
pub fn payload_bytes(payload: &serde_json::Value) -> Vec<u8> {
    use base64::Engine;
    payload
        .get("base64")
        .and_then(|b| b.as_str())
        .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok())
        .unwrap_or_else(|| payload_text(payload).into_bytes())
}

/// `folder`: files under a configured root. `save`/`write` write the payload text,
/// `delete` removes the file; every name is resolved beneath the root (see `fsroot`), so
/// neither `..`, an absolute name nor a symlink can reach a file outside it.
#[derive(Debug, Clone)]
pub struct FolderProvider {
    root: FolderRoot,
}

impl FolderProvider {
    pub fn new(root: impl Into<PathBuf>) -> Self {
        FolderProvider {
            root: FolderRoot::new(root),
        }
    }

    /// The root, for work tools that read beneath it.
    pub fn root(&self) -> &FolderRoot {
        &self.root
    }
}

impl Provider for FolderProvider {
    fn kind(&self) -> DestinationKind {
        DestinationKind::Folder
    }
    fn idempotent_by_key(&self, _dest: &Destination) -> bool {
        false
    }
    fn exists(&self, dest: &Destination) -> bool {
        self.root.exists(&dest.address)
    }
    fn holds(&self, dest: &Destination, payload: &serde_json::Value) -> Option<String> {
        let want = payload_text(payload);
        // One byte more than the payload is enough to tell a longer file apart.
        let got = self.root.read(&dest.address, want.len() + 1).ok()?;
        (got == want.as_bytes()).then(|| {
            format!(
                "unchanged: the file already holds these bytes (sha256:{})",
                &sha256_hex(&got)[..12]
            )
        })
    }
    fn current(&self, dest: &Destination, bytes_max: usize) -> Option<Vec<u8>> {
        self.root.read(&dest.address, bytes_max).ok()
    }
    fn attempt(&self, req: &AttemptRequest) -> AttemptReply {
        let name = &req.destination.address;
        let result = match req.verb {
            Verb::Delete => self.root.remove(name),
            _ => self.root.write_atomic(name, &payload_bytes(&req.payload)),
        };
        match result.and_then(|()| self.root.display_path(name)) {
            Ok(path) => AttemptReply::Accepted {
                reference: path.display().to_string(),
                confirms: Confirms::Reference,
            },
            Err(e) => AttemptReply::Rejected {
                reason: e.to_string(),
            },
        }
    }
    fn observe(&self, req: &AttemptRequest, _reply: Option<&AttemptReply>) -> Observation {
        let name = &req.destination.address;
        if req.verb == Verb::Delete {
            return match self.root.read(name, 0) {
                Err(e) if e.is_not_found() => Observation::Present {
                    evidence: format!("{name} is gone"),
                },
                Err(e @ (RootError::Outside { .. } | RootError::Escapes { .. })) => {
                    Observation::Absent {
                        reason: e.to_string(),
                    }
                }
                Ok(_) | Err(_) => Observation::Absent {
                    reason: "the file is still there".into(),
                },
            };
        }
        match self.root.read(name, usize::MAX) {
            Ok(bytes) => {
                let want = sha256_hex(&payload_bytes(&req.payload));
                let got = sha256_hex(&bytes);
                if want == got {
                    Observation::Present {
                        evidence: format!("sha256:{}", &got[..12]),
                    }
                } else {
                    Observation::Absent {
                        reason: "the file on disk does not match the payload".into(),
                    }
                }
            }
            Err(e @ (RootError::Outside { .. } | RootError::Escapes { .. })) => {
                Observation::Absent {
                    reason: e.to_string(),
                }
            }
            Err(_) => Observation::Absent {
                reason: "the file is not there".into(),
            },
        }
    }
}

/// `surface`: the run's own surface record, a file per run under the home.
#[derive(Debug, Clone)]
pub struct SurfaceProvider {
    dir: PathBuf,
}

impl SurfaceProvider {
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        SurfaceProvider { dir: dir.into() }
    }
    /// The record's name beneath the surface folder: chosen by the host (§3.2.1), never the
    /// run's or the model's string as given.
    fn name(run_id: &str, delivery: &str) -> String {
        format!("{}/{}.md", host_name(run_id), host_name(delivery))
    }
    pub fn path(&self, run_id: &str, delivery: &str) -> PathBuf {
        self.dir.join(Self::name(run_id, delivery))
    }
    fn root(&self) -> FolderRoot {
        FolderRoot::new(&self.dir)
    }
}

impl Provider for SurfaceProvider {
    fn kind(&self) -> DestinationKind {
        DestinationKind::Surface
    }
    fn idempotent_by_key(&self, _dest: &Destination) -> bool {
        false
    }
    fn exists(&self, _dest: &Destination) -> bool {
        false
    }
    fn attempt(&self, req: &AttemptRequest) -> AttemptReply {
        let name = Self::name(&req.run_id, &req.delivery);
        match self
            .root()
            .write_atomic(&name, payload_text(&req.payload).as_bytes())
        {
            Ok(()) => AttemptReply::Accepted {
                reference: format!("surface:{name}"),
                confirms: Confirms::Reference,
            },
            Err(e) => AttemptReply::Rejected {
                reason: format!("surface record: {e}"),
            },
        }
    }
    fn observe(&self, req: &AttemptRequest, _reply: Option<&AttemptReply>) -> Observation {
        let want = payload_text(&req.payload);
        let name = Self::name(&req.run_id, &req.delivery);
        match self.root().read(&name, want.len() + 1) {
            Ok(b) if b == want.as_bytes() => Observation::Present {
                evidence: format!("surface record sha256:{}", &sha256_hex(&b)[..12]),
            },
            _ => Observation::Absent {
                reason: "not on the surface record".into(),
            },
        }
    }
}
