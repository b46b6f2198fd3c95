//! A run's spec as the store keeps it (`RunRecord::spec`): its model, its presence, and
//! whether the presence and quietness were asked for. Written once when the run is created
//! and read back typed, never with `.get("…")`.
//!
//! The stored text is hashed into the run's first event (`spec_sha256`), so these types
//! write exactly the members, in the order, that the spec has always had: `model`,
//! `presence`, `presence_explicit`, `quiet`; and in a model, `kind`, its own members, then
//! `prior` and `task` when an attempt has them (an `openai` model's `profile` last, as it
//! is recorded when the run starts).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use vouch_core::{Presence, TriggerKind};

/// A run's stored spec.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StoredSpec {
    pub model: ModelSpec,
    /// The presence the run started with (asked for, or the trigger's default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence: Option<Presence>,
    /// The presence was asked for (a flag, a routine), not the trigger's default.
    #[serde(default)]
    pub presence_explicit: bool,
    #[serde(default)]
    pub quiet: bool,
}

impl StoredSpec {
    /// Reads a stored spec. A spec that is not one whole (a store written by hand, a test's
    /// placeholder) reads as a model of no kind the host can drive, keeping each member it
    /// does hold that reads (an explicit presence stays explicit), the defaults for the rest.
    pub fn read(spec: &Value) -> StoredSpec {
        StoredSpec::deserialize(spec).unwrap_or_else(|_| {
            let flag = |k: &str| spec.get(k).and_then(Value::as_bool).unwrap_or(false);
            StoredSpec {
                model: ModelSpec::Unknown(spec.get("model").cloned().unwrap_or(Value::Null)),
                presence: spec
                    .get("presence")
                    .and_then(|p| Presence::deserialize(p).ok()),
                presence_explicit: flag("presence_explicit"),
                quiet: flag("quiet"),
            }
        })
    }

    /// The presence a run's decisions use: recorded, else its trigger's default.
    pub fn presence_or_default(&self, trigger: TriggerKind) -> Presence {
        self.presence.unwrap_or(default_presence(trigger))
    }

    /// Whether an agent outside the host drives the run of this stored spec, read without
    /// copying the rest of it (a script's turns).
    pub fn is_external(spec: &Value) -> bool {
        #[derive(Deserialize)]
        struct Head {
            model: Kind,
        }
        #[derive(Deserialize)]
        struct Kind {
            kind: String,
        }
        Head::deserialize(spec).is_ok_and(|h| h.model.kind == "external")
    }

    /// The stored form (its text is what the store keeps and the journal hashes).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The presence a run starts with when none is asked for: `watching` for a run the person
/// started, `away` for any other trigger.
pub fn default_presence(trigger: TriggerKind) -> Presence {
    if trigger == TriggerKind::Interactive {
        Presence::Watching
    } else {
        Presence::Away
    }
}

/// The model that drives a run. Read by [`ModelSpec::from_value`] (the derive's tagged,
/// flattened read buffered the whole model twice, a tenth of a short run's CPU); written by
/// the derive, so the stored text is as it always was.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind")]
pub enum ModelSpec {
    /// A script of turns replayed in order (scenarios, demos, benches, tests).
    #[serde(rename = "script")]
    Script {
        #[serde(default)]
        turns: Vec<Value>,
        #[serde(flatten)]
        attempt: AttemptTold,
    },
    /// The OpenAI-compatible model; `profile` is the one the run started with (recorded
    /// then, so any process continues the run with it).
    #[serde(rename = "openai")]
    OpenAi {
        #[serde(flatten)]
        attempt: AttemptTold,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        profile: Option<Value>,
    },
    /// An agent outside the host (MCP, §17) is the model; `via` is how it called.
    #[serde(rename = "external")]
    External {
        via: String,
        #[serde(flatten)]
        attempt: AttemptTold,
    },
    /// A kind this host does not know (kept as given, so its spec is stored unchanged);
    /// driving it answers "no model".
    #[serde(untagged)]
    Unknown(Value),
}

/// What a task attempt's run carries beside its model: the run it continues and what the
/// model is told (§13.4.3), both durable so any process rebuilds the same conversation.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AttemptTold {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prior: Option<Prior>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<Value>,
}

/// The run a continuation goes on from, and its pinned conversation's content id.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prior {
    pub run: String,
    pub conversation: String,
}

