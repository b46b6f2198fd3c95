//! What every backend agrees on about rows: the column lists of tables whose schemas match,
//! enums as the text they are stored as, the size limits, an event made ready to insert, and
//! the errors whose wording a person reads whichever backend answered.
//!
//! What differs stays in each backend: placeholders (`?1` or `$1`), column types, how a row is
//! read, and how the database's own error codes become a [`StoreError`].

use crate::{
    EncodedBody, EventBody, EventContent, EventKind, JournalEntry, NewEvent, StoreError,
    StoreResult,
};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::Value;

/// Largest event body or payload a store accepts.
pub const BODY_BYTES_MAX: usize = 4 << 20;

// ---- column lists (the same names, in the same order, in every backend's schema) ----

pub const RUN_COLS: &str = "id, trigger, title, chain_root, parent, scope, spec, state, outcome, ended_by, created_ms, ended_ms, owner, lease_until_ms";
pub const JOURNAL_COLS: &str = "run_id, seq, kind, delivery, body, at_ms, prev_hash, hash";
pub const LEDGER_COLS: &str =
    "key, scope, run_id, delivery, payload_hash, state, attempts, detail, updated_ms";
pub const CARD_COLS: &str =
    "run_id, delivery, payload_hash, summary, state, created_ms, decided_ms, answer, reason";
pub const OUTBOX_COLS: &str = "id, dedup_key, run_id, route, body, created_ms, sent_ms, \
     failures, last_error, misconfigured, last_error_ms";
pub const SCHEDULE_COLS: &str = "name, cron, tz, routine, catch_up, overlap, grace_ms, created_ms";
pub const TOKEN_COLS: &str = "name, hash, created_ms, scope, identity";
pub const IDENTITY_COLS: &str = "name, public_key, created_ms";
pub const DIARY_COLS: &str = "identity, seq, at_ms, body, prev_hash, hash, signature";
pub const TASK_COLS: &str = "id, kind, owner, state, max_attempts, attempts, aborts, epoch, claimant, lease_until_ms, deadline_ms, profiles, tags, excluded_claimant, condition, idempotency_key, request_id, spec, created_ms, queued_ms, ended_ms, accepted_attempt, result_id, resuming, updated_ms";
pub const ATTEMPT_COLS: &str = "task_id, n, state, claimant, epoch, profile, model, policy_fingerprint, claimed_ms, started_ms, lease_until_ms, dispatch_deadline_ms, running_deadline_ms, running_left_ms, ended_ms, end_reason, retryable, run_id, result_id, turns, tokens, tool_calls, failed_tool_calls, detail";

// ---- enums and JSON as stored text ----

/// An enum as the text it is stored as: its serde name (`"scheduled"`, `"succeeded"`…).
pub fn enum_text<T: Serialize>(v: &T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

/// Stored text back as its enum; the error says why the text is not one of its names.
pub fn enum_from_text<T: DeserializeOwned>(text: &str) -> Result<T, serde_json::Error> {
    serde_json::from_value(Value::String(text.to_string()))
}

/// A JSON value as the text a column holds.
pub fn json_text<T: Serialize + ?Sized>(v: &T) -> StoreResult<String> {
    serde_json::to_string(v).map_err(|e| StoreError::Fatal(format!("serialize JSON: {e}")))
}

/// A stored value that does not read back as its type: the store is damaged.
pub fn corrupt(what: &str, e: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("a stored {what} does not parse: {e}"))
}

// ---- limits ----

/// A payload larger than [`BODY_BYTES_MAX`] is refused before anything is written.
pub fn check_payload_bytes(bytes: usize) -> StoreResult<()> {
    if bytes > BODY_BYTES_MAX {
        return Err(StoreError::Conflict(format!(
            "payload of {bytes} bytes exceeds {BODY_BYTES_MAX}"
        )));
    }
    Ok(())
}

