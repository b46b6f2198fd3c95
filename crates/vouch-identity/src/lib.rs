//! Identities of vouch (§13.6): Ed25519 keys, signatures over the canonical form of JSON
//! values, key files in the home, the append-only signed diary of each identity, and the
//! host's signed receipts (§16).
//!
//! What is signed is always the RFC 8785 canonical form of a JSON value
//! ([`vouch_core::canonical_json`]), so the same statement has the same signature input in
//! every language and database, and key order or whitespace never matter.
//!
//! Formats (stable, written into `docs/contract.md` §13.6):
//! - a public key is `ed25519:` + 64 lowercase hex digits (the 32-byte key);
//! - a signature is 128 lowercase hex digits (the 64-byte Ed25519 signature);
//! - a key file `$VOUCH_HOME/identities/NAME.key` (mode 0600) holds one JSON object
//!   `{"name", "algorithm": "ed25519", "public_key", "secret_key"}` (secret: 64 hex digits).

pub mod board;
pub mod diary;
pub mod keys;
pub mod receipt;

use ed25519_dalek::{Signer as _, SigningKey, VerifyingKey};
use serde_json::Value;
use vouch_store::{IdentityRecord, IdentityStore, PutIdentity, StoreError};

pub use keys::KeyDir;

/// The prefix of every public key string.
pub const PUBLIC_KEY_PREFIX: &str = "ed25519:";
/// The name of the host's own identity (it signs receipts, §16).
pub const HOST_IDENTITY: &str = "host";
/// Longest identity name, in bytes.
pub const NAME_BYTES_MAX: usize = 64;

#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// The name cannot be an identity name; the caller should pick another.
    #[error("`{0}` is not a valid identity name: use 1–64 of a-z, 0-9, '.', '_' or '-', starting with a letter or digit")]
    InvalidName(String),
    /// The name is reserved for the host's own identity.
    #[error("`{HOST_IDENTITY}` is the host's own identity and cannot be made by hand; pick another name")]
    Reserved,
    /// A key file of that name exists; it is never overwritten.
    #[error("identity `{name}` already exists (key file {path}); pick another name — a key file is never overwritten")]
    Exists { name: String, path: String },
    /// No key file of that name in this home.
    #[error("no identity `{name}` in this home (no key file {path}); create it with `vouch identity new {name}`")]
    NotFound { name: String, path: String },
    /// The key file is unreadable, malformed or too open.
    #[error("key file {path}: {reason}")]
    KeyFile { path: String, reason: String },
    /// The key file and the store disagree on the public key.
    #[error("identity `{name}`: the key file's public key {file_key} is not the one the store records ({store_key}); this home's key file does not belong to that identity")]
    KeyMismatch {
        name: String,
        file_key: String,
        store_key: String,
    },
    /// A signature that is not `name`'s over the statement: refuse what it signs.
    #[error("signature by `{name}` refused: {reason}")]
    BadSignature { name: String, reason: VerifyError },
    #[error("cannot put a value in canonical form: {0}")]
    Canon(String),
    #[error("the OS random source failed: {0}")]
    Random(String),
    #[error("{what}: {error}")]
    Io { what: String, error: std::io::Error },
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Why a signature does not verify. Every variant names what is wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifyError {
    #[error(
        "public key `{0}` is not an Ed25519 public key (expected `ed25519:` and 64 hex digits)"
    )]
    BadPublicKey(String),
    #[error("signature is not 128 hex digits")]
    MalformedSignature,
    #[error("the signature does not match the statement and public key (the statement was changed, or signed by another key)")]
    Mismatch,
    #[error("cannot put the statement in canonical form: {0}")]
    Canon(String),
}

/// Check an identity name: 1–64 bytes of `a-z 0-9 . _ -`, starting with a letter or digit
/// (so a name is always a plain file name in the home).
pub fn validate_name(name: &str) -> Result<(), IdentityError> {
    let ok = !name.is_empty()
        && name.len() <= NAME_BYTES_MAX
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        && name.chars().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '_' || c == '-'
        });
    if ok {
        Ok(())
    } else {
        Err(IdentityError::InvalidName(name.to_string()))
    }
}

