//! The storage interface of vouch.
//!
//! Records and one [`Store`] trait; each backend (SQLite now, PostgreSQL later) is its own
//! crate implementing it. Nothing here names a database type. Every write method is durable
//! when it returns. Times are milliseconds since the Unix epoch, passed in by the caller
//! (the store never reads a clock), so tests and simulations control time.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use vouch_core::canon::Sha256;
pub use vouch_core::{CatchUp, Overlap};
use vouch_core::{EndedBy, Outcome, RunState, TriggerKind};

pub mod board;
#[cfg(feature = "conformance")]
pub mod board_conformance;
pub mod codec;
#[cfg(feature = "conformance")]
pub mod conformance;
pub mod events;
pub mod identity;
#[cfg(feature = "conformance")]
pub mod identity_conformance;
pub mod journal;
pub mod request_keys;
pub mod spec;

pub use events::EventKind;
pub use identity::{DiaryEntry, IdentityRecord, IdentityStore, PutIdentity};
pub use journal::{BodyError, Event};

/// The hash that starts every run's chain.
pub const GENESIS_HASH: &str = "0000000000000000000000000000000000000000000000000000000000000000";

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The named record does not exist; the caller should check the id.
    #[error("{what} `{id}` not found")]
    NotFound { what: &'static str, id: String },
    /// The write conflicts with stored state (e.g. a second terminal event, a decided card).
    #[error("conflict: {0}")]
    Conflict(String),
    /// The home is not a vouch store, or its data is corrupt; the caller should stop.
    #[error("store is corrupt or not a vouch home: {0}")]
    Corrupt(String),
    /// The store was opened read-only (a write-protected home, or a read-only open): reads
    /// work, this write cannot. Not damage: the caller should say so and not retry.
    #[error("the store is read-only: {0}")]
    ReadOnly(String),
    /// Transient (busy, I/O hiccup); the caller may retry.
    #[error("store temporarily unavailable: {0}")]
    Retryable(String),
    #[error("store error: {0}")]
    Fatal(String),
}

pub type StoreResult<T> = Result<T, StoreError>;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewRun {
    pub id: String,
    pub trigger: TriggerKind,
    /// The prompt or routine title the receipt is titled from.
    pub title: String,
    /// First run of a continuation chain (§9.2); equals `id` for a first run.
    pub chain_root: String,
    pub parent: Option<String>,
    /// Ledger scope (§8.1): the slot for scheduled runs, else the chain root.
    pub scope: String,
    /// Free-form run settings (routine, script, presence, quiet…), JSON.
    pub spec: serde_json::Value,
    pub created_ms: i64,
    /// `Created`, or `Running` for a run its creator drives at once (the state rides in the
    /// creating transaction instead of a commit of its own).
    pub state: RunState,
    /// The owner's lease, taken in the same transaction that creates the run, so no other
    /// process's start-up reconciliation can mistake a run being born for one whose owner is
    /// gone (§9.2.5). `None` creates the run unowned (it is then orphaned at once).
    pub lease: Option<RunLease>,
}

/// A run is born `created`, or `running` when its creator drives it at once; any other
/// state at birth is a caller's mistake.
pub fn check_birth_state(run: &NewRun) -> StoreResult<()> {
    match run.state {
        RunState::Created | RunState::Running => Ok(()),
        other => Err(StoreError::Fatal(format!(
            "run {} cannot be born {}; a run is born created or running",
            run.id,
            other.as_str()
        ))),
    }
}

/// Who holds a run and until when (`owner` is `pid:<pid>` for a local process).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLease {
    pub owner: String,
    pub until_ms: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    pub id: String,
    pub trigger: TriggerKind,
    pub title: String,
    pub chain_root: String,
    pub parent: Option<String>,
    pub scope: String,
    pub spec: serde_json::Value,
    pub state: RunState,
    pub outcome: Option<Outcome>,
    pub ended_by: Option<EndedBy>,
    pub created_ms: i64,
    pub ended_ms: Option<i64>,
    /// Owner process holding the run's lease, if any, and when the lease lapses.
    pub owner: Option<String>,
    pub lease_until_ms: Option<i64>,
}

impl RunRecord {
    /// No owner, or a lease that never existed or has lapsed at `now_ms`: what
    /// [`Store::orphaned_runs`] selects among the runs not ended.
    pub fn lease_lapsed(&self, now_ms: i64) -> bool {
        self.owner.is_none() || self.lease_until_ms.is_none_or(|until| until < now_ms)
    }
}

/// Which runs a list shows (§17.0, §17.3): every field that is set must match. The same
/// filter on every backend: [`RunFilter::matches`] states what the SQL of each computes, and
/// the shared conformance suite holds them equal.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunFilter {
    pub state: Option<RunState>,
    pub outcome: Option<Outcome>,
    pub trigger: Option<TriggerKind>,
    /// Runs of this schedule's slots (scope `NAME@SLOT`).
    pub schedule: Option<String>,
    /// Attempts of this board task (scope `task:ID`).
    pub task: Option<String>,
    /// Created at or after this instant.
    pub since_ms: Option<i64>,
    /// Created before this instant.
    pub until_ms: Option<i64>,
    /// The title holds this text; ASCII letters match in either case (other characters exactly,
    /// the same on every backend).
    pub title: Option<String>,
}

