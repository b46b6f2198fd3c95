//! Canonical JSON (RFC 8785, JCS) and SHA-256 hashes of payloads; the ledger key (§7, §8.1).

use sha2::{Digest, Sha256};

#[derive(Debug, thiserror::Error)]
#[error("cannot canonicalize payload: {0}")]
pub struct CanonError(String);

/// RFC 8785 canonical form of a JSON value.
pub fn canonical_json(value: &serde_json::Value) -> Result<String, CanonError> {
    serde_json_canonicalizer::to_string(value).map_err(|e| CanonError(e.to_string()))
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// The hash an approval binds to: SHA-256 of the canonical JSON of the payload.
pub fn payload_hash(value: &serde_json::Value) -> Result<String, CanonError> {
    Ok(sha256_hex(canonical_json(value)?.as_bytes()))
}

/// §8.1: SHA-256 of (scope, delivery id, payload hash). Fields are length-prefixed so that
/// no two different triples share an encoding.
pub fn ledger_key(scope: &str, delivery_id: &str, payload_hash: &str) -> String {
    let mut h = Sha256::new();
    for part in [scope, delivery_id, payload_hash] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    hex::encode(h.finalize())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn rfc8785_examples() {
        let v = json!({"b": 2, "a": [1, "x", {"d": true, "c": null}], "n": 1.0e21, "f": 0.5});
        assert_eq!(
            canonical_json(&v).unwrap(),
            r#"{"a":[1,"x",{"c":null,"d":true}],"b":2,"f":0.5,"n":1e+21}"#
        );
        let s = json!({"€": "é\u{000A}"});
        assert_eq!(canonical_json(&s).unwrap(), "{\"€\":\"é\\n\"}");
    }

    #[test]
    fn hash_ignores_key_order() {
        let a: serde_json::Value = serde_json::from_str(r#"{"to":"a@b","body":"hi"}"#).unwrap();
        let b: serde_json::Value =
            serde_json::from_str(r#"{ "body" : "hi", "to":"a@b" }"#).unwrap();
        assert_eq!(payload_hash(&a).unwrap(), payload_hash(&b).unwrap());
        assert_ne!(
            payload_hash(&a).unwrap(),
            payload_hash(&json!({"to":"a@b","body":"hi!"})).unwrap()
        );
        assert_eq!(payload_hash(&a).unwrap().len(), 64);
    }

    #[test]
    fn ledger_key_is_unambiguous() {
        assert_ne!(ledger_key("ab", "c", "h"), ledger_key("a", "bc", "h"));
        assert_eq!(ledger_key("run1", "d1", "h"), ledger_key("run1", "d1", "h"));
    }

    proptest! {
        #[test]
        fn canonical_is_idempotent(m in proptest::collection::btree_map("[a-z]{0,4}", any::<i32>(), 0..6)) {
            let v = serde_json::to_value(&m).unwrap();
            let c1 = canonical_json(&v).unwrap();
            let back: serde_json::Value = serde_json::from_str(&c1).unwrap();
            prop_assert_eq!(c1, canonical_json(&back).unwrap());
        }
    }
}
