//! OpenAI-compatible chat completions with tool calling, over blocking HTTP (ureq, rustls).
//!
//! One request per turn: `POST {base_url}/chat/completions` with the conversation, the tools
//! and `tool_choice: "auto"`. The same wire format is served by hosted providers and by local
//! servers (vLLM, llama.cpp, Ollama), so the parser is lenient where they differ (missing
//! `usage`, missing tool call ids, `arguments` as an object) and strict only where a turn
//! cannot be understood at all (no `choices[0].message`, a tool call without a name).
//!
//! Failures are classified by what the caller should do: 429, 408, 5xx and transport errors
//! are retried with bounded exponential backoff and then become [`ModelError::Unavailable`];
//! other 4xx become [`ModelError::Rejected`] (retrying will not help); a body that is not a
//! chat completion becomes [`ModelError::Protocol`].

use serde_json::{json, Map, Value};
use std::fmt;
use std::io::Read;
use std::time::Duration;
use vouch_runtime::model::{
    ChatMessage, Model, ModelError, ModelTurn, OpenAiConfigError, ToolCall, ToolSpec, Usage,
};

/// Largest response body read from the provider; a larger one is a protocol error.
pub const RESPONSE_BYTES_MAX: u64 = 16 * 1024 * 1024;
/// Largest error body read to quote the provider's message.
const ERROR_BODY_BYTES_MAX: u64 = 64 * 1024;
/// Longest provider message quoted in an error.
const QUOTED_CHARS_MAX: usize = 500;

/// Where and how to reach an OpenAI-compatible provider. Every limit is explicit.
#[derive(Clone, PartialEq, Eq)]
pub struct OpenAiConfig {
    /// Base URL up to and including the version, e.g. `http://127.0.0.1:8080/v1`.
    pub base_url: String,
    /// Model name as the provider knows it.
    pub model: String,
    /// Sent as `Authorization: Bearer …` when set. Local servers usually need none.
    pub api_key: Option<String>,
    /// Bound on one HTTP attempt, connect to last byte.
    pub timeout_ms: u64,
    /// Retries after the first attempt for 429, 408, 5xx and connection errors.
    pub max_retries: u32,
    /// First backoff delay; doubled on each retry.
    pub backoff_base_ms: u64,
    /// Cap on any single backoff delay vouch chooses itself.
    pub backoff_max_ms: u64,
    /// Cap on a delay the server asks for with `Retry-After`; honoured up to this, so a
    /// provider that says "come back in 60 s" is not asked again after 30 and refused again.
    pub retry_after_max_ms: u64,
    /// `max_tokens` sent with each request; `None` leaves it to the provider.
    pub max_tokens: Option<u32>,
}

// Hand-written so the API key never reaches a log.
impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("model", &self.model)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("timeout_ms", &self.timeout_ms)
            .field("max_retries", &self.max_retries)
            .field("backoff_base_ms", &self.backoff_base_ms)
            .field("backoff_max_ms", &self.backoff_max_ms)
            .field("retry_after_max_ms", &self.retry_after_max_ms)
            .field("max_tokens", &self.max_tokens)
            .finish()
    }
}

pub const ENV_URL: &str = "VOUCH_MODEL_URL";
pub const ENV_MODEL: &str = "VOUCH_MODEL";
pub const ENV_API_KEY: &str = "VOUCH_API_KEY";
pub const ENV_TIMEOUT_MS: &str = "VOUCH_MODEL_TIMEOUT_MS";
pub const ENV_MAX_RETRIES: &str = "VOUCH_MODEL_MAX_RETRIES";
pub const ENV_MAX_TOKENS: &str = "VOUCH_MODEL_MAX_TOKENS";
pub const ENV_RETRY_AFTER_MAX_S: &str = "VOUCH_MODEL_RETRY_AFTER_MAX_S";

const URL_HINT: &str = "set it to the provider's OpenAI-compatible base URL, e.g. \
http://127.0.0.1:8080/v1 (llama.cpp, vLLM), http://127.0.0.1:11434/v1 (Ollama) or \
https://api.openai.com/v1; or pass --script FILE";
const MODEL_HINT: &str = "set it to the model name the provider serves, e.g. gpt-4o-mini or \
qwen2.5:7b; or pass --script FILE";

