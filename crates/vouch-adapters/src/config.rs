//! `vouch.toml`: the capability registry's inputs (§4) — providers and their connection
//! settings, credentials by reference (an environment variable or a file, never the secret
//! itself, never journaled), per-destination overrides and trusted-automation opt-ins.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use vouch_core::{Capability, Context, Destination, DestinationKind, Verb};
use vouch_runtime::capability::{pattern_matches, CapabilityAnswer, CapabilityRegistry};
use vouch_runtime::secret::SecretRef;

/// Bytes `vouch.toml` holds at most.
pub const CONFIG_BYTES_MAX: u64 = 1 << 20;

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    #[serde(default)]
    pub folder: Option<FolderConfig>,
    #[serde(default)]
    pub email: Option<EmailConfig>,
    #[serde(default)]
    pub webhook: Option<WebhookConfig>,
    #[serde(default)]
    pub calendar: Option<CalendarConfig>,
    #[serde(default)]
    pub payment: Option<PaymentConfig>,
    /// Destination pattern (`kind:address`, `*` wildcard) → capability level cap.
    #[serde(default)]
    pub capabilities: BTreeMap<String, Capability>,
    #[serde(default)]
    pub automation: Option<AutomationConfig>,
    #[serde(default)]
    pub notify: Option<NotifyConfig>,
    #[serde(default)]
    pub model: Option<ModelConfig>,
    #[serde(default)]
    pub storage: Option<StorageConfig>,
    #[serde(default)]
    pub http: Option<HttpConfig>,
}

/// `[http]`: `vouch serve --http`'s settings. `allowed_hosts` adds `Host` names the server
/// answers to beside loopback's (as `--allow-host`, contract §17.1).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpConfig {
    #[serde(default)]
    pub allowed_hosts: Vec<String>,
}

/// `[storage]`: where artifacts and pinned task conversations live (§13.5). Absent, they live
/// in the home (`HOME/objects`); `artifacts = "s3://bucket/prefix"` puts them in an
/// S3-compatible bucket that every host of one store shares. Keys by reference only.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StorageConfig {
    /// `s3://bucket` or `s3://bucket/prefix`.
    pub artifacts: Option<String>,
    /// An S3-compatible server (`https://…`, or `http://` on loopback with `allow_http`).
    pub endpoint: Option<String>,
    pub region: Option<String>,
    pub access_key_id: Option<SecretRef>,
    pub secret_access_key: Option<SecretRef>,
    #[serde(default)]
    pub allow_http: bool,
}

/// `[model]`: the OpenAI-compatible model profile runs use (`VOUCH_MODEL_*` override it). A
/// run records the profile it started with, its name and non-secret settings, so any process
/// of the home continues it; the key is named by reference, never recorded.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    /// The profile's name, recorded with each run (default `default`).
    pub name: Option<String>,
    pub url: Option<String>,
    pub model: Option<String>,
    pub key: Option<SecretRef>,
    pub timeout_ms: Option<u64>,
    pub max_retries: Option<u32>,
    pub max_tokens: Option<u32>,
    pub retry_after_max_s: Option<u64>,
}

