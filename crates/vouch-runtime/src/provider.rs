//! Providers: the host's hands. Each attempt returns the provider's own answer; the host
//! then observes the effect itself (§6) — the provider's success flag never decides a status.

use crate::fsroot::{host_name, FolderRoot, RootError};
use std::path::PathBuf;
use vouch_core::{sha256_hex, Destination, DestinationKind, Verb};

/// One attempt at a delivery.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRequest {
    pub run_id: String,
    pub delivery: String,
    pub verb: Verb,
    pub destination: Destination,
    pub payload: serde_json::Value,
    pub payload_hash: String,
    /// The ledger key for irreversible acts; providers that deduplicate use it.
    pub idempotency_key: Option<String>,
}

/// What the provider said.
#[derive(Debug, Clone, PartialEq)]
pub enum AttemptReply {
    /// Accepted, with the provider's reference (message id, transfer id, path…) for people,
    /// and what the server's answer confirms, typed, for the host's observation (§6.2).
    Accepted {
        reference: String,
        confirms: Confirms,
    },
    /// Accepted without anything to check it by (HTTP 202).
    AcceptedUnverifiable { reference: String },
    /// Definite refusal: no effect.
    Rejected { reason: String },
    /// The request went out and the answer was lost (timeout): the effect may have happened.
    Lost { reason: String },
}

/// What an accepting reply confirms, as the provider read it from the server's answer when it
/// arrived. Observation decides on these fields, never on the reference text, which is only
/// the words a receipt shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Confirms {
    /// Only that the provider did it and what it named (a path, a UID, a commit): the
    /// read-back kinds are observed by reading the destination, not by the reply (§6.2.1).
    Reference,
    /// The SMTP server's final reply `code` to the message carrying `message_id`.
    Smtp { code: u16, message_id: String },
    /// An HTTP 2xx with a non-empty response; `id` is the response's own `id`, if it had one.
    Http { status: u16, id: Option<String> },
    /// A transfer the payment provider names by its id.
    Transfer { id: String },
}

/// What the host saw when it looked for itself.
#[derive(Debug, Clone, PartialEq)]
pub enum Observation {
    /// The effect is there; `evidence` names what proves it.
    Present { evidence: String },
    /// The effect is not there.
    Absent { reason: String },
    /// This provider cannot be observed independently (use the provider's reply).
    Unobservable,
}

pub trait Provider: Send + Sync {
    fn kind(&self) -> DestinationKind;
    /// Does this provider deduplicate by idempotency key (§8.3)?
    fn idempotent_by_key(&self, dest: &Destination) -> bool;
    /// Does something already exist at this destination (a `save` would overwrite it)?
    fn exists(&self, dest: &Destination) -> bool;
    /// Does the destination already hold exactly this payload, so that saving it changes
    /// nothing (issue 22 #8)? Answered by looking: `Some(evidence)` of what was read. Only
    /// providers that can read their destination back say yes.
    fn holds(&self, _dest: &Destination, _payload: &serde_json::Value) -> Option<String> {
        None
    }
    /// What the destination holds now, at most `bytes_max` bytes, for a person judging what a
    /// save would replace (issue 28). Only providers that can read their destination say.
    fn current(&self, _dest: &Destination, _bytes_max: usize) -> Option<Vec<u8>> {
        None
    }
    /// The change a payload would make at the destination, as a unified diff of at most
    /// `bytes_max` bytes (a patch applied to a branch), for a person judging a card. Only
    /// providers whose payload names a change they can show say.
    fn preview(
        &self,
        _dest: &Destination,
        _payload: &serde_json::Value,
        _bytes_max: usize,
    ) -> Option<String> {
        None
    }
    fn attempt(&self, req: &AttemptRequest) -> AttemptReply;
    /// Look at the world after an attempt (or at boot, after a lost one).
    fn observe(&self, req: &AttemptRequest, reply: Option<&AttemptReply>) -> Observation;
}

/// The text form of a payload: `{"text": "..."}` → the text; else canonical JSON.
pub fn payload_text(payload: &serde_json::Value) -> String {
    match payload.get("text").and_then(|t| t.as_str()) {
        Some(t) => t.to_string(),
        None => vouch_core::canonical_json(payload).unwrap_or_else(|_| payload.to_string()),
    }
}

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

