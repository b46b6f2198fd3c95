//! The JSON Schemas vouch advertises to the model, built in one place from the core types'
//! closed vocabularies (`Verb::ALL`, `DestinationKind::ALL`, the confidence levels), so an
//! added verb or kind reaches the model without anyone editing a JSON literal.
//!
//! Every schema meets OpenAI's strict function-schema rules: each object has `type`,
//! `properties`, `required` naming every property and `additionalProperties: false`; each
//! array has `items`; each enum has a `type`. An optional field is therefore required but
//! nullable, and [`without_nulls`] turns the model's `null` back into "absent" before the
//! arguments are parsed into core types.

use serde_json::{json, Map, Value};
use vouch_core::{Confidence, DestinationKind, Verb};

/// The confidence levels, in order. A `match` keeps this list exhaustive: a new level in
/// the core fails to compile here until it is advertised.
pub const CONFIDENCE_ALL: [Confidence; 3] = [Confidence::Low, Confidence::Medium, Confidence::High];

pub fn confidence_str(c: Confidence) -> &'static str {
    match c {
        Confidence::Low => "low",
        Confidence::Medium => "medium",
        Confidence::High => "high",
    }
}

/// A strict object: every property required, nothing else allowed.
pub fn object(properties: Vec<(&str, Value)>) -> Value {
    let required: Vec<Value> = properties.iter().map(|(k, _)| json!(k)).collect();
    let props: Map<String, Value> = properties
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    json!({
        "type": "object",
        "properties": props,
        "required": required,
        "additionalProperties": false,
    })
}

pub fn string() -> Value {
    json!({"type": "string"})
}

pub fn array(items: Value) -> Value {
    json!({"type": "array", "items": items})
}

/// A string enum over a closed vocabulary.
pub fn string_enum<'a>(values: impl IntoIterator<Item = &'a str>) -> Value {
    let values: Vec<&str> = values.into_iter().collect();
    json!({"type": "string", "enum": values})
}

/// The same schema, also allowing `null` (strict mode's way of saying "optional").
pub fn nullable(mut schema: Value) -> Value {
    if let Some(obj) = schema.as_object_mut() {
        if let Some(t) = obj.get("type").and_then(Value::as_str).map(str::to_string) {
            obj.insert("type".into(), json!([t, "null"]));
        }
        if let Some(Value::Array(values)) = obj.get_mut("enum") {
            values.push(Value::Null);
        }
    }
    schema
}

pub fn verb_enum() -> Value {
    string_enum(Verb::ALL.iter().map(|v| v.as_str()))
}

pub fn kind_enum() -> Value {
    string_enum(DestinationKind::ALL.iter().map(|k| k.as_str()))
}

/// The arguments of `declare`: the manifest (§3) — deliveries, forbids and order.
pub fn declare() -> Value {
    let destination = object(vec![("kind", kind_enum()), ("address", nullable(string()))]);
    let delivery = object(vec![
        ("id", string()),
        ("verb", verb_enum()),
        ("destination", destination),
        (
            "confidence",
            nullable(string_enum(
                CONFIDENCE_ALL.iter().map(|c| confidence_str(*c)),
            )),
        ),
        ("required", nullable(json!({"type": "boolean"}))),
        ("attendees", nullable(array(string()))),
    ]);
    let forbid = object(vec![
        ("verb", verb_enum()),
        ("kind", nullable(kind_enum())),
        ("address", nullable(string())),
    ]);
    let order = object(vec![("before", string()), ("after", string())]);
    object(vec![
        ("deliveries", array(delivery)),
        ("forbid", nullable(array(forbid))),
        ("order", nullable(array(order))),
    ])
}

pub fn clarify() -> Value {
    object(vec![("question", string())])
}

/// The arguments of a verb tool: which declared delivery, and its payload in the shape of
/// that delivery's destination kind (one branch per kind, see [`payload`]).
pub fn perform() -> Value {
    object(vec![("delivery", string()), ("payload", payload_any())])
}

