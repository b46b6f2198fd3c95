//! HTTP query and path parsing as the server does it (`vouch_core::input`, which the
//! server's `QueryMap` and `ApiPath` extractors and the CLI's id arguments call): a query
//! string, each of its names and values as an id and as a number, a time window. No panic
//! on any input, and what is accepted keeps its promises: an accepted id holds no control
//! character, and percent-encoding any text decodes back to it.
#![no_main]
use libfuzzer_sys::fuzz_target;
use vouch_core::input::{check_id, parse_query, percent_decode, whole_number, window_ms};

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    // A URI's query is bytes; the server hands it over as text (hyper refuses the rest).
    let text = String::from_utf8_lossy(data);
    let _ = percent_decode(&text);
    if let Ok(map) = parse_query(&text) {
        for (k, v) in &map {
            for s in [k, v] {
                if check_id(s).is_ok() {
                    assert!(!s.chars().any(char::is_control), "{s:?}");
                }
                if let Some(n) = whole_number(s, 1, 500) {
                    assert!((1..=500).contains(&n));
                }
                if let Some(ms) = window_ms(s) {
                    assert!(ms > 0);
                }
            }
        }
    }
    assert_eq!(percent_decode(&encode(&text)).as_deref(), Some(&*text));
    let _ = check_id(&text);
    let _ = window_ms(&text);
});
