//! The contract's terms in plain words for a person (issue 28): each page shows the plain
//! words with the term beside it, so a person reads "needs your approval" and can still look
//! up `confirm` in the contract. The words are a table here, the terms come from the core.

use maud::{html, Markup};
use vouch_core::{DeliveryStatus, Outcome, Posture, RunState, TriggerKind};

pub fn posture(p: Posture) -> &'static str {
    match p {
        Posture::Answer => "answers in words",
        Posture::Clarify => "asks you first",
        Posture::Draft => "drafts only",
        Posture::Confirm => "needs your approval",
        Posture::Execute => "will run",
        Posture::Decline => "will not run",
    }
}

pub fn status(s: DeliveryStatus) -> &'static str {
    match s {
        DeliveryStatus::Verified => "done, and checked",
        DeliveryStatus::Unconfirmed => "sent, not yet confirmed",
        DeliveryStatus::Unknown => "unknown: check with the provider",
        DeliveryStatus::Failed => "failed",
        DeliveryStatus::Drafted => "drafted, not sent",
        DeliveryStatus::Awaiting => "waiting for your approval",
        DeliveryStatus::Denied => "you denied it",
        DeliveryStatus::Declined => "declined by the host",
        DeliveryStatus::Blocked => "blocked by another item",
        DeliveryStatus::NotAttempted => "not attempted",
        DeliveryStatus::RefusedMismatch => "refused: payload changed",
    }
}

pub fn state(s: RunState) -> &'static str {
    match s {
        RunState::Created => "starting",
        RunState::Declaring => "planning",
        RunState::Running => "running",
        RunState::Suspended => "waiting",
        RunState::Ended => "ended",
    }
}

pub fn outcome(o: Outcome) -> &'static str {
    match o {
        Outcome::Succeeded => "succeeded",
        Outcome::Partial => "partly done",
        Outcome::Failed => "did not succeed",
        Outcome::Withdrawn => "withdrawn",
        Outcome::Missed => "missed its slot",
    }
}

pub fn trigger(t: TriggerKind) -> &'static str {
    match t {
        TriggerKind::Interactive => "asked by you",
        TriggerKind::Scheduled => "on a schedule",
        TriggerKind::Event => "on an event",
        TriggerKind::Task => "a board task",
    }
}

/// A capability level as the API words it (`needs_setup`), in plain words.
pub fn capability(term: &str) -> &'static str {
    match term {
        "unavailable" => "not available",
        "needs_setup" => "needs setting up",
        "readable" => "can read only",
        "draftable" => "can draft only",
        "executable" => "can do it",
        "automatable" => "can do it unattended",
        _ => "unknown",
    }
}

/// Plain words with the contract's term beside them, unless they are the same.
pub fn with_term(words: &str, term: &str) -> Markup {
    html! {
        span.plain { (words) }
        @if words != term { " " code.term title="the contract's term" { (term) } }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every term has its own words: two terms never read the same to a person.
    #[test]
    fn no_two_terms_share_their_plain_words() {
        let mut seen = std::collections::BTreeSet::new();
        for p in Posture::ALL {
            assert!(seen.insert(posture(p)), "{p:?}");
        }
        let mut seen = std::collections::BTreeSet::new();
        for s in DeliveryStatus::ALL {
            assert!(seen.insert(status(s)), "{s:?}");
        }
    }
}
