//! The manifest as a model's `declare` call sends it: JSON → (strict-mode nulls dropped) →
//! `Manifest` → validation, amendment and the item queries the host makes. No panic on any input.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vouch_core::Manifest;

fuzz_target!(|data: &[u8]| {
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    let Ok(m) = serde_json::from_value::<Manifest>(vouch_runtime::schemas::without_nulls(&v))
    else {
        return;
    };
    let _ = m.validate();
    let amended = m.amended(&m);
    for d in &amended.deliveries {
        let _ = amended.dependencies(&d.id);
        let _ = amended.is_forbidden(d.verb, &d.destination);
        let _ = d.destination.key();
    }
});
