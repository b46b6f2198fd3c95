//! Canonical JSON (RFC 8785, JCS) and SHA-256 hashes of payloads; the ledger key (§7, §8.1).

#[derive(Debug, thiserror::Error)]
#[error("cannot canonicalize payload: {0}")]
pub struct CanonError(String);

/// RFC 8785 canonical form of a JSON value.
///
/// A `Value` cannot hold NaN or an infinity, so this does not fail today; the `Result` stays
/// so that callers keep handling a value that cannot be canonicalized.
pub fn canonical_json(value: &serde_json::Value) -> Result<String, CanonError> {
    let mut out = String::with_capacity(128);
    write_canonical(value, &mut out);
    Ok(out)
}

/// Integers up to this magnitude are exact as doubles, so RFC 8785 writes their decimal digits.
const EXACT_INT_MAX: u64 = 1 << 53;

/// Append the RFC 8785 canonical form of `value` to `out`.
///
/// Written directly over the value (no intermediate buffers per key, no re-parsing of keys):
/// object members sorted by the UTF-16 code units of their names, strings escaped as
/// ECMAScript's `JSON.stringify` does, every number written as the double it denotes in
/// ECMAScript's shortest form. Proved equal to an independent RFC 8785 implementation by the
/// property test below.
pub fn write_canonical(value: &serde_json::Value, out: &mut String) {
    use serde_json::Value;
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, v) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(v, out);
            }
            out.push(']');
        }
        Value::Object(map) if map.len() <= SMALL_OBJECT => {
            // Sorted on the stack: most objects are small, and a buffer each would be an
            // allocation for every object written.
            let mut members: [Option<(&String, &Value)>; SMALL_OBJECT] = [None; SMALL_OBJECT];
            for (slot, member) in members.iter_mut().zip(map.iter()) {
                *slot = Some(member);
            }
            let members = &mut members[..map.len()];
            members.sort_unstable_by(|a, b| match (a, b) {
                (Some(a), Some(b)) => utf16_order(a.0, b.0),
                _ => std::cmp::Ordering::Equal,
            });
            write_members(members.iter().flatten().copied(), out);
        }
        Value::Object(map) => {
            let mut members: Vec<(&String, &Value)> = map.iter().collect();
            members.sort_unstable_by(|a, b| utf16_order(a.0, b.0));
            write_members(members.into_iter(), out);
        }
    }
}

/// Objects with at most this many members are sorted without a heap buffer.
const SMALL_OBJECT: usize = 16;

/// Write an object's members, already in canonical order.
fn write_members<'a>(
    members: impl Iterator<Item = (&'a String, &'a serde_json::Value)>,
    out: &mut String,
) {
    out.push('{');
    for (i, (k, v)) in members.enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(k, out);
        out.push(':');
        write_canonical(v, out);
    }
    out.push('}');
}

/// Append the RFC 8785 canonical form of one string (the same as of `Value::String`).
pub fn write_canonical_str(s: &str, out: &mut String) {
    write_string(s, out);
}

/// RFC 8785 §3.2.3: member names sorted by their UTF-16 code units. UTF-8 byte order is the
/// same except between astral characters and U+E000..U+FFFF, so compare bytes unless both
/// names hold a byte of a 4-byte (astral) sequence.
pub(crate) fn utf16_order(a: &str, b: &str) -> std::cmp::Ordering {
    let astral = |s: &str| s.bytes().any(|c| c >= 0xF0);
    if astral(a) || astral(b) {
        a.encode_utf16().cmp(b.encode_utf16())
    } else {
        a.as_bytes().cmp(b.as_bytes())
    }
}

fn write_number(n: &serde_json::Number, out: &mut String) {
    if let Some(u) = n.as_u64().filter(|u| *u <= EXACT_INT_MAX) {
        write_digits(u, out);
    } else if let Some(i) = n.as_i64().filter(|i| i.unsigned_abs() <= EXACT_INT_MAX) {
        out.push('-'); // as_u64 answered every integer ≥ 0, so this one is negative
        write_digits(i.unsigned_abs(), out);
    } else {
        // Larger integers and every float: the double, in ECMAScript's shortest form.
        let f = n.as_f64().unwrap_or(0.0);
        let mut buf = ryu_js::Buffer::new();
        out.push_str(buf.format_finite(f));
    }
}

/// The decimal digits of `n`, as `{n}` formats them, without the formatting machinery.
fn write_digits(mut n: u64, out: &mut String) {
    let mut buf = [0u8; 20];
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    for &d in &buf[at..] {
        out.push(char::from(d));
    }
}