/// A diary entry's body larger than [`BODY_BYTES_MAX`] is refused before anything is written.
pub fn check_diary_body_bytes(bytes: usize) -> StoreResult<()> {
    if bytes > BODY_BYTES_MAX {
        return Err(StoreError::Conflict(format!(
            "diary entry body of {bytes} bytes exceeds {BODY_BYTES_MAX}; store large content as an artifact and record its content id"
        )));
    }
    Ok(())
}

// ---- errors both backends answer in the same words ----

/// `append` of a `terminal` event: only the terminal transaction writes one.
pub fn terminal_only_by_end_run() -> StoreError {
    StoreError::Conflict("the terminal event is written only by end_run".into())
}

/// An append to a run whose journal the terminal event closed.
pub fn run_ended(run_id: &str) -> StoreError {
    StoreError::Conflict(format!(
        "run {run_id} has already ended; nothing more can be journaled"
    ))
}

/// A run created twice.
pub fn run_exists(run_id: &str) -> StoreError {
    StoreError::Conflict(format!("run {run_id} already exists"))
}

/// What the schema says when it refuses a new run because the store is marked damaged
/// (§10.2); the backends keep that refusal as it is instead of calling it a taken id.
pub const DAMAGED_REFUSAL: &str = "the store is marked damaged";

/// A refused run insert: the damage refusal as the schema worded it, any other conflict as
/// a taken id.
pub fn run_insert_conflict(run_id: &str, e: StoreError) -> StoreError {
    match e {
        StoreError::Conflict(m) if m.contains(DAMAGED_REFUSAL) => StoreError::Conflict(m),
        StoreError::Conflict(_) => run_exists(run_id),
        other => other,
    }
}

/// Findings kept on a damage record: at most this many, each at most this many bytes (the
/// fingerprint covers them all).
pub const DAMAGE_FINDINGS_MAX: usize = 100;
pub const DAMAGE_FINDING_BYTES_MAX: usize = 1_000;

/// The findings of one verification as stored: bounded, as JSON text.
pub fn damage_found_text(found: &[String]) -> StoreResult<String> {
    let kept: Vec<&str> = found
        .iter()
        .take(DAMAGE_FINDINGS_MAX)
        .map(|f| {
            let mut end = f.len().min(DAMAGE_FINDING_BYTES_MAX);
            while !f.is_char_boundary(end) {
                end -= 1;
            }
            &f[..end]
        })
        .collect();
    json_text(&kept)
}

/// The findings read back from their JSON text (unreadable text is itself the finding).
pub fn damage_found_parse(text: &str) -> Vec<String> {
    serde_json::from_str(text).unwrap_or_else(|_| vec![text.to_string()])
}

/// A schedule name already taken.
pub fn schedule_exists(name: &str) -> StoreError {
    StoreError::Conflict(format!(
        "a schedule named `{name}` already exists; remove it first or pick another name"
    ))
}

/// A token name already taken.
pub fn token_exists(name: &str) -> StoreError {
    StoreError::Conflict(format!(
        "a token named `{name}` already exists; remove it first or pick another name"
    ))
}

// ---- appends ----

/// An event made ready to insert: its body serialized as it will be stored and read back, and
/// its content canonicalized. This is the costly part of an append; a backend does it before
/// it serializes writers (the SQLite writer thread, a PostgreSQL row lock), so what is left
/// there is "next seq, SHA-256, insert".
#[derive(Debug, Clone)]
pub struct PreparedEvent {
    pub run_id: String,
    pub kind: EventKind,
    pub delivery: Option<String>,
    pub at_ms: i64,
    /// The body as stored.
    pub body_text: String,
    /// The body as it will be read back, when that differs from the body given (a body with a
    /// floating-point number, parsed back from its text); otherwise the given body is what is
    /// read back, and it is not copied here.
    pub read_back: Option<Value>,
    pub content: EventContent,
}

impl PreparedEvent {
    /// Prepare one event; a body larger than [`BODY_BYTES_MAX`] is refused.
    pub fn new(run_id: &str, ev: &NewEvent) -> StoreResult<PreparedEvent> {
        Self::of_body(run_id, ev.kind, ev.delivery.as_deref(), ev.at_ms, &ev.body)
    }

