//! Attempts (§8): the idempotency ledger, the provider call, observation and settling,
//! including settling an attempt whose result was lost to a crash. The only file that
//! calls a provider.

use super::rooms::{Gate, Journal, Ledger, Payloads, Views};
use super::*;

/// What an attempt may touch: the providers, the ledger, the payloads kept by hash, the run's
/// journal (its crash points and progress lines too), the run's view and the gate's facts —
/// never a card, the lease or the drafts folder. Every call of a provider's `attempt`,
/// `observe` or `holds` is a method of this room.
pub(super) struct Attempts<'h> {
    journal: Journal<'h>,
    views: Views<'h>,
    gate: Gate<'h>,
    ledger: Ledger<'h>,
    payloads: Payloads<'h>,
    providers: &'h BTreeMap<DestinationKind, Arc<dyn Provider>>,
    /// Same-key retries for providers that deduplicate by key (§8.3).
    key_retries_max: u32,
}

impl Host {
    pub(super) fn attempts(&self) -> Attempts<'_> {
        Attempts {
            journal: Journal::of(self),
            views: Views::of(self),
            gate: Gate::of(self),
            ledger: Ledger::of(self),
            payloads: Payloads::of(self),
            providers: &self.providers,
            key_retries_max: self.limits.key_retries_max,
        }
    }
}

