//! Task attempts as vouch runs (§13.1, §13.4): a run with trigger `task` (autonomous) whose
//! `submit` tool validates the result against the task type's output schema, gives the live
//! session a bounded number of repairs naming the failing JSON path, and keeps the accepted
//! submission for the board. The host — not the model — then decides the attempt's report:
//! a run that ends without an accepted submission fails its attempt. Touches the run through
//! `create`/`drive` only, and the journal read-only (usage counts); never a provider.

use super::*;
use std::collections::HashMap;
use std::sync::Mutex;
use vouch_store::board::{ReportKind, Usage, Verdict};

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
        let len = std::fs::metadata(p)
            .map_err(|e| format!("cannot read type file {shown}: {e}"))?
            .len();
        if len > TYPE_FILE_BYTES_MAX {
            return Err(format!(
                "type file {shown} is {len} bytes; at most {TYPE_FILE_BYTES_MAX}"
            ));
        }
        let text = std::fs::read_to_string(p)
            .map_err(|e| format!("cannot read type file {shown}: {e}"))?;
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

/// What the live session may submit in one attempt's run.
struct Slot {
    output_schema: Value,
    needs_assessment: bool,
    repairs_max: u32,
    invalid: u32,
    accepted: Option<(Value, Option<Value>)>,
}

/// Work tools of a worker: the `submit` tool for each running attempt (by run id), beside
/// the standard tools.
pub struct TaskWork {
    pub inner: Arc<dyn WorkTools>,
    slots: Mutex<HashMap<String, Slot>>,
    /// Patch attempts' worktree tools (§14), when this worker takes patch tasks.
    pub patch: Option<Arc<super::patch::PatchWork>>,
}

impl TaskWork {
    pub fn new(inner: Arc<dyn WorkTools>) -> Self {
        TaskWork {
            inner,
            slots: Mutex::new(HashMap::new()),
            patch: None,
        }
    }

    /// Take patch tasks too: their worktree tools beside the standard ones.
    pub fn with_patch(mut self, patch: super::patch::PatchWork) -> Self {
        self.patch = Some(Arc::new(patch));
        self
    }

    /// A patch run may still call `submit`: what it says is kept as an advisory
    /// self-assessment and decides nothing (§14).
    pub(super) fn open_advisory(&self, run_id: &str) {
        self.open(
            run_id,
            Slot {
                output_schema: json!({"type": "object"}),
                needs_assessment: false,
                repairs_max: 0,
                invalid: 0,
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

fn submit_spec() -> ToolSpec {
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
        if let Some(r) = self.patch.as_ref().and_then(|p| p.call(run_id, call, args)) {
            return Some(r);
        }
        if call.name != "submit" {
            return self.inner.call(run_id, spec, call, args);
        }
        let Ok(mut slots) = self.slots.lock() else {
            return Some(Err("the board is unavailable; try again".into()));
        };
        let Some(slot) = slots.get_mut(run_id) else {
            return Some(Err(
                "this run is not a task attempt: nothing to submit".into()
            ));
        };
        if slot.accepted.is_some() {
            return Some(Err(
                "a result was already accepted for this attempt; it cannot be replaced".into(),
            ));
        }
        if slot.invalid > slot.repairs_max {
            return Some(Err(format!(
                "no repairs left ({} malformed submissions); the attempt will fail",
                slot.invalid
            )));
        }
        let result = args.get("result").cloned().unwrap_or(Value::Null);
        let assessment = args
            .get("self_assessment")
            .cloned()
            .filter(|v| !v.is_null());
        let mut errors = match validate(&slot.output_schema, &result) {
            Ok(()) => vec![],
            Err(e) => e,
        };
        if slot.needs_assessment && assessment.is_none() {
            errors.push(
                "at /self_assessment: the task has success criteria; include your self-assessment against them".into(),
            );
        }
        if errors.is_empty() {
            slot.accepted = Some((result, assessment));
            return Some(Ok(
                "accepted: the result is valid and handed to the board".into()
            ));
        }
        slot.invalid += 1;
        let left = (slot.repairs_max + 1).saturating_sub(slot.invalid);
        Some(Err(format!(
            "malformed result ({}); {left} repair(s) left",
            errors.join("; ")
        )))
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
    /// The model of the run: `{"kind":"script","turns":[…]}` or `{"kind":"openai"}`.
    pub model: Value,
    pub repairs_max: u32,
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

impl Host {
    /// Run one attempt as a vouch run (trigger `task`) and decide its report (§13.1).
    pub fn run_task_attempt(
        &self,
        work: &TaskWork,
        types: &TaskTypes,
        job: &AttemptJob,
    ) -> HostResult<AttemptOutcome> {
        if job.kind == super::patch::PATCH_TYPE {
            return self.run_patch_attempt(work, job);
        }
        let ty = types.get(&job.kind).ok_or_else(|| {
            HostError::Invalid(format!(
                "task type `{}` is not registered here; known: {}",
                job.kind,
                types.names().join(", ")
            ))
        })?;
        let run_id = new_id(self.clock.as_ref());
        work.open(
            &run_id,
            Slot {
                output_schema: ty.output_schema.clone(),
                needs_assessment: job.criteria.is_some(),
                repairs_max: job.repairs_max,
                invalid: 0,
                accepted: None,
            },
        );
        let title = format!("task {} ({}): {}", job.task_id, job.kind, job.brief);
        let spec = RunSpec {
            trigger: TriggerKind::Task,
            title,
            presence: Some(Presence::Away),
            quiet: false,
            model: job.model.clone(),
            // Every attempt of a task shares one ledger scope (§8.1): a retry never repeats
            // an irreversible act an earlier attempt already did (I5).
            scope: Some(format!("task:{}", job.task_id)),
        };
        let driven = self
            .create(&run_id, &spec, None, None)
            .and_then(|()| self.drive(&run_id));
        let slot = work.take(&run_id);
        let end = driven?;
        let journal = self.store.journal(&run_id)?;
        let usage = usage_of(&journal);
        let receipt = self.store.receipt(&run_id)?;
        let report = match end {
            RunEnd::Suspended { .. } => None,
            RunEnd::Ended { .. } => Some(match slot.and_then(|s| s.accepted) {
                Some((result, self_assessment)) => {
                    let verdict = verdict_of(&job.kind, &job.input, &result);
                    ReportKind::Accepted {
                        result,
                        self_assessment,
                        verdict,
                    }
                }
                // The host notices the missing handoff (§13.1): a run may fail for reasons
                // another try can fix, so it is retryable while attempts remain.
                None => ReportKind::Failed {
                    retryable: true,
                    reason: "the run ended without an accepted submission".into(),
                },
            }),
        };
        Ok(AttemptOutcome {
            run_id,
            report,
            receipt,
            usage,
            evidence: None,
        })
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
pub fn usage_of(journal: &[vouch_store::JournalEntry]) -> Usage {
    let mut u = Usage::default();
    for e in journal {
        // A body that does not parse counts as nothing here; the run's view marks it corrupt.
        match Event::parse(e.kind, &e.body) {
            Ok(Event::Turn(t)) => {
                u.turns += 1;
                if let Some(use_) = t.usage {
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
}
