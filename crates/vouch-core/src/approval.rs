//! Approval cards a person can act on (§7): the reason in plain words, and the shown form of a
//! hash accepted back. Pure: the host supplies the facts and the candidate hashes.

use crate::capability::ActFacts;
use crate::manifest::{DestinationKind, Verb};
use crate::posture::Rule;

/// The shortest hash prefix accepted back: what `vouch run` and progress lines show.
pub const HASH_PREFIX_MIN_DIGITS: usize = 12;

/// Why a `confirm` card asks the person, in plain words: the cause, then the rule.
/// `destination` is the destination's human form (an address, a path).
pub fn confirm_reason(act: ActFacts, destination: &str, rule: Rule) -> String {
    let why = match (act.verb, act.kind) {
        (_, DestinationKind::Payment) => format!("a payment to {destination} cannot be taken back"),
        (_, DestinationKind::Repository) => {
            format!("moving {destination} changes it for everyone who shares the branch")
        }
        (Verb::Send, DestinationKind::Email) => "sending e-mail cannot be undone".to_string(),
        (Verb::Reply, DestinationKind::Email) => "a sent reply cannot be undone".to_string(),
        (Verb::Send, DestinationKind::Webhook) => {
            format!("a post to {destination} cannot be taken back")
        }
        (Verb::Send | Verb::Reply, _) => format!("sending to {destination} cannot be undone"),
        (Verb::Delete, _) => format!("deleting {destination} cannot be undone"),
        (Verb::Schedule, _) if act.has_other_attendees => {
            "the invitation reaches other people at once".to_string()
        }
        (Verb::Save, _) if act.overwrites_existing => format!("this overwrites {destination}"),
        _ => "this cannot be undone".to_string(),
    };
    format!(
        "{why} (rule {}: irreversible acts wait for your approval)",
        rule.as_str()
    )
}

/// Why a hash given back by a person matches no card, each with its own message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashMatchError {
    #[error("`{given}` is not a hash: use the hex digits shown by `vouch approvals`")]
    NotHex { given: String },
    #[error(
        "`{given}` is too short: give the full hash or at least {HASH_PREFIX_MIN_DIGITS} of its hex digits, as `vouch approvals` shows it"
    )]
    TooShort { given: String },
    #[error("`{given}` matches {count} hashes: give more of its digits")]
    Ambiguous { given: String, count: usize },
    #[error("`{given}` matches no hash")]
    NoMatch { given: String },
}

/// Resolve a full hash or a unique prefix of at least [`HASH_PREFIX_MIN_DIGITS`] hex digits
/// (case-insensitive) among `candidates`. Returns the matching candidate.
pub fn match_hash<'a>(given: &str, candidates: &[&'a str]) -> Result<&'a str, HashMatchError> {
    let g = given.trim().to_ascii_lowercase();
    let given = given.trim().to_string();
    if g.is_empty() || !g.chars().all(|c| c.is_ascii_hexdigit()) {
        return Err(HashMatchError::NotHex { given });
    }
    if let Some(exact) = candidates.iter().find(|c| c.eq_ignore_ascii_case(&g)) {
        return Ok(exact);
    }
    if g.len() < HASH_PREFIX_MIN_DIGITS {
        return Err(HashMatchError::TooShort { given });
    }
    let mut found: Vec<&'a str> = candidates
        .iter()
        .copied()
        .filter(|c| c.to_ascii_lowercase().starts_with(&g))
        .collect();
    found.dedup();
    match found.len() {
        0 => Err(HashMatchError::NoMatch { given }),
        1 => Ok(found[0]),
        count => Err(HashMatchError::Ambiguous { given, count }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn act(verb: Verb, kind: DestinationKind) -> ActFacts {
        ActFacts {
            verb,
            kind,
            has_other_attendees: false,
            overwrites_existing: false,
        }
    }

    #[test]
    fn reasons_say_the_cause_and_the_rule() {
        assert_eq!(
            confirm_reason(act(Verb::Send, DestinationKind::Email), "a@b.c", Rule::R9),
            "sending e-mail cannot be undone (rule R9: irreversible acts wait for your approval)"
        );
        let save = ActFacts {
            overwrites_existing: true,
            ..act(Verb::Save, DestinationKind::Folder)
        };
        assert!(confirm_reason(save, "Reports/q3.md", Rule::R9)
            .starts_with("this overwrites Reports/q3.md"));
        assert!(
            confirm_reason(act(Verb::Send, DestinationKind::Payment), "x", Rule::R9)
                .starts_with("a payment to x cannot be taken back")
        );
        assert!(
            confirm_reason(act(Verb::Delete, DestinationKind::Folder), "a.md", Rule::R9)
                .starts_with("deleting a.md")
        );
    }

    const H1: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const H2: &str = "0123456789abffff0123456789abcdef0123456789abcdef0123456789abcdef";

    #[test]
    fn the_shown_forms_are_accepted_and_the_rest_named() {
        let c = [H1, H2];
        assert_eq!(match_hash(H1, &c), Ok(H1));
        assert_eq!(match_hash(&H1.to_uppercase(), &c), Ok(H1));
        assert_eq!(match_hash("0123456789abcd", &c), Ok(H1));
        assert!(matches!(
            match_hash("0123456789ab", &c),
            Err(HashMatchError::Ambiguous { count: 2, .. })
        ));
        assert!(matches!(
            match_hash("0123456789a", &c),
            Err(HashMatchError::TooShort { .. })
        ));
        assert!(matches!(
            match_hash("sha256:0123", &c),
            Err(HashMatchError::NotHex { .. })
        ));
        assert!(matches!(
            match_hash("ffffffffffffff", &c),
            Err(HashMatchError::NoMatch { .. })
        ));
    }

    proptest! {
        #[test]
        fn every_prefix_of_twelve_or_more_finds_its_own_hash(n in 12usize..=64) {
            prop_assert_eq!(match_hash(&H1[..n], &[H1]), Ok(H1));
        }

        #[test]
        fn a_short_prefix_is_never_accepted(n in 1usize..12) {
            let too_short = matches!(match_hash(&H1[..n], &[H1]), Err(HashMatchError::TooShort { .. }));
            prop_assert!(too_short);
        }
    }
}
