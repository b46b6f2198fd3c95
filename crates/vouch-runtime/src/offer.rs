//! Offering a task on the board (§13.1, §13.2): the checks and the record that every interface
//! (the CLI's `task offer`, `POST /api/tasks`, MCP) shares, so none decides anything itself.
//! A judge's producer is excluded from claiming it (§13.4); `after` becomes a claim condition;
//! the request's content id (for the idempotency key) covers everything the request says.

use crate::host::{validate, TaskTypes};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use vouch_core::board::{self as core_board, Condition};
use vouch_store::board::{content_id, BoardStore, NewTask, Offered, TaskSpec};
use vouch_store::StoreError;

/// Tags one task carries at most, and a tag's length at most.
pub const TAGS_MAX: usize = 32;
pub const TAG_CHARS_MAX: usize = 64;
/// Pinned context texts one offer carries at most, and their bytes at most together.
pub const CONTEXT_MAX: usize = 16;
pub const CONTEXT_BYTES_MAX: usize = 256 * 1024;
/// Input artifacts one offer binds at most.
pub const INPUT_ARTIFACTS_MAX: usize = 32;
/// A brief's length at most, in characters.
pub const BRIEF_CHARS_MAX: usize = 16_384;
/// An idempotency key's length at most.
pub const IDEMPOTENCY_KEY_CHARS_MAX: usize = 200;
/// The longest lease, heartbeat or timeout an offer may set (30 days): the board adds them
/// to the clock, which must not overflow.
pub const DURATION_MS_MAX: i64 = 30 * 86_400_000;

fn default_max_attempts() -> u32 {
    core_board::DEFAULT_MAX_ATTEMPTS
}
fn default_lease_ms() -> i64 {
    core_board::DEFAULT_LEASE_MS
}
fn default_heartbeat_ms() -> i64 {
    core_board::DEFAULT_HEARTBEAT_MS
}
fn default_dispatch_timeout_ms() -> i64 {
    core_board::DEFAULT_DISPATCH_TIMEOUT_MS
}
fn default_running_timeout_ms() -> i64 {
    core_board::DEFAULT_RUNNING_TIMEOUT_MS
}