    /// Prepare one event from its parts, its body in either form (borrowed, not copied).
    pub fn of_body(
        run_id: &str,
        kind: EventKind,
        delivery: Option<&str>,
        at_ms: i64,
        body: &EventBody,
    ) -> StoreResult<PreparedEvent> {
        match body {
            EventBody::Value(body) => Self::of(run_id, kind, delivery, at_ms, body),
            EventBody::Encoded(body) => Self::encoded(run_id, kind, delivery, at_ms, body),
        }
    }

    /// Prepare one event whose body is already written as its two texts: nothing is
    /// serialized again, and (no floating-point number in it) it reads back as it is.
    fn encoded(
        run_id: &str,
        kind: EventKind,
        delivery: Option<&str>,
        at_ms: i64,
        body: &EncodedBody,
    ) -> StoreResult<PreparedEvent> {
        check_body_bytes(body.text().len())?;
        Ok(PreparedEvent {
            run_id: run_id.to_string(),
            kind,
            delivery: delivery.map(str::to_string),
            at_ms,
            body_text: body.text().to_string(),
            read_back: None,
            content: EventContent::of_canonical(run_id, kind, delivery, at_ms, body.canonical()),
        })
    }

    /// Prepare one event from its parts (the body borrowed, not copied).
    pub fn of(
        run_id: &str,
        kind: EventKind,
        delivery: Option<&str>,
        at_ms: i64,
        body: &Value,
    ) -> StoreResult<PreparedEvent> {
        let body_text = json_text(body)?;
        check_body_bytes(body_text.len())?;
        // Hash what will be read back: the body parsed from its stored text. Text, integers,
        // booleans and null come back exactly as they went in, so only a body with a
        // floating-point number needs the round trip (a parser may land one ULP away).
        let read_back: Option<Value> = if has_float(body) {
            Some(serde_json::from_str(&body_text).map_err(|e| StoreError::Fatal(e.to_string()))?)
        } else {
            None
        };
        let content = EventContent::new(
            run_id,
            kind,
            delivery,
            at_ms,
            read_back.as_ref().unwrap_or(body),
        );
        Ok(PreparedEvent {
            run_id: run_id.to_string(),
            kind,
            delivery: delivery.map(str::to_string),
            at_ms,
            body_text,
            read_back,
            content,
        })
    }

    /// Prepare a batch of non-terminal events (the terminal event is written only by
    /// `end_run`).
    pub fn all(run_id: &str, events: &[NewEvent]) -> StoreResult<Vec<PreparedEvent>> {
        events
            .iter()
            .map(|e| {
                if e.kind == EventKind::Terminal {
                    return Err(terminal_only_by_end_run());
                }
                PreparedEvent::new(run_id, e)
            })
            .collect()
    }

    /// The journal entry once the event has its place in the chain; `body` is the body this
    /// event was prepared from.
    pub fn entry(
        mut self,
        seq: i64,
        prev_hash: String,
        hash: String,
        body: &Value,
    ) -> JournalEntry {
        let body = self.read_back.take().unwrap_or_else(|| body.clone());
        self.entry_with(seq, prev_hash, hash, body)
    }

    /// [`PreparedEvent::entry`] of an event prepared from `body`, in either form.
    pub fn entry_of(
        self,
        seq: i64,
        prev_hash: String,
        hash: String,
        body: &EventBody,
    ) -> JournalEntry {
        match body {
            EventBody::Value(v) => self.entry(seq, prev_hash, hash, v),
            EventBody::Encoded(_) => {
                // What a read of the stored event answers: its text, parsed.
                let read = serde_json::from_str(&self.body_text).unwrap_or(Value::Null);
                self.entry_with(seq, prev_hash, hash, read)
            }
        }
    }

