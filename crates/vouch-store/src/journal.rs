//! The journal's event bodies, typed (§3.4.2). One serde type per [`EventKind`] (each paired
//! with its kind in `events.rs`): the host writes an [`Event`] and the fold reads one back, so a
//! body is written in one place and read in one shape. A stored body that does not parse as its kind's type is corrupt — the reader
//! says so ([`BodyError`]) instead of treating the event as absent, which would turn "in doubt"
//! into "not attempted".
//!
//! Optional fields carry `#[serde(default)]` so journals written before a field existed still
//! parse; unknown fields are refused, so a body changed behind the host's back, or written by
//! anything but these types, is found rather than half-read.

pub use crate::events::Event;
use crate::{EventKind, NewEvent};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use vouch_core::{
    Capability, DeliveryStatus, EndedBy, Manifest, Outcome, Posture, Presence, Route, Significance,
    TriggerKind,
};

fn is_false(b: &bool) -> bool {
    !*b
}

/// `run_created`: the run exists (§2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RunCreated {
    pub title: String,
    pub trigger: TriggerKind,
    #[serde(default)]
    pub parent: Option<String>,
    pub scope: String,
    /// SHA-256 of the canonical JSON of the run row's `spec` (§10.2): the chain binds what the
    /// run was asked to do with, so `vouch journal verify` finds a spec changed afterwards.
    /// Absent on runs created before it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_sha256: Option<String>,
}

/// A tool call as the model made it (arguments are the model's JSON text, kept verbatim).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCallRecord {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TokenUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// `turn`: one model turn — its text and tool calls, or the error that ended it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Turn {
    pub index: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    #[serde(default)]
    pub tool_calls: Vec<ToolCallRecord>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usage: Option<TokenUsage>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// `tool_called`: the host's answer to one tool call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolCalled {
    pub call_id: String,
    pub name: String,
    pub ok: bool,
    pub result: String,
    /// The call's arguments were malformed and returned to the model to repair: counted
    /// against the run's repairs (absent, so unchanged, on every other call).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub repair: bool,
}

/// `manifest_declared` (§3): the whole manifest after this declaration or amendment.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestDeclared {
    pub manifest: Manifest,
    #[serde(default)]
    pub amendment: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_from: Option<String>,
}

/// `manifest_implied` (§3.4): the manifest an interactive run's final text implies.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestImplied {
    pub manifest: Manifest,
}

/// `manifest_rejected` (§3.2, §5.3): why a declaration was refused; `declined` items end
/// declined when the one question was already spent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ManifestRejected {
    pub errors: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub declined: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// `preflight` (§4): capability and posture decided for one item.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Preflight {
    #[serde(default)]
    pub capability: Option<Capability>,
    pub posture: Posture,
    #[serde(default)]
    pub rule: Option<String>,
    #[serde(default)]
    pub irreversible: bool,
    #[serde(default)]
    pub connect_step: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Decided again at proposal time (capability may have changed since the manifest).
    #[serde(default, skip_serializing_if = "is_false")]
    pub recheck: bool,
    /// The draft hash being finished (§9.5).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finishing_draft: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_from: Option<String>,
}

impl Preflight {
    /// A preflight decision; the optional notes empty.
    pub fn of(
        capability: Option<Capability>,
        posture: Posture,
        rule: Option<String>,
        irreversible: bool,
        connect_step: Option<String>,
    ) -> Self {
        Preflight {
            capability,
            posture,
            rule,
            irreversible,
            connect_step,
            reason: None,
            recheck: false,
            finishing_draft: None,
            carried_from: None,
        }
    }
}

/// `proposal_rejected` (§6): a proposal the host refused, with a stable code.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProposalRejected {
    pub code: String,
    pub reason: String,
    pub call_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<String>,
    /// For `blocked`: the item this one waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dependency: Option<String>,
}

/// `clarify_asked` (§5): the run's one question.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClarifyAsked {
    pub question: String,
    #[serde(default)]
    pub about: Option<String>,
}

/// `clarify_answered` (§5): the person's answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClarifyAnswered {
    pub answer: String,
    /// Who decided (§17.1.1): the token or the local user, when an interface took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<vouch_core::Principal>,
}

