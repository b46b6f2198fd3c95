//! `vouch identity new NAME`, `add`, `show` and `list` (§13.6). The work is done by
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
    New {
        /// The identity's name: 1–64 of a-z, 0-9, `.`, `_`, `-`.
        name: String,
    },
    /// Every identity the store knows, and whether this home holds its key file.
    List,
    /// Register a worker's public key made where the worker runs (`vouch identity new NAME`
    /// in its own home, then `vouch identity show NAME --public-key` there): only the public
    /// half is recorded; the secret never moves.
    Add {
        /// The identity's name: 1–64 of a-z, 0-9, `.`, `_`, `-`.
        name: String,
        /// `ed25519:` and 64 lowercase hex digits, or just the 64 hex digits.
        #[arg(long = "public-key", value_name = "KEY")]
        public_key: String,
    },
    /// Show an identity: its public key, and whether this home holds its key file.
    Show {
        /// The identity's name (as `vouch identity list` shows it).
        name: String,
        /// Print only the public key (to register it on a host with `vouch identity add` or
        /// `POST /api/identities`).
        #[arg(long = "public-key")]
        public_key: bool,
    },
    /// Print this host's public key (created on first use), the key to pin with
    /// `vouch verify FILE --host-key KEY`.
    Host,
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
        | IdentityError::BadSignature { .. }
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
        IdentityCmd::Host => {
            let host =
                vouch_identity::host(&keys, store.as_ref(), now_ms()).map_err(identity_err)?;
            if json {
                outln!(
                    "{}",
                    json!({"name": host.name(), "public_key": host.public_key()})
                );
            } else {
                outln!("{}", host.public_key());
            }
            Ok(0)
        }
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
        IdentityCmd::Add { name, public_key } => {
            let r = vouch_identity::enrol(store.as_ref(), &name, &public_key, now_ms()).map_err(
                |e| match e {
                    vouch_identity::EnrolError::Store(e) => anyhow!(e),
                    other => bad(other.to_string()),
                },
            )?;
            if json {
                outln!("{}", serde_json::to_string(&r)?);
            } else {
                outln!("{}", r.public_key);
                errln!(
                    "Identity `{}` registered with its public key only; its secret key stays where it was made.",
                    r.name
                );
            }
            Ok(0)
        }
        IdentityCmd::Show { name, public_key } => {
            show(&keys, store.as_ref(), &name, public_key, json)
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

/// `vouch identity show NAME [--public-key]`: the store's record, else this home's key file
/// (a worker's home may hold a key no store here knows yet).
fn show(
    keys: &KeyDir,
    store: &dyn vouch_store::IdentityStore,
    name: &str,
    only_key: bool,
    json: bool,
) -> Result<i32> {
    vouch_identity::validate_name(name).map_err(identity_err)?;
    let record = store.identity(name)?;
    let file_key = if keys.exists(name) {
        Some(keys.load(name).map_err(identity_err)?.public_key())
    } else {
        None
    };
    let Some(key) = record
        .as_ref()
        .map(|r| r.public_key.clone())
        .or_else(|| file_key.clone())
    else {
        return Err(bad(format!(
            "no identity `{name}` here (not in the store, no key file {}); make it with `vouch identity new {name}`",
            keys.path(name).display()
        )));
    };
    if only_key {
        outln!("{key}");
    } else if json {
        outln!(
            "{}",
            json!({"name": name, "public_key": key, "in_store": record.is_some(), "key_file": file_key.is_some().then(|| keys.path(name))})
        );
    } else {
        outln!("{name}  {key}");
        outln!(
            "{}; {}",
            if record.is_some() {
                "in the store"
            } else {
                "not in the store"
            },
            if file_key.is_some() {
                "its key file is in this home"
            } else {
                "no key file in this home"
            }
        );
    }
    Ok(0)
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

/// `vouch receipt RUN --signed` (§16): the statement signed by the host's own identity
/// (created in the home on first use). Always JSON: it is the file format `vouch verify` reads;
/// `--json` prints it on one line.
pub fn signed_receipt(dir: &Path, run: &str, json: bool) -> Result<i32> {
    let (store, ids) = home::open_stores(dir)?;
    let rec = crate::cmd::runs::find_run(store.as_ref(), run)?;
    let journal = store.journal(&rec.id)?;
    if !journal
        .iter()
        .any(|e| e.kind == vouch_store::EventKind::Terminal)
    {
        return Err(bad(format!(
            "run {} has not ended yet ({}); a signed receipt exists only once it has its terminal record — see `vouch approvals`",
            rec.id,
            rec.state.as_str()
        )));
    }
    let host = vouch_identity::host(&KeyDir::in_home(dir), ids.as_ref(), now_ms())
        .map_err(identity_err)?;
    let text = store.receipt(&rec.id)?;
    let file = vouch_identity::receipt::sign(&host, &rec.id, &journal, text.as_deref())
        .map_err(identity_err)?;
    if json {
        outln!("{}", serde_json::to_string(&file)?);
    } else {
        outln!("{}", serde_json::to_string_pretty(&file)?);
    }
    Ok(0)
}

/// `vouch verify FILE [--offline]` (§16): the signature alone, then — when this home's store
/// is there and knows the run — the journal chain, the head and every field, and that the
/// signing key is this host's. Exit 0 verified, 1 a check failed, 2 not a receipt.
pub fn verify(
    dir: &Path,
    file: &Path,
    offline: bool,
    host_key: Option<&str>,
    json: bool,
) -> Result<i32> {
    use vouch_identity::receipt::{self, Check};
    let pinned = host_key.map(pinned_key).transpose()?;
    let text = vouch_runtime::bounded::read_text(file, "receipt", receipt::FILE_BYTES_MAX)
        .map_err(|e| bad(e.to_string()))?;
    let r = receipt::parse(&text).map_err(|e| bad(format!("{}: {e}", file.display())))?;
    let run = r.run().unwrap_or_default().to_string();
    let mut checks = vec![receipt::check_offline(&r)];
    if let Some(pin) = &pinned {
        checks.push(pin_check(r.host_key().unwrap_or_default(), pin));
    }
    let mut scope = "offline: the signature only";
    if !offline {
        match home::open_stores(dir) {
            Err(_) => scope = "offline: no vouch home here, so the signature only",
            Ok((store, ids)) => match store.run(&run)? {
                None => scope = "offline: this home's store has no such run, so the signature only",
                Some(_) => {
                    scope = "with this home's store";
                    let journal = store.journal(&run)?;
                    let receipt_text = store.receipt(&run)?;
                    checks.extend(receipt::check_against_journal(
                        &r,
                        &journal,
                        receipt_text.as_deref(),
                    ));
                    let key = r.host_key().unwrap_or_default();
                    checks.push(match ids.identity(vouch_identity::HOST_IDENTITY)? {
                        Some(h) if h.public_key == key => Check {
                            check: "host key".into(),
                            ok: true,
                            detail: "the signing key is this host's identity".into(),
                        },
                        Some(h) => Check {
                            check: "host key".into(),
                            ok: false,
                            detail: format!("signed by {key}, but this host's key is {}", h.public_key),
                        },
                        None => Check {
                            check: "host key".into(),
                            ok: false,
                            detail: "this store has no host identity, so the key that signed it is not this host's".into(),
                        },
                    });
                }
            },
        }
    }
    let verified = checks.iter().all(|c| c.ok);
    // The signer is checked by a pin, or by this store's own host identity.
    let signer_checked = checks
        .iter()
        .any(|c| c.check == "pinned host key" || c.check == "host key");
    if json {
        outln!(
            "{}",
            json!({"file": file, "run": run, "verified": verified, "signer_checked": signer_checked, "scope": scope, "checks": checks})
        );
    } else {
        let outcome = r.statement["outcome"].as_str().unwrap_or("?");
        print_verdict(&checks, &run, outcome, scope, pinned.is_some());
    }
    Ok(if verified { 0 } else { 1 })
}

/// The checks and the verdict for people: `Verified` only when the signer was checked (by a
/// pin or by this store's host identity); an unchecked signer is said, with how to pin it.
fn print_verdict(
    checks: &[vouch_identity::receipt::Check],
    run: &str,
    outcome: &str,
    scope: &str,
    pinned: bool,
) {
    for c in checks {
        let mark = if c.ok { "ok    " } else { "FAILED" };
        outln!("{mark} {}: {}", c.check, shown(&c.detail));
    }
    let verified = checks.iter().all(|c| c.ok);
    let signer_checked = checks
        .iter()
        .any(|c| c.check == "pinned host key" || c.check == "host key");
    let what = format!("run {} — {}", shown(run), shown(outcome));
    if verified && pinned {
        outln!("Verified: signed by the pinned host key ({scope}): {what}.");
    } else if verified && signer_checked {
        outln!("Verified ({scope}), signed by this host's key: {what}.");
    } else if verified {
        outln!("Unpinned ({scope}): signature valid, signer not checked: {what}. Anyone can sign with a fresh key; pin the host's key with `--host-key KEY` (the host prints it with `vouch identity host`).");
    } else {
        outln!(
            "NOT verified ({scope}): do not trust this receipt for run {}.",
            shown(run)
        );
    }
}

/// `--host-key KEY|FILE`: a public key as `vouch identity host` prints it, or a file holding
/// one (its text, or that command's `--json` object). Anything else is bad input (exit 2).
fn pinned_key(value: &str) -> Result<String> {
    if let Ok(k) = vouch_identity::parse_public_key(value.trim()) {
        return Ok(vouch_identity::public_key_string(&k));
    }
    let shown_value = shown(&value.chars().take(80).collect::<String>());
    let path = Path::new(value);
    if !path.is_file() {
        return Err(bad(format!(
            "--host-key `{shown_value}` is neither a public key (`ed25519:` + 64 lowercase hex digits, as `vouch identity host` prints it) nor a file"
        )));
    }
    let text = vouch_runtime::bounded::read_text(path, "host key file", 64 << 10)
        .map_err(|e| bad(format!("--host-key: {e}")))?;
    let text = text.trim();
    let key = serde_json::from_str::<serde_json::Value>(text)
        .ok()
        .and_then(|v| v.get("public_key")?.as_str().map(str::to_string))
        .unwrap_or_else(|| text.to_string());
    vouch_identity::parse_public_key(&key)
        .map(|k| vouch_identity::public_key_string(&k))
        .map_err(|_| {
            bad(format!(
                "--host-key file {} does not hold a public key (`ed25519:` + 64 lowercase hex digits, as `vouch identity host` prints it)",
                path.display()
            ))
        })
}

/// The receipt's signer is the pinned key (its signature is checked on its own).
fn pin_check(signer: &str, pin: &str) -> vouch_identity::receipt::Check {
    use vouch_identity::receipt::Check;
    let ok = signer == pin;
    Check {
        check: "pinned host key".into(),
        ok,
        detail: if ok {
            format!("signed by the pinned key {pin}")
        } else {
            format!(
                "signed by {}, not by the pinned host key {pin}: this receipt is not from that host",
                shown(&signer.chars().take(80).collect::<String>())
            )
        },
    }
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
