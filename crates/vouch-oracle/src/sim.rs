//! The scenario simulated against the contract: turns, decisions and crashes in order,
//! with the one terminal computing the answer. Pure: no I/O, no clock.

use crate::rules::{self, PostureFacts};
use indexmap::IndexMap;
use serde_json::Value;
use std::collections::{HashMap, VecDeque};
use vouch_core::{
    Capability, Delivery, DeliveryStatus, Destination, DestinationKind, EndedBy, Manifest, Outcome,
    Posture, Verb,
};
use vouch_scenario::{
    Behavior, CatchUp, Citation, CrashEvent, Decision, DeliveryReport, Fault, Gap, ReportState,
    Scenario, ScenarioReport, Turn,
};

/// Same-key retries after a lost result (§8.3 "bounded").
pub const RETRIES_MAX: u32 = 3;
/// Script turns the oracle accepts; longer scripts are reported as a GAP, never truncated.
pub const TURNS_MAX: usize = 100_000;

/// The host died right after `event` became durable.
#[derive(Debug)]
struct Crash {
    event: CrashEvent,
    delivery: Option<String>,
}

type Step<T> = Result<T, Crash>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Open {
    /// Ledger intent committed, attempt not started.
    Intent,
    /// Attempt started, the provider has not applied anything.
    Started,
    /// The provider applied the effect; nothing about it is journaled.
    Effected,
}

#[derive(Debug, Clone)]
struct Item {
    d: Delivery,
    capability: Capability,
    irreversible: bool,
    posture: Posture,
    status: Option<DeliveryStatus>,
    /// The contract does not decide this item's status (a GAP was reported).
    status_open: bool,
    /// The last proposal was held back by an `order` dependency.
    blocked: bool,
    open: Option<Open>,
    /// The payload on the open approval card.
    card: Option<Value>,
    /// The payload the person approved (the approval binds to its hash, §7).
    approved: Option<Value>,
}

#[derive(Debug, Clone)]
enum Card {
    Approval { id: String, turn: usize },
    Clarify { about: Vec<String> },
}

#[derive(Debug, Clone)]
enum Phase {
    Running,
    Suspended(Card),
    Ended(EndedBy),
}

enum Flow {
    Next,
    Suspend(Card),
    EndLoop,
}

pub struct Sim<'a> {
    s: &'a Scenario,
    interactive: bool,
    manifest: Option<Manifest>,
    items: IndexMap<String, Item>,
    clarify_used: bool,
    phase: Phase,
    pc: usize,
    resume_pc: usize,
    decisions: VecDeque<&'a Decision>,
    faults: Vec<(&'a Fault, bool)>,
    counts: HashMap<(CrashEvent, Option<String>), u32>,
    calls: HashMap<String, u32>,
    missed: bool,
    rules: Vec<Citation>,
    gaps: Vec<Gap>,
    /// A GAP that leaves the run's aggregate fields (outcome, attention, …) undecided.
    aggregate_open: bool,
    /// `submit` turns the run reached: (turn index, the manifest was declared by then).
    submits: Vec<(usize, bool)>,
    /// `tool` turns the run reached, the same way (the host's read tools, §13.7.3).
    tools: Vec<(usize, bool)>,
    /// What earlier runs in the same ledger scope left behind (a task's earlier attempts).
    carry: Carry,
    /// A task run whose task is cancelled while the model answers this turn (0-based).
    cancel_at: Option<usize>,
    /// The ledger key of each irreversible item this run attempted.
    ledger_keys: HashMap<String, String>,
}

/// State that outlives one run of a task: the providers' calls (a world behaviour applies to
/// the first call at a destination only) and the ledger of irreversible acts, keyed like §8.1
/// within the task's scope (delivery id, destination, payload) with the status it reached.
#[derive(Debug, Clone, Default)]
pub struct Carry {
    pub calls: HashMap<String, u32>,
    pub ledger: HashMap<String, DeliveryStatus>,
    /// Delivery ids that were irreversible in some run.
    pub irreversible: Vec<String>,
}

/// What a task run did besides its report: the `submit` turns it reached, in order, each
/// with whether the manifest was declared by then (§3.4), and whether it ended suspended.
#[derive(Debug, Clone, Default)]
pub struct RunDetail {
    pub submits: Vec<(usize, bool)>,
    /// `tool` turns the run reached, each with whether the manifest was declared by then.
    pub tools: Vec<(usize, bool)>,
    pub carry: Carry,
}

impl<'a> Sim<'a> {
    pub fn new(s: &'a Scenario) -> Self {
        Sim {
            s,
            interactive: s.trigger.kind == vouch_core::TriggerKind::Interactive,
            manifest: None,
            items: IndexMap::new(),
            clarify_used: false,
            phase: Phase::Running,
            pc: 0,
            resume_pc: 0,
            decisions: s.decisions.iter().collect(),
            faults: s.faults.iter().map(|f| (f, false)).collect(),
            counts: HashMap::new(),
            calls: HashMap::new(),
            missed: false,
            rules: Vec::new(),
            gaps: Vec::new(),
            aggregate_open: false,
            submits: Vec::new(),
            tools: Vec::new(),
            carry: Carry::default(),
            ledger_keys: HashMap::new(),
            cancel_at: None,
        }
    }

    /// The task is cancelled while the model answers turn `turn` (0-based, §9.4.1).
    pub fn cancelled_at(mut self, turn: Option<usize>) -> Self {
        self.cancel_at = turn;
        self
    }

    /// Start from what earlier runs of the same ledger scope left behind.
    pub fn with_carry(mut self, carry: Carry) -> Self {
        self.calls = carry.calls.clone();
        self.carry = carry;
        self
    }

    fn cite(&mut self, rule: &str, section: &str) {
        if !self.rules.iter().any(|c| c.rule == rule) {
            self.rules.push(Citation {
                rule: rule.into(),
                section: section.into(),
            });
        }
    }

