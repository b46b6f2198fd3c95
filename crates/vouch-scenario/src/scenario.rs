//! The scenario file (scenarios.md, "The file"). Defaults are the documented ones.

use crate::pattern::{dest_key, pattern_matches};
use indexmap::IndexMap;
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Map, Value};
use vouch_core::{
    Capability, DeliveryStatus, Destination, EndedBy, Manifest, Outcome, Posture, Presence, Route,
    Significance, TriggerKind, Verb,
};

use crate::report::{Gap, ReportState};
use crate::task::{ExpectTask, TaskPlan};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub id: String,
    #[serde(default)]
    pub prompt: String,
    #[serde(default)]
    pub trigger: Trigger,
    /// `None` means the documented default: `watching` for interactive, else `away`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub presence: Option<Presence>,
    #[serde(default)]
    pub quiet: bool,
    #[serde(default)]
    pub world: World,
    #[serde(default)]
    pub script: Vec<Turn>,
    #[serde(default)]
    pub decisions: Vec<Decision>,
    #[serde(default)]
    pub faults: Vec<Fault>,
    /// A task run (trigger `task`): the offer and the board events around its attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskPlan>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<Expect>,
}

impl Scenario {
    /// Checks across fields that serde cannot express; the error names the field.
    pub fn check(&self) -> Result<(), (String, String)> {
        let Some(t) = &self.task else {
            if self.script.iter().any(|t| matches!(t, Turn::Submit { .. })) {
                return Err((
                    "script".into(),
                    "a `submit` turn needs a `task` (only a task run has a result to submit)"
                        .into(),
                ));
            }
            return Ok(());
        };
        t.check().map_err(|m| ("task".into(), m))?;
        if self.trigger.kind != TriggerKind::Task {
            return Err((
                "trigger.kind".into(),
                "a scenario with a `task` runs with trigger `task`".into(),
            ));
        }
        if !self.decisions.is_empty() {
            return Err((
                "decisions".into(),
                "decisions inside task runs are not supported yet: a run that waits for a person suspends its attempt, and the scenario ends there".into(),
            ));
        }
        if !self.faults.is_empty() {
            return Err((
                "faults".into(),
                "faults do not apply to task runs: a worker that dies is a `crash` event in task.events".into(),
            ));
        }
        for e in t.events() {
            let crate::BoardStep::Worker(w) = e else {
                continue;
            };
            let turns = w.script.as_ref().unwrap_or(&self.script).len();
            if w.cancel_at_turn.is_some_and(|n| n > turns) {
                return Err((
                    "task.events".into(),
                    format!("`cancel_at_turn` names a turn the run's script does not have (it has {turns}): the model must be answering that turn when the cancel lands"),
                ));
            }
        }
        Ok(())
    }

    /// Presence with the documented default applied.
    pub fn presence(&self) -> Presence {
        self.presence.unwrap_or(match self.trigger.kind {
            TriggerKind::Interactive => Presence::Watching,
            _ => Presence::Away,
        })
    }
}

/// A scheduled trigger's policies are the store's and the scheduler's (one vocabulary).
pub use vouch_core::{CatchUp, Overlap};

fn interactive() -> TriggerKind {
    TriggerKind::Interactive
}
fn utc() -> String {
    "UTC".into()
}
fn yes() -> bool {
    true
}
fn grace_default() -> u64 {
    900
}
fn one() -> u32 {
    1
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Trigger {
    #[serde(default = "interactive")]
    pub kind: TriggerKind,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cron: Option<String>,
    #[serde(default = "utc")]
    pub tz: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slot: Option<String>,
    /// false: the machine was off and the slot elapsed with no run (contract §12.3).
    #[serde(default = "yes")]
    pub ran: bool,
    #[serde(default)]
    pub catch_up: CatchUp,
    #[serde(default)]
    pub overlap: Overlap,
    #[serde(default = "grace_default")]
    pub grace_s: u64,
}

impl Default for Trigger {
    fn default() -> Self {
        Trigger {
            kind: TriggerKind::Interactive,
            cron: None,
            tz: utc(),
            slot: None,
            ran: true,
            catch_up: CatchUp::Skip,
            overlap: Overlap::Skip,
            grace_s: 900,
        }
    }
}

/// What a provider does on an attempt (applies to the first attempt at a destination).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Behavior {
    #[default]
    Accept,
    Reject,
    AcceptUnverifiable,
    LoseResponse,
    FalseSuccess,
}

