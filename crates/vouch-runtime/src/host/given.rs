//! What a task attempt is given besides its brief (§13.1.2, §13.1.3): pinned context — the
//! task's own and its runtime profile's default — placed where the profile's policy says, and
//! input artifacts the model reads through the `read_input` tool. Everything is read from the
//! artifact store by content id (which re-hashes it); the model reads only its own task's
//! content ids through the host's tools, never a path.

use super::task::{AttemptJob, RuntimeProfile, TaskWork};
use super::*;

/// Bytes one `read_input` / `read_context` call returns at most.
pub const READ_BYTES_MAX: usize = 64 * 1024;
/// Default context texts a profile carries at most.
pub const PROFILE_CONTEXT_MAX: usize = crate::offer::CONTEXT_MAX;

/// The tool the model reads its task's input artifacts with.
pub const READ_INPUT: &str = "read_input";
/// The tool the model reads pinned context placed as files with.
pub const READ_CONTEXT: &str = "read_context";
/// The tool the model reads its worker's own signed diary with (§13.6.1).
pub const READ_DIARY: &str = "read_diary";
/// Diary entries one `read_diary` call returns at most.
pub const DIARY_ENTRIES_MAX: usize = 20;

/// Where pinned context goes (§13.1.2): part of the runtime profile's policy
/// (`context_placement`), so part of its fingerprint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Placement {
    /// Appended to the host's system message.
    System,
    /// In the attempt's first user message (the default).
    User,
    /// Not in any message: listed, and read through `read_context`.
    File,
}

impl Placement {
    pub const ALL: [&'static str; 3] = ["system", "user", "file"];

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "system" => Some(Placement::System),
            "user" => Some(Placement::User),
            "file" => Some(Placement::File),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Placement::System => "system",
            Placement::User => "user",
            Placement::File => "file",
        }
    }

    /// The profile's placement; `user` without a profile or without one said.
    pub fn of(profile: Option<&RuntimeProfile>) -> Self {
        profile
            .and_then(|p| p.policy.get("context_placement"))
            .and_then(Value::as_str)
            .and_then(Placement::parse)
            .unwrap_or(Placement::User)
    }
}

/// A profile's `context` (content ids, at most [`PROFILE_CONTEXT_MAX`]) and
/// `context_placement` (one of [`Placement::ALL`]), checked when the profile is read.
pub fn check_profile_context(name: &str, o: &serde_json::Map<String, Value>) -> Result<(), String> {
    if let Some(c) = o.get("context") {
        let ids = c.as_array().filter(|a| a.len() <= PROFILE_CONTEXT_MAX);
        let Some(ids) = ids else {
            return Err(format!(
                "runtime profile `{name}`: context must be an array of at most {PROFILE_CONTEXT_MAX} content ids"
            ));
        };
        for id in ids {
            let ok = id
                .as_str()
                .is_some_and(|s| vouch_artifacts::parse_cid(s).is_ok());
            if !ok {
                return Err(format!(
                    "runtime profile `{name}`: context entry {id} is not a content id (sha256:…); store the file with `vouch artifact put FILE --pin`"
                ));
            }
        }
    }
    if let Some(p) = o.get("context_placement") {
        if p.as_str().and_then(Placement::parse).is_none() {
            return Err(format!(
                "runtime profile `{name}`: context_placement must be one of {}",
                Placement::ALL.join(", ")
            ));
        }
    }
    Ok(())
}

/// What one attempt is given: the pinned texts (by content id, in order: the task's, then its
/// profile's default ones it does not already pin), where they go, and the input artifacts
/// (content id and size) it may read.
#[derive(Debug, Clone)]
pub struct Given {
    pub context: Vec<(String, String)>,
    pub placement: Placement,
    pub inputs: Vec<(String, u64)>,
}

/// Read what the attempt `job` is given. A pinned text or input artifact that cannot be read
/// stops the attempt before its run (a tool error, retryable).
pub(super) fn given(work: &TaskWork, job: &AttemptJob) -> HostResult<Given> {
    given_from(work.board.as_deref(), work.artifact_store(), job)
}

