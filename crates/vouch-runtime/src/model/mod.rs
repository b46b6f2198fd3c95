//! The model behind the agent loop. Each turn the model either calls tools or gives final text.
//!
//! Two implementations: `crate::scripted` replays a scenario script (deterministic), and
//! `vouch_adapters::openai` speaks the OpenAI-compatible chat-completions wire format with
//! tool calling. The host knows only the [`Model`] trait and what a model's errors mean.

use serde::{Deserialize, Serialize};
use vouch_store::journal::{TokenUsage, ToolCallRecord};

/// A tool offered to the model: name, description, JSON Schema of its arguments.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    pub parameters: serde_json::Value,
}

/// One tool call as the model made it. `arguments` is the raw JSON text the model produced:
/// it may not parse, and the host must answer that with a recoverable error.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

// The journal records a call exactly as the model made it, and the chat rebuilt from the
// journal hands it back the same: these two conversions are the only place the fields meet.
impl From<&ToolCall> for ToolCallRecord {
    fn from(c: &ToolCall) -> Self {
        ToolCallRecord {
            id: c.id.clone(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        }
    }
}

impl From<&ToolCallRecord> for ToolCall {
    fn from(c: &ToolCallRecord) -> Self {
        ToolCall {
            id: c.id.clone(),
            name: c.name.clone(),
            arguments: c.arguments.clone(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum ChatMessage {
    System {
        content: String,
    },
    User {
        content: String,
    },
    Assistant {
        content: Option<String>,
        tool_calls: Vec<ToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl From<Usage> for TokenUsage {
    fn from(u: Usage) -> Self {
        TokenUsage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
        }
    }
}

/// What the model did this turn: tool calls, or final text (possibly empty), or both.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelTurn {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
}

/// Why the model gave no turn; each variant names the cause so the host can say it in the
/// receipt ("the model could not be reached: …") and the person knows what to fix.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// Nothing answered at the address (DNS, refused, reset), even after retries: start the
    /// model server or fix `VOUCH_MODEL_URL`.
    #[error("the model could not be reached after {attempts} attempts: {last}")]
    Unreachable { attempts: u32, last: String },
    /// Every attempt ran past the per-attempt timeout: raise `VOUCH_MODEL_TIMEOUT_MS` or use a
    /// faster model.
    #[error("the model did not answer within {timeout_ms} ms, {attempts} attempts")]
    Timeout { attempts: u32, timeout_ms: u64 },
    /// The server kept answering 429/408/5xx until the retries ran out: try again later.
    #[error("the model server kept failing after {attempts} attempts: {last}")]
    Unavailable { attempts: u32, last: String },
    /// 401/403: the server refused the credentials; fix `VOUCH_API_KEY`.
    #[error(
        "the model server refused the credentials (HTTP {status}): {message}; check VOUCH_API_KEY"
    )]
    Unauthorized { status: u16, message: String },
    /// 404: wrong base URL or a model the server does not serve; fix `VOUCH_MODEL_URL` (it
    /// usually ends in /v1) or `VOUCH_MODEL`.
    #[error("the model or its address was not found (HTTP 404): {message}; check VOUCH_MODEL_URL (usually ending in /v1) and VOUCH_MODEL={model:?}")]
    NotFound { model: String, message: String },
    /// 400 and other 4xx: the server refused this request; retrying the same one will not help.
    #[error("the model server rejected the request (HTTP {status}): {message}")]
    BadRequest { status: u16, message: String },
    /// The configuration cannot work (bad URL, redirect, proxy): fix the setting named.
    #[error("model request rejected: {0}")]
    Rejected(String),
    /// The provider answered with something that is not a chat completion.
    #[error("model provider returned an invalid response: {0}")]
    Protocol(String),
    /// A scripted model has no more turns.
    #[error("the script has no more turns")]
    ScriptExhausted,
    /// The run names no model the host can build: give it a script or configure one.
    #[error("this run has no model configured ({kind:?}); pass --script FILE, or give vouch.toml a [model] with url and model (or set VOUCH_MODEL_URL and VOUCH_MODEL)")]
    NoModel { kind: Option<String> },
    /// The OpenAI-compatible model's settings are missing or unusable: fix the one named.
    #[error(transparent)]
    Config(#[from] OpenAiConfigError),
}

/// A missing or unusable setting of the OpenAI-compatible model (`vouch_adapters::openai`),
/// naming the variable and what to set it to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OpenAiConfigError {
    #[error("{var} is not set: {hint}")]
    Missing {
        var: &'static str,
        hint: &'static str,
    },
    #[error("{var}={value:?} is not valid: {reason}")]
    Invalid {
        var: &'static str,
        value: String,
        reason: String,
    },
}

/// What kind of outage stopped a model, read from the reason the loop journaled (the
/// [`ModelError`] text): whether another attempt may help, and in words for the attempt's end.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outage {
    /// Connection refused, DNS, no answer in time: the server may come back.
    Unreachable,
    /// 429, 408 or 5xx after the retries (their `Retry-After` honoured, bounded).
    Overloaded,
    /// A 4xx the server will answer again (credentials, model name, request): fatal.
    Refused,
}

impl Outage {
    /// The outage a journaled model error names, if it is one.
    pub fn of(reason: &str) -> Option<Outage> {
        if reason.contains("could not be reached") || reason.contains("did not answer within") {
            Some(Outage::Unreachable)
        } else if reason.contains("kept failing") {
            Some(Outage::Overloaded)
        } else if reason.contains("refused the credentials")
            || reason.contains("was not found (HTTP 404)")
            || reason.contains("rejected the request (HTTP")
            || reason.contains("model request rejected")
        {
            Some(Outage::Refused)
        } else {
            None
        }
    }

