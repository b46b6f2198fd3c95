//! Durability points (§3.4, §9.2): the host's journal writes are buffered per run and committed
//! together where the contract needs durability, and nowhere else.
//!
//! [`Durable`] wraps the store the host writes through. `append` keeps the event in the run's
//! buffer; the buffer is committed as one batch (one transaction, one fsync):
//! - right before a provider is called (`attempt_started`, after the ledger intent, I3);
//! - before any other write of the same run reaches the store (ledger intent and outcome,
//!   an approval or clarify card, a decision, a state change such as a suspension), so the
//!   store never holds a row whose cause is not yet in the journal;
//! - with the terminal record, in its own transaction (`end_run_after`);
//! - at a checkpoint once the oldest buffered event is [`CHECKPOINT_MS`] old (by the events'
//!   own clock), which bounds what a crash between two points can lose: turns, read-only
//!   work tools and the model's words, never an act — every act is preceded by a point.
//!
//! Reads of this process see the buffer (`journal` returns the durable entries followed by
//! the buffered ones, numbered on, with empty hashes until they are committed); other
//! processes see only what is durable.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use vouch_core::RunState;
use vouch_store::*;

/// The longest a buffered event waits for a durability point (event time).
pub const CHECKPOINT_MS: i64 = 1_000;
/// The most events a run buffers before they are committed anyway.
pub const BUFFERED_EVENTS_MAX: usize = 256;

#[derive(Default)]
struct RunBuffer {
    events: Vec<NewEvent>,
    /// The last durable seq of the run, once known.
    durable_seq: Option<i64>,
}

/// The host's write path: a store whose journal appends wait for the next durability point.
pub struct Durable {
    inner: Arc<dyn Store>,
    runs: Mutex<HashMap<String, Arc<Mutex<RunBuffer>>>>,
}

/// Events whose own append is a durability point.
fn is_point(kind: EventKind) -> bool {
    matches!(kind, EventKind::AttemptStarted | EventKind::Suspended)
}

impl Durable {
    pub fn new(inner: Arc<dyn Store>) -> Self {
        Durable {
            inner,
            runs: Mutex::new(HashMap::new()),
        }
    }

    /// The store underneath (what other processes see).
    pub fn inner(&self) -> &Arc<dyn Store> {
        &self.inner
    }

    fn buffer(&self, run_id: &str) -> Arc<Mutex<RunBuffer>> {
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        // Looked up before the id is copied: every append of a run finds its buffer there.
        if let Some(b) = runs.get(run_id) {
            return b.clone();
        }
        runs.entry(run_id.to_string()).or_default().clone()
    }

    fn existing(&self, run_id: &str) -> Option<Arc<Mutex<RunBuffer>>> {
        let runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.get(run_id).cloned()
    }

    /// A run this store just created: nothing of its journal is durable yet.
    fn born(&self, run_id: &str) {
        let b = self.buffer(run_id);
        let mut buf = b.lock().unwrap_or_else(|p| p.into_inner());
        if buf.durable_seq.is_none() && buf.events.is_empty() {
            buf.durable_seq = Some(0);
        }
    }

    fn forget(&self, run_id: &str) {
        let mut runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
        runs.remove(run_id);
    }

    /// Commit one run's buffer (holding the run's lock, so its events stay in order).
    fn commit(&self, run_id: &str, buf: &mut RunBuffer) -> StoreResult<()> {
        if buf.events.is_empty() {
            return Ok(());
        }
        let started = std::time::Instant::now();
        let last = self.inner.append_batch_seq(run_id, &buf.events)?;
        crate::latency::COMMIT_LATENCY.observe(started.elapsed());
        buf.events.clear();
        if last.is_some() {
            buf.durable_seq = last;
        }
        Ok(())
    }

    /// Commit one run's buffered events now.
    pub fn flush_run(&self, run_id: &str) -> StoreResult<()> {
        if let Some(b) = self.existing(run_id) {
            let mut buf = b.lock().unwrap_or_else(|p| p.into_inner());
            self.commit(run_id, &mut buf)?;
        }
        Ok(())
    }

    /// Drop one run's buffered events (a crash between two durability points, simulated).
    pub fn discard_run(&self, run_id: &str) {
        self.forget(run_id);
    }

    fn flush_all(&self) -> StoreResult<()> {
        let all: Vec<(String, Arc<Mutex<RunBuffer>>)> = {
            let runs = self.runs.lock().unwrap_or_else(|p| p.into_inner());
            runs.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        };
        for (run_id, b) in all {
            let mut buf = b.lock().unwrap_or_else(|p| p.into_inner());
            self.commit(&run_id, &mut buf)?;
        }
        Ok(())
    }

