//! Proposals and drafts (§6) and approval requests. Writes proposal, draft and approval
//! request events and suspends the run; never calls a provider.

use super::attempt::Attempts;
use super::manifest::Clarify;
use super::rooms::{Cards, Gate, Journal, Payloads, PostureAnswer, Views};
use super::*;
use crate::fsroot::{host_name, FolderRoot};

/// What a proposal's own writes may touch: the run's journal, the approval cards, the payloads
/// kept by hash, and the drafts folder — never a provider, the ledger or the lease. The
/// routing ([`Route`]) decides the posture and hands an act to `attempt.rs`; everything a
/// proposal writes itself goes through this room.
pub(super) struct Proposals<'h> {
    journal: Journal<'h>,
    cards: Cards<'h>,
    payloads: Payloads<'h>,
    drafts_dir: &'h std::path::Path,
}

/// The routing of a proposal (§6) and of a draft its parent left (§9.5): the posture the
/// gate decides, then a refusal, the run's question, a draft or an approval card (its
/// proposals' writes), or an act (its attempts). Its own few writes — a posture that changed
/// on recheck, a decline's evidence — go through the proposals' journal. Never the lease, the
/// ledger or a provider but through `Attempts`.
pub(super) struct Route<'h> {
    proposals: Proposals<'h>,
    attempts: Attempts<'h>,
    gate: Gate<'h>,
    views: Views<'h>,
    clarify: Clarify<'h>,
    /// The largest payload a proposal may carry, canonical JSON bytes.
    payload_bytes_max: usize,
}

impl Host {
    pub(super) fn proposals(&self) -> Proposals<'_> {
        Proposals {
            journal: Journal::of(self),
            cards: Cards::of(self),
            payloads: Payloads::of(self),
            drafts_dir: &self.drafts_dir,
        }
    }

    pub(super) fn route(&self) -> Route<'_> {
        Route {
            proposals: self.proposals(),
            attempts: self.attempts(),
            gate: Gate::of(self),
            views: Views::of(self),
            clarify: self.clarify(),
            payload_bytes_max: self.limits.payload_bytes_max,
        }
    }
}