/// [`given`] from a board and an artifact store: the host that opens a remote attempt's run
/// tells its model the same as a local worker's.
pub(super) fn given_from(
    board: Option<&dyn vouch_store::board::BoardStore>,
    artifacts: Option<&dyn vouch_artifacts::ArtifactStore>,
    job: &AttemptJob,
) -> HostResult<Given> {
    let placement = Placement::of(job.profile.as_ref());
    let task = match board {
        Some(b) => b.task(&job.task_id)?,
        None => None,
    };
    let (cids, inputs) = pinned(board, task.as_ref(), job)?;
    if cids.is_empty() && inputs.is_empty() {
        return Ok(Given {
            context: vec![],
            placement,
            inputs: vec![],
        });
    }
    let store = artifacts.ok_or_else(|| {
        HostError::BadInput(format!(
            "task {} pins context or input artifacts, and this worker has no artifact store to read them",
            job.task_id
        ))
    })?;
    let context = cids
        .iter()
        .map(|cid| Ok((cid.clone(), context_text(store, cid)?)))
        .collect::<HostResult<Vec<_>>>()?;
    // The offer bounds the task's own texts; the profile's defaults are bounded the same way.
    let own = task.as_ref().map_or(0, |t| t.spec.context.len());
    let defaults_bytes: usize = context.iter().skip(own).map(|(_, t)| t.len()).sum();
    if defaults_bytes > crate::offer::CONTEXT_BYTES_MAX {
        return Err(HostError::BadInput(format!(
            "the profile's default context is {defaults_bytes} bytes, more than {} together",
            crate::offer::CONTEXT_BYTES_MAX
        )));
    }
    let inputs = inputs
        .into_iter()
        .map(|cid| {
            let st = store.stat(&cid).ok().flatten().ok_or_else(|| {
                HostError::BadInput(format!("input artifact {cid} is not stored here"))
            })?;
            Ok((cid, st.size_bytes))
        })
        .collect::<HostResult<Vec<_>>>()?;
    Ok(Given {
        context,
        placement,
        inputs,
    })
}

/// The content ids an attempt is given: the task's context, then its profile's default
/// context; the task's input artifacts, and a judge's also those of the task it judges.
fn pinned(
    board: Option<&dyn vouch_store::board::BoardStore>,
    task: Option<&vouch_store::board::TaskRecord>,
    job: &AttemptJob,
) -> HostResult<(Vec<String>, Vec<String>)> {
    let mut cids: Vec<String> = task.map(|t| t.spec.context.clone()).unwrap_or_default();
    let defaults = job
        .profile
        .as_ref()
        .and_then(|p| p.policy.get("context"))
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for d in defaults.iter().filter_map(Value::as_str) {
        if !cids.iter().any(|c| c == d) {
            cids.push(d.to_string());
        }
    }
    let mut inputs: Vec<String> = task
        .map(|t| t.spec.input_artifacts.clone())
        .unwrap_or_default();
    // A judge sees the input artifacts of the task it judges (§13.1.3).
    if let (Some(board), Some(target)) = (
        board,
        (job.kind == "judge")
            .then(|| job.input.get("target").and_then(Value::as_str))
            .flatten(),
    ) {
        if let Some(t) = board.task(target)? {
            for c in t.spec.input_artifacts {
                if !inputs.contains(&c) {
                    inputs.push(c);
                }
            }
        }
    }
    Ok((cids, inputs))
}

fn context_text(store: &dyn vouch_artifacts::ArtifactStore, cid: &str) -> HostResult<String> {
    let bytes = store
        .get(cid)
        .map_err(|e| HostError::BadInput(format!("pinned context {cid} cannot be read: {e}")))?;
    String::from_utf8(bytes)
        .map_err(|_| HostError::BadInput(format!("pinned context {cid} is not UTF-8 text")))
}