/// The payload of any destination kind: `anyOf` one branch per kind, each saying its kind.
pub fn payload_any() -> Value {
    let branches: Vec<Value> = DestinationKind::ALL
        .iter()
        .map(|k| {
            let mut s = payload(*k);
            s["description"] = json!(format!("the payload of a `{}` destination", k.as_str()));
            s
        })
        .collect();
    json!({"anyOf": branches})
}

fn described(mut schema: Value, text: &str) -> Value {
    schema["description"] = json!(text);
    schema
}

/// The payload a destination kind takes (§6.1), the one source for the OpenAI tools, the MCP
/// tools and [`check_payload`]. Optional fields follow strict mode: listed in `required`,
/// typed with `null`.
pub fn payload(kind: DestinationKind) -> Value {
    match kind {
        DestinationKind::Surface => object(vec![("text", string())]),
        DestinationKind::Folder => object(vec![
            (
                "text",
                described(nullable(string()), "the file's text (or null with base64)"),
            ),
            (
                "base64",
                described(
                    nullable(string()),
                    "the file's bytes, base64 (or null with text)",
                ),
            ),
        ]),
        DestinationKind::Email => object(vec![
            (
                "to",
                described(string(), "the recipient: the declared address"),
            ),
            ("cc", nullable(array(string()))),
            ("subject", string()),
            ("body", string()),
            (
                "in_reply_to",
                described(nullable(string()), "the Message-ID replied to (reply)"),
            ),
        ]),
        // Strict mode allows no free-form object, so the object to post travels as JSON text.
        DestinationKind::Webhook => object(vec![(
            "json",
            described(string(), "the JSON object to POST, as JSON text"),
        )]),
        DestinationKind::Calendar => object(vec![
            ("title", string()),
            (
                "start",
                described(string(), "local start, YYYY-MM-DDTHH:MM[:SS]"),
            ),
            (
                "end",
                described(string(), "local end, YYYY-MM-DDTHH:MM[:SS]"),
            ),
            (
                "tz",
                described(string(), "IANA time zone, e.g. Europe/Berlin"),
            ),
            ("attendees", nullable(array(string()))),
        ]),
        DestinationKind::Payment => object(vec![
            (
                "amount",
                described(string(), "a decimal amount, e.g. 120.00"),
            ),
            ("currency", described(string(), "ISO 4217 code, e.g. EUR")),
            ("memo", nullable(string())),
        ]),
        DestinationKind::Repository => object(vec![
            ("commit", described(string(), "the full commit id to apply")),
            ("task", nullable(string())),
            (
                "diff",
                described(
                    nullable(string()),
                    "the diff the commit applies, as the card shows it",
                ),
            ),
        ]),
    }
}

/// The same schema with every nullable property optional: strict mode sends `null` for a field
/// left out, other clients (MCP) may leave it out; both mean absent.
fn nulls_optional(schema: &Value) -> Value {
    let mut s = schema.clone();
    if let Some(props) = s.get("properties").and_then(Value::as_object).cloned() {
        let required: Vec<Value> = props
            .iter()
            .filter(|(_, p)| !types_of(p).contains(&"null"))
            .map(|(k, _)| json!(k))
            .collect();
        let props: Map<String, Value> = props
            .iter()
            .map(|(k, p)| (k.clone(), nulls_optional(p)))
            .collect();
        s["properties"] = Value::Object(props);
        s["required"] = Value::Array(required);
    }
    if let Some(items) = s.get("items").cloned() {
        s["items"] = nulls_optional(&items);
    }
    s
}

/// Payload errors named back to the model at most.
pub const PAYLOAD_ERRORS_MAX: usize = 8;

/// Check a payload for delivery `d` against its kind's schema and the declaration, and answer
/// the payload as it is stored (nulls removed, so strict and non-strict clients hash alike).
/// An error names what is wrong, for the model to repair; nothing is stored.
pub fn check_payload(d: &vouch_core::Delivery, given: &Value) -> Result<Value, String> {
    let kind = d.destination.kind;
    let p = without_nulls(given);
    let v = payload_validator(kind)?;
    let errors: Vec<String> = v
        .iter_errors(&p)
        .take(PAYLOAD_ERRORS_MAX)
        .map(|e| format!("payload{}: {e}", e.instance_path()))
        .collect();
    if !errors.is_empty() {
        return Err(format!(
            "the payload of {} does not fit a `{}` destination ({}): {}",
            d.id,
            kind.as_str(),
            shape_of(kind),
            errors.join("; ")
        ));
    }
    check_declared(d, &p)?;
    Ok(p)
}