impl Attempts<'_> {
    /// The approved payload, read back by hash and re-hashed before execution (I4).
    pub(super) fn execute_approved(&self, run: &RunRecord, id: &str, hash: &str) -> HostResult<()> {
        let view = self.views.view(&run.id)?;
        let Some(m) = view.manifest.clone() else {
            return Ok(());
        };
        let Some(d) = m.delivery(id).cloned() else {
            return Ok(());
        };
        // Kept by its hash, and read back only if it still hashes to it.
        match self.payloads.read(hash)? {
            Some(payload) => {
                let irreversible = is_irreversible(self.gate.facts(&d));
                self.perform(run, &d, &payload, hash, irreversible, Posture::Confirm)?;
            }
            None => {
                self.journal.append_for(
                    &run.id,
                    id,
                    j::Evidence {
                        posture: Some(Posture::Confirm),
                        ..j::Evidence::of(
                            DeliveryStatus::RefusedMismatch,
                            "",
                            "the stored payload no longer matches the approved hash",
                        )
                    },
                )?;
                self.journal.say(&format!(
                    "  ✋ {id} stopped: the content changed after approval"
                ));
            }
        }
        Ok(())
    }

    /// Attempt, observe, record evidence. Irreversible acts go through the ledger (§8).
    pub(super) fn perform(
        &self,
        run: &RunRecord,
        d: &vouch_core::Delivery,
        payload: &Value,
        hash: &str,
        irreversible: bool,
        posture: Posture,
    ) -> HostResult<DeliveryStatus> {
        let Some(provider) = self.providers.get(&d.destination.kind).cloned() else {
            self.journal.append_for(
                &run.id,
                &d.id,
                j::Evidence::of(
                    DeliveryStatus::Declined,
                    "",
                    "no provider for this destination",
                ),
            )?;
            return Ok(DeliveryStatus::Declined);
        };
        let key = irreversible.then(|| ledger_key(&run.scope, &d.id, hash));
        if let Some(key) = &key {
            if let Some(status) = self.through_ledger(run, d, payload, hash, key, posture)? {
                return Ok(status);
            }
        }
        let req = attempt_request(&run.id, d, payload, hash, key.clone());
        self.journal.append_for(
            &run.id,
            &d.id,
            j::AttemptStarted {
                payload_hash: hash.to_string(),
                payload: payload.clone(),
                key: key.clone(),
                posture: Some(posture),
                retry_same_key: false,
            },
        )?;
        self.journal
            .say(&format!("  → {} {} {}", d.id, d.verb, d.destination));
        let mut reply = provider.attempt(&req);
        self.journal.crash_point("provider_effect", Some(&d.id))?;
        if key.is_some() {
            reply = self.retry_same_key(&run.id, &d.id, provider.as_ref(), &req, reply)?;
        }
        self.journal.append_for(
            &run.id,
            &d.id,
            j::AttemptFinished {
                reply: reply_record(&reply),
                retrying_same_key: false,
            },
        )?;
        let obs = provider.observe(&req, Some(&reply));
        let (status, evidence, reason) = judge(&reply, &obs);
        self.settle(run, d, key.as_deref(), status, &evidence, &reason, posture)?;
        Ok(status)
    }

    /// Saving identical bytes over a file is no change (issue 22 #8): when the provider reads
    /// the destination and finds exactly this payload there, the item is verified by that
    /// reading — nothing is attempted and no approval is asked — so a routine that rewrites
    /// the same file does not stall its schedule.
    pub(super) fn unchanged(
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
        self.journal
            .say(&format!("  = {} {}: {evidence}", d.id, d.destination));
        self.journal.append_for(
            &run.id,
            &d.id,
            j::Evidence {
                posture: Some(Posture::Execute),
                ..j::Evidence::of(DeliveryStatus::Verified, evidence, "")
            },
        )?;
        Ok(true)
    }

    /// The ledger's intent for an irreversible act (§8.2), before it is attempted: `None` to
    /// go on, or the status the ledger already recorded (the act is never executed again).
    fn through_ledger(
        &self,
        run: &RunRecord,
        d: &vouch_core::Delivery,
        payload: &Value,
        hash: &str,
        key: &str,
        posture: Posture,
    ) -> HostResult<Option<DeliveryStatus>> {
        let entry = LedgerEntry {
            key: key.to_string(),
            scope: run.scope.clone(),
            run_id: run.id.clone(),
            delivery: d.id.clone(),
            payload_hash: hash.to_string(),
            state: LedgerState::Intended,
            attempts: 1,
            detail: json!({}),
            updated_ms: self.journal.now(),
        };
        match self.intend(&run.id, &entry)? {
            LedgerIntent::Proceed(_) => {
                self.journal.append_for(
                    &run.id,
                    &d.id,
                    j::LedgerIntent {
                        key: key.to_string(),
                        payload_hash: hash.to_string(),
                        payload: payload.clone(),
                    },
                )?;
            }
            // The planted defect (test builds with the `planted-defect` feature only):
            // the ledger's answer is ignored and the act executes again.
            #[cfg(feature = "planted-defect")]
            LedgerIntent::Recorded(_) if planted_ledger_defect() => {}
            LedgerIntent::Recorded(prev) => {
                // Never executed again: return the recorded outcome (§8.2).
                let outcome = recorded(&prev);
                let status = outcome.0;
                self.journal_recorded(&run.id, &d.id, posture, &prev, outcome)?;
                return Ok(Some(status));
            }
        }
        Ok(None)
    }

    /// Write an act's ledger intent (§8.2). A key still `intended` holds only its intent when
    /// nothing can still be attempting it: its run has ended (that run's reconciliation
    /// settled every attempt it had started), or it is this very run, driven here, whose
    /// journal holds no started attempt under the key (a process of it died between the
    /// intent and `attempt_started`). Since `attempt_started` is durable before any provider
    /// call, such an act never ran — the event recording its intent was lost with the process.
    /// It is settled `failed` and intended again, so it is attempted again like any key whose
    /// intent alone a crash left (§8.3.1, §8.1.1). Two runs racing for it: the store's
    /// conditional updates let one proceed; the other reads it recorded.
    fn intend(&self, run_id: &str, entry: &LedgerEntry) -> HostResult<LedgerIntent> {
        let first = self.ledger.intend(entry)?;
        let LedgerIntent::Recorded(prev) = &first else {
            return Ok(first);
        };
        if prev.state != LedgerState::Intended {
            return Ok(first);
        }
        let never_ran = if prev.run_id == run_id {
            let view = self.views.view(run_id)?;
            !view.items.get(&entry.delivery).is_some_and(|i| {
                i.open_attempt
                    .as_ref()
                    .is_some_and(|a| a.key.as_deref() == Some(entry.key.as_str()))
            })
        } else {
            self.ledger.holder_ended(&prev.run_id)?
        };
        if !never_ran {
            return Ok(first);
        }
        let detail = json!({"status": DeliveryStatus::NotAttempted, "evidence": "",
            "reason": format!("run {} ended before the attempt started", prev.run_id)});
        match self
            .ledger
            .settle(&entry.key, LedgerState::Failed, &detail, self.journal.now())
        {
            Ok(()) | Err(HostError::Store(StoreError::Conflict(_))) => {}
            Err(e) => return Err(e),
        }
        self.ledger.intend(entry)
    }

    /// The one same-key retry path (§8.3), used by a live attempt and by settling an attempt
    /// a crash interrupted: while the reply was lost and the provider deduplicates by key,
    /// try again with the same key, up to `key_retries_max` times. The caller has checked
    /// that the act carries a ledger key.
    pub(super) fn retry_same_key(
        &self,
        run_id: &str,
        delivery: &str,
        provider: &dyn Provider,
        req: &AttemptRequest,
        mut reply: AttemptReply,
    ) -> HostResult<AttemptReply> {
        let mut retries = 0;
        while matches!(reply, AttemptReply::Lost { .. })
            && provider.idempotent_by_key(&req.destination)
            && retries < self.key_retries_max
        {
            retries += 1;
            self.journal.append_for(
                run_id,
                delivery,
                j::AttemptFinished {
                    reply: reply_record(&reply),
                    retrying_same_key: true,
                },
            )?;
            reply = provider.attempt(req);
        }
        Ok(reply)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn settle(
        &self,
        run: &RunRecord,
        d: &vouch_core::Delivery,
        key: Option<&str>,
        status: DeliveryStatus,
        evidence: &str,
        reason: &str,
        posture: Posture,
    ) -> HostResult<()> {
        if let Some(key) = key {
            let state = match status {
                DeliveryStatus::Verified | DeliveryStatus::Unconfirmed => LedgerState::Done,
                DeliveryStatus::Failed | DeliveryStatus::NotAttempted => LedgerState::Failed,
                _ => LedgerState::Unknown,
            };
            self.ledger.settle(
                key,
                state,
                &json!({"status": status, "evidence": evidence}),
                self.journal.now(),
            )?;
        }
        self.journal.append_for(
            &run.id,
            &d.id,
            j::Evidence {
                posture: Some(posture),
                ..j::Evidence::of(status, evidence, reason)
            },
        )?;
        let mark = vouch_core::receipt::status_mark(status);
        self.journal.say(&format!(
            "  {mark} {} {status}{}",
            d.id,
            if evidence.is_empty() {
                String::new()
            } else {
                format!(" ({evidence})")
            }
        ));
        Ok(())
    }

    /// An interrupted attempt whose key the ledger already holds settled (§8.3.2): the
    /// outcome became durable with the ledger row, and only the `evidence` event after it was
    /// lost with the process's buffer (§3.4.2). The ledger's record is the evidence; nothing is
    /// observed or attempted again, and the settled key is never settled a second time.
    fn settled_in_ledger(
        &self,
        run: &RunRecord,
        d: &vouch_core::Delivery,
        key: Option<&str>,
        posture: Posture,
    ) -> HostResult<bool> {
        let Some(key) = key else {
            return Ok(false);
        };
        let Some(prev) = self.ledger.get(key)? else {
            return Ok(false);
        };
        let status = match (prev.state, recorded_status(&prev.detail)) {
            (LedgerState::Intended, _) => return Ok(false),
            (_, Some(s)) => s,
            (LedgerState::Done, None) => DeliveryStatus::Unconfirmed,
            (LedgerState::Failed, None) => DeliveryStatus::Failed,
            (LedgerState::Unknown, None) => DeliveryStatus::Unknown,
        };
        let evidence = prev
            .detail
            .get("evidence")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let reason = if status == DeliveryStatus::Verified {
            String::new()
        } else {
            format!(
                "the ledger recorded this act as {} before the process stopped",
                prev.state.as_str()
            )
        };
        self.journal_recorded(&run.id, &d.id, posture, &prev, (status, evidence, reason))?;
        Ok(true)
    }

    /// Journal the evidence of an act whose outcome the ledger already holds (`prev`), as
    /// `outcome` (status, evidence, reason) reads it, with the ledger's state beside it: the
    /// act is neither observed nor attempted again.
    fn journal_recorded(
        &self,
        run_id: &str,
        delivery: &str,
        posture: Posture,
        prev: &LedgerEntry,
        (status, evidence, reason): (DeliveryStatus, String, String),
    ) -> HostResult<()> {
        self.journal.append_for(
            run_id,
            delivery,
            j::Evidence {
                posture: Some(posture),
                ledger: Some(prev.state.as_str().to_string()),
                ..j::Evidence::of(status, evidence, reason)
            },
        )
    }

    /// Settle an attempt whose result was lost to a crash (§8.3, §9.2).
    pub(super) fn settle_open_attempt(
        &self,
        run: &RunRecord,
        view: &RunView,
        id: &str,
    ) -> HostResult<()> {
        let Some(item) = view.items.get(id) else {
            return Ok(());
        };
        let Some(open) = &item.open_attempt else {
            return Ok(());
        };
        let Some(d) = view.manifest.as_ref().and_then(|m| m.delivery(id)).cloned() else {
            return Ok(());
        };
        let posture = item.posture.unwrap_or(Posture::Execute);
        if self.settled_in_ledger(run, &d, open.key.as_deref(), posture)? {
            return Ok(());
        }
        let Some(provider) = self.providers.get(&d.destination.kind).cloned() else {
            return self.settle(
                run,
                &d,
                open.key.as_deref(),
                DeliveryStatus::Unknown,
                "",
                "interrupted; no provider to check with",
                posture,
            );
        };
        let req = attempt_request(
            &run.id,
            &d,
            &open.payload,
            &open.payload_hash,
            open.key.clone(),
        );
        let (status, evidence, reason) =
            self.observe_open(run, &d, open, posture, provider.as_ref(), &req)?;
        let key = open.key.as_deref();
        self.settle(run, &d, key, status, &evidence, &reason, posture)
    }

    /// What became of an attempt a crash left open, by the provider's observation (§8.3):
    /// the destination holds it, it provably never ran, or — unobservable — a same-key retry
    /// where the provider deduplicates, else unknown.
    fn observe_open(
        &self,
        run: &RunRecord,
        d: &vouch_core::Delivery,
        open: &crate::view::OpenAttempt,
        posture: Posture,
        provider: &dyn Provider,
        req: &AttemptRequest,
    ) -> HostResult<(DeliveryStatus, String, String)> {
        let retries_by_key = open.key.is_some() && provider.idempotent_by_key(&d.destination);
        Ok(match provider.observe(req, None) {
            Observation::Present { evidence } => {
                (DeliveryStatus::Verified, evidence, String::new())
            }
            Observation::Absent { .. } if !open.started => (
                DeliveryStatus::NotAttempted,
                String::new(),
                "interrupted before it was attempted".into(),
            ),
            Observation::Absent { reason } => (
                DeliveryStatus::Failed,
                String::new(),
                format!("interrupted before it took effect ({reason})"),
            ),
            // §8.3.1: `attempt_started` is durable before any provider call, so an act whose
            // key holds only its intent provably never ran, wherever it was going: the key is
            // `failed` and a continuation or a later attempt does it (§8.1.1).
            Observation::Unobservable if !open.started && !retries_by_key => (
                DeliveryStatus::NotAttempted,
                String::new(),
                "interrupted before it was attempted".into(),
            ),
            // Retry with the same key: the provider deduplicates (§8.3).
            Observation::Unobservable if retries_by_key => {
                self.retry_open(run, &d.id, open, posture, provider, req)?
            }
            Observation::Unobservable => (
                DeliveryStatus::Unknown,
                String::new(),
                "the process stopped while it was being sent".into(),
            ),
        })
    }

    /// Attempt again with the same key an attempt a crash left open (its provider
    /// deduplicates by key, §8.3), and judge the reply.
    fn retry_open(
        &self,
        run: &RunRecord,
        id: &str,
        open: &crate::view::OpenAttempt,
        posture: Posture,
        provider: &dyn Provider,
        req: &AttemptRequest,
    ) -> HostResult<(DeliveryStatus, String, String)> {
        self.journal.append_for(
            &run.id,
            id,
            j::AttemptStarted {
                payload_hash: open.payload_hash.clone(),
                payload: open.payload.clone(),
                key: open.key.clone(),
                posture: Some(posture),
                retry_same_key: true,
            },
        )?;
        let reply = provider.attempt(req);
        let reply = self.retry_same_key(&run.id, id, provider, req, reply)?;
        self.journal.append_for(
            &run.id,
            id,
            j::AttemptFinished {
                reply: reply_record(&reply),
                retrying_same_key: false,
            },
        )?;
        let obs = provider.observe(req, Some(&reply));
        Ok(judge(&reply, &obs))
    }
}