/// The told message's parts for what the attempt is given, and the keys `model.task` keeps:
/// `context` (content ids), `context_placement`, `system` (the text added to the system
/// message, when placed there) and `input_artifacts` (content ids).
pub(super) fn tell(given: &Given, msg: &mut String, told: &mut Value) {
    let listed = |items: &mut dyn Iterator<Item = (&String, usize)>| -> String {
        items.map(|(c, n)| format!("- {c} ({n} bytes)\n")).collect()
    };
    if !given.context.is_empty() {
        told["context"] = json!(given.context.iter().map(|(c, _)| c).collect::<Vec<_>>());
        told["context_placement"] = json!(given.placement.as_str());
    }
    match given.placement {
        // The exact bytes of each pinned text, by content id; the run's spec keeps them.
        Placement::User => {
            for (cid, text) in &given.context {
                msg.push_str(&format!("\nPinned context {cid}:\n{text}\n"));
            }
        }
        Placement::System if !given.context.is_empty() => {
            let mut sys = String::new();
            for (cid, text) in &given.context {
                sys.push_str(&format!("\n\nPinned context {cid}:\n{text}"));
            }
            told["system"] = json!(sys);
        }
        Placement::System => {}
        Placement::File if !given.context.is_empty() => {
            msg.push_str(&format!(
                "\nPinned context, as files you read with the `{READ_CONTEXT}` tool by content id:\n{}",
                listed(&mut given.context.iter().map(|(c, t)| (c, t.len())))
            ));
        }
        Placement::File => {}
    }
    if !given.inputs.is_empty() {
        told["input_artifacts"] = json!(given.inputs.iter().map(|(c, _)| c).collect::<Vec<_>>());
        msg.push_str(&format!(
            "\nInput artifacts of this task, read with the `{READ_INPUT}` tool by content id (at most {READ_BYTES_MAX} bytes a call; `offset` reads on):\n{}",
            listed(&mut given.inputs.iter().map(|(c, n)| (c, *n as usize)))
        ));
    }
}

fn read_params() -> Value {
    crate::schemas::object(vec![
        (
            "cid",
            json!({"type": "string", "description": "a content id your task lists"}),
        ),
        (
            "offset",
            json!({"type": ["integer", "null"], "minimum": 0, "description": "the first byte to read (null: 0)"}),
        ),
        (
            "length",
            json!({"type": ["integer", "null"], "minimum": 1, "maximum": READ_BYTES_MAX, "description": "bytes to read at most (null: the limit)"}),
        ),
    ])
}

pub(super) fn read_input_spec() -> ToolSpec {
    ToolSpec {
        name: READ_INPUT.into(),
        description: format!("Read an input artifact of this task by content id (at most {READ_BYTES_MAX} bytes a call, from `offset`; `more` says whether bytes remain). Only the content ids your task lists can be read."),
        parameters: read_params(),
    }
}

pub(super) fn read_context_spec() -> ToolSpec {
    ToolSpec {
        name: READ_CONTEXT.into(),
        description: format!("Read a pinned context file of this task by content id (at most {READ_BYTES_MAX} bytes a call, from `offset`; `more` says whether bytes remain). Only the content ids your task lists can be read."),
        parameters: read_params(),
    }
}

pub(super) fn read_diary_spec() -> ToolSpec {
    ToolSpec {
        name: READ_DIARY.into(),
        description: format!("Read your own diary (what this worker recorded before): the last `count` entries (at most {DIARY_ENTRIES_MAX}) before `before_seq`, oldest first."),
        parameters: crate::schemas::object(vec![
            (
                "before_seq",
                json!({"type": ["integer", "null"], "minimum": 1, "description": "entries before this seq (null: up to the newest)"}),
            ),
            (
                "count",
                json!({"type": ["integer", "null"], "minimum": 1, "maximum": DIARY_ENTRIES_MAX, "description": "entries at most (null: the limit)"}),
            ),
        ]),
    }
}

