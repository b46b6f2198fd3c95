//! Work tools of a scripted world: scripted runs may name tools of their own world (search,
//! fetch…), answered by [`ScriptWorkTools`] as the script says. The standard tools (read a
//! file from the allowed folder, write an artifact) are `vouch_adapters::tools`.

use crate::host::WorkTools;
use crate::model::{ToolCall, ToolSpec};
use serde_json::Value;

/// The work tools of a scripted world: known tools behave for real; in a scripted run any
/// other name answers as the run's script says (`fails: true` → an error).
pub struct ScriptWorkTools<T: WorkTools> {
    pub inner: T,
}

impl<T: WorkTools> WorkTools for ScriptWorkTools<T> {
    fn specs(&self) -> Vec<ToolSpec> {
        self.inner.specs()
    }
    fn call(
        &self,
        run_id: &str,
        spec: &Value,
        call: &ToolCall,
        args: &Value,
    ) -> Option<Result<String, String>> {
        let index: Option<usize> = call.id.strip_prefix("call_").and_then(|i| i.parse().ok());
        let spec_t = vouch_store::spec::StoredSpec::read(spec);
        let scripted = matches!(spec_t.model, vouch_store::spec::ModelSpec::Script { .. });
        let turn = index.and_then(|i| spec_t.model.turns().get(i));
        if turn.and_then(|t| t.get("fails")).and_then(Value::as_bool) == Some(true) {
            return Some(Err(format!("{} failed", call.name)));
        }
        if let Some(r) = self.inner.call(run_id, spec, call, args) {
            return Some(r);
        }
        scripted.then(|| Ok(format!("{}: done", call.name)))
    }
}