impl Proposals<'_> {
    /// A proposal the host refuses (no manifest, undeclared, settled, in flight, declined):
    /// journaled with its code, for the delivery when it names one.
    pub(super) fn reject(
        &self,
        run: &RunRecord,
        delivery: Option<&str>,
        code: &str,
        reason: &str,
        call: &ToolCall,
    ) -> HostResult<()> {
        self.journal
            .say(&format!("  ✗ proposal rejected ({code}): {reason}"));
        let body = j::ProposalRejected {
            code: code.to_string(),
            reason: reason.to_string(),
            call_id: call.id.clone(),
            tool: Some(call.name.clone()),
            dependency: None,
        };
        match delivery {
            Some(d) => self.journal.append_for(&run.id, d, body),
            None => self.journal.append(&run.id, body),
        }
    }

    /// The refusal of a proposal for an item already settled, done or in flight.
    fn refused_item(
        &self,
        run: &RunRecord,
        call: &ToolCall,
        id: &str,
        item: &crate::view::ItemView,
    ) -> HostResult<Option<CallResult>> {
        if let Some(s) = item.status.filter(|s| s.is_settled()) {
            self.reject(
                run,
                Some(id),
                "already_settled",
                &format!("item {id} is already {s}"),
                call,
            )?;
            return Ok(Some(CallResult::err(format!(
                "rejected: {id} is already settled ({s}); add a new item for different content"
            ))));
        }
        if item.open_attempt.is_some() {
            self.reject(
                run,
                Some(id),
                "in_flight",
                &format!("item {id} has an attempt in flight"),
                call,
            )?;
            return Ok(Some(CallResult::err(format!(
                "rejected: {id} is being attempted"
            ))));
        }
        if item.status == Some(DeliveryStatus::Drafted)
            || item.status == Some(DeliveryStatus::Verified)
        {
            self.reject(
                run,
                Some(id),
                "already_settled",
                &format!("item {id} is already done"),
                call,
            )?;
            return Ok(Some(CallResult::err(format!(
                "rejected: {id} is already done"
            ))));
        }
        Ok(None)
    }

    /// The refusal of a proposal whose dependency is not verified yet (journaled `blocked`).
    fn held_back(
        &self,
        run: &RunRecord,
        call: &ToolCall,
        m: &Manifest,
        view: &RunView,
        id: &str,
    ) -> HostResult<Option<CallResult>> {
        for dep in m.dependencies(id) {
            if view.status_now(dep) != Some(DeliveryStatus::Verified) {
                self.journal
                    .say(&format!("  ⏳ {id} held back: waits for {dep}"));
                let body = j::ProposalRejected {
                    code: "blocked".into(),
                    reason: format!("waits for {dep} to be verified"),
                    call_id: call.id.clone(),
                    tool: None,
                    dependency: Some(dep.to_string()),
                };
                self.journal.append_for(&run.id, id, body)?;
                return Ok(Some(CallResult::err(format!(
                    "rejected: {id} waits for {dep} to be verified"
                ))));
            }
        }
        Ok(None)
    }

    /// Keep the payload by its hash and store the draft beneath the drafts folder (§9.5):
    /// `drafted` when it reads back, `failed` otherwise.
    pub(super) fn draft(
        &self,
        run: &RunRecord,
        d: &vouch_core::Delivery,
        payload: &Value,
        hash: &str,
        connect: Option<&str>,
    ) -> HostResult<CallResult> {
        // The payload is kept by its hash too, so finishing the draft later executes exactly
        // it (§9.5, I4) — the model is never asked for the text again.
        self.payloads.keep(hash, payload)?;
        let ext = if d.destination.kind == DestinationKind::Email {
            "eml"
        } else {
            "json"
        };
        // Named by the host beneath the drafts folder (§3.2.1), never by the id as given.
        let name = format!("{}/{}.{ext}", host_name(&run.id), host_name(&d.id));
        let path = self.drafts_dir.join(&name);
        let content = if ext == "eml" {
            crate::provider::draft_eml(d, payload)
        } else {
            serde_json::to_string_pretty(payload).unwrap_or_default()
        };
        let root = FolderRoot::new(self.drafts_dir);
        let written = root.write_atomic(&name, content.as_bytes());
        let reread = root
            .read(&name, content.len() + 1)
            .map(|c| c == content.as_bytes())
            .unwrap_or(false);
        self.journal.append_for(
            &run.id,
            &d.id,
            j::Drafted {
                path: path.display().to_string(),
                payload_hash: hash.to_string(),
                carried_from: None,
            },
        )?;
        let (status, reason) = match (written, reread) {
            (Ok(()), true) => (DeliveryStatus::Drafted, String::new()),
            (Err(e), _) => (
                DeliveryStatus::Failed,
                format!("could not store the draft: {e}"),
            ),
            _ => (
                DeliveryStatus::Failed,
                "the stored draft did not read back".into(),
            ),
        };
        self.journal.append_for(
            &run.id,
            &d.id,
            j::Evidence {
                connect_step: connect.map(String::from),
                ..j::Evidence::of(status, format!("draft {}", path.display()), reason.clone())
            },
        )?;
        self.journal
            .say(&format!("  ✎ {} drafted at {}", d.id, path.display()));
        Ok(CallResult::ok(format!(
            "{}: drafted (stored at {}), not executed",
            d.id,
            path.display()
        )))
    }

    /// Open an approval card for exactly this payload (§7) and suspend the run; `supersedes`
    /// names the card it replaces (an edit, §6) and who replaced it. `facts` are the act's, as
    /// the posture decision read them.
    pub(super) fn request_approval(
        &self,
        run: &RunRecord,
        d: &vouch_core::Delivery,
        payload: &Value,
        hash: &str,
        supersedes: Option<(&str, Option<&vouch_core::Principal>)>,
        facts: ActFacts,
    ) -> HostResult<CallResult> {
        self.payloads.keep(hash, payload)?;
        let summary = approval_summary(d, payload);
        // A card is opened only for posture `confirm`, which only R9 gives (§5.2).
        let reason = vouch_core::approval::confirm_reason(
            facts,
            &d.destination.to_string(),
            vouch_core::Rule::R9,
        );
        self.cards.open(&Card {
            run_id: run.id.clone(),
            delivery: Some(d.id.clone()),
            payload_hash: hash.to_string(),
            summary: summary.clone(),
            state: CardState::Open,
            created_ms: self.journal.now(),
            decided_ms: None,
            answer: None,
            reason: reason.clone(),
        })?;
        if let Some((old, by)) = supersedes {
            self.journal.append_for(
                &run.id,
                &d.id,
                j::ApprovalSuperseded {
                    old_hash: old.to_string(),
                    new_hash: hash.to_string(),
                    by: by.cloned(),
                },
            )?;
        }
        self.journal.append_for(
            &run.id,
            &d.id,
            j::ApprovalRequested {
                payload_hash: hash.to_string(),
                payload: payload.clone(),
                summary: summary.to_string(),
                reason: reason.to_string(),
            },
        )?;
        self.journal.say(&format!(
            "  ⏸ {} needs your approval (hash {}): {reason}",
            d.id,
            &hash[..12]
        ));
        Ok(CallResult {
            ok: true,
            text: format!("{} awaits the person's approval", d.id),
            suspend: Some(format!("approval of {}", d.id)),
            end: None,
            repair: false,
        })
    }

    /// A draft its parent left that still cannot be finished: it stays drafted, and the
    /// draft's hash rides along so a later continuation can still finish it.
    fn keep_drafted(
        &self,
        run: &RunRecord,
        d: &vouch_core::Delivery,
        parent: &crate::view::ItemView,
        connect_step: Option<String>,
    ) -> HostResult<()> {
        if let Some(h) = &parent.draft_hash {
            self.journal.append_for(
                &run.id,
                &d.id,
                j::Drafted {
                    path: parent.draft_path.clone().unwrap_or_default(),
                    payload_hash: h.to_string(),
                    carried_from: run.parent.clone(),
                },
            )?;
        }
        self.journal.append_for(
            &run.id,
            &d.id,
            j::Evidence {
                connect_step: connect_step.or(parent.connect_step.clone()),
                carried_from: run.parent.clone(),
                ..j::Evidence::of(
                    DeliveryStatus::Drafted,
                    parent.evidence.clone(),
                    parent.reason.clone(),
                )
            },
        )?;
        Ok(())
    }
}

