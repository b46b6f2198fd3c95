//! Journal event kinds, each with its stored name and its typed body, listed once.
//!
//! The names are stable: they are stored, hashed into every chain and matched by crash points.
//! `event_kinds!` makes from one line per kind the [`EventKind`] enum (its `ALL`, `as_str`,
//! `parse` and serde names) and the typed [`Event`] (one variant per kind, holding the body
//! struct of [`crate::journal`]), so adding a kind is one line here and its body struct there.

use crate::journal::*;
use crate::{EncodedBody, EventBody};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The type an [`Event`] variant holds: the body struct, or the body struct boxed (large ones).
macro_rules! held {
    ($body:ident) => { $body };
    ($body:ident, $wrap:ident) => { $wrap<$body> };
}

/// One line per kind: `Variant = "wire_name" => BodyStruct` (`in Box` to box a large body).
macro_rules! event_kinds {
    ($($(#[$doc:meta])* $v:ident = $wire:literal => $body:ident $(in $wrap:ident)?,)*) => {
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum EventKind {
            $($(#[$doc])* #[serde(rename = $wire)] $v,)*
        }

        impl EventKind {
            pub const ALL: [EventKind; [$(stringify!($v)),*].len()] = [$(EventKind::$v),*];

            pub fn as_str(self) -> &'static str {
                match self { $(EventKind::$v => $wire,)* }
            }

            pub fn parse(s: &str) -> Option<EventKind> {
                match s { $($wire => Some(EventKind::$v),)* _ => None }
            }
        }

        /// One journal event, typed. `kind()` is the stored kind; `body()` the stored body.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Event {
            $($v(held!($body $(, $wrap)?)),)*
        }

        impl Event {
            pub fn kind(&self) -> EventKind {
                match self { $(Event::$v(_) => EventKind::$v,)* }
            }

            /// The body as stored.
            pub fn body(&self) -> Value {
                let v = match self { $(Event::$v(b) => serde_json::to_value(b),)* };
                // Every body type serializes to a JSON object (plain structs of JSON values).
                v.unwrap_or(Value::Null)
            }

            /// The body written once, as its stored text and its canonical text, straight
            /// from the typed body (the `Value` form when the typed path refuses it: a
            /// floating-point number in a payload).
            pub fn encode(&self) -> EventBody {
                match self { $(Event::$v(b) => encode_body(b, self),)* }
            }

            /// Read a stored body as its kind's type.
            pub fn parse(kind: EventKind, body: &Value) -> Result<Event, BodyError> {
                match kind { $(EventKind::$v => typed::<$body>(kind, body).map(|b| Event::$v(b.into())),)* }
            }

            /// Read a stored body's text as its kind's type, with no `Value` between; `None`
            /// when it does not read so (the caller reads it as a `Value` to say why, in the
            /// words [`Event::parse`] uses).
            pub fn parse_text(kind: EventKind, text: &str) -> Option<Event> {
                match kind { $(EventKind::$v => serde_json::from_str::<$body>(text).ok().map(|b| Event::$v(b.into())),)* }
            }
        }

        $(impl From<$body> for Event { fn from(b: $body) -> Event { Event::$v(b.into()) } })*
    };
}

event_kinds! {
    RunCreated = "run_created" => RunCreated,
    Turn = "turn" => Turn,
    ToolCalled = "tool_called" => ToolCalled,
    ManifestDeclared = "manifest_declared" => ManifestDeclared,
    ManifestRejected = "manifest_rejected" => ManifestRejected,
    ManifestImplied = "manifest_implied" => ManifestImplied,
    Preflight = "preflight" => Preflight,
    ProposalRejected = "proposal_rejected" => ProposalRejected,
    ClarifyAsked = "clarify_asked" => ClarifyAsked,
    ClarifyAnswered = "clarify_answered" => ClarifyAnswered,
    ApprovalRequested = "approval_requested" => ApprovalRequested,
    ApprovalGranted = "approval_granted" => ApprovalGranted,
    ApprovalDenied = "approval_denied" => ApprovalDenied,
    ApprovalSuperseded = "approval_superseded" => ApprovalSuperseded,
    Drafted = "drafted" => Drafted,
    LedgerIntent = "ledger_intent" => LedgerIntent,
    AttemptStarted = "attempt_started" => AttemptStarted,
    AttemptFinished = "attempt_finished" => AttemptFinished,
    Evidence = "evidence" => Evidence,
    Suspended = "suspended" => Suspended,
    Resumed = "resumed" => Resumed,
    /// The agent loop stopped without the work: a model error, a budget, the repair limit.
    LoopEnded = "loop_ended" => LoopEnded,
    /// A patch attempt's worktree, recorded before the model's first turn (§14).
    Workspace = "workspace" => Workspace,
    Terminal = "terminal" => Terminal in Box,
}

/// `body` (the body `event` holds) as an [`EncodedBody`], or `event`'s `Value` when the typed
/// path refuses it. Debug builds prove both texts equal to the `Value` path's on every event
/// written, so every test and scenario checks the encoder.
fn encode_body<T: Serialize + ?Sized>(body: &T, event: &Event) -> EventBody {
    let Ok(canonical) = vouch_core::canonical_typed(body) else {
        return EventBody::Value(event.body());
    };
    let Ok(text) = serde_json::to_string(body) else {
        return EventBody::Value(event.body());
    };
    #[cfg(debug_assertions)]
    {
        let value = event.body();
        assert_eq!(text, value.to_string(), "stored text of a {}", event.kind());
        assert_eq!(
            Some(&canonical),
            vouch_core::canonical_json(&value).ok().as_ref(),
            "canonical text of a {}",
            event.kind()
        );
    }
    EventBody::Encoded(EncodedBody::new(text, canonical))
}

fn typed<T: serde::de::DeserializeOwned>(kind: EventKind, body: &Value) -> Result<T, BodyError> {
    T::deserialize(body).map_err(|e| BodyError {
        kind,
        message: e.to_string(),
    })
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_is_named_once_and_parses_back_from_its_name() {
        let mut names: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
        for k in EventKind::ALL {
            assert_eq!(EventKind::parse(k.as_str()), Some(k));
            // The serde name is the stored name.
            assert_eq!(serde_json::to_value(k).ok(), Some(Value::from(k.as_str())));
        }
        names.sort_unstable();
        names.dedup();
        assert_eq!(
            names.len(),
            EventKind::ALL.len(),
            "a wire name is used twice"
        );
        assert_eq!(
            EventKind::parse("Turn"),
            None,
            "names are exact, not case-folded"
        );
        assert_eq!(EventKind::parse(""), None);
    }
}