    fn gap(&mut self, question: String) {
        let g = Gap { question };
        if !self.gaps.contains(&g) {
            self.gaps.push(g);
        }
    }

    // ------------------------------------------------------------------ the driver

    pub fn run(self) -> ScenarioReport {
        self.run_detailed().0
    }

    fn finish(mut self) -> (ScenarioReport, RunDetail) {
        let mut carry = std::mem::take(&mut self.carry);
        carry.calls = self.calls.clone();
        for (id, k) in &self.ledger_keys {
            if let Some(st) = self.items.get(id).and_then(|i| i.status) {
                carry.ledger.insert(k.clone(), st);
            }
        }
        for it in self.items.values() {
            if it.irreversible && !carry.irreversible.contains(&it.d.id) {
                carry.irreversible.push(it.d.id.clone());
            }
        }
        let detail = RunDetail {
            submits: std::mem::take(&mut self.submits),
            tools: std::mem::take(&mut self.tools),
            carry,
        };
        (self.report(), detail)
    }

    /// Run the scenario's script; the report and what the run did besides.
    pub fn run_detailed(mut self) -> (ScenarioReport, RunDetail) {
        let t = &self.s.trigger;
        if t.kind == vouch_core::TriggerKind::Scheduled && !t.ran {
            self.cite("schedule.missed", "§12.3");
            if t.catch_up == CatchUp::Skip {
                self.missed = true;
                self.phase = Phase::Ended(EndedBy::Schedule);
                return self.finish();
            }
            // §12.3.1: the report describes the one late run.
            self.cite("schedule.catch_up_latest", "§12.3");
        }
        if self.s.script.len() > TURNS_MAX {
            self.gap(format!(
                "the script has more than {TURNS_MAX} turns; the oracle does not evaluate it"
            ));
            self.aggregate_open = true;
            self.phase = Phase::Ended(EndedBy::Loop);
            return self.finish();
        }
        let steps_max =
            4 * (self.s.script.len() + self.s.decisions.len() + self.s.faults.len()) + 64;
        for _ in 0..steps_max {
            match self.phase.clone() {
                Phase::Running => {
                    if self.cancel_at == Some(self.pc) {
                        // §9.4.1: the answer under way is not acted on; nothing more is asked.
                        self.cite("cancel.stops_the_work", "§9.4.1");
                        let _ = self.decide(&Card::Clarify { about: vec![] }, &Decision::Cancel);
                        continue;
                    }
                    if self.pc >= self.s.script.len() {
                        self.end(EndedBy::Loop);
                        continue;
                    }
                    let i = self.pc;
                    match self.turn(i) {
                        Ok(Flow::Next) => self.pc = i + 1,
                        Ok(Flow::Suspend(card)) => {
                            self.pc = i + 1;
                            self.phase = Phase::Suspended(card);
                        }
                        Ok(Flow::EndLoop) => {
                            self.pc = i + 1;
                            self.end(EndedBy::Loop);
                        }
                        Err(c) => self.crashed(c, i),
                    }
                }
                Phase::Suspended(card) => {
                    let Some(d) = self.decisions.front().copied() else {
                        break;
                    };
                    if !answers(&card, d) {
                        break;
                    }
                    self.decisions.pop_front();
                    let turn = match &card {
                        Card::Approval { turn, .. } => *turn,
                        Card::Clarify { .. } => self.pc.saturating_sub(1),
                    };
                    match self.decide(&card, d) {
                        Ok(Flow::Next) => self.phase = Phase::Running,
                        Ok(Flow::Suspend(c)) => self.phase = Phase::Suspended(c),
                        Ok(Flow::EndLoop) => {}
                        Err(c) => self.crashed(c, turn),
                    }
                }
                Phase::Ended(EndedBy::Boot) => {
                    if matches!(self.decisions.front(), Some(Decision::Resume)) {
                        self.decisions.pop_front();
                        self.continuation();
                    } else {
                        break;
                    }
                }
                Phase::Ended(_) => break,
            }
        }
        self.finish()
    }

    // ------------------------------------------------------------------ journal events

    /// Make `event` durable; a matching crash fault kills the host right after it.
    fn emit(&mut self, event: CrashEvent, delivery: Option<&str>) -> Step<()> {
        let key_all = (event, None);
        *self.counts.entry(key_all.clone()).or_default() += 1;
        let n_all = self.counts[&key_all];
        let n_one = delivery.map(|d| {
            let k = (event, Some(d.to_string()));
            *self.counts.entry(k.clone()).or_default() += 1;
            self.counts[&k]
        });
        for (f, fired) in self.faults.iter_mut() {
            if *fired {
                continue;
            }
            let Fault::CrashAfter {
                event: fe,
                delivery: fd,
                nth,
            } = f
            else {
                continue;
            };
            if *fe != event {
                continue;
            }
            let hit = match (fd, event.per_delivery()) {
                (Some(fd), true) => delivery == Some(fd.as_str()) && n_one == Some(*nth),
                _ => n_all == *nth,
            };
            if hit {
                *fired = true;
                return Err(Crash {
                    event,
                    delivery: delivery.map(String::from),
                });
            }
        }
        Ok(())
    }

    fn tamper_pending(&mut self, id: &str) -> bool {
        for (f, fired) in self.faults.iter_mut() {
            if let Fault::TamperPayload(t) = f {
                if t == id && !*fired {
                    *fired = true;
                    return true;
                }
            }
        }
        false
    }

    // ------------------------------------------------------------------ turns

