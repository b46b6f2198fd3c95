#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The crash-point sweep (issue: approvals and the ledger): every irreversible provider ×
//! every crash point. The real `vouch` process is killed at the point, restarted, and the
//! run is approved or resumed as needed; effects are counted at the provider's side.
//! Required everywhere: at most one effect per ledger key, no lost approval card, one
//! receipt per run, and `unknown` — never a claim — where the host cannot know.
//! The matrix seen is written to target/reliability-matrix.md (copied into docs/reliability.md).

mod support;

use serde_json::{json, Value};
use support::{Home, Receiver, SmtpSink};

const POINTS: &[&str] = &[
    "none",
    "approval_requested",
    "approval_granted",
    "ledger_intent",
    "attempt_started",
    "provider_effect",
    "evidence",
    "terminal",
];

struct Provider {
    name: &'static str,
    destination: Value,
    config: String,
    payload: Value,
}

fn effects(
    name: &str,
    smtp: &SmtpSink,
    hook: &Receiver,
    idem: &Receiver,
    pay: &Receiver,
    home: &Home,
) -> usize {
    match name {
        "email" => smtp.count(),
        "webhook" => hook.applied(),
        "webhook (idempotent)" => idem.applied(),
        "payment" => pay.applied(),
        "calendar (attendees)" => std::fs::read_dir(home.dir.join("cal"))
            .map(|r| r.count())
            .unwrap_or(0),
        _ => unreachable!(),
    }
}

