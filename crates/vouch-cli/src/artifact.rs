//! `vouch artifact put FILE`, `get CID [-o FILE]`, `list` (§13.5): the home's
//! content-addressed store (its folder, or the bucket `[storage] artifacts` names). The work is done by `vouch-artifacts`.

use crate::bad;
use anyhow::{anyhow, Result};
use clap::Subcommand;
use serde_json::json;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use vouch_artifacts::ArtifactError;

#[derive(Subcommand)]
pub enum ArtifactCmd {
    /// Store a file by content id (`sha256:…`); prints the id.
    Put {
        /// The file to store.
        file: PathBuf,
        /// Pin it: a sweep of unreferenced staged artifacts never removes it.
        #[arg(long)]
        pin: bool,
    },
    /// The bytes of an artifact, checked against its id: to stdout, or to a file with -o.
    Get {
        /// The content id (`sha256:` and 64 hex digits).
        cid: String,
        /// Write the bytes to this file (atomically) instead of stdout.
        #[arg(short = 'o', long = "output", value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Staged (unpinned) artifacts.
    List,
}

fn artifact_err(e: ArtifactError) -> anyhow::Error {
    match e {
        ArtifactError::BadId(_) | ArtifactError::NotFound(_) | ArtifactError::TooLarge { .. } => {
            bad(e.to_string())
        }
        other => anyhow!(other),
    }
}

pub fn run(dir: &Path, cmd: ArtifactCmd, json: bool) -> Result<i32> {
    if !dir.is_dir() {
        return Err(bad(format!(
            "no vouch home at {} — run `vouch init` first (or set VOUCH_HOME to your home)",
            dir.display()
        )));
    }
    let store = crate::home::open_artifacts(dir)?;
    match cmd {
        ArtifactCmd::Put { file, pin } => {
            if !file.is_file() {
                return Err(bad(format!(
                    "{} is not a readable file; give the path of the file to store",
                    file.display()
                )));
            }
            let bytes =
                vouch_artifacts::read_file(&file, vouch_artifacts::ARTIFACT_BYTES_MAX_DEFAULT);
            let cid = bytes.and_then(|b| store.put(&b)).map_err(|e| match e {
                ArtifactError::TooLarge { .. } => bad(format!("{}: {e}", file.display())),
                other => artifact_err(other),
            })?;
            if pin {
                store.pin(&cid).map_err(artifact_err)?;
            }
            let st = store.stat(&cid).map_err(artifact_err)?;
            if json {
                outln!(
                    "{}",
                    json!({"cid": cid, "size_bytes": st.as_ref().map(|s| s.size_bytes), "pinned": st.as_ref().map(|s| s.pinned)})
                );
            } else {
                outln!("{cid}");
            }
            Ok(0)
        }
        ArtifactCmd::Get { cid, output } => {
            let bytes = store.get(&cid).map_err(artifact_err)?;
            match output {
                Some(path) => {
                    write_atomically(&path, &bytes)?;
                    if json {
                        outln!(
                            "{}",
                            json!({"cid": cid, "size_bytes": bytes.len(), "file": path})
                        );
                    } else {
                        errln!(
                            "{} bytes of {cid} written to {}.",
                            bytes.len(),
                            path.display()
                        );
                    }
                }
                None if json => {
                    return Err(bad(
                        "`--json` needs `-o FILE`: the bytes go to the file, the JSON to stdout",
                    ))
                }
                None => {
                    let mut out = std::io::stdout().lock();
                    out.write_all(&bytes)
                        .and_then(|_| out.flush())
                        .map_err(|e| anyhow!("write the artifact to stdout: {e}"))?;
                }
            }
            Ok(0)
        }
        ArtifactCmd::List => {
            let staged = store.list_staged().map_err(artifact_err)?;
            if json {
                outln!("{}", serde_json::to_string(&staged)?);
            } else if staged.is_empty() {
                outln!("No staged artifacts.");
            } else {
                for a in &staged {
                    outln!("{}  {:>10} bytes", a.cid, a.size_bytes);
                }
            }
            Ok(0)
        }
    }
}

/// Write `bytes` to `path` through a temporary file beside it and a rename, so the file is
/// either the whole artifact or what it was before.
fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let name = path
        .file_name()
        .ok_or_else(|| bad(format!("{} is not a file name", path.display())))?;
    let tmp = dir.join(format!(
        ".{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id()
    ));
    let result = (|| -> std::io::Result<()> {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, path)
    })();
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(bad(format!("cannot write {}: {e}", path.display())));
    }
    Ok(())
}