/// An openable e-mail draft (RFC 5322 text) for the `draft` posture.
pub fn draft_eml(d: &vouch_core::Delivery, payload: &serde_json::Value) -> String {
    let field = |k: &str| {
        payload
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    let to = if field("to").is_empty() {
        d.destination.address.clone()
    } else {
        field("to")
    };
    let subject = if field("subject").is_empty() {
        format!("Draft: {}", d.id)
    } else {
        field("subject")
    };
    let body = if field("body").is_empty() {
        payload_text(payload)
    } else {
        field("body")
    };
    format!("To: {to}\r\nSubject: {subject}\r\nX-Unsent: 1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n{body}\r\n")
}

/// The request body of a webhook payload: its `json` text (the object the model wrote, as
/// the schema carries it), else the payload itself.
pub fn webhook_body(payload: &serde_json::Value) -> String {
    match payload.get("json").and_then(|j| j.as_str()) {
        Some(text) => text.to_string(),
        None => payload.to_string(),
    }
}

/// `webhook`: POST the payload as JSON with an `Idempotency-Key` header (§6.2).
/// 2xx with a body → accepted (the response is the evidence); 202 → unverifiable;
/// other statuses → rejected; a timeout after sending → lost.
pub struct WebhookProvider {
    pub timeout_ms: u64,
    /// Destination patterns known to deduplicate by key.
    pub idempotent: Vec<String>,
    /// A configured read-back (§6.3), see `WebhookConfig::status_url`.
    pub status_url: Option<String>,
}

impl Provider for WebhookProvider {
    fn kind(&self) -> DestinationKind {
        DestinationKind::Webhook
    }
    fn idempotent_by_key(&self, dest: &Destination) -> bool {
        let key = dest.key();
        self.idempotent
            .iter()
            .any(|p| crate::capability::pattern_matches(p, &key))
    }
    fn exists(&self, _dest: &Destination) -> bool {
        false
    }
    fn attempt(&self, req: &AttemptRequest) -> AttemptReply {
        let agent = ureq::AgentBuilder::new()
            .timeout(std::time::Duration::from_millis(self.timeout_ms))
            .build();
        let mut r = agent
            .post(&req.destination.address)
            .set("Content-Type", "application/json");
        if let Some(k) = &req.idempotency_key {
            r = r.set("Idempotency-Key", k);
        }
        match r.send_string(&webhook_body(&req.payload)) {
            Ok(resp) => {
                let status = resp.status();
                let body = resp.into_string().unwrap_or_default();
                if status == 202 {
                    AttemptReply::AcceptedUnverifiable {
                        reference: "HTTP 202".into(),
                    }
                } else if body.trim().is_empty() {
                    AttemptReply::AcceptedUnverifiable {
                        reference: format!("HTTP {status}, empty response"),
                    }
                } else {
                    let id = serde_json::from_str::<serde_json::Value>(&body)
                        .ok()
                        .and_then(|v| v.get("id").and_then(|i| i.as_str()).map(String::from));
                    let named = id
                        .clone()
                        .unwrap_or_else(|| format!("{} bytes", body.len()));
                    AttemptReply::Accepted {
                        reference: format!("HTTP {status}, response {named}"),
                        confirms: Confirms::Http { status, id },
                    }
                }
            }
            Err(ureq::Error::Status(code, resp)) => {
                let text = resp.into_string().unwrap_or_default();
                AttemptReply::Rejected {
                    reason: format!("HTTP {code} {}", text.chars().take(120).collect::<String>()),
                }
            }
            Err(ureq::Error::Transport(t)) => match t.kind() {
                ureq::ErrorKind::Io => AttemptReply::Lost {
                    reason: format!("no answer: {t}"),
                },
                _ => AttemptReply::Rejected {
                    reason: format!("could not reach {}: {t}", req.destination.address),
                },
            },
        }
    }
    fn observe(&self, req: &AttemptRequest, reply: Option<&AttemptReply>) -> Observation {
        // §6.3: a configured read-back decides; otherwise the reply is the observation and
        // the evidence names exactly that.
        // `{id}` is the response's own id as the attempt read it; a response without one
        // leaves a `{id}` read-back nothing to ask, and the reply stands.
        let id = match reply {
            Some(AttemptReply::Accepted {
                confirms: Confirms::Http { id, .. },
                ..
            }) => id.as_deref(),
            _ => None,
        };
        if let Some(o) = crate::outbound::read_back(
            self.status_url.as_deref(),
            id,
            req.idempotency_key.as_deref(),
            self.timeout_ms,
        ) {
            return o;
        }
        match reply {
            Some(AttemptReply::Accepted {
                reference,
                confirms: Confirms::Http { .. },
            }) => Observation::Present {
                evidence: format!("accepted by the server: {reference}"),
            },
            _ => Observation::Unobservable,
        }
    }
}
