//! Signed receipts (§16): a statement of what a run's journal says, signed by the host.
//!
//! The file `vouch receipt RUN --signed` prints is one JSON object: the statement's fields
//! plus `signature`, the host's signature over the canonical form of the object without
//! `signature`. [`check_offline`] needs only the file; [`check_against_journal`] adds what the
//! store knows: the run's journal chain verifies, its terminal event is the head the file
//! names, every field is what the journal says (a changed field is named), and the signing
//! key is this host's.

use crate::{verify as verify_signature, Identity, IdentityError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};
use vouch_store::{verify_chain, EventKind, JournalEntry};

/// The `format` of a signed receipt file.
pub const FORMAT: &str = "vouch-signed-receipt/1";
/// Largest signed receipt file read, in bytes.
pub const FILE_BYTES_MAX: u64 = 4 << 20;

/// The fields of a statement, in the order they are documented (§16).
pub const FIELDS: &[&str] = &[
    "format",
    "run",
    "outcome",
    "ended_by",
    "deliveries",
    "journal_head",
    "receipt_sha256",
    "host_key",
];

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReceiptError {
    /// The run has no terminal event yet: there is nothing final to sign.
    #[error("run `{0}` has not ended yet; a signed receipt exists only once the run has its terminal record")]
    NotEnded(String),
    /// The journal is not one a receipt can be made from.
    #[error("the journal of run `{run}` cannot be signed: {reason}")]
    BadJournal { run: String, reason: String },
    /// The file is not a signed receipt (exit 2: the input is wrong).
    #[error("not a vouch signed receipt: {0}")]
    NotAReceipt(String),
}

/// The statement a receipt signs, built from the run's journal alone (plus the stored receipt
/// text, bound by its hash). Deterministic: the same journal gives the same bytes.
pub fn statement(
    run_id: &str,
    journal: &[JournalEntry],
    receipt_text: Option<&str>,
    host_key: &str,
) -> Result<Value, ReceiptError> {
    let terminal = journal
        .iter()
        .rev()
        .find(|e| e.kind == EventKind::Terminal)
        .ok_or_else(|| ReceiptError::NotEnded(run_id.to_string()))?;
    let bad = |reason: &str| ReceiptError::BadJournal {
        run: run_id.to_string(),
        reason: reason.to_string(),
    };
    if journal.last().map(|e| e.seq) != Some(terminal.seq) {
        return Err(bad("events follow the terminal event"));
    }
    let statuses = terminal
        .body
        .get("statuses")
        .and_then(Value::as_object)
        .cloned()
        .unwrap_or_default();
    let mut ids: Vec<&String> = statuses.keys().collect();
    ids.sort();
    let deliveries: Vec<Value> = ids
        .into_iter()
        .map(|id| {
            let evidence = journal
                .iter()
                .rev()
                .find(|e| e.kind == EventKind::Evidence && e.delivery.as_deref() == Some(id));
            json!({
                "id": id,
                "status": statuses[id],
                "evidence": evidence.and_then(|e| e.body.get("evidence")).cloned().unwrap_or(Value::Null),
                "evidence_event": evidence.map(|e| e.seq),
            })
        })
        .collect();
    Ok(json!({
        "format": FORMAT,
        "run": run_id,
        "outcome": terminal.body.get("outcome").cloned().unwrap_or(Value::Null),
        "ended_by": terminal.body.get("ended_by").cloned().unwrap_or(Value::Null),
        "deliveries": deliveries,
        "journal_head": {"seq": terminal.seq, "hash": terminal.hash},
        "receipt_sha256": receipt_text.map(|t| vouch_core::sha256_hex(t.as_bytes())),
        "host_key": host_key,
    }))
}

/// The signed file: the statement's fields and `signature`.
pub fn sign(
    host: &Identity,
    run_id: &str,
    journal: &[JournalEntry],
    receipt_text: Option<&str>,
) -> Result<Value, IdentityError> {
    let st = statement(run_id, journal, receipt_text, &host.public_key())
        .map_err(|e| IdentityError::Canon(e.to_string()))?;
    let signature = host.sign(&st)?;
    let mut file = st;
    if let Value::Object(m) = &mut file {
        m.insert("signature".into(), Value::from(signature));
    }
    Ok(file)
}

/// One check of `vouch verify`, with what it found.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// `signature`, `field <name>`, `journal chain`, `journal head`, `host key`.
    pub check: String,
    pub ok: bool,
    pub detail: String,
}