impl Behavior {
    pub const ALL: [Behavior; 5] = [
        Behavior::Accept,
        Behavior::Reject,
        Behavior::AcceptUnverifiable,
        Behavior::LoseResponse,
        Behavior::FalseSuccess,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Behavior::Accept => "accept",
            Behavior::Reject => "reject",
            Behavior::AcceptUnverifiable => "accept_unverifiable",
            Behavior::LoseResponse => "lose_response",
            Behavior::FalseSuccess => "false_success",
        }
    }
}

/// The world the scenario runs in. Pattern maps keep file order: the first match wins.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct World {
    #[serde(default)]
    pub capabilities: IndexMap<String, Capability>,
    #[serde(default)]
    pub automation: Vec<String>,
    #[serde(default)]
    pub behavior: IndexMap<String, Behavior>,
    #[serde(default)]
    pub idempotent_by_key: Vec<String>,
    #[serde(default)]
    pub existing: Vec<String>,
    /// What a file holds when the scenario starts, by its exact `kind:address` (such a file
    /// exists); a `save` of exactly this text is no change (contract §5.4.2) until the scenario
    /// attempts a save there.
    #[serde(default)]
    pub contents: IndexMap<String, String>,
}

impl World {
    /// The configured level of the first matching pattern, `None` when unlisted
    /// (scenarios.md: unlisted destinations are `executable`).
    pub fn configured_capability(&self, d: &Destination) -> Option<Capability> {
        let key = dest_key(d);
        self.capabilities
            .iter()
            .find(|(p, _)| pattern_matches(p, &key))
            .map(|(_, c)| *c)
    }

    /// Did the person opt `verb` at `d` into trusted automation?
    pub fn automation_covers(&self, verb: Verb, d: &Destination) -> bool {
        let key = format!("{}:{}", verb.as_str(), dest_key(d));
        self.automation.iter().any(|p| pattern_matches(p, &key))
    }

    /// The behaviour of the first matching pattern (`accept` when none matches).
    pub fn behavior_at(&self, d: &Destination) -> Behavior {
        let key = dest_key(d);
        self.behavior
            .iter()
            .find(|(p, _)| pattern_matches(p, &key))
            .map(|(_, b)| *b)
            .unwrap_or_default()
    }

    pub fn is_idempotent_by_key(&self, d: &Destination) -> bool {
        let key = dest_key(d);
        self.idempotent_by_key
            .iter()
            .any(|p| pattern_matches(p, &key))
    }

    pub fn exists(&self, d: &Destination) -> bool {
        let key = dest_key(d);
        self.existing.iter().any(|p| pattern_matches(p, &key)) || self.contents.contains_key(&key)
    }

    /// The text the file at `d` holds when the scenario starts, when `contents` names it.
    pub fn content_at(&self, d: &Destination) -> Option<&str> {
        self.contents.get(&dest_key(d)).map(String::as_str)
    }
}

/// A delivery-like act that no manifest item covers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Undeclared {
    pub verb: Verb,
    pub destination: Destination,
}

/// One model turn of the script.
#[derive(Debug, Clone, PartialEq)]
pub enum Turn {
    /// `{"declare": MANIFEST}`; a later one is an amendment.
    Declare(Manifest),
    /// `{"deliver": ID, "payload": {...}}`.
    Deliver { id: String, payload: Value },
    /// `{"undeclared": {"verb", "destination"}, "payload": {...}}`.
    Undeclared { act: Undeclared, payload: Value },
    /// `{"tool": NAME, "args": {...}, "fails": false}`.
    Tool {
        name: String,
        args: Value,
        fails: bool,
    },
    /// `{"clarify": "question"}`.
    Clarify(String),
    /// `{"final": "text"}`.
    Final(String),
    /// `{"submit": RESULT, "self_assessment": …}`: a task run submits its result (§13.4).
    Submit {
        result: Value,
        self_assessment: Option<Value>,
    },
}

fn empty_object() -> Value {
    Value::Object(Map::new())
}

