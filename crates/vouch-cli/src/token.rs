//! `vouch token new NAME [--scope S] [--identity ID] | list | rm NAME`: API tokens for
//! `vouch serve --http`. The secret is printed once; the store keeps only its SHA-256 and the
//! token's scope (contract §17.1.1).

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
        /// What it may do: `person` (decide, cancel, resume, offer, read), `worker` (claim
        /// and report as one identity; needs `--identity`), `reader` (read only), `admin`
        /// (tokens and identities). See README.md, "Scopes".
        #[arg(long, default_value = "person", value_parser = ["person", "worker", "reader", "admin"])]
        scope: String,
        /// The worker identity a `worker` token acts as (its claims and reports name it).
        #[arg(long)]
        identity: Option<String>,
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
        TokenCmd::New {
            name,
            scope,
            identity,
        } => {
            if name.trim().is_empty() || name.len() > 200 || name.chars().any(char::is_control) {
                return Err(bad(
                    "give the token a name of 1–200 printable characters, like `ci` or `laptop`",
                ));
            }
            let (scope, identity) = scope_of(&scope, identity)?;
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
                    scope,
                    identity: identity.clone(),
                })
                .map_err(|e| match e {
                    vouch_store::StoreError::Conflict(m) => bad(m),
                    other => anyhow!(other),
                })?;
            if json {
                outln!(
                    "{}",
                    json!({"name": name, "token": secret, "scope": scope, "identity": identity})
                );
            } else {
                outln!("{secret}");
                errln!("Token `{name}` ({scope}) created. It is shown only this once: use it as `Authorization: Bearer {secret}`. Revoke it with `vouch token rm {name}`.");
            }
            Ok(0)
        }
        TokenCmd::List => {
            let all = store.tokens()?;
            if json {
                let rows: Vec<_> = all
                    .iter()
                    .map(|t| json!({"name": t.name, "created_ms": t.created_ms, "scope": t.scope, "identity": t.identity}))
                    .collect();
                outln!("{}", serde_json::Value::Array(rows));
            } else if all.is_empty() {
                outln!("No tokens. Create one with `vouch token new NAME`.");
            } else {
                for t in all {
                    let who = match &t.identity {
                        Some(id) => format!("{} as {id}", t.scope),
                        None => t.scope.to_string(),
                    };
                    outln!("{:<24} {:<20} created {}", t.name, who, t.created_ms);
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

/// The scope word and identity, checked together: a worker token names exactly one valid
/// identity, and no other scope names one.
fn scope_of(scope: &str, identity: Option<String>) -> Result<(vouch_core::Scope, Option<String>)> {
    let scope = vouch_core::Scope::parse(scope).ok_or_else(|| {
        bad(format!(
            "unknown scope `{scope}`: use person, worker, reader or admin"
        ))
    })?;
    match (scope, identity) {
        (vouch_core::Scope::Worker, Some(id)) => {
            vouch_identity::validate_name(&id).map_err(|e| bad(e.to_string()))?;
            Ok((scope, Some(id)))
        }
        (vouch_core::Scope::Worker, None) => Err(bad(
            "a worker token acts as one identity: give `--identity NAME` (see `vouch identity list`)",
        )),
        (_, Some(_)) => Err(bad(
            "only a worker token names an identity; drop `--identity` or use `--scope worker`",
        )),
        (s, None) => Ok((s, None)),
    }
}