/// Bounds on the optional numeric settings, so a typo cannot ask for a week-long timeout.
const TIMEOUT_MS_MAX: u64 = 60 * 60 * 1000;
const MAX_RETRIES_MAX: u32 = 20;
const RETRY_AFTER_MAX_S_MAX: u64 = 60 * 60;

impl OpenAiConfig {
    pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
    pub const DEFAULT_MAX_RETRIES: u32 = 3;
    pub const DEFAULT_BACKOFF_BASE_MS: u64 = 500;
    pub const DEFAULT_BACKOFF_MAX_MS: u64 = 30_000;
    pub const DEFAULT_RETRY_AFTER_MAX_MS: u64 = 120_000;

    /// A config with the default limits and no API key.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        OpenAiConfig {
            base_url: base_url.into(),
            model: model.into(),
            api_key: None,
            timeout_ms: Self::DEFAULT_TIMEOUT_MS,
            max_retries: Self::DEFAULT_MAX_RETRIES,
            backoff_base_ms: Self::DEFAULT_BACKOFF_BASE_MS,
            backoff_max_ms: Self::DEFAULT_BACKOFF_MAX_MS,
            retry_after_max_ms: Self::DEFAULT_RETRY_AFTER_MAX_MS,
            max_tokens: None,
        }
    }

    /// Reads `VOUCH_MODEL_URL` and `VOUCH_MODEL` (required), `VOUCH_API_KEY` (optional), and
    /// the optional limits `VOUCH_MODEL_TIMEOUT_MS`, `VOUCH_MODEL_MAX_RETRIES`,
    /// `VOUCH_MODEL_MAX_TOKENS`, `VOUCH_MODEL_RETRY_AFTER_MAX_S`. An empty value counts as
    /// unset.
    pub fn from_env() -> Result<Self, OpenAiConfigError> {
        Self::from_lookup(|name| std::env::var(name).ok())
    }

    /// [`OpenAiConfig::from_env`] over any lookup, so callers and tests need not touch the
    /// process environment.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, OpenAiConfigError> {
        let get = |var: &str| {
            lookup(var)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let base_url = get(ENV_URL).ok_or(OpenAiConfigError::Missing {
            var: ENV_URL,
            hint: URL_HINT,
        })?;
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(OpenAiConfigError::Invalid {
                var: ENV_URL,
                value: base_url,
                reason: format!("it must start with http:// or https://; {URL_HINT}"),
            });
        }
        let model = get(ENV_MODEL).ok_or(OpenAiConfigError::Missing {
            var: ENV_MODEL,
            hint: MODEL_HINT,
        })?;
        let mut config = OpenAiConfig::new(base_url, model);
        config.api_key = get(ENV_API_KEY);
        if let Some(v) = get(ENV_TIMEOUT_MS) {
            config.timeout_ms = parse_bounded(ENV_TIMEOUT_MS, &v, 1, TIMEOUT_MS_MAX)?;
        }
        if let Some(v) = get(ENV_MAX_RETRIES) {
            config.max_retries = parse_bounded(ENV_MAX_RETRIES, &v, 0, MAX_RETRIES_MAX)?;
        }
        if let Some(v) = get(ENV_RETRY_AFTER_MAX_S) {
            let secs: u64 = parse_bounded(ENV_RETRY_AFTER_MAX_S, &v, 0, RETRY_AFTER_MAX_S_MAX)?;
            config.retry_after_max_ms = secs * 1000;
        }
        if let Some(v) = get(ENV_MAX_TOKENS) {
            config.max_tokens = Some(parse_bounded(ENV_MAX_TOKENS, &v, 1, u32::MAX)?);
        }
        Ok(config)
    }

    /// The profile a run records (§3.6): `[model]` from vouch.toml under the `VOUCH_MODEL_*`
    /// overrides, as non-secret JSON — the key only by the variable or file that holds it.
    /// `None` when neither names a URL and a model.
    pub fn record_profile(
        file: Option<&crate::config::ModelConfig>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Option<Value> {
        let f = file.cloned().unwrap_or_default();
        let mut p = json!({"name": f.name.clone().unwrap_or_else(|| "default".into())});
        let mut put = |k: &str, v: Option<Value>| {
            if let Some(v) = v {
                p[k] = v;
            }
        };
        put("url", f.url.clone().map(Value::from));
        put("model", f.model.clone().map(Value::from));
        let key = f.key.as_ref();
        put("key_env", key.and_then(|k| k.env.clone()).map(Value::from));
        if key.and_then(|k| k.env.as_ref()).is_none() {
            put(
                "key_file",
                key.and_then(|k| k.file.as_ref())
                    .map(|f| Value::from(f.display().to_string())),
            );
        }
        put("timeout_ms", f.timeout_ms.map(Value::from));
        put("max_retries", f.max_retries.map(Value::from));
        put("max_tokens", f.max_tokens.map(Value::from));
        put("retry_after_max_s", f.retry_after_max_s.map(Value::from));
        if file.and_then(|f| f.url.as_ref()).is_none() {
            p["name"] = json!("env");
        }
        let p = Self::overlay(&p, lookup);
        (p.get("url").is_some() && p.get("model").is_some()).then_some(p)
    }

    /// A profile under this process's `VOUCH_MODEL_*` overrides (each set variable wins).
    pub fn overlay(profile: &Value, lookup: impl Fn(&str) -> Option<String>) -> Value {
        let get = |var: &str| {
            lookup(var)
                .map(|v| v.trim().to_string())
                .filter(|v| !v.is_empty())
        };
        let mut p = profile.clone();
        if let Some(v) = get(ENV_URL) {
            p["url"] = json!(v);
        }
        if let Some(v) = get(ENV_MODEL) {
            p["model"] = json!(v);
        }
        if get(ENV_API_KEY).is_some() {
            p["key_env"] = json!(ENV_API_KEY);
            if let Some(m) = p.as_object_mut() {
                m.remove("key_file");
            }
        }
        for (k, env) in [
            ("timeout_ms", ENV_TIMEOUT_MS),
            ("max_retries", ENV_MAX_RETRIES),
            ("max_tokens", ENV_MAX_TOKENS),
            ("retry_after_max_s", ENV_RETRY_AFTER_MAX_S),
        ] {
            if let Some(v) = get(env).and_then(|v| v.parse::<u64>().ok()) {
                p[k] = json!(v);
            }
        }
        p
    }

    /// The config of a recorded profile; its key is read from the variable or file it names
    /// (`lookup` for variables), here and now.
    pub fn from_profile(
        p: &Value,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, OpenAiConfigError> {
        let text = |k: &str| p.get(k).and_then(Value::as_str).map(str::to_string);
        let base_url = text("url").ok_or(OpenAiConfigError::Missing {
            var: "the run's model profile `url`",
            hint: URL_HINT,
        })?;
        if !(base_url.starts_with("http://") || base_url.starts_with("https://")) {
            return Err(OpenAiConfigError::Invalid {
                var: "the run's model profile `url`",
                value: base_url,
                reason: "it must start with http:// or https://".into(),
            });
        }
        let model = text("model").ok_or(OpenAiConfigError::Missing {
            var: "the run's model profile `model`",
            hint: MODEL_HINT,
        })?;
        let mut config = OpenAiConfig::new(base_url, model);
        if let Some(var) = text("key_env") {
            config.api_key = Some(
                lookup(&var)
                    .filter(|v| !v.trim().is_empty())
                    .ok_or_else(|| OpenAiConfigError::Invalid {
                        var: "the model profile's key",
                        value: format!("env {var}"),
                        reason: format!("{var} is not set in this process; set it (`[model] key` in vouch.toml names it)"),
                    })?,
            );
        } else if let Some(path) = text("key_file") {
            let key = vouch_runtime::bounded::read_text(
                std::path::Path::new(&path),
                "model key file",
                vouch_runtime::bounded::SECRET_FILE_BYTES_MAX,
            )
            .map_err(|e| OpenAiConfigError::Invalid {
                var: "the model key's file",
                value: path.clone(),
                reason: format!("it cannot be read: {e}"),
            })?;
            config.api_key = Some(key.trim().to_string());
        }
        let num = |k: &str| p.get(k).and_then(Value::as_u64);
        if let Some(v) = num("timeout_ms") {
            config.timeout_ms = v.clamp(1, TIMEOUT_MS_MAX);
        }
        if let Some(v) = num("max_retries") {
            config.max_retries = u32::try_from(v)
                .unwrap_or(MAX_RETRIES_MAX)
                .min(MAX_RETRIES_MAX);
        }
        if let Some(v) = num("retry_after_max_s") {
            config.retry_after_max_ms = v.min(RETRY_AFTER_MAX_S_MAX) * 1000;
        }
        if let Some(v) = num("max_tokens") {
            config.max_tokens = u32::try_from(v).ok().filter(|n| *n >= 1);
        }
        Ok(config)
    }

    /// The chat-completions endpoint. Tolerates a trailing slash and a base URL that already
    /// names the endpoint.
    pub fn endpoint(&self) -> String {
        let base = self.base_url.trim_end_matches('/');
        let base = base.strip_suffix("/chat/completions").unwrap_or(base);
        format!("{base}/chat/completions")
    }
}

fn parse_bounded<T>(var: &'static str, value: &str, min: T, max: T) -> Result<T, OpenAiConfigError>
where
    T: std::str::FromStr + PartialOrd + fmt::Display + Copy,
{
    match value.parse::<T>() {
        Ok(n) if n >= min && n <= max => Ok(n),
        _ => Err(OpenAiConfigError::Invalid {
            var,
            value: value.to_string(),
            reason: format!("expected a whole number from {min} to {max}"),
        }),
    }
}

/// Waits between retries. Injected so tests (and a simulation) do not sleep.
pub type Sleeper = Box<dyn FnMut(Duration) + Send>;

/// The [`Model`] that talks to an OpenAI-compatible provider.
pub struct OpenAiModel {
    config: OpenAiConfig,
    endpoint: String,
    agent: ureq::Agent,
    sleep: Sleeper,
}

impl fmt::Debug for OpenAiModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiModel")
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl OpenAiModel {
    pub fn new(config: OpenAiConfig) -> Self {
        Self::with_sleeper(config, Box::new(std::thread::sleep))
    }

    /// Like [`OpenAiModel::new`], with the wait between retries supplied by the caller.
    pub fn with_sleeper(config: OpenAiConfig, sleep: Sleeper) -> Self {
        let timeout = Duration::from_millis(config.timeout_ms.max(1));
        let agent = ureq::AgentBuilder::new()
            .timeout(timeout)
            .timeout_connect(timeout)
            // A redirected POST would silently become a GET; report it instead.
            .redirects(0)
            .user_agent(concat!("vouch/", env!("CARGO_PKG_VERSION")))
            .build();
        OpenAiModel {
            endpoint: config.endpoint(),
            config,
            agent,
            sleep,
        }
    }

    pub fn config(&self) -> &OpenAiConfig {
        &self.config
    }

    /// The delay before retry number `retry` (0 for the first), before the cap.
    fn backoff_ms(&self, retry: u32) -> u64 {
        let factor = 1u64.checked_shl(retry.min(63)).unwrap_or(u64::MAX);
        self.config
            .backoff_base_ms
            .saturating_mul(factor)
            .min(self.config.backoff_max_ms)
    }

    /// One HTTP exchange: the body of a 200, or how the failure should be handled.
    fn attempt(&self, body: &[u8]) -> Result<Vec<u8>, Failure> {
        let mut request = self
            .agent
            .post(&self.endpoint)
            .set("Content-Type", "application/json")
            .set("Accept", "application/json");
        if let Some(key) = &self.config.api_key {
            request = request.set("Authorization", &format!("Bearer {key}"));
        }
        match request.send_bytes(body) {
            Ok(response) if response.status() == 200 => read_limited(response, RESPONSE_BYTES_MAX)
                .map_err(|e| match e {
                    ReadError::Io(e) => Failure::Retry {
                        cause: if is_timeout(&e) {
                            RetryCause::Timeout
                        } else {
                            RetryCause::Unreachable
                        },
                        last: format!("reading the response failed: {e}"),
                        retry_after_ms: None,
                    },
                    ReadError::TooLarge => Failure::Fatal(ModelError::Protocol(format!(
                        "the response is larger than {RESPONSE_BYTES_MAX} bytes"
                    ))),
                }),
            Ok(response) => {
                // 1xx/2xx other than 200, or a redirect (redirects are not followed).
                let status = response.status();
                let location = response.header("Location").map(str::to_string);
                let message = error_message(response);
                Err(Failure::Fatal(ModelError::Rejected(match location {
                    Some(to) => format!(
                        "HTTP {status} redirect to {to}; set {ENV_URL} to the final address"
                    ),
                    None => format!("unexpected HTTP {status}: {message}"),
                })))
            }
            Err(ureq::Error::Status(status, response)) => {
                let retry_after_ms = response
                    .header("Retry-After")
                    .and_then(|v| v.trim().parse::<u64>().ok())
                    .map(|s| s.saturating_mul(1000));
                let message = error_message(response);
                if status == 429 || status == 408 || (500..=599).contains(&status) {
                    Err(Failure::Retry {
                        cause: RetryCause::Server,
                        last: format!("HTTP {status}: {message}"),
                        retry_after_ms,
                    })
                } else {
                    Err(Failure::Fatal(match status {
                        401 | 403 => ModelError::Unauthorized { status, message },
                        404 => ModelError::NotFound {
                            model: self.config.model.clone(),
                            message,
                        },
                        _ => ModelError::BadRequest { status, message },
                    }))
                }
            }
            Err(ureq::Error::Transport(t)) => {
                use ureq::ErrorKind as K;
                let text = format!("{} ({})", t, self.endpoint);
                match t.kind() {
                    K::InvalidUrl
                    | K::UnknownScheme
                    | K::InsecureRequestHttpsOnly
                    | K::InvalidProxyUrl
                    | K::ProxyUnauthorized
                    | K::TooManyRedirects => Err(Failure::Fatal(ModelError::Rejected(text))),
                    K::BadStatus | K::BadHeader => Err(Failure::Fatal(ModelError::Protocol(
                        format!("the provider did not answer in HTTP: {text}"),
                    ))),
                    K::Dns | K::ConnectionFailed | K::Io | K::ProxyConnect | K::HTTP => {
                        let timed_out = std::error::Error::source(&t)
                            .and_then(|e| e.downcast_ref::<std::io::Error>())
                            .is_some_and(is_timeout);
                        Err(Failure::Retry {
                            cause: if timed_out {
                                RetryCause::Timeout
                            } else {
                                RetryCause::Unreachable
                            },
                            last: text,
                            retry_after_ms: None,
                        })
                    }
                }
            }
        }
    }
}

fn is_timeout(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::TimedOut | std::io::ErrorKind::WouldBlock
    )
}

/// What kept failing, so the final error names the cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RetryCause {
    Unreachable,
    Timeout,
    Server,
}

