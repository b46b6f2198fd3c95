//! The state of a run as the journal tells it. Pure: a fold over journal entries.
//! Statuses come only from evidence events (I2); the model's text is kept but never read
//! by the status computation.

use serde_json::Value;
use std::collections::BTreeMap;
use vouch_core::{Capability, DeliveryStatus, Manifest, Posture};
use vouch_store::{EventKind, JournalEntry};

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
}

#[derive(Debug, Clone, PartialEq)]
pub struct OpenAttempt {
    /// False when only the ledger intent is journaled (the provider was not called yet).
    pub started: bool,
    pub payload_hash: String,
    pub payload: Value,
    pub key: Option<String>,
    pub reply: Option<Value>,
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
    pub suspended: bool,
    /// Turns begun, and turns whose every tool call has a journaled result.
    pub turns: usize,
    pub turns_complete: usize,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub failed_tool_calls: usize,
    pub final_text: Option<String>,
    pub first_ms: i64,
    pub last_ms: i64,
    pub terminal: Option<Value>,
    pub title: String,
    pub pending_calls: Vec<String>,
    /// For a continuation: the parent's completed turns (the script resumes there).
    pub turn_offset: usize,
    /// For a missed slot: which slot, said plainly on the receipt.
    pub missed_note: Option<String>,
    /// Why the agent loop stopped without the work (a model error, a budget, the repair
    /// limit), if it did.
    pub loop_end: Option<LoopEnd>,
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
    pub fn apply(&mut self, e: &JournalEntry) {
        if self.first_ms == 0 {
            self.first_ms = e.at_ms;
        }
        self.last_ms = e.at_ms;
        self.apply_body(e);
    }

    pub fn item(&mut self, id: &str) -> &mut ItemView {
        self.items.entry(id.to_string()).or_default()
    }

