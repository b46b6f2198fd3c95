//! Who acts (contract §17.1.1): every API token has one scope, and every decision names the
//! principal that took it. Pure data: which route or tool a scope may use is the server's
//! table (`vouch_server::auth::ROUTES`), the words here are what is stored and journaled.

use serde::{Deserialize, Serialize};
use std::fmt;

/// What a token may do. A worker never decides a card; a reader only reads; an admin manages
/// tokens and identities and nothing else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// The person: decide (approve, deny, edit, answer), cancel, resume, offer, read.
    Person,
    /// An agent worker bound to one identity: claim, heartbeat, submit, fail, abort,
    /// artifacts, read tasks, MCP.
    Worker,
    /// GET routes, event streams, `/metrics`.
    Reader,
    /// Tokens and identities.
    Admin,
}

impl Scope {
    pub const ALL: [Scope; 4] = [Scope::Person, Scope::Worker, Scope::Reader, Scope::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Person => "person",
            Scope::Worker => "worker",
            Scope::Reader => "reader",
            Scope::Admin => "admin",
        }
    }

    pub fn parse(s: &str) -> Option<Scope> {
        Scope::ALL.into_iter().find(|x| x.as_str() == s)
    }
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Who took a decision: a token (its name and scope) or the local user at the command line.
/// Journaled with each decision and named by cards and receipts.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Principal {
    /// The token's name, or the local user's login name.
    pub name: String,
    pub scope: Scope,
    /// How the decision came: `cli`, `http`, `console`, `mcp`.
    pub via: String,
}

impl Principal {
    /// The person at this machine's command line (`$USER`, else `local`).
    pub fn local_user(login: Option<&str>) -> Principal {
        let name = login
            .map(str::trim)
            .filter(|l| !l.is_empty() && l.len() <= 64 && !l.chars().any(char::is_control))
            .unwrap_or("local");
        Principal {
            name: name.to_string(),
            scope: Scope::Person,
            via: "cli".into(),
        }
    }

    /// "laptop (person token, console)" or "alice (local user)": how people read it.
    pub fn describe(&self) -> String {
        if self.via == "cli" {
            format!("{} (local user)", crate::escape_line(&self.name))
        } else {
            format!(
                "{} ({} token, {})",
                crate::escape_line(&self.name),
                self.scope,
                crate::escape_line(&self.via)
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scopes_round_trip_and_unknown_is_none() {
        for s in Scope::ALL {
            assert_eq!(Scope::parse(s.as_str()), Some(s));
        }
        assert_eq!(Scope::parse("root"), None);
        assert_eq!(Scope::parse("Person"), None);
    }

    #[test]
    fn local_user_is_bounded_and_described() {
        assert_eq!(Principal::local_user(None).name, "local");
        assert_eq!(Principal::local_user(Some("  ")).name, "local");
        assert_eq!(Principal::local_user(Some("a\u{1b}b")).name, "local");
        assert_eq!(
            Principal::local_user(Some("alice")).describe(),
            "alice (local user)"
        );
        let t = Principal {
            name: "laptop".into(),
            scope: Scope::Person,
            via: "console".into(),
        };
        assert_eq!(t.describe(), "laptop (person token, console)");
    }
}