    fn turn(&mut self, i: usize) -> Step<Flow> {
        let s = self.s;
        match &s.script[i] {
            Turn::Declare(m) => self.declare(m),
            Turn::Deliver { id, payload } => self.deliver(id, payload, i),
            Turn::Undeclared { .. } => {
                if self.manifest.is_none() {
                    self.cite("proposal.no_manifest", "§3.4");
                } else {
                    self.cite("proposal.undeclared", "§6");
                }
                Ok(Flow::Next)
            }
            Turn::Tool { .. } => {
                if self.manifest.is_none() {
                    self.cite("proposal.no_manifest", "§3.4");
                }
                self.tools.push((i, self.manifest.is_some()));
                Ok(Flow::Next)
            }
            Turn::Clarify(_) => {
                if self.clarify_used {
                    self.cite("clarify.cap", "§5.3");
                    Ok(Flow::Next)
                } else {
                    self.clarify_used = true;
                    self.cite("clarify.asked", "§5.3");
                    Ok(Flow::Suspend(Card::Clarify { about: vec![] }))
                }
            }
            Turn::Final(text) => self.final_text(text),
            Turn::Submit { .. } => {
                // A work tool of task runs (§13.4.1); before the manifest it is rejected
                // like any other tool (§3.4) and submits nothing.
                let declared = self.manifest.is_some();
                if !declared {
                    self.cite("proposal.no_manifest", "§3.4");
                }
                self.submits.push((i, declared));
                Ok(Flow::Next)
            }
        }
    }

    fn declare(&mut self, m: &Manifest) -> Step<Flow> {
        let amendment = self.manifest.is_some();
        let mut combined = self.manifest.clone().unwrap_or_default();
        combined.deliveries.extend(m.deliveries.iter().cloned());
        for f in &m.forbid {
            if !combined.forbid.contains(f) {
                combined.forbid.push(f.clone());
            }
        }
        for o in &m.order {
            if !combined.order.contains(o) {
                combined.order.push(o.clone());
            }
        }
        let contradicting = validate(&combined);
        if !contradicting.is_empty() {
            if !self.clarify_used {
                self.cite("manifest.rejected", "§3.3");
                self.clarify_used = true;
                self.cite("clarify.asked", "§5.3");
                return Ok(Flow::Suspend(Card::Clarify { about: vec![] }));
            }
            // §5.3: the question is spent; the run ends with the contradicting items declined.
            self.cite("manifest.rejected", "§3.3");
            self.cite("manifest.contradiction_declined", "§5.3");
            let mut kept = combined.clone();
            let mut seen: Vec<String> = Vec::new();
            kept.deliveries.retain(|d| {
                let fresh = !seen.contains(&d.id);
                seen.push(d.id.clone());
                fresh
            });
            self.manifest = Some(kept.clone());
            for d in &kept.deliveries {
                if !self.items.contains_key(&d.id) {
                    // Pre-flight declines the items a forbid covers (R1).
                    self.add_item(d.clone());
                }
                if contradicting.contains(&d.id) {
                    if let Some(it) = self.items.get_mut(&d.id) {
                        it.posture = Posture::Decline;
                        it.status = Some(DeliveryStatus::Declined);
                    }
                }
            }
            return Ok(Flow::EndLoop);
        }
        if amendment {
            self.cite("manifest.amendment", "§3.5");
        }
        self.cite("manifest.write_ahead", "§3.4");
        self.manifest = Some(combined);
        let new_ids: Vec<String> = m.deliveries.iter().map(|d| d.id.clone()).collect();
        for d in &m.deliveries {
            self.add_item(d.clone());
        }
        // Pre-flight is journaled with the manifest (§4.1): a crash after it keeps postures.
        self.emit(CrashEvent::ManifestDeclared, None)?;
        Ok(self.ask_if_unclear(&new_ids))
    }

    /// §5.3.1: the one question is asked at pre-flight, for every clarify item at once.
    fn ask_if_unclear(&mut self, ids: &[String]) -> Flow {
        let about: Vec<String> = ids
            .iter()
            .filter(|id| self.items.get(*id).map(|i| i.posture) == Some(Posture::Clarify))
            .cloned()
            .collect();
        if about.is_empty() || self.clarify_used {
            return Flow::Next;
        }
        self.clarify_used = true;
        self.cite("clarify.asked", "§5.3");
        for id in &about {
            if let Some(it) = self.items.get_mut(id) {
                it.status = Some(DeliveryStatus::Awaiting);
            }
        }
        Flow::Suspend(Card::Clarify { about })
    }

    fn add_item(&mut self, d: Delivery) {
        let id = d.id.clone();
        self.items.insert(
            id.clone(),
            Item {
                d,
                capability: Capability::Executable,
                irreversible: false,
                posture: Posture::Decline,
                status: None,
                status_open: false,
                blocked: false,
                open: None,
                card: None,
                approved: None,
            },
        );
        self.preflight(&id);
    }

    /// §4 + §5.2 for one item, citing the rule that decided.
    fn preflight(&mut self, id: &str) {
        let Some(it) = self.items.get(id) else { return };
        let d = it.d.clone();
        let w = &self.s.world;
        let mut cap = match w.configured_capability(&d.destination) {
            Some(c) => c,
            None => Capability::Executable,
        };
        let overwrites = d.verb == Verb::Save && w.exists(&d.destination);
        let irreversible = rules::irreversible(
            d.verb,
            d.destination.kind,
            !d.attendees.is_empty(),
            overwrites,
        );
        if irreversible {
            self.cite("reversibility.irreversible", "§5.4");
            if overwrites {
                self.cite("reversibility.overwrite", "§5.4");
            }
        }
        if irreversible
            && !self.interactive
            && cap >= Capability::Executable
            && w.automation_covers(d.verb, &d.destination)
        {
            cap = Capability::Automatable;
            self.cite("capability.automatable", "§4");
        }
        let forbidden = self
            .manifest
            .as_ref()
            .map(|m| {
                m.forbid
                    .iter()
                    .any(|f| forbid_covers(f, d.verb, &d.destination))
            })
            .unwrap_or(false);
        let facts = PostureFacts {
            verb: d.verb,
            kind: d.destination.kind,
            capability: cap,
            confidence: d.confidence,
            interactive: self.interactive,
            clarify_used: self.clarify_used,
            forbidden,
            irreversible,
        };
        let Some((p, rule)) = rules::posture(&facts) else {
            self.gap(format!(
                "no posture rule of §5.2 applies to delivery `{id}`"
            ));
            self.aggregate_open = true;
            return;
        };
        self.cite(rule.name, rule.section);
        if let Some(it) = self.items.get_mut(id) {
            it.capability = cap;
            it.irreversible = irreversible;
            it.posture = p;
            if p == Posture::Decline {
                it.status = Some(DeliveryStatus::Declined);
            }
        }
        if p == Posture::Decline {
            self.cite("status.declined_at_preflight", "§6.1");
        }
    }

