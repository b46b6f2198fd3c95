//! Ed25519 for the board's signature seam (§13.6): workers sign the canonical statements of
//! their claims and reports ([`vouch_store::board::claim_statement`],
//! [`vouch_store::board::report_statement`]) with [`sign_statement`]; the host checks them
//! with [`StoreVerifier`] (plugged into `vouch_store::board::Verified`) against the public key
//! the identity store records for the claimant. An unsigned claim or report, an unknown
//! identity, or a bad signature is refused with the reason.

use crate::{verify, Identity, IdentityError};
use serde_json::Value;
use std::sync::Arc;
use vouch_store::board::SignatureVerifier;
use vouch_store::IdentityStore;

/// Sign a statement given as JSON text (the board's canonical statements). What is signed is
/// the canonical form of the value the text holds, as for every vouch signature.
pub fn sign_statement(id: &Identity, statement: &str) -> Result<String, IdentityError> {
    let v: Value =
        serde_json::from_str(statement).map_err(|e| IdentityError::Canon(e.to_string()))?;
    id.sign(&v)
}

/// Checks claims and reports against the identity store's public keys.
pub struct StoreVerifier {
    pub store: Arc<dyn IdentityStore>,
}

impl SignatureVerifier for StoreVerifier {
    fn verify(
        &self,
        identity: &str,
        statement: &str,
        signature: Option<&str>,
    ) -> Result<(), String> {
        let signature = signature.ok_or_else(|| {
            format!("it is not signed; `{identity}` must sign it with its Ed25519 key")
        })?;
        let rec = self
            .store
            .identity(identity)
            .map_err(|e| e.to_string())?
            .ok_or_else(|| {
                format!("`{identity}` is not a known identity; make it with `vouch identity new {identity}`")
            })?;
        let v: Value = serde_json::from_str(statement)
            .map_err(|e| format!("the statement is not JSON: {e}"))?;
        verify(&rec.public_key, &v, signature)
            .map_err(|e| format!("the signature is not `{identity}`'s: {e}"))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use vouch_store_sqlite::SqliteStore;

    #[test]
    fn claims_and_reports_signed_and_refused() {
        let dir = tempfile::tempdir().unwrap();
        let store = Arc::new(SqliteStore::open(&dir.path().join("vouch.db")).unwrap());
        let w = Identity::from_secret("w1", &[1; 32]);
        store.put_identity(&w.record(1)).unwrap();
        let v = StoreVerifier {
            store: store.clone(),
        };
        let st = r#"{"report":{"attempt":1,"claimant":"w1","task":"t"}}"#;
        let sig = sign_statement(&w, st).unwrap();
        v.verify("w1", st, Some(&sig)).unwrap();
        // Whitespace or key order do not matter: the canonical form is what is signed.
        v.verify(
            "w1",
            r#"{ "report": {"task":"t", "claimant":"w1", "attempt":1} }"#,
            Some(&sig),
        )
        .unwrap();
        let e = v.verify("w1", st, None).unwrap_err();
        assert!(e.contains("not signed"), "{e}");
        let e = v
            .verify(
                "w1",
                r#"{"report":{"attempt":2,"claimant":"w1","task":"t"}}"#,
                Some(&sig),
            )
            .unwrap_err();
        assert!(e.contains("not `w1`'s"), "{e}");
        let e = v.verify("ghost", st, Some(&sig)).unwrap_err();
        assert!(e.contains("not a known identity"), "{e}");
        let other = Identity::from_secret("w2", &[2; 32]);
        store.put_identity(&other.record(1)).unwrap();
        assert!(
            v.verify("w2", st, Some(&sig)).is_err(),
            "another worker's key"
        );
        let e = v.verify("w1", st, Some("zz")).unwrap_err();
        assert!(e.contains("128 hex"), "{e}");
    }
}
