//! Proposals and drafts (§6) and approval requests. Writes proposal, draft and approval
//! request events and suspends the run; never calls a provider.

use super::*;
use crate::fsroot::{host_name, FolderRoot};

impl Host {
    // ------------------------------------------------------------------ proposals (§6)

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
        self.say(&format!("  ✗ proposal rejected ({code}): {reason}"));
        let body = j::ProposalRejected {
            code: code.to_string(),
            reason: reason.to_string(),
            call_id: call.id.clone(),
            tool: Some(call.name.clone()),
            dependency: None,
        };
        let ev = match delivery {
            Some(d) => self.evd(d, body),
            None => self.ev(body),
        };
        self.journal(&run.id, ev)
    }

    pub(super) fn propose(
        &self,
        run: &RunRecord,
        call: &ToolCall,
        verb: Verb,
        generic: bool,
        args: &Value,
    ) -> HostResult<CallResult> {
        let view = self.view(&run.id)?;
        let Some(m) = view.manifest.clone() else {
            self.reject(
                run,
                None,
                "no_manifest",
                "a delivery was proposed before the manifest was declared",
                call,
            )?;
            return Ok(CallResult::err("rejected: declare the manifest first"));
        };
        let id = args.get("delivery").and_then(Value::as_str).unwrap_or("");
        let Some(d) = m.delivery(id).cloned() else {
            self.reject(
                run,
                None,
                "undeclared",
                &format!("`{verb}` is not covered by any manifest item"),
                call,
            )?;
            return Ok(CallResult::err(
                "rejected: no manifest item covers this; amend the manifest with `declare` first",
            ));
        };
        if !generic && d.verb != verb {
            self.reject(
                run,
                Some(id),
                "verb_mismatch",
                &format!("item {id} is a `{}`, not a `{verb}`", d.verb),
                call,
            )?;
            return Ok(CallResult::err(format!(
                "rejected: item {id} is declared as `{}`",
                d.verb
            )));
        }
        let Some(payload) = args.get("payload").cloned().filter(|p| p.is_object()) else {
            return Ok(CallResult::repair(
                "invalid arguments: `payload` must be a JSON object",
            ));
        };
        if canonical_json(&payload)
            .map(|c| c.len())
            .unwrap_or(usize::MAX)
            > self.limits.payload_bytes_max
        {
            return Ok(CallResult::repair(format!(
                "invalid arguments: payload larger than {} bytes",
                self.limits.payload_bytes_max
            )));
        }
        // The payload takes its kind's shape (schemas.rs, the same schema the tools advertise);
        // one that does not is the model's to repair and is never stored.
        let payload = match crate::schemas::check_payload(&d, &payload) {
            Ok(p) => p,
            Err(e) => return Ok(CallResult::repair(format!("invalid payload: {e}"))),
        };
        let item = view.items.get(id).cloned().unwrap_or_default();
        if let Some(s) = item.status.filter(|s| s.is_settled()) {
            self.reject(
                run,
                Some(id),
                "already_settled",
                &format!("item {id} is already {s}"),
                call,
            )?;
            return Ok(CallResult::err(format!(
                "rejected: {id} is already settled ({s}); add a new item for different content"
            )));
        }
        if item.open_attempt.is_some() {
            self.reject(
                run,
                Some(id),
                "in_flight",
                &format!("item {id} has an attempt in flight"),
                call,
            )?;
            return Ok(CallResult::err(format!(
                "rejected: {id} is being attempted"
            )));
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
            return Ok(CallResult::err(format!("rejected: {id} is already done")));
        }
        for dep in m.dependencies(id) {
            if view.status_now(dep) != Some(DeliveryStatus::Verified) {
                self.say(&format!("  ⏳ {id} held back: waits for {dep}"));
                let body = j::ProposalRejected {
                    code: "blocked".into(),
                    reason: format!("waits for {dep} to be verified"),
                    call_id: call.id.clone(),
                    tool: None,
                    dependency: Some(dep.to_string()),
                };
                self.journal(&run.id, self.evd(id, body))?;
                return Ok(CallResult::err(format!(
                    "rejected: {id} waits for {dep} to be verified"
                )));
            }
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
            return self.request_approval(
                run,
                &d,
                &payload,
                &hash,
                item.card_hash.as_deref(),
                None,
            );
        }
        // Posture again, right before the attempt (§4).
        let (p, rule, cap, irreversible) = self.decide_posture(run, &m, &d, view.clarify_used)?;
        if item.posture != Some(p) {
            self.journal(
                &run.id,
                self.evd(
                    id,
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
                ),
            )?;
        }
        match p {
            Posture::Decline => {
                let reason = if rule == vouch_core::Rule::R1 {
                    "forbidden for this run"
                } else {
                    "not available here"
                };
                self.reject(run, Some(id), "declined", reason, call)?;
                self.journal(
                    &run.id,
                    self.evd(id, j::Evidence::of(DeliveryStatus::Declined, "", reason)),
                )?;
                Ok(CallResult::err(format!("declined: {reason}")))
            }
            Posture::Clarify => {
                let res = self.clarify(
                    run,
                    &format!("I am not sure about `{id}`. Can you confirm?"),
                    Some(id),
                )?;
                if res.suspend.is_some() {
                    return Ok(res);
                }
                self.draft(run, &d, &payload, &hash, cap.connect_step.as_deref())
            }
            Posture::Draft => self.draft(run, &d, &payload, &hash, cap.connect_step.as_deref()),
            Posture::Confirm | Posture::Answer | Posture::Execute
                if self.unchanged(run, &d, &payload)? =>
            {
                Ok(CallResult::ok(format!(
                    "{id}: verified (no change: the destination already holds exactly this payload)"
                )))
            }
            Posture::Confirm => self.request_approval(run, &d, &payload, &hash, None, None),
            Posture::Answer | Posture::Execute => {
                let status = self.perform(run, &d, &payload, &hash, irreversible, p)?;
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

    /// Saving identical bytes over a file is no change (issue 22 #8): when the provider reads
    /// the destination and finds exactly this payload there, the item is verified by that
    /// reading — nothing is attempted and no approval is asked — so a routine that rewrites
    /// the same file does not stall its schedule.
    fn unchanged(
        &self,
        run: &RunRecord,
        d: &vouch_core::Delivery,
        payload: &Value,
    ) -> HostResult<bool> {
        if d.verb != Verb::Save {
            return Ok(false);
        }
        let Some(evidence) = self
            .providers
            .get(&d.destination.kind)
            .and_then(|p| p.holds(&d.destination, payload))
        else {
            return Ok(false);
        };
        self.say(&format!("  = {} {}: {evidence}", d.id, d.destination));
        self.journal(
            &run.id,
            self.evd(
                &d.id,
                j::Evidence {
                    posture: Some(Posture::Execute),
                    ..j::Evidence::of(DeliveryStatus::Verified, evidence, "")
                },
            ),
        )?;
        Ok(true)
    }

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
        let canonical = canonical_json(payload).map_err(|e| HostError::Internal(e.to_string()))?;
        self.store.put_payload(hash, &canonical)?;
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
        let root = FolderRoot::new(&self.drafts_dir);
        let written = root.write_atomic(&name, content.as_bytes());
        let reread = root
            .read(&name, content.len() + 1)
            .map(|c| c == content.as_bytes())
            .unwrap_or(false);
        self.journal(
            &run.id,
            self.evd(
                &d.id,
                j::Drafted {
                    path: path.display().to_string(),
                    payload_hash: hash.to_string(),
                    carried_from: None,
                },
            ),
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
        self.journal(
            &run.id,
            self.evd(
                &d.id,
                j::Evidence {
                    connect_step: connect.map(String::from),
                    ..j::Evidence::of(status, format!("draft {}", path.display()), reason.clone())
                },
            ),
        )?;
        self.say(&format!("  ✎ {} drafted at {}", d.id, path.display()));
        Ok(CallResult::ok(format!(
            "{}: drafted (stored at {}), not executed",
            d.id,
            path.display()
        )))
    }

    pub(super) fn request_approval(
        &self,
        run: &RunRecord,
        d: &vouch_core::Delivery,
        payload: &Value,
        hash: &str,
        old: Option<&str>,
        by: Option<&vouch_core::Principal>,
    ) -> HostResult<CallResult> {
        let canonical = canonical_json(payload).map_err(|e| HostError::Internal(e.to_string()))?;
        self.store.put_payload(hash, &canonical)?;
        let summary = format!(
            "{} → {}: {}",
            d.verb,
            d.destination,
            crate::provider::payload_text(payload)
                .chars()
                .take(120)
                .collect::<String>()
        );
        // A card is opened only for posture `confirm`, which only R9 gives (§5.2).
        let reason = vouch_core::approval::confirm_reason(
            self.facts(d),
            &d.destination.to_string(),
            vouch_core::Rule::R9,
        );
        self.store.open_card(&Card {
            run_id: run.id.clone(),
            delivery: Some(d.id.clone()),
            payload_hash: hash.to_string(),
            summary: summary.clone(),
            state: CardState::Open,
            created_ms: self.now(),
            decided_ms: None,
            answer: None,
            reason: reason.clone(),
        })?;
        if let Some(old) = old {
            self.journal(
                &run.id,
                self.evd(
                    &d.id,
                    j::ApprovalSuperseded {
                        old_hash: old.to_string(),
                        new_hash: hash.to_string(),
                        by: by.cloned(),
                    },
                ),
            )?;
        }
        self.journal(
            &run.id,
            self.evd(
                &d.id,
                j::ApprovalRequested {
                    payload_hash: hash.to_string(),
                    payload: payload.clone(),
                    summary: summary.to_string(),
                    reason: reason.to_string(),
                },
            ),
        )?;
        self.say(&format!(
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
        let view = self.view(&run.id)?;
        let stored = parent
            .draft_hash
            .as_deref()
            .map(|h| self.store.payload(h).map(|p| (h.to_string(), p)))
            .transpose()?;
        let payload = stored.and_then(|(h, p)| {
            let v = p.and_then(|p| serde_json::from_str::<Value>(&p).ok())?;
            (payload_hash(&v).ok().as_deref() == Some(h.as_str())).then_some((h, v))
        });
        let (p, rule, cap, irreversible) = self.decide_posture(run, m, d, view.clarify_used)?;
        let ready = matches!(p, Posture::Execute | Posture::Answer | Posture::Confirm);
        let Some((hash, payload)) = payload.filter(|_| ready) else {
            // Still not ready (or no stored payload to finish from): it stays drafted, and the
            // draft's hash rides along so a later continuation can still finish it.
            if let Some(h) = &parent.draft_hash {
                self.journal(
                    &run.id,
                    self.evd(
                        &d.id,
                        j::Drafted {
                            path: parent.draft_path.clone().unwrap_or_default(),
                            payload_hash: h.to_string(),
                            carried_from: run.parent.clone(),
                        },
                    ),
                )?;
            }
            self.journal(
                &run.id,
                self.evd(
                    &d.id,
                    j::Evidence {
                        connect_step: cap.connect_step.clone().or(parent.connect_step.clone()),
                        carried_from: run.parent.clone(),
                        ..j::Evidence::of(
                            DeliveryStatus::Drafted,
                            parent.evidence.clone(),
                            parent.reason.clone(),
                        )
                    },
                ),
            )?;
            return Ok(None);
        };
        self.journal(
            &run.id,
            self.evd(
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
            ),
        )?;
        self.say(&format!(
            "  ↻ finishing the draft of {} ({})",
            d.id,
            &hash[..12]
        ));
        if p == Posture::Confirm {
            let res = self.request_approval(run, d, &payload, &hash, None, None)?;
            return Ok(res.suspend);
        }
        self.perform(run, d, &payload, &hash, irreversible, p)?;
        Ok(None)
    }

    /// The card hash a person gave back (§7): the full hash or a unique prefix of at least
    /// 12 hex digits, among the cards of (run, delivery). A delivery without cards and a hash
    /// that matches none get different messages, each saying what to do next.
    pub(super) fn resolve_card_hash(
        &self,
        run_id: &str,
        delivery: &str,
        given: &str,
    ) -> HostResult<String> {
        let cards = self.store.cards_for_run(run_id)?;
        let mine: Vec<&Card> = cards
            .iter()
            .filter(|c| c.delivery.as_deref() == Some(delivery))
            .collect();
        if mine.is_empty() {
            let open: Vec<&str> = cards
                .iter()
                .filter(|c| c.state == CardState::Open)
                .filter_map(|c| c.delivery.as_deref())
                .collect();
            return Err(HostError::NotWaiting(if open.is_empty() {
                format!("run {run_id} has no delivery `{delivery}` waiting for approval; see `vouch approvals`")
            } else {
                format!(
                    "run {run_id} has no delivery `{delivery}` waiting for approval; check the delivery id: it waits for {} (see `vouch approvals`)",
                    open.join(", ")
                )
            }));
        }
        let hashes: Vec<&str> = mine.iter().map(|c| c.payload_hash.as_str()).collect();
        vouch_core::approval::match_hash(given, &hashes)
            .map(str::to_string)
            .map_err(|e| {
                let open = mine
                    .iter()
                    .rev()
                    .find(|c| c.state == CardState::Open)
                    .map(|c| {
                        format!(
                            "; the card of {delivery} waiting for you has hash {} (copy it from `vouch approvals`)",
                            &c.payload_hash[..c.payload_hash.len().min(vouch_core::approval::HASH_PREFIX_MIN_DIGITS)]
                        )
                    })
                    .unwrap_or_else(|| format!("; {delivery} has no open card (see `vouch approvals`)"));
                HostError::WrongHash(format!("hash for {delivery} of run {run_id}: {e}{open}"))
            })
    }
}