    fn deliver(&mut self, id: &str, payload: &Value, turn: usize) -> Step<Flow> {
        if self.manifest.is_none() {
            self.cite("proposal.no_manifest", "§3.4");
            return Ok(Flow::Next);
        }
        let Some(it) = self.items.get(id) else {
            self.cite("proposal.undeclared", "§6");
            return Ok(Flow::Next);
        };
        if let Some(s) = it.status {
            if rules::settled(s) {
                self.cite("proposal.already_settled", "§6");
                return Ok(Flow::Next);
            }
            if s == DeliveryStatus::Drafted {
                // Storing the same draft again changes nothing (§6.1.1).
                self.cite("proposal.already_drafted", "§6");
                return Ok(Flow::Next);
            }
        }
        if self.dependency_missing(id) {
            if let Some(it) = self.items.get_mut(id) {
                it.blocked = true;
            }
            self.cite("proposal.blocked", "§6");
            return Ok(Flow::Next);
        }
        if let Some(it) = self.items.get_mut(id) {
            it.blocked = false;
        }
        // Posture again, right before the attempt (§4).
        self.preflight(id);
        let Some(it) = self.items.get(id) else {
            return Ok(Flow::Next);
        };
        if self.unchanged(&it.d, it.posture, payload) {
            self.cite("reversibility.unchanged", "§5.4.2");
            if let Some(it) = self.items.get_mut(id) {
                it.posture = Posture::Execute;
            }
            self.set_status(id, Some(DeliveryStatus::Verified));
            return Ok(Flow::Next);
        }
        match it.posture {
            Posture::Answer | Posture::Execute => {
                let key = it.irreversible.then(|| ledger_key(&it.d, payload));
                if let Some(k) = &key {
                    match self.carry.ledger.get(k).copied() {
                        // An earlier run of the same scope did it: never again (I5, §8.1).
                        Some(DeliveryStatus::Verified) => {
                            self.cite("ledger.scope_shared", "§8.1");
                            self.set_status(id, Some(DeliveryStatus::Verified));
                            return Ok(Flow::Next);
                        }
                        // The key is `failed` (§8.3.1: no effect): it may be attempted again.
                        Some(DeliveryStatus::Failed | DeliveryStatus::NotAttempted) | None => {}
                        // §8.3: `unknown` is never retried on the host's initiative.
                        Some(DeliveryStatus::Unknown) => {
                            self.cite("ledger.unknown_never_retried", "§8.3");
                            self.set_status(id, Some(DeliveryStatus::Unknown));
                            return Ok(Flow::Next);
                        }
                        // §8.1.1: the earlier attempt's reply confirmed nothing, and nothing
                        // new is observed: it stays `unconfirmed`, never raised (§6.2.1, I2).
                        Some(DeliveryStatus::Unconfirmed) => {
                            self.cite("ledger.unconfirmed_stays", "§8.1");
                            self.set_status(id, Some(DeliveryStatus::Unconfirmed));
                            return Ok(Flow::Next);
                        }
                        Some(other) => {
                            self.aggregate_open = true;
                            self.gap(format!("an irreversible act an earlier attempt of the same task left {}, proposed again by a later attempt: the contract does not say what the later run reports", other.as_str()));
                            if let Some(it) = self.items.get_mut(id) {
                                it.status_open = true;
                            }
                            return Ok(Flow::Next);
                        }
                    }
                }
                if let Some(k) = key {
                    // Its status at the run's end goes to the scope's ledger (a crash too).
                    self.ledger_keys.insert(id.to_string(), k);
                }
                self.attempt(id)?;
                Ok(Flow::Next)
            }
            Posture::Draft => {
                self.cite("posture.draft_stored", "§5.1");
                self.set_status(id, Some(DeliveryStatus::Drafted));
                self.emit(CrashEvent::Evidence, Some(id))?;
                Ok(Flow::Next)
            }
            Posture::Confirm => {
                if it.approved.as_ref() == Some(payload) {
                    // §7.1: the approval binds to the payload hash and survives a restart.
                    self.cite("approval.survives_restart", "§7");
                    self.attempt(id)?;
                    return Ok(Flow::Next);
                }
                self.request_approval(id, payload.clone(), turn)
            }
            Posture::Clarify => {
                if self.clarify_used {
                    return Ok(Flow::Next);
                }
                self.clarify_used = true;
                self.cite("clarify.asked", "§5.3");
                self.set_status(id, Some(DeliveryStatus::Awaiting));
                Ok(Flow::Suspend(Card::Clarify {
                    about: vec![id.to_string()],
                }))
            }
            Posture::Decline => Ok(Flow::Next),
        }
    }

    /// §5.4.2: a `save` the destination already holds byte for byte is no change — verified
    /// by reading it, with no attempt and no approval (the scenario's `contents`, until a save
    /// is attempted there).
    fn unchanged(&self, d: &Delivery, posture: Posture, payload: &Value) -> bool {
        let proposed = matches!(
            posture,
            Posture::Confirm | Posture::Answer | Posture::Execute
        );
        let untouched = !self
            .calls
            .contains_key(&vouch_scenario::dest_key(&d.destination));
        proposed
            && untouched
            && d.verb == Verb::Save
            && self.s.world.content_at(&d.destination) == Some(payload_text(payload).as_str())
    }

    fn dependency_missing(&self, id: &str) -> bool {
        let Some(m) = &self.manifest else {
            return false;
        };
        m.order.iter().filter(|o| o.after == id).any(|o| {
            self.items.get(&o.before).and_then(|i| i.status) != Some(DeliveryStatus::Verified)
        })
    }

