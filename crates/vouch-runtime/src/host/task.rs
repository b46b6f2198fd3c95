//! Task attempts as vouch runs (§13.1, §13.4): a run with trigger `task` (autonomous) whose
//! `submit` tool validates the result against the task type's output schema, gives the live
//! session a bounded number of repairs naming the failing JSON path, and keeps the accepted
//! submission for the board. The host — not the model — then decides the attempt's report:
//! a run that ends without an accepted submission fails its attempt. Touches the run through
//! `create`/`drive` only, and the journal read-only (usage counts); never a provider.

use super::decisions::Then;
use super::submission::{accept_submission, BoardBudget, CountedBudget, SubmitRules};
use super::*;
use std::collections::HashMap;
use std::sync::Mutex;
use vouch_core::board::AttemptState;
use vouch_store::board::{AttemptRef, BoardStore, ReportKind, TaskRecord, Usage, Verdict};
use vouch_store::EventEntry;

/// A task type (§13.5): JSON Schemas for its input and output. Schemas never fetch remote
/// references (the validator is built without them).
#[derive(Debug, Clone, PartialEq)]
pub struct TaskType {
    pub name: String,
    pub input_schema: Value,
    pub output_schema: Value,
}

/// Schema files are this large at most.
pub const TYPE_FILE_BYTES_MAX: u64 = 256 * 1024;
/// Errors named back to the model per invalid submission at most.
pub const SUBMIT_ERRORS_MAX: usize = 8;

#[derive(Debug, Clone, Default)]
pub struct TaskTypes {
    types: BTreeMap<String, TaskType>,
}

impl TaskTypes {
    /// `freeform` (a brief in; a summary plus artifacts out) and `judge` (a target task and
    /// criteria in; a verdict with a score per criterion out).
    pub fn builtin() -> Self {
        let mut types = BTreeMap::new();
        types.insert(
            "freeform".into(),
            TaskType {
                name: "freeform".into(),
                input_schema: json!({
                    "type": "object",
                    "required": ["brief"],
                    "properties": {"brief": {"type": "string", "minLength": 1}}
                }),
                output_schema: json!({
                    "type": "object",
                    "required": ["summary"],
                    "properties": {
                        "summary": {"type": "string", "minLength": 1},
                        "artifacts": {"type": "array", "items": {"type": "string"}}
                    }
                }),
            },
        );
        types.insert(
            "judge".into(),
            TaskType {
                name: "judge".into(),
                input_schema: json!({
                    "type": "object",
                    "required": ["target", "criteria"],
                    "properties": {
                        "target": {"type": "string", "minLength": 1},
                        "criteria": {"type": "array", "minItems": 1, "items": {"type": "string"}}
                    }
                }),
                output_schema: json!({
                    "type": "object",
                    "required": ["passed", "scores"],
                    "properties": {
                        "passed": {"type": "boolean"},
                        "scores": {"type": "object", "additionalProperties": {"type": "number"}},
                        "notes": {"type": "string"}
                    }
                }),
            },
        );
        // `patch` (§14): a repository change; its output is the host's commit and evidence.
        types.insert(
            super::patch::PATCH_TYPE.into(),
            TaskType {
                name: super::patch::PATCH_TYPE.into(),
                input_schema: vouch_repo::input_schema(),
                output_schema: vouch_repo::output_schema(),
            },
        );
        TaskTypes { types }
    }

    /// Built-ins plus every `*.json` in `dir`: `{"name", "input_schema", "output_schema"}`.
    /// A file that does not parse, or whose schema is not a valid JSON Schema, is an error
    /// naming the file.
    pub fn with_dir(dir: &std::path::Path) -> Result<Self, String> {
        let mut out = Self::builtin();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return Ok(out);
        };
        let mut paths: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        paths.sort();
        for p in paths {
            let t = Self::load_file(&p)?;
            out.types.insert(t.name.clone(), t);
        }
        Ok(out)
    }

    pub fn load_file(p: &std::path::Path) -> Result<TaskType, String> {
        let shown = p.display();
        // Bounded as it is read, not by a size asked first: a FIFO or `/dev/zero` says 0.
        let text = crate::bounded::read_text(p, "type file", TYPE_FILE_BYTES_MAX)
            .map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_str(&text)
            .map_err(|e| format!("type file {shown} is not JSON: {e}"))?;
        let name = v
            .get("name")
            .and_then(Value::as_str)
            .filter(|n| {
                !n.is_empty()
                    && n.len() <= 64
                    && n.chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            })
            .ok_or_else(|| {
                format!(
                    "type file {shown} needs a \"name\" of letters, digits, - and _ (at most 64)"
                )
            })?;
        let schema = |k: &str| -> Result<Value, String> {
            let s = v.get(k).cloned().unwrap_or(json!({}));
            jsonschema::validator_for(&s)
                .map_err(|e| format!("type file {shown}: {k} is not a usable JSON Schema: {e}"))?;
            Ok(s)
        };
        Ok(TaskType {
            name: name.to_string(),
            input_schema: schema("input_schema")?,
            output_schema: schema("output_schema")?,
        })
    }

    pub fn get(&self, name: &str) -> Option<&TaskType> {
        self.types.get(name)
    }

    pub fn names(&self) -> Vec<String> {
        self.types.keys().cloned().collect()
    }
}