impl ModelSpec {
    /// A script of turns.
    pub fn script(turns: Vec<Value>) -> ModelSpec {
        ModelSpec::Script {
            turns,
            attempt: AttemptTold::default(),
        }
    }

    /// A script given as JSON (a scenario's, a file's): its array of turns; anything else is
    /// a script of no turns, as it always read.
    pub fn script_of(turns: Value) -> ModelSpec {
        match turns {
            Value::Array(turns) => ModelSpec::script(turns),
            _ => ModelSpec::script(vec![]),
        }
    }

    /// The configured OpenAI-compatible model (its profile recorded when the run starts).
    pub fn openai() -> ModelSpec {
        ModelSpec::OpenAi {
            attempt: AttemptTold::default(),
            profile: None,
        }
    }

    /// The model of a run an outside agent drives.
    pub fn external(via: &str) -> ModelSpec {
        ModelSpec::External {
            via: via.to_string(),
            attempt: AttemptTold::default(),
        }
    }

    /// The kind's stored name (`script`, `openai`, `external`, or the unknown one given).
    pub fn kind(&self) -> Option<&str> {
        match self {
            ModelSpec::Script { .. } => Some("script"),
            ModelSpec::OpenAi { .. } => Some("openai"),
            ModelSpec::External { .. } => Some("external"),
            ModelSpec::Unknown(v) => v.get("kind").and_then(Value::as_str),
        }
    }

    pub fn is_external(&self) -> bool {
        matches!(self, ModelSpec::External { .. })
    }

    /// A script's turns; none for any other kind.
    pub fn turns(&self) -> &[Value] {
        match self {
            ModelSpec::Script { turns, .. } => turns,
            _ => &[],
        }
    }

    /// What a task attempt's model is told and the run it continues (none otherwise).
    pub fn attempt(&self) -> Option<&AttemptTold> {
        match self {
            ModelSpec::Script { attempt, .. }
            | ModelSpec::OpenAi { attempt, .. }
            | ModelSpec::External { attempt, .. } => Some(attempt),
            ModelSpec::Unknown(_) => None,
        }
    }

    /// As [`attempt`](Self::attempt), to set; `None` for an unknown kind.
    pub fn attempt_mut(&mut self) -> Option<&mut AttemptTold> {
        match self {
            ModelSpec::Script { attempt, .. }
            | ModelSpec::OpenAi { attempt, .. }
            | ModelSpec::External { attempt, .. } => Some(attempt),
            ModelSpec::Unknown(_) => None,
        }
    }

    /// What a task attempt's model is told (§13.4.3); none for any other run.
    pub fn told_task(&self) -> Option<&Value> {
        self.attempt()?.task.as_ref()
    }

    /// What the attempt's model is told, member `key` (`system`, `message`, `target`, …).
    pub fn told(&self, key: &str) -> Option<&Value> {
        self.attempt()?.task.as_ref()?.get(key)
    }
}

/// What the hot readers of a stored spec need — its presence and quietness, the model's kind
/// and what a task attempt's model is told — read without the rest: a script's turns and a
/// profile are skipped, not copied, and no tagged-enum buffering happens (reading the whole
/// [`StoredSpec`] copied the spec once more for each of several reads a run).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct SpecHead {
    #[serde(default)]
    pub model: ModelHead,
    #[serde(default)]
    pub presence: Option<Presence>,
    #[serde(default)]
    pub presence_explicit: bool,
    #[serde(default)]
    pub quiet: bool,
}

/// A model's kind and what its attempt carries, without its other members.
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct ModelHead {
    #[serde(default)]
    pub kind: Option<String>,
    #[serde(default)]
    pub prior: Option<Prior>,
    #[serde(default)]
    pub task: Option<Value>,
}

impl SpecHead {
    /// Reads a stored spec's head; a spec that does not read (by hand, a placeholder) reads
    /// as the whole [`StoredSpec::read`] reads it.
    pub fn read(spec: &Value) -> SpecHead {
        SpecHead::deserialize(spec).unwrap_or_else(|_| {
            let s = StoredSpec::read(spec);
            SpecHead {
                model: ModelHead {
                    kind: s.model.kind().map(str::to_string),
                    prior: s.model.attempt().and_then(|a| a.prior.clone()),
                    task: s.model.told_task().cloned(),
                },
                presence: s.presence,
                presence_explicit: s.presence_explicit,
                quiet: s.quiet,
            }
        })
    }

