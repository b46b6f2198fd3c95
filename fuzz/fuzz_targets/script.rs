//! A script of model turns (`vouch run --script`): a JSON array of turns, each checked
//! against the scenario format as the CLI does. No panic on any input.
#![no_main]
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let turns = match v {
        serde_json::Value::Object(ref o) if o.contains_key("script") => o["script"].clone(),
        other => other,
    };
    if let Some(items) = turns.as_array() {
        for t in items {
            let _ = serde_json::from_value::<vouch_scenario::Turn>(t.clone());
        }
    }
});