/// Validate `value` against `schema`; each error names the failing JSON path (`/a/0/b`, or
/// `/` for the whole value).
pub fn validate(schema: &Value, value: &Value) -> Result<(), Vec<String>> {
    let v = jsonschema::validator_for(schema).map_err(|e| vec![format!("bad schema: {e}")])?;
    let errors: Vec<String> = v
        .iter_errors(value)
        .take(SUBMIT_ERRORS_MAX)
        .map(|e| {
            let path = e.instance_path().to_string();
            format!(
                "at {}: {e}",
                if path.is_empty() { "/" } else { path.as_str() }
            )
        })
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

/// The host's rules for a result beyond its type's output schema, the same wherever a result
/// arrives (a run's `submit` tool, a worker's HTTP or MCP submit): a result's `artifacts` are
/// `sha256:` content ids of artifacts present in `artifacts` (§13.5), and a judge's `scores`
/// score exactly its task's criteria, none missing and none unknown (§13.5.1). Checked once
/// the schema accepts the result; each error names its JSON path, and the strings named come
/// from the submitter, so they are shown quoted and shortened.
pub fn result_errors(
    kind: &str,
    input: &Value,
    result: &Value,
    artifacts: Option<&dyn vouch_artifacts::ArtifactStore>,
) -> Vec<String> {
    let mut errors = artifact_errors(result, artifacts);
    if kind == "judge" {
        errors.extend(score_errors(input, result));
    }
    errors.truncate(SUBMIT_ERRORS_MAX);
    errors
}

/// A submitter's string as an error shows it: quoted, escaped, at most 64 characters.
fn shown(s: &str) -> String {
    const SHOWN_CHARS_MAX: usize = 64;
    let cut: String = s.chars().take(SHOWN_CHARS_MAX).collect();
    if cut.len() < s.len() {
        format!("{cut:?}…")
    } else {
        format!("{cut:?}")
    }
}

fn artifact_errors(
    result: &Value,
    store: Option<&dyn vouch_artifacts::ArtifactStore>,
) -> Vec<String> {
    let Some(list) = result.get("artifacts") else {
        return vec![];
    };
    let Some(list) = list.as_array() else {
        return vec!["at /artifacts: a list of content ids (`sha256:` and 64 hex digits)".into()];
    };
    let mut errors = vec![];
    for (i, item) in list.iter().enumerate() {
        if errors.len() >= SUBMIT_ERRORS_MAX {
            break;
        }
        let Some(cid) = item.as_str() else {
            errors.push(format!("at /artifacts/{i}: a content id, not {item}"));
            continue;
        };
        if vouch_artifacts::parse_cid(cid).is_err() {
            errors.push(format!(
                "at /artifacts/{i}: {} is not a content id (`sha256:` and 64 lowercase hex digits); store the artifact and name it by the id the store answers",
                shown(cid)
            ));
            continue;
        }
        let present = match store {
            Some(store) => store.exists(cid),
            None => Ok(false),
        };
        match present {
            Ok(true) => {}
            Ok(false) => errors.push(format!(
                "at /artifacts/{i}: no artifact {cid} is stored here; store it first (`vouch artifact put`, or the board's artifact route), then submit again"
            )),
            Err(e) => errors.push(format!(
                "at /artifacts/{i}: artifact {cid} cannot be read ({e}); store it again"
            )),
        }
    }
    errors
}

fn score_errors(input: &Value, result: &Value) -> Vec<String> {
    let criteria: Vec<&str> = input
        .get("criteria")
        .and_then(Value::as_array)
        .map(|c| c.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let Some(scores) = result.get("scores").and_then(Value::as_object) else {
        return vec![];
    };
    let mut errors: Vec<String> = criteria
        .iter()
        .filter(|c| !scores.contains_key(**c))
        .map(|c| format!("at /scores: no score for criterion {}", shown(c)))
        .collect();
    let named: Vec<String> = criteria.iter().map(|c| shown(c)).collect();
    for key in scores.keys().filter(|k| !criteria.contains(&k.as_str())) {
        if errors.len() >= SUBMIT_ERRORS_MAX {
            break;
        }
        errors.push(format!(
            "at /scores: {} is not a criterion of this task; score exactly its criteria: {}",
            shown(key),
            named.join(", ")
        ));
    }
    errors
}

/// A runtime profile (§13.6): a runtime kind and a model bound to policies — the work tools
/// allowed per context, shell commands, network hosts, writable paths. Its fingerprint is the
/// content id of its canonical form; a claim records the snapshot, and the run enforces the
/// snapshot it was claimed under, never a later edit of the file.
#[derive(Debug, Clone, PartialEq)]
pub struct RuntimeProfile {
    pub name: String,
    /// The whole canonical policy (what is fingerprinted and recorded at claim).
    pub policy: Value,
    pub fingerprint: String,
}

/// Profile files are this large at most.
pub const PROFILE_FILE_BYTES_MAX: u64 = 64 * 1024;

impl RuntimeProfile {
    /// `default`: the vouch runtime, any model, every work tool; otherwise
    /// `<dir>/NAME.json`: `{"runtime", "model", "tools": {CONTEXT: [TOOL…]}, "shell": [CMD…],
    /// "network": [HOST…], "writable": [GLOB…]}` (every key optional; `name` is the file's).
    pub fn load(dir: &std::path::Path, name: &str) -> Result<Self, String> {
        let ok_name = !name.is_empty()
            && name.len() <= 64
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.')
            && !name.starts_with('.');
        if !ok_name {
            return Err(format!(
                "profile name `{name}`: use 1-64 letters, digits, . - _ (not starting with .)"
            ));
        }
        let p = dir.join(format!("{name}.json"));
        let mut v = if name == "default" && !p.exists() {
            json!({"runtime": "vouch"})
        } else {
            let shown = p.display();
            let text = crate::bounded::read_text(&p, "runtime profile", PROFILE_FILE_BYTES_MAX)
                .map_err(|e| e.to_string())?;
            serde_json::from_str::<Value>(&text)
                .map_err(|e| format!("runtime profile {shown} is not JSON: {e}"))?
        };
        let Some(o) = v.as_object_mut() else {
            return Err(format!("runtime profile `{name}` must be a JSON object"));
        };
        o.insert("name".into(), json!(name));
        let strings = |k: &str, x: &Value| -> Result<(), String> {
            match x.as_array() {
                Some(a) if a.iter().all(Value::is_string) => Ok(()),
                _ => Err(format!(
                    "runtime profile `{name}`: {k} must be an array of strings"
                )),
            }
        };
        for k in ["shell", "network", "writable", "commands"] {
            if let Some(x) = o.get(k) {
                strings(k, x)?;
            }
        }
        super::patch::check_sandbox_policy(name, o)?;
        super::given::check_profile_context(name, o)?;
        if let Some(t) = o.get("tools") {
            let Some(t) = t.as_object() else {
                return Err(format!(
                    "runtime profile `{name}`: tools must map a context to an array of tool names"
                ));
            };
            for (ctx, x) in t {
                strings(&format!("tools.{ctx}"), x)?;
            }
        }
        Self::from_policy(v)
    }

    /// A recorded snapshot, fingerprinted again.
    pub fn from_policy(policy: Value) -> Result<Self, String> {
        let name = policy
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("default")
            .to_string();
        let fingerprint =
            vouch_store::board::content_id(&policy).map_err(|e| format!("fingerprint: {e}"))?;
        Ok(RuntimeProfile {
            name,
            policy,
            fingerprint,
        })
    }

    /// The work tools a task run (autonomous context) may call; `None`: any.
    pub fn allowed_tools(&self) -> Option<Vec<String>> {
        self.policy
            .pointer("/tools/autonomous")
            .and_then(Value::as_array)
            .map(|a| {
                a.iter()
                    .filter_map(Value::as_str)
                    .map(String::from)
                    .collect()
            })
    }
}

/// What the live session may submit in one attempt's run.
struct Slot {
    /// The work tools the attempt's profile snapshot allows (`None`: any), and which
    /// profile said so.
    allowed_tools: Option<Vec<String>>,
    profile: String,
    output_schema: Value,
    needs_assessment: bool,
    /// The task's type and input, for the host's rules of a result (`result_errors`); `None`
    /// for an advisory submission, which decides nothing.
    rules: Option<(String, Value)>,
    repairs_max: u32,
    /// Malformed submissions counted here when the attempt has no board row (`lease`).
    invalid: u32,
    /// The claim holding the attempt: its repairs are counted on the board's row.
    lease: Option<AttemptRef>,
    accepted: Option<(Value, Option<Value>)>,
}

/// Work tools of a worker: the `submit` tool for each running attempt (by run id), beside
/// the standard tools.
pub struct TaskWork {
    pub inner: Arc<dyn WorkTools>,
    slots: Mutex<HashMap<String, Slot>>,
    /// Patch attempts' worktree tools (§14), when this worker takes patch tasks.
    pub patch: Option<Arc<super::patch::PatchWork>>,
    /// Where a result's artifacts must be stored (§13.5); without one, none is.
    artifacts: Option<Arc<dyn vouch_artifacts::ArtifactStore>>,
    /// The board a judge reads its target from (`read_target`).
    pub board: Option<Arc<dyn BoardStore>>,
    /// The worker's own identity and the store of its diary (`read_diary`, §13.6.1).
    diary: Option<(Arc<dyn vouch_store::IdentityStore>, String)>,
}

impl TaskWork {
    pub fn new(inner: Arc<dyn WorkTools>) -> Self {
        TaskWork {
            inner,
            slots: Mutex::new(HashMap::new()),
            patch: None,
            artifacts: None,
            board: None,
            diary: None,
        }
    }

    /// The attempt's model may read the diary of the worker's identity `name` (§13.6.1).
    pub fn with_diary(mut self, ids: Arc<dyn vouch_store::IdentityStore>, name: &str) -> Self {
        self.diary = Some((ids, name.to_string()));
        self
    }

    /// The artifact store results, pinned context and input artifacts are read from.
    pub(super) fn artifact_store(&self) -> Option<&dyn vouch_artifacts::ArtifactStore> {
        self.artifacts.as_deref()
    }

    /// Judges read their target's accepted output from `board` (§13.4).
    pub fn with_board(mut self, board: Arc<dyn BoardStore>) -> Self {
        self.board = Some(board);
        self
    }

    /// `read_target`: the judged task's brief, criteria-free, and its accepted output with
    /// the artifacts it names, read from the board (the host never pastes it into the brief).
    fn read_target(&self, spec: &Value) -> Result<String, String> {
        let spec = StoredSpec::read(spec);
        let target = spec
            .model
            .told("target")
            .and_then(Value::as_str)
            .ok_or("only a judge attempt has a target to read")?;
        let board = self
            .board
            .as_ref()
            .ok_or("this worker has no board to read the target from")?;
        let task = board
            .task(target)
            .map_err(|e| format!("cannot read task {target}: {e}"))?
            .ok_or_else(|| format!("task {target} is not on the board"))?;
        let result = match &task.result_id {
            Some(id) => board
                .result(id)
                .map_err(|e| format!("cannot read the result of {target}: {e}"))?,
            None => None,
        };
        let Some(result) = result else {
            return Err(format!("task {target} has no accepted output"));
        };
        let artifacts = result.get("artifacts").cloned().unwrap_or(json!([]));
        Ok(json!({
            "task": target,
            "type": task.kind,
            "brief": task.spec.brief,
            "accepted_output": result,
            "artifacts": artifacts,
            // What it was given to work from: the judge reads them with `read_input` (§13.1.3).
            "input_artifacts": task.spec.input_artifacts,
        })
        .to_string())
    }

    /// Check results' artifacts against this store (§13.5).
    pub fn with_artifacts(mut self, store: Arc<dyn vouch_artifacts::ArtifactStore>) -> Self {
        self.artifacts = Some(store);
        self
    }

    /// Take patch tasks too: their worktree tools beside the standard ones.
    pub fn with_patch(mut self, patch: super::patch::PatchWork) -> Self {
        self.patch = Some(Arc::new(patch));
        self
    }

    /// A patch run may still call `submit`: what it says is kept as an advisory
    /// self-assessment and decides nothing (§14).
    pub(super) fn open_advisory(&self, run_id: &str, profile: Option<&RuntimeProfile>) {
        self.open(
            run_id,
            Slot {
                allowed_tools: profile.and_then(RuntimeProfile::allowed_tools),
                profile: profile
                    .map(|p| format!("`{}` ({})", p.name, p.fingerprint))
                    .unwrap_or_default(),
                output_schema: json!({"type": "object"}),
                needs_assessment: false,
                rules: None,
                repairs_max: 0,
                invalid: 0,
                lease: None,
                accepted: None,
            },
        );
    }

    pub(super) fn take_advisory(&self, run_id: &str) -> Option<Value> {
        self.take(run_id).and_then(|s| s.accepted).map(|(r, _)| r)
    }

    fn open(&self, run_id: &str, slot: Slot) {
        if let Ok(mut m) = self.slots.lock() {
            m.insert(run_id.to_string(), slot);
        }
    }

    fn take(&self, run_id: &str) -> Option<Slot> {
        self.slots.lock().ok().and_then(|mut m| m.remove(run_id))
    }
}

fn read_target_spec() -> ToolSpec {
    ToolSpec {
        name: "read_target".into(),
        description: "Judges only: read the task you judge — its brief, its accepted output and the artifacts that output names.".into(),
        parameters: crate::schemas::object(vec![]),
    }
}

/// The tools of one run: a task attempt's `submit` takes its type's output schema as
/// `result` (what the model must produce, told by the schema itself), and only a judge is
/// offered `read_target`. Other runs get the tools as they are.
pub(super) fn tools_for_run(tools: &Arc<[ToolSpec]>, spec: &Value) -> Arc<[ToolSpec]> {
    match tool_shape(tools, spec) {
        Some(shape) => shaped_tools(tools, &shape),
        None => tools.clone(),
    }
}

/// The shape of a task attempt's tools from its spec; `None` for a run that is no attempt.
pub(super) fn tool_shape(tools: &Arc<[ToolSpec]>, spec: &Value) -> Option<super::ToolShape> {
    let spec = vouch_store::spec::SpecHead::read(spec);
    let task = spec.told_task()?;
    Some(super::ToolShape {
        base: Arc::as_ptr(tools) as *const () as usize,
        judge: task.get("target").is_some(),
        inputs: task.get("input_artifacts").is_some(),
        files: task.get("context_placement").and_then(Value::as_str) == Some("file"),
        output_schema: task.get("output_schema").cloned(),
    })
}

/// The tools of one shape, built from the base tools.
pub(super) fn shaped_tools(tools: &[ToolSpec], shape: &super::ToolShape) -> Arc<[ToolSpec]> {
    tools
        .iter()
        .filter(|t| shape.judge || t.name != "read_target")
        .filter(|t| shape.inputs || t.name != super::given::READ_INPUT)
        .filter(|t| shape.files || t.name != super::given::READ_CONTEXT)
        .cloned()
        .map(|mut t| {
            if t.name == "submit" {
                if let Some(schema) = &shape.output_schema {
                    t.parameters["properties"]["result"] = schema.clone();
                }
            }
            t
        })
        .collect()
}

pub(super) fn submit_spec() -> ToolSpec {
    ToolSpec {
        name: "submit".into(),
        description: "Submit this task's result (validated against the task type's output schema; a malformed result comes back with the failing path so you can repair it). With success criteria, include your self-assessment.".into(),
        parameters: json!({
            "type": "object",
            "properties": {
                "result": {"type": "object"},
                "self_assessment": {"type": ["object", "null"]}
            },
            "required": ["result", "self_assessment"],
            "additionalProperties": false
        }),
    }
}

impl WorkTools for TaskWork {
    fn specs(&self) -> Vec<ToolSpec> {
        let mut s = self.inner.specs();
        s.push(submit_spec());
        s.push(read_target_spec());
        s.push(super::given::read_input_spec());
        s.push(super::given::read_context_spec());
        if self.diary.is_some() {
            s.push(super::given::read_diary_spec());
        }
        if let Some(p) = &self.patch {
            s.extend(p.specs());
        }
        s
    }

    fn call(
        &self,
        run_id: &str,
        spec: &Value,
        call: &ToolCall,
        args: &Value,
    ) -> Option<Result<String, String>> {
        if call.name == "read_target" {
            return Some(self.read_target(spec));
        }
        // The host's own reads of what the task was given (§13.1.2, §13.1.3): journaled as
        // tool calls, which is what knowledge leverage counts (§13.7.3).
        if call.name == super::given::READ_DIARY {
            return Some(super::given::read_diary(self.diary.as_ref(), args));
        }
        for (tool, key) in [
            (super::given::READ_INPUT, "input_artifacts"),
            (super::given::READ_CONTEXT, "context"),
        ] {
            if call.name == tool {
                return Some(super::given::read(
                    self.artifacts.as_deref(),
                    spec,
                    key,
                    args,
                ));
            }
        }
        if call.name != "submit" {
            // The profile snapshot the attempt was claimed under decides (§13.6).
            let refused = self.slots.lock().ok().and_then(|m| {
                m.get(run_id).and_then(|s| {
                    s.allowed_tools
                        .as_ref()
                        .filter(|a| !a.iter().any(|t| t == &call.name))
                        .map(|_| s.profile.clone())
                })
            });
            if let Some(profile) = refused {
                return Some(Err(format!(
                    "tool `{}` is not allowed by runtime profile {profile}",
                    call.name
                )));
            }
            if let Some(r) = self.patch.as_ref().and_then(|p| p.call(run_id, call, args)) {
                return Some(r);
            }
            return self.inner.call(run_id, spec, call, args);
        }
        Some(self.submit(run_id, args))
    }
}

impl TaskWork {
    /// The `submit` tool (§13.4): the one submission rule, counted against the attempt's
    /// repairs on the board (or in its slot when there is none).
    fn submit(&self, run_id: &str, args: &Value) -> Result<String, String> {
        let Ok(mut slots) = self.slots.lock() else {
            return Err("the board is unavailable; try again".into());
        };
        let Some(slot) = slots.get_mut(run_id) else {
            return Err("this run is not a task attempt: nothing to submit".into());
        };
        if slot.accepted.is_some() {
            return Err(
                "a result was already accepted for this attempt; it cannot be replaced".into(),
            );
        }
        let result = args.get("result").cloned().unwrap_or(Value::Null);
        let rules = SubmitRules {
            task: slot.rules.as_ref().map(|(k, i)| (k.as_str(), i)),
            output_schema: &slot.output_schema,
            needs_assessment: slot.needs_assessment,
            artifacts: self.artifacts.as_deref(),
            repairs_max: slot.repairs_max,
        };
        let assessment = args.get("self_assessment");
        // The board's attempt row counts the repairs when this attempt has one here; a run
        // with no board (or an advisory submission) counts them in its slot.
        let counted = CountedBudget(std::cell::Cell::new(slot.invalid));
        let out = match (&self.board, &slot.lease) {
            (Some(board), Some(at)) => {
                let budget = BoardBudget {
                    board: board.as_ref(),
                    attempt: at,
                };
                accept_submission(&rules, &budget, &result, assessment)
            }
            _ => accept_submission(&rules, &counted, &result, assessment),
        };
        slot.invalid = counted.0.get();
        match out {
            Ok(a) => {
                slot.accepted = Some((a.result, a.self_assessment));
                Ok("accepted: the result is valid and handed to the board".into())
            }
            Err(e) => Err(e.to_string()),
        }
    }
}

/// One attempt to run: what the board handed the worker.
#[derive(Debug, Clone)]
pub struct AttemptJob {
    pub task_id: String,
    /// The attempt's number (names a patch attempt's branch, `vouch/TASK/ATTEMPT`).
    pub attempt: u32,
    pub kind: String,
    pub brief: String,
    pub input: Value,
    pub criteria: Option<Value>,
    /// The model of the run: `{"kind":"script","turns":[…]}` or `{"kind":"openai"}` (read
    /// into a `ModelSpec` when the attempt's run is made).
    pub model: Value,
    pub repairs_max: u32,
    /// The runtime profile snapshot recorded at claim, enforced by the run (`None`: any).
    pub profile: Option<RuntimeProfile>,
    /// The claim holding the attempt on the run's board: its malformed submissions are
    /// counted on the attempt's row (§13.4.1). `None`: counted by the run itself.
    pub lease: Option<AttemptRef>,
}

/// How the attempt's run ended, as the host saw it.
#[derive(Debug, Clone)]
pub struct AttemptOutcome {
    pub run_id: String,
    /// `None` while the run is suspended (waiting for a person).
    pub report: Option<ReportKind>,
    pub receipt: Option<String>,
    pub usage: Usage,
    /// A patch attempt's evidence as the host observed it (§14), accepted or not.
    pub evidence: Option<Value>,
}

/// What `Host::decide` did: the run's end (or its next wait), and — when the run waited
/// inside a task attempt — the task, queued again once no card of the run is open.
#[derive(Debug, Clone)]
pub struct Decided {
    pub end: RunEnd,
    pub task: Option<TaskRecord>,
}

/// A person's decision on a waiting run: a plain run's or one inside a task attempt (§13.3).
#[derive(Debug, Clone)]
pub enum TaskDecision {
    Approve { delivery: String, hash: String },
    Deny { delivery: String },
    Answer { text: String },
}

/// What the submit slot of a resumed run already holds, read back from its journal: the
/// conversation is durable, so the repairs spent and an accepted submission survive the
/// worker that suspended (§13.5).
fn slot_from_journal(journal: &[EventEntry], slot: &mut Slot) {
    let mut args: HashMap<&str, &str> = HashMap::new();
    for e in journal {
        // A body that does not parse tells nothing about the slot; the run's view marks it
        // corrupt and its receipt says so.
        match &e.event {
            Ok(Event::Turn(t)) => {
                for c in t.tool_calls.iter().filter(|c| c.name == "submit") {
                    args.insert(&c.id, &c.arguments);
                }
            }
            Ok(Event::ToolCalled(c)) if c.name == "submit" && slot.accepted.is_none() => {
                if c.ok {
                    let a: Value = args
                        .get(c.call_id.as_str())
                        .and_then(|a| serde_json::from_str(a).ok())
                        .unwrap_or(Value::Null);
                    let result = a.get("result").cloned().unwrap_or(Value::Null);
                    let assessment = a.get("self_assessment").cloned().filter(|v| !v.is_null());
                    slot.accepted = Some((result, assessment));
                } else {
                    slot.invalid += 1;
                }
            }
            _ => {}
        }
    }
}

/// What a run's journal says its `submit` calls did: the accepted submission, if one was,
/// and the malformed ones counted.
pub(super) fn submitted_in(journal: &[EventEntry]) -> (Option<Submitted>, u32) {
    let mut slot = Slot {
        allowed_tools: None,
        profile: String::new(),
        output_schema: Value::Null,
        needs_assessment: false,
        rules: None,
        repairs_max: 0,
        invalid: 0,
        lease: None,
        accepted: None,
    };
    slot_from_journal(journal, &mut slot);
    (slot.accepted, slot.invalid)
}

impl Host {
    /// Run one attempt as a vouch run (trigger `task`) and decide its report (§13.1).
    pub fn run_task_attempt(
        &self,
        work: &TaskWork,
        types: &TaskTypes,
        job: &AttemptJob,
    ) -> HostResult<AttemptOutcome> {
        self.task_run(work, types, job, None, None)
    }

    /// Continue the run of a suspended attempt after the person decided (§13.3): any worker
    /// may, since the run's conversation and decisions are in the store's journal.
    pub fn resume_task_attempt(
        &self,
        work: &TaskWork,
        types: &TaskTypes,
        job: &AttemptJob,
        run_id: &str,
    ) -> HostResult<AttemptOutcome> {
        self.task_run(work, types, job, Some(run_id), None)
    }

    /// Run an attempt — or, with `resume`, continue its suspended run — asking `stop` at each
    /// turn boundary and before each tool call: once it answers `true` (the task was
    /// cancelled, and the cancel is durable) nothing more is asked of the model or attempted,
    /// and the run ends `cancel` with its receipt (issue 22 #5, §9.4).
    pub fn run_task_attempt_until(
        &self,
        work: &TaskWork,
        types: &TaskTypes,
        job: &AttemptJob,
        resume: Option<&str>,
        stop: StopProbe,
    ) -> HostResult<AttemptOutcome> {
        self.task_run(work, types, job, resume, Some(stop))
    }

    /// A person's decision on a run's card or question (§7), routed by the host: a run that
    /// waits inside a suspended task attempt on `board` is parked and its attempt queued for
    /// the board's next claimant (§13.3; `Decided::task` names the task); any other run is
    /// decided and driven on here. Interfaces parse the decision and render this answer only.
    pub fn decide(
        &self,
        board: Option<&dyn BoardStore>,
        run_id: &str,
        decision: &TaskDecision,
        by: Option<&vouch_core::Principal>,
    ) -> HostResult<Decided> {
        if let Some(board) = board {
            if let Some((end, task)) = self.decide_task_run(board, run_id, decision, by)? {
                return Ok(Decided {
                    end,
                    task: Some(task),
                });
            }
        }
        let end = match decision {
            TaskDecision::Approve { delivery, hash } => {
                self.approve_as(run_id, delivery, hash, Then::Drive, by)?
            }
            TaskDecision::Deny { delivery } => self.deny_as(run_id, delivery, Then::Drive, by)?,
            TaskDecision::Answer { text } => self.answer_as(run_id, text, Then::Drive, by)?,
        };
        Ok(Decided { end, task: None })
    }

    /// Record a person's decision on a run waiting inside a task attempt and make the attempt
    /// claimable as a resumption; the board's next claimant drives the run on, not this
    /// process. `None` when the run is not a suspended task attempt's (decide it as any run).
    pub fn decide_task_run(
        &self,
        board: &dyn BoardStore,
        run_id: &str,
        decision: &TaskDecision,
        by: Option<&vouch_core::Principal>,
    ) -> HostResult<Option<(RunEnd, TaskRecord)>> {
        self.refuse_while_attempt_live(board, run_id)?;
        let Some(a) = board.attempt_of_run(run_id)? else {
            return Ok(None);
        };
        if a.state != AttemptState::Suspended {
            return Ok(None);
        }
        let end = match decision {
            TaskDecision::Approve { delivery, hash } => {
                self.approve_as(run_id, delivery, hash, Then::Park, by)?
            }
            TaskDecision::Deny { delivery } => self.deny_as(run_id, delivery, Then::Park, by)?,
            TaskDecision::Answer { text } => self.answer_as(run_id, text, Then::Park, by)?,
        };
        // Every decision the run waited on is made (it is parked with no card open): the
        // attempt is claimable again. Decided from the store, not from the reason's wording.
        let parked = matches!(end, RunEnd::Suspended { .. })
            && !self
                .store
                .cards_for_run(run_id)?
                .iter()
                .any(|c| c.state == CardState::Open);
        let task = if parked {
            board.resume_ready(&a.task_id, self.now())?
        } else {
            board.task(&a.task_id)?.ok_or_else(|| {
                HostError::Internal(format!("task {} is gone from the board", a.task_id))
            })?
        };
        Ok(Some((end, task)))
    }

    /// A decision on the run of a live attempt (claimed or running: its worker has not yet
    /// told the board that the run waits, or has died and its lease has not lapsed) is a
    /// conflict (§13.3): the run is that worker's to drive or to suspend, and a decider that
    /// drove it would act beside the attempt, which the sweep then times out and the task
    /// retries. Asked again once the attempt is suspended, the decision parks the run for the
    /// next claimant. The attempt is the one naming the run, or a live one of the run's task
    /// that names no run yet and was claimed before the run was made.
    fn refuse_while_attempt_live(&self, board: &dyn BoardStore, run_id: &str) -> HostResult<()> {
        let run = self.record(run_id)?;
        let Some(task_id) = run.scope.strip_prefix("task:") else {
            return Ok(());
        };
        let live = board.attempts(task_id)?.into_iter().find(|a| {
            matches!(a.state, AttemptState::Claimed | AttemptState::Running)
                && match &a.run_id {
                    Some(r) => r == run_id,
                    None => a.claimed_ms <= run.created_ms,
                }
        });
        match live {
            Some(a) => Err(HostError::OwnedElsewhere(format!(
                "run {run_id} is driven by attempt {} of task {task_id}, which has not yet reported that the run waits; decide again once it has (or once its lease lapses and the sweep suspends it)",
                a.n
            ))),
            None => Ok(()),
        }
    }

    /// The owner cancels a task (§13.3): the board's cancel wins, and a run its attempt left
    /// waiting for a person ends here (§13.3, issue 22 #6) — its open card and question
    /// closed, the rest withdrawn (§9.4), its receipt written with the `result` item
    /// cancelled. Answers the task and the run this ended, if any. A resumption a worker
    /// already drives is that worker's to end: its run reads the cancel at its next turn.
    pub fn cancel_task(
        &self,
        board: &dyn BoardStore,
        task_id: &str,
    ) -> HostResult<(TaskRecord, Option<String>)> {
        // A suspended attempt's run, or a live one's that a worker outside drives between
        // its calls (§13.2.1): no process holds either, so the cancel ends it here.
        let waiting = board
            .attempts(task_id)?
            .into_iter()
            .filter(|a| a.state == AttemptState::Suspended || a.state.is_leased())
            .filter_map(|a| a.run_id.map(|r| (r, a.state == AttemptState::Suspended)))
            .next_back();
        let task = board.cancel(task_id, self.now())?;
        let Some((run, suspended)) = waiting else {
            return Ok((task, None));
        };
        let rec = self.record(&run)?;
        if rec.state == RunState::Ended || !(suspended || super::external::is_external(&rec.spec)) {
            return Ok((task, None));
        }
        match self.cancel(&run) {
            Ok(_) => Ok((task, Some(run))),
            Err(HostError::OwnedElsewhere(_) | HostError::NotWaiting(_)) => Ok((task, None)),
            Err(e) => Err(e),
        }
    }

    /// The conversation of a run as the model saw it (system, brief, turns, tool results,
    /// decisions — and, for a continuation, the conversation it continues), with the content
    /// id of its canonical JSON (§13.5): what a continuation pins and goes on from.
    pub fn conversation(&self, run_id: &str) -> HostResult<(Value, String)> {
        let run = self.record(run_id)?;
        let msgs = serde_json::to_value(self.messages(&run)?)
            .map_err(|e| HostError::Internal(format!("conversation of run {run_id}: {e}")))?;
        let cid = vouch_store::board::content_id(&msgs)?;
        Ok((msgs, cid))
    }

    /// The run spec of an attempt (§13.4.3): its title, what the model is told (durable in
    /// the spec, so any process that rebuilds the conversation tells it the same), and — for
    /// a fresh continuation — the pinned conversation it goes on from.
    pub(super) fn attempt_spec(
        &self,
        job: &AttemptJob,
        ty: Option<&TaskType>,
        given: &super::given::Given,
        fresh: bool,
    ) -> HostResult<RunSpec> {
        let title = format!("task {} ({}): {}", job.task_id, job.kind, job.brief);
        let mut model = ModelSpec::from(job.model.clone());
        if let (true, Some(c)) = (fresh, job.input.get("continuation")) {
            // A continuation starts from the pinned conversation of the run it continues; a
            // conversation that is no longer the pinned one (its content id differs) is not
            // silently replaced by another.
            let (Some(prior), Some(pinned)) = (
                c.get("run").and_then(Value::as_str),
                c.get("conversation").and_then(Value::as_str),
            ) else {
                return Err(HostError::BadInput(
                    "the continuation names no run and conversation to go on from".into(),
                ));
            };
            let (_, cid) = self.conversation(prior)?;
            if cid != pinned {
                return Err(HostError::BadInput(format!(
                    "the conversation of run {prior} is {cid}, not the pinned {pinned}"
                )));
            }
            if let Some(a) = model.attempt_mut() {
                a.prior = Some(vouch_store::spec::Prior {
                    run: prior.to_string(),
                    conversation: pinned.to_string(),
                });
            }
        }
        // What the model is told (§13.4.3): durable in the run's spec, so any process that
        // rebuilds the conversation tells it the same.
        if let (Some(a), Some(ty)) = (model.attempt_mut(), ty) {
            a.task = Some(task_told(job, ty, given));
        }
        let spec = RunSpec {
            trigger: TriggerKind::Task,
            title,
            presence: Some(Presence::Away),
            quiet: false,
            model,
            // Every attempt of a task shares one ledger scope (§8.1): a retry never repeats
            // an irreversible act an earlier attempt already did (I5).
            scope: Some(format!("task:{}", job.task_id)),
        };
        Ok(spec)
    }

    fn task_run(
        &self,
        work: &TaskWork,
        types: &TaskTypes,
        job: &AttemptJob,
        resume: Option<&str>,
        stop: Option<StopProbe>,
    ) -> HostResult<AttemptOutcome> {
        if job.kind == super::patch::PATCH_TYPE {
            if resume.is_some() {
                // The worktree belongs to the attempt that made it (§14): another worker
                // cannot go on in it.
                return Err(HostError::BadInput(
                    "a suspended patch attempt is not resumed elsewhere; its worktree belongs to the attempt".into(),
                ));
            }
            return self.run_patch_attempt(work, job);
        }
        let ty = registered(types, &job.kind)?;
        let run_id = match resume {
            Some(r) => r.to_string(),
            None => new_id(self.clock.as_ref()),
        };
        let given = super::given::given(work, job)?;
        let spec = self.attempt_spec(job, Some(ty), &given, resume.is_none())?;
        let mut slot = new_slot(job, ty);
        if resume.is_some() {
            slot_from_journal(&self.store.journal_events(&run_id)?, &mut slot);
        }
        work.open(&run_id, slot);
        if let Some(stop) = stop {
            self.drives.watch(&run_id, stop);
        }
        let (driven, view) = match resume {
            Some(_) => self
                .record(&run_id)
                .map_or_else(|e| (Err(e), None), |run| self.drive_run_viewed(run)),
            None => match self.create_open(&run_id, &spec, None) {
                Ok(run) => self.drive_born(run),
                Err(e) => (Err(e), None),
            },
        };
        self.drives.unwatch(&run_id);
        let slot = work.take(&run_id);
        let end = driven?;
        let facts = self.ended_facts(&run_id, view)?;
        let receipt = self.store.receipt(&run_id)?;
        let report = match end {
            RunEnd::Suspended { .. } => None,
            RunEnd::Ended { .. } => Some(ended_report(
                &job.kind,
                &job.input,
                facts.outage,
                facts.cancelled,
                slot.map(|s| (s.accepted, s.invalid > s.repairs_max)),
            )),
        };
        let usage = facts.usage;
        Ok(AttemptOutcome {
            run_id,
            report,
            receipt,
            usage,
            evidence: None,
        })
    }
}

/// What an attempt's report and cost are decided from once its run has ended.
struct EndedFacts {
    usage: Usage,
    cancelled: bool,
    outage: Option<(crate::model::Outage, String)>,
}

impl EndedFacts {
    fn of_journal(journal: &[EventEntry]) -> EndedFacts {
        EndedFacts {
            usage: usage_of(journal),
            cancelled: cancelled_in(&RunView::from_events(journal)),
            outage: model_outage(journal),
        }
    }

    fn of_view(view: &RunView) -> EndedFacts {
        let usage = Usage {
            turns: view.turns as i64,
            tokens: (view.prompt_tokens + view.completion_tokens) as i64,
            tool_calls: view.tool_calls as i64,
            failed_tool_calls: view.failed_tool_calls as i64,
        };
        let outage = view
            .loop_end
            .as_ref()
            .filter(|l| l.cause == "model_error")
            .and_then(|l| crate::model::Outage::of(&l.reason).map(|o| (o, l.reason.clone())));
        EndedFacts {
            usage,
            cancelled: cancelled_in(view),
            outage,
        }
    }
}

/// The run's loop was stopped by a cancel (§13.3).
fn cancelled_in(view: &RunView) -> bool {
    view.loop_end
        .as_ref()
        .is_some_and(|l| l.cause == "cancelled")
}

impl Host {
    /// The facts of an ended attempt's run: from the view its drive kept (every event it
    /// journaled applied), so the journal is not read back and replayed; from the journal
    /// when the drive never opened. Debug builds check the two agree on every attempt.
    fn ended_facts(&self, run_id: &str, view: Option<RunView>) -> HostResult<EndedFacts> {
        let Some(view) = view else {
            return Ok(EndedFacts::of_journal(&self.store.journal_events(run_id)?));
        };
        let facts = EndedFacts::of_view(&view);
        #[cfg(debug_assertions)]
        {
            let read = EndedFacts::of_journal(&self.store.journal_events(run_id)?);
            debug_assert_eq!(
                (
                    &facts.usage,
                    facts.cancelled,
                    facts.outage.as_ref().map(|o| &o.1)
                ),
                (
                    &read.usage,
                    read.cancelled,
                    read.outage.as_ref().map(|o| &o.1)
                ),
                "run {run_id}: the drive's view and its journal disagree"
            );
        }
        Ok(facts)
    }
}

/// The task type `kind` as this worker registered it; the error names the ones it has.
fn registered<'t>(types: &'t TaskTypes, kind: &str) -> HostResult<&'t TaskType> {
    types.get(kind).ok_or_else(|| {
        HostError::BadInput(format!(
            "task type `{kind}` is not registered here; known: {}",
            types.names().join(", ")
        ))
    })
}

