//! Identities and their diaries (§13.6): the public half of every Ed25519 identity, and one
//! append-only, hash-chained, signed diary per identity.
//!
//! The store keeps what it is given and enforces the shape of the chain (each entry the next
//! seq after the last, chained to the last hash; nothing updated or deleted). It does no
//! cryptography: hashes and signatures are made and checked by `vouch-identity`, which is also
//! what reads a diary back and verifies it.

use crate::StoreResult;
use serde::{Deserialize, Serialize};

/// The public record of an identity. Immutable once stored: a new key is a new identity.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct IdentityRecord {
    pub name: String,
    /// `ed25519:` + 64 lowercase hex digits.
    pub public_key: String,
    pub created_ms: i64,
}

/// One diary entry as stored. `hash` is the SHA-256 of the canonical form of
/// `{"diary", "seq", "prev_hash", "at_ms", "body"}` and `signature` the identity's Ed25519
/// signature over the same bytes (both made by `vouch-identity`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DiaryEntry {
    pub identity: String,
    /// 1-based, gap-free per identity.
    pub seq: i64,
    pub at_ms: i64,
    pub body: serde_json::Value,
    pub prev_hash: String,
    pub hash: String,
    /// 128 lowercase hex digits.
    pub signature: String,
}

/// What an identity store answers when asked to record an identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum PutIdentity {
    /// The identity is new and now stored.
    Created,
    /// The same name with the same public key was already stored; nothing changed.
    Existing,
}

/// The public keys and diaries of identities. Implemented by every backend beside [`Store`]
/// (crate::Store); writes are durable on return.
pub trait IdentityStore: Send + Sync {
    /// Record an identity's public key. The same name with the same key is `Existing`; the
    /// same name with another key is `Conflict` and changes nothing.
    fn put_identity(&self, identity: &IdentityRecord) -> StoreResult<PutIdentity>;
    fn identity(&self, name: &str) -> StoreResult<Option<IdentityRecord>>;
    /// Every identity, by name.
    fn identities(&self) -> StoreResult<Vec<IdentityRecord>>;

    /// Append one entry. It must extend the identity's chain: `seq` one past the last entry
    /// (1 for the first) and `prev_hash` the last entry's hash ([`GENESIS_HASH`](crate::GENESIS_HASH)
    /// for the first); otherwise `Conflict` (someone else appended first: read the head again).
    /// An unknown identity is `NotFound`.
    fn diary_append(&self, entry: &DiaryEntry) -> StoreResult<()>;
    /// The whole diary of an identity, oldest first.
    fn diary(&self, name: &str) -> StoreResult<Vec<DiaryEntry>>;
    /// The last entry's seq and hash, if any.
    fn diary_head(&self, name: &str) -> StoreResult<Option<(i64, String)>> {
        Ok(self.diary(name)?.last().map(|e| (e.seq, e.hash.clone())))
    }
}