    /// Buffer `event` (committing the buffer at a durability point); answers its seq.
    fn buffered(&self, run_id: &str, event: NewEvent) -> StoreResult<i64> {
        if event.kind == EventKind::Terminal {
            return Err(StoreError::Conflict(
                "the terminal event is written only by end_run".into(),
            ));
        }
        let b = self.buffer(run_id);
        let mut buf = b.lock().unwrap_or_else(|p| p.into_inner());
        if buf.durable_seq.is_none() {
            buf.durable_seq = Some(self.inner.journal(run_id)?.last().map_or(0, |e| e.seq));
        }
        let seq = buf.durable_seq.unwrap_or(0) + buf.events.len() as i64 + 1;
        let oldest_ms = buf.events.first().map(|e| e.at_ms);
        let (kind, at_ms) = (event.kind, event.at_ms);
        buf.events.push(event);
        if is_point(kind)
            || buf.events.len() >= BUFFERED_EVENTS_MAX
            || oldest_ms.is_some_and(|t| at_ms - t >= CHECKPOINT_MS)
        {
            self.commit(run_id, &mut buf)?;
        }
        Ok(seq)
    }

    fn provisional(&self, run_id: &str, durable: &mut Vec<JournalEntry>) {
        let Some(b) = self.existing(run_id) else {
            return;
        };
        let buf = b.lock().unwrap_or_else(|p| p.into_inner());
        let first = durable.last().map_or(0, |e| e.seq) + 1;
        for (seq, e) in (first..).zip(buf.events.iter()) {
            durable.push(JournalEntry {
                run_id: run_id.to_string(),
                seq,
                kind: e.kind,
                delivery: e.delivery.clone(),
                body: e.body.to_value(),
                at_ms: e.at_ms,
                prev_hash: String::new(),
                hash: String::new(),
            });
        }
    }
}

impl Store for Durable {
    fn create_run(&self, run: &NewRun) -> StoreResult<()> {
        self.inner.create_run(run)?;
        // A run is born with an empty journal: its first append need not read it back.
        self.born(&run.id);
        Ok(())
    }
    fn run(&self, id: &str) -> StoreResult<Option<RunRecord>> {
        self.inner.run(id)
    }
    fn run_state(&self, id: &str) -> StoreResult<Option<vouch_core::RunState>> {
        self.inner.run_state(id)
    }
    fn runs(&self, limit: usize) -> StoreResult<Vec<RunRecord>> {
        self.inner.runs(limit)
    }
    fn runs_filtered(
        &self,
        filter: &vouch_store::RunFilter,
        offset: usize,
        limit: usize,
    ) -> StoreResult<Vec<RunRecord>> {
        self.inner.runs_filtered(filter, offset, limit)
    }
    fn set_run_state(&self, id: &str, state: RunState) -> StoreResult<()> {
        // A suspension is a durability point; starting to run is not (what led to it rides
        // with the next point).
        if !matches!(
            state,
            RunState::Created | RunState::Declaring | RunState::Running
        ) {
            self.flush_run(id)?;
        }
        self.inner.set_run_state(id, state)
    }