    /// As [`StoredSpec::presence_or_default`].
    pub fn presence_or_default(&self, trigger: TriggerKind) -> Presence {
        self.presence.unwrap_or(default_presence(trigger))
    }

    /// What a task attempt's model is told (§13.4.3); none for any other run (nor for a
    /// model of a kind the host does not know, as [`ModelSpec::told_task`]).
    pub fn told_task(&self) -> Option<&Value> {
        match self.model.kind.as_deref() {
            Some("script" | "openai" | "external") => self.model.task.as_ref(),
            _ => None,
        }
    }

    /// What the attempt's model is told, member `key`.
    pub fn told(&self, key: &str) -> Option<&Value> {
        self.told_task()?.get(key)
    }

    /// The run a task continuation goes on from.
    pub fn prior(&self) -> Option<&Prior> {
        match self.model.kind.as_deref() {
            Some("script" | "openai" | "external") => self.model.prior.as_ref(),
            _ => None,
        }
    }
}

/// A model given as JSON (a routine's `model`, a worker's setting): a known kind typed, any
/// other kept as given.
impl From<Value> for ModelSpec {
    fn from(v: Value) -> ModelSpec {
        ModelSpec::from_value(v)
    }
}

impl<'de> Deserialize<'de> for ModelSpec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<ModelSpec, D::Error> {
        Value::deserialize(d).map(ModelSpec::from_value)
    }
}

impl ModelSpec {
    /// A model from its stored JSON, its members moved, not copied: a known kind whose
    /// members read (a script's `turns` an array, an attempt's `prior` a run and a
    /// conversation, an outside agent's `via` a string) is typed; anything else is kept as
    /// given, [`ModelSpec::Unknown`]. Members a kind does not have are dropped.
    pub fn from_value(v: Value) -> ModelSpec {
        let Some(kind) = known_kind(&v) else {
            return ModelSpec::Unknown(v);
        };
        let Value::Object(mut m) = v else {
            unreachable!("known_kind accepts objects only")
        };
        let mut take = |k: &str| m.remove(k).filter(|v| !v.is_null());
        let attempt = AttemptTold {
            prior: take("prior").and_then(|p| Prior::deserialize(p).ok()),
            task: take("task"),
        };
        match kind {
            Kind::Script => ModelSpec::Script {
                turns: match take("turns") {
                    Some(Value::Array(turns)) => turns,
                    _ => vec![],
                },
                attempt,
            },
            Kind::OpenAi => ModelSpec::OpenAi {
                attempt,
                profile: take("profile"),
            },
            Kind::External => ModelSpec::External {
                via: match take("via") {
                    Some(Value::String(via)) => via,
                    _ => String::new(),
                },
                attempt,
            },
        }
    }
}

/// The kinds a stored model can be typed as.
enum Kind {
    Script,
    OpenAi,
    External,
}