/// `approval_requested` (§7): a card bound to the payload's hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalRequested {
    pub payload_hash: String,
    pub payload: Value,
    pub summary: String,
    pub reason: String,
}

/// `approval_granted` (§7): the person approved exactly this hash.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalGranted {
    pub payload_hash: String,
    /// Journaled at start-up from a card decided while no host ran.
    #[serde(default, skip_serializing_if = "is_false")]
    pub from_card: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_from: Option<String>,
    /// Who decided (§17.1.1): the token or the local user, when an interface took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<vouch_core::Principal>,
}

/// `approval_denied` (§7).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalDenied {
    pub payload_hash: String,
    /// Who decided (§17.1.1): the token or the local user, when an interface took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<vouch_core::Principal>,
}

/// `approval_superseded` (§7.3): a new payload replaced the card's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ApprovalSuperseded {
    pub old_hash: String,
    pub new_hash: String,
    /// Who decided (§17.1.1): the token or the local user, when an interface took it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<vouch_core::Principal>,
}

/// `drafted` (§9.5): the payload stored as the item's draft.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Drafted {
    pub path: String,
    pub payload_hash: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_from: Option<String>,
}

/// `ledger_intent` (§8.2): durable before the provider is called.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LedgerIntent {
    pub key: String,
    pub payload_hash: String,
    pub payload: Value,
}

/// `attempt_started` (§8): the provider is about to be called with this payload.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptStarted {
    pub payload_hash: String,
    pub payload: Value,
    #[serde(default)]
    pub key: Option<String>,
    #[serde(default)]
    pub posture: Option<Posture>,
    /// The attempt settles one a crash interrupted, with the same key (§8.3).
    #[serde(default, skip_serializing_if = "is_false")]
    pub retry_same_key: bool,
}

/// What the provider answered (not evidence: the host observes separately, §6).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum ProviderReply {
    Accepted { reference: String },
    AcceptedUnverifiable { reference: String },
    Rejected { reason: String },
    Lost { reason: String },
}

/// `attempt_finished` (§8): the provider's reply.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AttemptFinished {
    pub reply: ProviderReply,
    /// The reply was lost and the same key is tried again (§8.3).
    #[serde(default, skip_serializing_if = "is_false")]
    pub retrying_same_key: bool,
}

/// `evidence` (§6): the only event that sets a delivery's status (I2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Evidence {
    pub status: DeliveryStatus,
    #[serde(default)]
    pub evidence: String,
    #[serde(default)]
    pub reason: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub posture: Option<Posture>,
    /// The ledger's state when a recorded outcome was returned instead of acting (§8.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ledger: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_step: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_from: Option<String>,
}

impl Evidence {
    /// Evidence with a status, what shows it and why; the optional fields empty.
    pub fn of(
        status: DeliveryStatus,
        evidence: impl Into<String>,
        reason: impl Into<String>,
    ) -> Self {
        Evidence {
            status,
            evidence: evidence.into(),
            reason: reason.into(),
            posture: None,
            ledger: None,
            connect_step: None,
            carried_from: None,
        }
    }
}

/// `suspended` (§2.2): the run waits for the person.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Suspended {
    pub reason: String,
    #[serde(default, skip_serializing_if = "is_false")]
    pub at_boot: bool,
}

/// `resumed` (§2.2): by an approval, a denial, an answer, or as a continuation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Resumed {
    pub by: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<String>,
    /// For a continuation: the parent's completed turns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_turn: Option<u64>,
}

/// `loop_ended`: the agent loop stopped without the work.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LoopEnded {
    /// `model_error`, `turn_budget`, `token_budget` or `repair_limit`.
    pub cause: String,
    pub reason: String,
}

/// `workspace` (§14): the patch attempt's worktree, journaled before the first turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Workspace {
    pub repo: String,
    pub path: String,
    pub base: String,
    pub head: String,
    pub identity: String,
    pub branch: String,
    #[serde(default)]
    pub allow: Vec<String>,
    #[serde(default)]
    pub targets: Vec<String>,
    /// The names of the checks the host will run.
    #[serde(default)]
    pub checks: Vec<String>,
    #[serde(default)]
    pub trace: bool,
}