/// What an offer says. The JSON field names are the API's; the CLI's flags are the same
/// names with dashes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TaskOffer {
    /// `freeform`, `judge`, or a type registered in the home's `types/`.
    #[serde(rename = "type")]
    pub kind: String,
    /// What the task asks for, in words (the worker's prompt).
    pub brief: String,
    /// Validated against the type's input schema; default `{"brief": brief}`.
    #[serde(default)]
    pub input: Option<Value>,
    #[serde(default)]
    pub tags: Vec<String>,
    /// Success criteria; the producer must self-assess against them.
    #[serde(default)]
    pub criteria: Option<Value>,
    /// 1–20.
    #[serde(default = "default_max_attempts")]
    pub max_attempts: u32,
    /// Claimable only once each of these tasks has an accepted output.
    #[serde(default)]
    pub after: Vec<String>,
    /// Runtime profiles allowed to claim (empty: any).
    #[serde(default)]
    pub profiles: Vec<String>,
    /// Expire the task if nobody claimed it within this many seconds.
    #[serde(default)]
    pub deadline_s: Option<i64>,
    #[serde(default = "default_lease_ms")]
    pub lease_ms: i64,
    #[serde(default = "default_heartbeat_ms")]
    pub heartbeat_ms: i64,
    #[serde(default = "default_dispatch_timeout_ms")]
    pub dispatch_timeout_ms: i64,
    #[serde(default = "default_running_timeout_ms")]
    pub running_timeout_ms: i64,
    /// Tasks this one refers to (a continuation's parent, §13.5.2); `after` and a judge's
    /// target are added to them.
    #[serde(default)]
    pub references: Vec<String>,
    /// The thread this task belongs to (§13.5.2: a continuation `extend`s its parent's).
    #[serde(default)]
    pub correlation: Option<String>,
    /// Pinned context (§13.1.2): content ids of stored UTF-8 texts, given to the attempt's
    /// model with the task and pinned by the offer.
    #[serde(default)]
    pub context: Vec<String>,
    /// Input artifacts (§13.1.3): content ids of stored artifacts the attempt's model reads
    /// through its `read_input` tool (and a judge of the task sees); pinned by the offer.
    #[serde(default)]
    pub input_artifacts: Vec<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum OfferError {
    /// The request is wrong in one named field (the CLI shows it as `--field-name`).
    #[error("{field}: {message}")]
    Field {
        field: &'static str,
        message: String,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn field(field: &'static str, message: impl Into<String>) -> OfferError {
    OfferError::Field {
        field,
        message: message.into(),
    }
}

/// Names and ids are printable text, and no text holds a NUL, on either backend
/// (PostgreSQL cannot store a NUL; SQLite could, and a lookup would then miss it).
fn refuse_unprintable(req: &TaskOffer, idempotency_key: Option<&str>) -> Result<(), OfferError> {
    use vouch_core::input::check_id;
    let lists = [
        ("tags", &req.tags),
        ("after", &req.after),
        ("profiles", &req.profiles),
        ("references", &req.references),
    ];
    for (name, ids) in lists {
        if let Some(e) = ids.iter().find_map(|t| check_id(t).err()) {
            return Err(field(name, format!("has an entry that {e}")));
        }
    }
    for (name, id) in [
        ("type", Some(req.kind.as_str())),
        ("idempotency_key", idempotency_key),
        ("correlation", req.correlation.as_deref()),
    ] {
        // Empty is not this check's business: a fork's correlation is empty on purpose.
        if let Some(e) = id.filter(|t| !t.is_empty()).and_then(|t| check_id(t).err()) {
            return Err(field(name, e.to_string()));
        }
    }
    if req.brief.contains('\0') {
        return Err(field("brief", "contains a NUL character; remove it"));
    }
    Ok(())
}

/// The pinned context is stored UTF-8 text, bounded, and pinned here (§13.1.2): an id that
/// is not a content id, or names nothing stored, is bad input at offer time.
fn pin_context(
    artifacts: Option<&dyn vouch_artifacts::ArtifactStore>,
    cids: &[String],
) -> Result<(), OfferError> {
    if cids.is_empty() {
        return Ok(());
    }
    if cids.len() > CONTEXT_MAX {
        return Err(field(
            "context",
            format!("takes at most {CONTEXT_MAX} texts"),
        ));
    }
    let store = artifacts.ok_or_else(|| {
        field(
            "context",
            "cannot be pinned here: this host has no artifact store",
        )
    })?;
    let mut total = 0usize;
    for cid in cids {
        vouch_artifacts::parse_cid(cid).map_err(|e| field("context", format!("`{cid}`: {e}")))?;
        let bytes = store.get(cid).map_err(|e| {
            field(
                "context",
                format!(
                    "`{cid}` is not stored here ({e}); store it first (`vouch artifact put FILE`)"
                ),
            )
        })?;
        if std::str::from_utf8(&bytes).is_err() {
            return Err(field("context", format!("`{cid}` is not UTF-8 text")));
        }
        total += bytes.len();
        if total > CONTEXT_BYTES_MAX {
            return Err(field(
                "context",
                format!("is more than {CONTEXT_BYTES_MAX} bytes together"),
            ));
        }
    }
    for cid in cids {
        store
            .pin(cid)
            .map_err(|e| field("context", format!("`{cid}` could not be pinned: {e}")))?;
    }
    Ok(())
}

/// Input artifacts are stored artifacts (any bytes), bounded in number, and pinned here
/// (§13.1.3): an id that is not a content id, or names nothing stored, is bad input at offer
/// time and nothing is offered.
pub fn pin_input_artifacts(
    artifacts: Option<&dyn vouch_artifacts::ArtifactStore>,
    cids: &[String],
) -> Result<(), OfferError> {
    if cids.is_empty() {
        return Ok(());
    }
    if cids.len() > INPUT_ARTIFACTS_MAX {
        return Err(field(
            "input_artifacts",
            format!("takes at most {INPUT_ARTIFACTS_MAX} artifacts"),
        ));
    }
    let store = artifacts.ok_or_else(|| {
        field(
            "input_artifacts",
            "cannot be bound here: this host has no artifact store",
        )
    })?;
    for cid in cids {
        vouch_artifacts::parse_cid(cid)
            .map_err(|e| field("input_artifacts", format!("`{cid}`: {e}")))?;
        let stored = store
            .exists(cid)
            .map_err(|e| field("input_artifacts", format!("`{cid}` cannot be checked: {e}")))?;
        if !stored {
            return Err(field(
                "input_artifacts",
                format!("`{cid}` is not stored here; store it first (`vouch artifact put FILE`)"),
            ));
        }
    }
    for cid in cids {
        store.pin(cid).map_err(|e| {
            field(
                "input_artifacts",
                format!("`{cid}` could not be pinned: {e}"),
            )
        })?;
    }
    Ok(())
}

/// Check an offer and put it on the board: `Created`, or `Existing` for a repeated
/// idempotency key with the same request (a different request under it is `Conflict`).
#[allow(clippy::too_many_arguments)]
pub fn offer(
    board: &dyn BoardStore,
    types: &TaskTypes,
    artifacts: Option<&dyn vouch_artifacts::ArtifactStore>,
    req: &TaskOffer,
    idempotency_key: Option<String>,
    owner: &str,
    id: String,
    now_ms: i64,
) -> Result<Offered, OfferError> {
    if core_board::check_max_attempts(req.max_attempts).is_err() {
        return Err(field(
            "max_attempts",
            format!(
                "must be between {} and {}, not {}",
                core_board::MAX_ATTEMPTS_MIN,
                core_board::MAX_ATTEMPTS_MAX,
                req.max_attempts
            ),
        ));
    }
    for (v, name) in [
        (req.lease_ms, "lease_ms"),
        (req.heartbeat_ms, "heartbeat_ms"),
        (req.dispatch_timeout_ms, "dispatch_timeout_ms"),
        (req.running_timeout_ms, "running_timeout_ms"),
    ] {
        if v <= 0 || v > DURATION_MS_MAX {
            return Err(field(
                name,
                format!("must be a positive number of milliseconds, at most {DURATION_MS_MAX} (30 days)"),
            ));
        }
    }
    if req.heartbeat_ms >= req.lease_ms {
        return Err(field(
            "heartbeat_ms",
            "must be shorter than lease_ms, or every lease lapses between heartbeats",
        ));
    }
    if req.deadline_s.is_some_and(|s| s <= 0) {
        return Err(field("deadline_s", "must be a positive number of seconds"));
    }
    if req.brief.trim().is_empty() {
        return Err(field("brief", "is empty; say what the task is"));
    }
    if req.brief.chars().count() > BRIEF_CHARS_MAX {
        return Err(field(
            "brief",
            format!("is longer than {BRIEF_CHARS_MAX} characters; put the rest in the input"),
        ));
    }
    if req.tags.len() > TAGS_MAX
        || req
            .tags
            .iter()
            .any(|t| t.trim().is_empty() || t.chars().count() > TAG_CHARS_MAX)
    {
        return Err(field(
            "tags",
            format!("takes at most {TAGS_MAX} tags, each 1–{TAG_CHARS_MAX} characters"),
        ));
    }
    if let Some(k) = &idempotency_key {
        if k.trim().is_empty() || k.chars().count() > IDEMPOTENCY_KEY_CHARS_MAX {
            return Err(field(
                "idempotency_key",
                format!("must be 1–{IDEMPOTENCY_KEY_CHARS_MAX} characters"),
            ));
        }
    }
    refuse_unprintable(req, idempotency_key.as_deref())?;
    pin_context(artifacts, &req.context)?;
    pin_input_artifacts(artifacts, &req.input_artifacts)?;
    let ty = types.get(&req.kind).ok_or_else(|| {
        field(
            "type",
            format!(
                "names no known task type (`{}`); known: {} (register more as JSON files in the home's types/)",
                req.kind,
                types.names().join(", ")
            ),
        )
    })?;
    let input = req
        .input
        .clone()
        .unwrap_or_else(|| json!({"brief": req.brief}));
    // A continuation's own key (§13.5.2) is the host's, not the type's: the rest is validated.
    let mut typed = input.clone();
    if let Some(o) = typed.as_object_mut() {
        o.remove("continuation");
    }
    if let Err(errors) = validate(&ty.input_schema, &typed) {
        return Err(field(
            "input",
            format!("does not fit type `{}`: {}", req.kind, errors.join("; ")),
        ));
    }
    let mut references = req.references.clone();
    references.extend(req.after.iter().cloned());
    let mut excluded = None;
    if req.kind == "judge" {
        let target = input
            .get("target")
            .and_then(Value::as_str)
            .unwrap_or_default();
        let t = board.task(target)?.ok_or_else(|| {
            field(
                "input",
                format!("names a judge target `{target}` that is not a task here"),
            )
        })?;
        let Some(n) = t.accepted_attempt else {
            return Err(field(
                "input",
                format!(
                    "names task `{target}`, which has no accepted output to judge (it is {})",
                    t.state
                ),
            ));
        };
        // The producer may not judge its own output (§13.4).
        excluded = board
            .attempts(target)?
            .into_iter()
            .find(|x| x.n == n)
            .map(|x| x.claimant);
        references.push(target.to_string());
    }
    let condition = match req.after.len() {
        0 => None,
        1 => Some(Condition::TaskAccepted(req.after[0].clone())),
        _ => Some(Condition::All(
            req.after
                .iter()
                .cloned()
                .map(Condition::TaskAccepted)
                .collect(),
        )),
    };
    let mut request = json!({
        "type": req.kind, "brief": req.brief, "input": input, "tags": req.tags,
        "criteria": req.criteria, "max_attempts": req.max_attempts, "after": req.after,
        "profiles": req.profiles, "deadline_s": req.deadline_s, "lease_ms": req.lease_ms,
        "heartbeat_ms": req.heartbeat_ms, "dispatch_timeout_ms": req.dispatch_timeout_ms,
        "running_timeout_ms": req.running_timeout_ms,
    });
    // Only a continuation says these; a plain request's content id stays what it was.
    if !req.references.is_empty() {
        request["references"] = json!(req.references);
    }
    if let Some(c) = &req.correlation {
        request["correlation"] = json!(c);
    }
    if !req.context.is_empty() {
        request["context"] = json!(req.context);
    }
    if !req.input_artifacts.is_empty() {
        request["input_artifacts"] = json!(req.input_artifacts);
    }
    let task = NewTask {
        id,
        kind: req.kind.clone(),
        owner: owner.to_string(),
        max_attempts: req.max_attempts,
        deadline_ms: req
            .deadline_s
            .map(|s| now_ms.saturating_add(s.saturating_mul(1000))),
        profiles: req.profiles.clone(),
        tags: req.tags.clone(),
        excluded_claimant: excluded,
        condition,
        idempotency_key,
        request_id: content_id(&request)?,
        spec: TaskSpec {
            brief: req.brief.clone(),
            input,
            context: req.context.clone(),
            input_artifacts: req.input_artifacts.clone(),
            correlation: req.correlation.clone().unwrap_or_default(),
            criteria: req.criteria.clone(),
            references,
            lease_ms: req.lease_ms,
            heartbeat_ms: req.heartbeat_ms,
            dispatch_timeout_ms: req.dispatch_timeout_ms,
            running_timeout_ms: req.running_timeout_ms,
        },
        created_ms: now_ms,
    };
    Ok(board.offer(&task)?)
}

/// Why a completed task cannot be continued.
#[derive(Debug, thiserror::Error)]
pub enum ContinueError {
    #[error("no task `{0}`")]
    NoTask(String),
    /// The task has no accepted output, or its accepted attempt no run to go on from.
    #[error("{0}")]
    Refused(String),
    #[error("{field}: {message}")]
    Field {
        field: &'static str,
        message: String,
    },
    #[error("{0}")]
    Host(#[from] crate::HostError),
    #[error("store the conversation: {0}")]
    Artifacts(String),
}

/// A completed task's continuation (§13.5), as `vouch task continue`, the HTTP route and the
/// MCP tool make it: the conversation of the parent's accepted attempt is pinned by content
/// id (stored as an artifact); the new task carries the parent's type, input (with the new
/// brief and the continuation), tags, criteria and limits, references the parent, and
/// `extend`s its thread or `fork`s a new one. The caller offers what this answers.
pub fn continuation(
    host: &crate::Host,
    board: &dyn BoardStore,
    artifacts: &dyn vouch_artifacts::ArtifactStore,
    id: &str,
    brief: String,
    mode: &str,
) -> Result<TaskOffer, ContinueError> {
    if mode != "extend" && mode != "fork" {
        return Err(ContinueError::Field {
            field: "mode",
            message: format!(
                "is `extend` or `fork`, not `{}`",
                vouch_core::escape_line(mode)
            ),
        });
    }
    if brief.trim().is_empty() {
        return Err(ContinueError::Field {
            field: "brief",
            message: "is empty: say what the continuation asks for".into(),
        });
    }
    let parent = board
        .task(id)
        .map_err(crate::HostError::from)?
        .ok_or_else(|| ContinueError::NoTask(id.to_string()))?;
    let Some(n) = parent.accepted_attempt else {
        return Err(ContinueError::Refused(format!(
            "task `{id}` is {} with no accepted output; only a completed task can be continued",
            parent.state
        )));
    };
    let run = board
        .attempts(id)
        .map_err(crate::HostError::from)?
        .into_iter()
        .find(|a| a.n == n)
        .and_then(|a| a.run_id)
        .ok_or_else(|| {
            ContinueError::Refused(format!(
                "task `{id}`'s accepted attempt has no run to go on from"
            ))
        })?;
    let (conversation, cid) = host.conversation(&run)?;
    let stored = artifacts
        .put_json(&conversation)
        .and_then(|c| artifacts.pin(&c).map(|()| c))
        .map_err(|e| ContinueError::Artifacts(e.to_string()))?;
    if stored != cid {
        return Err(ContinueError::Artifacts(format!(
            "the conversation was stored as {stored}, not {cid}; the artifact store disagrees with the board"
        )));
    }
    let mut input = parent.spec.input.clone();
    if let Some(o) = input.as_object_mut() {
        o.insert(
            "continuation".into(),
            serde_json::json!({"parent": id, "mode": mode, "run": run, "conversation": cid}),
        );
        if o.contains_key("brief") {
            o.insert("brief".into(), serde_json::json!(brief));
        }
    }
    let s = &parent.spec;
    Ok(TaskOffer {
        kind: parent.kind.clone(),
        brief,
        input: Some(input),
        tags: parent.tags.clone(),
        criteria: s.criteria.clone(),
        max_attempts: parent.max_attempts,
        after: vec![],
        profiles: parent.profiles.clone(),
        deadline_s: None,
        lease_ms: s.lease_ms,
        heartbeat_ms: s.heartbeat_ms,
        dispatch_timeout_ms: s.dispatch_timeout_ms,
        running_timeout_ms: s.running_timeout_ms,
        references: vec![id.to_string()],
        // extend: the parent's thread goes on; fork: a new thread from the parent's tip.
        correlation: Some(match mode {
            "fork" => String::new(),
            _ if s.correlation.is_empty() => id.to_string(),
            _ => s.correlation.clone(),
        }),
        context: s.context.clone(),
        // A continuation keeps its parent's input artifacts (§13.1.3).
        input_artifacts: s.input_artifacts.clone(),
    })
}