enum Failure {
    Retry {
        cause: RetryCause,
        last: String,
        retry_after_ms: Option<u64>,
    },
    Fatal(ModelError),
}

enum ReadError {
    Io(std::io::Error),
    TooLarge,
}

fn read_limited(response: ureq::Response, limit: u64) -> Result<Vec<u8>, ReadError> {
    let mut bytes = Vec::new();
    response
        .into_reader()
        .take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::TooLarge);
    }
    Ok(bytes)
}

/// The provider's own words from an error body: `{"error":{"message":…}}` (OpenAI, vLLM,
/// llama.cpp), `{"error":"…"}` (Ollama), `{"message":…}`/`{"detail":…}`, or the raw text.
fn error_message(response: ureq::Response) -> String {
    let bytes = match read_limited(response, ERROR_BODY_BYTES_MAX) {
        Ok(b) => b,
        Err(ReadError::TooLarge) => return "(error body too large to quote)".into(),
        Err(ReadError::Io(e)) => return format!("(error body unreadable: {e})"),
    };
    let text = match serde_json::from_slice::<Value>(&bytes) {
        Ok(v) => message_in(&v).unwrap_or_else(|| v.to_string()),
        Err(_) => String::from_utf8_lossy(&bytes).trim().to_string(),
    };
    if text.is_empty() {
        "(empty body)".into()
    } else {
        quote(&text)
    }
}

