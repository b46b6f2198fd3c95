//! A tool call decoded once: the tool's name picks a variant, serde reads its arguments into
//! that variant's struct, and a bad argument is one problem naming the field. The handlers
//! then read typed fields and never look a name or an argument up as a string again.

use crate::problem::{ApiError, ApiResult};
use serde::de::DeserializeOwned;
use serde::Deserialize;
use serde_json::Value;
use vouch_core::board::{FailureClass, TaskState};
use vouch_core::{ContentId, RunId, TaskId, Verb};
use vouch_store::board::Usage;

/// Every tool, with its arguments.
#[derive(Debug)]
pub enum ToolCall {
    TaskList(TaskList),
    TaskOffer(TaskOfferArgs),
    TaskClaim(Claim),
    TaskHeartbeat(Attempt),
    TaskSubmit(Attempt, Submit),
    TaskFail(Attempt, Fail),
    TaskAbort(Attempt, Abort),
    TaskContinue(Continue),
    TaskResult(TaskArg),
    TaskCancel(TaskArg),
    ArtifactPut(Attempt, ArtifactPut),
    ArtifactGet(ArtifactGet),
    Declare(Declare),
    Perform(Verb, Perform),
    Clarify(Clarify),
    Finish(Finish),
    RunStatus(RunArg),
    Receipt(Receipt),
}

impl ToolCall {
    /// Decodes the call of the tool `name`; an unknown tool is 404 naming it.
    pub fn decode(name: &str, args: &Value) -> ApiResult<ToolCall> {
        Ok(match name {
            "task_list" => ToolCall::TaskList(de(args)?),
            "task_offer" => ToolCall::TaskOffer(TaskOfferArgs::decode(args)?),
            "task_claim" => ToolCall::TaskClaim(de(args)?),
            "task_heartbeat" => ToolCall::TaskHeartbeat(de(args)?),
            "task_submit" => ToolCall::TaskSubmit(de(args)?, de(args)?),
            "task_fail" => ToolCall::TaskFail(de(args)?, de(args)?),
            "task_abort" => ToolCall::TaskAbort(de(args)?, de(args)?),
            "task_continue" => ToolCall::TaskContinue(de(args)?),
            "task_result" => ToolCall::TaskResult(de(args)?),
            "task_cancel" => ToolCall::TaskCancel(de(args)?),
            "artifact_put" => ToolCall::ArtifactPut(de(args)?, de(args)?),
            "artifact_get" => ToolCall::ArtifactGet(de(args)?),
            "declare" => ToolCall::Declare(Declare::decode(args)?),
            "clarify" => ToolCall::Clarify(de(args)?),
            "finish" => ToolCall::Finish(de(args)?),
            "run_status" => ToolCall::RunStatus(de(args)?),
            "receipt" => ToolCall::Receipt(de(args)?),
            other => match Verb::parse(other) {
                Some(verb) => ToolCall::Perform(verb, de(args)?),
                None => {
                    return Err(ApiError::not_found(format!(
                        "no tool `{}`; list the tools",
                        vouch_core::escape_line(other)
                    )))
                }
            },
        })
    }
}

/// Reads `args` into `T`; the first argument at fault is named as the problem's field.
fn de<T: DeserializeOwned>(args: &Value) -> ApiResult<T> {
    serde_path_to_error::deserialize::<_, T>(args).map_err(|e| {
        let path = e.path().to_string();
        let msg = e.into_inner().to_string();
        match (path.as_str(), msg.strip_prefix("missing field `")) {
            (p, Some(rest)) => {
                let name = rest.split('`').next().unwrap_or_default();
                let field = if p == "." {
                    name.to_string()
                } else {
                    format!("{p}.{name}")
                };
                ApiError::field(field.clone(), format!("`{field}` is required"))
            }
            (".", None) => ApiError::field("arguments", format!("the arguments: {msg}")),
            (p, None) => ApiError::field(p.to_string(), format!("`{p}` {msg}")),
        }
    })
}

/// Text that must say something: absent, empty or blank is refused as missing.
#[derive(Debug, Clone)]
pub struct Text(pub String);

impl<'de> Deserialize<'de> for Text {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        if s.trim().is_empty() {
            return Err(serde::de::Error::custom("is required: give some text"));
        }
        Ok(Text(s))
    }
}

#[derive(Debug, Deserialize)]
pub struct TaskList {
    pub state: Option<TaskState>,
    pub tag: Option<String>,
    pub correlation: Option<String>,
    pub limit: Option<u64>,
}

/// An offer is the HTTP route's body (`TaskOffer`, which refuses unknown fields) and the
/// idempotency key the route takes as a header.
#[derive(Debug)]
pub struct TaskOfferArgs {
    pub offer: vouch_runtime::offer::TaskOffer,
    pub idempotency_key: Option<String>,
}

impl TaskOfferArgs {
    fn decode(args: &Value) -> ApiResult<Self> {
        #[derive(Deserialize)]
        struct Key {
            idempotency_key: Option<String>,
        }
        let Key { idempotency_key } = de(args)?;
        let mut rest = args.clone();
        if let Some(m) = rest.as_object_mut() {
            m.remove("idempotency_key");
        }
        Ok(TaskOfferArgs {
            offer: de(&rest)?,
            idempotency_key,
        })
    }
}

