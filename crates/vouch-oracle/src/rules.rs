//! The contract's decision tables, as data, each row citing its section of docs/contract.md.
//!
//! Independence: nothing here calls vouch-core's decision functions (`posture`, `outcome`,
//! `significance`, `route`, `is_irreversible`). This is a second reading of the document,
//! so a misreading on either side surfaces as a disagreement with the runtime.

use vouch_core::{
    Capability, Confidence, DeliveryStatus, DestinationKind, Outcome, Posture, Presence, Route,
    Significance, Verb,
};

/// Where a rule comes from.
pub type Section = &'static str;

/// The facts the posture rules read (§5.2 "Inputs").
#[derive(Debug, Clone, Copy)]
pub struct PostureFacts {
    pub verb: Verb,
    pub kind: DestinationKind,
    pub capability: Capability,
    pub confidence: Confidence,
    pub interactive: bool,
    pub clarify_used: bool,
    pub forbidden: bool,
    pub irreversible: bool,
}

/// One posture rule: its name, its section, and the posture when it matches.
pub struct PostureRule {
    pub name: &'static str,
    pub section: Section,
    pub applies: fn(&PostureFacts) -> Option<Posture>,
}

fn when(c: bool, p: Posture) -> Option<Posture> {
    c.then_some(p)
}

/// §5.2, in order; the first rule that applies decides.
pub const POSTURE_RULES: &[PostureRule] = &[
    PostureRule {
        name: "R1",
        section: "§5.2",
        applies: |f| when(f.forbidden, Posture::Decline),
    },
    PostureRule {
        name: "R2",
        section: "§5.2",
        applies: |f| when(f.capability == Capability::Unavailable, Posture::Decline),
    },
    PostureRule {
        name: "R3",
        section: "§5.2",
        applies: |f| {
            when(
                matches!(f.verb, Verb::Write | Verb::Show)
                    && f.kind == DestinationKind::Surface
                    && f.interactive,
                Posture::Answer,
            )
        },
    },
    PostureRule {
        name: "R4",
        section: "§5.2",
        applies: |f| {
            when(
                f.confidence == Confidence::Low,
                if f.clarify_used {
                    Posture::Draft
                } else {
                    Posture::Clarify
                },
            )
        },
    },
    PostureRule {
        name: "R5",
        section: "§5.2",
        applies: |f| {
            when(
                matches!(
                    f.capability,
                    Capability::NeedsSetup | Capability::Readable | Capability::Draftable
                ),
                Posture::Draft,
            )
        },
    },
    PostureRule {
        name: "R6",
        section: "§5.2",
        applies: |f| when(f.verb == Verb::Draft, Posture::Execute),
    },
    PostureRule {
        name: "R7",
        section: "§5.2",
        applies: |f| {
            when(
                !f.irreversible && f.capability >= Capability::Executable,
                Posture::Execute,
            )
        },
    },
    PostureRule {
        name: "R8",
        section: "§5.2",
        applies: |f| {
            when(
                f.irreversible && f.capability == Capability::Automatable && !f.interactive,
                Posture::Execute,
            )
        },
    },
    PostureRule {
        name: "R9",
        section: "§5.2",
        applies: |f| when(f.irreversible, Posture::Confirm),
    },
];

/// Decide a posture. `None` only if no rule applies, which the rules make impossible
/// (a reversible act at ≥ executable is R7, an irreversible one is R8 or R9); the caller
/// reports a GAP rather than guessing.
pub fn posture(f: &PostureFacts) -> Option<(Posture, &'static PostureRule)> {
    POSTURE_RULES
        .iter()
        .find_map(|r| (r.applies)(f).map(|p| (p, r)))
}

/// §5.4 (and §5.4.1 for `draft`): is the act irreversible?
pub fn irreversible(
    verb: Verb,
    kind: DestinationKind,
    has_attendees: bool,
    overwrites: bool,
) -> bool {
    match verb {
        // §5.4.1: storing a draft reaches nobody, even when it is a draft payment.
        Verb::Draft => false,
        _ if kind == DestinationKind::Payment => true,
        Verb::Send | Verb::Reply | Verb::Delete => true,
        Verb::Schedule => has_attendees,
        Verb::Save => overwrites,
        Verb::Write | Verb::Show => false,
    }
}

/// §6.2.1: destinations whose observation the host makes by reading the destination back,
/// independently of the provider's reply. Elsewhere the observation is the provider's reply.
pub fn reread_observable(verb: Verb, kind: DestinationKind) -> bool {
    verb == Verb::Draft
        || matches!(
            kind,
            DestinationKind::Surface | DestinationKind::Folder | DestinationKind::Calendar
        )
}

/// §6: statuses after which a delivery is never performed again.
pub fn settled(s: DeliveryStatus) -> bool {
    matches!(
        s,
        DeliveryStatus::Verified
            | DeliveryStatus::Unknown
            | DeliveryStatus::Unconfirmed
            | DeliveryStatus::Denied
            | DeliveryStatus::Declined
    )
}