    fn entry_with(self, seq: i64, prev_hash: String, hash: String, body: Value) -> JournalEntry {
        JournalEntry {
            run_id: self.run_id,
            seq,
            kind: self.kind,
            delivery: self.delivery,
            body,
            at_ms: self.at_ms,
            prev_hash,
            hash,
        }
    }
}

/// An event body larger than [`BODY_BYTES_MAX`] is refused before anything is written.
fn check_body_bytes(bytes: usize) -> StoreResult<()> {
    if bytes > BODY_BYTES_MAX {
        return Err(StoreError::Conflict(format!(
            "event body of {bytes} bytes exceeds {BODY_BYTES_MAX}; store large content as a payload and journal its hash"
        )));
    }
    Ok(())
}

/// Whether any number in `v` is a float (the only JSON values whose text form may not parse
/// back to the identical value).
fn has_float(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.is_f64(),
        Value::Array(items) => items.iter().any(has_float),
        Value::Object(map) => map.values().any(has_float),
        Value::Null | Value::Bool(_) | Value::String(_) => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{event_hash, CardState, LedgerState, GENESIS_HASH};
    use serde_json::json;
    use vouch_core::{EndedBy, Outcome, RunState, TriggerKind};

    #[test]
    fn enums_are_stored_as_their_names_and_read_back() {
        assert_eq!(enum_text(&TriggerKind::Task), "task");
        assert_eq!(enum_text(&RunState::Running), RunState::Running.as_str());
        assert_eq!(
            enum_text(&LedgerState::Failed),
            LedgerState::Failed.as_str()
        );
        assert_eq!(
            enum_text(&CardState::Superseded),
            CardState::Superseded.as_str()
        );
        assert_eq!(enum_text(&EventKind::LoopEnded), "loop_ended");
        for o in [Outcome::Succeeded, Outcome::Failed] {
            assert_eq!(enum_from_text::<Outcome>(&enum_text(&o)).ok(), Some(o));
        }
        assert_eq!(
            enum_from_text::<EndedBy>(&enum_text(&EndedBy::Loop)).ok(),
            Some(EndedBy::Loop)
        );
        let err = enum_from_text::<Outcome>("Succeeded").unwrap_err();
        assert!(err.to_string().contains("Succeeded"), "{err}");
    }

    #[test]
    fn a_prepared_event_hashes_what_is_read_back() {
        let ev = NewEvent::for_delivery(EventKind::Evidence, "d", 7, json!({"x": 0.1, "n": 3}));
        let p = PreparedEvent::new("r", &ev).expect("prepares");
        let read_back: Value = serde_json::from_str(&p.body_text).expect("stored text parses");
        assert_eq!(p.read_back.as_ref(), Some(&read_back));
        let hash = p.content.hash(GENESIS_HASH, 1);
        let entry = p.entry_of(1, GENESIS_HASH.into(), hash.clone(), &ev.body);
        assert_eq!(entry.body, read_back);
        assert_eq!(
            hash,
            event_hash(
                GENESIS_HASH,
                "r",
                1,
                EventKind::Evidence,
                Some("d"),
                7,
                &read_back
            )
        );
        assert_eq!(entry.delivery.as_deref(), Some("d"));
    }

    /// An event prepared from its typed body (written once) and the same event prepared from
    /// its `Value` store the same text, read back the same body and hash the same.
    fn same_as_the_value_path(ev: &crate::Event) {
        let encoded = ev.clone().for_delivery("d\u{1}é", 9);
        let by_value = NewEvent::for_delivery(ev.kind(), "d\u{1}é", 9, ev.body());
        let (a, b) = (
            PreparedEvent::new("r😀", &encoded).expect("prepares"),
            PreparedEvent::new("r😀", &by_value).expect("prepares"),
        );
        assert_eq!(a.body_text, b.body_text, "{}", ev.kind());
        assert_eq!(
            a.content.hash(GENESIS_HASH, 3),
            b.content.hash(GENESIS_HASH, 3)
        );
        let (ea, eb) = (
            a.entry_of(3, String::new(), String::new(), &encoded.body),
            b.entry_of(3, String::new(), String::new(), &by_value.body),
        );
        assert_eq!(ea, eb);
    }

    proptest::proptest! {
        #[test]
        fn typed_bodies_store_and_hash_as_their_values(
            text in "[a-z\"\\\\\u{0}-\u{1f}é€\u{e000}😀]{0,10}",
            n in proptest::prelude::any::<u32>(),
            payload in proptest::collection::btree_map("[a-zé😀\u{e000}]{0,3}", proptest::prelude::any::<i32>(), 0..20),
        ) {
            use crate::journal::*;
            let payload = serde_json::to_value(&payload).expect("payload");
            let events: Vec<crate::Event> = vec![
                Turn { index: n.into(), content: Some(text.clone()), tool_calls: vec![ToolCallRecord { id: text.clone(), name: "save".into(), arguments: text.clone() }], usage: Some(TokenUsage { prompt_tokens: n.into(), completion_tokens: 1 }), error: None }.into(),
                ToolCalled { call_id: text.clone(), name: "t".into(), ok: n % 2 == 0, result: text.clone(), repair: n % 3 == 0 }.into(),
                ApprovalRequested { payload_hash: text.clone(), payload: payload.clone(), summary: text.clone(), reason: String::new() }.into(),
                AttemptStarted { payload_hash: "h".into(), payload: payload.clone(), key: Some(text.clone()), posture: None, retry_same_key: true }.into(),
                AttemptFinished { reply: ProviderReply::Accepted { reference: text.clone() }, retrying_same_key: false }.into(),
                Evidence::of(vouch_core::DeliveryStatus::Verified, text.clone(), "").into(),
                Terminal { outcome: Outcome::Succeeded, ended_by: EndedBy::Loop, statuses: [(text.clone(), vouch_core::DeliveryStatus::Failed), ("a".to_string(), vouch_core::DeliveryStatus::Verified)].into_iter().collect(), needs_you: vec![text.clone()], significance: vouch_core::Significance::Routine, route: vouch_core::Route::Badge, presence: vouch_core::Presence::Away, quiet: false, loop_end: None, reasons: [(text.clone(), text.clone())].into_iter().collect(), corrupt: vec![-1, 7], receipt_sha256: Some(text.clone()) }.into(),
            ];
            for ev in &events {
                same_as_the_value_path(ev);
            }
        }
    }

    #[test]
    fn a_typed_body_with_a_float_takes_the_value_path() {
        let ev: crate::Event = crate::journal::LedgerIntent {
            key: "k".into(),
            payload_hash: "h".into(),
            payload: json!({"amount": 0.1, "n": 3}),
        }
        .into();
        assert!(matches!(ev.encode(), EventBody::Value(_)));
        same_as_the_value_path(&ev);
        let plain: crate::Event = crate::journal::Suspended {
            reason: "r".into(),
            at_boot: false,
        }
        .into();
        assert!(matches!(plain.encode(), EventBody::Encoded(_)));
    }

    #[test]
    fn limits_refuse_what_is_too_large_and_no_terminal_rides_in_a_batch() {
        let big = NewEvent::new(EventKind::Turn, 0, json!("x".repeat(BODY_BYTES_MAX)));
        assert!(matches!(
            PreparedEvent::new("r", &big),
            Err(StoreError::Conflict(m)) if m.contains("exceeds")
        ));
        assert!(check_payload_bytes(BODY_BYTES_MAX).is_ok());
        assert!(check_payload_bytes(BODY_BYTES_MAX + 1).is_err());
        assert!(check_diary_body_bytes(BODY_BYTES_MAX + 1).is_err());
        let batch = [
            NewEvent::new(EventKind::Turn, 0, json!({})),
            NewEvent::new(EventKind::Terminal, 0, json!({})),
        ];
        assert!(matches!(
            PreparedEvent::all("r", &batch),
            Err(StoreError::Conflict(m)) if m.contains("end_run")
        ));
    }
}
