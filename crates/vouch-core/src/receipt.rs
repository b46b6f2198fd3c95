//! Receipt wording (§10) as one table of data, and the pure receipt renderer.
//!
//! Invariant (I6): a claim word appears only in the line of a `verified` delivery.

use crate::manifest::{DestinationKind, Verb};
use crate::status::{DeliveryStatus, Outcome};

/// The claim words of I6 and their common synonyms, lower case.
pub const CLAIM_WORDS: &[&str] = &[
    "sent",
    "replied",
    "scheduled",
    "deleted",
    "posted",
    "paid",
    "saved",
    "delivered",
    "emailed",
    "booked",
    "published",
    "transferred",
    "uploaded",
    "mailed",
    "removed",
    "stored",
];

/// Wording per status. `{reason}` and `{dependency}` are filled by the renderer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wording {
    pub status: DeliveryStatus,
    pub text: &'static str,
}

/// §10: one line per status. `verified` is verb-specific, see [`claim_phrase`].
pub const WORDING: &[Wording] = &[
    Wording { status: DeliveryStatus::Verified, text: "{claim}" },
    Wording { status: DeliveryStatus::Unconfirmed, text: "Prepared; the provider did not confirm it — here it is" },
    Wording { status: DeliveryStatus::Unknown, text: "Can't confirm whether it went out — check before retrying; it will not be retried automatically" },
    Wording { status: DeliveryStatus::Failed, text: "Failed: {reason} — it did not go out" },
    Wording { status: DeliveryStatus::Drafted, text: "Drafted, not executed" },
    Wording { status: DeliveryStatus::Awaiting, text: "Waiting for you: {reason}" },
    Wording { status: DeliveryStatus::Denied, text: "Withdrawn at your request" },
    Wording { status: DeliveryStatus::Declined, text: "Not done: {reason}" },
    Wording { status: DeliveryStatus::Blocked, text: "Held back: waits for {dependency}" },
    Wording { status: DeliveryStatus::NotAttempted, text: "Not done: {reason}" },
    Wording { status: DeliveryStatus::RefusedMismatch, text: "Stopped: the content changed after you approved it" },
];

/// The claim phrase of a verified delivery, by verb and destination kind.
pub fn claim_phrase(verb: Verb, kind: DestinationKind) -> &'static str {
    match (verb, kind) {
        (_, DestinationKind::Payment) => "Paid to",
        (Verb::Send, DestinationKind::Email) => "Sent to",
        (Verb::Send, DestinationKind::Webhook) => "Posted to",
        (Verb::Send, _) => "Delivered to",
        (Verb::Reply, _) => "Replied to",
        (Verb::Save, _) => "Saved to",
        (Verb::Draft, _) => "Draft saved to",
        (Verb::Schedule, _) => "Scheduled on",
        (Verb::Delete, _) => "Deleted from",
        (Verb::Write, _) => "Delivered to",
        (Verb::Show, _) => "Delivered to",
    }
}

/// Free text from providers or policies must never smuggle a claim word into a
/// non-verified line: such words are masked.
pub fn scrub(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if CLAIM_WORDS.contains(&word.to_lowercase().as_str()) {
            out.push_str("[…]");
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_alphanumeric() {
            word.push(c);
        } else {
            flush(&mut word, &mut out);
            out.push(c);
        }
    }
    flush(&mut word, &mut out);
    out
}

/// Does `text` contain a claim word (case-insensitive, whole words)?
pub fn has_claim_word(text: &str) -> bool {
    text.split(|c: char| !c.is_alphanumeric())
        .any(|w| CLAIM_WORDS.contains(&w.to_lowercase().as_str()))
}

/// One delivery's line on a receipt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineInput<'a> {
    pub id: &'a str,
    pub verb: Verb,
    pub kind: DestinationKind,
    /// Human form of the destination (already free of claim words or quoted by the caller).
    pub destination: &'a str,
    pub status: DeliveryStatus,
    pub reason: &'a str,
    pub dependency: &'a str,
    /// Evidence reference, e.g. `sha256:ab12…` or a Message-ID.
    pub evidence: &'a str,
    /// The connect step of a `needs_setup` draft.
    pub connect_step: &'a str,
}