/// The compiled validator of a destination kind's payload schema, compiled once per process
/// (the schemas are constants; compiling one cost more than the rest of a save).
fn payload_validator(kind: DestinationKind) -> Result<&'static jsonschema::Validator, String> {
    type Compiled = Vec<Result<jsonschema::Validator, String>>;
    static VALIDATORS: std::sync::OnceLock<Compiled> = std::sync::OnceLock::new();
    let all = VALIDATORS.get_or_init(|| {
        DestinationKind::ALL
            .iter()
            .map(|k| {
                jsonschema::validator_for(&nulls_optional(&payload(*k)))
                    .map_err(|e| format!("payload schema: {e}"))
            })
            .collect()
    });
    DestinationKind::ALL
        .iter()
        .position(|k| *k == kind)
        .and_then(|i| all.get(i))
        .ok_or_else(|| format!("payload schema: no schema for `{}`", kind.as_str()))?
        .as_ref()
        .map_err(Clone::clone)
}

/// The payload's fields in words, for an error message.
fn shape_of(kind: DestinationKind) -> String {
    let s = payload(kind);
    let props = s.get("properties").and_then(Value::as_object);
    let fields: Vec<String> = props
        .into_iter()
        .flatten()
        .map(|(k, p)| {
            if types_of(p).contains(&"null") {
                format!("{k}?")
            } else {
                k.clone()
            }
        })
        .collect();
    format!("{{{}}}", fields.join(", "))
}

/// What the schema cannot say: a payload keeps to its declaration (the person's approval and
/// the posture were decided on the declared destination), and one-of fields hold one.
fn check_declared(d: &vouch_core::Delivery, p: &Value) -> Result<(), String> {
    let text = |k: &str| p.get(k).and_then(Value::as_str);
    match d.destination.kind {
        DestinationKind::Folder => match (text("text"), text("base64")) {
            (Some(_), Some(_)) | (None, None) => {
                return Err(format!(
                    "the payload of {} needs exactly one of `text` and `base64` (the other null)",
                    d.id
                ))
            }
            (None, Some(b)) => {
                use base64::Engine;
                if base64::engine::general_purpose::STANDARD.decode(b).is_err() {
                    return Err(format!("the payload of {}: `base64` is not base64", d.id));
                }
            }
            _ => {}
        },
        DestinationKind::Email => {
            let address = d.destination.address.trim();
            let to = text("to").unwrap_or("").trim();
            if address.contains('@') && !to.eq_ignore_ascii_case(address) {
                return Err(format!(
                    "the payload of {} is addressed to `{}`, but {} was declared for `{address}`; \
                     declare another item for another recipient",
                    d.id,
                    shown(to),
                    d.id
                ));
            }
        }
        DestinationKind::Webhook => {
            let body = text("json").unwrap_or("");
            if !serde_json::from_str::<Value>(body).is_ok_and(|v| v.is_object()) {
                return Err(format!(
                    "the payload of {}: `json` must be the text of a JSON object",
                    d.id
                ));
            }
        }
        DestinationKind::Calendar => {
            for k in ["start", "end"] {
                let t = text(k).unwrap_or("");
                if chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M:%S").is_err()
                    && chrono::NaiveDateTime::parse_from_str(t, "%Y-%m-%dT%H:%M").is_err()
                {
                    return Err(format!(
                        "the payload of {}: `{k}` must be a local time YYYY-MM-DDTHH:MM[:SS], not `{}`",
                        d.id,
                        shown(t)
                    ));
                }
            }
            let tz = text("tz").unwrap_or("");
            if tz.parse::<chrono_tz::Tz>().is_err() {
                return Err(format!(
                    "the payload of {}: `tz` must be an IANA time zone such as Europe/Berlin, not `{}`",
                    d.id,
                    shown(tz)
                ));
            }
            let extra: Vec<&str> = p
                .get("attendees")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
                .filter_map(Value::as_str)
                .filter(|a| !d.attendees.iter().any(|x| x.eq_ignore_ascii_case(a)))
                .collect();
            if let Some(a) = extra.first() {
                return Err(format!(
                    "the payload of {} invites `{}`, who was not declared; amend the manifest's attendees first",
                    d.id,
                    shown(a)
                ));
            }
        }
        DestinationKind::Payment => {
            let amount = text("amount").unwrap_or("");
            let decimal = amount.split_once('.').map_or(amount, |(a, _)| a);
            let ok = !amount.is_empty()
                && amount.chars().all(|c| c.is_ascii_digit() || c == '.')
                && amount.matches('.').count() <= 1
                && !decimal.is_empty();
            if !ok {
                return Err(format!(
                    "the payload of {}: `amount` must be a decimal such as 120.00, not `{}`",
                    d.id,
                    shown(amount)
                ));
            }
        }
        _ => {}
    }
    Ok(())
}