mod shapes {
    use super::*;
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Declare {
        pub declare: Manifest,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Deliver {
        pub deliver: String,
        #[serde(default = "empty_object")]
        pub payload: Value,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Undecl {
        pub undeclared: Undeclared,
        #[serde(default = "empty_object")]
        pub payload: Value,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Tool {
        pub tool: String,
        #[serde(default = "empty_object")]
        pub args: Value,
        #[serde(default)]
        pub fails: bool,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Clarify {
        pub clarify: String,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Final {
        #[serde(rename = "final")]
        pub text: String,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Submit {
        pub submit: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub self_assessment: Option<Value>,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Approve {
        pub approve: String,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Deny {
        pub deny: String,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Edit {
        pub edit: String,
        #[serde(default = "empty_object")]
        pub payload: Value,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Answer {
        pub answer: String,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Resume {
        pub resume: bool,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Cancel {
        pub cancel: bool,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Crash {
        pub crash_after: CrashEvent,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        pub delivery: Option<String>,
        #[serde(default = "one")]
        pub nth: u32,
    }
    #[derive(Serialize, Deserialize)]
    #[serde(deny_unknown_fields)]
    pub struct Tamper {
        pub tamper_payload: String,
    }
}

/// Read a tagged object: `keys` lists the variant-identifying keys in priority order.
pub(crate) fn tagged<'de, D: Deserializer<'de>>(
    d: D,
    what: &str,
    keys: &[&'static str],
) -> Result<(&'static str, Value), D::Error> {
    let v = Value::deserialize(d)?;
    let Some(obj) = v.as_object() else {
        return Err(D::Error::custom(format!(
            "a {what} must be a JSON object with one of {keys:?}"
        )));
    };
    let Some(key) = keys.iter().find(|k| obj.contains_key(**k)) else {
        let got: Vec<&String> = obj.keys().collect();
        return Err(D::Error::custom(format!(
            "unknown {what} {got:?}; expected an object with one of {keys:?}"
        )));
    };
    Ok((key, v))
}

/// Deserialize the inner shape, keeping the inner field path in the message.
pub(crate) fn inner<T: serde::de::DeserializeOwned, E: serde::de::Error>(
    v: Value,
    what: &str,
) -> Result<T, E> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let path = e.path().to_string();
        E::custom(format!("{what}: at `{path}`: {}", e.into_inner()))
    })
}

impl<'de> Deserialize<'de> for Turn {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (key, v) = tagged(
            d,
            "script turn",
            &[
                "declare",
                "deliver",
                "undeclared",
                "tool",
                "clarify",
                "final",
                "submit",
            ],
        )?;
        Ok(match key {
            "declare" => {
                let m = inner::<shapes::Declare, _>(v, "declare turn")?.declare;
                // §3.2: the host repairs such a declare; a scenario cannot use one.
                m.check_shape()
                    .map_err(|e| D::Error::custom(format!("declare turn: {e}")))?;
                Turn::Declare(m)
            }
            "deliver" => {
                let s: shapes::Deliver = inner(v, "deliver turn")?;
                Turn::Deliver {
                    id: s.deliver,
                    payload: s.payload,
                }
            }
            "undeclared" => {
                let s: shapes::Undecl = inner(v, "undeclared turn")?;
                Turn::Undeclared {
                    act: s.undeclared,
                    payload: s.payload,
                }
            }
            "tool" => {
                let s: shapes::Tool = inner(v, "tool turn")?;
                Turn::Tool {
                    name: s.tool,
                    args: s.args,
                    fails: s.fails,
                }
            }
            "clarify" => Turn::Clarify(inner::<shapes::Clarify, _>(v, "clarify turn")?.clarify),
            "submit" => {
                let s: shapes::Submit = inner(v, "submit turn")?;
                Turn::Submit {
                    result: s.submit,
                    self_assessment: s.self_assessment,
                }
            }
            _ => Turn::Final(inner::<shapes::Final, _>(v, "final turn")?.text),
        })
    }
}

impl Serialize for Turn {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Turn::Declare(m) => shapes::Declare { declare: m.clone() }.serialize(s),
            Turn::Deliver { id, payload } => shapes::Deliver {
                deliver: id.clone(),
                payload: payload.clone(),
            }
            .serialize(s),
            Turn::Undeclared { act, payload } => shapes::Undecl {
                undeclared: act.clone(),
                payload: payload.clone(),
            }
            .serialize(s),
            Turn::Tool { name, args, fails } => shapes::Tool {
                tool: name.clone(),
                args: args.clone(),
                fails: *fails,
            }
            .serialize(s),
            Turn::Clarify(q) => shapes::Clarify { clarify: q.clone() }.serialize(s),
            Turn::Final(t) => shapes::Final { text: t.clone() }.serialize(s),
            Turn::Submit {
                result,
                self_assessment,
            } => shapes::Submit {
                submit: result.clone(),
                self_assessment: self_assessment.clone(),
            }
            .serialize(s),
        }
    }
}

/// The person's decisions, applied in order, each when a card it can answer is open.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Approve(String),
    Deny(String),
    Edit { id: String, payload: Value },
    Answer(String),
    Resume,
    Cancel,
}

impl<'de> Deserialize<'de> for Decision {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (key, v) = tagged(
            d,
            "decision",
            &["approve", "deny", "edit", "answer", "resume", "cancel"],
        )?;
        Ok(match key {
            "approve" => Decision::Approve(inner::<shapes::Approve, _>(v, "approve")?.approve),
            "deny" => Decision::Deny(inner::<shapes::Deny, _>(v, "deny")?.deny),
            "edit" => {
                let e: shapes::Edit = inner(v, "edit")?;
                Decision::Edit {
                    id: e.edit,
                    payload: e.payload,
                }
            }
            "answer" => Decision::Answer(inner::<shapes::Answer, _>(v, "answer")?.answer),
            "resume" => {
                if !inner::<shapes::Resume, _>(v, "resume")?.resume {
                    return Err(D::Error::custom("`resume` must be true"));
                }
                Decision::Resume
            }
            _ => {
                if !inner::<shapes::Cancel, _>(v, "cancel")?.cancel {
                    return Err(D::Error::custom("`cancel` must be true"));
                }
                Decision::Cancel
            }
        })
    }
}

impl Serialize for Decision {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Decision::Approve(id) => shapes::Approve {
                approve: id.clone(),
            }
            .serialize(s),
            Decision::Deny(id) => shapes::Deny { deny: id.clone() }.serialize(s),
            Decision::Edit { id, payload } => shapes::Edit {
                edit: id.clone(),
                payload: payload.clone(),
            }
            .serialize(s),
            Decision::Answer(a) => shapes::Answer { answer: a.clone() }.serialize(s),
            Decision::Resume => shapes::Resume { resume: true }.serialize(s),
            Decision::Cancel => shapes::Cancel { cancel: true }.serialize(s),
        }
    }
}

/// The journal events a crash can follow (scenarios.md, `faults`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CrashEvent {
    ManifestDeclared,
    AttemptStarted,
    LedgerIntent,
    ProviderEffect,
    Evidence,
    ApprovalRequested,
    ApprovalGranted,
    ApprovalDenied,
    Terminal,
}

impl CrashEvent {
    pub const ALL: [CrashEvent; 9] = [
        CrashEvent::ManifestDeclared,
        CrashEvent::AttemptStarted,
        CrashEvent::LedgerIntent,
        CrashEvent::ProviderEffect,
        CrashEvent::Evidence,
        CrashEvent::ApprovalRequested,
        CrashEvent::ApprovalGranted,
        CrashEvent::ApprovalDenied,
        CrashEvent::Terminal,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            CrashEvent::ManifestDeclared => "manifest_declared",
            CrashEvent::AttemptStarted => "attempt_started",
            CrashEvent::LedgerIntent => "ledger_intent",
            CrashEvent::ProviderEffect => "provider_effect",
            CrashEvent::Evidence => "evidence",
            CrashEvent::ApprovalRequested => "approval_requested",
            CrashEvent::ApprovalGranted => "approval_granted",
            CrashEvent::ApprovalDenied => "approval_denied",
            CrashEvent::Terminal => "terminal",
        }
    }
    /// Events that belong to one delivery (the others belong to the run).
    pub fn per_delivery(self) -> bool {
        !matches!(self, CrashEvent::ManifestDeclared | CrashEvent::Terminal)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Kill the host right after the `nth` (1-based) durable `event` (of `delivery`, if given).
    CrashAfter {
        event: CrashEvent,
        delivery: Option<String>,
        nth: u32,
    },
    /// Alter the stored payload of `delivery` after it was approved.
    TamperPayload(String),
}

impl<'de> Deserialize<'de> for Fault {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let (key, v) = tagged(d, "fault", &["crash_after", "tamper_payload"])?;
        Ok(match key {
            "crash_after" => {
                let c: shapes::Crash = inner(v, "crash_after")?;
                if c.nth == 0 {
                    return Err(D::Error::custom("`nth` counts from 1"));
                }
                Fault::CrashAfter {
                    event: c.crash_after,
                    delivery: c.delivery,
                    nth: c.nth,
                }
            }
            _ => Fault::TamperPayload(
                inner::<shapes::Tamper, _>(v, "tamper_payload")?.tamper_payload,
            ),
        })
    }
}

impl Serialize for Fault {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Fault::CrashAfter {
                event,
                delivery,
                nth,
            } => shapes::Crash {
                crash_after: *event,
                delivery: delivery.clone(),
                nth: *nth,
            }
            .serialize(s),
            Fault::TamperPayload(id) => shapes::Tamper {
                tamper_payload: id.clone(),
            }
            .serialize(s),
        }
    }
}

