//! Work tools offered to the model (no delivery effect): read a file from the allowed folder,
//! write an artifact. Scripted runs may also name tools of their own world (search, fetch…),
//! answered by [`ScriptWorkTools`] as the script says.

use crate::fsroot::{host_name, FolderRoot};
use crate::host::WorkTools;
use crate::model::{ToolCall, ToolSpec};
use crate::provider::FolderProvider;
use serde_json::Value;
use std::path::PathBuf;

/// Bytes a `read_file` returns at most.
pub const READ_BYTES_MAX: usize = 256 * 1024;

/// Bytes a `write_artifact` writes at most.
pub const ARTIFACT_TEXT_BYTES_MAX: usize = 1024 * 1024;

/// A working artifact's name: a plain file name the model may choose (a dot allowed for an
/// extension), never a path, never hidden, never `.` or `..`.
fn is_artifact_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= vouch_core::ID_CHARS_MAX
        && !name.starts_with('.')
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

pub struct StandardTools {
    pub folder: FolderProvider,
    pub artifacts_dir: PathBuf,
}

impl WorkTools for StandardTools {
    fn specs(&self) -> Vec<ToolSpec> {
        vec![
            ToolSpec {
                name: "read_file".into(),
                description: "Read a text file from the allowed folder.".into(),
                parameters: crate::schemas::read_file(),
            },
            ToolSpec {
                name: "write_artifact".into(),
                description:
                    "Write a working artifact (notes, drafts) for this run; not a delivery.".into(),
                parameters: crate::schemas::write_artifact(),
            },
        ]
    }

    fn call(
        &self,
        run_id: &str,
        _spec: &Value,
        call: &ToolCall,
        args: &Value,
    ) -> Option<Result<String, String>> {
        match call.name.as_str() {
            "read_file" => {
                let path = args.get("path").and_then(Value::as_str).unwrap_or("");
                Some(
                    self.folder
                        .root()
                        .read(path, READ_BYTES_MAX)
                        .map(|b| String::from_utf8_lossy(&b).into_owned())
                        .map_err(|e| format!("cannot read `{path}`: {e}")),
                )
            }
            "write_artifact" => {
                let name = args.get("name").and_then(Value::as_str).unwrap_or("");
                let text = args.get("text").and_then(Value::as_str).unwrap_or("");
                if !is_artifact_name(name) {
                    return Some(Err(format!(
                        "artifact name `{}` must be 1–64 characters of A–Z a–z 0–9 . _ - not starting with a dot; choose such a name",
                        vouch_core::shown_id(name)
                    )));
                }
                if text.len() > ARTIFACT_TEXT_BYTES_MAX {
                    return Some(Err(format!(
                        "artifact text is {} bytes; at most {ARTIFACT_TEXT_BYTES_MAX} are written; write less",
                        text.len()
                    )));
                }
                // Beneath the artifacts folder, in the run's own folder named by the host.
                let file = format!("{}/{name}", host_name(run_id));
                Some(
                    FolderRoot::new(&self.artifacts_dir)
                        .write_atomic(&file, text.as_bytes())
                        .map(|_| format!("artifact {name} written ({} bytes)", text.len()))
                        .map_err(|e| format!("cannot write artifact: {e}")),
                )
            }
            _ => None,
        }
    }
}

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