impl Check {
    fn ok(check: &str, detail: String) -> Check {
        Check {
            check: check.into(),
            ok: true,
            detail,
        }
    }
    fn failed(check: &str, detail: String) -> Check {
        Check {
            check: check.into(),
            ok: false,
            detail,
        }
    }
}

/// A parsed signed receipt: the statement (every field but `signature`) and the signature.
#[derive(Debug, Clone, PartialEq)]
pub struct SignedReceipt {
    pub statement: Map<String, Value>,
    pub signature: String,
}

impl SignedReceipt {
    pub fn run(&self) -> Option<&str> {
        self.statement.get("run").and_then(Value::as_str)
    }
    pub fn host_key(&self) -> Option<&str> {
        self.statement.get("host_key").and_then(Value::as_str)
    }
}

/// Parse a signed receipt file's text. Shape errors name the field at fault.
pub fn parse(text: &str) -> Result<SignedReceipt, ReceiptError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| ReceiptError::NotAReceipt(format!("the file is not JSON ({e})")))?;
    let Value::Object(mut m) = v else {
        return Err(ReceiptError::NotAReceipt(
            "the file is not a JSON object".into(),
        ));
    };
    let signature =
        match m.remove("signature") {
            Some(Value::String(s)) => s,
            Some(_) => {
                return Err(ReceiptError::NotAReceipt(
                    "field `signature` is not text".into(),
                ))
            }
            None => return Err(ReceiptError::NotAReceipt(
                "it has no `signature` field (was it printed with `vouch receipt RUN --signed`?)"
                    .into(),
            )),
        };
    match m.get("format") {
        Some(Value::String(f)) if f == FORMAT => {}
        Some(other) => {
            return Err(ReceiptError::NotAReceipt(format!(
                "field `format` is {other}, not \"{FORMAT}\""
            )))
        }
        None => return Err(ReceiptError::NotAReceipt("it has no `format` field".into())),
    }
    for f in FIELDS {
        if !m.contains_key(*f) {
            return Err(ReceiptError::NotAReceipt(format!("it has no `{f}` field")));
        }
    }
    if let Some(extra) = m.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(ReceiptError::NotAReceipt(format!(
            "field `{extra}` is not part of a signed receipt (added after signing?)"
        )));
    }
    for f in ["run", "host_key"] {
        if !m[f].is_string() {
            return Err(ReceiptError::NotAReceipt(format!(
                "field `{f}` is not text"
            )));
        }
    }
    Ok(SignedReceipt {
        statement: m,
        signature,
    })
}

/// What can be checked with the file alone: the signature by the key the file names.
pub fn check_offline(r: &SignedReceipt) -> Check {
    let key = r.host_key().unwrap_or_default();
    match verify_signature(key, &Value::Object(r.statement.clone()), &r.signature) {
        Ok(()) => Check::ok("signature", format!("valid, by host key {key}")),
        Err(e) => Check::failed("signature", e.to_string()),
    }
}

/// What the store adds: the run's chain verifies; each field is what the journal says (every
/// changed field is named); the head is the run's terminal event.
pub fn check_against_journal(
    r: &SignedReceipt,
    journal: &[JournalEntry],
    receipt_text: Option<&str>,
) -> Vec<Check> {
    let run = r.run().unwrap_or_default();
    let mut checks = vec![];
    match verify_chain(journal) {
        Ok(()) => checks.push(Check::ok(
            "journal chain",
            format!("the {} events of run {run} chain and verify", journal.len()),
        )),
        Err(b) => checks.push(Check::failed(
            "journal chain",
            format!(
                "the journal of run {run} is broken at event #{}: {}",
                b.seq, b.reason
            ),
        )),
    }
    let host_key = r.host_key().unwrap_or_default();
    let expected = match statement(run, journal, receipt_text, host_key) {
        Ok(Value::Object(m)) => m,
        Ok(_) => Map::new(),
        Err(e) => {
            checks.push(Check::failed("journal head", e.to_string()));
            return checks;
        }
    };
    for f in FIELDS {
        let (got, want) = (&r.statement[*f], &expected[*f]);
        if got == want {
            continue;
        }
        let detail = if *f == "journal_head" {
            format!("the file names head {got}, but the run's journal ends at {want} (the journal or the file was changed)")
        } else {
            format!(
                "the file says {}, the run's journal says {}",
                short(got),
                short(want)
            )
        };
        checks.push(Check::failed(&format!("field {f}"), detail));
    }
    if checks.iter().all(|c| c.ok) {
        checks.push(Check::ok(
            "journal head",
            format!(
                "every field is what the journal says; the head is the terminal event #{}",
                expected["journal_head"]["seq"]
            ),
        ));
    }
    checks
}