    fn set_status(&mut self, id: &str, s: Option<DeliveryStatus>) {
        if let Some(it) = self.items.get_mut(id) {
            it.status = s;
            it.status_open = s.is_none();
        }
    }

    fn request_approval(&mut self, id: &str, payload: Value, turn: usize) -> Step<Flow> {
        self.cite("approval.card", "§7");
        if let Some(it) = self.items.get_mut(id) {
            it.card = Some(payload);
            it.status = Some(DeliveryStatus::Awaiting);
        }
        self.emit(CrashEvent::ApprovalRequested, Some(id))?;
        Ok(Flow::Suspend(Card::Approval {
            id: id.to_string(),
            turn,
        }))
    }

    fn final_text(&mut self, text: &str) -> Step<Flow> {
        self.cite("final_text.not_evidence", "§9.3");
        if text.is_empty() {
            return Ok(Flow::EndLoop);
        }
        if self.manifest.is_none() {
            if self.interactive {
                self.cite("manifest.implied", "§3.4");
                let d = Delivery {
                    id: IMPLIED_ID.into(),
                    verb: Verb::Write,
                    destination: Destination {
                        kind: DestinationKind::Surface,
                        address: String::new(),
                    },
                    object: None,
                    confidence: vouch_core::Confidence::High,
                    required: true,
                    attendees: vec![],
                };
                self.manifest = Some(Manifest {
                    deliveries: vec![d.clone()],
                    forbid: vec![],
                    order: vec![],
                });
                self.add_item(d);
                if matches!(
                    self.items.get(IMPLIED_ID).map(|i| i.posture),
                    Some(Posture::Answer | Posture::Execute)
                ) {
                    self.attempt(IMPLIED_ID)?;
                }
            }
            return Ok(Flow::EndLoop);
        }
        // §10.1: the final text is the payload of a pending `write → surface` item.
        let pending: Option<String> = self
            .items
            .values()
            .find(|i| {
                i.d.verb == Verb::Write
                    && i.d.destination.kind == DestinationKind::Surface
                    && i.status.is_none()
                    && matches!(i.posture, Posture::Answer | Posture::Execute)
            })
            .map(|i| i.d.id.clone());
        if let Some(id) = pending {
            if !self.dependency_missing(&id) {
                self.cite("final_text.surface_payload", "§10");
                self.attempt(&id)?;
            }
        }
        Ok(Flow::EndLoop)
    }

    // ------------------------------------------------------------------ attempts

    /// The provider's behaviour for the next call at `d` (first call: the world's; later: accept).
    fn call(&mut self, d: &Destination) -> Behavior {
        let key = vouch_scenario::dest_key(d);
        let n = self.calls.entry(key).or_default();
        *n += 1;
        if *n == 1 {
            self.s.world.behavior_at(d)
        } else {
            Behavior::Accept
        }
    }

    fn attempt(&mut self, id: &str) -> Step<()> {
        let Some(it) = self.items.get(id) else {
            return Ok(());
        };
        let d = it.d.clone();
        let reread = rules::reread_observable(d.verb, d.destination.kind);
        if it.irreversible {
            self.cite("ledger.intent_before_attempt", "§8.2");
            self.set_open(id, Some(Open::Intent));
            self.emit(CrashEvent::LedgerIntent, Some(id))?;
        }
        self.set_open(id, Some(Open::Started));
        self.emit(CrashEvent::AttemptStarted, Some(id))?;
        let status = match self.call(&d.destination) {
            Behavior::Accept => {
                self.set_open(id, Some(Open::Effected));
                self.emit(CrashEvent::ProviderEffect, Some(id))?;
                Some(DeliveryStatus::Verified)
            }
            Behavior::Reject => {
                self.cite("status.failed_no_effect", "§6.1");
                Some(DeliveryStatus::Failed)
            }
            Behavior::AcceptUnverifiable => {
                self.set_open(id, Some(Open::Effected));
                self.emit(CrashEvent::ProviderEffect, Some(id))?;
                if reread {
                    self.cite("observation.reread", "§6.2");
                    Some(DeliveryStatus::Verified)
                } else {
                    self.cite("status.unconfirmed", "§6.1");
                    Some(DeliveryStatus::Unconfirmed)
                }
            }
            Behavior::LoseResponse => {
                self.set_open(id, Some(Open::Effected));
                self.emit(CrashEvent::ProviderEffect, Some(id))?;
                self.resolve_lost(id, true)
            }
            Behavior::FalseSuccess => self.false_success(reread),
        };
        self.set_open(id, None);
        self.set_status(id, status);
        self.emit(CrashEvent::Evidence, Some(id))
    }

    fn false_success(&mut self, reread: bool) -> Option<DeliveryStatus> {
        if reread {
            self.cite("observation.no_effect", "§6.1");
            Some(DeliveryStatus::Failed)
        } else {
            // §6.3: where the reply is the only observation, the reply is the evidence.
            self.cite("observation.reply_is_evidence", "§6.3");
            Some(DeliveryStatus::Verified)
        }
    }

    fn set_open(&mut self, id: &str, o: Option<Open>) {
        if let Some(it) = self.items.get_mut(id) {
            it.open = o;
        }
    }