/// Present-but-null stays distinguishable from absent (`outcome: null` while suspended).
pub(crate) fn some<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    d: D,
) -> Result<Option<T>, D::Error> {
    T::deserialize(d).map(Some)
}

/// One delivery in `expect`: any subset of the report's delivery fields.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExpectDelivery {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub posture: Option<Posture>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<DeliveryStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub executions: Option<u32>,
}

/// `expect`: any subset of the output fields. Never read by the oracle.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expect {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub state: Option<ReportState>,
    #[serde(
        default,
        deserialize_with = "some",
        skip_serializing_if = "Option::is_none"
    )]
    pub outcome: Option<Option<Outcome>>,
    #[serde(
        default,
        deserialize_with = "some",
        skip_serializing_if = "Option::is_none"
    )]
    pub ended_by: Option<Option<EndedBy>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deliveries: Option<IndexMap<String, ExpectDelivery>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs_you: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub significance: Option<Significance>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attention: Option<Route>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub notifications: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gaps: Option<Vec<Gap>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_executions: Option<IndexMap<String, u32>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub claims: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<ExpectTask>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judge: Option<ExpectTask>,
    /// A task run's receipt line for its `result` item (issue 22 #7).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handoff: Option<Handoff>,
}

/// What a task run's receipt says became of its `result` item (contract §13.4.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Handoff {
    Accepted,
    Missing,
    Refused,
    Cancelled,
}