/// A hostile string shown in an error: at most 80 characters, control characters escaped.
pub fn shown(s: &str) -> String {
    s.chars().take(80).flat_map(char::escape_debug).collect()
}

/// A script's payload as the host is to receive it: `{"text": T}` alone, for a kind whose
/// payload has other fields, is shorthand for [`from_text`]; anything else is sent as written
/// (and checked by the host like a model's).
pub fn expand_script_text(d: &vouch_core::Delivery, given: &Value) -> Value {
    let text = match given.as_object() {
        Some(m) if m.len() == 1 => m.get("text").and_then(Value::as_str),
        _ => None,
    };
    match (text, d.destination.kind) {
        (Some(t), k) if !matches!(k, DestinationKind::Surface | DestinationKind::Folder) => {
            from_text(k, &d.destination.address, &d.id, t)
        }
        _ => given.clone(),
    }
}

/// A script's plain-text payload `{"text": T}` in the shape of `kind` (scripts.md): the
/// scripted model writes scenarios shortly; the host still checks the expanded payload.
pub fn from_text(kind: DestinationKind, address: &str, id: &str, text: &str) -> Value {
    match kind {
        DestinationKind::Surface | DestinationKind::Folder => json!({"text": text}),
        DestinationKind::Email => json!({"to": address, "subject": id, "body": text}),
        DestinationKind::Webhook => json!({"json": json!({"text": text}).to_string()}),
        DestinationKind::Calendar => json!({"title": text, "start": "2026-01-05T09:00",
            "end": "2026-01-05T10:00", "tz": "UTC"}),
        DestinationKind::Payment => json!({"amount": "1.00", "currency": "EUR", "memo": text}),
        DestinationKind::Repository => json!({"commit": text}),
    }
}

pub fn read_file() -> Value {
    object(vec![("path", string())])
}

pub fn write_artifact() -> Value {
    object(vec![("name", string()), ("text", string())])
}

/// Object members whose value is `null` removed, recursively: strict mode sends `null` for
/// an optional field the model leaves out, and the core types read "absent", not `null`.
pub fn without_nulls(value: &Value) -> Value {
    match value {
        Value::Object(map) => Value::Object(
            map.iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| (k.clone(), without_nulls(v)))
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_nulls).collect()),
        other => other.clone(),
    }
}

/// Where a schema breaks OpenAI's strict function-schema rules, as JSON pointers with the
/// rule broken; empty when it meets them.
pub fn strict_violations(schema: &Value) -> Vec<String> {
    let mut out = Vec::new();
    walk(schema, "", &mut out);
    out
}

/// The keywords a strict function schema may use (the conservative set every strict
/// validator takes: no formats, patterns, bounds or free-form objects).
pub const STRICT_KEYWORDS: [&str; 8] = [
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "anyOf",
    "description",
];