impl RunFilter {
    /// Whether `r` passes the filter: the reference the backends' SQL follows.
    pub fn matches(&self, r: &RunRecord) -> bool {
        self.state.is_none_or(|s| r.state == s)
            && self.outcome.is_none_or(|o| r.outcome == Some(o))
            && self.trigger.is_none_or(|t| r.trigger == t)
            && self
                .schedule
                .as_ref()
                .is_none_or(|s| r.scope.starts_with(&format!("{s}@")))
            && self
                .task
                .as_ref()
                .is_none_or(|t| r.scope == format!("task:{t}"))
            && self.since_ms.is_none_or(|t| r.created_ms >= t)
            && self.until_ms.is_none_or(|t| r.created_ms < t)
            && self.title.as_ref().is_none_or(|t| {
                r.title
                    .to_ascii_lowercase()
                    .contains(&t.to_ascii_lowercase())
            })
    }

    /// The scope prefix of a schedule's runs.
    pub fn schedule_scope(&self) -> Option<String> {
        self.schedule.as_ref().map(|s| format!("{s}@"))
    }

    /// The scope of a task's attempts.
    pub fn task_scope(&self) -> Option<String> {
        self.task.as_ref().map(|t| format!("task:{t}"))
    }

    /// The title text in ASCII lower case, as the backends compare it.
    pub fn title_lower(&self) -> Option<String> {
        self.title.as_ref().map(|t| t.to_ascii_lowercase())
    }
}

/// An event to append. `seq`, `prev_hash` and `hash` are assigned by the store.
#[derive(Debug, Clone, PartialEq)]
pub struct NewEvent {
    pub kind: EventKind,
    pub delivery: Option<String>,
    pub body: EventBody,
    pub at_ms: i64,
}

/// An event's body as given to the store: a JSON value, or a typed event's body already
/// written as the two texts an append needs (`Event::encode`), so it is serialized once.
#[derive(Debug, Clone, PartialEq)]
pub enum EventBody {
    Value(serde_json::Value),
    Encoded(EncodedBody),
}

/// A body written once as its stored text and its RFC 8785 canonical text, both of the same
/// value, with no floating-point number in it (so the stored text reads back as exactly the
/// value the canonical text is of).
#[derive(Debug, Clone, PartialEq)]
pub struct EncodedBody {
    text: String,
    canonical: String,
}

impl EncodedBody {
    /// Only the typed path (`Event::encode`) makes one, and it proves the two texts agree.
    pub(crate) fn new(text: String, canonical: String) -> Self {
        EncodedBody { text, canonical }
    }
    /// The body as stored.
    pub fn text(&self) -> &str {
        &self.text
    }
    /// The body's canonical JSON (what the chain's hash covers).
    pub fn canonical(&self) -> &str {
        &self.canonical
    }
}

impl EventBody {
    /// The body as a JSON value (an encoded one parsed back from its stored text: what a read
    /// of the stored event answers).
    pub fn to_value(&self) -> serde_json::Value {
        match self {
            EventBody::Value(v) => v.clone(),
            EventBody::Encoded(e) => {
                serde_json::from_str(&e.text).unwrap_or(serde_json::Value::Null)
            }
        }
    }
}

/// Serialized as the JSON value it is (a terminal record is written out whole by tests and
/// tools); read back as a value.
impl Serialize for EventBody {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            EventBody::Value(v) => v.serialize(s),
            EventBody::Encoded(_) => self.to_value().serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for EventBody {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde_json::Value::deserialize(d).map(EventBody::Value)
    }
}

impl From<serde_json::Value> for EventBody {
    fn from(v: serde_json::Value) -> Self {
        EventBody::Value(v)
    }
}

