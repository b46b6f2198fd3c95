//! The journal decoder: entries as a store hands them back (any kind, any body, any
//! delivery), folded into the run's view and checked as a chain. A body that does not parse
//! must never panic the fold.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vouch_store::{verify_chain, EventKind, JournalEntry};

fuzz_target!(|data: &[u8]| {
    let Ok(serde_json::Value::Array(items)) = serde_json::from_slice::<serde_json::Value>(data)
    else {
        return;
    };
    let mut entries = Vec::new();
    for (i, item) in items.into_iter().take(256).enumerate() {
        let kind_ix = item.get("k").and_then(|k| k.as_u64()).unwrap_or(0) as usize;
        let kind = EventKind::ALL[kind_ix % EventKind::ALL.len()];
        let delivery = item.get("d").and_then(|d| d.as_str()).map(str::to_string);
        let body = item.get("b").cloned().unwrap_or(serde_json::Value::Null);
        entries.push(JournalEntry {
            run_id: "r".into(),
            seq: i as i64 + 1,
            kind,
            delivery,
            body,
            at_ms: item.get("t").and_then(|t| t.as_i64()).unwrap_or(0),
            prev_hash: String::new(),
            hash: String::new(),
        });
    }
    let _ = vouch_runtime::view::RunView::from_journal(&entries);
    let _ = verify_chain(&entries);
});