    fn append(&self, run_id: &str, event: &NewEvent) -> StoreResult<JournalEntry> {
        let seq = self.buffered(run_id, event.clone())?;
        Ok(JournalEntry {
            run_id: run_id.to_string(),
            seq,
            kind: event.kind,
            delivery: event.delivery.clone(),
            body: event.body.to_value(),
            at_ms: event.at_ms,
            prev_hash: String::new(),
            hash: String::new(),
        })
    }
    fn append_owned(&self, run_id: &str, event: NewEvent) -> StoreResult<()> {
        self.buffered(run_id, event).map(|_| ())
    }
    fn journal(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
        // A run this process created and has not committed yet has nothing durable to read.
        let nothing_durable = self
            .existing(run_id)
            .is_some_and(|b| b.lock().unwrap_or_else(|p| p.into_inner()).durable_seq == Some(0));
        let mut j = if nothing_durable {
            vec![]
        } else {
            self.inner.journal(run_id)?
        };
        self.provisional(run_id, &mut j);
        Ok(j)
    }
    fn journal_events(&self, run_id: &str) -> StoreResult<Vec<vouch_store::EventEntry>> {
        // Events of the run buffered here are read with the durable ones, as `journal` does.
        let buffered = self.existing(run_id).is_some_and(|b| {
            let b = b.lock().unwrap_or_else(|p| p.into_inner());
            b.durable_seq == Some(0) || !b.events.is_empty()
        });
        if buffered {
            let entries = self.journal(run_id)?;
            return Ok(entries.iter().map(vouch_store::EventEntry::of).collect());
        }
        self.inner.journal_events(run_id)
    }
    fn journal_since(&self, run_id: &str, after_seq: i64) -> StoreResult<Vec<JournalEntry>> {
        let buffered = self.existing(run_id).is_some_and(|b| {
            !b.lock()
                .unwrap_or_else(|p| p.into_inner())
                .events
                .is_empty()
        });
        if !buffered {
            // Nothing of this run waits in this process (a watcher, another process's run):
            // only what became durable after `after_seq` is read.
            return self.inner.journal_since(run_id, after_seq);
        }
        let mut j = self.journal(run_id)?;
        j.retain(|e| e.seq > after_seq);
        Ok(j)
    }
    fn append_batch(&self, run_id: &str, events: &[NewEvent]) -> StoreResult<Vec<JournalEntry>> {
        self.flush_run(run_id)?;
        self.inner.append_batch(run_id, events)
    }
    fn flush(&self) -> StoreResult<()> {
        self.flush_all()
    }
    fn verify(&self) -> StoreResult<VerifyReport> {
        self.inner.verify()
    }

    fn read_only(&self) -> Option<String> {
        self.inner.read_only()
    }

    fn end_run(&self, run_id: &str, terminal: &Terminal) -> StoreResult<EndResult> {
        self.end_run_after(run_id, &[], terminal)
    }
    fn end_run_after(
        &self,
        run_id: &str,
        events: &[NewEvent],
        terminal: &Terminal,
    ) -> StoreResult<EndResult> {
        let b = self.buffer(run_id);
        let result = {
            let mut buf = b.lock().unwrap_or_else(|p| p.into_inner());
            let mut all = std::mem::take(&mut buf.events);
            all.extend_from_slice(events);
            self.inner.end_run_after(run_id, &all, terminal)
        };
        self.forget(run_id);
        result
    }
    fn receipt(&self, run_id: &str) -> StoreResult<Option<String>> {
        self.inner.receipt(run_id)
    }

