//! Work tools offered to the model (no delivery effect): read a file from the allowed folder,
//! write an artifact beneath the run's own folder.

use crate::folder::FolderProvider;
use serde_json::Value;
use std::path::PathBuf;
use vouch_runtime::fsroot::{host_name, FolderRoot};
use vouch_runtime::host::WorkTools;
use vouch_runtime::model::{ToolCall, ToolSpec};

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
                parameters: vouch_runtime::schemas::read_file(),
            },
            ToolSpec {
                name: "write_artifact".into(),
                description:
                    "Write a working artifact (notes, drafts) for this run; not a delivery.".into(),
                parameters: vouch_runtime::schemas::write_artifact(),
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