fn types_of(schema: &Value) -> Vec<&str> {
    match schema.get("type") {
        Some(Value::String(t)) => vec![t.as_str()],
        Some(Value::Array(ts)) => ts.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}

fn walk(schema: &Value, at: &str, out: &mut Vec<String>) {
    let Some(obj) = schema.as_object() else {
        out.push(format!("{at}: a schema must be an object"));
        return;
    };
    for k in obj.keys() {
        if !STRICT_KEYWORDS.contains(&k.as_str()) {
            out.push(format!("{at}: `{k}` is not a keyword strict mode supports"));
        }
    }
    if let Some(branches) = obj.get("anyOf") {
        if at.is_empty() {
            out.push("the root schema may not be `anyOf`".into());
        }
        match branches.as_array() {
            Some(bs) if !bs.is_empty() => {
                for (i, b) in bs.iter().enumerate() {
                    walk(b, &format!("{at}/anyOf/{i}"), out);
                }
            }
            _ => out.push(format!("{at}: `anyOf` must be a non-empty array")),
        }
        return;
    }
    let types = types_of(schema);
    if types.is_empty() {
        out.push(format!("{at}: no `type`"));
    }
    if obj.contains_key("enum") && types.is_empty() {
        out.push(format!("{at}: an enum without a `type`"));
    }
    if types.contains(&"object") {
        let props = obj.get("properties").and_then(Value::as_object);
        match props {
            None => out.push(format!("{at}: an object without `properties`")),
            Some(props) => {
                let required: Vec<&str> = obj
                    .get("required")
                    .and_then(Value::as_array)
                    .map(|r| r.iter().filter_map(Value::as_str).collect())
                    .unwrap_or_default();
                for (name, sub) in props {
                    if !required.contains(&name.as_str()) {
                        out.push(format!("{at}/properties/{name}: not listed in `required`"));
                    }
                    walk(sub, &format!("{at}/properties/{name}"), out);
                }
            }
        }
        if obj.get("additionalProperties") != Some(&Value::Bool(false)) {
            out.push(format!(
                "{at}: an object without `additionalProperties: false`"
            ));
        }
    }
    if types.contains(&"array") {
        match obj.get("items") {
            None => out.push(format!("{at}: an array without `items`")),
            Some(items) => walk(items, &format!("{at}/items"), out),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_generated_schema_meets_the_strict_rules() {
        for (name, s) in [
            ("declare", declare()),
            ("clarify", clarify()),
            ("perform", perform()),
            ("surface", payload(DestinationKind::Surface)),
            ("folder", payload(DestinationKind::Folder)),
            ("email", payload(DestinationKind::Email)),
            ("webhook", payload(DestinationKind::Webhook)),
            ("calendar", payload(DestinationKind::Calendar)),
            ("payment", payload(DestinationKind::Payment)),
            ("repository", payload(DestinationKind::Repository)),
            ("read_file", read_file()),
            ("write_artifact", write_artifact()),
        ] {
            assert_eq!(strict_violations(&s), Vec::<String>::new(), "{name}");
        }
    }

    #[test]
    fn the_checker_catches_the_old_declare_shape() {
        // The shape advertised before: arrays without items, enums without a type.
        let old = json!({"type":"object","properties":{
            "forbid":{"type":"array"},"verb":{"enum":["write"]}},"required":["forbid"]});
        let v = strict_violations(&old);
        assert!(
            v.iter().any(|m| m.contains("array without `items`")),
            "{v:?}"
        );
        assert!(
            v.iter().any(|m| m.contains("enum without a `type`")),
            "{v:?}"
        );
        assert!(
            v.iter().any(|m| m.contains("not listed in `required`")),
            "{v:?}"
        );
        assert!(
            v.iter().any(|m| m.contains("additionalProperties")),
            "{v:?}"
        );
    }

    #[test]
    fn nulls_from_strict_mode_parse_as_absent_fields() {
        let args = json!({"deliveries":[{"id":"a","verb":"save",
            "destination":{"kind":"folder","address":"r.md"},
            "confidence":null,"required":null,"attendees":null}],
            "forbid":[{"verb":"send","kind":null,"address":null}],"order":[]});
        let m: vouch_core::Manifest = serde_json::from_value(without_nulls(&args)).expect("parses");
        assert_eq!(m.deliveries[0].confidence, Confidence::High);
        assert!(m.deliveries[0].required);
        assert_eq!(m.forbid[0].kind, None);
    }

    fn delivery(kind: DestinationKind, address: &str) -> vouch_core::Delivery {
        vouch_core::Delivery {
            id: "d1".into(),
            verb: Verb::Send,
            destination: vouch_core::Destination::new(kind, address),
            object: None,
            confidence: Confidence::High,
            required: true,
            attendees: vec!["dana@example.com".into()],
        }
    }

    #[test]
    fn every_kind_takes_the_payload_its_schema_declares_and_nothing_else() {
        use DestinationKind as K;
        let ok = [
            (K::Surface, "", json!({"text": "hi"})),
            (K::Folder, "a.md", json!({"text": "hi", "base64": null})),
            (K::Folder, "a.bin", json!({"base64": "AAE="})),
            (
                K::Email,
                "dana@example.com",
                json!({"to": "Dana@example.com", "cc": ["e@x.org"],
                "subject": "s", "body": "b", "in_reply_to": null}),
            ),
            (K::Webhook, "https://h/x", json!({"json": "{\"a\": 1}"})),
            (
                K::Calendar,
                "work",
                json!({"title": "Call", "start": "2026-12-08T15:00",
                "end": "2026-12-08T15:30:00", "tz": "Europe/Berlin",
                "attendees": ["dana@example.com"]}),
            ),
            (
                K::Payment,
                "acct",
                json!({"amount": "12.50", "currency": "EUR", "memo": null}),
            ),
            (
                K::Repository,
                "r#main",
                json!({"commit": "abc", "task": null}),
            ),
        ];
        for (kind, address, p) in ok {
            let d = delivery(kind, address);
            let stored = check_payload(&d, &p).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
            assert!(!stored.to_string().contains("null"), "{stored}");
        }
        let bad = [
            (
                K::Email,
                "dana@example.com",
                json!({"text": "hi"}),
                "subject",
            ),
            (
                K::Email,
                "dana@example.com",
                json!({"to": "eve@example.com", "subject": "s",
                "body": "b"}),
                "declared",
            ),
            (
                K::Email,
                "dana@example.com",
                json!({"to": "dana@example.com", "subject": "s",
                "body": "b", "bcc": "eve@example.com"}),
                "bcc",
            ),
            (
                K::Folder,
                "a.md",
                json!({"text": "a", "base64": "AAE="}),
                "exactly one",
            ),
            (K::Folder, "a.md", json!({}), "exactly one"),
            (K::Folder, "a.md", json!({"base64": "%%"}), "not base64"),
            (
                K::Webhook,
                "https://h/x",
                json!({"json": "[1]"}),
                "JSON object",
            ),
            (K::Webhook, "https://h/x", json!({"a": 1}), "json"),
            (
                K::Calendar,
                "work",
                json!({"title": "t", "start": "tomorrow", "end": "2026-12-08T15:30",
                "tz": "UTC"}),
                "start",
            ),
            (
                K::Calendar,
                "work",
                json!({"title": "t", "start": "2026-12-08T15:00",
                "end": "2026-12-08T15:30", "tz": "Mars/Base"}),
                "tz",
            ),
            (
                K::Calendar,
                "work",
                json!({"title": "t", "start": "2026-12-08T15:00",
                "end": "2026-12-08T15:30", "tz": "UTC", "attendees": ["eve@example.com"]}),
                "not declared",
            ),
            (
                K::Payment,
                "acct",
                json!({"amount": "lots", "currency": "EUR"}),
                "amount",
            ),
        ];
        for (kind, address, p, says) in bad {
            let e = check_payload(&delivery(kind, address), &p).unwrap_err();
            assert!(e.contains(says), "{kind:?} {p}: {e}");
        }
    }

    #[test]
    fn a_scripts_text_shorthand_expands_to_a_payload_its_kind_accepts() {
        for kind in DestinationKind::ALL {
            let d = delivery(kind, "dana@example.com");
            let p = expand_script_text(&d, &json!({"text": "hello"}));
            check_payload(&d, &p).unwrap_or_else(|e| panic!("{kind:?}: {e}"));
        }
    }
}
