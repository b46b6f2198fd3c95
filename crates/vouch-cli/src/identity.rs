//! `vouch identity new NAME` and `vouch identity list` (§13.6). The work is done by
//! `vouch-identity`; this module only parses, calls and prints.

use crate::{bad, home};
use anyhow::{anyhow, Result};
use clap::Subcommand;
use serde_json::json;
use std::path::Path;
use vouch_identity::{IdentityError, KeyDir};
use vouch_store::StoreError;

#[derive(Subcommand)]
pub enum IdentityCmd {
    /// Make a new Ed25519 identity: key file (0600) in the home, public key in the store.
    New { name: String },
    /// Every identity the store knows, and whether this home holds its key file.
    List,
}

pub fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

/// Errors the person can fix (a name, a file, a mismatch) are bad input (exit 2).
pub fn identity_err(e: IdentityError) -> anyhow::Error {
    match e {
        IdentityError::InvalidName(_)
        | IdentityError::Reserved
        | IdentityError::Exists { .. }
        | IdentityError::NotFound { .. }
        | IdentityError::KeyFile { .. }
        | IdentityError::KeyMismatch { .. }
        | IdentityError::Store(StoreError::Conflict(_) | StoreError::NotFound { .. }) => {
            bad(e.to_string())
        }
        other => anyhow!(other),
    }
}

pub fn run(dir: &Path, cmd: IdentityCmd, json: bool) -> Result<i32> {
    let (_, store) = home::open_stores(dir)?;
    let keys = KeyDir::in_home(dir);
    match cmd {
        IdentityCmd::New { name } => {
            let id = vouch_identity::create(&keys, store.as_ref(), &name, now_ms())
                .map_err(identity_err)?;
            let path = keys.path(id.name());
            if json {
                outln!(
                    "{}",
                    json!({"name": id.name(), "public_key": id.public_key(), "key_file": path})
                );
            } else {
                outln!("{}", id.public_key());
                errln!(
                    "Identity `{}` created; its secret key is in {} (mode 0600, never leaves this machine).",
                    id.name(),
                    path.display()
                );
            }
            Ok(0)
        }
        IdentityCmd::List => {
            let records = store.identities()?;
            let local = keys.names().map_err(identity_err)?;
            let mut rows = vec![];
            for r in &records {
                let key_file = local.contains(&r.name).then(|| keys.path(&r.name));
                // A key file here whose key is not the stored one is said, not hidden.
                let matches = key_file
                    .as_ref()
                    .map(|_| keys.load(&r.name).map(|id| id.public_key() == r.public_key));
                let state = match &matches {
                    None => "no key here",
                    Some(Ok(true)) => "key here",
                    Some(Ok(false)) => "KEY FILE DOES NOT MATCH",
                    Some(Err(_)) => "KEY FILE UNREADABLE",
                };
                rows.push(json!({
                    "name": r.name, "public_key": r.public_key, "created_ms": r.created_ms,
                    "key_file": key_file, "state": state,
                }));
            }
            for name in local
                .iter()
                .filter(|n| !records.iter().any(|r| &r.name == *n))
            {
                rows.push(json!({
                    "name": name, "public_key": null, "created_ms": null,
                    "key_file": keys.path(name), "state": "not in the store",
                }));
            }
            if json {
                outln!("{}", serde_json::Value::Array(rows));
            } else if rows.is_empty() {
                outln!("No identities yet. Make one with `vouch identity new NAME`.");
            } else {
                outln!("{:<24} {:<73} STATE", "NAME", "PUBLIC KEY");
                for r in &rows {
                    outln!(
                        "{:<24} {:<73} {}",
                        r["name"].as_str().unwrap_or(""),
                        r["public_key"].as_str().unwrap_or("—"),
                        r["state"].as_str().unwrap_or("")
                    );
                }
            }
            Ok(0)
        }
    }
}

/// Text from a diary body (a model's, a worker's) as people may see it: control and
/// bidirectional-override characters are shown escaped, never interpreted by the terminal.
pub fn shown(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        let bidi = matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}');
        if c.is_control() || bidi {
            out.push_str(&c.escape_unicode().to_string());
        } else {
            out.push(c);
        }
    }
    out
}

fn when(ms: i64) -> String {
    let secs = ms.div_euclid(1000);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// `vouch diary NAME [--verify | --add TEXT]`.
pub fn diary(dir: &Path, name: &str, verify: bool, add: Option<String>, json: bool) -> Result<i32> {
    let (_, store) = home::open_stores(dir)?;
    vouch_identity::validate_name(name).map_err(identity_err)?;
    let record = store.identity(name)?.ok_or_else(|| {
        bad(format!(
            "no identity `{name}` in the store; see `vouch identity list`, or make it with `vouch identity new {name}`"
        ))
    })?;
    if let Some(text) = add {
        let keys = KeyDir::in_home(dir);
        let id = vouch_identity::load(&keys, store.as_ref(), name).map_err(identity_err)?;
        let entry =
            vouch_identity::diary::append(store.as_ref(), &id, &json!({"text": text}), now_ms())
                .map_err(identity_err)?;
        if json {
            outln!("{}", serde_json::to_string(&entry)?);
        } else {
            outln!(
                "Entry #{} added to the diary of `{name}`, signed.",
                entry.seq
            );
        }
        return Ok(0);
    }
    let entries = store.diary(name)?;
    if verify {
        let result = vouch_identity::diary::verify(name, &record.public_key, &entries);
        if json {
            let broken = result.as_ref().err();
            outln!(
                "{}",
                json!({"identity": name, "public_key": record.public_key, "entries": entries.len(), "intact": broken.is_none(), "break": broken})
            );
        }
        return Ok(match result {
            Ok(n) => {
                if !json {
                    outln!("Diary of `{name}` intact: {n} entries, every hash chains and every signature verifies with {}.", record.public_key);
                }
                0
            }
            Err(b) => {
                if !json {
                    outln!("BROKEN: diary of `{name}` entry #{}: {}", b.seq, b.reason);
                    outln!("The diary was changed outside vouch; entries from #{} on cannot be trusted. Keep a copy of the store before doing anything else.", b.seq);
                }
                1
            }
        });
    }
    if json {
        outln!("{}", serde_json::to_string(&entries)?);
    } else if entries.is_empty() {
        outln!("The diary of `{name}` is empty. Add to it with `vouch diary {name} --add TEXT`.");
    } else {
        for e in &entries {
            let text = match e.body.get("text").and_then(serde_json::Value::as_str) {
                Some(t) if e.body.as_object().is_some_and(|o| o.len() == 1) => t.to_string(),
                _ => e.body.to_string(),
            };
            outln!("#{:<5} {}  {}", e.seq, when(e.at_ms), shown(&text));
        }
        outln!(
            "{} entries. Check every signature with `vouch diary {name} --verify`.",
            entries.len()
        );
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shown_escapes_terminal_and_bidi_controls() {
        assert_eq!(shown("ok é"), "ok é");
        assert_eq!(shown("a\u{1b}[2Jb"), "a\\u{1b}[2Jb");
        assert_eq!(shown("x\u{202e}y\n"), "x\\u{202e}y\\u{a}");
    }

    #[test]
    fn dates() {
        assert_eq!(when(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(when(1_796_320_200_000), "2026-12-03 17:50:00 UTC");
    }
}