impl NewEvent {
    pub fn new(kind: EventKind, at_ms: i64, body: impl Into<EventBody>) -> Self {
        NewEvent {
            kind,
            delivery: None,
            body: body.into(),
            at_ms,
        }
    }
    pub fn for_delivery(
        kind: EventKind,
        delivery: &str,
        at_ms: i64,
        body: impl Into<EventBody>,
    ) -> Self {
        NewEvent {
            kind,
            delivery: Some(delivery.to_string()),
            body: body.into(),
            at_ms,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JournalEntry {
    pub run_id: String,
    /// 1-based, gap-free per run.
    pub seq: i64,
    pub kind: EventKind,
    pub delivery: Option<String>,
    pub body: serde_json::Value,
    pub at_ms: i64,
    pub prev_hash: String,
    pub hash: String,
}

/// The chained hash of an event: SHA-256 over the previous hash and the canonical JSON of
/// `[run_id, seq, kind, delivery, at_ms, body]`. Every backend must use exactly this.
pub fn event_hash(
    prev_hash: &str,
    run_id: &str,
    seq: i64,
    kind: EventKind,
    delivery: Option<&str>,
    at_ms: i64,
    body: &serde_json::Value,
) -> String {
    let content = serde_json::json!([run_id, seq, kind.as_str(), delivery, at_ms, body]);
    let canonical = vouch_core::canonical_json(&content).unwrap_or_else(|_| content.to_string());
    let mut h = Sha256::new();
    h.update(prev_hash.as_bytes());
    h.update(canonical.as_bytes());
    h.hex()
}

/// Integers up to this magnitude are written by RFC 8785 exactly as their decimal digits.
const JCS_EXACT_INT_MAX: i64 = 1 << 53;

/// An event's content, canonicalized once, before its place in the chain is known.
///
/// [`event_hash`] is the definition; this computes the same hash in two steps so that a
/// backend can do the expensive part (canonical JSON of the body) on the caller's thread
/// and only the cheap part (`seq`, `prev_hash`, SHA-256) in its serialized writer.
#[derive(Debug, Clone, PartialEq)]
pub struct EventContent {
    /// `[run_id,` — the canonical array up to `seq`.
    head: String,
    /// `,kind,delivery,at_ms,body]` — the canonical array after `seq`.
    tail: String,
}

impl EventContent {
    pub fn new(
        run_id: &str,
        kind: EventKind,
        delivery: Option<&str>,
        at_ms: i64,
        body: &serde_json::Value,
    ) -> Self {
        let mut c = Self::open(run_id, kind, delivery, at_ms, 128);
        vouch_core::write_canonical(body, &mut c.tail);
        c.tail.push(']');
        c
    }

    /// The same content from the body's canonical text, already written (an
    /// [`EncodedBody`]'s).
    pub fn of_canonical(
        run_id: &str,
        kind: EventKind,
        delivery: Option<&str>,
        at_ms: i64,
        canonical_body: &str,
    ) -> Self {
        let mut c = Self::open(run_id, kind, delivery, at_ms, canonical_body.len() + 1);
        c.tail.push_str(canonical_body);
        c.tail.push(']');
        c
    }

    /// Everything but the body and the closing `]`, with room for `body_bytes` more.
    fn open(
        run_id: &str,
        kind: EventKind,
        delivery: Option<&str>,
        at_ms: i64,
        body_bytes: usize,
    ) -> Self {
        use vouch_core::{write_canonical, write_canonical_str};
        // Each part written once, straight into its buffer (no intermediate values).
        let mut head = String::with_capacity(run_id.len() + 4);
        head.push('[');
        write_canonical_str(run_id, &mut head);
        head.push(',');
        let delivery_bytes = delivery.map_or(4, |d| d.len() + 2);
        let mut tail = String::with_capacity(48 + delivery_bytes + body_bytes);
        tail.push(',');
        tail.push('"');
        tail.push_str(kind.as_str()); // a fixed snake_case name: nothing to escape
        tail.push_str("\",");
        match delivery {
            Some(d) => write_canonical_str(d, &mut tail),
            None => tail.push_str("null"),
        }
        tail.push(',');
        write_canonical(&serde_json::Value::from(at_ms), &mut tail);
        tail.push(',');
        EventContent { head, tail }
    }

    /// The chained hash of this content at `seq` after `prev_hash`; equals [`event_hash`].
    pub fn hash(&self, prev_hash: &str, seq: i64) -> String {
        let seq_text = if seq.abs() <= JCS_EXACT_INT_MAX {
            seq.to_string()
        } else {
            vouch_core::canonical_json(&serde_json::Value::from(seq))
                .unwrap_or_else(|_| seq.to_string())
        };
        let mut h = Sha256::new();
        h.update(prev_hash.as_bytes());
        h.update(self.head.as_bytes());
        h.update(seq_text.as_bytes());
        h.update(self.tail.as_bytes());
        h.hex()
    }
}

/// Check one run's chain as read back; returns the first broken event's seq and why.
pub fn verify_chain(entries: &[JournalEntry]) -> Result<(), ChainBreak> {
    let mut prev = GENESIS_HASH.to_string();
    for (i, e) in entries.iter().enumerate() {
        let expected_seq = i as i64 + 1;
        let fail = |reason: String| ChainBreak {
            run_id: e.run_id.clone(),
            seq: e.seq,
            reason,
        };
        if e.seq != expected_seq {
            return Err(fail(format!(
                "sequence gap: expected {expected_seq}, found {}",
                e.seq
            )));
        }
        if e.prev_hash != prev {
            return Err(fail("prev_hash does not match the previous event".into()));
        }
        let h = event_hash(
            &e.prev_hash,
            &e.run_id,
            e.seq,
            e.kind,
            e.delivery.as_deref(),
            e.at_ms,
            &e.body,
        );
        if h != e.hash {
            return Err(fail(
                "content does not match its hash (edited after it was written)".into(),
            ));
        }
        prev = e.hash.clone();
    }
    Ok(())
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChainBreak {
    pub run_id: String,
    pub seq: i64,
    pub reason: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VerifyReport {
    pub runs: usize,
    pub events: usize,
    pub breaks: Vec<ChainBreak>,
    /// Damage to the store itself, each naming what is damaged (a table, a page, a run):
    /// SQLite's integrity check and every row read back, on both backends the row checks of
    /// [`ROW_CHECKS`]. Empty when the store is intact.
    #[serde(default)]
    pub damage: Vec<String>,
}

impl VerifyReport {
    /// Nothing broken: every chain verifies and the store has no damage.
    pub fn intact(&self) -> bool {
        self.breaks.is_empty() && self.damage.is_empty()
    }
}

/// Row checks both backends run in `verify` (same SQL on SQLite and PostgreSQL): each query
/// returns one text column per problem found, naming the run it concerns.
pub const ROW_CHECKS: &[(&str, &str)] = &[
    (
        "journal events whose run has no run row",
        "SELECT DISTINCT run_id FROM journal WHERE run_id NOT IN (SELECT id FROM runs)",
    ),
    (
        "runs marked ended whose journal has no terminal event",
        "SELECT id FROM runs WHERE state = 'ended' AND NOT EXISTS (SELECT 1 FROM journal j WHERE j.run_id = runs.id AND j.kind = 'terminal')",
    ),
    (
        "runs with a terminal event that are not marked ended",
        "SELECT id FROM runs WHERE state <> 'ended' AND EXISTS (SELECT 1 FROM journal j WHERE j.run_id = runs.id AND j.kind = 'terminal')",
    ),
    (
        "cards of runs that have no run row",
        "SELECT DISTINCT run_id FROM cards WHERE run_id NOT IN (SELECT id FROM runs)",
    ),
];

/// What one verification found damaged (§10.2), as the store keeps it: while a record is
/// open (neither repaired nor acknowledged) the store refuses new runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DamageRecord {
    /// SHA-256 of the findings, one per line in order: the same findings are one record.
    pub fingerprint: String,
    pub found: Vec<String>,
    pub found_ms: i64,
    pub closed_ms: Option<i64>,
    pub closed_by: Option<DamageClosed>,
}

/// How a damage record was closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DamageClosed {
    /// The person read the findings and chose to go on (`vouch journal verify --acknowledge`).
    Acknowledged,
    /// A later verification found the store intact.
    Repaired,
}

impl DamageClosed {
    pub fn as_str(self) -> &'static str {
        match self {
            DamageClosed::Acknowledged => "acknowledged",
            DamageClosed::Repaired => "repaired",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [DamageClosed::Acknowledged, DamageClosed::Repaired]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
}

/// The fingerprint of a verification's findings.
pub fn damage_fingerprint(found: &[String]) -> String {
    let mut h = Sha256::new();
    for f in found {
        h.update(f.as_bytes());
        h.update(b"\n");
    }
    h.hex()
}

/// A journal entry read as its kind's typed event, without its hashes; `event` is why its
/// body does not parse when it does not (§3.4.2).
#[derive(Debug, Clone, PartialEq)]
pub struct EventEntry {
    pub seq: i64,
    pub kind: EventKind,
    pub delivery: Option<String>,
    pub at_ms: i64,
    pub event: Result<Event, BodyError>,
}

impl EventEntry {
    pub fn of(e: &JournalEntry) -> EventEntry {
        EventEntry {
            seq: e.seq,
            kind: e.kind,
            delivery: e.delivery.clone(),
            at_ms: e.at_ms,
            event: Event::parse(e.kind, &e.body),
        }
    }

    /// An entry from its stored body's text: typed straight from the text, or, when that
    /// fails, from its `Value` so the error is [`Event::parse`]'s; `Err` when the
    /// text is not JSON at all.
    pub fn of_text(
        seq: i64,
        kind: EventKind,
        delivery: Option<String>,
        at_ms: i64,
        text: &str,
    ) -> Result<EventEntry, serde_json::Error> {
        let event = match Event::parse_text(kind, text) {
            Some(ev) => Ok(ev),
            None => Event::parse(kind, &serde_json::from_str(text)?),
        };
        Ok(EventEntry {
            seq,
            kind,
            delivery,
            at_ms,
            event,
        })
    }
}

/// The terminal record (§9.2), committed with the receipt and the outbox row in one transaction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Terminal {
    pub outcome: Outcome,
    pub ended_by: EndedBy,
    pub receipt: String,
    /// The terminal event's body (statuses, needs_you, significance, route…).
    pub body: EventBody,
    pub at_ms: i64,
    /// The notification to dispatch, if the route calls for one (§11.4).
    pub outbox: Option<NewOutbox>,
}

/// The place of a run's terminal event in its chain. The event's body is the caller's own
/// [`Terminal::body`], stored as given: the store does not parse it back from the stored text
/// (nothing that ends a run reads it; [`Store::journal`] answers it like any other event).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TerminalPlace {
    pub seq: i64,
    pub prev_hash: String,
    pub hash: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum EndResult {
    /// The run ended now: where its terminal event took its place in the chain.
    Ended(TerminalPlace),
    /// The run already had its terminal record; nothing changed (the reconciler is idempotent).
    AlreadyEnded,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NewOutbox {
    /// Deduplication key (§11.4): `(run, terminal)` or `(run, card hash)`.
    pub dedup_key: String,
    pub run_id: String,
    pub route: String,
    pub body: serde_json::Value,
}

/// What the store holds, counted by the store itself (one `GROUP BY` per figure), so the
/// cost of reading it does not grow with what a caller would otherwise scan. Keys are the
/// words the store keeps (`ended`, `succeeded`, `verified`, a route's name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreCounts {
    /// Every run, by state.
    pub runs_by_state: BTreeMap<String, u64>,
    /// Ended runs by outcome.
    pub ended_by_outcome: BTreeMap<String, u64>,
    /// The deliveries of ended runs by final status, as each terminal record states them (§6.1).
    pub deliveries_by_status: BTreeMap<String, u64>,
    /// Notifications of ended runs by (route, whether sent) (§11.4).
    pub notifications: BTreeMap<(String, bool), u64>,
    /// Outbox rows not yet delivered.
    pub notifications_pending: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct OutboxRow {
    pub id: i64,
    pub dedup_key: String,
    pub run_id: String,
    pub route: String,
    pub body: serde_json::Value,
    pub created_ms: i64,
    pub sent_ms: Option<i64>,
    /// How delivering it has failed so far (`None`: never tried, or taken at the first try).
    #[serde(default)]
    pub failure: Option<OutboxFailure>,
}

/// A notification's failed deliveries (§11.4), kept on its outbox row so that another process
/// (`vouch doctor`) can name a route that keeps failing and say what to do.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct OutboxFailure {
    /// Failed deliveries so far.
    pub failures: u32,
    /// The route's own words for the last one (for a misconfigured route: what to fix).
    pub last_error: String,
    /// The last failure said the route is set up wrong (every row fails alike until it is
    /// fixed), not that it is unavailable for now.
    pub misconfigured: bool,
    pub last_ms: i64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LedgerState {
    Intended,
    Done,
    Failed,
    Unknown,
}

impl LedgerState {
    pub fn as_str(self) -> &'static str {
        match self {
            LedgerState::Intended => "intended",
            LedgerState::Done => "done",
            LedgerState::Failed => "failed",
            LedgerState::Unknown => "unknown",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [Self::Intended, Self::Done, Self::Failed, Self::Unknown]
            .into_iter()
            .find(|x| x.as_str() == s)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LedgerEntry {
    pub key: String,
    pub scope: String,
    pub run_id: String,
    pub delivery: String,
    pub payload_hash: String,
    pub state: LedgerState,
    /// Attempts made under this key (a `failed` key may be tried again, §8.2).
    pub attempts: i64,
    pub detail: serde_json::Value,
    pub updated_ms: i64,
}

/// The answer to "may I attempt this key now?" (§8.2).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum LedgerIntent {
    /// The intent row is committed (new, or a `failed` key moved back to `intended`): go ahead.
    Proceed(LedgerEntry),
    /// The key is `intended`, `done` or `unknown`: never execute again; here is the record.
    Recorded(LedgerEntry),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CardState {
    Open,
    Approved,
    Denied,
    Superseded,
    Answered,
}

impl CardState {
    pub fn as_str(self) -> &'static str {
        match self {
            CardState::Open => "open",
            CardState::Approved => "approved",
            CardState::Denied => "denied",
            CardState::Superseded => "superseded",
            CardState::Answered => "answered",
        }
    }
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Open,
            Self::Approved,
            Self::Denied,
            Self::Superseded,
            Self::Answered,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }
}

/// An approval card (§7) or a clarify card (§5.3, `delivery` = None, `payload_hash` = "").
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Card {
    pub run_id: String,
    pub delivery: Option<String>,
    pub payload_hash: String,
    pub summary: String,
    pub state: CardState,
    pub created_ms: i64,
    pub decided_ms: Option<i64>,
    /// For clarify cards: the person's answer.
    pub answer: Option<String>,
    /// Why the person is asked, in plain words: the rule and its cause (§7), e.g. "sending
    /// e-mail cannot be undone (rule R9)". Empty on cards opened before reasons were stored.
    #[serde(default)]
    pub reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Decision {
    Approve,
    Deny,
}

/// A schedule (§12.1): when a routine runs, and what to do about missed and overlapping slots.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    pub name: String,
    pub cron: String,
    pub tz: String,
    /// The run template: `{"prompt": …, "model": {…}, "presence": …, "quiet": …}`.
    pub routine: serde_json::Value,
    /// Stored as `skip` or `latest`.
    pub catch_up: CatchUp,
    /// Stored as `skip` or `allow`.
    pub overlap: Overlap,
    pub grace_ms: i64,
    /// Slots before this instant are not expected (the schedule did not exist yet).
    pub created_ms: i64,
}

/// An API token (§17): only the SHA-256 of the secret is stored; the secret is shown once.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApiToken {
    pub name: String,
    /// Hex SHA-256 of the token's secret text.
    pub hash: String,
    pub created_ms: i64,
    /// What the token may do (§17.1.1); tokens made before scopes existed are `person`.
    pub scope: vouch_core::Scope,
    /// The one worker identity a `worker` token acts as (none for every other scope).
    pub identity: Option<String>,
}

/// One durable store. Implementations must be safe to share between threads; every write is
/// durable on return, and concurrent appends may be group-committed.
///
/// The host writes through a buffer that implements this trait too
/// (`vouch_runtime::durable::Durable`, the durability points of §3.4.2): a method added here
/// must be delegated there as well, or the host would see its default instead of the backend's.
pub trait Store: Send + Sync {
    // ---- runs ----
    fn create_run(&self, run: &NewRun) -> StoreResult<()>;
    fn run(&self, id: &str) -> StoreResult<Option<RunRecord>>;
    /// A run's state alone (start-up re-reads it once a run is leased); this default reads
    /// the whole record.
    fn run_state(&self, id: &str) -> StoreResult<Option<RunState>> {
        Ok(self.run(id)?.map(|r| r.state))
    }
    /// Newest first, at most `limit`.
    fn runs(&self, limit: usize) -> StoreResult<Vec<RunRecord>>;
    /// The runs `filter` lets through, newest first, skipping `offset`, at most `limit`.
    fn runs_filtered(
        &self,
        filter: &RunFilter,
        offset: usize,
        limit: usize,
    ) -> StoreResult<Vec<RunRecord>>;
    /// Move a non-ended run to `created|declaring|running|suspended`. Ending goes through `end_run`.
    fn set_run_state(&self, id: &str, state: RunState) -> StoreResult<()>;

    // ---- journal ----
    /// Append one event to a run's chain. Fails with `Conflict` after the terminal event.
    fn append(&self, run_id: &str, event: &NewEvent) -> StoreResult<JournalEntry>;
    fn journal(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>>;
    /// A run's journal read as typed events, in order: what a run's view and conversation
    /// are built from. A backend reads each body straight into its kind's type; this default
    /// reads the entries and parses each body.
    fn journal_events(&self, run_id: &str) -> StoreResult<Vec<EventEntry>> {
        Ok(self.journal(run_id)?.iter().map(EventEntry::of).collect())
    }
    /// Journal entries of a run with `seq > after_seq`, in order.
    fn journal_since(&self, run_id: &str, after_seq: i64) -> StoreResult<Vec<JournalEntry>> {
        Ok(self
            .journal(run_id)?
            .into_iter()
            .filter(|e| e.seq > after_seq)
            .collect())
    }
    /// Appends events to one run's journal in order, durably, as one commit.
    fn append_batch(&self, run_id: &str, events: &[NewEvent]) -> StoreResult<Vec<JournalEntry>> {
        events.iter().map(|e| self.append(run_id, e)).collect()
    }
    /// [`Store::append_batch`] for a caller that reads nothing back but the last seq (a
    /// write-through buffer): a backend may skip building the entries.
    fn append_batch_seq(&self, run_id: &str, events: &[NewEvent]) -> StoreResult<Option<i64>> {
        Ok(self.append_batch(run_id, events)?.last().map(|e| e.seq))
    }
    /// [`Store::append`] of an event the caller gives away and reads nothing back from: a
    /// buffering store keeps it as it is instead of copying it.
    fn append_owned(&self, run_id: &str, event: NewEvent) -> StoreResult<()> {
        self.append(run_id, &event).map(|_| ())
    }
    /// Commit whatever a write buffer above the backend holds (a backend itself holds nothing:
    /// every write is durable on return).
    fn flush(&self) -> StoreResult<()> {
        Ok(())
    }
    /// Verify every run's hash chain, and the store itself (integrity, rows, row checks).
    fn verify(&self) -> StoreResult<VerifyReport>;
    /// Why the store is read-only (it was opened so), or `None` when it takes writes.
    fn read_only(&self) -> Option<String> {
        None
    }

    /// The one terminal transaction (§9.2): append the `terminal` event, mark the run ended with
    /// outcome and ended_by, store the receipt, insert the outbox row (if any, deduplicated by
    /// its key). Idempotent: a run already ended returns `AlreadyEnded` and changes nothing.
    fn end_run(&self, run_id: &str, terminal: &Terminal) -> StoreResult<EndResult>;
    /// `events`, then the terminal transaction, committed together (the events still buffered
    /// at the end of a run ride with its terminal record: one durability point, §9.2). A run
    /// already ended returns `AlreadyEnded` and appends nothing.
    fn end_run_after(
        &self,
        run_id: &str,
        events: &[NewEvent],
        terminal: &Terminal,
    ) -> StoreResult<EndResult> {
        if !events.is_empty() && self.run(run_id)?.map(|r| r.state) != Some(RunState::Ended) {
            self.append_batch(run_id, events)?;
        }
        self.end_run(run_id, terminal)
    }
    fn receipt(&self, run_id: &str) -> StoreResult<Option<String>>;

    // ---- ownership leases (§9.1 b) ----
    /// Take or renew the run's lease for `owner` until `until_ms`. Returns false if another
    /// owner holds an unexpired lease.
    fn lease_run(&self, run_id: &str, owner: &str, now_ms: i64, until_ms: i64)
        -> StoreResult<bool>;
    fn release_run(&self, run_id: &str, owner: &str) -> StoreResult<()>;
    /// Take the run's lease for `owner` from `gone`, a holder the caller knows has exited
    /// (§9.2.5), even though its lease has not lapsed; otherwise as [`Store::lease_run`]. One
    /// conditional write: a holder that changed meanwhile (another process took the run over)
    /// keeps it, and false is returned.
    fn take_over_run(
        &self,
        run_id: &str,
        gone: &str,
        owner: &str,
        now_ms: i64,
        until_ms: i64,
    ) -> StoreResult<bool>;
    /// Run `work` while this process holds `duty` (start-up reconciliation, the outbox
    /// dispatcher) for the whole store: no other process on the store runs the same duty
    /// meanwhile (§9.1). `wait`: wait for a holder to let go, as long as the store waits for
    /// a lock; otherwise give up at once. Returns false, without running `work`, when the
    /// duty was not had. A holder that dies lets go with its process. The default runs `work`
    /// unfenced: for a store only one process ever opens.
    fn with_duty(&self, duty: &str, wait: bool, work: &mut dyn FnMut()) -> StoreResult<bool> {
        let _ = (duty, wait);
        work();
        Ok(true)
    }
    /// Non-ended runs whose lease has lapsed (or never existed) at `now_ms`
    /// ([`RunRecord::lease_lapsed`]), oldest first.
    fn orphaned_runs(&self, now_ms: i64) -> StoreResult<Vec<RunRecord>>;
    /// Every run not ended, oldest first (an index on open runs: the cost follows what is
    /// open, not the store's history).
    fn open_runs(&self) -> StoreResult<Vec<RunRecord>>;
    /// Runs whose id starts with `prefix` (a person typing a shortened id), at most `limit`.
    fn runs_by_prefix(&self, prefix: &str, limit: usize) -> StoreResult<Vec<RunRecord>>;
    /// The continuation of `parent` (§9.2.4: at most one), if it was resumed.
    fn continuation_of(&self, parent: &str) -> StoreResult<Option<RunRecord>>;

    // ---- payloads by content hash (§7) ----
    fn put_payload(&self, hash: &str, canonical_json: &str) -> StoreResult<()>;
    fn payload(&self, hash: &str) -> StoreResult<Option<String>>;

    // ---- the idempotency ledger (§8) ----
    /// Commit an intent before calling a provider: new key → `Proceed`; `failed` key →
    /// `Proceed` (back to `intended`, attempts + 1); any other state → `Recorded`.
    fn ledger_intend(&self, entry: &LedgerEntry) -> StoreResult<LedgerIntent>;
    /// Record the outcome of an intended key.
    fn ledger_settle(
        &self,
        key: &str,
        state: LedgerState,
        detail: &serde_json::Value,
        at_ms: i64,
    ) -> StoreResult<()>;
    fn ledger_get(&self, key: &str) -> StoreResult<Option<LedgerEntry>>;
    fn ledger_list(&self) -> StoreResult<Vec<LedgerEntry>>;

    // ---- cards (§7, §5.3) ----
    /// Open a card; any open card for the same (run, delivery) becomes `superseded`.
    fn open_card(&self, card: &Card) -> StoreResult<()>;
    /// Open cards across runs, newest first.
    fn open_cards(&self) -> StoreResult<Vec<Card>>;
    fn cards_for_run(&self, run_id: &str) -> StoreResult<Vec<Card>>;
    /// Decide the open card of (run, delivery) whose hash is `payload_hash`. An unknown,
    /// superseded or already-decided hash is `NotFound`/`Conflict` and changes nothing.
    fn decide_card(
        &self,
        run_id: &str,
        delivery: &str,
        payload_hash: &str,
        decision: Decision,
        at_ms: i64,
    ) -> StoreResult<Card>;
    /// Answer the run's open clarify card.
    fn answer_clarify(&self, run_id: &str, answer: &str, at_ms: i64) -> StoreResult<Card>;
    /// Close every open card of the run — approvals and its question alike — as `denied`, in
    /// one write (a person's cancel, §9.4): nothing of an ended run is left to decide.
    /// Answers how many were open.
    fn close_cards(&self, run_id: &str, at_ms: i64) -> StoreResult<u64>;

    // ---- schedule slots (§12.2) ----
    /// Consume (schedule, slot) and create its run in one transaction. Returns false (and
    /// creates nothing) if the slot row already exists.
    fn consume_slot(&self, schedule: &str, slot_ms: i64, run: &NewRun) -> StoreResult<bool>;
    fn slot_run(&self, schedule: &str, slot_ms: i64) -> StoreResult<Option<String>>;
    /// Consumed slots of a schedule: (slot time, run id), oldest first.
    fn slots(&self, schedule: &str) -> StoreResult<Vec<(i64, String)>>;

    // ---- schedules (§12.1) ----
    /// Add a schedule; `Conflict` if the name is taken.
    fn put_schedule(&self, schedule: &Schedule) -> StoreResult<()>;
    fn schedules(&self) -> StoreResult<Vec<Schedule>>;
    /// Returns false if there was no such schedule.
    fn remove_schedule(&self, name: &str) -> StoreResult<bool>;

    // ---- notification outbox (§11.4) ----
    fn outbox_pending(&self) -> StoreResult<Vec<OutboxRow>>;
    fn outbox_mark_sent(&self, id: i64, at_ms: i64) -> StoreResult<()>;
    fn outbox_for_run(&self, run_id: &str) -> StoreResult<Vec<OutboxRow>>;
    /// Record that delivering the unsent row `id` failed at `at_ms`: one more failure, and
    /// `error` as the last (a row already sent, or not there, is left alone).
    fn outbox_failed(
        &self,
        id: i64,
        error: &str,
        misconfigured: bool,
        at_ms: i64,
    ) -> StoreResult<()>;

    // ---- counts (`/metrics`) ----
    /// Runs, outcomes, deliveries and notifications counted in one consistent read.
    fn counts(&self) -> StoreResult<StoreCounts>;

    // ---- API tokens (§17) ----
    /// Store a token's hash; `Conflict` if the name (or the hash) is taken.
    fn put_token(&self, token: &ApiToken) -> StoreResult<()>;
    /// The token with this hash, if any (how a request is authenticated).
    fn token_by_hash(&self, hash: &str) -> StoreResult<Option<ApiToken>>;
    /// Every token (names and hashes, never secrets), by name.
    fn tokens(&self) -> StoreResult<Vec<ApiToken>>;
    /// Returns false if there was no token with this name.
    fn remove_token(&self, name: &str) -> StoreResult<bool>;

    // ---- damage found by verification (§10.2) ----
    /// Keep what a verification found (`found` non-empty). The same findings as a record
    /// already kept (open or closed) add nothing: damage acknowledged once stays
    /// acknowledged. Returns true when a new, open record was written.
    fn record_damage(&self, found: &[String], at_ms: i64) -> StoreResult<bool>;
    /// The open damage records, newest first; while there is one, new runs are refused.
    fn open_damage(&self) -> StoreResult<Vec<DamageRecord>>;
    /// Close every open damage record; returns how many were closed.
    fn close_damage(&self, how: DamageClosed, at_ms: i64) -> StoreResult<usize>;

    // ---- request keys (§17.1) ----
    /// Keep that `key` (an `Idempotency-Key`) in its scope asked for its request (a hash) and
    /// is answered by its answer, in one conditional insert
    /// ([`request_keys::KEEP_REQUEST_SQL`]): `None` when the key is new here (kept now), else
    /// what was kept under it before (nothing changes), so of two requests racing with one
    /// key, both answer the first one's answer.
    fn keep_request(
        &self,
        key: &request_keys::RequestKey,
        now_ms: i64,
    ) -> StoreResult<Option<request_keys::KeptRequest>>;
}

/// For verification tests only: alter what a store holds behind the host's back — as a
/// damaged disk, or someone with a database client, would — so a test can show that vouch
/// notices (a payload that no longer matches its hash is never acted on). Each backend
/// implements it over its own tables; the host, the CLI and the server never call it.
pub trait TamperForTests: Store {
    /// Replace the stored body of the payload `hash` with `body`, keeping its hash. Returns
    /// false if no payload has this hash.
    fn tamper_payload(&self, hash: &str, body: &str) -> StoreResult<bool>;
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn body_strategy() -> impl Strategy<Value = serde_json::Value> {
        let leaf = prop_oneof![
            Just(json!(null)),
            any::<bool>().prop_map(|b| json!(b)),
            any::<i64>().prop_map(|n| json!(n)),
            (-1.0e300f64..1.0e300).prop_map(|f| json!(f)),
            ".{0,12}".prop_map(|s: String| json!(s)),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(serde_json::Value::Array),
                prop::collection::btree_map(".{0,6}", inner, 0..4)
                    .prop_map(|m| serde_json::Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest! {
        #[test]
        fn two_step_hash_equals_the_definition(
            run_id in ".{0,16}",
            kind in 0usize..EventKind::ALL.len(),
            delivery in proptest::option::of(".{0,8}"),
            at_ms in any::<i64>(),
            seq in prop_oneof![1i64..1_000_000, any::<i64>()],
            prev in "[0-9a-f]{64}",
            body in body_strategy(),
        ) {
            let kind = EventKind::ALL[kind];
            let content = EventContent::new(&run_id, kind, delivery.as_deref(), at_ms, &body);
            prop_assert_eq!(
                content.hash(&prev, seq),
                event_hash(&prev, &run_id, seq, kind, delivery.as_deref(), at_ms, &body)
            );
        }
    }

    #[test]
    fn two_step_hash_at_the_edges_of_exact_integers() {
        let body = json!({"b": [1, 2.5, "\u{2028}"], "a": null});
        for seq in [1, JCS_EXACT_INT_MAX, JCS_EXACT_INT_MAX + 1, i64::MAX, -5] {
            let c = EventContent::new("r", EventKind::Turn, None, 1 << 60, &body);
            assert_eq!(
                c.hash(GENESIS_HASH, seq),
                event_hash(
                    GENESIS_HASH,
                    "r",
                    seq,
                    EventKind::Turn,
                    None,
                    1 << 60,
                    &body
                )
            );
        }
    }
}
