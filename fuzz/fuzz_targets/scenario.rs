//! A scenario file (scenarios.md): parsed, then, when it parses, answered by the oracle.
//! Neither may panic, hang or allocate without bound on any input.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(s) = vouch_scenario::parse_scenario(Path::new("fuzz.json"), text) {
        let _ = vouch_oracle::evaluate(&s);
    }
});
