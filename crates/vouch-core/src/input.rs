//! Text a request or a command line hands the host, checked before anything reads it: ids
//! and names that look a record up, an HTTP query string, a time window. One rule for every
//! interface and both store backends, so the same input gets the same answer everywhere;
//! nothing here panics, whatever the bytes (fuzzed by `fuzz/fuzz_targets/http.rs`).

use std::collections::BTreeMap;

/// The longest id or name a lookup takes, in bytes. Generous: the host's own ids are under
/// 80 bytes; a longer one can only be a mistake or an attack.
pub const ID_BYTES_MAX: usize = 1024;
/// The most parameters one query string may carry.
pub const QUERY_PARAMS_MAX: usize = 64;

/// What is wrong with an id or a name given to look a record up, said to the person.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    #[error("is empty")]
    Empty,
    #[error("is {bytes} bytes long; at most {ID_BYTES_MAX}")]
    TooLong { bytes: usize },
    /// NUL and every other control character (C0, DEL, C1): PostgreSQL cannot hold a NUL,
    /// SQLite can, and neither belongs in an id; refused the same on both.
    #[error("contains the control character U+{code:04X} at byte {at}; ids are printable text")]
    Control { code: u32, at: usize },
}

/// Checks an id or a name (run, delivery, task, schedule, content id…) before a store sees it.
pub fn check_id(id: &str) -> Result<(), IdError> {
    if id.is_empty() {
        return Err(IdError::Empty);
    }
    if id.len() > ID_BYTES_MAX {
        return Err(IdError::TooLong { bytes: id.len() });
    }
    match id.char_indices().find(|(_, c)| c.is_control()) {
        Some((at, c)) => Err(IdError::Control { code: c as u32, at }),
        None => Ok(()),
    }
}

/// Free text (a title, a summary, a question, a brief, a prompt, a tag) cannot hold NUL:
/// PostgreSQL refuses it in a text column and SQLite keeps it, so the same words would be a
/// run on one backend and an opaque store error (perhaps a run half made) on the other. Refused
/// alike, as bad input, before anything is written. Other control characters (a newline, a
/// tab) are ordinary in free text and stay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("contains the control character NUL (U+0000) at byte {at}; free text cannot hold it: send it again without")]
pub struct NulInText {
    pub at: usize,
}

/// Checks free text for NUL (see [`NulInText`]).
pub fn check_text(text: &str) -> Result<(), NulInText> {
    match text.find('\0') {
        Some(at) => Err(NulInText { at }),
        None => Ok(()),
    }
}

/// The first string (key or value) in a JSON document that holds NUL, named by its path
/// (`.title`, `.deliveries[2].summary`), with where in it; `None` if there is none. Request
/// bodies and tool-call arguments are checked with this before any of their text is used.
pub fn nul_in_json(v: &serde_json::Value) -> Option<(String, NulInText)> {
    use serde_json::Value;
    match v {
        Value::String(s) => check_text(s).err().map(|e| (String::new(), e)),
        Value::Array(items) => items
            .iter()
            .enumerate()
            .find_map(|(i, item)| nul_in_json(item).map(|(p, e)| (format!("[{i}]{p}"), e))),
        Value::Object(map) => map.iter().find_map(|(k, item)| match check_text(k) {
            Err(e) => Some((format!(".{}", k.replace('\0', "\\0")), e)),
            Ok(()) => nul_in_json(item).map(|(p, e)| (format!(".{k}{p}"), e)),
        }),
        _ => None,
    }
}

/// What is wrong with a query string.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum QueryError {
    #[error("query parameter `{0}` is not valid percent-encoded UTF-8")]
    Encoding(String),
    #[error("the query has more than {QUERY_PARAMS_MAX} parameters")]
    TooMany,
}

/// A query string (`a=1&b=%E2%82%AC`) as name → value; a repeated name keeps its last value.
pub fn parse_query(q: &str) -> Result<BTreeMap<String, String>, QueryError> {
    let mut map = BTreeMap::new();
    for (i, pair) in q.split('&').filter(|p| !p.is_empty()).enumerate() {
        if i >= QUERY_PARAMS_MAX {
            return Err(QueryError::TooMany);
        }
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let dec = |s: &str| percent_decode(s).ok_or_else(|| QueryError::Encoding(s.into()));
        map.insert(dec(k)?, dec(v)?);
    }
    Ok(map)
}

/// `application/x-www-form-urlencoded` decoding: `+` is a space, `%XX` a byte (two hex
/// digits, nothing else), and the result must be UTF-8.
pub fn percent_decode(s: &str) -> Option<String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = hex_digit(*b.get(i + 1)?)?;
                let lo = hex_digit(*b.get(i + 2)?)?;
                out.push(hi << 4 | lo);
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).ok()
}

fn hex_digit(c: u8) -> Option<u8> {
    (c as char).to_digit(16).map(|d| d as u8)
}

/// A time window such as `3600s`, `90m`, `24h` or `7d`, in milliseconds: a positive whole
/// number and one unit letter. `None` for anything else, including a window too long to hold.
pub fn window_ms(s: &str) -> Option<i64> {
    let unit = s.chars().last()?;
    let n = &s[..s.len() - unit.len_utf8()];
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let n: i64 = n.parse().ok().filter(|n| *n > 0)?;
    let ms = match unit {
        's' => 1_000,
        'm' => 60_000,
        'h' => 3_600_000,
        'd' => 86_400_000,
        _ => return None,
    };
    n.checked_mul(ms)
}

