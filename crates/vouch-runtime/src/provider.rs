//! Providers: the host's hands. Each attempt returns the provider's own answer; the host
//! then observes the effect itself (§6) — the provider's success flag never decides a status.
//! The host knows only this trait and what a reply and an observation mean; every provider
//! lives in `vouch-adapters` (folder, surface, webhook, e-mail, calendar, payment, repository).

use vouch_core::{Destination, DestinationKind, Verb};

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
