//! Capability levels (§4) and reversibility (§5.4).

use crate::manifest::{DestinationKind, Verb};
use serde::{Deserialize, Serialize};
use std::fmt;

/// What the host can do at a destination, weakest first (§4). The order is meaningful.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Capability {
    Unavailable,
    NeedsSetup,
    Readable,
    Draftable,
    Executable,
    Automatable,
}

impl Capability {
    pub const ALL: [Capability; 6] = [
        Capability::Unavailable,
        Capability::NeedsSetup,
        Capability::Readable,
        Capability::Draftable,
        Capability::Executable,
        Capability::Automatable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Capability::Unavailable => "unavailable",
            Capability::NeedsSetup => "needs_setup",
            Capability::Readable => "readable",
            Capability::Draftable => "draftable",
            Capability::Executable => "executable",
            Capability::Automatable => "automatable",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The facts about one act that decide its reversibility (§5.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ActFacts {
    pub verb: Verb,
    pub kind: DestinationKind,
    /// `schedule` with attendees other than the user.
    pub has_other_attendees: bool,
    /// `save` over an existing file at a destination without versioning.
    pub overwrites_existing: bool,
}

/// §5.4: irreversible acts are `send`, `reply`, `delete`, anything on a `payment` destination,
/// `schedule` with other attendees, and a `save` that overwrites without versioning.
pub fn is_irreversible(a: ActFacts) -> bool {
    match (a.verb, a.kind) {
        // Storing a draft never reaches another party: reversible even for a payment (R6).
        (Verb::Draft, _) => false,
        (_, DestinationKind::Payment) => true,
        (Verb::Send | Verb::Reply | Verb::Delete, _) => true,
        (Verb::Schedule, _) => a.has_other_attendees,
        (Verb::Save, _) => a.overwrites_existing,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(verb: Verb, kind: DestinationKind) -> ActFacts {
        ActFacts {
            verb,
            kind,
            has_other_attendees: false,
            overwrites_existing: false,
        }
    }

    #[test]
    fn levels_are_ordered() {
        for w in Capability::ALL.windows(2) {
            assert!(w[0] < w[1]);
        }
    }

    #[test]
    fn reversibility_table() {
        use DestinationKind::*;
        use Verb::*;
        assert!(is_irreversible(facts(Send, Email)));
        assert!(is_irreversible(facts(Reply, Email)));
        assert!(is_irreversible(facts(Delete, Folder)));
        assert!(is_irreversible(facts(Save, Payment)));
        assert!(!is_irreversible(facts(Save, Folder)));
        assert!(is_irreversible(ActFacts {
            overwrites_existing: true,
            ..facts(Save, Folder)
        }));
        assert!(!is_irreversible(facts(Schedule, Calendar)));
        assert!(is_irreversible(ActFacts {
            has_other_attendees: true,
            ..facts(Schedule, Calendar)
        }));
        assert!(!is_irreversible(facts(Draft, Email)));
        assert!(!is_irreversible(facts(Draft, Payment)));
        assert!(!is_irreversible(facts(Write, Surface)));
        assert!(!is_irreversible(facts(Show, Surface)));
    }
}
