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