/// The slot an attempt's run opens with: what its `submit` checks against (§13.4).
fn new_slot(job: &AttemptJob, ty: &TaskType) -> Slot {
    Slot {
        allowed_tools: job.profile.as_ref().and_then(RuntimeProfile::allowed_tools),
        profile: job
            .profile
            .as_ref()
            .map(|p| format!("`{}` ({})", p.name, p.fingerprint))
            .unwrap_or_default(),
        output_schema: ty.output_schema.clone(),
        needs_assessment: job.criteria.is_some(),
        rules: Some((job.kind.clone(), job.input.clone())),
        repairs_max: job.repairs_max,
        invalid: 0,
        lease: job.lease.clone(),
        accepted: None,
    }
}

/// An accepted submission: the result and its self-assessment.
pub(super) type Submitted = (Value, Option<Value>);

/// The report of an attempt whose run ended (§13.1), decided from its journal and what its
/// `submit` accepted: the accepted output, or a failure that says why — a cancel, a model
/// outage, the repairs spent, or the missing handoff. `slot`: the accepted submission and
/// whether the repairs were spent.
pub(super) fn ended_report(
    kind: &str,
    input: &Value,
    outage: Option<(crate::model::Outage, String)>,
    cancelled: bool,
    slot: Option<(Option<Submitted>, bool)>,
) -> ReportKind {
    if cancelled {
        // A cancelled run hands nothing over, even a submission accepted before the
        // cancel: the board's cancel wins (§13.3).
        return ReportKind::Failed {
            retryable: false,
            reason: "the task was cancelled".into(),
            class: None,
        };
    }
    match slot {
        Some((Some((result, self_assessment)), _)) => {
            let verdict = verdict_of(kind, input, &result);
            ReportKind::Accepted {
                result,
                self_assessment,
                verdict,
            }
        }
        // The host notices the missing handoff (§13.1): a run may fail for reasons
        // another try can fix, so it is retryable while attempts remain.
        not_accepted => match outage {
            // The attempt's end names the outage; a refusal is not retried.
            Some((outage, why)) => ReportKind::Failed {
                retryable: outage.retryable(),
                reason: format!("{}: {why}", outage.words()),
                class: Some(vouch_core::board::FailureClass::ModelOutage),
            },
            None => ReportKind::Failed {
                retryable: true,
                reason: "the run ended without an accepted submission".into(),
                // Every submission malformed, the repairs spent (§13.4.1): the class
                // says so; a run that never submitted is not classified.
                class: matches!(not_accepted, Some((None, true)))
                    .then_some(vouch_core::board::FailureClass::MalformedOutput),
            },
        },
    }
}

