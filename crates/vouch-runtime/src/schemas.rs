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

/// The arguments of a verb tool: which declared delivery, and its payload text.
pub fn perform() -> Value {
    object(vec![
        ("delivery", string()),
        ("payload", object(vec![("text", string())])),
    ])
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
}
