//! The model factories of a real home: a run's stored model spec becomes the scripted model
//! (`vouch_runtime::scripted`) or the OpenAI-compatible client ([`crate::openai`]).

use crate::config::ModelConfig;
use crate::openai;
use vouch_runtime::host::ModelFactory;
use vouch_runtime::model::{Model, ModelError};
use vouch_store::spec::{ModelSpec, StoredSpec};

/// Builds models from a run's stored spec: `{"kind":"script","turns":[…]}` replays a script;
/// `{"kind":"openai"}` uses the OpenAI-compatible provider configured by environment.
pub struct DefaultModels;

impl ModelFactory for DefaultModels {
    fn model(
        &self,
        spec: &serde_json::Value,
        start_turn: usize,
    ) -> Result<Box<dyn Model>, ModelError> {
        match StoredSpec::read(spec).model {
            ModelSpec::Script { turns, .. } => Ok(Box::new(
                vouch_runtime::scripted::ScriptedModel::new(turns, start_turn),
            )),
            ModelSpec::OpenAi { profile, .. } => openai_model(profile.as_ref()),
            other => Err(ModelError::NoModel {
                kind: other.kind().map(str::to_string),
            }),
        }
    }

    fn record(&self, model: &ModelSpec) -> ModelSpec {
        record(None, model)
    }
}

/// The models of a home with a `[model]` profile in vouch.toml: as [`DefaultModels`], and a
/// run records that profile (under the `VOUCH_MODEL_*` overrides) when it starts.
pub struct ConfiguredModels {
    pub profile: Option<ModelConfig>,
}

impl ModelFactory for ConfiguredModels {
    fn model(
        &self,
        spec: &serde_json::Value,
        start_turn: usize,
    ) -> Result<Box<dyn Model>, ModelError> {
        DefaultModels.model(spec, start_turn)
    }

    fn record(&self, model: &ModelSpec) -> ModelSpec {
        record(self.profile.as_ref(), model)
    }
}

/// An `openai` model spec with the profile it starts with (issue 22 #3): any process then
/// continues the run with it, whatever its own environment says.
fn record(file: Option<&ModelConfig>, model: &ModelSpec) -> ModelSpec {
    let mut model = model.clone();
    if let ModelSpec::OpenAi {
        profile: profile @ None,
        ..
    } = &mut model
    {
        *profile = openai::OpenAiConfig::record_profile(file, |v| std::env::var(v).ok());
    }
    model
}

fn openai_model(profile: Option<&serde_json::Value>) -> Result<Box<dyn Model>, ModelError> {
    let config = match profile {
        Some(p) => {
            let env = |v: &str| std::env::var(v).ok();
            openai::OpenAiConfig::from_profile(&openai::OpenAiConfig::overlay(p, env), env)?
        }
        None => openai::OpenAiConfig::from_env()?,
    };
    Ok(Box::new(openai::OpenAiModel::new(config)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A run that names no model the host can build says so by a typed cause.
    #[test]
    fn a_run_without_a_usable_model_gets_a_typed_cause() {
        let err = |spec| DefaultModels.model(&spec, 0).err().unwrap();
        assert!(matches!(err(json!({})), ModelError::NoModel { kind: None }));
        let e = err(json!({"model": {"kind": "mystery"}}));
        assert!(
            matches!(&e, ModelError::NoModel { kind: Some(k) } if k == "mystery"),
            "{e:?}"
        );
        assert!(e.to_string().contains("pass --script FILE"), "{e}");
    }
}