    fn apply_body(&mut self, e: &JournalEntry) {
        let b = &e.body;
        let str_of = |k: &str| b.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        let d = e.delivery.clone().unwrap_or_default();
        match e.kind {
            EventKind::RunCreated => self.title = str_of("title"),
            EventKind::Turn => {
                self.turns += 1;
                let calls: Vec<String> = b
                    .get("tool_calls")
                    .and_then(Value::as_array)
                    .map(|a| {
                        a.iter()
                            .filter_map(|c| c.get("id").and_then(Value::as_str).map(String::from))
                            .collect()
                    })
                    .unwrap_or_default();
                if calls.is_empty() {
                    self.turns_complete = self.turns;
                    if let Some(t) = b.get("content").and_then(Value::as_str) {
                        self.final_text = Some(t.to_string());
                    }
                }
                self.pending_calls = calls;
                if let Some(u) = b.get("usage") {
                    self.prompt_tokens +=
                        u.get("prompt_tokens").and_then(Value::as_u64).unwrap_or(0);
                    self.completion_tokens += u
                        .get("completion_tokens")
                        .and_then(Value::as_u64)
                        .unwrap_or(0);
                }
            }
            EventKind::ToolCalled => {
                let id = str_of("call_id");
                self.pending_calls.retain(|c| *c != id);
                if self.pending_calls.is_empty() {
                    self.turns_complete = self.turns;
                }
                if b.get("ok").and_then(Value::as_bool) == Some(false) {
                    self.failed_tool_calls += 1;
                }
            }
            EventKind::ManifestDeclared | EventKind::ManifestImplied => {
                if let Some(m) = b
                    .get("manifest")
                    .and_then(|m| serde_json::from_value::<Manifest>(m.clone()).ok())
                {
                    for item in &m.deliveries {
                        self.item(&item.id);
                    }
                    self.manifest = Some(m);
                }
                if e.kind == EventKind::ManifestImplied {
                    self.implied = true;
                }
            }
            EventKind::ManifestRejected => {
                if let Some(errs) = b.get("errors").and_then(Value::as_array) {
                    for err in errs {
                        self.rejections.push(err.as_str().unwrap_or("").to_string());
                    }
                }
                if let Some(ids) = b.get("declined").and_then(Value::as_array) {
                    let reason = b
                        .get("reason")
                        .and_then(Value::as_str)
                        .unwrap_or("the manifest contradicts itself")
                        .to_string();
                    for id in ids.iter().filter_map(Value::as_str) {
                        let it = self.item(id);
                        it.status = Some(DeliveryStatus::Declined);
                        it.posture = Some(Posture::Decline);
                        it.reason = reason.clone();
                    }
                }
            }
            EventKind::Preflight => {
                let it = self.item(&d);
                it.posture = b
                    .get("posture")
                    .and_then(|p| serde_json::from_value(p.clone()).ok());
                it.rule = b.get("rule").and_then(Value::as_str).map(String::from);
                it.capability = b
                    .get("capability")
                    .and_then(|p| serde_json::from_value(p.clone()).ok());
                it.irreversible = b
                    .get("irreversible")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                it.connect_step = b
                    .get("connect_step")
                    .and_then(Value::as_str)
                    .map(String::from);
                if it.posture == Some(Posture::Decline) && it.status.is_none() {
                    it.status = Some(DeliveryStatus::Declined);
                    it.reason = b
                        .get("reason")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_string();
                }
            }
            EventKind::ProposalRejected => {
                if !d.is_empty() && str_of("code") == "blocked" {
                    let it = self.item(&d);
                    it.blocked_on = Some(str_of("dependency"));
                }
            }
            EventKind::ClarifyAsked => {
                self.clarify_used = true;
                self.clarify_open = true;
            }
            EventKind::ClarifyAnswered => {
                self.clarify_open = false;
                self.clarify_answer = Some(str_of("answer"));
            }
            EventKind::ApprovalRequested => {
                let it = self.item(&d);
                it.awaiting = true;
                it.card_hash = Some(str_of("payload_hash"));
                it.granted = None;
                it.approved = None;
            }
            EventKind::ApprovalSuperseded => {}
            EventKind::ApprovalGranted => {
                let it = self.item(&d);
                it.awaiting = false;
                it.granted = Some(str_of("payload_hash"));
                it.approved = Some(str_of("payload_hash"));
            }
            EventKind::ApprovalDenied => {
                let it = self.item(&d);
                it.awaiting = false;
                it.status = Some(DeliveryStatus::Denied);
            }
            EventKind::Drafted => {
                let h = str_of("payload_hash");
                self.item(&d).draft_hash = (!h.is_empty()).then_some(h);
            }
            EventKind::LedgerIntent => {
                // The intent is durable before the provider is called: from here a crash
                // leaves the act in doubt (§8.3) until evidence settles it.
                let it = self.item(&d);
                it.open_attempt = Some(OpenAttempt {
                    started: false,
                    payload_hash: str_of("payload_hash"),
                    payload: b.get("payload").cloned().unwrap_or(Value::Null),
                    key: b.get("key").and_then(Value::as_str).map(String::from),
                    reply: None,
                });
            }
            EventKind::AttemptStarted => {
                let it = self.item(&d);
                it.granted = None;
                it.open_attempt = Some(OpenAttempt {
                    started: true,
                    payload_hash: str_of("payload_hash"),
                    payload: b.get("payload").cloned().unwrap_or(Value::Null),
                    key: b.get("key").and_then(Value::as_str).map(String::from),
                    reply: None,
                });
            }
            EventKind::AttemptFinished => {
                if let Some(a) = self.item(&d).open_attempt.as_mut() {
                    a.reply = b.get("reply").cloned();
                }
            }
            EventKind::Evidence => {
                let it = self.item(&d);
                it.open_attempt = None;
                it.granted = None;
                it.awaiting = false;
                it.status = b
                    .get("status")
                    .and_then(|s| serde_json::from_value(s.clone()).ok());
                it.evidence = str_of("evidence");
                it.reason = str_of("reason");
                it.carried = b.get("carried_from").is_some();
                if let Some(p) = b
                    .get("posture")
                    .and_then(|p| serde_json::from_value(p.clone()).ok())
                {
                    it.posture = Some(p);
                }
            }
            EventKind::Suspended => self.suspended = true,
            EventKind::Resumed => {
                self.suspended = false;
                if let Some(n) = b.get("start_turn").and_then(Value::as_u64) {
                    self.turn_offset = n as usize;
                }
            }
            EventKind::LoopEnded => {
                self.loop_end = Some(LoopEnd {
                    cause: str_of("cause"),
                    reason: str_of("reason"),
                })
            }
            // The patch attempt's worktree (§14): evidence for the board, not a delivery.
            EventKind::Workspace => {}
            EventKind::Terminal => self.terminal = Some(b.clone()),
        }
    }

    /// The status a delivery has if the run ended now (§6.1, §9.2). Open attempts must have
    /// been settled by the reconciler before this is called.
    pub fn final_status(&self, id: &str) -> DeliveryStatus {
        let Some(it) = self.items.get(id) else {
            return DeliveryStatus::NotAttempted;
        };
        if let Some(s) = it.status {
            return s;
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
mod fold_props {
    use super::*;
    use proptest::prelude::*;
    use vouch_store::EventKind;

    fn entry(seq: i64, kind: EventKind, delivery: Option<&str>, status: &str) -> JournalEntry {
        JournalEntry {
            run_id: "r".into(),
            seq,
            kind,
            delivery: delivery.map(str::to_string),
            body: serde_json::json!({"status": status, "title": "t", "reason": "why",
                "evidence": "e", "key": "k", "payload_hash": "h", "text": "x"}),
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
