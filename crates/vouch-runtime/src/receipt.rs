//! Receipts (§10): built from the journal alone, deterministically, with the core's wording.

use crate::view::RunView;
use vouch_core::receipt::{delivery_line, handoff_line, run_outcome_sentence, Handoff, LineInput};
use vouch_core::{DeliveryStatus, Outcome};

/// Render a run's receipt. `statuses` are the reconciled statuses (in manifest order).
pub fn render(
    run_id: &str,
    trigger: &str,
    view: &RunView,
    statuses: &[(String, DeliveryStatus)],
    outcome: Option<Outcome>,
    ended_by: Option<&str>,
    needs_you: &[String],
) -> String {
    let mut out = String::new();
    let title = if view.title.is_empty() {
        "(untitled run)"
    } else {
        view.title.as_str()
    };
    // The title is the person's or a trigger's text: one line, controls escaped (§10).
    out.push_str(&format!("Receipt · {}\n", vouch_core::escape_line(title)));
    out.push_str(&format!("run {run_id} · {trigger}\n"));
    let required: Vec<&(String, DeliveryStatus)> = statuses
        .iter()
        .filter(|(id, s)| {
            *s != DeliveryStatus::Denied
                && view
                    .manifest
                    .as_ref()
                    .and_then(|m| m.delivery(id))
                    .map(|d| d.required)
                    .unwrap_or(true)
        })
        .collect();
    let verified = required
        .iter()
        .filter(|(_, s)| *s == DeliveryStatus::Verified)
        .count();
    let handoff = handoff(trigger, view, ended_by);
    if view.manifest.is_none() && outcome == Some(Outcome::Failed) {
        // §3.4: nothing was declared; say why instead of "0 of 0".
        out.push_str("Outcome: Failed — the run declared nothing and delivered nothing\n");
    } else {
        out.push_str(&format!(
            "Outcome: {}\n",
            run_outcome_sentence(
                outcome,
                verified,
                required.len(),
                ended_by == Some("cancel"),
                handoff
            )
        ));
    }
    if let Some(l) = &view.loop_end {
        out.push_str(&format!(
            "Why it stopped: {}\n",
            vouch_core::receipt::scrub(&l.reason)
        ));
    } else if view.manifest.is_none()
        && outcome == Some(Outcome::Failed)
        && ended_by == Some("loop")
    {
        out.push_str("Why it stopped: the model ended without declaring anything to deliver\n");
    }
    if !view.corrupt.is_empty() {
        // §3.4.2: an entry that does not parse is never read as "nothing happened".
        let seqs: Vec<String> = view.corrupt.iter().map(|s| s.to_string()).collect();
        let (what, verb, pronoun) = if seqs.len() == 1 {
            ("an entry".to_string(), "does", "it")
        } else {
            (format!("{} entries", seqs.len()), "do", "they")
        };
        out.push_str(&format!(
            "The journal of this run has {what} that {verb} not parse (seq {}): what {pronoun} recorded is unknown; check the store with `vouch journal verify`\n",
            seqs.join(", ")
        ));
    }
    if let Some(note) = &view.missed_note {
        out.push_str(note);
        out.push('\n');
    }
    if !view.rejections.is_empty() {
        out.push_str("The request contradicted itself:\n");
        for r in &view.rejections {
            out.push_str(&format!(
                "  ! {}\n",
                vouch_core::receipt::scrub(&vouch_core::escape_line(r))
            ));
        }
    }
    if !statuses.is_empty() || handoff.is_some() {
        out.push('\n');
    }
    for (id, status) in statuses {
        out.push_str("  ");
        out.push_str(&line_for(view, id, *status));
        out.push('\n');
    }
    if let Some(h) = handoff {
        out.push_str("  ");
        out.push_str(handoff_line(h));
        out.push('\n');
    }
    decided_lines(&mut out, view, statuses);
    if !needs_you.is_empty() {
        out.push_str("\nNeeds you:\n");
        for id in needs_you {
            let status = statuses
                .iter()
                .find(|(i, _)| i == id)
                .map(|(_, s)| *s)
                .unwrap_or(DeliveryStatus::Unknown);
            let todo = match status {
                DeliveryStatus::Unknown => "check with the provider whether it went out; approve again only if it did not".to_string(),
                DeliveryStatus::Unconfirmed => "look at the provider's side to confirm it arrived".to_string(),
                DeliveryStatus::Drafted => draft_todo(view, id, run_id),
                DeliveryStatus::Awaiting => format!("decide: `vouch approvals`, then `vouch approve {run_id} {id} --hash …` or `vouch deny {run_id} {id}`"),
                _ => "look at it".to_string(),
            };
            out.push_str(&format!(
                "  • {id}: {}\n",
                vouch_core::receipt::scrub(&vouch_core::escape_line(&todo))
            ));
        }
    }
    if ended_by == Some("loop") && view.manifest.is_none() && outcome == Some(Outcome::Failed) {
        out.push_str(&format!(
            "\nNothing was done. To try again once the model answers: vouch resume {run_id}\n"
        ));
    }
    let interrupted = ended_by == Some("boot");
    if interrupted {
        let open = statuses.iter().any(|(_, s)| !s.is_settled()) || view.manifest.is_none();
        out.push_str("\nThe run was interrupted and reconciled at start-up.");
        if open {
            out.push_str(&format!(" To finish what is left: vouch resume {run_id}"));
        }
        out.push('\n');
    }
    let secs = (view.last_ms - view.first_ms).max(0) as f64 / 1000.0;
    let tokens = view.prompt_tokens + view.completion_tokens;
    out.push_str(&format!(
        "\n{} {} · {} {} · {:.1} s{}\n",
        view.turns,
        if view.turns == 1 { "turn" } else { "turns" },
        tokens,
        if tokens == 1 { "token" } else { "tokens" },
        secs,
        ended_by
            .map(|e| format!(" · ended by {e}"))
            .unwrap_or_default()
    ));
    // Reasons, destinations, evidence and connect steps come from models, payloads and
    // providers: no control or bidirectional character reaches a person (§10).
    vouch_core::escape_text(&out).into_owned()
}