/// `read_diary`: the worker's own diary, the last entries before `before_seq`, at most
/// [`DIARY_ENTRIES_MAX`] and [`READ_BYTES_MAX`] bytes of bodies (older entries are dropped
/// first to fit). Each successful call is one read (§13.7.3).
pub(super) fn read_diary(
    diary: Option<&(Arc<dyn vouch_store::IdentityStore>, String)>,
    args: &Value,
) -> Result<String, String> {
    let (ids, name) = diary.ok_or("this worker keeps no diary to read")?;
    let before = args
        .get("before_seq")
        .and_then(Value::as_i64)
        .unwrap_or(i64::MAX);
    let count = args
        .get("count")
        .and_then(Value::as_u64)
        .map_or(DIARY_ENTRIES_MAX, |c| {
            usize::try_from(c).unwrap_or(DIARY_ENTRIES_MAX)
        })
        .clamp(1, DIARY_ENTRIES_MAX);
    let all = ids
        .diary(name)
        .map_err(|e| format!("cannot read the diary of {name}: {e}"))?;
    let mut picked: Vec<Value> = all
        .iter()
        .filter(|e| e.seq < before)
        .rev()
        .take(count)
        .map(|e| json!({"seq": e.seq, "at_ms": e.at_ms, "body": e.body}))
        .collect();
    picked.reverse();
    while picked.len() > 1 && Value::Array(picked.clone()).to_string().len() > READ_BYTES_MAX {
        picked.remove(0);
    }
    Ok(json!({"diary": name, "entries": picked, "total": all.len()}).to_string())
}