/// §9.2: statuses a continuation carries over from its parent as they are.
pub fn carried_over(s: DeliveryStatus) -> bool {
    matches!(
        s,
        DeliveryStatus::Verified
            | DeliveryStatus::Unknown
            | DeliveryStatus::Unconfirmed
            | DeliveryStatus::Denied
    )
}

/// §9.3 over `(required, status)`: denied items are withdrawn; the rest is judged.
pub fn outcome(items: &[(bool, DeliveryStatus)]) -> (Outcome, &'static str) {
    let remaining: Vec<DeliveryStatus> = items
        .iter()
        .filter(|(req, s)| *req && *s != DeliveryStatus::Denied)
        .map(|(_, s)| *s)
        .collect();
    let verified = remaining
        .iter()
        .filter(|s| **s == DeliveryStatus::Verified)
        .count();
    if remaining.is_empty() {
        (Outcome::Withdrawn, "outcome.withdrawn")
    } else if verified == remaining.len() {
        (Outcome::Succeeded, "outcome.succeeded")
    } else if verified > 0 {
        (Outcome::Partial, "outcome.partial")
    } else {
        (Outcome::Failed, "outcome.failed")
    }
}

/// §11.2, first match wins.
pub fn significance(
    outcome: Option<Outcome>,
    suspended: bool,
    needs_you: bool,
    irreversible_verified: bool,
) -> (Significance, &'static str) {
    if matches!(
        outcome,
        Some(Outcome::Failed | Outcome::Partial | Outcome::Missed)
    ) {
        (Significance::Failure, "significance.failure")
    } else if suspended || needs_you {
        (Significance::NeedsYou, "significance.needs_you")
    } else if irreversible_verified {
        (Significance::Notable, "significance.notable")
    } else {
        (Significance::Routine, "significance.routine")
    }
}

/// §11.1: (significance, presence) → route, one row per cell.
pub const ATTENTION: &[(Significance, Presence, Route)] = &[
    (Significance::Routine, Presence::Watching, Route::Inline),
    (Significance::Routine, Presence::Nearby, Route::Inbox),
    (Significance::Routine, Presence::Away, Route::Inbox),
    (Significance::Notable, Presence::Watching, Route::Inline),
    (Significance::Notable, Presence::Nearby, Route::Badge),
    (Significance::Notable, Presence::Away, Route::Notify),
    (Significance::NeedsYou, Presence::Watching, Route::Inline),
    (Significance::NeedsYou, Presence::Nearby, Route::Notify),
    (Significance::NeedsYou, Presence::Away, Route::Notify),
    (Significance::Failure, Presence::Watching, Route::Inline),
    (Significance::Failure, Presence::Nearby, Route::Notify),
    (Significance::Failure, Presence::Away, Route::Notify),
];

/// §11.1 + §11.3. Returns the route and whether quiet changed it. `None` if the table has
/// no cell (impossible with the table above; the caller reports a GAP instead of guessing).
pub fn attention(sig: Significance, presence: Presence, quiet: bool) -> Option<(Route, bool)> {
    let r = ATTENTION
        .iter()
        .find(|(s, p, _)| *s == sig && *p == presence)
        .map(|(_, _, r)| *r)?;
    // §11.3: quiet caps routine/notable at inbox; inline is no interruption (§11.3.1).
    let capped = quiet
        && matches!(sig, Significance::Routine | Significance::Notable)
        && matches!(r, Route::Badge | Route::Notify);
    Some(if capped {
        (Route::Inbox, true)
    } else {
        (r, false)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_has_every_cell_once() {
        for s in Significance::ALL {
            for p in Presence::ALL {
                let n = ATTENTION
                    .iter()
                    .filter(|(a, b, _)| *a == s && *b == p)
                    .count();
                assert_eq!(n, 1, "{s:?} {p:?}");
            }
        }
    }

    #[test]
    fn every_posture_input_has_a_rule() {
        for verb in Verb::ALL {
            for kind in DestinationKind::ALL {
                for capability in Capability::ALL {
                    for confidence in [Confidence::Low, Confidence::Medium, Confidence::High] {
                        for bits in 0..16u8 {
                            let f = PostureFacts {
                                verb,
                                kind,
                                capability,
                                confidence,
                                interactive: bits & 1 != 0,
                                clarify_used: bits & 2 != 0,
                                forbidden: bits & 4 != 0,
                                irreversible: bits & 8 != 0,
                            };
                            let (p, _) = posture(&f).expect("a rule applies");
                            if f.irreversible && p == Posture::Execute && verb != Verb::Draft {
                                assert_eq!(capability, Capability::Automatable);
                                assert!(!f.interactive);
                            }
                        }
                    }
                }
            }
        }
    }
}