/// The kind `v` reads as, checked whole before anything is moved out of it: `None` keeps
/// it as given.
fn known_kind(v: &Value) -> Option<Kind> {
    let m = v.as_object()?;
    let prior_reads = match m.get("prior") {
        None | Some(Value::Null) => true,
        Some(p) => Prior::deserialize(p).is_ok(),
    };
    if !prior_reads {
        return None;
    }
    match m.get("kind")?.as_str()? {
        "script" => match m.get("turns") {
            None | Some(Value::Array(_)) => Some(Kind::Script),
            _ => None,
        },
        "openai" => Some(Kind::OpenAi),
        "external" => m.get("via").and_then(Value::as_str).map(|_| Kind::External),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The head reads what the whole read reads, for every stored form.
    #[test]
    fn the_head_agrees_with_the_whole_spec() {
        for v in [
            json!({"model":{"kind":"script","turns":[{"final":"x"}],"prior":{"run":"r1","conversation":"c"},"task":{"system":"s"}},"presence":"away","presence_explicit":true,"quiet":true}),
            json!({"model":{"kind":"openai","profile":{"url":"u"}},"presence":"nearby","presence_explicit":false,"quiet":false}),
            json!({"model":{"kind":"external","via":"http","task":{"message":"m"}}}),
            json!({"model":{"kind":"anthropic","task":{"message":"m"}},"presence":"watching"}),
            json!({"presence": "away", "presence_explicit": true}),
            json!({"model": null}),
            json!("not a spec"),
        ] {
            let (h, s) = (SpecHead::read(&v), StoredSpec::read(&v));
            assert_eq!(h.presence, s.presence, "{v}");
            assert_eq!(h.presence_explicit, s.presence_explicit, "{v}");
            assert_eq!(h.quiet, s.quiet, "{v}");
            assert_eq!(h.told_task(), s.model.told_task(), "{v}");
            assert_eq!(
                h.prior(),
                s.model.attempt().and_then(|a| a.prior.as_ref()),
                "{v}"
            );
        }
    }

    /// Each form a spec has been stored in reads typed and writes back byte for byte.
    #[test]
    fn a_stored_spec_round_trips_byte_for_byte() {
        for text in [
            r#"{"model":{"kind":"script","turns":[{"final":"é\n\"x\""},{"n":1.5}]},"presence":"watching","presence_explicit":false,"quiet":false}"#,
            r#"{"model":{"kind":"openai","profile":{"url":"http://x","model":"m"}},"presence":"away","presence_explicit":true,"quiet":true}"#,
            r#"{"model":{"kind":"openai"},"presence":"nearby","presence_explicit":false,"quiet":false}"#,
            r#"{"model":{"kind":"external","via":"stdio","task":{"message":"m"}},"presence":"away","presence_explicit":true,"quiet":false}"#,
            r#"{"model":{"kind":"script","turns":[],"prior":{"run":"r1","conversation":"sha256:ab"},"task":{"system":"s","target":{"a":1}}},"presence":"away","presence_explicit":true,"quiet":false}"#,
            r#"{"model":{"kind":"openai","prior":{"run":"r1","conversation":"c"},"task":{"message":"m"},"profile":{"url":"u"}},"presence":"away","presence_explicit":true,"quiet":false}"#,
            r#"{"model":{"kind":"anthropic","x":1},"presence":"away","presence_explicit":false,"quiet":false}"#,
            r#"{"model":null,"presence":"away","presence_explicit":false,"quiet":false}"#,
        ] {
            let v: Value = serde_json::from_str(text).unwrap();
            let spec = StoredSpec::read(&v);
            assert_eq!(spec.to_value().to_string(), text, "{spec:?}");
        }
    }

    #[test]
    fn the_model_reads_typed() {
        let s = StoredSpec::read(
            &json!({"model": {"kind": "script", "turns": [{"final": "x"}], "task": {"message": "m"}}}),
        );
        assert_eq!(s.model.kind(), Some("script"));
        assert_eq!(s.model.turns().len(), 1);
        assert_eq!(s.model.told("message"), Some(&json!("m")));
        assert_eq!(
            s.presence_or_default(TriggerKind::Interactive),
            Presence::Watching
        );
        assert!(!s.presence_explicit);
        assert!(
            StoredSpec::read(&json!({"model": {"kind": "external", "via": "http"}}))
                .model
                .is_external()
        );
        assert!(StoredSpec::is_external(
            &json!({"model": {"kind": "external", "via": "http"}})
        ));
        assert!(!StoredSpec::is_external(
            &json!({"model": {"kind": "script"}})
        ));
        let odd = ModelSpec::from(json!({"kind": "anthropic"}));
        assert_eq!(odd.kind(), Some("anthropic"));
        assert_eq!(StoredSpec::read(&json!({"k": 1})).model.kind(), None);
    }

    /// A model whose members do not read stays as given; nulls read as absent.
    #[test]
    fn a_model_whose_members_do_not_read_is_kept_as_given() {
        for odd in [
            json!({"kind": "script", "turns": null}),
            json!({"kind": "script", "turns": {"a": 1}}),
            json!({"kind": "external"}),
            json!({"kind": "external", "via": 3}),
            json!({"kind": "openai", "prior": {"run": "r"}}),
            json!({"kind": 7}),
            json!(["script"]),
        ] {
            assert_eq!(
                ModelSpec::from(odd.clone()),
                ModelSpec::Unknown(odd.clone())
            );
            let back: ModelSpec = serde_json::from_value(odd.clone()).unwrap();
            assert_eq!(back, ModelSpec::Unknown(odd));
        }
        let m = ModelSpec::from(
            json!({"kind": "openai", "prior": null, "task": null, "profile": null, "x": 1}),
        );
        assert_eq!(m, ModelSpec::openai());
        assert_eq!(
            ModelSpec::from(json!({"kind": "script"})),
            ModelSpec::script(vec![])
        );
    }
}