    /// Another attempt may succeed once the server is back; a refusal will repeat.
    pub fn retryable(self) -> bool {
        !matches!(self, Outage::Refused)
    }

    pub fn words(self) -> &'static str {
        match self {
            Outage::Unreachable => "the model server was unreachable",
            Outage::Overloaded => "the model server was overloaded or failing (429/5xx)",
            Outage::Refused => {
                "the model server refused the request (fatal: fix the [model] settings)"
            }
        }
    }
}

/// Backoff across attempts while the model is out (issue 22 #4): each attempt that ends in a
/// retryable outage doubles the pause before the next claim (from `BASE_MS`, capped at
/// `MAX_MS`); a success resets it. Times come from the caller's clock.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OutageBackoff {
    consecutive: u32,
    until_ms: i64,
}

impl OutageBackoff {
    pub const BASE_MS: i64 = 5_000;
    pub const MAX_MS: i64 = 5 * 60_000;

    /// An attempt ended: with the outage that ended it (`None`: the model answered).
    pub fn record(&mut self, outage: Option<Outage>, now_ms: i64) {
        match outage {
            Some(o) if o.retryable() => {
                let factor = 1i64 << self.consecutive.min(16);
                self.consecutive = self.consecutive.saturating_add(1);
                self.until_ms = now_ms + Self::BASE_MS.saturating_mul(factor).min(Self::MAX_MS);
            }
            _ => *self = OutageBackoff::default(),
        }
    }

    /// How long to wait before claiming again.
    pub fn wait_ms(&self, now_ms: i64) -> i64 {
        (self.until_ms - now_ms).max(0)
    }
}

pub trait Model: Send {
    fn next_turn(
        &mut self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<ModelTurn, ModelError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tool_call_survives_the_journal_verbatim() {
        let call = ToolCall {
            id: "c1".into(),
            name: "save".into(),
            arguments: "{\"a\": 1, not json".into(),
        };
        let record = ToolCallRecord::from(&call);
        assert_eq!(record.id, "c1");
        assert_eq!(record.name, "save");
        assert_eq!(record.arguments, call.arguments);
        assert_eq!(ToolCall::from(&record), call);
        let usage = TokenUsage::from(Usage {
            prompt_tokens: 3,
            completion_tokens: 4,
        });
        assert_eq!((usage.prompt_tokens, usage.completion_tokens), (3, 4));
    }

    #[test]
    fn every_model_error_is_classified_as_the_outage_it_is() {
        let cases = [
            (
                ModelError::Unreachable {
                    attempts: 4,
                    last: "refused".into(),
                },
                Some(Outage::Unreachable),
            ),
            (
                ModelError::Timeout {
                    attempts: 4,
                    timeout_ms: 10,
                },
                Some(Outage::Unreachable),
            ),
            (
                ModelError::Unavailable {
                    attempts: 4,
                    last: "HTTP 503".into(),
                },
                Some(Outage::Overloaded),
            ),
            (
                ModelError::Unauthorized {
                    status: 401,
                    message: "no".into(),
                },
                Some(Outage::Refused),
            ),
            (
                ModelError::NotFound {
                    model: "m".into(),
                    message: "no".into(),
                },
                Some(Outage::Refused),
            ),
            (
                ModelError::BadRequest {
                    status: 400,
                    message: "no".into(),
                },
                Some(Outage::Refused),
            ),
            (
                ModelError::Rejected("redirect".into()),
                Some(Outage::Refused),
            ),
            (ModelError::Protocol("not json".into()), None),
        ];
        for (e, want) in cases {
            assert_eq!(Outage::of(&e.to_string()), want, "{e}");
        }
        assert!(Outage::Unreachable.retryable() && Outage::Overloaded.retryable());
        assert!(!Outage::Refused.retryable());
    }

    #[test]
    fn an_outage_backs_off_doubling_and_bounded_and_a_success_resets_it() {
        let mut b = OutageBackoff::default();
        assert_eq!(b.wait_ms(0), 0);
        let mut waits = vec![];
        for _ in 0..10 {
            b.record(Some(Outage::Unreachable), 0);
            waits.push(b.wait_ms(0));
        }
        assert_eq!(&waits[..4], &[5_000, 10_000, 20_000, 40_000]);
        assert_eq!(*waits.last().unwrap(), OutageBackoff::MAX_MS);
        b.record(Some(Outage::Refused), 0);
        assert_eq!(b.wait_ms(0), 0, "a refusal is not waited out: it is fatal");
        b.record(Some(Outage::Overloaded), 0);
        b.record(None, 1);
        assert_eq!(b.wait_ms(1), 0);
    }
}