/// What became of a task run's `result` item once it ended (§13.4.2, issue 22 #7); `None` for
/// other runs, patch attempts (their result is the host's evidence) and a run still waiting.
fn handoff(trigger: &str, view: &RunView, ended_by: Option<&str>) -> Option<Handoff> {
    if trigger != "task" || view.workspace || ended_by.is_none() {
        return None;
    }
    Some(if ended_by == Some("cancel") {
        Handoff::Cancelled
    } else if view.submit_accepted {
        Handoff::Accepted
    } else if view.submit_tried {
        Handoff::Refused
    } else {
        Handoff::Missing
    })
}

/// Why a delivery has its status, in plain words; an item the loop never reached says why the
/// loop stopped (a model error, a budget, the repair limit).
pub fn reason_for(view: &RunView, id: &str, status: DeliveryStatus) -> String {
    let iv = view.items.get(id);
    let reason = iv.map(|i| i.reason.clone()).unwrap_or_default();
    if !reason.is_empty() {
        return reason;
    }
    match (status, &view.loop_end) {
        (DeliveryStatus::NotAttempted | DeliveryStatus::Blocked, Some(l)) => {
            format!("the run stopped before it was attempted: {}", l.reason)
        }
        (DeliveryStatus::Unknown, _) if !view.corrupt.is_empty() => {
            "the journal entries that would say what happened do not parse".into()
        }
        (DeliveryStatus::NotAttempted, None) => "the run ended before it was attempted".into(),
        _ => String::new(),
    }
}

pub fn line_for(view: &RunView, id: &str, status: DeliveryStatus) -> String {
    let m = view.manifest.as_ref();
    let item = m.and_then(|m| m.delivery(id));
    let iv = view.items.get(id).cloned().unwrap_or_default();
    let (verb, kind, dest) = match item {
        Some(d) => (d.verb, d.destination.kind, d.destination.to_string()),
        None => (
            vouch_core::Verb::Write,
            vouch_core::DestinationKind::Surface,
            "surface".into(),
        ),
    };
    let dependency = m
        .map(|m| m.dependencies(id).join(", "))
        .filter(|s| !s.is_empty())
        .or(iv.blocked_on.clone())
        .unwrap_or_default();
    let reason = reason_for(view, id, status);
    // Each field stays on its line: a provider's reason with a line break cannot add a line.
    let one = |s: &str| vouch_core::escape_line(s).into_owned();
    let (dest, reason, evidence) = (one(&dest), one(&reason), one(&iv.evidence));
    let connect_step = one(iv.connect_step.as_deref().unwrap_or(""));
    let input = LineInput {
        id,
        verb,
        kind,
        destination: &dest,
        status,
        reason: &reason,
        dependency: &dependency,
        evidence: &evidence,
        connect_step: &connect_step,
    };
    delivery_line(&input)
}

/// Who decided (§17.1.1): one line per item whose decision journaled its principal, and one
/// for the answer to the run's question. Names are escaped; nothing here is a claim.
fn decided_lines(out: &mut String, view: &RunView, statuses: &[(String, DeliveryStatus)]) {
    let mut lines: Vec<String> = statuses
        .iter()
        .filter_map(|(id, _)| {
            let by = view.items.get(id)?.decided_by.as_deref()?;
            Some(format!("  • {id}: {by}"))
        })
        .collect();
    if let Some(by) = &view.answered_by {
        lines.push(format!("  • the question: answered by {by}"));
    }
    if !lines.is_empty() {
        out.push_str("\nDecided by:\n");
        for l in lines {
            out.push_str(&vouch_core::receipt::scrub(&l));
            out.push('\n');
        }
    }
}