/// The request a provider is given for one attempt of a delivery.
fn attempt_request(
    run_id: &str,
    d: &vouch_core::Delivery,
    payload: &Value,
    hash: &str,
    key: Option<String>,
) -> AttemptRequest {
    AttemptRequest {
        run_id: run_id.to_string(),
        delivery: d.id.clone(),
        verb: d.verb,
        destination: d.destination.clone(),
        payload: payload.clone(),
        payload_hash: hash.to_string(),
        idempotency_key: key,
    }
}

/// The status, evidence and reason of an act the ledger already holds (§8.2).
fn recorded(prev: &LedgerEntry) -> (DeliveryStatus, String, String) {
    let (status, reason) = match prev.state {
        LedgerState::Done => recorded_done(&prev.detail),
        _ => (
            DeliveryStatus::Unknown,
            format!(
                "the ledger already holds this act as {}",
                prev.state.as_str()
            ),
        ),
    };
    let evidence = prev
        .detail
        .get("evidence")
        .and_then(Value::as_str)
        .unwrap_or("ledger")
        .to_string();
    (status, evidence, reason)
}

/// What a `done` key recorded (§8.1.1): `verified` only when its evidence was; an act whose
/// reply confirmed nothing stays `unconfirmed` when proposed again — no status is raised to
/// `verified` without new evidence (§6.2.1, I2), and a record that does not say is read as
/// the weaker one.
fn recorded_done(detail: &Value) -> (DeliveryStatus, String) {
    match recorded_status(detail) {
        Some(DeliveryStatus::Verified) => (DeliveryStatus::Verified, String::new()),
        _ => (
            DeliveryStatus::Unconfirmed,
            "an earlier attempt did this and its reply confirmed nothing; it is not done again"
                .into(),
        ),
    }
}

/// The status a ledger row's detail recorded, if it says one it can be read as.
fn recorded_status(detail: &Value) -> Option<DeliveryStatus> {
    detail
        .get("status")
        .cloned()
        .and_then(|s| serde_json::from_value::<DeliveryStatus>(s).ok())
}

/// Is the planted ledger defect switched on (`VOUCH_PLANTED_DEFECT=ledger`)? Compiled only
/// with the `planted-defect` feature, which only the simulator's test enables.
#[cfg(feature = "planted-defect")]
fn planted_ledger_defect() -> bool {
    std::env::var("VOUCH_PLANTED_DEFECT").is_ok_and(|v| v == "ledger")
}