/// The wording of one status, filled in.
pub fn status_words(l: &LineInput<'_>) -> String {
    let text = WORDING
        .iter()
        .find(|w| w.status == l.status)
        .map(|w| w.text)
        .unwrap_or("Not done");
    if l.status == DeliveryStatus::Verified {
        return format!("{} {}", claim_phrase(l.verb, l.kind), l.destination);
    }
    let reason = if l.reason.is_empty() {
        "no reason recorded".to_string()
    } else {
        scrub(l.reason)
    };
    let mut s = text
        .replace("{reason}", &reason)
        .replace("{dependency}", &scrub(l.dependency));
    if l.status == DeliveryStatus::Drafted && !l.connect_step.is_empty() {
        s.push_str(&format!(" — to finish: {}", scrub(l.connect_step)));
    }
    s
}

pub fn status_mark(s: DeliveryStatus) -> &'static str {
    match s {
        DeliveryStatus::Verified => "✓",
        DeliveryStatus::Unconfirmed | DeliveryStatus::Unknown | DeliveryStatus::Awaiting => "?",
        DeliveryStatus::Drafted => "✎",
        DeliveryStatus::Denied | DeliveryStatus::Declined => "–",
        _ => "✗",
    }
}

/// `✓ d1  save → folder Briefs/x.md — Saved to folder Briefs/x.md  [sha256:ab12…]`
pub fn delivery_line(l: &LineInput<'_>) -> String {
    let mut s = format!(
        "{} {}  {} → {} — {}",
        status_mark(l.status),
        l.id,
        l.verb,
        l.destination,
        status_words(l)
    );
    if l.status == DeliveryStatus::Verified && !l.evidence.is_empty() {
        s.push_str(&format!("  [{}]", l.evidence));
    }
    s
}

pub fn outcome_sentence(o: Option<Outcome>, verified: usize, total: usize) -> String {
    match o {
        None => "Waiting for you".to_string(),
        Some(Outcome::Succeeded) => format!("Succeeded — {verified} of {total} verified"),
        Some(Outcome::Partial) => format!("Partial — {verified} of {total} verified"),
        Some(Outcome::Failed) => format!("Failed — {verified} of {total} verified"),
        Some(Outcome::Withdrawn) => "Withdrawn — nothing was left to do".to_string(),
        Some(Outcome::Missed) => "Missed — the scheduled slot never ran".to_string(),
    }
}

/// What became of a task run's implied `result` item (§13.4.2), as its receipt says it
/// (issue 22 #7): the run ends before the board answers, so this is the run's own side of the
/// handoff; the board's record (`vouch task show`) says whether it was accepted there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handoff {
    /// The `submit` tool took a valid result.
    Accepted,
    /// Nothing reached the `submit` tool.
    Missing,
    /// Results reached the tool, none of them valid.
    Refused,
    /// The task was cancelled: nothing is handed over, whatever was submitted.
    Cancelled,
}

/// The receipt line of a task run's `result` item. No claim word (I6): the board, not the
/// run, verifies the result.
pub fn handoff_line(h: Handoff) -> &'static str {
    match h {
        Handoff::Accepted => "✓ result — accepted: a valid result was handed to the board",
        Handoff::Missing => {
            "✗ result — handoff missing: the run ended without submitting its result"
        }
        Handoff::Refused => {
            "✗ result — refused: no submission was valid, and the repairs are spent"
        }
        Handoff::Cancelled => "✗ result — cancelled: nothing was handed over",
    }
}