/// `terminal` (§9.2): the reconciler's record, written once with the receipt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Terminal {
    pub outcome: Outcome,
    pub ended_by: EndedBy,
    /// In the manifest's order.
    pub statuses: IndexMap<String, DeliveryStatus>,
    #[serde(default)]
    pub needs_you: Vec<String>,
    pub significance: Significance,
    pub route: Route,
    pub presence: Presence,
    #[serde(default)]
    pub quiet: bool,
    #[serde(default)]
    pub loop_end: Option<LoopEnded>,
    /// Why each item that is not verified is what it is, in the receipt's words.
    #[serde(default)]
    pub reasons: IndexMap<String, String>,
    /// Journal entries that did not parse when the record was made (their seq): the statuses
    /// they could have set are `unknown`, never `not_attempted`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub corrupt: Vec<i64>,
    /// SHA-256 of the receipt's text stored with this record (§10.2), so a receipt changed
    /// afterwards is found by `vouch journal verify`. Absent on runs ended before it was written.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub receipt_sha256: Option<String>,
}

/// A stored body that does not parse as its kind's type.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("a `{kind}` body does not parse: {message}")]
pub struct BodyError {
    pub kind: EventKind,
    pub message: String,
}

impl Event {
    /// The event as a journal append (run-level).
    pub fn at(self, at_ms: i64) -> NewEvent {
        NewEvent::new(self.kind(), at_ms, self.encode())
    }

    /// The event as a journal append about one delivery.
    pub fn for_delivery(self, delivery: &str, at_ms: i64) -> NewEvent {
        NewEvent::for_delivery(self.kind(), delivery, at_ms, self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn every_kind_round_trips_through_its_stored_body() {
        let events: Vec<Event> = vec![
            RunCreated {
                title: "t".into(),
                trigger: TriggerKind::Task,
                parent: None,
                scope: "s".into(),
                spec_sha256: None,
            }
            .into(),
            Turn {
                index: 0,
                content: Some("done".into()),
                tool_calls: vec![ToolCallRecord {
                    id: "c1".into(),
                    name: "save".into(),
                    arguments: "{}".into(),
                }],
                usage: Some(TokenUsage {
                    prompt_tokens: 3,
                    completion_tokens: 4,
                }),
                error: None,
            }
            .into(),
            AttemptFinished {
                reply: ProviderReply::Lost {
                    reason: "timeout".into(),
                },
                retrying_same_key: true,
            }
            .into(),
            Evidence {
                status: DeliveryStatus::Verified,
                evidence: "read back".into(),
                reason: String::new(),
                posture: Some(Posture::Execute),
                ledger: None,
                connect_step: None,
                carried_from: None,
            }
            .into(),
        ];
        for e in events {
            let back = Event::parse(e.kind(), &e.body()).expect("parses");
            assert_eq!(back, e);
        }
    }

    #[test]
    fn a_body_of_the_wrong_shape_is_an_error_naming_the_kind_not_an_empty_event() {
        let err = Event::parse(EventKind::Evidence, &json!({"status": "sent?"})).unwrap_err();
        assert_eq!(err.kind, EventKind::Evidence);
        assert!(err.to_string().contains("evidence"), "{err}");
        let err = Event::parse(EventKind::Evidence, &json!({"status": "verified", "x": 1}));
        assert!(err.is_err(), "an unknown field is refused");
        let err = Event::parse(EventKind::Terminal, &json!(null));
        assert!(err.is_err());
    }

    #[test]
    fn bodies_written_before_optional_fields_existed_still_parse() {
        let old =
            json!({"payload_hash": "h", "payload": {"a": 1}, "key": null, "posture": "execute"});
        assert!(matches!(
            Event::parse(EventKind::AttemptStarted, &old),
            Ok(Event::AttemptStarted(AttemptStarted {
                retry_same_key: false,
                ..
            }))
        ));
        let old_terminal = json!({"outcome": "succeeded", "ended_by": "loop",
            "statuses": {"b": "verified", "a": "failed"}, "needs_you": [], "significance": "routine",
            "route": "badge", "presence": "away", "quiet": false});
        let Ok(Event::Terminal(t)) = Event::parse(EventKind::Terminal, &old_terminal) else {
            panic!("old terminal parses");
        };
        let order: Vec<&str> = t.statuses.keys().map(String::as_str).collect();
        assert_eq!(order, ["b", "a"], "statuses keep the manifest's order");
    }
}