fn short(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 200 {
        format!("{}…", s.chars().take(200).collect::<String>())
    } else {
        s
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use vouch_store::{event_hash, GENESIS_HASH};

    fn journal() -> Vec<JournalEntry> {
        let mut out: Vec<JournalEntry> = vec![];
        let events = [
            (EventKind::RunCreated, None, json!({})),
            (
                EventKind::Evidence,
                Some("a"),
                json!({"status": "verified", "evidence": "file sha256:ab"}),
            ),
            (
                EventKind::Terminal,
                None,
                json!({"outcome": "succeeded", "ended_by": "loop", "statuses": {"b": "not_attempted", "a": "verified"}}),
            ),
        ];
        for (i, (kind, d, body)) in events.into_iter().enumerate() {
            let prev = out
                .last()
                .map(|e| e.hash.clone())
                .unwrap_or(GENESIS_HASH.into());
            let seq = i as i64 + 1;
            out.push(JournalEntry {
                run_id: "r1".into(),
                seq,
                kind,
                delivery: d.map(String::from),
                hash: event_hash(&prev, "r1", seq, kind, d, seq, &body),
                body,
                at_ms: seq,
                prev_hash: prev,
            });
        }
        out
    }

    #[test]
    fn signed_verified_and_every_changed_field_named() {
        let host = Identity::from_secret("host", &[1; 32]);
        let j = journal();
        let file = sign(&host, "r1", &j, Some("Receipt")).unwrap();
        assert_eq!(file["deliveries"][0]["id"], "a");
        assert_eq!(file["deliveries"][0]["evidence"], "file sha256:ab");
        assert_eq!(file["deliveries"][0]["evidence_event"], 2);
        assert_eq!(file["deliveries"][1]["evidence"], Value::Null);
        assert_eq!(file["journal_head"]["seq"], 3);
        let r = parse(&file.to_string()).unwrap();
        assert!(check_offline(&r).ok);
        assert!(check_against_journal(&r, &j, Some("Receipt"))
            .iter()
            .all(|c| c.ok));
        assert_eq!(
            sign(&host, "r1", &j, Some("Receipt")).unwrap(),
            file,
            "deterministic"
        );

        for (field, value) in [
            ("outcome", json!("failed")),
            ("run", json!("r2")),
            ("deliveries", json!([])),
            ("receipt_sha256", json!("00")),
            ("ended_by", json!("boot")),
        ] {
            let mut t = file.clone();
            t[field] = value;
            let r = parse(&t.to_string()).unwrap();
            assert!(!check_offline(&r).ok, "{field}");
            if field != "run" {
                let checks = check_against_journal(&r, &j, Some("Receipt"));
                assert!(
                    checks
                        .iter()
                        .any(|c| !c.ok && c.check == format!("field {field}")),
                    "{field}: {checks:?}"
                );
            }
        }
        // The stored receipt text changed: its hash no longer matches.
        let checks = check_against_journal(&r, &j, Some("Receipt, edited"));
        assert!(checks
            .iter()
            .any(|c| !c.ok && c.check == "field receipt_sha256"));
    }

    #[test]
    fn a_changed_journal_is_named() {
        let host = Identity::from_secret("host", &[1; 32]);
        let j = journal();
        let file = sign(&host, "r1", &j, None).unwrap();
        let r = parse(&file.to_string()).unwrap();
        let mut edited = j.clone();
        edited[1].body = json!({"status": "verified", "evidence": "forged"});
        let checks = check_against_journal(&r, &edited, None);
        assert!(checks
            .iter()
            .any(|c| !c.ok && c.check == "journal chain" && c.detail.contains("#2")));
    }

    #[test]
    fn shapes_are_named() {
        assert!(parse("nope").unwrap_err().to_string().contains("not JSON"));
        assert!(parse("{}").unwrap_err().to_string().contains("signature"));
        let host = Identity::from_secret("host", &[1; 32]);
        let mut file = sign(&host, "r1", &journal(), None).unwrap();
        file["extra"] = json!(1);
        assert!(parse(&file.to_string())
            .unwrap_err()
            .to_string()
            .contains("`extra`"));
        assert!(matches!(
            statement("r1", &journal()[..2], None, "k"),
            Err(ReceiptError::NotEnded(_))
        ));
    }
}