fn message_in(v: &Value) -> Option<String> {
    let candidates = [
        v.pointer("/error/message"),
        v.get("error"),
        v.get("message"),
        v.get("detail"),
    ];
    candidates.into_iter().flatten().find_map(|m| match m {
        Value::String(s) => Some(s.clone()),
        Value::Null => None,
        Value::Object(_) => None,
        other => Some(other.to_string()),
    })
}

fn quote(text: &str) -> String {
    if text.chars().count() <= QUOTED_CHARS_MAX {
        text.to_string()
    } else {
        let cut: String = text.chars().take(QUOTED_CHARS_MAX).collect();
        format!("{cut}…")
    }
}

/// The request body for one turn.
fn request_body(config: &OpenAiConfig, messages: &[ChatMessage], tools: &[ToolSpec]) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(config.model));
    body.insert(
        "messages".into(),
        Value::Array(messages.iter().map(wire_message).collect()),
    );
    // Several servers reject an empty `tools` array, and `tool_choice` without tools.
    if !tools.is_empty() {
        let tools = tools
            .iter()
            .map(|t| {
                // Strict mode where the schema meets its rules (every host tool does; a task
                // type's own output schema may not), so the server holds the model to it.
                json!({
                    "type": "function",
                    "function": {
                        "name": t.name,
                        "description": t.description,
                        "parameters": t.parameters,
                        "strict": vouch_runtime::schemas::strict_violations(&t.parameters).is_empty(),
                    }
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
        body.insert("tool_choice".into(), json!("auto"));
    }
    if let Some(max) = config.max_tokens {
        body.insert("max_tokens".into(), json!(max));
    }
    body.insert("stream".into(), json!(false));
    Value::Object(body)
}

fn wire_message(m: &ChatMessage) -> Value {
    match m {
        ChatMessage::System { content } => json!({"role": "system", "content": content}),
        ChatMessage::User { content } => json!({"role": "user", "content": content}),
        ChatMessage::Assistant {
            content,
            tool_calls,
        } => {
            let mut obj = Map::new();
            obj.insert("role".into(), json!("assistant"));
            // Providers accept `null` content beside tool calls, but not with none.
            let content = match content {
                Some(c) => json!(c),
                None if tool_calls.is_empty() => json!(""),
                None => Value::Null,
            };
            obj.insert("content".into(), content);
            // An empty `tool_calls` array is rejected by OpenAI, so it is left out.
            if !tool_calls.is_empty() {
                let calls = tool_calls
                    .iter()
                    .map(|c| {
                        json!({
                            "id": c.id,
                            "type": "function",
                            "function": {"name": c.name, "arguments": c.arguments},
                        })
                    })
                    .collect();
                obj.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(obj)
        }
        ChatMessage::Tool {
            tool_call_id,
            content,
        } => json!({"role": "tool", "tool_call_id": tool_call_id, "content": content}),
    }
}

/// Parses a chat completion. `id_seed` (the conversation length) makes the ids given to
/// tool calls that arrive without one unique across the turns of a run, and deterministic.
fn parse_response(bytes: &[u8], id_seed: usize) -> Result<ModelTurn, ModelError> {
    let v: Value = serde_json::from_slice(bytes).map_err(|e| {
        ModelError::Protocol(format!(
            "the body is not JSON ({e}): {}",
            quote(String::from_utf8_lossy(bytes).trim())
        ))
    })?;
    let Some(message) = v.pointer("/choices/0/message") else {
        // Some proxies report errors in a 200 body.
        let why = match message_in(&v) {
            Some(m) => format!("the provider reported an error: {m}"),
            None => format!("no choices[0].message in {}", quote(&v.to_string())),
        };
        return Err(ModelError::Protocol(why));
    };
    let content = match message.get("content") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        // Content as parts: [{"type":"text","text":…}].
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(|p| p.get("text").and_then(Value::as_str))
                .collect::<String>(),
        ),
        Some(other) => {
            return Err(ModelError::Protocol(format!(
                "choices[0].message.content is neither text nor null: {}",
                quote(&other.to_string())
            )))
        }
    };
    let tool_calls = match message.get("tool_calls") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(calls)) => calls
            .iter()
            .enumerate()
            .map(|(i, c)| tool_call(c, i, id_seed))
            .collect::<Result<_, _>>()?,
        Some(other) => {
            return Err(ModelError::Protocol(format!(
                "choices[0].message.tool_calls is not a list: {}",
                quote(&other.to_string())
            )))
        }
    };
    let count = |name: &str| {
        v.get("usage")
            .and_then(|u| u.get(name))
            .and_then(Value::as_u64)
            .unwrap_or(0)
    };
    Ok(ModelTurn {
        content,
        tool_calls,
        usage: Usage {
            prompt_tokens: count("prompt_tokens"),
            completion_tokens: count("completion_tokens"),
        },
    })
}

