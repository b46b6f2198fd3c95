//! The narrow contexts transitions take instead of the whole host. Each holds only the parts
//! of the host its transitions may touch, behind fields private to this file, so a transition
//! handed one cannot reach anything else: what a file may touch is a type, not prose.
//! `Host` builds them (`Journal::of(host)` …); the transition files compose them into their
//! own room (`manifest::Declare`, `manifest::Preflight`, `manifest::Clarify`,
//! `attempt::Attempts`, `proposal::Proposals`, `proposal::Route`, `decisions::Decisions`).

use super::*;

/// A run's journal and the host's voice: append typed events through the host's one append
/// path (buffered to the next durability point, folded into the drive, crash points), say a
/// progress line, read the clock.
#[derive(Clone, Copy)]
pub(super) struct Journal<'h> {
    host: &'h Host,
}

impl<'h> Journal<'h> {
    pub(super) fn of(host: &'h Host) -> Self {
        Journal { host }
    }

    /// Append a run-level event.
    pub(super) fn append(&self, run_id: &str, event: impl Into<Event>) -> HostResult<()> {
        self.host.journal(run_id, self.host.ev(event))
    }

    /// Append an event about one delivery.
    pub(super) fn append_for(
        &self,
        run_id: &str,
        delivery: &str,
        event: impl Into<Event>,
    ) -> HostResult<()> {
        self.host.journal(run_id, self.host.evd(delivery, event))
    }

    pub(super) fn say(&self, line: &str) {
        self.host.say(line)
    }

    pub(super) fn now(&self) -> i64 {
        self.host.now()
    }

    /// The crash point of an effect that is no event of ours (a provider's call): the plan
    /// may stop the process right after it, as after an append.
    pub(super) fn crash_point(&self, point: &str, delivery: Option<&str>) -> HostResult<()> {
        self.host.crash_point(point, delivery)
    }
}

/// A run's row: its record, its lease and its state. Taking the lease may take over a run
/// whose holder is known to have exited (§9.2.5); releasing lets go of this host's own.
#[derive(Clone, Copy)]
pub(super) struct Runs<'h> {
    host: &'h Host,
}

impl<'h> Runs<'h> {
    pub(super) fn of(host: &'h Host) -> Self {
        Runs { host }
    }

    pub(super) fn record(&self, run_id: &str) -> HostResult<RunRecord> {
        self.host.record(run_id)
    }

    pub(super) fn lease(&self, run_id: &str) -> HostResult<()> {
        self.host.lease(run_id)
    }

    pub(super) fn set_state(&self, run_id: &str, state: RunState) -> HostResult<()> {
        Ok(self.host.store.set_run_state(run_id, state)?)
    }

    /// Leave the run waiting, unowned: suspended, and this host's lease let go.
    pub(super) fn park(&self, run_id: &str) -> HostResult<()> {
        self.host.store.set_run_state(run_id, RunState::Suspended)?;
        Ok(self.host.store.release_run(run_id, &self.host.owner)?)
    }
}

/// The approval cards (§7) and the question's card: open, read, decide, answer, close.
/// Nothing else of the store.
#[derive(Clone, Copy)]
pub(super) struct Cards<'h> {
    store: &'h dyn Store,
    clock: &'h dyn Clock,
}

impl<'h> Cards<'h> {
    pub(super) fn of(host: &'h Host) -> Self {
        Cards {
            store: host.store.as_ref(),
            clock: host.clock.as_ref(),
        }
    }

    pub(super) fn open(&self, card: &Card) -> HostResult<()> {
        Ok(self.store.open_card(card)?)
    }

    pub(super) fn of_run(&self, run_id: &str) -> HostResult<Vec<Card>> {
        Ok(self.store.cards_for_run(run_id)?)
    }

    /// Whether any card of the run still waits for the person.
    pub(super) fn any_open(&self, run_id: &str) -> HostResult<bool> {
        Ok(self
            .of_run(run_id)?
            .iter()
            .any(|c| c.state == CardState::Open))
    }

    pub(super) fn decide(
        &self,
        run_id: &str,
        delivery: &str,
        hash: &str,
        decision: Decision,
    ) -> HostResult<()> {
        self.store
            .decide_card(run_id, delivery, hash, decision, self.clock.now_ms())?;
        Ok(())
    }

    pub(super) fn answer(&self, run_id: &str, text: &str) -> HostResult<()> {
        self.store
            .answer_clarify(run_id, text, self.clock.now_ms())?;
        Ok(())
    }

    /// Close every open card of the run: an ended run leaves nothing to decide.
    pub(super) fn close_all(&self, run_id: &str) -> HostResult<()> {
        self.store.close_cards(run_id, self.clock.now_ms())?;
        Ok(())
    }

    /// The card hash a person gave back (§7): the full hash or a unique prefix of at least
    /// 12 hex digits, among the cards of (run, delivery). A delivery without cards and a hash
    /// that matches none get different messages, each saying what to do next.
    pub(super) fn resolve_hash(
        &self,
        run_id: &str,
        delivery: &str,
        given: &str,
    ) -> HostResult<String> {
        let cards = self.of_run(run_id)?;
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

/// Payloads kept by their hash (§9.5, I4): the exact bytes a draft or an approval card stands
/// for, so finishing or approving it acts on exactly them.
#[derive(Clone, Copy)]
pub(super) struct Payloads<'h> {
    store: &'h dyn Store,
}

impl<'h> Payloads<'h> {
    pub(super) fn of(host: &'h Host) -> Self {
        Payloads {
            store: host.store.as_ref(),
        }
    }