/// A whole number within `[min, max]` (digits only), or `None`.
pub fn whole_number(v: &str, min: usize, max: usize) -> Option<usize> {
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse::<usize>().ok().filter(|n| (min..=max).contains(n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn nul_and_control_characters_are_refused_in_ids() {
        assert_eq!(check_id("01J9ZC-run"), Ok(()));
        assert_eq!(check_id("sha256:ab"), Ok(()));
        assert_eq!(check_id("Zürich €"), Ok(()));
        assert_eq!(check_id(""), Err(IdError::Empty));
        assert_eq!(check_id("a\0b"), Err(IdError::Control { code: 0, at: 1 }));
        assert_eq!(check_id("a\nb"), Err(IdError::Control { code: 10, at: 1 }));
        assert_eq!(
            check_id("\u{7f}"),
            Err(IdError::Control { code: 127, at: 0 })
        );
        assert_eq!(
            check_id("é\u{85}"),
            Err(IdError::Control { code: 0x85, at: 2 })
        );
        assert_eq!(
            check_id(&"x".repeat(ID_BYTES_MAX + 1)),
            Err(IdError::TooLong {
                bytes: ID_BYTES_MAX + 1
            })
        );
    }

    #[test]
    fn nul_in_free_text_is_refused_and_named_by_its_path() {
        assert_eq!(check_text("line one\nline\ttwo €"), Ok(()));
        assert_eq!(check_text("a\0b"), Err(NulInText { at: 1 }));
        let v =
            serde_json::json!({"title": "fine", "deliveries": [{"id": "d1"}, {"summary": "x\0"}]});
        assert_eq!(
            nul_in_json(&v),
            Some((".deliveries[1].summary".into(), NulInText { at: 1 }))
        );
        assert_eq!(
            nul_in_json(&serde_json::json!({"a\0": 1})).map(|p| p.0),
            Some(".a\\0".into())
        );
        assert_eq!(nul_in_json(&serde_json::json!({"n": 1, "t": ["ok"]})), None);
    }

    #[test]
    fn a_window_with_a_multibyte_character_is_refused_not_a_panic() {
        assert_eq!(window_ms("€"), None);
        assert_eq!(window_ms("1€"), None);
        assert_eq!(window_ms("€h"), None);
        assert_eq!(window_ms("+5h"), None);
        assert_eq!(window_ms("-5h"), None);
        assert_eq!(window_ms("0h"), None);
        assert_eq!(window_ms(""), None);
        assert_eq!(window_ms("99999999999999999d"), None);
        assert_eq!(window_ms("90m"), Some(5_400_000));
        assert_eq!(window_ms("7d"), Some(604_800_000));
    }

    #[test]
    fn percent_decoding_takes_two_hex_digits_and_utf8_only() {
        assert_eq!(percent_decode("%E2%82%AC+x").as_deref(), Some("€ x"));
        assert_eq!(percent_decode("%+5"), None);
        assert_eq!(percent_decode("%-1"), None);
        assert_eq!(percent_decode("%4"), None);
        assert_eq!(percent_decode("%€"), None);
        assert_eq!(percent_decode("%FF"), None);
        assert_eq!(percent_decode("%00").as_deref(), Some("\0"));
        assert_eq!(
            parse_query("a=1&&b&a=2").unwrap(),
            BTreeMap::from([("a".into(), "2".into()), ("b".into(), "".into())])
        );
        assert_eq!(
            parse_query(&"a=1&".repeat(QUERY_PARAMS_MAX + 1)),
            Err(QueryError::TooMany)
        );
    }

    #[test]
    fn whole_numbers_are_digits_within_bounds() {
        assert_eq!(whole_number("50", 1, 500), Some(50));
        assert_eq!(whole_number("+50", 1, 500), None);
        assert_eq!(whole_number("0", 1, 500), None);
        assert_eq!(whole_number("99999999999999999999999", 0, usize::MAX), None);
    }

    /// What `fuzz/fuzz_targets/http.rs` asserts, on random text here too.
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

    proptest! {
        #[test]
        fn percent_encoding_round_trips_and_accepted_ids_are_printable(s in "\\PC{0,40}|.{0,40}") {
            prop_assert_eq!(percent_decode(&encode(&s)), Some(s.clone()));
            if check_id(&s).is_ok() {
                prop_assert!(!s.chars().any(char::is_control));
            }
            let value = parse_query(&format!("k={}", encode(&s))).unwrap();
            prop_assert_eq!(value.get("k"), Some(&s));
            let name = parse_query(&format!("{}=v", encode(&s))).unwrap();
            prop_assert_eq!(name.get(&s).map(String::as_str), Some("v"));
        }

        #[test]
        fn no_input_panics(s in ".{0,40}") {
            let _ = check_id(&s);
            let _ = parse_query(&s);
            let _ = percent_decode(&s);
            let _ = window_ms(&s);
            let _ = whole_number(&s, 0, 10);
        }
    }
}