/// The outcome line of a run: a cancel says so, and a task run with nothing of its own to
/// deliver says what became of its result instead of "nothing was left to do" (issue 22 #5,
/// #7).
pub fn run_outcome_sentence(
    o: Option<Outcome>,
    verified: usize,
    total: usize,
    cancelled: bool,
    handoff: Option<Handoff>,
) -> String {
    match (o, handoff) {
        (Some(Outcome::Withdrawn), _) if cancelled => {
            "Cancelled — nothing more was done after the cancel".to_string()
        }
        (Some(Outcome::Withdrawn), Some(Handoff::Accepted)) if total == 0 => {
            "Result handed over — the run had nothing of its own to deliver".to_string()
        }
        (Some(Outcome::Withdrawn), Some(_)) if total == 0 => {
            "No result handed over — the run had nothing of its own to deliver".to_string()
        }
        _ if cancelled && o.is_some() => format!(
            "{} · cancelled: nothing more was done after the cancel",
            outcome_sentence(o, verified, total)
        ),
        _ => outcome_sentence(o, verified, total),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn an_accepted_task_run_never_reads_withdrawn() {
        let s = |c, h| run_outcome_sentence(Some(Outcome::Withdrawn), 0, 0, c, h);
        assert_eq!(
            s(false, Some(Handoff::Accepted)),
            "Result handed over — the run had nothing of its own to deliver"
        );
        for h in [Handoff::Missing, Handoff::Refused] {
            assert!(s(false, Some(h)).starts_with("No result handed over"));
        }
        assert!(s(true, Some(Handoff::Cancelled)).starts_with("Cancelled"));
        assert!(s(true, None).starts_with("Cancelled"));
        assert_eq!(s(false, None), "Withdrawn — nothing was left to do");
        let partial = run_outcome_sentence(Some(Outcome::Partial), 1, 2, true, None);
        assert!(partial.starts_with("Partial — 1 of 2") && partial.contains("cancelled"));
        for h in [
            Handoff::Accepted,
            Handoff::Missing,
            Handoff::Refused,
            Handoff::Cancelled,
        ] {
            assert!(!has_claim_word(handoff_line(h)), "{h:?}");
        }
    }

    fn line(status: DeliveryStatus, verb: Verb, kind: DestinationKind, reason: &str) -> String {
        delivery_line(&LineInput {
            id: "d1",
            verb,
            kind,
            destination: "Briefs/today.md",
            status,
            reason,
            dependency: "d0",
            evidence: "sha256:abcd",
            connect_step: "run `vouch doctor` and connect e-mail",
        })
    }

    #[test]
    fn table_covers_every_status_once() {
        for s in DeliveryStatus::ALL {
            assert_eq!(WORDING.iter().filter(|w| w.status == s).count(), 1, "{s}");
        }
    }

    #[test]
    fn claim_words_only_on_verified_lines() {
        for s in DeliveryStatus::ALL {
            for v in Verb::ALL {
                for k in DestinationKind::ALL {
                    let l = line(s, v, k, "server said: message delivered? no, sent back");
                    assert_eq!(
                        has_claim_word(&l),
                        s == DeliveryStatus::Verified,
                        "{s} {v} {k}: {l}"
                    );
                }
            }
        }
    }

    #[test]
    fn wording_examples() {
        assert_eq!(
            line(
                DeliveryStatus::Verified,
                Verb::Send,
                DestinationKind::Email,
                ""
            ),
            "✓ d1  send → Briefs/today.md — Sent to Briefs/today.md  [sha256:abcd]"
        );
        assert!(line(
            DeliveryStatus::Failed,
            Verb::Send,
            DestinationKind::Email,
            "550 no such user"
        )
        .contains("Failed: 550 no such user — it did not go out"));
        assert!(line(
            DeliveryStatus::Blocked,
            Verb::Send,
            DestinationKind::Email,
            ""
        )
        .contains("Held back: waits for d0"));
        assert!(line(
            DeliveryStatus::Drafted,
            Verb::Send,
            DestinationKind::Email,
            ""
        )
        .contains("to finish: run `vouch doctor`"));
    }

    proptest! {
        #[test]
        fn no_reason_can_smuggle_a_claim(reason in "[a-zA-Z ,.:]{0,40}", s in 1..11usize) {
            let st = DeliveryStatus::ALL[s];
            let l = line(st, Verb::Send, DestinationKind::Email, &format!("{reason} SENT paid"));
            prop_assert!(!has_claim_word(&l), "{}", l);
        }
    }
}