/// A statement's signature, clock and nonce: all given by a caller who signs itself, none
/// when this server signs for its own worker.
#[derive(Debug, Default, Deserialize)]
pub struct Signed {
    pub at_ms: Option<i64>,
    pub nonce: Option<String>,
    pub signature: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct Claim {
    pub claimant: Option<String>,
    pub profile: Option<String>,
    pub model: Option<String>,
    #[serde(default)]
    pub types: Vec<String>,
    #[serde(default)]
    pub tags: Vec<String>,
    #[serde(flatten)]
    pub signed: Signed,
}

/// A live attempt as its claimant names it, with the statement's signature.
#[derive(Debug, Deserialize)]
pub struct Attempt {
    pub task: TaskId,
    pub attempt: u32,
    pub epoch: i64,
    pub claimant: Option<String>,
    #[serde(flatten)]
    pub signed: Signed,
}

#[derive(Debug, Deserialize)]
pub struct Submit {
    pub result: Value,
    pub self_assessment: Option<Value>,
    pub run: Option<RunId>,
    pub usage: Option<Usage>,
}

#[derive(Debug, Deserialize)]
pub struct Fail {
    pub retryable: bool,
    pub reason: Text,
    pub run: Option<RunId>,
    pub usage: Option<Usage>,
    pub class: Option<FailureClass>,
}

#[derive(Debug, Deserialize)]
pub struct Abort {
    pub reason: Text,
}

#[derive(Debug, Deserialize)]
pub struct Continue {
    pub task: TaskId,
    pub instructions: Text,
    pub mode: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct TaskArg {
    pub task: TaskId,
}

#[derive(Debug, Deserialize)]
pub struct ArtifactPut {
    pub text: Option<String>,
    pub hex: Option<String>,
}

#[derive(Debug, Deserialize)]
pub struct ArtifactGet {
    pub cid: ContentId,
}

/// `declare`: the run to amend (or the new run's title and task), and the manifest, which
/// is every other argument, checked by the host as the host's own model's `declare` is.
#[derive(Debug)]
pub struct Declare {
    pub run: Option<RunId>,
    pub title: Option<String>,
    pub task: Option<String>,
    pub manifest: Value,
}

impl Declare {
    fn decode(args: &Value) -> ApiResult<Self> {
        #[derive(Deserialize)]
        struct Head {
            run: Option<RunId>,
            title: Option<String>,
            task: Option<String>,
        }
        let Head { run, title, task } = de(args)?;
        let mut manifest = args.clone();
        if let Some(m) = manifest.as_object_mut() {
            for k in ["run", "title", "task"] {
                m.remove(k);
            }
        }
        Ok(Declare {
            run,
            title,
            task,
            manifest,
        })
    }
}

/// A declared item performed with its verb's tool.
#[derive(Debug, Deserialize)]
pub struct Perform {
    pub run: RunId,
    pub delivery: Text,
    #[serde(default)]
    pub payload: Value,
}

#[derive(Debug, Deserialize)]
pub struct Clarify {
    pub run: RunId,
    pub question: Text,
}

#[derive(Debug, Deserialize)]
pub struct Finish {
    pub run: RunId,
    #[serde(default)]
    pub text: String,
}

#[derive(Debug, Deserialize)]
pub struct RunArg {
    pub run: RunId,
}

#[derive(Debug, Deserialize)]
pub struct Receipt {
    pub run: RunId,
    #[serde(default)]
    pub signed: bool,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn refused(name: &str, args: Value) -> ApiError {
        ToolCall::decode(name, &args).unwrap_err()
    }

    #[test]
    fn each_bad_argument_is_named() {
        for (name, args, field) in [
            ("finish", json!({}), "run"),
            ("finish", json!({"run": "r\n"}), "run"),
            ("clarify", json!({"run": "r", "question": "  "}), "question"),
            (
                "task_heartbeat",
                json!({"task": "t", "epoch": 1}),
                "attempt",
            ),
            (
                "task_heartbeat",
                json!({"task": "t", "attempt": -1, "epoch": 1}),
                "attempt",
            ),
            (
                "task_fail",
                json!({"task": "t", "attempt": 1, "epoch": 1, "reason": "x"}),
                "retryable",
            ),
            (
                "task_fail",
                json!({"task": "t", "attempt": 1, "epoch": 1, "retryable": true, "reason": "x", "class": "bored"}),
                "class",
            ),
            (
                "task_submit",
                json!({"task": "t", "attempt": 1, "epoch": 1, "result": {}, "usage": {"turns": 1}}),
                "usage.tokens",
            ),
            ("task_list", json!({"state": "asleep"}), "state"),
            ("artifact_get", json!({"cid": "abc"}), "cid"),
            ("save", json!({"run": "r", "payload": {}}), "delivery"),
        ] {
            let e = refused(name, args.clone());
            assert_eq!(
                (e.code, e.field.as_deref()),
                ("invalid_field", Some(field)),
                "{name} {args}: {e:?}"
            );
        }
    }

    #[test]
    fn a_tool_is_decoded_into_its_variant() {
        let c = ToolCall::decode("send", &json!({"run": "r", "delivery": "d1"})).unwrap();
        let ToolCall::Perform(Verb::Send, p) = c else {
            panic!("{c:?}")
        };
        assert_eq!((p.run.as_str(), p.delivery.0.as_str()), ("r", "d1"));
        assert_eq!(p.payload, Value::Null);
        let c = ToolCall::decode("declare", &json!({"run": "r", "deliveries": []})).unwrap();
        let ToolCall::Declare(d) = c else {
            panic!("{c:?}")
        };
        assert_eq!(d.manifest, json!({"deliveries": []}));
        let e = refused("frobnicate", json!({}));
        assert_eq!(e.code, "not_found", "{e:?}");
    }
}