/// The bytes every signature covers: the RFC 8785 canonical form of `value`.
pub fn signing_bytes(value: &Value) -> Result<Vec<u8>, VerifyError> {
    vouch_core::canonical_json(value)
        .map(String::into_bytes)
        .map_err(|e| VerifyError::Canon(e.to_string()))
}

/// Parse a public key string (`ed25519:` + 64 hex digits).
pub fn parse_public_key(text: &str) -> Result<VerifyingKey, VerifyError> {
    let bad = || VerifyError::BadPublicKey(text.chars().take(80).collect());
    let hex_part = text.strip_prefix(PUBLIC_KEY_PREFIX).ok_or_else(bad)?;
    if hex_part.len() != 64 || hex_part.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(bad());
    }
    let bytes: [u8; 32] = hex::decode(hex_part)
        .map_err(|_| bad())?
        .try_into()
        .map_err(|_| bad())?;
    VerifyingKey::from_bytes(&bytes).map_err(|_| bad())
}

/// The string form of a public key.
pub fn public_key_string(key: &VerifyingKey) -> String {
    format!("{PUBLIC_KEY_PREFIX}{}", hex::encode(key.as_bytes()))
}

/// Verify `signature` (128 hex digits) by `public_key` over the canonical form of `value`.
/// Strict Ed25519 verification: weak keys and malleable signatures are refused.
pub fn verify(public_key: &str, value: &Value, signature: &str) -> Result<(), VerifyError> {
    let key = parse_public_key(public_key)?;
    let sig = parse_signature(signature)?;
    let bytes = signing_bytes(value)?;
    key.verify_strict(&bytes, &sig)
        .map_err(|_| VerifyError::Mismatch)
}

fn parse_signature(text: &str) -> Result<ed25519_dalek::Signature, VerifyError> {
    if text.len() != 128 || text.chars().any(|c| c.is_ascii_uppercase()) {
        return Err(VerifyError::MalformedSignature);
    }
    let bytes: [u8; 64] = hex::decode(text)
        .map_err(|_| VerifyError::MalformedSignature)?
        .try_into()
        .map_err(|_| VerifyError::MalformedSignature)?;
    Ok(ed25519_dalek::Signature::from_bytes(&bytes))
}

/// An identity with its secret key: it can sign. Its `Debug` never shows the secret.
pub struct Identity {
    name: String,
    key: SigningKey,
}

impl std::fmt::Debug for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Identity")
            .field("name", &self.name)
            .field("public_key", &self.public_key())
            .finish_non_exhaustive()
    }
}