    /// §8.3 (and §6.2.1): an attempt whose result was lost. `effect` says whether the
    /// provider already applied it (the host itself does not know).
    fn resolve_lost(&mut self, id: &str, mut effect: bool) -> Option<DeliveryStatus> {
        let it = self.items.get(id)?;
        let d = it.d.clone();
        if rules::reread_observable(d.verb, d.destination.kind) {
            self.cite("observation.reread", "§6.2");
            return Some(if effect {
                DeliveryStatus::Verified
            } else {
                DeliveryStatus::Failed
            });
        }
        if !self.s.world.is_idempotent_by_key(&d.destination) {
            self.cite("ledger.unknown_after_lost_result", "§8.3");
            return Some(DeliveryStatus::Unknown);
        }
        self.cite("ledger.idempotent_retry", "§8.3");
        for _ in 0..RETRIES_MAX {
            if effect {
                // The provider deduplicates by key and returns the recorded result.
                return Some(DeliveryStatus::Verified);
            }
            match self.call(&d.destination) {
                Behavior::Accept => return Some(DeliveryStatus::Verified),
                Behavior::Reject => return Some(DeliveryStatus::Failed),
                Behavior::AcceptUnverifiable => return Some(DeliveryStatus::Unconfirmed),
                Behavior::LoseResponse => effect = true,
                Behavior::FalseSuccess => return self.false_success(false),
            }
        }
        self.cite("ledger.unknown_after_lost_result", "§8.3");
        Some(DeliveryStatus::Unknown)
    }

    // ------------------------------------------------------------------ decisions

    fn decide(&mut self, card: &Card, d: &Decision) -> Step<Flow> {
        match (card, d) {
            (_, Decision::Cancel) => {
                self.cite("run.cancelled", "§2.3");
                // §9.4: a cancel denies every item not yet attempted or decided; what has an
                // outcome of its own keeps it.
                for it in self.items.values_mut() {
                    if matches!(it.status, None | Some(DeliveryStatus::Awaiting)) {
                        it.status = Some(DeliveryStatus::Denied);
                        it.card = None;
                    }
                }
                self.cite("cancel.denies_unsettled", "§9.4");
                self.end(EndedBy::Cancel);
                Ok(Flow::EndLoop)
            }
            (Card::Approval { id, .. }, Decision::Approve(_)) => {
                let id = id.clone();
                self.cite("approval.approve", "§7");
                if let Some(it) = self.items.get_mut(&id) {
                    it.approved = it.card.take();
                    it.status = None;
                }
                self.phase = Phase::Running;
                self.emit(CrashEvent::ApprovalGranted, Some(&id))?;
                if self.tamper_pending(&id) {
                    self.cite("approval.refused_mismatch", "§7");
                    self.set_status(&id, Some(DeliveryStatus::RefusedMismatch));
                    self.emit(CrashEvent::Evidence, Some(&id))?;
                } else {
                    self.attempt(&id)?;
                }
                Ok(Flow::Next)
            }
            (Card::Approval { id, .. }, Decision::Deny(_)) => {
                self.cite("approval.deny", "§7");
                let id = id.clone();
                if let Some(it) = self.items.get_mut(&id) {
                    it.card = None;
                    it.status = Some(DeliveryStatus::Denied);
                }
                self.phase = Phase::Running;
                self.emit(CrashEvent::ApprovalDenied, Some(&id))?;
                Ok(Flow::Next)
            }
            (Card::Approval { id, turn }, Decision::Edit { payload, .. }) => {
                self.cite("approval.edit", "§7");
                let (id, turn) = (id.clone(), *turn);
                if let Some(it) = self.items.get_mut(&id) {
                    it.card = Some(payload.clone());
                }
                self.emit(CrashEvent::ApprovalRequested, Some(&id))?;
                Ok(Flow::Suspend(Card::Approval { id, turn }))
            }
            (Card::Clarify { about }, Decision::Answer(_)) => {
                self.cite("clarify.answered", "§5.3");
                for id in about.clone() {
                    self.set_status(&id, None);
                    // §5.3.1: the answer cannot raise confidence; the item re-pre-flights (R4 → draft).
                    self.preflight(&id);
                }
                Ok(Flow::Next)
            }
            _ => Ok(Flow::Next),
        }
    }

    // ------------------------------------------------------------------ crashes

    fn crashed(&mut self, mut c: Crash, turn: usize) {
        self.cite("boot.reconcile", "§9.2");
        if c.event == CrashEvent::ApprovalGranted {
            // §9.2: an approval is a durable instruction. Start-up reconciliation carries it
            // out (ledger first, the payload read back by its hash) before it ends the run.
            let id = c.delivery.clone().unwrap_or_default();
            self.cite("boot.carries_out_approval", "§9.2");
            let step = if self.tamper_pending(&id) {
                self.cite("approval.refused_mismatch", "§7");
                self.set_status(&id, Some(DeliveryStatus::RefusedMismatch));
                self.emit(CrashEvent::Evidence, Some(&id))
            } else {
                self.attempt(&id)
            };
            if let Err(again) = step {
                // Killed again while carrying it out: the next start-up settles what is open.
                c = again;
            }
        }
        if c.event == CrashEvent::ApprovalDenied {
            // §7.1: a denial is as durable as an approval. Start-up ends the run with the item
            // denied (the event written from the denied card if it was lost), no card open.
            self.cite("boot.keeps_denial", "§7.1");
        }
        if c.event == CrashEvent::ApprovalRequested {
            // The card is durable: the run is suspended and stays so (§9.2).
            self.cite("boot.suspended_stays", "§9.2");
            self.pc = turn + 1;
            self.phase = Phase::Suspended(Card::Approval {
                id: c.delivery.unwrap_or_default(),
                turn,
            });
            return;
        }
        let open: Vec<String> = self
            .items
            .values()
            .filter(|i| i.open.is_some())
            .map(|i| i.d.id.clone())
            .collect();
        for id in open {
            self.settle_open(&id);
        }
        // §9.2.1: the continuation replays from the turn the crash interrupted.
        self.resume_pc = match c.event {
            CrashEvent::Evidence | CrashEvent::ManifestDeclared => turn + 1,
            _ => turn,
        };
        self.end(EndedBy::Boot);
    }

