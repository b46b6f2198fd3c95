//! The model behind the agent loop. Each turn the model either calls tools or gives final text.
//!
//! Two implementations: [`scripted`] replays a scenario script (deterministic), and
//! [`openai`] speaks the OpenAI-compatible chat-completions wire format with tool calling.

pub mod openai;

use serde::{Deserialize, Serialize};

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

/// What the model did this turn: tool calls, or final text (possibly empty), or both.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ModelTurn {
    pub content: Option<String>,
    pub tool_calls: Vec<ToolCall>,
    pub usage: Usage,
}

#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    /// Retries were exhausted on 429/5xx or the connection kept failing.
    #[error("model provider unavailable after {attempts} attempts: {last}")]
    Unavailable { attempts: u32, last: String },
    /// The provider answered with something that is not a chat completion.
    #[error("model provider returned an invalid response: {0}")]
    Protocol(String),
    /// Configuration or request rejected (401, 400…): retrying will not help.
    #[error("model request rejected: {0}")]
    Rejected(String),
    /// A scripted model has no more turns.
    #[error("the script has no more turns")]
    ScriptExhausted,
}

pub trait Model: Send {
    fn next_turn(
        &mut self,
        messages: &[ChatMessage],
        tools: &[ToolSpec],
    ) -> Result<ModelTurn, ModelError>;
}

/// Builds models from a run's stored spec: `{"kind":"script","turns":[…]}` replays a script;
/// `{"kind":"openai"}` uses the OpenAI-compatible provider configured by environment.
pub struct DefaultModels;

impl crate::host::ModelFactory for DefaultModels {
    fn model(&self, spec: &serde_json::Value, start_turn: usize) -> Result<Box<dyn Model>, String> {
        match spec.pointer("/model/kind").and_then(|k| k.as_str()) {
            Some("script") => {
                let turns = spec
                    .pointer("/model/turns")
                    .and_then(|t| t.as_array())
                    .cloned()
                    .unwrap_or_default();
                Ok(Box::new(crate::scripted::ScriptedModel::new(turns, start_turn)))
            }
            Some("openai") => openai_model(),
            other => Err(format!(
                "this run has no model configured ({other:?}); pass --script FILE or set VOUCH_MODEL_URL and VOUCH_MODEL"
            )),
        }
    }
}

fn openai_model() -> Result<Box<dyn Model>, String> {
    let config = openai::OpenAiConfig::from_env().map_err(|e| e.to_string())?;
    Ok(Box::new(openai::OpenAiModel::new(config)))
}