/// The model outage that stopped the run's loop, if one did, with the journaled reason.
pub(super) fn model_outage(journal: &[EventEntry]) -> Option<(crate::model::Outage, String)> {
    journal.iter().rev().find_map(|e| match &e.event {
        Ok(Event::LoopEnded(l)) if l.cause == "model_error" => {
            crate::model::Outage::of(&l.reason).map(|o| (o, l.reason.clone()))
        }
        _ => None,
    })
}

/// What a task attempt's model is told, kept in its run's spec: the first message (brief,
/// pinned input, criteria and the self-assessment they need, the output schema, how the
/// attempt ends), the output schema `submit` takes, and for a judge its target.
fn task_told(job: &AttemptJob, ty: &TaskType, given: &super::given::Given) -> Value {
    let mut msg = format!(
        "[vouch host] You are doing task {} (type `{}`), attempt {}.\n\nBrief:\n{}\n",
        job.task_id, job.kind, job.attempt, job.brief
    );
    let mut pinned = job.input.clone();
    if let Some(m) = pinned.as_object_mut() {
        m.remove("continuation");
        if m.get("brief").and_then(Value::as_str) == Some(job.brief.as_str()) {
            m.remove("brief");
        }
    }
    if pinned.as_object().is_some_and(|m| !m.is_empty()) {
        msg.push_str(&format!(
            "\nPinned context (the task's input, exactly as offered):\n{}\n",
            pretty(&pinned)
        ));
    }
    // Pinned texts where the profile places them, and the input artifacts to read (§13.1.2,
    // §13.1.3); the run's spec keeps which, and where.
    let mut extra = json!({});
    super::given::tell(given, &mut msg, &mut extra);
    let criteria = criteria_list(job);
    let target = (job.kind == "judge")
        .then(|| job.input.get("target").and_then(Value::as_str))
        .flatten();
    if !criteria.is_empty() {
        msg.push_str("\nSuccess criteria:\n");
        for (i, c) in criteria.iter().enumerate() {
            msg.push_str(&format!("{}. {c}\n", i + 1));
        }
        if target.is_none() {
            msg.push_str("Your `submit` must include `self_assessment`: an object with one entry per criterion above, keyed by its text, each {\"met\": true|false, \"note\": \"why\"}.\n");
        }
    }
    if let Some(t) = target {
        msg.push_str(&format!(
            "\nYou judge task {t}. Read its brief, accepted output and artifacts with the `read_target` tool (they are not pasted here). Your verdict scores every criterion above and only those: `scores` maps each criterion's exact text to a number from 0 to 1, and `passed` says whether the output meets them all.\n"
        ));
    }
    msg.push_str(&format!(
        "\nFirst `declare` the manifest of what you will deliver besides the result (`deliveries: []` when nothing). Your result must match the task type's output schema (it is the `result` parameter of the `submit` tool):\n{}\n\nThe attempt ends only by `submit` with a result that fits: a final message without an accepted submission fails the attempt. A malformed result comes back naming the failing path; repair it and submit again.",
        pretty(&ty.output_schema)
    ));
    let mut told = json!({"message": msg, "output_schema": ty.output_schema});
    if let (Some(t), Some(x)) = (told.as_object_mut(), extra.as_object()) {
        t.extend(x.clone());
    }
    if let Some(t) = target {
        told["target"] = json!(t);
    }
    told
}