fn tool_call(c: &Value, i: usize, id_seed: usize) -> Result<ToolCall, ModelError> {
    let name = c
        .pointer("/function/name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| {
            ModelError::Protocol(format!(
                "tool call {i} has no function.name: {}",
                quote(&c.to_string())
            ))
        })?;
    // Kept verbatim even when it does not parse: the host answers that with a recoverable
    // error the model can correct. Some servers send an object; it is re-encoded as text.
    let arguments = match c.pointer("/function/arguments") {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => "{}".to_string(),
        Some(other) => other.to_string(),
    };
    let id = match c.get("id").and_then(Value::as_str) {
        Some(id) if !id.is_empty() => id.to_string(),
        _ => format!("call_{id_seed}_{i}"),
    };
    Ok(ToolCall {
        id,
        name: name.to_string(),
        arguments,
    })
}

impl Model for OpenAiModel {
    fn next_turn(
        &mut self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<ModelTurn, ModelError> {
        let body = serde_json::to_vec(&request_body(&self.config, messages, tools))
            .map_err(|e| ModelError::Protocol(format!("encode the request: {e}")))?;
        let attempts_max = self.config.max_retries.saturating_add(1);
        let mut attempts = 0u32;
        loop {
            attempts += 1;
            match self.attempt(&body) {
                Ok(bytes) => return parse_response(&bytes, messages.len()),
                Err(Failure::Fatal(e)) => return Err(e),
                Err(Failure::Retry {
                    cause,
                    last,
                    retry_after_ms,
                }) => {
                    if attempts >= attempts_max {
                        return Err(match cause {
                            RetryCause::Unreachable => ModelError::Unreachable { attempts, last },
                            RetryCause::Timeout => ModelError::Timeout {
                                attempts,
                                timeout_ms: self.config.timeout_ms,
                            },
                            RetryCause::Server => ModelError::Unavailable { attempts, last },
                        });
                    }
                    let delay_ms = match retry_after_ms {
                        Some(ms) => ms.min(self.config.retry_after_max_ms),
                        None => self.backoff_ms(attempts - 1),
                    };
                    (self.sleep)(Duration::from_millis(delay_ms));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn model(base_ms: u64, max_ms: u64) -> OpenAiModel {
        let mut c = OpenAiConfig::new("http://127.0.0.1:1/v1", "m");
        c.backoff_base_ms = base_ms;
        c.backoff_max_ms = max_ms;
        OpenAiModel::with_sleeper(c, Box::new(|_| {}))
    }

    #[test]
    fn backoff_doubles_and_is_capped() {
        let m = model(100, 1_000);
        let delays: Vec<u64> = (0..6).map(|r| m.backoff_ms(r)).collect();
        assert_eq!(delays, [100, 200, 400, 800, 1_000, 1_000]);
        assert_eq!(m.backoff_ms(u32::MAX), 1_000);
    }

    #[test]
    fn endpoint_tolerates_slashes_and_full_paths() {
        for base in [
            "http://h/v1",
            "http://h/v1/",
            "http://h/v1/chat/completions",
            "http://h/v1/chat/completions/",
        ] {
            let c = OpenAiConfig::new(base, "m");
            assert_eq!(c.endpoint(), "http://h/v1/chat/completions", "{base}");
        }
    }

    #[test]
    fn debug_hides_the_api_key() {
        let mut c = OpenAiConfig::new("http://h/v1", "m");
        c.api_key = Some("sk-secret".into());
        let text = format!("{:?}", OpenAiModel::new(c));
        assert!(!text.contains("sk-secret"), "{text}");
        assert!(text.contains("<redacted>"), "{text}");
    }

    #[test]
    fn arguments_object_and_missing_id_are_tolerated() {
        let body = json!({"choices": [{"message": {"tool_calls": [
            {"function": {"name": "f", "arguments": {"a": 1}}},
            {"id": "", "function": {"name": "g"}}
        ]}}]});
        let turn = parse_response(body.to_string().as_bytes(), 4).expect("parses");
        assert_eq!(turn.tool_calls[0].arguments, r#"{"a":1}"#);
        assert_eq!(turn.tool_calls[0].id, "call_4_0");
        assert_eq!(turn.tool_calls[1].arguments, "{}");
        assert_eq!(turn.tool_calls[1].id, "call_4_1");
    }

    #[test]
    fn content_parts_are_joined_and_nameless_calls_refused() {
        let body = json!({"choices": [{"message": {"content": [
            {"type": "text", "text": "a"}, {"type": "text", "text": "b"}
        ]}}]});
        let turn = parse_response(body.to_string().as_bytes(), 0).expect("parses");
        assert_eq!(turn.content.as_deref(), Some("ab"));
        let body = json!({"choices": [{"message": {"tool_calls": [{"function": {}}]}}]});
        let err = parse_response(body.to_string().as_bytes(), 0).expect_err("no name");
        assert!(matches!(err, ModelError::Protocol(_)), "{err}");
    }

    #[test]
    fn an_error_in_a_200_body_is_quoted() {
        let body = json!({"error": {"message": "model overloaded"}});
        let err = parse_response(body.to_string().as_bytes(), 0).expect_err("no choices");
        assert!(err.to_string().contains("model overloaded"), "{err}");
    }

    #[test]
    fn retry_after_cap_is_read_in_seconds_and_bounded() {
        let env = |v: &'static str| {
            move |k: &str| match k {
                ENV_URL => Some("http://h/v1".to_string()),
                ENV_MODEL => Some("m".to_string()),
                ENV_RETRY_AFTER_MAX_S => Some(v.to_string()),
                _ => None,
            }
        };
        let c = OpenAiConfig::from_lookup(env("300")).expect("valid");
        assert_eq!(c.retry_after_max_ms, 300_000);
        let err = OpenAiConfig::from_lookup(env("86400")).expect_err("a day is too long");
        assert!(err.to_string().contains(ENV_RETRY_AFTER_MAX_S), "{err}");
    }

    #[test]
    fn invalid_optional_settings_name_the_variable() {
        let env = |k: &str| match k {
            ENV_URL => Some("http://h/v1".to_string()),
            ENV_MODEL => Some("m".to_string()),
            ENV_MAX_RETRIES => Some("lots".to_string()),
            _ => None,
        };
        let err = OpenAiConfig::from_lookup(env).expect_err("invalid");
        assert!(err.to_string().contains(ENV_MAX_RETRIES), "{err}");
        let err = OpenAiConfig::from_lookup(|k| match k {
            ENV_URL => Some("127.0.0.1:8080/v1".to_string()),
            _ => Some("x".to_string()),
        })
        .expect_err("no scheme");
        assert!(err.to_string().contains("http://"), "{err}");
    }
}