    fn lease_run(
        &self,
        run_id: &str,
        owner: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> StoreResult<bool> {
        self.inner.lease_run(run_id, owner, now_ms, until_ms)
    }
    fn release_run(&self, run_id: &str, owner: &str) -> StoreResult<()> {
        self.flush_run(run_id)?;
        self.inner.release_run(run_id, owner)
    }
    fn take_over_run(
        &self,
        run_id: &str,
        gone: &str,
        owner: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> StoreResult<bool> {
        self.inner
            .take_over_run(run_id, gone, owner, now_ms, until_ms)
    }
    fn orphaned_runs(&self, now_ms: i64) -> StoreResult<Vec<RunRecord>> {
        self.inner.orphaned_runs(now_ms)
    }

    fn open_runs(&self) -> StoreResult<Vec<RunRecord>> {
        self.inner.open_runs()
    }
    fn runs_by_prefix(&self, prefix: &str, limit: usize) -> StoreResult<Vec<RunRecord>> {
        self.inner.runs_by_prefix(prefix, limit)
    }
    fn continuation_of(&self, parent: &str) -> StoreResult<Option<RunRecord>> {
        self.inner.continuation_of(parent)
    }

    fn put_payload(&self, hash: &str, canonical_json: &str) -> StoreResult<()> {
        self.inner.put_payload(hash, canonical_json)
    }
    fn payload(&self, hash: &str) -> StoreResult<Option<String>> {
        self.inner.payload(hash)
    }

    fn ledger_intend(&self, entry: &LedgerEntry) -> StoreResult<LedgerIntent> {
        self.flush_run(&entry.run_id)?;
        self.inner.ledger_intend(entry)
    }
    fn ledger_settle(
        &self,
        key: &str,
        state: LedgerState,
        detail: &serde_json::Value,
        at_ms: i64,
    ) -> StoreResult<()> {
        // The act's outcome follows its journal (attempt_finished) to disk.
        match self.inner.ledger_get(key)? {
            Some(e) => self.flush_run(&e.run_id)?,
            None => self.flush_all()?,
        }
        self.inner.ledger_settle(key, state, detail, at_ms)
    }
    fn ledger_get(&self, key: &str) -> StoreResult<Option<LedgerEntry>> {
        self.inner.ledger_get(key)
    }
    fn ledger_list(&self) -> StoreResult<Vec<LedgerEntry>> {
        self.inner.ledger_list()
    }

    fn open_card(&self, card: &Card) -> StoreResult<()> {
        self.flush_run(&card.run_id)?;
        self.inner.open_card(card)
    }
    fn open_cards(&self) -> StoreResult<Vec<Card>> {
        self.inner.open_cards()
    }
    fn cards_for_run(&self, run_id: &str) -> StoreResult<Vec<Card>> {
        self.inner.cards_for_run(run_id)
    }
    fn decide_card(
        &self,
        run_id: &str,
        delivery: &str,
        payload_hash: &str,
        decision: Decision,
        at_ms: i64,
    ) -> StoreResult<Card> {
        self.flush_run(run_id)?;
        self.inner
            .decide_card(run_id, delivery, payload_hash, decision, at_ms)
    }
    fn answer_clarify(&self, run_id: &str, answer: &str, at_ms: i64) -> StoreResult<Card> {
        self.flush_run(run_id)?;
        self.inner.answer_clarify(run_id, answer, at_ms)
    }
    fn close_cards(&self, run_id: &str, at_ms: i64) -> StoreResult<u64> {
        self.flush_run(run_id)?;
        self.inner.close_cards(run_id, at_ms)
    }

    fn consume_slot(&self, schedule: &str, slot_ms: i64, run: &NewRun) -> StoreResult<bool> {
        let consumed = self.inner.consume_slot(schedule, slot_ms, run)?;
        if consumed {
            self.born(&run.id);
        }
        Ok(consumed)
    }
    fn slot_run(&self, schedule: &str, slot_ms: i64) -> StoreResult<Option<String>> {
        self.inner.slot_run(schedule, slot_ms)
    }
    fn slots(&self, schedule: &str) -> StoreResult<Vec<(i64, String)>> {
        self.inner.slots(schedule)
    }
    fn put_schedule(&self, schedule: &Schedule) -> StoreResult<()> {
        self.inner.put_schedule(schedule)
    }
    fn schedules(&self) -> StoreResult<Vec<Schedule>> {
        self.inner.schedules()
    }
    fn remove_schedule(&self, name: &str) -> StoreResult<bool> {
        self.inner.remove_schedule(name)
    }

    fn with_duty(&self, duty: &str, wait: bool, work: &mut dyn FnMut()) -> StoreResult<bool> {
        self.inner.with_duty(duty, wait, work)
    }
    fn outbox_pending(&self) -> StoreResult<Vec<OutboxRow>> {
        self.inner.outbox_pending()
    }
    fn counts(&self) -> StoreResult<vouch_store::StoreCounts> {
        self.inner.counts()
    }
    fn outbox_mark_sent(&self, id: i64, at_ms: i64) -> StoreResult<()> {
        self.inner.outbox_mark_sent(id, at_ms)
    }
    fn outbox_for_run(&self, run_id: &str) -> StoreResult<Vec<OutboxRow>> {
        self.inner.outbox_for_run(run_id)
    }
    fn outbox_failed(
        &self,
        id: i64,
        error: &str,
        misconfigured: bool,
        at_ms: i64,
    ) -> StoreResult<()> {
        self.inner.outbox_failed(id, error, misconfigured, at_ms)
    }

    fn put_token(&self, token: &ApiToken) -> StoreResult<()> {
        self.inner.put_token(token)
    }
    fn token_by_hash(&self, hash: &str) -> StoreResult<Option<ApiToken>> {
        self.inner.token_by_hash(hash)
    }
    fn tokens(&self) -> StoreResult<Vec<ApiToken>> {
        self.inner.tokens()
    }
    fn remove_token(&self, name: &str) -> StoreResult<bool> {
        self.inner.remove_token(name)
    }
    fn record_damage(&self, found: &[String], at_ms: i64) -> StoreResult<bool> {
        self.inner.record_damage(found, at_ms)
    }
    fn open_damage(&self) -> StoreResult<Vec<vouch_store::DamageRecord>> {
        self.inner.open_damage()
    }
    fn close_damage(&self, how: vouch_store::DamageClosed, at_ms: i64) -> StoreResult<usize> {
        self.inner.close_damage(how, at_ms)
    }
    fn keep_request(
        &self,
        key: &vouch_store::request_keys::RequestKey,
        now_ms: i64,
    ) -> StoreResult<Option<vouch_store::request_keys::KeptRequest>> {
        self.inner.keep_request(key, now_ms)
    }
}