    fn settle_open(&mut self, id: &str) {
        let Some(it) = self.items.get_mut(id) else {
            return;
        };
        let open = it.open.take();
        let (verb, kind) = (it.d.verb, it.d.destination.kind);
        if rules::reread_observable(verb, kind) {
            // §8.3.1: the host reads the destination back; the observation decides.
            it.status = match open {
                Some(Open::Effected) => Some(DeliveryStatus::Verified),
                Some(Open::Started) => Some(DeliveryStatus::Failed),
                // Only the intent: no attempt ever started.
                _ => None,
            };
            self.cite("ledger.reobserve_after_crash", "§8.3");
            if open == Some(Open::Intent) {
                self.cite("ledger.intent_only_never_ran", "§8.3");
            }
        } else if open == Some(Open::Intent)
            && !self.s.world.is_idempotent_by_key(&it.d.destination)
        {
            // §8.3.1: `attempt_started` is durable before any provider call, so a key that
            // holds only its intent provably never ran: `not_attempted`, the key `failed`,
            // attempted again by a continuation or a later attempt (§8.1.1).
            it.status = None;
            self.cite("ledger.intent_only_never_ran", "§8.3");
        } else {
            let s = self.resolve_lost(id, open == Some(Open::Effected));
            self.set_status(id, s);
        }
    }

    fn continuation(&mut self) {
        self.cite("resume.continuation", "§9.2");
        let ids: Vec<String> = self.items.keys().cloned().collect();
        let mut again = Vec::new();
        for id in &ids {
            if let Some(it) = self.items.get_mut(id) {
                let carried = it.status.map(rules::carried_over).unwrap_or(false) || it.status_open;
                if !carried {
                    it.status = None;
                    it.blocked = false;
                    it.open = None;
                    it.card = None;
                    again.push(id.clone());
                }
            }
        }
        for id in &again {
            self.preflight(id);
        }
        self.pc = self.resume_pc;
        self.phase = Phase::Running;
        if let Flow::Suspend(card) = self.ask_if_unclear(&again) {
            self.phase = Phase::Suspended(card);
        }
    }

    // ------------------------------------------------------------------ the terminal

    fn end(&mut self, by: EndedBy) {
        let ids: Vec<String> = self.items.keys().cloned().collect();
        for id in ids {
            let Some(it) = self.items.get_mut(&id) else {
                continue;
            };
            if it.status_open {
                continue;
            }
            match it.status {
                None if it.blocked => {
                    it.status = Some(DeliveryStatus::Blocked);
                    self.cite("status.blocked", "§6.1");
                }
                None | Some(DeliveryStatus::Awaiting) => {
                    it.status = Some(DeliveryStatus::NotAttempted);
                    self.cite("status.not_attempted", "§6.1");
                }
                _ => {}
            }
        }
        self.phase = Phase::Ended(by);
        if self.emit(CrashEvent::Terminal, None).is_err() {
            // The outbox row is in the terminal transaction: it goes out once after reboot.
            self.cite("notify.outbox_once", "§11.4");
        }
    }

    fn report(mut self) -> ScenarioReport {
        let (state, ended_by) = match &self.phase {
            Phase::Ended(by) => (ReportState::Ended, Some(*by)),
            _ => (ReportState::Suspended, None),
        };
        if let Some(by) = ended_by {
            self.cite(&format!("ended_by.{}", by.as_str()), "§2.3");
        }
        let suspended = state == ReportState::Suspended;
        let mut deliveries = IndexMap::new();
        let mut statuses = Vec::new();
        for it in self.items.values() {
            // §9.2.2: while suspended, an item nobody has attempted yet reads `not_attempted`.
            let status = match (it.status_open, it.status) {
                (true, _) => None,
                (false, None) if suspended => Some(DeliveryStatus::NotAttempted),
                (false, s) => s,
            };
            deliveries.insert(
                it.d.id.clone(),
                DeliveryReport {
                    posture: Some(it.posture),
                    status,
                    executions: None,
                },
            );
            statuses.push((it.d.required, status));
        }
        // §3.4: a run that ends with no manifest and no implied one declared nothing and
        // delivered nothing: `failed`, never `withdrawn` (a person's cancel excepted, §9.4).
        let no_manifest = !suspended
            && self.manifest.is_none()
            && !self.missed
            && ended_by != Some(EndedBy::Cancel);
        let outcome = if suspended {
            None
        } else if self.missed {
            self.cite("outcome.missed", "§9.3");
            Some(Outcome::Missed)
        } else if no_manifest && !self.aggregate_open {
            self.cite("outcome.no_manifest_failed", "§3.4");
            Some(Outcome::Failed)
        } else if self.aggregate_open || statuses.iter().any(|(_, s)| s.is_none()) {
            None
        } else {
            let known: Vec<(bool, DeliveryStatus)> = statuses
                .iter()
                .filter_map(|(r, s)| s.map(|s| (*r, s)))
                .collect();
            let (o, rule) = rules::outcome(&known);
            self.cite(rule, "§9.3");
            Some(o)
        };
        let needs_you: Vec<String> = if suspended {
            vec![]
        } else {
            self.items
                .values()
                .filter(|i| match i.status {
                    Some(DeliveryStatus::Unknown | DeliveryStatus::Unconfirmed) => true,
                    Some(DeliveryStatus::Drafted) => i.capability == Capability::NeedsSetup,
                    _ => false,
                })
                .map(|i| i.d.id.clone())
                .collect()
        };
        if !needs_you.is_empty() {
            self.cite("needs_you.listed", "§9.3");
        }
        let irreversible_verified = self
            .items
            .values()
            .any(|i| i.irreversible && i.status == Some(DeliveryStatus::Verified));
        let open = self.aggregate_open;
        let (significance, attention, notifications) = if open && !suspended {
            (None, None, None)
        } else {
            let (sig, rule) = rules::significance(
                outcome,
                suspended,
                !needs_you.is_empty(),
                irreversible_verified,
            );
            self.cite(rule, "§11.2");
            match rules::attention(sig, self.s.presence(), self.s.quiet) {
                Some((route, quieted)) => {
                    self.cite("attention.table", "§11.1");
                    if quieted {
                        self.cite("attention.quiet", "§11.3");
                    }
                    let n = u32::from(!suspended && route == vouch_core::Route::Notify);
                    if n == 1 {
                        self.cite("notify.once", "§11.4");
                    }
                    (Some(sig), Some(route), Some(n))
                }
                None => {
                    self.gaps.push(Gap {
                        question: "the attention table of §11.1 has no cell for this run".into(),
                    });
                    (Some(sig), None, None)
                }
            }
        };
        let claims: Vec<String> = self
            .items
            .values()
            .filter(|i| i.status == Some(DeliveryStatus::Verified))
            .map(|i| i.d.id.clone())
            .collect();
        if !claims.is_empty() {
            self.cite("claims.verified_only", "§10");
        }
        let max_executions: IndexMap<String, u32> = self
            .items
            .values()
            .map(|i| {
                let n = u32::from(matches!(
                    i.posture,
                    Posture::Answer | Posture::Execute | Posture::Confirm
                ));
                (i.d.id.clone(), n)
            })
            .collect();
        if self.items.values().any(|i| i.irreversible) {
            self.cite("ledger.at_most_once", "§8.2");
        }
        ScenarioReport {
            id: self.s.id.clone(),
            state: Some(state),
            outcome,
            ended_by,
            deliveries,
            needs_you: if open && !suspended {
                None
            } else {
                Some(needs_you)
            },
            significance,
            attention,
            notifications,
            task: None,
            judge: None,
            handoff: None,
            receipt: None,
            agrees: None,
            disagreements: None,
            gaps: self.gaps,
            expect_ok: None,
            rules: Some(self.rules),
            max_executions: Some(max_executions),
            claims: Some(claims),
        }
    }
}

