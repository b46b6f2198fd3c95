//! The pure core of vouch: every type and pure function of the terminal contract.
//!
//! Invariant: nothing in this crate performs I/O, reads a clock, or draws randomness.
//! Every function is deterministic in its arguments, so the runtime, the store and the
//! oracle can all rely on the same vocabulary. Section numbers (§) refer to `docs/contract.md`.

pub mod approval;
pub mod attention;
pub mod board;
pub mod canon;
pub mod canon_typed;
pub mod capability;
pub mod escape;
pub mod ids;
pub mod input;
pub mod manifest;
pub mod posture;
pub mod principal;
pub mod receipt;
pub mod run;
pub mod schedule;
pub mod status;

pub use attention::{route, significance, Presence, Route, Significance};
pub use canon::{
    canonical_json, hex_lower, ledger_key, payload_hash, sha256_hex, write_canonical,
    write_canonical_str, CanonError,
};
pub use canon_typed::{canonical_typed, TypedCanonError};
pub use capability::{is_irreversible, ActFacts, Capability};
pub use escape::{escape_line, escape_text};
pub use ids::{ContentId, PayloadHash, RunId, TaskId};
pub use manifest::{
    is_plain_id, shown_id, Confidence, Delivery, Destination, DestinationKind, Forbid, Manifest,
    ManifestError, Order, ShapeError, Verb, DELIVERIES_MAX, ID_CHARS_MAX,
};
pub use posture::{posture, Context, Posture, PostureInput, Rule};
pub use principal::{Principal, Scope};
pub use receipt::{delivery_line, Wording, CLAIM_WORDS};
pub use run::{EndedBy, RunState, TriggerKind};
pub use schedule::{CatchUp, Overlap};
pub use status::{outcome, DeliveryStatus, Outcome};
