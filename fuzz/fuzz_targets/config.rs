//! `vouch.toml`: parsed and asked for every destination kind's level. No panic on any input.
#![no_main]
use libfuzzer_sys::fuzz_target;
use std::path::Path;
use vouch_core::DestinationKind;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(cfg) = vouch_adapters::config::Config::parse(text, Path::new("/home/fuzz")) {
        for k in DestinationKind::ALL {
            let _ = cfg.kind_level(k);
        }
    }
});