/// The id of the implied `write → surface` item (§3.4).
pub const IMPLIED_ID: &str = "implied";

/// The ledger key of an act within one scope (§8.1): delivery id, destination, payload.
fn ledger_key(d: &Delivery, payload: &Value) -> String {
    format!(
        "{}\u{0}{}\u{0}{}",
        d.id,
        vouch_scenario::dest_key(&d.destination),
        payload
    )
}

fn answers(card: &Card, d: &Decision) -> bool {
    match (card, d) {
        (_, Decision::Cancel) => true,
        (Card::Approval { id, .. }, Decision::Approve(x) | Decision::Deny(x)) => id == x,
        (Card::Approval { id, .. }, Decision::Edit { id: x, .. }) => id == x,
        (Card::Clarify { .. }, Decision::Answer(_)) => true,
        _ => false,
    }
}

/// Does a forbid cover `verb` to `dest`? (§3.1: a verb, optionally narrowed to a kind or
/// an address pattern.)
fn forbid_covers(f: &vouch_core::Forbid, verb: Verb, dest: &Destination) -> bool {
    f.verb == verb
        && f.kind.map(|k| k == dest.kind).unwrap_or(true)
        && f.address
            .as_deref()
            .map(|p| vouch_scenario::pattern_matches(p, &dest.address))
            .unwrap_or(true)
}

/// §3.3: the ids of the items a manifest's problems name (empty when it is valid).
fn validate(m: &Manifest) -> Vec<String> {
    let mut bad: Vec<String> = Vec::new();
    let push = |id: &str, bad: &mut Vec<String>| {
        if !bad.iter().any(|b| b == id) {
            bad.push(id.to_string());
        }
    };
    let mut seen: Vec<&str> = Vec::new();
    let mut invalid = false;
    for d in &m.deliveries {
        if d.id.is_empty() {
            invalid = true;
        } else if seen.contains(&d.id.as_str()) {
            push(&d.id, &mut bad);
        } else {
            seen.push(&d.id);
        }
    }
    for o in &m.order {
        let known_before = seen.contains(&o.before.as_str());
        let known_after = seen.contains(&o.after.as_str());
        if !known_before || !known_after {
            invalid = true;
            if known_after {
                push(&o.after, &mut bad);
            }
        }
    }
    for id in order_cycle(m) {
        push(&id, &mut bad);
    }
    for d in &m.deliveries {
        if m.forbid
            .iter()
            .any(|f| forbid_covers(f, d.verb, &d.destination))
        {
            push(&d.id, &mut bad);
        }
    }
    if invalid && bad.is_empty() {
        // A problem without an item to decline (an empty id, an order naming nothing known):
        // the manifest is still rejected.
        bad.push(String::new());
    }
    bad
}

/// Ids on an `order` cycle (empty when acyclic). Kahn's algorithm: whatever cannot be
/// peeled off lies on or behind a cycle.
fn order_cycle(m: &Manifest) -> Vec<String> {
    let mut nodes: Vec<&str> = Vec::new();
    for o in &m.order {
        for n in [o.before.as_str(), o.after.as_str()] {
            if !nodes.contains(&n) {
                nodes.push(n);
            }
        }
    }
    let mut indeg: HashMap<&str, usize> = nodes.iter().map(|n| (*n, 0)).collect();
    for o in &m.order {
        *indeg.entry(o.after.as_str()).or_default() += 1;
    }
    let mut ready: Vec<&str> = nodes.iter().copied().filter(|n| indeg[n] == 0).collect();
    let mut removed = 0;
    while let Some(n) = ready.pop() {
        removed += 1;
        for o in m.order.iter().filter(|o| o.before == n) {
            let e = indeg.entry(o.after.as_str()).or_default();
            *e -= 1;
            if *e == 0 {
                ready.push(o.after.as_str());
            }
        }
    }
    if removed == nodes.len() {
        return vec![];
    }
    nodes
        .into_iter()
        .filter(|n| indeg[n] > 0)
        .map(String::from)
        .collect()
}

/// The text form of a payload, as a folder writes it: `{"text": …}` → the text, else its
/// canonical JSON.
fn payload_text(payload: &Value) -> String {
    match payload.get("text").and_then(Value::as_str) {
        Some(t) => t.to_string(),
        None => vouch_core::canonical_json(payload).unwrap_or_else(|_| payload.to_string()),
    }
}