impl Expect {
    /// The expectation as a JSON object holding only the fields it names.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// Turns one script may hold at most (a run plays 400 turns by default; a script far longer
/// is a mistake, not a plan).
pub const SCRIPT_TURNS_MAX: usize = 10_000;

/// A script of model turns as `vouch run --script` and `POST /api/runs` take it: a JSON array
/// of turns, or an object with `script` holding one. Answers the array, each turn checked
/// against the script format; the error names the first turn at fault (without the source,
/// which the caller names).
pub fn script_turns(v: Value) -> Result<Value, String> {
    let turns = match v {
        Value::Array(_) => v,
        Value::Object(mut o) if o.contains_key("script") => o.remove("script").unwrap_or_default(),
        _ => return Err("expected a JSON array of turns or an object with `script`".into()),
    };
    let Some(items) = turns.as_array() else {
        return Err("`script` must be an array of turns".into());
    };
    if items.len() > SCRIPT_TURNS_MAX {
        return Err(format!(
            "{} turns, more than the limit of {SCRIPT_TURNS_MAX}",
            items.len()
        ));
    }
    for (i, t) in items.iter().enumerate() {
        if let Err(e) = serde_json::from_value::<Turn>(t.clone()) {
            return Err(format!(
                "turn {i} is not a valid turn ({e}); see the script format in docs/scripts.md"
            ));
        }
    }
    Ok(turns)
}

#[cfg(test)]
mod script_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_script_is_an_array_or_an_object_with_script_and_its_first_bad_turn_is_named() {
        let turns = json!([{"final": "done"}]);
        assert_eq!(script_turns(turns.clone()), Ok(turns.clone()));
        assert_eq!(
            script_turns(json!({"script": [{"final": "done"}]})),
            Ok(turns)
        );
        let e = script_turns(json!([{"final": "ok"}, {"fly": 1}])).unwrap_err();
        assert!(e.starts_with("turn 1 is not a valid turn"), "{e}");
        assert!(script_turns(json!("x"))
            .unwrap_err()
            .contains("array of turns"));
        assert!(script_turns(json!({"script": 3}))
            .unwrap_err()
            .contains("must be an array"));
        let long = Value::Array(vec![json!({"final": ""}); SCRIPT_TURNS_MAX + 1]);
        assert!(script_turns(long).unwrap_err().contains("limit"));
    }
}
