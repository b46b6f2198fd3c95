//! What the scripted model of a simulated run says: a manifest of one to three deliveries of
//! every kind, their payloads, sometimes a question first, an act it never declared, or a
//! final text that claims more than happened (the receipt must not follow it).

use crate::rng::Rng;
use crate::world::DEDUP_WEBHOOK;
use serde_json::{json, Value};

/// One delivery of a story's manifest.
fn delivery(rng: &mut Rng, n: usize, tag: &str, autonomous: bool) -> Value {
    let id = format!("d{n}");
    let choice = if autonomous {
        // Autonomous runs mostly post to the trusted, deduplicating receiver (R8).
        *rng.pick(&[0u64, 1, 3, 3, 3, 4]).unwrap_or(&3)
    } else {
        rng.below(7)
    };
    match choice {
        0 => json!({"id": id, "verb": "write",
            "destination": {"kind": "surface", "address": format!("sim/{tag}")}}),
        1 => json!({"id": id, "verb": "save",
            // A few names repeat, so a save sometimes overwrites (irreversible, R9).
            "destination": {"kind": "folder", "address": format!("Notes/n{}.md", rng.below(6))}}),
        2 => json!({"id": id, "verb": "send",
            "destination": {"kind": "email", "address": "team@example.com"}}),
        3 => json!({"id": id, "verb": "send",
            "destination": {"kind": "webhook", "address": format!("{DEDUP_WEBHOOK}{tag}")}}),
        4 => json!({"id": id, "verb": "send",
            "destination": {"kind": "webhook", "address": format!("https://hooks.example/{tag}")}}),
        5 => json!({"id": id, "verb": "send",
            "destination": {"kind": "payment", "address": "acct-42"}}),
        _ => json!({"id": id, "verb": "schedule", "attendees": ["ana@example.com"],
            "destination": {"kind": "calendar", "address": "team"}}),
    }
}

/// The script of one run. `tag` makes its payloads its own, so that an effect names its run.
pub fn script(rng: &mut Rng, tag: &str, autonomous: bool, clarify: bool) -> Value {
    let n = 1 + rng.below(3) as usize;
    let deliveries: Vec<Value> = (1..=n).map(|i| delivery(rng, i, tag, autonomous)).collect();
    let mut manifest = json!({"deliveries": deliveries});
    if n >= 2 && rng.chance(30) {
        manifest["order"] = json!([{"before": "d1", "after": "d2"}]);
    }
    let mut turns = vec![];
    if clarify {
        turns.push(json!({"clarify": "Which week do you mean?"}));
    }
    turns.push(json!({"declare": manifest}));
    if rng.chance(5) {
        turns.push(json!({"undeclared": {"verb": "send",
            "destination": {"kind": "email", "address": "boss@example.com"}},
            "payload": {"text": "not declared"}}));
    }
    for i in 1..=n {
        if rng.chance(4) {
            continue; // the model forgets one: the receipt must say so
        }
        turns.push(json!({"deliver": format!("d{i}"),
            "payload": {"text": format!("{tag} item {i}")}}));
    }
    turns.push(json!({"final": "All sent, saved and paid."}));
    json!({"kind": "script", "turns": turns})
}

/// A task attempt's script: it declares nothing or one act, submits a result, ends.
pub fn task_script(rng: &mut Rng, tag: &str) -> Value {
    let mut turns = vec![];
    if rng.chance(30) {
        let d = delivery(rng, 1, tag, true);
        turns.push(json!({"declare": {"deliveries": [d]}}));
        turns.push(json!({"deliver": "d1", "payload": {"text": format!("{tag} task item")}}));
    } else {
        turns.push(json!({"declare": {"deliveries": []}}));
    }
    if !rng.chance(10) {
        turns.push(json!({"submit": {"summary": format!("{tag} done")}}));
    }
    turns.push(json!({"final": "Done."}));
    json!({"kind": "script", "turns": turns})
}