    /// Keep `payload` under `hash`, in its canonical form.
    pub(super) fn keep(&self, hash: &str, payload: &Value) -> HostResult<()> {
        let canonical = canonical_json(payload).map_err(|e| HostError::Internal(e.to_string()))?;
        Ok(self.store.put_payload(hash, &canonical)?)
    }

    /// The payload kept under `hash`, only if it still hashes to it.
    pub(super) fn read(&self, hash: &str) -> HostResult<Option<Value>> {
        let Some(text) = self.store.payload(hash)? else {
            return Ok(None);
        };
        let Ok(v) = serde_json::from_str::<Value>(&text) else {
            return Ok(None);
        };
        Ok((payload_hash(&v).ok().as_deref() == Some(hash)).then_some(v))
    }
}

/// The idempotency ledger (§8): an irreversible act's intent and its settled outcome, by key.
/// Nothing else of the store but whether the run that wrote an intent has ended.
#[derive(Clone, Copy)]
pub(super) struct Ledger<'h> {
    store: &'h dyn Store,
}

impl<'h> Ledger<'h> {
    pub(super) fn of(host: &'h Host) -> Self {
        Ledger {
            store: host.store.as_ref(),
        }
    }

    /// Write an act's intent, or read the entry its key already holds.
    pub(super) fn intend(&self, entry: &LedgerEntry) -> HostResult<LedgerIntent> {
        Ok(self.store.ledger_intend(entry)?)
    }

    pub(super) fn settle(
        &self,
        key: &str,
        state: LedgerState,
        detail: &Value,
        at_ms: i64,
    ) -> HostResult<()> {
        Ok(self.store.ledger_settle(key, state, detail, at_ms)?)
    }

    pub(super) fn get(&self, key: &str) -> HostResult<Option<LedgerEntry>> {
        Ok(self.store.ledger_get(key)?)
    }

    /// Whether the run that wrote an intent has ended (a run the store lacks has not).
    pub(super) fn holder_ended(&self, run_id: &str) -> HostResult<bool> {
        Ok(self
            .store
            .run(run_id)?
            .is_some_and(|r| r.state == RunState::Ended))
    }
}

/// What the posture decision answers for an item: the posture, the rule that gave it, the
/// capability's answer, and whether the act is irreversible.
pub(super) type PostureAnswer = (
    Posture,
    vouch_core::Rule,
    crate::capability::CapabilityAnswer,
    bool,
);

/// The posture decision's inputs beside the run and its manifest (§4, §5): the capability
/// registry, which providers exist (and what their destination already holds), the runtime
/// policy. Pure reads: it answers, it never journals.
#[derive(Clone, Copy)]
pub(super) struct Gate<'h> {
    caps: &'h dyn CapabilityRegistry,
    providers: &'h BTreeMap<DestinationKind, Arc<dyn Provider>>,
    policy_forbid: &'h [(Context, Verb)],
}

impl<'h> Gate<'h> {
    pub(super) fn of(host: &'h Host) -> Self {
        Gate {
            caps: host.caps.as_ref(),
            providers: &host.providers,
            policy_forbid: &host.policy_forbid,
        }
    }

    /// The facts of an act the posture rules read: a save overwrites when its destination
    /// already exists.
    pub(super) fn facts(&self, d: &vouch_core::Delivery) -> ActFacts {
        let overwrites = d.verb == Verb::Save
            && self
                .providers
                .get(&d.destination.kind)
                .map(|p| p.exists(&d.destination))
                .unwrap_or(false);
        ActFacts {
            verb: d.verb,
            kind: d.destination.kind,
            has_other_attendees: !d.attendees.is_empty(),
            overwrites_existing: overwrites,
        }
    }

    pub(super) fn decide_posture(
        &self,
        run: &RunRecord,
        m: &Manifest,
        d: &vouch_core::Delivery,
        clarify_used: bool,
    ) -> HostResult<PostureAnswer> {
        let context = run.trigger.context();
        let act = self.facts(d);
        let irreversible = is_irreversible(act);
        let mut cap = self
            .caps
            .probe(d.verb, &d.destination, context, irreversible);
        if cap.level >= vouch_core::Capability::Executable
            && !self.providers.contains_key(&d.destination.kind)
        {
            // Configured as executable but nothing here can carry it out.
            cap = crate::capability::CapabilityAnswer {
                level: vouch_core::Capability::Unavailable,
                connect_step: None,
            };
        }
        let forbidden = m.is_forbidden(d.verb, &d.destination)
            || self.policy_forbid.contains(&(context, d.verb));
        let (p, rule) = posture(PostureInput {
            act,
            capability: cap.level,
            confidence: d.confidence,
            context,
            clarify_used,
            forbidden,
        });
        Ok((p, rule, cap, irreversible))
    }
}

/// A run's view (§6.1): the drive's own while this process drives the run, else folded from
/// its journal. Reads only.
#[derive(Clone, Copy)]
pub(super) struct Views<'h> {
    host: &'h Host,
}

impl<'h> Views<'h> {
    pub(super) fn of(host: &'h Host) -> Self {
        Views { host }
    }

    pub(super) fn view(&self, run_id: &str) -> HostResult<RunView> {
        self.host.view(run_id)
    }
}