fn pretty(v: &Value) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|_| v.to_string())
}

/// The task's criteria as text: a list of strings (or a judge's `criteria` input).
fn criteria_list(job: &AttemptJob) -> Vec<String> {
    let from = |v: &Value| -> Vec<String> {
        match v {
            Value::Array(items) => items
                .iter()
                .map(|c| {
                    c.as_str()
                        .map(String::from)
                        .unwrap_or_else(|| c.to_string())
                })
                .collect(),
            Value::Null => vec![],
            other => vec![other
                .as_str()
                .map(String::from)
                .unwrap_or_else(|| other.to_string())],
        }
    };
    match &job.criteria {
        Some(c) => from(c),
        None => from(job.input.get("criteria").unwrap_or(&Value::Null)),
    }
}

/// A judge task's verdict on its target, read from its accepted result (`None` for any
/// other type). Shared by the host's own attempts and the workers' routes.
pub fn verdict_of(kind: &str, input: &Value, result: &Value) -> Option<Box<Verdict>> {
    (kind == "judge").then(|| {
        Box::new(Verdict {
            target: input
                .get("target")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            passed: result.get("passed").and_then(Value::as_bool) == Some(true),
            scores: result.get("scores").cloned().unwrap_or(json!({})),
        })
    })
}

/// Turns, tokens and tool calls from the host's own journal of the run (§13.7).
pub fn usage_of(journal: &[EventEntry]) -> Usage {
    let mut u = Usage::default();
    for e in journal {
        // A body that does not parse counts as nothing here; the run's view marks it corrupt.
        match &e.event {
            Ok(Event::Turn(t)) => {
                u.turns += 1;
                if let Some(use_) = &t.usage {
                    u.tokens += (use_.prompt_tokens + use_.completion_tokens) as i64;
                }
            }
            Ok(Event::ToolCalled(c)) => {
                u.tool_calls += 1;
                if !c.ok {
                    u.failed_tool_calls += 1;
                }
            }
            _ => {}
        }
    }
    u
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// Issue 21 defect 6: a result's `artifacts` are `sha256:` content ids present in the
    /// artifact store, else the result is malformed (a path, a name, an id nothing was
    /// stored under; and with no store, nothing is stored).
    #[test]
    fn a_results_artifacts_must_be_stored_content_ids() {
        use vouch_artifacts::ArtifactStore as _;
        let tmp = tempfile::tempdir().unwrap();
        let store = vouch_artifacts::LocalStore::in_home(tmp.path());
        let cid = store.put(b"the report").unwrap();
        let unstored = vouch_artifacts::content_id(b"never stored");
        let errors = |artifacts: Value, store: Option<&dyn vouch_artifacts::ArtifactStore>| {
            result_errors(
                "freeform",
                &json!({"brief": "b"}),
                &json!({"summary": "s", "artifacts": artifacts}),
                store,
            )
        };
        assert!(errors(json!([]), Some(&store)).is_empty());
        assert!(errors(json!([cid]), Some(&store)).is_empty());
        let long = "x".repeat(10_000);
        for bad in [
            "../../../victim/README",
            "/etc/passwd",
            "report.md",
            "SHA256:ABC",
            &cid.to_uppercase(),
            &long,
        ] {
            let e = errors(json!([cid, bad]), Some(&store));
            assert_eq!(e.len(), 1, "{bad}: {e:?}");
            assert!(e[0].starts_with("at /artifacts/1: ") && e[0].contains("not a content id"));
            assert!(
                e[0].len() < 400,
                "a hostile string is shown shortened: {}",
                e[0]
            );
        }
        let e = errors(json!([unstored]), Some(&store));
        assert!(
            e[0].contains("no artifact") && e[0].contains(&unstored),
            "{e:?}"
        );
        assert_eq!(
            errors(json!([cid]), None).len(),
            1,
            "no store: nothing is stored"
        );
        assert_eq!(
            errors(json!("x"), Some(&store)).len(),
            1,
            "a custom type's non-list"
        );
    }

    /// Issue 21 defect 6: a judge's verdict scores exactly the task's criteria; a missing or
    /// an unknown criterion is malformed.
    #[test]
    fn a_judges_verdict_scores_exactly_the_tasks_criteria() {
        let input = json!({"target": "t1", "criteria": ["accurate", "concise"]});
        let errors = |scores: Value| {
            result_errors(
                "judge",
                &input,
                &json!({"passed": true, "scores": scores}),
                None,
            )
        };
        assert!(errors(json!({"accurate": 1, "concise": 0.5})).is_empty());
        let e = errors(json!({"accurate": 1}));
        assert!(
            e.len() == 1 && e[0].contains("no score for criterion \"concise\""),
            "{e:?}"
        );
        let e = errors(json!({"accurate": 1, "concise": 1, "witty\u{202e}": 1}));
        assert!(e.len() == 1 && e[0].contains("is not a criterion"), "{e:?}");
        assert!(e[0].contains("\\u{202e}"), "escaped, not raw: {e:?}");
        assert_eq!(errors(json!({})).len(), 2);
        // Only a judge's scores are held to its criteria.
        let other = result_errors(
            "freeform",
            &input,
            &json!({"summary": "s", "scores": {}}),
            None,
        );
        assert!(other.is_empty(), "{other:?}");
    }

    #[test]
    fn validation_names_the_failing_path() {
        let t = TaskTypes::builtin();
        let schema = &t.get("freeform").unwrap().output_schema;
        assert!(validate(schema, &json!({"summary": "ok"})).is_ok());
        let e = validate(schema, &json!({"summary": "", "artifacts": [1]})).unwrap_err();
        assert!(e.iter().any(|m| m.starts_with("at /summary")), "{e:?}");
        assert!(e.iter().any(|m| m.starts_with("at /artifacts/0")), "{e:?}");
        let e = validate(schema, &json!({})).unwrap_err();
        assert!(
            e[0].starts_with("at /:") && e[0].contains("summary"),
            "{e:?}"
        );
    }

    #[test]
    fn remote_references_are_not_fetched() {
        let schema = json!({"$ref": "http://127.0.0.1:9/schema.json"});
        assert!(validate(&schema, &json!({})).is_err());
    }

    #[test]
    fn custom_types_load_from_files() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("haiku.json"),
            r#"{"name": "haiku", "output_schema": {"type": "object", "required": ["lines"], "properties": {"lines": {"type": "array", "minItems": 3, "maxItems": 3}}}}"#,
        )
        .unwrap();
        let t = TaskTypes::with_dir(dir.path()).unwrap();
        assert_eq!(t.names(), vec!["freeform", "haiku", "judge", "patch"]);
        let e = validate(
            &t.get("haiku").unwrap().output_schema,
            &json!({"lines": []}),
        )
        .unwrap_err();
        assert!(e[0].starts_with("at /lines"), "{e:?}");
        std::fs::write(
            dir.path().join("bad.json"),
            r#"{"name": "bad", "output_schema": {"type": 5}}"#,
        )
        .unwrap();
        let err = TaskTypes::with_dir(dir.path()).unwrap_err();
        assert!(
            err.contains("bad.json") && err.contains("output_schema"),
            "{err}"
        );
    }

    fn entry(seq: i64, kind: vouch_store::EventKind, body: Value) -> EventEntry {
        EventEntry::of(&vouch_store::JournalEntry {
            run_id: "r".into(),
            seq,
            kind,
            delivery: None,
            body,
            at_ms: seq,
            prev_hash: String::new(),
            hash: String::new(),
        })
    }

    /// A body that does not parse tells nothing about an attempt: no turn, no call, no
    /// submission, no cancel; the outage is the last loop end that reads. A body read by
    /// its fields instead would take the corrupt `submit` answer as an accepted result.
    #[test]
    fn a_corrupt_entry_counts_as_nothing_in_an_attempts_facts() {
        use vouch_store::EventKind as K;
        let submit = |id: &str, result: i64| {
            json!({"index": 0, "tool_calls": [{"id": id, "name": "submit",
                "arguments": format!("{{\"result\": {result}}}")}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4}})
        };
        let answer =
            |id: &str, ok: bool| json!({"call_id": id, "name": "submit", "ok": ok, "result": ""});
        let mut corrupt_ok = answer("c2", true);
        corrupt_ok["extra"] = json!(1);
        let outage = "the model could not be reached after 4 attempts: refused";
        let journal = [
            entry(1, K::Turn, submit("c1", 1)),
            entry(2, K::ToolCalled, answer("c1", false)),
            entry(3, K::Turn, json!({"index": "one"})),
            entry(4, K::Turn, submit("c2", 2)),
            entry(5, K::ToolCalled, corrupt_ok),
            entry(
                6,
                K::LoopEnded,
                json!({"cause": "model_error", "reason": outage}),
            ),
            entry(
                7,
                K::LoopEnded,
                json!({"cause": "cancelled", "reason": "", "x": 1}),
            ),
        ];
        assert!(journal
            .iter()
            .filter(|e| e.event.is_err())
            .map(|e| e.seq)
            .eq([3, 5, 7]));
        let u = usage_of(&journal);
        let counts = (u.turns, u.tokens, u.tool_calls, u.failed_tool_calls);
        assert_eq!(counts, (2, 14, 1, 1));
        assert_eq!(submitted_in(&journal), (None, 1));
        let facts = EndedFacts::of_journal(&journal);
        assert!(!facts.cancelled, "a corrupt cancel is not a cancel");
        assert_eq!(facts.outage.map(|o| o.1).as_deref(), Some(outage));
        let accepted = [
            entry(8, K::Turn, submit("c3", 3)),
            entry(9, K::ToolCalled, answer("c3", true)),
        ];
        let journal: Vec<EventEntry> = journal.into_iter().chain(accepted).collect();
        assert_eq!(submitted_in(&journal), (Some((json!(3), None)), 1));
    }
}