/// `read_input` / `read_context`: read `args.cid` if the run's spec lists it under `key`
/// (`input_artifacts` or `context`), bounded. Each successful call is one read (§13.7.3).
pub(super) fn read(
    store: Option<&dyn vouch_artifacts::ArtifactStore>,
    spec: &Value,
    key: &str,
    args: &Value,
) -> Result<String, String> {
    let spec = StoredSpec::read(spec);
    let listed: Vec<&str> = spec
        .model
        .told(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if key == "context"
        && spec.model.told("context_placement").and_then(Value::as_str)
            != Some(Placement::File.as_str())
    {
        return Err("this attempt's pinned context is in its messages, not files to read".into());
    }
    let store = store.ok_or("this worker has no artifact store to read from")?;
    let Some(cid) = args.get("cid").and_then(Value::as_str) else {
        return Err("name the `cid` to read (a content id your task lists)".into());
    };
    if !listed.contains(&cid) {
        let what = if key == "context" {
            "a pinned context file"
        } else {
            "an input artifact"
        };
        return Err(format!(
            "`{}` is not {what} of this task; read only the content ids it lists",
            cid.chars().take(80).collect::<String>()
        ));
    }
    let bytes = store
        .get(cid)
        .map_err(|e| format!("cannot read {cid}: {e}"))?;
    Ok(slice(cid, &bytes, args).to_string())
}

/// At most [`READ_BYTES_MAX`] bytes from `offset`: text when the artifact is UTF-8 (the end
/// moved back to a character boundary), else hex.
fn slice(cid: &str, bytes: &[u8], args: &Value) -> Value {
    let total = bytes.len();
    let offset = args
        .get("offset")
        .and_then(Value::as_u64)
        .map_or(0, |o| usize::try_from(o).unwrap_or(usize::MAX))
        .min(total);
    let length = args
        .get("length")
        .and_then(Value::as_u64)
        .map_or(READ_BYTES_MAX, |l| {
            usize::try_from(l).unwrap_or(READ_BYTES_MAX)
        })
        .clamp(1, READ_BYTES_MAX);
    let mut start = offset;
    let mut end = offset.saturating_add(length).min(total);
    let mut out = json!({"cid": cid, "total_bytes": total});
    match std::str::from_utf8(bytes) {
        Ok(text) => {
            while !text.is_char_boundary(start) {
                start += 1;
            }
            while end > start && !text.is_char_boundary(end) {
                end -= 1;
            }
            end = end.max(start);
            out["text"] = json!(&text[start..end]);
        }
        Err(_) => {
            out["hex"] = json!(vouch_core::canon::hex_lower(&bytes[start..end]));
        }
    }
    out["offset"] = json!(start);
    out["bytes"] = json!(end - start);
    out["more"] = json!(end < total);
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn a_read_is_bounded_and_keeps_characters_whole() {
        let text = "é".repeat(READ_BYTES_MAX);
        let got = slice("c", text.as_bytes(), &json!({"offset": 1, "length": null}));
        assert_eq!(got["offset"], 2, "{got}");
        let s = got["text"].as_str().unwrap();
        assert!(s.len() <= READ_BYTES_MAX && s.chars().all(|c| c == 'é'));
        assert_eq!(got["more"], true);
        let bin = slice("c", &[0xff, 0x00, 0x01], &json!({"offset": 1, "length": 5}));
        assert_eq!(bin["hex"], "0001", "{bin}");
        assert_eq!(bin["more"], false);
        let past = slice("c", b"abc", &json!({"offset": 99}));
        assert_eq!(past["text"], "", "{past}");
    }

    #[test]
    fn a_profiles_context_policy_is_checked_when_read() {
        let check = |v: Value| check_profile_context("p", v.as_object().unwrap());
        let cid = vouch_artifacts::content_id(b"x");
        assert!(check(json!({"context": [cid], "context_placement": "file"})).is_ok());
        assert!(check(json!({})).is_ok());
        for (bad, says) in [
            (json!({"context": ["guide.md"]}), "not a content id"),
            (json!({"context": "sha256:x"}), "array of at most 16"),
            (json!({"context": vec![cid; 17]}), "array of at most 16"),
            (
                json!({"context_placement": "clipboard"}),
                "one of system, user, file",
            ),
        ] {
            let e = check(bad.clone()).unwrap_err();
            assert!(e.contains(says), "{bad}: {e}");
        }
        let p = |v: Value| RuntimeProfile::from_policy(v).unwrap();
        assert_eq!(Placement::of(None), Placement::User);
        assert_eq!(
            Placement::of(Some(&p(json!({"context_placement": "system"})))),
            Placement::System
        );
    }

    #[test]
    fn only_the_tasks_own_content_ids_are_read() {
        use vouch_artifacts::ArtifactStore as _;
        let tmp = tempfile::tempdir().unwrap();
        let store = vouch_artifacts::LocalStore::in_home(tmp.path());
        let mine = store.put(b"mine").unwrap();
        let other = store.put(b"another task's").unwrap();
        let spec = json!({"model": {"kind": "script", "task": {"input_artifacts": [mine]}}});
        let got = read(
            Some(&store),
            &spec,
            "input_artifacts",
            &json!({"cid": mine}),
        )
        .unwrap();
        assert!(got.contains("\"text\":\"mine\""), "{got}");
        let e = read(
            Some(&store),
            &spec,
            "input_artifacts",
            &json!({"cid": null}),
        )
        .unwrap_err();
        assert!(e.contains("name the `cid`"), "{e}");
        let e = read(
            Some(&store),
            &spec,
            "input_artifacts",
            &json!({"cid": other}),
        )
        .unwrap_err();
        assert!(e.contains("not an input artifact"), "{e}");
        let e = read(Some(&store), &spec, "context", &json!({"cid": mine})).unwrap_err();
        assert!(e.contains("in its messages"), "{e}");
        let files = json!({"model": {"kind": "script", "task": {"context": [other], "context_placement": "file"}}});
        let e = read(Some(&store), &files, "context", &json!({"cid": mine})).unwrap_err();
        assert!(e.contains("not a pinned context file"), "{e}");
        let got = read(Some(&store), &files, "context", &json!({"cid": other})).unwrap();
        assert!(got.contains("another task's"), "{got}");
        let e = read(
            Some(&store),
            &spec,
            "input_artifacts",
            &json!({"cid": "/etc/passwd"}),
        )
        .unwrap_err();
        assert!(e.contains("not an input artifact"), "{e}");
    }
}
