//! The state of a run as the journal tells it. Pure: a fold over journal entries.
//! Statuses come only from evidence events (I2); the model's text is kept but never read
//! by the status computation.

use serde_json::Value;
use std::collections::BTreeMap;
use vouch_core::{Capability, DeliveryStatus, Manifest, Posture};
use vouch_store::journal::{self, ProviderReply, Terminal};
use vouch_store::{Event, JournalEntry};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ItemView {
    pub posture: Option<Posture>,
    pub rule: Option<String>,
    pub capability: Option<Capability>,
    pub irreversible: bool,
    pub connect_step: Option<String>,
    /// Set by evidence, denial, or a declining preflight.
    pub status: Option<DeliveryStatus>,
    pub reason: String,
    pub evidence: String,
    /// An attempt started and no evidence followed (yet).
    pub open_attempt: Option<OpenAttempt>,
    pub awaiting: bool,
    /// An approved card whose payload has not been attempted yet.
    pub granted: Option<String>,
    pub card_hash: Option<String>,
    /// The hash the person approved for this item (kept after the attempt starts).
    pub approved: Option<String>,
    /// A proposal was refused because an order dependency was not verified.
    pub blocked_on: Option<String>,
    pub carried: bool,
    /// The hash of the payload stored as this item's draft (§9.5: finishing a draft executes
    /// exactly it).
    pub draft_hash: Option<String>,
    /// Where that draft was written, as its `drafted` event names it.
    pub draft_path: Option<String>,
    /// The person's last decision on this item and who took it ("approved by laptop (person
    /// token, http)"), when the decision journaled its principal (§17.1.1).
    pub decided_by: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct OpenAttempt {
    /// False when only the ledger intent is journaled (the provider was not called yet).
    pub started: bool,
    pub payload_hash: String,
    pub payload: Value,
    pub key: Option<String>,
    pub reply: Option<ProviderReply>,
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct RunView {
    pub manifest: Option<Manifest>,
    pub implied: bool,
    pub rejections: Vec<String>,
    pub items: BTreeMap<String, ItemView>,
    pub clarify_used: bool,
    pub clarify_open: bool,
    pub clarify_answer: Option<String>,
    /// Who answered the run's question, when the answer journaled its principal.
    pub answered_by: Option<String>,
    pub suspended: bool,
    /// Turns begun, and turns whose every tool call has a journaled result.
    pub turns: usize,
    pub turns_complete: usize,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub failed_tool_calls: usize,
    /// Tool calls with a journaled result, failed or not.
    pub tool_calls: usize,
    /// Calls whose arguments were malformed and returned to the model to repair.
    pub repairs: u32,
    pub final_text: Option<String>,
    pub first_ms: i64,
    pub last_ms: i64,
    pub terminal: Option<Terminal>,
    pub title: String,
    pub pending_calls: Vec<String>,
    /// For a continuation: the parent's completed turns (the script resumes there).
    pub turn_offset: usize,
    /// For a missed slot: which slot, said plainly on the receipt.
    pub missed_note: Option<String>,
    /// Why the agent loop stopped without the work (a model error, a budget, the repair
    /// limit), if it did.
    pub loop_end: Option<LoopEnd>,
    /// Journal entries (seq) whose body does not parse as its kind's type (§3.4.2).
    pub corrupt: Vec<i64>,
    /// A task run's `submit` calls (§13.4.2): the tool took a valid result / a result reached
    /// the tool at all. A call rejected before the manifest, or not run (the run suspended or
    /// was cancelled), never reached it.
    pub submit_accepted: bool,
    pub submit_tried: bool,
    /// Calls of `submit` rejected before the manifest (§3.4).
    pub submit_rejected: Vec<String>,
    /// A patch attempt's run (§14): its result is the host's evidence, not a submission.
    pub workspace: bool,
}

/// The agent loop stopped without the work (journal `loop_ended`).
#[derive(Debug, Clone, PartialEq)]
pub struct LoopEnd {
    /// `model_error`, `turn_budget`, `token_budget` or `repair_limit`.
    pub cause: String,
    /// In plain words, e.g. "the model could not be reached after 4 attempts: …".
    pub reason: String,
}

impl RunView {
    pub fn from_journal(entries: &[JournalEntry]) -> RunView {
        let mut v = RunView::default();
        for e in entries {
            v.apply(e);
        }
        v
    }

    /// Fold one more journal entry into the view. Folding a journal entry by entry from any
    /// prefix's view gives the same view as folding it whole, so a drive can keep its view
    /// current by applying each event it appends instead of re-reading the journal.
    ///
    /// A body that does not parse as its kind's type is corrupt (§3.4.2): the entry is
    /// recorded in `corrupt`, and what it could have settled becomes `unknown` — never
    /// "not attempted".
    pub fn apply(&mut self, e: &JournalEntry) {
        let parsed = Event::parse(e.kind, &e.body);
        self.apply_parsed(e.seq, e.at_ms, e.delivery.as_deref(), parsed.as_ref());
    }

    /// A run's view from its journal read as typed events ([`vouch_store::Store::journal_events`]);
    /// the same view as [`RunView::from_journal`] of the same journal.
    pub fn from_events(entries: &[vouch_store::EventEntry]) -> RunView {
        let mut v = RunView::default();
        for e in entries {
            v.apply_parsed(e.seq, e.at_ms, e.delivery.as_deref(), e.event.as_ref());
        }
        v
    }

    fn apply_parsed(
        &mut self,
        seq: i64,
        at_ms: i64,
        delivery: Option<&str>,
        parsed: Result<&Event, &vouch_store::BodyError>,
    ) {
        match parsed {
            Ok(ev) => self.apply_event(at_ms, delivery, ev),
            Err(err) => {
                self.touch(at_ms);
                self.corrupt.push(seq);
                if let Some(d) = delivery {
                    let it = self.item(d);
                    it.open_attempt = None;
                    it.awaiting = false;
                    it.granted = None;
                    it.status = Some(DeliveryStatus::Unknown);
                    it.reason = format!("journal entry {seq} does not parse ({err})");
                }
            }
        }
    }

    /// Fold one typed event (the drive applies what it appends without parsing it back).
    pub fn apply_event(&mut self, at_ms: i64, delivery: Option<&str>, ev: &Event) {
        self.touch(at_ms);
        self.apply_body(delivery.unwrap_or(""), ev);
    }

    fn touch(&mut self, at_ms: i64) {
        if self.first_ms == 0 {
            self.first_ms = at_ms;
        }
        self.last_ms = at_ms;
    }

    pub fn item(&mut self, id: &str) -> &mut ItemView {
        self.items.entry(id.to_string()).or_default()
    }

    fn apply_body(&mut self, d: &str, ev: &Event) {
        match ev {
            Event::RunCreated(b) => self.title = b.title.clone(),
            Event::Turn(b) => {
                self.turns += 1;
                let calls: Vec<String> = b.tool_calls.iter().map(|c| c.id.clone()).collect();
                if calls.is_empty() {
                    self.turns_complete = self.turns;
                    if let Some(t) = &b.content {
                        self.final_text = Some(t.clone());
                    }
                }
                self.pending_calls = calls;
                if let Some(u) = &b.usage {
                    self.prompt_tokens += u.prompt_tokens;
                    self.completion_tokens += u.completion_tokens;
                }
            }
            Event::ToolCalled(b) => {
                self.pending_calls.retain(|c| *c != b.call_id);
                if self.pending_calls.is_empty() {
                    self.turns_complete = self.turns;
                }
                self.tool_calls += 1;
                self.repairs += u32::from(b.repair);
                if !b.ok {
                    self.failed_tool_calls += 1;
                }
                let reached = !self.submit_rejected.contains(&b.call_id)
                    && (b.ok || !b.result.starts_with("not run:"));
                if b.name == "submit" && reached {
                    self.submit_tried = true;
                    self.submit_accepted |= b.ok;
                }
            }
            Event::ManifestDeclared(journal::ManifestDeclared { manifest: m, .. })
            | Event::ManifestImplied(journal::ManifestImplied { manifest: m }) => {
                for item in &m.deliveries {
                    self.item(&item.id);
                }
                self.manifest = Some(m.clone());
                if matches!(ev, Event::ManifestImplied(_)) {
                    self.implied = true;
                }
            }
            Event::ManifestRejected(b) => {
                self.rejections.extend(b.errors.iter().cloned());
                let reason = b
                    .reason
                    .clone()
                    .unwrap_or_else(|| "the manifest contradicts itself".to_string());
                for id in &b.declined {
                    let it = self.item(id);
                    it.status = Some(DeliveryStatus::Declined);
                    it.posture = Some(Posture::Decline);
                    it.reason = reason.clone();
                }
            }
            Event::Preflight(b) => {
                let it = self.item(d);
                it.posture = Some(b.posture);
                it.rule = b.rule.clone();
                it.capability = b.capability;
                it.irreversible = b.irreversible;
                it.connect_step = b.connect_step.clone();
                if it.posture == Some(Posture::Decline) && it.status.is_none() {
                    it.status = Some(DeliveryStatus::Declined);
                    it.reason = b.reason.clone().unwrap_or_default();
                }
            }
            Event::ProposalRejected(b) => {
                if b.tool.as_deref() == Some("submit") {
                    self.submit_rejected.push(b.call_id.clone());
                }
                if !d.is_empty() && b.code == "blocked" {
                    let it = self.item(d);
                    it.blocked_on = Some(b.dependency.clone().unwrap_or_default());
                }
            }
            Event::ClarifyAsked(_) => {
                self.clarify_used = true;
                self.clarify_open = true;
            }
            Event::ClarifyAnswered(b) => {
                self.clarify_open = false;
                self.clarify_answer = Some(b.answer.clone());
                self.answered_by = b.by.as_ref().map(|p| p.describe());
            }
            Event::ApprovalRequested(b) => {
                let it = self.item(d);
                it.awaiting = true;
                it.card_hash = Some(b.payload_hash.clone());
                it.granted = None;
                it.approved = None;
            }
            Event::ApprovalSuperseded(b) => {
                if let Some(by) = &b.by {
                    self.item(d).decided_by = Some(format!("edited by {}", by.describe()));
                }
            }
            Event::ApprovalGranted(b) => {
                let it = self.item(d);
                if let Some(by) = &b.by {
                    it.decided_by = Some(format!("approved by {}", by.describe()));
                }
                it.awaiting = false;
                it.granted = Some(b.payload_hash.clone());
                it.approved = Some(b.payload_hash.clone());
            }
            Event::ApprovalDenied(b) => {
                let it = self.item(d);
                if let Some(by) = &b.by {
                    it.decided_by = Some(format!("denied by {}", by.describe()));
                }
                it.awaiting = false;
                it.status = Some(DeliveryStatus::Denied);
            }
            Event::Drafted(b) => {
                let h = &b.payload_hash;
                let it = self.item(d);
                it.draft_hash = (!h.is_empty()).then(|| h.clone());
                it.draft_path = Some(b.path.clone());
            }
            Event::LedgerIntent(b) => {
                // The intent is durable before the provider is called: from here a crash
                // leaves the act in doubt (§8.3) until evidence settles it.
                let it = self.item(d);
                it.open_attempt = Some(OpenAttempt {
                    started: false,
                    payload_hash: b.payload_hash.clone(),
                    payload: b.payload.clone(),
                    key: Some(b.key.clone()),
                    reply: None,
                });
            }
            Event::AttemptStarted(b) => {
                let it = self.item(d);
                it.granted = None;
                it.open_attempt = Some(OpenAttempt {
                    started: true,
                    payload_hash: b.payload_hash.clone(),
                    payload: b.payload.clone(),
                    key: b.key.clone(),
                    reply: None,
                });
            }
            Event::AttemptFinished(b) => {
                if let Some(a) = self.item(d).open_attempt.as_mut() {
                    a.reply = Some(b.reply.clone());
                }
            }
            Event::Evidence(b) => {
                let it = self.item(d);
                it.open_attempt = None;
                it.granted = None;
                it.awaiting = false;
                it.status = Some(b.status);
                it.evidence = b.evidence.clone();
                it.reason = b.reason.clone();
                it.carried = b.carried_from.is_some();
                if let Some(p) = b.posture {
                    it.posture = Some(p);
                }
            }
            Event::Suspended(_) => self.suspended = true,
            Event::Resumed(b) => {
                self.suspended = false;
                if let Some(n) = b.start_turn {
                    self.turn_offset = n as usize;
                }
            }
            Event::LoopEnded(b) => {
                self.loop_end = Some(LoopEnd {
                    cause: b.cause.clone(),
                    reason: b.reason.clone(),
                })
            }
            // The patch attempt's worktree (§14): evidence for the board, not a delivery.
            Event::Workspace(_) => self.workspace = true,
            Event::Terminal(t) => self.terminal = Some(t.as_ref().clone()),
        }
    }

    /// The status a delivery has if the run ended now (§6.1, §9.2). Open attempts must have
    /// been settled by the reconciler before this is called.
    pub fn final_status(&self, id: &str) -> DeliveryStatus {
        let Some(it) = self.items.get(id) else {
            return if self.corrupt.is_empty() {
                DeliveryStatus::NotAttempted
            } else {
                DeliveryStatus::Unknown
            };
        };
        if let Some(s) = it.status {
            return s;
        }
        // An entry that does not parse may have been this item's attempt or evidence: what
        // the journal cannot tell is unknown, never not attempted (§3.4.2).
        if !self.corrupt.is_empty() {
            return DeliveryStatus::Unknown;
        }
        if it.awaiting || (it.posture == Some(Posture::Clarify) && self.clarify_open) {
            return DeliveryStatus::Awaiting;
        }
        // Blocked only when a proposal was actually held back by its order and nothing
        // settled it afterwards (contract §6.1); an item never proposed is not_attempted.
        if it.blocked_on.is_some() {
            return DeliveryStatus::Blocked;
        }
        DeliveryStatus::NotAttempted
    }

    pub fn status_now(&self, id: &str) -> Option<DeliveryStatus> {
        self.items.get(id).and_then(|i| i.status)
    }
}

#[cfg(test)]
mod corrupt {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;
    use vouch_store::EventKind;

    fn entry(seq: i64, kind: EventKind, delivery: Option<&str>, body: Value) -> JournalEntry {
        JournalEntry {
            run_id: "r".into(),
            seq,
            kind,
            delivery: delivery.map(String::from),
            body,
            at_ms: seq,
            prev_hash: String::new(),
            hash: String::new(),
        }
    }

    #[test]
    fn an_unparseable_entry_makes_what_it_could_have_settled_unknown_never_not_attempted() {
        let m = json!({"deliveries": [
            {"id": "a", "verb": "send", "destination": {"kind": "email", "address": "x@example.com"}},
            {"id": "b", "verb": "save", "destination": {"kind": "folder", "address": "out"}}]});
        let declared = Event::from(journal::ManifestDeclared {
            manifest: serde_json::from_value(m).unwrap(),
            amendment: false,
            carried_from: None,
        });
        let j = vec![
            entry(1, declared.kind(), None, declared.body()),
            // An attempt whose body lost its shape: it may have sent.
            entry(
                2,
                EventKind::AttemptStarted,
                Some("a"),
                json!({"payload": 1}),
            ),
        ];
        let v = RunView::from_journal(&j);
        assert_eq!(v.corrupt, vec![2]);
        assert_eq!(v.final_status("a"), DeliveryStatus::Unknown);
        assert!(
            v.items["a"].reason.contains("does not parse"),
            "{}",
            v.items["a"].reason
        );
        // A run-level entry that does not parse taints every unsettled item.
        let mut j2 = j[..1].to_vec();
        j2.push(entry(2, EventKind::Turn, None, json!("garbage")));
        let v2 = RunView::from_journal(&j2);
        assert_eq!(v2.final_status("b"), DeliveryStatus::Unknown);
        let receipt = crate::receipt::render(
            "r",
            "interactive",
            &v2,
            &[("b".into(), DeliveryStatus::Unknown)],
            Some(vouch_core::Outcome::Partial),
            Some("loop"),
            &["b".into()],
        );
        assert!(
            receipt.contains("do not parse") || receipt.contains("does not parse"),
            "{receipt}"
        );
        assert!(receipt.contains("seq 2"), "{receipt}");
    }
}

#[cfg(test)]
mod fold_props {
    use super::*;
    use proptest::prelude::*;
    use vouch_store::EventKind;

    fn entry(seq: i64, kind: EventKind, delivery: Option<&str>, status: &str) -> JournalEntry {
        use vouch_store::journal::*;
        let st: DeliveryStatus = serde_json::from_value(serde_json::json!(status)).unwrap();
        let ev: Event = match kind {
            EventKind::RunCreated => RunCreated {
                title: "t".into(),
                trigger: vouch_core::TriggerKind::Task,
                parent: None,
                scope: "s".into(),
                spec_sha256: None,
            }
            .into(),
            EventKind::Turn => Turn {
                index: seq as u64,
                content: Some("x".into()),
                tool_calls: if seq % 2 == 0 {
                    vec![ToolCallRecord {
                        id: format!("c{seq}"),
                        name: "save".into(),
                        arguments: "{}".into(),
                    }]
                } else {
                    vec![]
                },
                usage: Some(TokenUsage {
                    prompt_tokens: 2,
                    completion_tokens: 3,
                }),
                error: None,
            }
            .into(),
            EventKind::ToolCalled => ToolCalled {
                call_id: format!("c{}", seq - 1),
                name: "save".into(),
                ok: st == DeliveryStatus::Verified,
                result: "r".into(),
                repair: false,
            }
            .into(),
            EventKind::ApprovalRequested => ApprovalRequested {
                payload_hash: "h".into(),
                payload: Value::Null,
                summary: "s".into(),
                reason: "why".into(),
            }
            .into(),
            EventKind::ApprovalGranted => ApprovalGranted {
                payload_hash: "h".into(),
                from_card: false,
                carried_from: None,
                by: None,
            }
            .into(),
            EventKind::ApprovalDenied => ApprovalDenied {
                payload_hash: "h".into(),
                by: None,
            }
            .into(),
            EventKind::AttemptStarted => AttemptStarted {
                payload_hash: "h".into(),
                payload: Value::Null,
                key: Some("k".into()),
                posture: None,
                retry_same_key: false,
            }
            .into(),
            EventKind::AttemptFinished => AttemptFinished {
                reply: ProviderReply::Lost { reason: "t".into() },
                retrying_same_key: false,
            }
            .into(),
            EventKind::Evidence => Evidence {
                status: st,
                evidence: "e".into(),
                reason: "why".into(),
                posture: None,
                ledger: None,
                connect_step: None,
                carried_from: None,
            }
            .into(),
            EventKind::Suspended => Suspended {
                reason: "card".into(),
                at_boot: false,
            }
            .into(),
            EventKind::Resumed => Resumed {
                by: "approval".into(),
                delivery: None,
                parent: None,
                start_turn: None,
            }
            .into(),
            _ => LoopEnded {
                cause: "model_error".into(),
                reason: "why".into(),
            }
            .into(),
        };
        // Some entries are corrupt: a body that is not its kind's type.
        let body = if seq % 7 == 3 {
            serde_json::json!({"not": "a body"})
        } else {
            ev.body()
        };
        JournalEntry {
            run_id: "r".into(),
            seq,
            kind: ev.kind(),
            delivery: delivery.map(str::to_string),
            body,
            at_ms: 1_000 + seq,
            prev_hash: String::new(),
            hash: String::new(),
        }
    }

    fn journal() -> impl Strategy<Value = Vec<JournalEntry>> {
        let kinds = prop::sample::select(vec![
            EventKind::RunCreated,
            EventKind::Turn,
            EventKind::ToolCalled,
            EventKind::ApprovalRequested,
            EventKind::ApprovalGranted,
            EventKind::ApprovalDenied,
            EventKind::AttemptStarted,
            EventKind::AttemptFinished,
            EventKind::Evidence,
            EventKind::Suspended,
            EventKind::Resumed,
            EventKind::LoopEnded,
        ]);
        let delivery = prop::sample::select(vec![None, Some("d1"), Some("d2")]);
        let status = prop::sample::select(vec!["verified", "failed", "unknown", "declined"]);
        prop::collection::vec((kinds, delivery, status), 0..40).prop_map(|v| {
            v.into_iter()
                .enumerate()
                .map(|(i, (k, d, s))| entry(i as i64 + 1, k, d, s))
                .collect()
        })
    }

    proptest! {
        #[test]
        fn folding_incrementally_from_any_prefix_equals_folding_whole(
            j in journal(),
            cut in 0usize..41,
        ) {
            let cut = cut.min(j.len());
            let mut v = RunView::from_journal(&j[..cut]);
            for e in &j[cut..] {
                v.apply(e);
            }
            prop_assert_eq!(v, RunView::from_journal(&j));
        }
    }
}
