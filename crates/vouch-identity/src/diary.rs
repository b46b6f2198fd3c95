//! The append-only signed diary of an identity (§13.6).
//!
//! Entry `n` of identity `I` states `{"diary": I, "seq": n, "prev_hash": H(n-1), "at_ms", "body"}`;
//! its hash is the SHA-256 of that statement's canonical form, and its signature is `I`'s
//! Ed25519 signature over the same bytes. Entry 1 chains to the genesis hash (64 zeros). The
//! store refuses edits, deletes and entries that do not extend the chain; [`verify`] finds any
//! change made behind the store's back and names the first entry it breaks.
//!
//! Bodies are JSON values: `{"text": …}` for `vouch diary NAME --add TEXT`; the board records
//! claims and reports as `{"kind": "claim" | "report", …}` through [`append`].

use crate::{signing_bytes, verify as verify_signature, Identity, IdentityError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use vouch_store::{DiaryEntry, IdentityStore, StoreError, GENESIS_HASH};

/// Largest diary entry body, in bytes of JSON (store large content as an artifact).
pub const DIARY_BODY_BYTES_MAX: usize = 64 * 1024;
/// How often an append re-reads the head after losing a race to another appender.
pub const DIARY_APPEND_TRIES_MAX: usize = 32;

/// The statement an entry's hash and signature cover.
pub fn statement(identity: &str, seq: i64, prev_hash: &str, at_ms: i64, body: &Value) -> Value {
    json!({"diary": identity, "seq": seq, "prev_hash": prev_hash, "at_ms": at_ms, "body": body})
}

/// SHA-256 (hex) of the canonical form of an entry's statement.
pub fn entry_hash(statement: &Value) -> Result<String, IdentityError> {
    signing_bytes(statement)
        .map(|b| vouch_core::sha256_hex(&b))
        .map_err(|e| IdentityError::Canon(e.to_string()))
}

/// Append `body` to `id`'s diary, signed by `id`. The identity must be in the store with the
/// same public key. Safe against concurrent appenders: a lost race re-reads the head.
pub fn append(
    store: &dyn IdentityStore,
    id: &Identity,
    body: &Value,
    at_ms: i64,
) -> Result<DiaryEntry, IdentityError> {
    let text = serde_json::to_string(body).map_err(|e| IdentityError::Canon(e.to_string()))?;
    if text.len() > DIARY_BODY_BYTES_MAX {
        return Err(StoreError::Conflict(format!(
            "a diary entry of {} bytes is larger than {DIARY_BODY_BYTES_MAX}; store the content as an artifact and record its content id",
            text.len()
        ))
        .into());
    }
    // Sign what will be read back: the body as parsed from its stored text.
    let body: Value =
        serde_json::from_str(&text).map_err(|e| IdentityError::Canon(e.to_string()))?;
    match store.identity(id.name())? {
        Some(rec) if rec.public_key == id.public_key() => {}
        Some(rec) => {
            return Err(IdentityError::KeyMismatch {
                name: id.name().to_string(),
                file_key: id.public_key(),
                store_key: rec.public_key,
            })
        }
        None => {
            return Err(StoreError::NotFound {
                what: "identity",
                id: id.name().to_string(),
            }
            .into())
        }
    }
    let mut last_conflict = String::new();
    for _ in 0..DIARY_APPEND_TRIES_MAX {
        let (seq, prev_hash) = store
            .diary_head(id.name())?
            .map(|(s, h)| (s + 1, h))
            .unwrap_or((1, GENESIS_HASH.to_string()));
        let st = statement(id.name(), seq, &prev_hash, at_ms, &body);
        let entry = DiaryEntry {
            identity: id.name().to_string(),
            seq,
            at_ms,
            body: body.clone(),
            prev_hash,
            hash: entry_hash(&st)?,
            signature: id.sign(&st)?,
        };
        match store.diary_append(&entry) {
            Ok(()) => return Ok(entry),
            Err(StoreError::Conflict(m)) | Err(StoreError::Retryable(m)) => last_conflict = m,
            Err(e) => return Err(e.into()),
        }
    }
    Err(StoreError::Retryable(format!(
        "the diary of `{}` kept moving under {DIARY_APPEND_TRIES_MAX} tries ({last_conflict}); try again",
        id.name()
    ))
    .into())
}

/// The first entry of a diary that does not verify, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DiaryBreak {
    pub seq: i64,
    pub reason: String,
}