/// What finishing a draft takes, whole (§9.5): where the draft is, what to connect, and the
/// command that then finishes it from its stored payload.
fn draft_todo(view: &RunView, id: &str, run_id: &str) -> String {
    let item = view.items.get(id);
    let step = item.and_then(|i| i.connect_step.as_deref());
    let at = item.and_then(|i| i.draft_path.as_deref());
    match (step, at) {
        (Some(s), Some(p)) => {
            format!("the draft is at {p}; to finish it, {s}, then `vouch resume {run_id}`")
        }
        (Some(s), None) => format!("{s}, then `vouch resume {run_id}`"),
        (None, Some(p)) => format!("the draft is at {p}: open it and finish it"),
        (None, None) => "open the draft and finish it".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::view::ItemView;

    /// Issue 11 #5: a provider's reason or a title with terminal escapes, a carriage return,
    /// a bidirectional override or a line break of its own cannot change what the receipt shows.
    #[test]
    fn text_from_providers_and_titles_is_escaped_and_stays_on_its_line() {
        let manifest: vouch_core::Manifest = serde_json::from_value(serde_json::json!({
            "deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": "http://x/\u{1b}[2J"}}]
        }))
        .expect("manifest");
        let mut view = RunView {
            manifest: Some(manifest),
            title: "Post\u{1b}]0;owned\u{7} \u{202e}txt.exe".into(),
            ..RunView::default()
        };
        view.items.insert(
            "d1".into(),
            ItemView {
                reason: "HTTP 500\n  ✓ d2  Sent to everyone\r\u{1b}[1A".into(),
                ..ItemView::default()
            },
        );
        let text = render(
            "r1",
            "interactive",
            &view,
            &[("d1".into(), DeliveryStatus::Failed)],
            Some(Outcome::Failed),
            Some("loop"),
            &[],
        );
        assert!(
            !text
                .chars()
                .any(|c| vouch_core::escape::needs_escape(c) && c != '\n'),
            "{text:?}"
        );
        assert!(
            !text.lines().any(|l| l.trim_start().starts_with("✓ d2")),
            "{text}"
        );
        assert!(
            text.contains("Receipt · Post\\x1b]0;owned\\x07 \\u{202e}txt.exe"),
            "{text}"
        );
        // Deterministic: the same view renders the same bytes.
        let again = render(
            "r1",
            "interactive",
            &view,
            &[("d1".into(), DeliveryStatus::Failed)],
            Some(Outcome::Failed),
            Some("loop"),
            &[],
        );
        assert_eq!(text, again);
    }

    /// Issue 22 #7: a task run's receipt shows its `result` item — accepted, handoff missing,
    /// refused, cancelled — and an accepted task run with no deliveries of its own never reads
    /// "Withdrawn — nothing was left to do".
    #[test]
    fn task_run_receipts_show_the_result_item() {
        use vouch_store::journal as j;
        use vouch_store::Event;
        let manifest: vouch_core::Manifest =
            serde_json::from_value(serde_json::json!({"deliveries": []})).expect("manifest");
        let submit = |ok: bool, call: &str| {
            Event::from(j::ToolCalled {
                call_id: call.into(),
                name: "submit".into(),
                ok,
                result: if ok { "accepted" } else { "malformed result" }.into(),
                repair: false,
            })
        };
        let with = |events: &[Event]| {
            let mut v = RunView {
                manifest: Some(manifest.clone()),
                ..RunView::default()
            };
            for e in events {
                v.apply_event(1, None, e);
            }
            v
        };
        let receipt = |v: &RunView, ended_by: &str| {
            render(
                "r",
                "task",
                v,
                &[],
                Some(Outcome::Withdrawn),
                Some(ended_by),
                &[],
            )
        };
        let accepted = receipt(&with(&[submit(false, "c1"), submit(true, "c2")]), "loop");
        assert!(accepted.contains("✓ result — accepted"), "{accepted}");
        assert!(!accepted.contains("nothing was left to do"), "{accepted}");
        assert!(
            accepted.contains("Outcome: Result handed over"),
            "{accepted}"
        );
        let refused = receipt(&with(&[submit(false, "c1")]), "loop");
        assert!(refused.contains("✗ result — refused"), "{refused}");
        let missing = receipt(&with(&[]), "loop");
        assert!(missing.contains("✗ result — handoff missing"), "{missing}");
        // A submit rejected before the manifest never reached the tool.
        let early = with(&[
            Event::from(j::ProposalRejected {
                code: "no_manifest".into(),
                reason: "declare first".into(),
                call_id: "c0".into(),
                tool: Some("submit".into()),
                dependency: None,
            }),
            submit(false, "c0"),
        ]);
        assert!(receipt(&early, "loop").contains("handoff missing"));
        let cancelled = receipt(&with(&[submit(true, "c1")]), "cancel");
        assert!(cancelled.contains("✗ result — cancelled"), "{cancelled}");
        assert!(cancelled.contains("Outcome: Cancelled"), "{cancelled}");
        // Other runs have no result item.
        let plain = render(
            "r",
            "interactive",
            &with(&[]),
            &[],
            Some(Outcome::Withdrawn),
            Some("loop"),
            &[],
        );
        assert!(!plain.contains("result —"), "{plain}");
    }
}
