//! `vouch token new NAME | list | rm NAME`: API tokens for `vouch serve --http`. The secret is
//! printed once; the store keeps only its SHA-256.

use crate::{bad, home};
use anyhow::{anyhow, Result};
use clap::Subcommand;
use serde_json::json;
use std::path::Path;

#[derive(Subcommand)]
pub enum TokenCmd {
    /// Create a token; its secret is shown once (store it now).
    New {
        /// What the token is for, e.g. `laptop` or `ci` (unique in this home).
        name: String,
    },
    /// Token names and when they were made (never the secrets).
    List,
    /// Revoke a token.
    Rm {
        /// The token's name, as `vouch token list` shows it.
        name: String,
    },
}

pub fn run(dir: &Path, cmd: TokenCmd, json: bool) -> Result<i32> {
    let store = home::open_store(dir)?;
    match cmd {
        TokenCmd::New { name } => {
            if name.trim().is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
                return Err(bad(
                    "give the token a name of 1–200 printable characters, like `ci` or `laptop`",
                ));
            }
            let (secret, hash) = vouch_server::new_token().map_err(|e| anyhow!(e))?;
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_millis() as i64)
                .unwrap_or(0);
            store
                .put_token(&vouch_store::ApiToken {
                    name: name.clone(),
                    hash,
                    created_ms: now,
                })
                .map_err(|e| match e {
                    vouch_store::StoreError::Conflict(m) => bad(m),
                    other => anyhow!(other),
                })?;
            if json {
                outln!("{}", json!({"name": name, "token": secret}));
            } else {
                outln!("{secret}");
                errln!("Token `{name}` created. It is shown only this once: use it as `Authorization: Bearer {secret}`. Revoke it with `vouch token rm {name}`.");
            }
            Ok(0)
        }
        TokenCmd::List => {
            let all = store.tokens()?;
            if json {
                let rows: Vec<_> = all
                    .iter()
                    .map(|t| json!({"name": t.name, "created_ms": t.created_ms}))
                    .collect();
                outln!("{}", serde_json::Value::Array(rows));
            } else if all.is_empty() {
                outln!("No tokens. Create one with `vouch token new NAME`.");
            } else {
                for t in all {
                    outln!("{:<24} created {}", t.name, t.created_ms);
                }
            }
            Ok(0)
        }
        TokenCmd::Rm { name } => {
            if !store.remove_token(&name)? {
                return Err(bad(format!("no token `{name}`; see `vouch token list`")));
            }
            if !json {
                outln!("Token `{name}` revoked; requests with it now get 401.");
            }
            Ok(0)
        }
    }
}
