//! Delivery statuses (§6.1) and the run outcome (§9.3).

use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeliveryStatus {
    Verified,
    Unconfirmed,
    Unknown,
    Failed,
    Drafted,
    Awaiting,
    Denied,
    Declined,
    Blocked,
    NotAttempted,
    RefusedMismatch,
}

impl DeliveryStatus {
    pub const ALL: [DeliveryStatus; 11] = [
        DeliveryStatus::Verified,
        DeliveryStatus::Unconfirmed,
        DeliveryStatus::Unknown,
        DeliveryStatus::Failed,
        DeliveryStatus::Drafted,
        DeliveryStatus::Awaiting,
        DeliveryStatus::Denied,
        DeliveryStatus::Declined,
        DeliveryStatus::Blocked,
        DeliveryStatus::NotAttempted,
        DeliveryStatus::RefusedMismatch,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            DeliveryStatus::Verified => "verified",
            DeliveryStatus::Unconfirmed => "unconfirmed",
            DeliveryStatus::Unknown => "unknown",
            DeliveryStatus::Failed => "failed",
            DeliveryStatus::Drafted => "drafted",
            DeliveryStatus::Awaiting => "awaiting",
            DeliveryStatus::Denied => "denied",
            DeliveryStatus::Declined => "declined",
            DeliveryStatus::Blocked => "blocked",
            DeliveryStatus::NotAttempted => "not_attempted",
            DeliveryStatus::RefusedMismatch => "refused_mismatch",
        }
    }

    /// Settled items are never performed again (§6); a continuation carries them over (§9.2).
    pub fn is_settled(self) -> bool {
        matches!(
            self,
            DeliveryStatus::Verified
                | DeliveryStatus::Unknown
                | DeliveryStatus::Unconfirmed
                | DeliveryStatus::Denied
                | DeliveryStatus::Declined
        )
    }

    /// Statuses that put the item on the receipt's `needs_you` list (§9.3), given whether
    /// a drafted item carries a connect step (capability `needs_setup`).
    pub fn needs_person(self, draft_has_connect_step: bool) -> bool {
        match self {
            DeliveryStatus::Unknown | DeliveryStatus::Unconfirmed => true,
            DeliveryStatus::Drafted => draft_has_connect_step,
            _ => false,
        }
    }
}

impl fmt::Display for DeliveryStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    Succeeded,
    Partial,
    Failed,
    Withdrawn,
    Missed,
}

impl Outcome {
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Succeeded => "succeeded",
            Outcome::Partial => "partial",
            Outcome::Failed => "failed",
            Outcome::Withdrawn => "withdrawn",
            Outcome::Missed => "missed",
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// §9.3. `items` is `(required, status)` per delivery. `missed` is decided by the caller
/// (a slot that never ran has no deliveries to judge). The model's text is not an input.
pub fn outcome(items: &[(bool, DeliveryStatus)]) -> Outcome {
    let remaining: Vec<DeliveryStatus> = items
        .iter()
        .filter(|(required, status)| *required && *status != DeliveryStatus::Denied)
        .map(|(_, s)| *s)
        .collect();
    if remaining.is_empty() {
        return Outcome::Withdrawn;
    }
    let verified = remaining
        .iter()
        .filter(|s| **s == DeliveryStatus::Verified)
        .count();
    if verified == remaining.len() {
        Outcome::Succeeded
    } else if verified > 0 {
        Outcome::Partial
    } else {
        Outcome::Failed
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use DeliveryStatus::*;

    #[test]
    fn outcome_cases() {
        assert_eq!(outcome(&[(true, Verified)]), Outcome::Succeeded);
        assert_eq!(
            outcome(&[(true, Verified), (true, Unknown)]),
            Outcome::Partial
        );
        assert_eq!(outcome(&[(true, Failed)]), Outcome::Failed);
        assert_eq!(outcome(&[(true, Denied)]), Outcome::Withdrawn);
        assert_eq!(outcome(&[]), Outcome::Withdrawn);
        assert_eq!(
            outcome(&[(true, Verified), (false, Failed)]),
            Outcome::Succeeded
        );
        assert_eq!(
            outcome(&[(true, Verified), (true, Denied)]),
            Outcome::Succeeded
        );
        assert_eq!(outcome(&[(false, Verified)]), Outcome::Withdrawn);
    }

    #[test]
    fn settled_and_needs_you() {
        let settled: Vec<_> = DeliveryStatus::ALL
            .iter()
            .filter(|s| s.is_settled())
            .collect();
        assert_eq!(
            settled,
            vec![&Verified, &Unconfirmed, &Unknown, &Denied, &Declined]
        );
        assert!(Unknown.needs_person(false));
        assert!(Unconfirmed.needs_person(false));
        assert!(Drafted.needs_person(true));
        assert!(!Drafted.needs_person(false));
        for s in DeliveryStatus::ALL {
            if !matches!(s, Unknown | Unconfirmed | Drafted) {
                assert!(!s.needs_person(true), "{s}");
            }
        }
    }

    proptest! {
        #[test]
        fn succeeded_iff_all_remaining_verified(items in proptest::collection::vec((any::<bool>(), 0..11usize), 0..8)) {
            let items: Vec<(bool, DeliveryStatus)> = items.into_iter().map(|(r, s)| (r, DeliveryStatus::ALL[s])).collect();
            let o = outcome(&items);
            let rem: Vec<_> = items.iter().filter(|(r, s)| *r && *s != Denied).collect();
            prop_assert_eq!(o == Outcome::Succeeded, !rem.is_empty() && rem.iter().all(|(_, s)| *s == Verified));
            prop_assert_eq!(o == Outcome::Withdrawn, rem.is_empty());
        }
    }
}