#[test]
fn every_irreversible_provider_at_every_crash_point() {
    let tmp = tempfile::tempdir().unwrap();
    let mut rows = vec![
        "| provider | crash after | final status | effects at the provider | runs | receipts |"
            .to_string(),
        "|---|---|---|---|---|---|".to_string(),
    ];
    let mut failures = vec![];
    for provider_name in [
        "email",
        "webhook",
        "webhook (idempotent)",
        "calendar (attendees)",
        "payment",
    ] {
        for point in POINTS {
            // Fresh providers per case so counts are per case.
            let smtp = SmtpSink::start(
                &tmp.path()
                    .join(format!("mail-{}-{point}", provider_name.replace(' ', "_"))),
            );
            let hook = Receiver::start(false);
            let idem = Receiver::start(true);
            let pay = Receiver::start(true);
            let p = match provider_name {
                "email" => Provider { name: "email", destination: json!({"kind": "email", "address": "cfo@example.com"}), config: format!("[email]\nhost = \"127.0.0.1\"\nport = {}\nfrom = \"a@example.com\"\ntls = \"none\"\n", smtp.port), payload: json!({"to": "cfo@example.com", "subject": "Q4", "body": "numbers"}) },
                "webhook" => Provider { name: "webhook", destination: json!({"kind": "webhook", "address": hook.url}), config: String::new(), payload: json!({"text": "posted"}) },
                "webhook (idempotent)" => Provider { name: "webhook (idempotent)", destination: json!({"kind": "webhook", "address": idem.url}), config: "[webhook]\nidempotent = [\"webhook:*\"]\n".into(), payload: json!({"text": "posted"}) },
                "calendar (attendees)" => Provider { name: "calendar (attendees)", destination: json!({"kind": "calendar", "address": "work"}), config: "[calendar]\ndir = \"cal\"\n".into(), payload: json!({"title": "Board review", "start": "2026-12-10T09:00", "end": "2026-12-10T10:00", "tz": "UTC", "attendees": ["cfo@example.com"]}) },
                _ => Provider { name: "payment", destination: json!({"kind": "payment", "address": "acct:ACME-42"}), config: format!("[payment]\nurl = \"{}\"\nidempotent = true\n", pay.url), payload: json!({"amount": "120.00", "currency": "EUR"}) },
            };
            let home = Home::new(&p.config);
            let mut item = json!({"id": "d1", "verb": if p.name.starts_with("calendar") { "schedule" } else { "send" }, "destination": p.destination});
            if p.name.starts_with("calendar") {
                item["attendees"] = json!(["cfo@example.com"]);
            }
            let script = home.script(&json!([
                {"declare": {"deliveries": [item]}},
                {"deliver": "d1", "payload": p.payload},
                {"final": "Done — all sent and paid."}
            ]));
            let crash_in_run = *point == "approval_requested";
            let env_run: Vec<(&str, &str)> = if crash_in_run {
                vec![("VOUCH_CRASH_AFTER", point)]
            } else {
                vec![]
            };
            let out = home.vouch(
                &["run", "Do the irreversible thing", "--script", &script],
                &env_run,
            );
            let case = format!("{} × {point}", p.name);
            if crash_in_run && out.status.code().is_some() {
                failures.push(format!("{case}: run was not killed"));
            }
            let cards = home.json(&["approvals"]);
            let Some(card) = cards.as_array().and_then(|c| c.first()).cloned() else {
                failures.push(format!("{case}: the approval card was lost"));
                continue;
            };
            let run = card["run"].as_str().unwrap().to_string();
            let hash = card["payload_hash"].as_str().unwrap().to_string();
            let env_approve: Vec<(&str, &str)> = if crash_in_run || *point == "none" {
                vec![]
            } else {
                vec![("VOUCH_CRASH_AFTER", point)]
            };
            let out = home.vouch(&["approve", &run, "d1", "--hash", &hash], &env_approve);
            if !env_approve.is_empty() && out.status.code().is_some() {
                failures.push(format!(
                    "{case}: approve was not killed: {}",
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
            // Restart (start-up reconciliation), then resume whatever is left undone.
            let show = home.json(&["runs", "show", &run]);
            let status = show["deliveries"][0]["status"]
                .as_str()
                .unwrap_or("")
                .to_string();
            if show["run"]["state"] == "ended"
                && !["verified", "unknown", "unconfirmed"].contains(&status.as_str())
            {
                home.vouch(&["resume", &run], &[]);
            }
            let runs = home.json(&["runs", "list"]);
            let runs = runs.as_array().unwrap();
            let last = &runs[0];
            let last_status = home.json(&["runs", "show", last["id"].as_str().unwrap()])
                ["deliveries"][0]["status"]
                .as_str()
                .unwrap_or("")
                .to_string();
            let n = effects(p.name, &smtp, &hook, &idem, &pay, &home);
            let mut receipts = 0;
            for r in runs {
                let id = r["id"].as_str().unwrap();
                let text = home.json(&["receipt", id])["receipt"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                if text.starts_with("Receipt") {
                    receipts += 1;
                }
                let st = home.json(&["runs", "show", id])["deliveries"][0]["status"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                let claims = ["Sent to", "Posted to", "Paid to", "Scheduled on"]
                    .iter()
                    .any(|w| text.contains(w));
                if claims && st != "verified" {
                    failures.push(format!("{case}: run {id} claims while {st}"));
                }
                if st == "verified" && n == 0 {
                    failures.push(format!(
                        "{case}: run {id} verified with no effect at the provider"
                    ));
                }
            }
            if n > 1 {
                failures.push(format!("{case}: {n} effects at the provider"));
            }
            if receipts != runs.len() {
                failures.push(format!(
                    "{case}: {} runs but {receipts} receipts",
                    runs.len()
                ));
            }
            if last_status != "verified" && last_status != "unknown" {
                failures.push(format!(
                    "{case}: ended {last_status}, expected verified or unknown"
                ));
            }
            if !home.vouch(&["journal", "verify"], &[]).status.success() {
                failures.push(format!("{case}: journal verify failed"));
            }
            rows.push(format!(
                "| {} | {point} | {last_status} | {n} | {} | {receipts} |",
                p.name,
                runs.len()
            ));
        }
    }
    let table = rows.join("\n") + "\n";
    let out =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/reliability-matrix.md");
    let _ = std::fs::write(out, &table);
    assert!(failures.is_empty(), "{}\n\n{table}", failures.join("\n"));
}
