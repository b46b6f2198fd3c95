//! Secrets by reference (`vouch.toml`'s credentials, a patch profile's keys): an environment
//! variable or a file, read when needed and never journaled. The host resolves them itself
//! (a patch attempt's egress keys), so the type lives here, not with the configuration.

use serde::Deserialize;
use std::path::PathBuf;

/// A secret by reference: `env = "NAME"` or `file = "/path"`.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretRef {
    pub env: Option<String>,
    pub file: Option<PathBuf>,
}

impl SecretRef {
    /// The secret, or why it is not available (naming the variable or file, not the value).
    pub fn resolve(&self) -> Result<String, String> {
        if let Some(name) = &self.env {
            return std::env::var(name).map_err(|_| format!("set the environment variable {name}"));
        }
        if let Some(path) = &self.file {
            use crate::bounded::{read_text, ReadError, SECRET_FILE_BYTES_MAX};
            return match read_text(path, "secret file", SECRET_FILE_BYTES_MAX) {
                Ok(s) => Ok(s.trim().to_string()),
                Err(e @ ReadError::TooLarge { .. }) => Err(e.to_string()),
                Err(ReadError::Io { source, .. }) => {
                    Err(format!("make {} readable ({source})", path.display()))
                }
            };
        }
        Err("give `env` or `file`".into())
    }
    /// Whether the secret is there to read, or the step that makes it so.
    pub fn present(&self) -> Result<(), String> {
        self.resolve().map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_file_is_read_only_to_the_limit() {
        let r = SecretRef {
            env: None,
            file: Some("/dev/zero".into()),
        };
        let e = r.resolve().unwrap_err();
        assert!(e.contains("/dev/zero") && e.contains("65536"), "{e}");
    }
}
