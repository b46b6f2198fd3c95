#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The tool schemas vouch advertises: valid draft 2020-12 schemas, within OpenAI's strict
//! function-schema rules, and in agreement with the core types on every declare payload in
//! the corpus (a payload the manifest parser accepts validates, and one it refuses does not).

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use vouch_adapters::folder::FolderProvider;
use vouch_adapters::tools::StandardTools;
use vouch_runtime::host::WorkTools;
use vouch_runtime::model::ToolSpec;
use vouch_runtime::schemas;

fn advertised() -> Vec<(String, Value)> {
    let tools = StandardTools {
        folder: FolderProvider::new("/nonexistent"),
        artifacts_dir: PathBuf::from("/nonexistent"),
    };
    let mut out = vec![
        ("declare".to_string(), schemas::declare()),
        ("clarify".to_string(), schemas::clarify()),
        ("perform".to_string(), schemas::perform()),
    ];
    out.extend(tools.specs().into_iter().map(
        |ToolSpec {
             name, parameters, ..
         }| (name, parameters),
    ));
    out
}

#[test]
fn every_advertised_tool_schema_is_a_valid_draft_2020_12_schema() {
    for (name, schema) in advertised() {
        if let Err(e) = jsonschema::draft202012::meta::validate(&schema) {
            panic!("{name}: {e}");
        }
        jsonschema::draft202012::new(&schema).unwrap_or_else(|e| panic!("{name}: {e}"));
    }
}

#[test]
fn every_advertised_tool_schema_meets_openai_strict_rules() {
    for (name, schema) in advertised() {
        assert_eq!(
            schemas::strict_violations(&schema),
            Vec::<String>::new(),
            "{name}"
        );
    }
}

/// Strict mode sends `null` for every optional field left out; fill them in the same way.
fn as_strict_mode_sends(schema: &Value, instance: &Value) -> Value {
    match (schema.get("properties"), instance) {
        (Some(Value::Object(props)), Value::Object(map)) => {
            let mut out = serde_json::Map::new();
            for (k, v) in map {
                let sub = props.get(k).cloned().unwrap_or(json!({}));
                out.insert(k.clone(), as_strict_mode_sends(&sub, v));
            }
            for (k, sub) in props {
                let nullable = sub
                    .get("type")
                    .and_then(Value::as_array)
                    .is_some_and(|t| t.contains(&json!("null")));
                if !out.contains_key(k) && nullable {
                    out.insert(k.clone(), Value::Null);
                }
            }
            Value::Object(out)
        }
        (_, Value::Array(items)) => {
            let sub = schema.get("items").cloned().unwrap_or(json!({}));
            Value::Array(
                items
                    .iter()
                    .map(|i| as_strict_mode_sends(&sub, i))
                    .collect(),
            )
        }
        (_, other) => other.clone(),
    }
}

fn declares(v: &Value, out: &mut Vec<Value>) {
    match v {
        Value::Object(map) => {
            for (k, x) in map {
                if k == "declare" && x.is_object() {
                    out.push(x.clone());
                }
                declares(x, out);
            }
        }
        Value::Array(items) => items.iter().for_each(|x| declares(x, out)),
        _ => {}
    }
}

fn corpus_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let p = e.path();
        if p.is_dir() {
            corpus_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
}

#[test]
fn corpus_declare_payloads_agree_with_the_generated_declare_schema() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus");
    let mut files = Vec::new();
    corpus_files(&corpus, &mut files);
    let schema = schemas::declare();
    let validator = jsonschema::draft202012::new(&schema).unwrap();
    let mut checked = 0;
    for f in files {
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        let mut found = Vec::new();
        declares(&v, &mut found);
        for payload in found {
            let parses = serde_json::from_value::<vouch_core::Manifest>(payload.clone()).is_ok();
            let sent = as_strict_mode_sends(&schema, &payload);
            let valid = validator.is_valid(&sent);
            assert_eq!(parses, valid, "{}: {payload}", f.display());
            if parses {
                // What strict mode sends reads back as the same manifest.
                let back: vouch_core::Manifest =
                    serde_json::from_value(schemas::without_nulls(&sent)).unwrap();
                let orig: vouch_core::Manifest = serde_json::from_value(payload).unwrap();
                assert_eq!(back, orig, "{}", f.display());
            }
            checked += 1;
        }
    }
    assert!(checked >= 150, "only {checked} declare payloads found");
}