impl Identity {
    /// A new identity with a key from the OS random source.
    pub fn generate(name: &str) -> Result<Identity, IdentityError> {
        validate_name(name)?;
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|e| IdentityError::Random(e.to_string()))?;
        Ok(Identity::from_secret(name, &secret))
    }

    /// An identity from its 32-byte secret (tests, key files).
    pub fn from_secret(name: &str, secret: &[u8; 32]) -> Identity {
        Identity {
            name: name.to_string(),
            key: SigningKey::from_bytes(secret),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// `ed25519:` + 64 hex digits.
    pub fn public_key(&self) -> String {
        public_key_string(&self.key.verifying_key())
    }

    /// Sign the canonical form of `value`; 128 hex digits.
    pub fn sign(&self, value: &Value) -> Result<String, IdentityError> {
        let bytes = signing_bytes(value).map_err(|e| IdentityError::Canon(e.to_string()))?;
        Ok(hex::encode(self.key.sign(&bytes).to_bytes()))
    }

    /// The public record to store.
    pub fn record(&self, created_ms: i64) -> IdentityRecord {
        IdentityRecord {
            name: self.name.clone(),
            public_key: self.public_key(),
            created_ms,
        }
    }

    pub(crate) fn secret_hex(&self) -> String {
        hex::encode(self.key.to_bytes())
    }
}

/// `vouch identity new NAME`: a new key file in the home (0600, never overwriting) and its
/// public key in the store. An existing key file, or a name the store already holds, is
/// refused and nothing changes — so of several processes creating the same name exactly one
/// succeeds. (A key file whose key the store lacks, left by an interrupted creation, is
/// registered by [`open_or_create`], which a worker uses.)
pub fn create(
    keys: &KeyDir,
    store: &dyn IdentityStore,
    name: &str,
    now_ms: i64,
) -> Result<Identity, IdentityError> {
    validate_name(name)?;
    if name == HOST_IDENTITY {
        return Err(IdentityError::Reserved);
    }
    create_named(keys, store, name, now_ms)
}

fn create_named(
    keys: &KeyDir,
    store: &dyn IdentityStore,
    name: &str,
    now_ms: i64,
) -> Result<Identity, IdentityError> {
    if keys.exists(name) {
        return Err(IdentityError::Exists {
            name: name.to_string(),
            path: keys.path(name).display().to_string(),
        });
    }
    if store.identity(name)?.is_some() {
        return Err(StoreError::Conflict(format!(
            "the store already has an identity named `{name}` (made from another home); pick another name"
        ))
        .into());
    }
    let id = Identity::generate(name)?;
    keys.write_new(&id)?;
    match store.put_identity(&id.record(now_ms)) {
        Ok(PutIdentity::Created | PutIdentity::Existing) => Ok(id),
        Err(e) => {
            // The name was taken in the store meanwhile: the key we just wrote is ours alone
            // and nothing refers to it; remove it so the home and the store agree.
            keys.remove_own(name);
            Err(e.into())
        }
    }
}

/// Why a public key cannot be enrolled: the name, the key, or a name already taken.
#[derive(Debug, thiserror::Error)]
pub enum EnrolError {
    #[error(transparent)]
    Name(IdentityError),
    #[error(transparent)]
    Key(VerifyError),
    /// The store already has an identity of that name (with this key or another).
    #[error("the store already has an identity named `{0}`; pick another name (a new key is a new identity)")]
    Taken(String),
    #[error(transparent)]
    Store(StoreError),
}

/// Enrol a worker's public key made where the worker runs (§13.6.1): the host records the
/// public half only; the secret never moves. `public_key` is `ed25519:` + 64 lowercase hex
/// digits, or just the 64 hex digits. A taken name is refused and nothing changes.
pub fn enrol(
    store: &dyn IdentityStore,
    name: &str,
    public_key: &str,
    now_ms: i64,
) -> Result<IdentityRecord, EnrolError> {
    validate_name(name).map_err(EnrolError::Name)?;
    if name == HOST_IDENTITY {
        return Err(EnrolError::Name(IdentityError::Reserved));
    }
    let text = public_key.trim();
    let text = if text.starts_with(PUBLIC_KEY_PREFIX) {
        text.to_string()
    } else {
        format!("{PUBLIC_KEY_PREFIX}{text}")
    };
    let key = parse_public_key(&text).map_err(|_| {
        EnrolError::Key(VerifyError::BadPublicKey(
            public_key.chars().take(80).collect(),
        ))
    })?;
    let record = IdentityRecord {
        name: name.to_string(),
        public_key: public_key_string(&key),
        created_ms: now_ms,
    };
    if store.identity(name).map_err(EnrolError::Store)?.is_some() {
        return Err(EnrolError::Taken(name.to_string()));
    }
    match store.put_identity(&record) {
        Ok(PutIdentity::Created) => Ok(record),
        // Enrolled meanwhile by another request: taken all the same.
        Ok(PutIdentity::Existing) | Err(StoreError::Conflict(_)) => {
            Err(EnrolError::Taken(name.to_string()))
        }
        Err(e) => Err(EnrolError::Store(e)),
    }
}

/// Load an identity from the home and check that the store records the same public key.
pub fn load(
    keys: &KeyDir,
    store: &dyn IdentityStore,
    name: &str,
) -> Result<Identity, IdentityError> {
    validate_name(name)?;
    let id = keys.load(name)?;
    match store.identity(name)? {
        Some(rec) if rec.public_key == id.public_key() => Ok(id),
        Some(rec) => Err(IdentityError::KeyMismatch {
            name: name.to_string(),
            file_key: id.public_key(),
            store_key: rec.public_key,
        }),
        None => Err(StoreError::NotFound {
            what: "identity",
            id: format!("{name} (the key file exists but the store has no record of it; run `vouch identity new {name}` to register it)"),
        }
        .into()),
    }
}

/// Verify that `signature` over the canonical form of `value` was made by the identity `name`
/// as the store records it — what the host does with every signed claim and report (§13.6).
/// An unknown identity is `Store(NotFound)`; a bad signature is `BadSignature`.
pub fn verify_by(
    store: &dyn IdentityStore,
    name: &str,
    value: &Value,
    signature: &str,
) -> Result<(), IdentityError> {
    let rec = store.identity(name)?.ok_or_else(|| StoreError::NotFound {
        what: "identity",
        id: name.to_string(),
    })?;
    verify(&rec.public_key, value, signature).map_err(|reason| IdentityError::BadSignature {
        name: name.to_string(),
        reason,
    })
}

/// A worker's identity: its key file here if there is one (registered in the store if the
/// store does not have it yet, refused if the store has another key), else a new identity.
pub fn open_or_create(
    keys: &KeyDir,
    store: &dyn IdentityStore,
    name: &str,
    now_ms: i64,
) -> Result<Identity, IdentityError> {
    validate_name(name)?;
    if name == HOST_IDENTITY {
        return Err(IdentityError::Reserved);
    }
    if keys.exists(name) {
        let id = keys.load(name)?;
        if store.identity(name)?.is_none() {
            store.put_identity(&id.record(now_ms))?;
        }
        return load(keys, store, name);
    }
    match create_named(keys, store, name, now_ms) {
        Err(IdentityError::Exists { .. }) => load(keys, store, name),
        other => other,
    }
}

/// The host's own identity: loaded from the home, or created there (and in the store) on
/// first use.
pub fn host(
    keys: &KeyDir,
    store: &dyn IdentityStore,
    now_ms: i64,
) -> Result<Identity, IdentityError> {
    if keys.exists(HOST_IDENTITY) {
        let id = keys.load(HOST_IDENTITY)?;
        match store.identity(HOST_IDENTITY)? {
            Some(rec) if rec.public_key != id.public_key() => {
                return Err(IdentityError::KeyMismatch {
                    name: HOST_IDENTITY.into(),
                    file_key: id.public_key(),
                    store_key: rec.public_key,
                })
            }
            Some(_) => {}
            None => {
                store.put_identity(&id.record(now_ms))?;
            }
        }
        return Ok(id);
    }
    match create_named(keys, store, HOST_IDENTITY, now_ms) {
        // Another process created it between our check and our write: use theirs.
        Err(IdentityError::Exists { .. }) => load(keys, store, HOST_IDENTITY),
        other => other,
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn fixed(name: &str, n: u8) -> Identity {
        Identity::from_secret(name, &[n; 32])
    }

    #[test]
    fn names() {
        for good in ["a", "worker-1", "w.2_x", &"a".repeat(64)] {
            validate_name(good).unwrap();
        }
        for bad in [
            "",
            "-a",
            ".a",
            "A",
            "a/b",
            "..",
            "a b",
            "é",
            &"a".repeat(65),
        ] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn rfc8032_test_vector_1() {
        // RFC 8032 §7.1 TEST 1: the empty message. Our statements are JSON, so check the
        // key derivation against the vector and signing through the raw key.
        let secret: [u8; 32] =
            hex::decode("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
                .unwrap()
                .try_into()
                .unwrap();
        let id = Identity::from_secret("t", &secret);
        assert_eq!(
            id.public_key(),
            "ed25519:d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
        );
        let sig = id.key.sign(b"");
        assert_eq!(hex::encode(sig.to_bytes()), "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b");
    }

    #[test]
    fn signature_is_over_the_canonical_form() {
        let id = fixed("w", 7);
        let a: Value =
            serde_json::from_str(r#"{"task":"t1","attempt":2,"output":"sha256:ab"}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{ "output":"sha256:ab", "attempt":2.0e0 ,"task":"t1"}"#)
                .unwrap();
        let sig = id.sign(&a).unwrap();
        assert_eq!(sig.len(), 128);
        verify(&id.public_key(), &b, &sig).unwrap();
        assert_eq!(
            verify(
                &id.public_key(),
                &json!({"task": "t1", "attempt": 3, "output": "sha256:ab"}),
                &sig
            ),
            Err(VerifyError::Mismatch)
        );
        assert_eq!(
            verify(&fixed("o", 8).public_key(), &a, &sig),
            Err(VerifyError::Mismatch)
        );
    }

    #[test]
    fn malformed_inputs_are_named() {
        let id = fixed("w", 1);
        let v = json!({"x": 1});
        let sig = id.sign(&v).unwrap();
        for bad_key in [
            "",
            "ed25519:",
            "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
            &id.public_key().to_uppercase(),
            &format!("{}00", id.public_key()),
            "ed25519:zz5a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a",
        ] {
            assert!(
                matches!(verify(bad_key, &v, &sig), Err(VerifyError::BadPublicKey(_))),
                "{bad_key}"
            );
        }
        for bad_sig in ["", &sig[..126], &format!("{sig}00"), &sig.to_uppercase()] {
            assert_eq!(
                verify(&id.public_key(), &v, bad_sig),
                Err(VerifyError::MalformedSignature)
            );
        }
    }

    #[test]
    fn debug_never_shows_the_secret() {
        let id = fixed("w", 9);
        let shown = format!("{id:?}");
        assert!(!shown.contains(&id.secret_hex()));
        assert!(shown.contains(&id.public_key()));
    }

    #[test]
    fn lifecycle_through_a_store() {
        use vouch_store_sqlite::SqliteStore;
        let home = tempfile::tempdir().unwrap();
        let store = SqliteStore::open(&home.path().join("vouch.db")).unwrap();
        let keys = KeyDir::in_home(home.path());

        let w = create(&keys, &store, "w1", 5).unwrap();
        assert!(matches!(
            create(&keys, &store, "w1", 6),
            Err(IdentityError::Exists { .. })
        ));
        assert!(matches!(
            create(&keys, &store, HOST_IDENTITY, 6),
            Err(IdentityError::Reserved)
        ));
        assert_eq!(
            load(&keys, &store, "w1").unwrap().public_key(),
            w.public_key()
        );
        assert_eq!(
            open_or_create(&keys, &store, "w1", 7).unwrap().public_key(),
            w.public_key(),
            "an existing worker keeps its key"
        );
        let fresh = open_or_create(&keys, &store, "w2", 7).unwrap();
        assert_eq!(
            store.identity("w2").unwrap().unwrap().public_key,
            fresh.public_key()
        );

        let report = json!({"task": "t1", "attempt": 1, "output": "sha256:00"});
        let sig = w.sign(&report).unwrap();
        verify_by(&store, "w1", &report, &sig).unwrap();
        assert!(matches!(
            verify_by(&store, "w2", &report, &sig),
            Err(IdentityError::BadSignature { .. })
        ));
        assert!(matches!(
            verify_by(
                &store,
                "w1",
                &json!({"task": "t2", "attempt": 1, "output": "sha256:00"}),
                &sig
            ),
            Err(IdentityError::BadSignature { .. })
        ));
        assert!(matches!(
            verify_by(&store, "ghost", &report, &sig),
            Err(IdentityError::Store(StoreError::NotFound { .. }))
        ));

        // The host's identity is made once and then reused.
        let h1 = host(&keys, &store, 9).unwrap();
        let h2 = host(&keys, &store, 10).unwrap();
        assert_eq!(h1.public_key(), h2.public_key());
        assert_eq!(
            store.identity(HOST_IDENTITY).unwrap().unwrap().public_key,
            h1.public_key()
        );

        // A key file of another home under a name this store already has is refused.
        let other_home = tempfile::tempdir().unwrap();
        let other_keys = KeyDir::in_home(other_home.path());
        other_keys
            .write_new(&Identity::generate("w1").unwrap())
            .unwrap();
        assert!(matches!(
            load(&other_keys, &store, "w1"),
            Err(IdentityError::KeyMismatch { .. })
        ));
        assert!(matches!(
            open_or_create(&other_keys, &store, "w1", 11),
            Err(IdentityError::KeyMismatch { .. })
        ));
        assert!(create(&other_keys, &store, "w3", 11).is_ok());
        assert!(
            matches!(
                create(&KeyDir::in_home(home.path()), &store, "w3", 12),
                Err(IdentityError::Store(StoreError::Conflict(_)))
            ),
            "a name taken in the store from another home is refused"
        );
        assert!(!keys.exists("w3"), "and no key file is left behind");
    }

    fn json_strategy() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i32>().prop_map(Value::from),
            ".{0,10}".prop_map(Value::from),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                prop::collection::btree_map("[a-z]{0,5}", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// The same object with its keys in reverse order, recursively.
    fn reversed(v: &Value) -> Value {
        match v {
            Value::Object(m) => Value::Object(
                m.iter()
                    .rev()
                    .map(|(k, v)| (k.clone(), reversed(v)))
                    .collect(),
            ),
            Value::Array(a) => Value::Array(a.iter().map(reversed).collect()),
            other => other.clone(),
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn round_trip_and_key_order(secret in any::<[u8; 32]>(), v in json_strategy()) {
            let id = Identity::from_secret("p", &secret);
            let sig = id.sign(&v).unwrap();
            prop_assert!(verify(&id.public_key(), &v, &sig).is_ok());
            prop_assert!(verify(&id.public_key(), &reversed(&v), &sig).is_ok());
            prop_assert_eq!(signing_bytes(&v).unwrap(), signing_bytes(&reversed(&v)).unwrap());
        }

        #[test]
        fn any_bit_flip_in_the_signature_fails(secret in any::<[u8; 32]>(), v in json_strategy(), bit in 0usize..512) {
            let id = Identity::from_secret("p", &secret);
            let sig = id.sign(&v).unwrap();
            let mut bytes = hex::decode(&sig).unwrap();
            bytes[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(verify(&id.public_key(), &v, &hex::encode(bytes)).is_err());
        }

        #[test]
        fn any_bit_flip_in_the_statement_fails(secret in any::<[u8; 32]>(), v in json_strategy(), pick in any::<prop::sample::Index>(), bit in 0u8..7) {
            // Flip one bit of one byte of the canonical text; when the result is still JSON
            // with another canonical form, the signature must no longer verify.
            let id = Identity::from_secret("p", &secret);
            let sig = id.sign(&v).unwrap();
            let mut bytes = signing_bytes(&v).unwrap();
            let i = pick.index(bytes.len());
            bytes[i] ^= 1 << bit;
            if let Ok(changed) = serde_json::from_slice::<Value>(&bytes) {
                if signing_bytes(&changed).unwrap() != signing_bytes(&v).unwrap() {
                    prop_assert!(verify(&id.public_key(), &changed, &sig).is_err());
                }
            }
            // And flipping a bit of the signed bytes themselves never verifies.
            prop_assert!(id.key.verify_strict(&bytes, &parse_signature(&sig).unwrap()).is_err());
        }

        #[test]
        fn another_key_never_verifies(a in any::<[u8; 32]>(), b in any::<[u8; 32]>(), v in json_strategy()) {
            prop_assume!(a != b);
            let sig = Identity::from_secret("a", &a).sign(&v).unwrap();
            prop_assert!(verify(&Identity::from_secret("b", &b).public_key(), &v, &sig).is_err());
        }
    }
}
