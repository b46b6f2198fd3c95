//! The scripted model: replays the `script` turns of scenarios.md, deterministically.

use crate::model::{ChatMessage, Model, ModelError, ModelTurn, ToolCall, ToolSpec, Usage};
use serde_json::{json, Value};
use std::collections::{BTreeSet, HashMap};

pub struct ScriptedModel {
    turns: Vec<Value>,
    next: usize,
    verbs: HashMap<String, String>,
    /// Indices of `tool` turns marked `fails: true`.
    pub failing: BTreeSet<usize>,
}

impl ScriptedModel {
    /// `start` is the first turn to play (a resumed run skips the turns already done).
    pub fn new(turns: Vec<Value>, start: usize) -> Self {
        let mut verbs = HashMap::new();
        let mut failing = BTreeSet::new();
        for (i, t) in turns.iter().enumerate() {
            if let Some(ds) = t.pointer("/declare/deliveries").and_then(|d| d.as_array()) {
                for d in ds {
                    if let (Some(id), Some(verb)) = (
                        d.get("id").and_then(Value::as_str),
                        d.get("verb").and_then(Value::as_str),
                    ) {
                        verbs
                            .entry(id.to_string())
                            .or_insert_with(|| verb.to_string());
                    }
                }
            }
            if t.get("tool").is_some() && t.get("fails").and_then(Value::as_bool) == Some(true) {
                failing.insert(i);
            }
        }
        ScriptedModel {
            turns,
            next: start,
            verbs,
            failing,
        }
    }

    pub fn len(&self) -> usize {
        self.turns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.turns.is_empty()
    }

    /// The latest declaration of delivery `id` before turn `i`, as the core reads it.
    fn declared(&self, i: usize, id: &str) -> Option<vouch_core::Delivery> {
        let d = self.turns[..i]
            .iter()
            .rev()
            .filter_map(|t| t.pointer("/declare/deliveries").and_then(|d| d.as_array()))
            .flat_map(|ds| ds.iter().rev())
            .find(|d| d.get("id").and_then(Value::as_str) == Some(id))?;
        serde_json::from_value(crate::schemas::without_nulls(d)).ok()
    }

    /// The call id the scripted model gives turn `i`'s tool call.
    pub fn call_id(i: usize) -> String {
        format!("call_{i}")
    }
}

fn usage_for(v: &Value) -> Usage {
    // Deterministic stand-in for token counts: about four bytes a token (of the turn's JSON
    // text, counted as it is written rather than built).
    let n = json_len(v);
    Usage {
        prompt_tokens: 40 + n / 2,
        completion_tokens: n.div_ceil(4),
    }
}

/// The length of `v`'s JSON text (`v.to_string().len()`), without building the text.
fn json_len(v: &Value) -> u64 {
    struct Count(u64);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len() as u64;
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut c = Count(0);
    // Writing a `Value` to a sink that never fails cannot fail.
    let _ = serde_json::to_writer(&mut c, v);
    c.0
}

impl Model for ScriptedModel {
    fn next_turn(
        &mut self,
        _messages: &[ChatMessage],
        _tools: &[ToolSpec],
    ) -> Result<ModelTurn, ModelError> {
        let i = self.next;
        if i >= self.turns.len() {
            return Err(ModelError::ScriptExhausted);
        }
        self.next += 1;
        // The turn is read where it is, not copied.
        let t = &self.turns[i];
        let call = |name: &str, args: &Value| ModelTurn {
            content: None,
            tool_calls: vec![ToolCall {
                id: Self::call_id(i),
                name: name.to_string(),
                arguments: args.to_string(),
            }],
            usage: usage_for(t),
        };
        if let Some(m) = t.get("declare") {
            return Ok(call("declare", m));
        }
        if let Some(id) = t.get("deliver").and_then(Value::as_str) {
            let payload = t.get("payload").cloned().unwrap_or(json!({}));
            // The verb of the latest declaration of this id before this turn.
            let tool = self.turns[..i]
                .iter()
                .rev()
                .filter_map(|t| t.pointer("/declare/deliveries").and_then(|d| d.as_array()))
                .flat_map(|ds| ds.iter().rev())
                .find(|d| d.get("id").and_then(Value::as_str) == Some(id))
                .and_then(|d| d.get("verb").and_then(Value::as_str).map(String::from))
                .or_else(|| self.verbs.get(id).cloned())
                .unwrap_or_else(|| "deliver".to_string());
            let payload = match self.declared(i, id) {
                Some(d) => crate::schemas::expand_script_text(&d, &payload),
                None => payload,
            };
            return Ok(call(&tool, &json!({"delivery": id, "payload": payload})));
        }
        if let Some(u) = t.get("undeclared") {
            let verb = u
                .get("verb")
                .and_then(Value::as_str)
                .unwrap_or("send")
                .to_string();
            let payload = t.get("payload").cloned().unwrap_or(json!({}));
            return Ok(call(
                &verb,
                &json!({"destination": u.get("destination").cloned().unwrap_or(Value::Null), "payload": payload}),
            ));
        }
        if let Some(name) = t.get("tool").and_then(Value::as_str) {
            return Ok(call(name, t.get("args").unwrap_or(&json!({}))));
        }
        if let Some(result) = t.get("submit") {
            // A task run submits its result (the implied `result` item, contract §13.1).
            let assessment = t.get("self_assessment").cloned().unwrap_or(Value::Null);
            return Ok(call(
                "submit",
                &json!({"result": result, "self_assessment": assessment}),
            ));
        }
        if let Some(q) = t.get("clarify").and_then(Value::as_str) {
            return Ok(call("clarify", &json!({"question": q})));
        }
        if let Some(text) = t.get("final").and_then(Value::as_str) {
            return Ok(ModelTurn {
                content: Some(text.to_string()),
                tool_calls: vec![],
                usage: usage_for(t),
            });
        }
        Err(ModelError::Protocol(format!(
            "script turn {i} is not a known turn: {t}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_len_is_the_texts_length() {
        for v in [
            json!(null),
            json!({}),
            json!({"deliver": "d1", "payload": {"text": "é \"q\"\n€😀"}, "n": [1.5, -3, 1e300]}),
        ] {
            assert_eq!(json_len(&v), v.to_string().len() as u64);
        }
    }
}
