//! Reading scenario files: a file, or a folder (every `*.json` below it, sorted).

use crate::scenario::Scenario;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Files per load call; a corpus larger than this is a mistake (a wrong folder).
pub const FILES_MAX: usize = 100_000;
/// Folder depth below a given path.
pub const DEPTH_MAX: usize = 32;

/// Why input could not be read. Each variant names the file; `Parse` names the field.
/// Callers exit with code 2 on any of these (scenarios.md).
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error("{path}: cannot read: {message}")]
    Io { path: PathBuf, message: String },
    #[error("{path}: at `{field}`: {message}")]
    Parse {
        path: PathBuf,
        /// The JSON path of the offending field (`script[3].payload`), `.` for the top.
        field: String,
        message: String,
        line: usize,
        column: usize,
    },
    #[error("{path}: id `{id}` is already used by {other}; scenario ids are unique in a corpus")]
    DuplicateId {
        path: PathBuf,
        id: String,
        other: PathBuf,
    },
    #[error("{path}: no scenario files (*.json) found")]
    Empty { path: PathBuf },
}

impl LoadError {
    pub fn path(&self) -> &Path {
        match self {
            LoadError::Io { path, .. }
            | LoadError::Parse { path, .. }
            | LoadError::DuplicateId { path, .. }
            | LoadError::Empty { path } => path,
        }
    }
}

/// Parse one scenario from text; `path` is used in errors only.
pub fn parse_scenario(path: &Path, text: &str) -> Result<Scenario, LoadError> {
    let mut de = serde_json::Deserializer::from_str(text);
    let r: Result<Scenario, _> = serde_path_to_error::deserialize(&mut de);
    let s = r.map_err(|e| {
        let field = e.path().to_string();
        let inner = e.into_inner();
        LoadError::Parse {
            path: path.to_path_buf(),
            field,
            line: inner.line(),
            column: inner.column(),
            message: inner.to_string(),
        }
    })?;
    de.end().map_err(|e| LoadError::Parse {
        path: path.to_path_buf(),
        field: ".".into(),
        line: e.line(),
        column: e.column(),
        message: e.to_string(),
    })?;
    s.check().map_err(|(field, message)| LoadError::Parse {
        path: path.to_path_buf(),
        field,
        line: 0,
        column: 0,
        message,
    })?;
    Ok(s)
}

fn collect(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<(), LoadError> {
    if depth > DEPTH_MAX {
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|e| LoadError::Io {
        path: dir.to_path_buf(),
        message: e.to_string(),
    })?;
    for entry in entries {
        let entry = entry.map_err(|e| LoadError::Io {
            path: dir.to_path_buf(),
            message: e.to_string(),
        })?;
        let p = entry.path();
        if p.is_dir() {
            collect(&p, depth + 1, out)?;
        } else if p.extension().and_then(|x| x.to_str()) == Some("json") {
            out.push(p);
        }
        if out.len() > FILES_MAX {
            return Err(LoadError::Io {
                path: dir.to_path_buf(),
                message: format!("more than {FILES_MAX} scenario files"),
            });
        }
    }
    Ok(())
}

/// Load every scenario named by `paths`: a file, or a folder (every `*.json` below it,
/// sorted by path). Ids must be unique across everything loaded.
pub fn load_paths(paths: &[PathBuf]) -> Result<Vec<(PathBuf, Scenario)>, LoadError> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_dir() {
            let mut found = Vec::new();
            collect(p, 0, &mut found)?;
            if found.is_empty() {
                return Err(LoadError::Empty { path: p.clone() });
            }
            found.sort();
            files.extend(found);
        } else {
            files.push(p.clone());
        }
    }
    let mut seen: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut out = Vec::with_capacity(files.len());
    for f in files {
        let text = read_bounded(&f).map_err(|message| LoadError::Io {
            path: f.clone(),
            message,
        })?;
        let s = parse_scenario(&f, &text)?;
        if let Some(other) = seen.get(&s.id) {
            return Err(LoadError::DuplicateId {
                path: f.clone(),
                id: s.id.clone(),
                other: other.clone(),
            });
        }
        seen.insert(s.id.clone(), f.clone());
        out.push((f, s));
    }
    Ok(out)
}

/// Bytes one scenario file holds at most (the corpus's largest is a few KiB).
pub const SCENARIO_FILE_BYTES_MAX: u64 = 1 << 20;

/// A scenario file as text, read only up to [`SCENARIO_FILE_BYTES_MAX`]: a link to
/// `/dev/zero` or a huge file is refused at the limit, never read whole.
pub fn read_bounded(path: &Path) -> Result<String, String> {
    use std::io::Read as _;
    let f = std::fs::File::open(path).map_err(|e| e.to_string())?;
    let mut bytes = vec![];
    f.take(SCENARIO_FILE_BYTES_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    if bytes.len() as u64 > SCENARIO_FILE_BYTES_MAX {
        return Err(format!(
            "more than {SCENARIO_FILE_BYTES_MAX} bytes (the limit of a scenario file)"
        ));
    }
    String::from_utf8(bytes).map_err(|e| format!("not UTF-8 text: {e}"))
}