/// Verify a whole diary as read back: gap-free seqs from 1, each entry chained to the one
/// before, its hash the hash of its statement, its signature by `public_key`. Returns the
/// number of entries, or the first entry that breaks and why.
pub fn verify(
    identity: &str,
    public_key: &str,
    entries: &[DiaryEntry],
) -> Result<usize, DiaryBreak> {
    let mut prev = GENESIS_HASH.to_string();
    for (i, e) in entries.iter().enumerate() {
        let expected = i as i64 + 1;
        let fail = |reason: String| DiaryBreak { seq: e.seq, reason };
        if e.seq != expected {
            return Err(fail(format!(
                "sequence gap: expected entry #{expected}, found #{} (an entry was removed)",
                e.seq
            )));
        }
        if e.identity != identity {
            return Err(fail(format!(
                "it belongs to `{}`, not `{identity}`",
                e.identity
            )));
        }
        if e.prev_hash != prev {
            return Err(fail(
                "its previous hash is not the hash of the entry before it (the chain was cut or reordered)".into(),
            ));
        }
        let st = statement(&e.identity, e.seq, &e.prev_hash, e.at_ms, &e.body);
        let hash = entry_hash(&st).map_err(|err| fail(err.to_string()))?;
        if hash != e.hash {
            return Err(fail(
                "its content does not match its hash (edited after it was written)".into(),
            ));
        }
        if let Err(err) = verify_signature(public_key, &st, &e.signature) {
            return Err(fail(format!(
                "its signature does not verify with `{identity}`'s public key: {err}"
            )));
        }
        prev = e.hash.clone();
    }
    Ok(entries.len())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::sync::Arc;
    use vouch_store_sqlite::SqliteStore;

    fn store() -> (tempfile::TempDir, Arc<SqliteStore>) {
        let dir = tempfile::tempdir().unwrap();
        let s = Arc::new(SqliteStore::open(&dir.path().join("vouch.db")).unwrap());
        (dir, s)
    }

    #[test]
    fn appended_entries_verify_and_any_change_is_named() {
        let (_d, s) = store();
        let id = Identity::from_secret("w", &[3; 32]);
        s.put_identity(&id.record(1)).unwrap();
        for n in 0..5 {
            append(
                s.as_ref(),
                &id,
                &json!({"text": format!("note {n}"), "f": 0.1}),
                10 + n,
            )
            .unwrap();
        }
        let entries = s.diary("w").unwrap();
        assert_eq!(verify("w", &id.public_key(), &entries), Ok(5));

        let mut edited = entries.clone();
        edited[2].body = json!({"text": "changed"});
        assert_eq!(verify("w", &id.public_key(), &edited).unwrap_err().seq, 3);

        // Edited and re-hashed: only the signature can tell.
        let mut rehashed = entries.clone();
        rehashed[1].body = json!({"text": "changed"});
        let st = statement(
            "w",
            2,
            &rehashed[1].prev_hash,
            rehashed[1].at_ms,
            &rehashed[1].body,
        );
        rehashed[1].hash = entry_hash(&st).unwrap();
        let b = verify("w", &id.public_key(), &rehashed).unwrap_err();
        assert_eq!(b.seq, 2, "the re-hashed entry is named, by its signature");
        assert!(b.reason.contains("signature"), "{}", b.reason);

        let mut removed = entries.clone();
        removed.remove(1);
        assert_eq!(verify("w", &id.public_key(), &removed).unwrap_err().seq, 3);

        let other = Identity::from_secret("w", &[4; 32]);
        assert_eq!(
            verify("w", &other.public_key(), &entries).unwrap_err().seq,
            1
        );
    }

    #[test]
    fn append_refuses_a_key_the_store_does_not_know() {
        let (_d, s) = store();
        let id = Identity::from_secret("w", &[3; 32]);
        assert!(matches!(
            append(s.as_ref(), &id, &json!({}), 1),
            Err(IdentityError::Store(StoreError::NotFound { .. }))
        ));
        s.put_identity(&id.record(1)).unwrap();
        let impostor = Identity::from_secret("w", &[9; 32]);
        assert!(matches!(
            append(s.as_ref(), &impostor, &json!({}), 1),
            Err(IdentityError::KeyMismatch { .. })
        ));
        let big = json!({"text": "x".repeat(DIARY_BODY_BYTES_MAX)});
        assert!(append(s.as_ref(), &id, &big, 1).is_err());
        assert!(s.diary("w").unwrap().is_empty(), "nothing was written");
    }

    #[test]
    fn concurrent_appenders_all_land_in_one_chain() {
        let (_d, s) = store();
        let id = Arc::new(Identity::from_secret("w", &[5; 32]));
        s.put_identity(&id.record(1)).unwrap();
        std::thread::scope(|scope| {
            for t in 0..4 {
                let (s, id) = (s.clone(), id.clone());
                scope.spawn(move || {
                    for n in 0..5 {
                        append(s.as_ref(), &id, &json!({"t": t, "n": n}), n).unwrap();
                    }
                });
            }
        });
        let entries = s.diary("w").unwrap();
        assert_eq!(verify("w", &id.public_key(), &entries), Ok(20));
    }
}