impl Route<'_> {
    // ------------------------------------------------------------------ proposals (§6)

    pub(super) fn propose(
        &self,
        run: &RunRecord,
        call: &ToolCall,
        verb: Verb,
        generic: bool,
        args: &Value,
    ) -> HostResult<CallResult> {
        let view = self.views.view(&run.id)?;
        let Some(m) = view.manifest.clone() else {
            self.proposals.reject(
                run,
                None,
                "no_manifest",
                "a delivery was proposed before the manifest was declared",
                call,
            )?;
            return Ok(CallResult::err("rejected: declare the manifest first"));
        };
        let id = args.get("delivery").and_then(Value::as_str).unwrap_or("");
        let d = match self.covered(run, call, &m, id, verb, generic)? {
            Ok(d) => d,
            Err(res) => return Ok(res),
        };
        let payload = match self.checked_payload(&d, args) {
            Ok(p) => p,
            Err(res) => return Ok(res),
        };
        let item = view.items.get(id).cloned().unwrap_or_default();
        if let Some(res) = self.proposals.refused_item(run, call, id, &item)? {
            return Ok(res);
        }
        if let Some(res) = self.proposals.held_back(run, call, &m, &view, id)? {
            return Ok(res);
        }
        let hash = payload_hash(&payload).map_err(|e| HostError::Internal(e.to_string()))?;
        if item.awaiting {
            if item.card_hash.as_deref() == Some(hash.as_str()) {
                return Ok(CallResult {
                    ok: true,
                    text: format!("{id} is still waiting for approval"),
                    suspend: Some(format!("approval of {id}")),
                    end: None,
                    repair: false,
                });
            }
            // A different payload for an item awaiting approval is an edit (§6, §7).
            return self.proposals.request_approval(
                run,
                &d,
                &payload,
                &hash,
                item.card_hash.as_deref().map(|old| (old, None)),
                self.gate.facts(&d),
            );
        }
        let posture = self.recheck_posture(run, &m, &d, item.posture, view.clarify_used)?;
        self.act(run, call, &d, posture, &payload, &hash)
    }

    /// The manifest item a proposal names, if it covers the proposed verb; otherwise the
    /// refusal (journaled) the model is answered with.
    fn covered(
        &self,
        run: &RunRecord,
        call: &ToolCall,
        m: &Manifest,
        id: &str,
        verb: Verb,
        generic: bool,
    ) -> HostResult<Result<vouch_core::Delivery, CallResult>> {
        let Some(d) = m.delivery(id).cloned() else {
            self.proposals.reject(
                run,
                None,
                "undeclared",
                &format!("`{verb}` is not covered by any manifest item"),
                call,
            )?;
            return Ok(Err(CallResult::err(
                "rejected: no manifest item covers this; amend the manifest with `declare` first",
            )));
        };
        if !generic && d.verb != verb {
            self.proposals.reject(
                run,
                Some(id),
                "verb_mismatch",
                &format!("item {id} is a `{}`, not a `{verb}`", d.verb),
                call,
            )?;
            return Ok(Err(CallResult::err(format!(
                "rejected: item {id} is declared as `{}`",
                d.verb
            ))));
        }
        Ok(Ok(d))
    }

    /// The proposal's payload in its kind's shape, or the repair the model is asked for.
    fn checked_payload(&self, d: &vouch_core::Delivery, args: &Value) -> Result<Value, CallResult> {
        let Some(payload) = args.get("payload").cloned().filter(|p| p.is_object()) else {
            return Err(CallResult::repair(
                "invalid arguments: `payload` must be a JSON object",
            ));
        };
        if canonical_json(&payload)
            .map(|c| c.len())
            .unwrap_or(usize::MAX)
            > self.payload_bytes_max
        {
            return Err(CallResult::repair(format!(
                "invalid arguments: payload larger than {} bytes",
                self.payload_bytes_max
            )));
        }
        // The payload takes its kind's shape (schemas.rs, the same schema the tools advertise);
        // one that does not is the model's to repair and is never stored.
        crate::schemas::check_payload(d, &payload)
            .map_err(|e| CallResult::repair(format!("invalid payload: {e}")))
    }

    /// Posture again, right before the attempt (§4): journaled when it changed.
    fn recheck_posture(
        &self,
        run: &RunRecord,
        m: &Manifest,
        d: &vouch_core::Delivery,
        was: Option<Posture>,
        clarify_used: bool,
    ) -> HostResult<PostureAnswer> {
        let (p, rule, cap, irreversible) = self.gate.decide_posture(run, m, d, clarify_used)?;
        if was != Some(p) {
            self.proposals.journal.append_for(
                &run.id,
                &d.id,
                j::Preflight {
                    recheck: true,
                    ..j::Preflight::of(
                        Some(cap.level),
                        p,
                        Some(rule.as_str().to_string()),
                        irreversible,
                        cap.connect_step.clone(),
                    )
                },
            )?;
        }
        Ok((p, rule, cap, irreversible))
    }

    /// What the posture says for a proposal: decline, ask, draft, ask for approval, or
    /// perform.
    fn act(
        &self,
        run: &RunRecord,
        call: &ToolCall,
        d: &vouch_core::Delivery,
        (p, rule, cap, irreversible): PostureAnswer,
        payload: &Value,
        hash: &str,
    ) -> HostResult<CallResult> {
        let id = d.id.as_str();
        match p {
            Posture::Decline => {
                let reason = if rule == vouch_core::Rule::R1 {
                    "forbidden for this run"
                } else {
                    "not available here"
                };
                self.proposals
                    .reject(run, Some(id), "declined", reason, call)?;
                self.proposals.journal.append_for(
                    &run.id,
                    id,
                    j::Evidence::of(DeliveryStatus::Declined, "", reason),
                )?;
                Ok(CallResult::err(format!("declined: {reason}")))
            }
            Posture::Clarify => {
                let res = self.clarify.ask(
                    run,
                    &format!("I am not sure about `{id}`. Can you confirm?"),
                    Some(id),
                )?;
                if res.suspend.is_some() {
                    return Ok(res);
                }
                self.proposals
                    .draft(run, d, payload, hash, cap.connect_step.as_deref())
            }
            Posture::Draft => {
                self.proposals
                    .draft(run, d, payload, hash, cap.connect_step.as_deref())
            }
            Posture::Confirm | Posture::Answer | Posture::Execute
                if self.attempts.unchanged(run, d, payload)? =>
            {
                Ok(CallResult::ok(format!(
                    "{id}: verified (no change: the destination already holds exactly this payload)"
                )))
            }
            Posture::Confirm => {
                let facts = self.gate.facts(d);
                self.proposals
                    .request_approval(run, d, payload, hash, None, facts)
            }
            Posture::Answer | Posture::Execute => {
                let status = self
                    .attempts
                    .perform(run, d, payload, hash, irreversible, p)?;
                Ok(CallResult {
                    ok: status == DeliveryStatus::Verified,
                    text: format!("{id}: {status}"),
                    suspend: None,
                    end: None,
                    repair: false,
                })
            }
        }
    }

    /// §9.5: finish a delivery its parent run drafted because the destination was not ready.
    /// The item is pre-flighted again; if it may now execute, the stored payload (read back by
    /// its hash and re-hashed) is executed (reversible) or put on an approval card
    /// (irreversible). Otherwise it stays drafted, as it was. Returns the suspension reason
    /// when a card was opened.
    pub(super) fn finish_draft(
        &self,
        run: &RunRecord,
        m: &Manifest,
        d: &vouch_core::Delivery,
        parent: &crate::view::ItemView,
    ) -> HostResult<Option<String>> {
        let view = self.views.view(&run.id)?;
        let payload = match parent.draft_hash.as_deref() {
            Some(h) => self.proposals.payloads.read(h)?.map(|v| (h.to_string(), v)),
            None => None,
        };
        let (p, rule, cap, irreversible) =
            self.gate.decide_posture(run, m, d, view.clarify_used)?;
        let ready = matches!(p, Posture::Execute | Posture::Answer | Posture::Confirm);
        let Some((hash, payload)) = payload.filter(|_| ready) else {
            self.proposals
                .keep_drafted(run, d, parent, cap.connect_step.clone())?;
            return Ok(None);
        };
        self.proposals.journal.append_for(
            &run.id,
            &d.id,
            j::Preflight {
                recheck: true,
                finishing_draft: Some(hash.to_string()),
                ..j::Preflight::of(
                    Some(cap.level),
                    p,
                    Some(rule.as_str().to_string()),
                    irreversible,
                    cap.connect_step.clone(),
                )
            },
        )?;
        self.proposals.journal.say(&format!(
            "  ↻ finishing the draft of {} ({})",
            d.id,
            &hash[..12]
        ));
        if p == Posture::Confirm {
            let facts = self.gate.facts(d);
            let res = self
                .proposals
                .request_approval(run, d, &payload, &hash, None, facts)?;
            return Ok(res.suspend);
        }
        self.attempts
            .perform(run, d, &payload, &hash, irreversible, p)?;
        Ok(None)
    }
}

/// What an approval card says it would do: the verb, the destination and the payload's start.
fn approval_summary(d: &vouch_core::Delivery, payload: &Value) -> String {
    format!(
        "{} → {}: {}",
        d.verb,
        d.destination,
        crate::provider::payload_text(payload)
            .chars()
            .take(120)
            .collect::<String>()
    )
}
