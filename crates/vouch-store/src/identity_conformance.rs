//! The shared suite for [`IdentityStore`] (enable the `conformance` feature): every backend
//! runs it. `open` opens the same data each time, so reopening shows what was durable.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use crate::*;
use serde_json::json;
use std::sync::Arc;

pub type IdentityOpener<'a> = &'a dyn Fn() -> Arc<dyn IdentityStore>;

/// One `#[test]` per check of this suite, each on a fresh store, so a backend's test run
/// names the rule that broke. `$fresh` is an expression giving `(guard, opener)`: the guard
/// keeps the store's place (a folder, a schema) alive until the test ends; the opener opens
/// the store over the same data each time it is called.
#[macro_export]
macro_rules! identity_conformance_tests {
    ($fresh:expr) => {
        $crate::identity_conformance_tests!(@each $fresh;
            identities_are_immutable,
            diary_chain_shape_is_enforced,
            diary_is_durable_and_ordered,
            concurrent_diary_appends_stay_gap_free
        );
    };
    (@each $fresh:expr; $($check:ident),* $(,)?) => {
        $(
            #[test]
            fn $check() {
                let (_guard, open) = $fresh;
                $crate::identity_conformance::$check(&open);
            }
        )*
    };
}

fn key(n: u8) -> String {
    format!("ed25519:{}", hex::encode([n; 32]))
}

fn record(name: &str, n: u8) -> IdentityRecord {
    IdentityRecord {
        name: name.into(),
        public_key: key(n),
        created_ms: 7,
    }
}

/// A fake hash for the store's purposes: the store checks linkage, not content.
fn h(identity: &str, seq: i64) -> String {
    let mut s = format!("{identity}{seq}");
    while s.len() < 64 {
        s.push('0');
    }
    s
}

fn entry(identity: &str, seq: i64, prev: &str) -> DiaryEntry {
    DiaryEntry {
        identity: identity.into(),
        seq,
        at_ms: 100 + seq,
        body: json!({"text": format!("entry {seq} é ✓"), "n": seq, "nested": {"b": [1, 2], "a": null}}),
        prev_hash: prev.into(),
        hash: h(identity, seq),
        signature: "ab".repeat(64),
    }
}

pub fn identities_are_immutable(open: IdentityOpener<'_>) {
    let s = open();
    assert_eq!(
        s.put_identity(&record("ada", 1)).unwrap(),
        PutIdentity::Created
    );
    assert_eq!(
        s.put_identity(&record("ada", 1)).unwrap(),
        PutIdentity::Existing,
        "the same name and key again changes nothing"
    );
    match s.put_identity(&record("ada", 2)) {
        Err(StoreError::Conflict(_)) => {}
        other => panic!("another key under a taken name must be Conflict, got {other:?}"),
    }
    assert_eq!(s.identity("ada").unwrap(), Some(record("ada", 1)));
    assert_eq!(s.identity("nobody").unwrap(), None);
    s.put_identity(&record("zed", 3)).unwrap();
    s.put_identity(&record("bob", 4)).unwrap();
    let names: Vec<String> = s
        .identities()
        .unwrap()
        .into_iter()
        .map(|r| r.name)
        .filter(|n| ["ada", "bob", "zed"].contains(&n.as_str()))
        .collect();
    assert_eq!(
        names,
        ["ada", "bob", "zed"],
        "identities are listed by name"
    );
}

pub fn diary_chain_shape_is_enforced(open: IdentityOpener<'_>) {
    let s = open();
    s.put_identity(&record("dia", 5)).unwrap();
    assert_eq!(s.diary_head("dia").unwrap(), None);
    match s.diary_append(&entry("dia", 2, GENESIS_HASH)) {
        Err(StoreError::Conflict(_)) => {}
        other => panic!("a first entry with seq 2 must be Conflict, got {other:?}"),
    }
    match s.diary_append(&entry("dia", 1, &h("x", 0))) {
        Err(StoreError::Conflict(_)) => {}
        other => panic!("a first entry not chained to genesis must be Conflict, got {other:?}"),
    }
    s.diary_append(&entry("dia", 1, GENESIS_HASH)).unwrap();
    match s.diary_append(&entry("dia", 1, GENESIS_HASH)) {
        Err(StoreError::Conflict(_)) => {}
        other => panic!("a second seq 1 must be Conflict, got {other:?}"),
    }
    match s.diary_append(&entry("dia", 2, GENESIS_HASH)) {
        Err(StoreError::Conflict(_)) => {}
        other => panic!("seq 2 not chained to seq 1 must be Conflict, got {other:?}"),
    }
    match s.diary_append(&entry("dia", 3, &h("dia", 1))) {
        Err(StoreError::Conflict(_)) => {}
        other => panic!("a gap must be Conflict, got {other:?}"),
    }
    s.diary_append(&entry("dia", 2, &h("dia", 1))).unwrap();
    assert_eq!(s.diary_head("dia").unwrap(), Some((2, h("dia", 2))));
    match s.diary_append(&entry("ghost", 1, GENESIS_HASH)) {
        Err(StoreError::NotFound { .. }) => {}
        other => panic!("an unknown identity must be NotFound, got {other:?}"),
    }
    assert!(s.diary("ghost").unwrap().is_empty());
}

pub fn diary_is_durable_and_ordered(open: IdentityOpener<'_>) {
    {
        let s = open();
        s.put_identity(&record("dur", 6)).unwrap();
        let mut prev = GENESIS_HASH.to_string();
        for seq in 1..=12 {
            let e = entry("dur", seq, &prev);
            s.diary_append(&e).unwrap();
            prev = e.hash;
        }
    }
    let s = open();
    let d = s.diary("dur").unwrap();
    assert_eq!(d.len(), 12);
    for (i, e) in d.iter().enumerate() {
        let seq = i as i64 + 1;
        let prev = if seq == 1 {
            GENESIS_HASH.to_string()
        } else {
            h("dur", seq - 1)
        };
        assert_eq!(
            e,
            &entry("dur", seq, &prev),
            "entry {seq} reads back as written"
        );
    }
    assert_eq!(s.identity("dur").unwrap(), Some(record("dur", 6)));
}

pub fn concurrent_diary_appends_stay_gap_free(open: IdentityOpener<'_>) {
    let s = open();
    s.put_identity(&record("race", 7)).unwrap();
    let writers = 4;
    let per_writer = 10;
    std::thread::scope(|scope| {
        for w in 0..writers {
            let s = s.clone();
            scope.spawn(move || {
                let mut done = 0;
                let mut tries = 0;
                while done < per_writer {
                    tries += 1;
                    assert!(tries < 10_000, "writer {w} never got through");
                    let (seq, prev) = s
                        .diary_head("race")
                        .unwrap()
                        .unwrap_or((0, GENESIS_HASH.to_string()));
                    let mut e = entry("race", seq + 1, &prev);
                    e.body = json!({"writer": w, "n": done});
                    match s.diary_append(&e) {
                        Ok(()) => done += 1,
                        Err(StoreError::Conflict(_)) | Err(StoreError::Retryable(_)) => {}
                        Err(other) => panic!("writer {w}: {other}"),
                    }
                }
            });
        }
    });
    let d = s.diary("race").unwrap();
    assert_eq!(d.len(), writers * per_writer);
    let mut prev = GENESIS_HASH.to_string();
    for (i, e) in d.iter().enumerate() {
        assert_eq!(e.seq, i as i64 + 1);
        assert_eq!(e.prev_hash, prev);
        prev = e.hash.clone();
    }
}