/// A string as `JSON.stringify` writes it: `"` and `\` escaped, the control characters as
/// `\b \t \n \f \r` or `\u00xx` (lower-case hex), everything else as it is.
fn write_string(s: &str, out: &mut String) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.push('"');
    let bytes = s.as_bytes();
    let mut start = 0; // the first byte not yet copied to `out`
    let mut i = 0;
    while i < bytes.len() {
        // Eight bytes at a time while none of them needs escaping (most text).
        if let Some(chunk) = bytes.get(i..i + 8) {
            if !needs_escape(chunk) {
                i += 8;
                continue;
            }
        }
        let b = bytes[i];
        let escape: &str = match b {
            b'"' => "\\\"",
            b'\\' => "\\\\",
            b'\n' => "\\n",
            b'\r' => "\\r",
            b'\t' => "\\t",
            0x08 => "\\b",
            0x0c => "\\f",
            0x00..=0x1f => "",
            _ => {
                i += 1;
                continue;
            }
        };
        // `b` is ASCII, so both ends are character boundaries.
        out.push_str(&s[start..i]);
        if escape.is_empty() {
            out.push_str("\\u00");
            out.push(HEX[usize::from(b >> 4)] as char);
            out.push(HEX[usize::from(b & 0xf)] as char);
        } else {
            out.push_str(escape);
        }
        i += 1;
        start = i;
    }
    out.push_str(&s[start..]);
    out.push('"');
}

/// Whether any of eight bytes is a control character, `"` or `\\`. A byte that is one is never
/// missed (the word tests can only err the other way, which costs a byte-by-byte look).
fn needs_escape(chunk: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let mut word = [0u8; 8];
    word.copy_from_slice(chunk);
    let x = u64::from_le_bytes(word);
    let below = |v: u64, n: u64| v.wrapping_sub(ONES * n) & !v & HIGH;
    (below(x, 0x20) | below(x ^ (ONES * 0x22), 1) | below(x ^ (ONES * 0x5c), 1)) != 0
}

/// Bytes as lower-case hexadecimal, as `hex::encode` writes them, without building the text one
/// `char` at a time (every chained event's hash goes through here).
pub fn hex_lower(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = Vec::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.extend_from_slice(&[HEX[usize::from(b >> 4)], HEX[usize::from(b & 0xf)]]);
    }
    // Only ASCII hexadecimal digits were written.
    String::from_utf8(out).unwrap_or_default()
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex_lower(ring::digest::digest(&ring::digest::SHA256, bytes).as_ref())
}

/// SHA-256 over several parts, as one text: every hash of the journal's chain and the ledger
/// goes through here. ring's implementation (assembly using the CPU's SHA or vector
/// instructions) takes about a third fewer instructions a block than a portable one where
/// those are absent, and the same hash.
pub struct Sha256(ring::digest::Context);

impl Sha256 {
    pub fn new() -> Sha256 {
        Sha256(ring::digest::Context::new(&ring::digest::SHA256))
    }

    pub fn update(&mut self, bytes: impl AsRef<[u8]>) {
        self.0.update(bytes.as_ref());
    }

    /// The hash, as lower-case hexadecimal.
    pub fn hex(self) -> String {
        hex_lower(self.0.finish().as_ref())
    }
}

impl Default for Sha256 {
    fn default() -> Sha256 {
        Sha256::new()
    }
}

/// The hash an approval binds to: SHA-256 of the canonical JSON of the payload.
pub fn payload_hash(value: &serde_json::Value) -> Result<String, CanonError> {
    Ok(sha256_hex(canonical_json(value)?.as_bytes()))
}