/// Where `notify` goes when there is no desktop session bus.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NotifyConfig {
    pub push_url: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FolderConfig {
    pub root: PathBuf,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct EmailConfig {
    pub host: String,
    #[serde(default = "default_smtp_port")]
    pub port: u16,
    pub from: String,
    /// `none` (plain, for a local relay), `starttls` or `tls`.
    #[serde(default = "default_tls")]
    pub tls: String,
    pub username: Option<SecretRef>,
    pub password: Option<SecretRef>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
}

fn default_smtp_port() -> u16 {
    587
}
fn default_tls() -> String {
    "starttls".into()
}
fn default_timeout_ms() -> u64 {
    10_000
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookConfig {
    /// Destination patterns whose receivers deduplicate by `Idempotency-Key` (§8.3).
    #[serde(default)]
    pub idempotent: Vec<String>,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// A read-back (§6.3): `GET` this URL after a 2xx, `{id}` replaced by the response's id
    /// and `{key}` by the `Idempotency-Key`; 2xx means the effect is there, 404/410 that it is
    /// not (the delivery is then `failed`).
    #[serde(default)]
    pub status_url: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CalendarConfig {
    pub dir: PathBuf,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PaymentConfig {
    pub url: String,
    pub token: Option<SecretRef>,
    #[serde(default)]
    pub idempotent: bool,
    #[serde(default = "default_timeout_ms")]
    pub timeout_ms: u64,
    /// A read-back (§6.3): `GET` this URL, `{id}` replaced by the transfer id and `{key}` by
    /// the idempotency key; 2xx means the transfer exists, 404/410 that it does not.
    #[serde(default)]
    pub status_url: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AutomationConfig {
    /// `verb:kind:address` patterns opted into trusted automation in autonomous runs (R8).
    #[serde(default)]
    pub routines: Vec<String>,
}

impl Config {
    /// Read `vouch.toml` (at most [`CONFIG_BYTES_MAX`]) from the home; a missing file is the empty configuration.
    pub fn load(home: &Path) -> Result<Config, String> {
        let path = home.join("vouch.toml");
        let text = match vouch_runtime::bounded::read_text(&path, "configuration", CONFIG_BYTES_MAX)
        {
            Ok(t) => t,
            Err(vouch_runtime::bounded::ReadError::Io { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return Ok(Config::default())
            }
            Err(e) => return Err(e.to_string()),
        };
        Config::parse(&text, home).map_err(|e| format!("{}: {e}", path.display()))
    }

    /// Parse the text of a `vouch.toml` whose home is `home` (relative paths are resolved
    /// against it). Pure but for the path join; the fuzz target calls it directly.
    pub fn parse(text: &str, home: &Path) -> Result<Config, String> {
        let mut cfg: Config = toml::from_str(text).map_err(|e| e.to_string())?;
        // Relative paths are relative to the home.
        if let Some(f) = cfg.folder.as_mut() {
            if f.root.is_relative() {
                f.root = home.join(&f.root);
            }
        }
        if let Some(c) = cfg.calendar.as_mut() {
            if c.dir.is_relative() {
                c.dir = home.join(&c.dir);
            }
        }
        Ok(cfg)
    }

    /// The level of a destination kind before per-destination overrides, and the connect step.
    pub fn kind_level(&self, kind: DestinationKind) -> (Capability, Option<String>) {
        let missing = |section: &str, example: &str| {
            (
                Capability::NeedsSetup,
                Some(format!(
                    "add a [{section}] section to vouch.toml ({example}; `vouch doctor` checks it)"
                )),
            )
        };
        match kind {
            DestinationKind::Surface | DestinationKind::Folder => (Capability::Executable, None),
            DestinationKind::Webhook => (Capability::Executable, None),
            // A local repository named by path: nothing to configure (§14).
            DestinationKind::Repository => (Capability::Executable, None),
            DestinationKind::Email => match &self.email {
                None => missing("email", "host, port, from"),
                Some(e) => {
                    for s in [&e.username, &e.password].into_iter().flatten() {
                        if let Err(step) = s.present() {
                            return (
                                Capability::NeedsSetup,
                                Some(format!("e-mail credentials: {step}")),
                            );
                        }
                    }
                    (Capability::Executable, None)
                }
            },
            DestinationKind::Calendar => match &self.calendar {
                None => missing("calendar", "dir"),
                Some(_) => (Capability::Executable, None),
            },
            DestinationKind::Payment => match &self.payment {
                None => missing("payment", "url, token"),
                Some(p) => match p.token.as_ref().map(|t| t.present()) {
                    Some(Err(step)) => (
                        Capability::NeedsSetup,
                        Some(format!("payment token: {step}")),
                    ),
                    _ => (Capability::Executable, None),
                },
            },
        }
    }
}

/// The registry answered from `vouch.toml`: local, bounded, no network (§4, I8).
pub struct ConfigCapabilities {
    pub config: Config,
}

impl CapabilityRegistry for ConfigCapabilities {
    fn probe(
        &self,
        verb: Verb,
        dest: &Destination,
        context: Context,
        irreversible: bool,
    ) -> CapabilityAnswer {
        let (mut level, mut connect_step) = self.config.kind_level(dest.kind);
        let key = dest.key();
        if let Some((_, cap)) = self
            .config
            .capabilities
            .iter()
            .find(|(p, _)| pattern_matches(p, &key))
        {
            // An override can only lower what the configuration allows.
            if *cap < level {
                level = *cap;
                if level == Capability::NeedsSetup && connect_step.is_none() {
                    connect_step = Some(format!("{} is marked needs_setup in vouch.toml", key));
                }
            }
        }
        let opt_ins = self
            .config
            .automation
            .as_ref()
            .map(|a| a.routines.as_slice())
            .unwrap_or(&[]);
        let level = vouch_runtime::capability::with_automation(
            level,
            verb,
            dest,
            context,
            irreversible,
            opt_ins,
        );
        CapabilityAnswer {
            level,
            connect_step,
        }
    }
}
