#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The RFC 8785 test vectors the Python client checks too (`clients/python/tests/
//! canonical_vectors.json`): both sides write the same bytes for every vector, so a statement
//! signed by either verifies on the other.

use serde_json::Value;

#[test]
fn canonical_json_matches_the_shared_vectors() {
    let text = include_str!("../../../clients/python/tests/canonical_vectors.json");
    let doc: Value = serde_json::from_str(text).unwrap();
    let vectors = doc["vectors"].as_array().unwrap();
    assert!(vectors.len() >= 40, "{}", vectors.len());
    for v in vectors {
        let name = v["name"].as_str().unwrap();
        let input: Value = serde_json::from_str(v["input"].as_str().unwrap())
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        let got = vouch_core::canonical_json(&input).unwrap();
        assert_eq!(got, v["canonical"].as_str().unwrap(), "{name}");
    }
}