/// §8.1: SHA-256 of (scope, delivery id, payload hash). Fields are length-prefixed so that
/// no two different triples share an encoding.
pub fn ledger_key(scope: &str, delivery_id: &str, payload_hash: &str) -> String {
    let mut h = Sha256::new();
    for part in [scope, delivery_id, payload_hash] {
        h.update((part.len() as u64).to_be_bytes());
        h.update(part.as_bytes());
    }
    h.hex()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    /// FIPS 180-2's vector, whole and in parts.
    #[test]
    fn sha256_is_sha256() {
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_hex(b"abc"), abc);
        let mut h = Sha256::new();
        h.update("a");
        h.update(b"bc");
        assert_eq!(h.hex(), abc);
    }

    #[test]
    fn rfc8785_examples() {
        let v = json!({"b": 2, "a": [1, "x", {"d": true, "c": null}], "n": 1.0e21, "f": 0.5});
        assert_eq!(
            canonical_json(&v).unwrap(),
            r#"{"a":[1,"x",{"c":null,"d":true}],"b":2,"f":0.5,"n":1e+21}"#
        );
        let s = json!({"€": "é\u{000A}"});
        assert_eq!(canonical_json(&s).unwrap(), "{\"€\":\"é\\n\"}");
    }

    #[test]
    fn hash_ignores_key_order() {
        let a: serde_json::Value = serde_json::from_str(r#"{"to":"a@b","body":"hi"}"#).unwrap();
        let b: serde_json::Value =
            serde_json::from_str(r#"{ "body" : "hi", "to":"a@b" }"#).unwrap();
        assert_eq!(payload_hash(&a).unwrap(), payload_hash(&b).unwrap());
        assert_ne!(
            payload_hash(&a).unwrap(),
            payload_hash(&json!({"to":"a@b","body":"hi!"})).unwrap()
        );
        assert_eq!(payload_hash(&a).unwrap().len(), 64);
    }

    #[test]
    fn hex_is_what_hex_encode_writes() {
        let all: Vec<u8> = (0..=255).collect();
        assert_eq!(hex_lower(&all), hex::encode(&all));
        assert_eq!(hex_lower(&[]), "");
    }

    #[test]
    fn ledger_key_is_unambiguous() {
        assert_ne!(ledger_key("ab", "c", "h"), ledger_key("a", "bc", "h"));
        assert_eq!(ledger_key("run1", "d1", "h"), ledger_key("run1", "d1", "h"));
    }

    /// Any JSON value: nested arrays and objects of every kind of scalar, names and strings
    /// with control characters, quotes, astral and high-BMP characters, big integers, floats.
    fn any_json() -> impl Strategy<Value = serde_json::Value> {
        let text = "[a-z\"\\\\\u{0}-\u{1f}\u{7f}é€\u{e000}\u{ffff}😀\u{10000}]{0,6}";
        let leaf = prop_oneof![
            Just(serde_json::Value::Null),
            any::<bool>().prop_map(serde_json::Value::from),
            any::<i64>().prop_map(serde_json::Value::from),
            any::<u64>().prop_map(serde_json::Value::from),
            (-(1i64 << 54)..(1i64 << 54)).prop_map(serde_json::Value::from),
            any::<f64>()
                .prop_filter("finite", |f| f.is_finite())
                .prop_map(serde_json::Value::from),
            text.prop_map(serde_json::Value::from),
        ];
        leaf.prop_recursive(4, 48, 6, move |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..6).prop_map(serde_json::Value::from),
                proptest::collection::vec((text, inner), 0..6).prop_map(|members| {
                    serde_json::Value::Object(members.into_iter().collect())
                }),
            ]
        })
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// The direct writer agrees with an independent RFC 8785 implementation on any value.
        #[test]
        fn canonical_equals_an_independent_implementation(v in any_json()) {
            let independent = serde_json_canonicalizer::to_string(&v).unwrap();
            prop_assert_eq!(canonical_json(&v).unwrap(), independent);
        }

        /// Objects on both sides of the stack buffer's size, sorted alike.
        #[test]
        fn wide_objects_equal_an_independent_implementation(
            members in proptest::collection::vec(("[a-z\u{e000}😀]{0,3}", any::<i64>()), 0..40)
        ) {
            let v = serde_json::Value::Object(
                members.into_iter().map(|(k, n)| (k, serde_json::Value::from(n))).collect(),
            );
            let independent = serde_json_canonicalizer::to_string(&v).unwrap();
            prop_assert_eq!(canonical_json(&v).unwrap(), independent);
        }

        /// Strings long enough for the eight-byte scan, escapes anywhere in them.
        #[test]
        fn long_strings_equal_an_independent_implementation(
            s in "[a-z \"\\\\\u{0}-\u{1f}\u{7f}é€\u{e000}😀]{0,64}",
            clean in "[a-z ]{0,24}",
        ) {
            for text in [s.clone(), format!("{clean}{s}"), format!("{s}{clean}{clean}")] {
                let v = serde_json::Value::String(text);
                let independent = serde_json_canonicalizer::to_string(&v).unwrap();
                prop_assert_eq!(canonical_json(&v).unwrap(), independent);
            }
        }

        #[test]
        fn integers_are_their_digits(n in -(1i64 << 53)..=(1i64 << 53)) {
            prop_assert_eq!(canonical_json(&serde_json::Value::from(n)).unwrap(), n.to_string());
        }

        #[test]
        fn canonical_is_idempotent(m in proptest::collection::btree_map("[a-z]{0,4}", any::<i32>(), 0..6)) {
            let v = serde_json::to_value(&m).unwrap();
            let c1 = canonical_json(&v).unwrap();
            let back: serde_json::Value = serde_json::from_str(&c1).unwrap();
            prop_assert_eq!(c1, canonical_json(&back).unwrap());
        }
    }
}
