//! The API's JSON shapes. They are the HTTP contract (and the OpenAPI document's schemas),
//! built from the runtime's types; the store's internal fields (owner, lease, spec) stay out.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;
use vouch_runtime::approvals::OpenCard;
use vouch_runtime::doctor::DoctorReport;
use vouch_runtime::inbox::{Inbox, Todo};
use vouch_runtime::runs::RunDetail;
use vouch_store::{Card, CatchUp, JournalEntry, Overlap, RunRecord, Schedule};

/// The snake_case word a vocabulary value serializes to (`succeeded`, `interactive`, …).
pub fn word<T: Serialize>(v: T) -> String {
    match serde_json::to_value(v) {
        Ok(Value::String(s)) => s,
        Ok(other) => other.to_string(),
        Err(_) => String::new(),
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Run {
    pub id: String,
    /// interactive, scheduled, event, task.
    pub trigger: String,
    pub title: String,
    pub chain_root: String,
    /// The run this one continues (§9.2).
    pub parent: Option<String>,
    /// created, declaring, running, suspended, ended.
    pub state: String,
    /// Set once ended: succeeded, partial, failed, withdrawn, missed.
    pub outcome: Option<String>,
    pub ended_by: Option<String>,
    pub created_ms: i64,
    pub ended_ms: Option<i64>,
}

impl From<&RunRecord> for Run {
    fn from(r: &RunRecord) -> Self {
        Run {
            id: r.id.clone(),
            trigger: word(r.trigger),
            title: r.title.clone(),
            chain_root: r.chain_root.clone(),
            parent: r.parent.clone(),
            state: word(r.state),
            outcome: r.outcome.map(word),
            ended_by: r.ended_by.map(word),
            created_ms: r.created_ms,
            ended_ms: r.ended_ms,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunPage {
    pub runs: Vec<Run>,
    /// Pass as `offset` for the next page; absent on the last page.
    pub next_offset: Option<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DeliveryRow {
    pub id: String,
    pub verb: String,
    /// The kind and the address, e.g. `folder Notes/today.md`.
    pub destination: String,
    pub posture: Option<String>,
    /// The status the journal's evidence gives (§6.1), never the model's words.
    pub status: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunDetailBody {
    pub run: Run,
    pub deliveries: Vec<DeliveryRow>,
    pub turns: usize,
    pub events: usize,
}

impl From<&RunDetail> for RunDetailBody {
    fn from(d: &RunDetail) -> Self {
        RunDetailBody {
            run: (&d.run).into(),
            deliveries: d
                .deliveries
                .iter()
                .map(|x| DeliveryRow {
                    id: x.id.clone(),
                    verb: word(x.verb),
                    destination: x.destination.to_string(),
                    posture: x.posture.map(word),
                    status: word(x.status),
                })
                .collect(),
            turns: d.turns,
            events: d.events,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Event {
    pub run_id: String,
    /// 1-based, gap-free per run; the SSE event id.
    pub seq: i64,
    pub kind: String,
    pub delivery: Option<String>,
    #[schema(value_type = Object)]
    pub body: Value,
    pub at_ms: i64,
    pub prev_hash: String,
    pub hash: String,
}

impl From<&JournalEntry> for Event {
    fn from(e: &JournalEntry) -> Self {
        Event {
            run_id: e.run_id.clone(),
            seq: e.seq,
            kind: e.kind.as_str().to_string(),
            delivery: e.delivery.clone(),
            body: e.body.clone(),
            at_ms: e.at_ms,
            prev_hash: e.prev_hash.clone(),
            hash: e.hash.clone(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ReceiptBody {
    pub run: String,
    pub state: String,
    pub outcome: Option<String>,
    /// The receipt's text (§10); null while the run has not ended.
    pub receipt: Option<String>,
}

/// The host's public key (`GET /api/host-key`, §16.2): what `vouch verify --host-key` pins.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct HostKeyBody {
    /// `host`.
    pub name: String,
    /// `ed25519:` + 64 lowercase hex digits, as `vouch identity host` prints it.
    pub public_key: String,
}

/// A receipt signed by the host (`GET /api/runs/{id}/receipt?signed=true`, §16.1): the file
/// `vouch verify` checks. Documents `vouch_identity::receipt::sign`'s object.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct SignedReceiptBody {
    /// `vouch-signed-receipt/1`.
    pub format: String,
    pub run: String,
    pub outcome: Option<String>,
    pub ended_by: Option<String>,
    /// Per delivery: `id`, `status`, `evidence` and `evidence_event` (the seq of its evidence).
    #[schema(value_type = Vec<Object>)]
    pub deliveries: Vec<serde_json::Value>,
    /// The terminal event: `seq` and `hash`.
    #[schema(value_type = Object)]
    pub journal_head: serde_json::Value,
    /// The receipt text's SHA-256, hex; null when the run has no receipt text.
    pub receipt_sha256: Option<String>,
    /// `ed25519:` and the host's public key, hex.
    pub host_key: String,
    /// Ed25519 over the canonical JSON of every other field, hex.
    pub signature: String,
}

/// The receipt route's answer: the receipt, or with `signed=true` the signed receipt.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ReceiptAnswer {
    Receipt(ReceiptBody),
    Signed(SignedReceiptBody),
}

/// An open card: an approval (`delivery` set) or the run's one question (`delivery` null).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct CardBody {
    pub run: String,
    pub delivery: Option<String>,
    /// Approve exactly this hash (§7); empty for a question.
    pub payload_hash: String,
    pub summary: String,
    /// Why the person is asked (§7), e.g. "sending e-mail cannot be undone (rule R9)".
    pub reason: String,
    /// The exact payload an approval executes.
    #[schema(value_type = Option<Object>)]
    pub payload: Option<Value>,
    pub created_ms: i64,
}

impl From<&OpenCard> for CardBody {
    fn from(c: &OpenCard) -> Self {
        CardBody {
            run: c.run.clone(),
            delivery: c.delivery.clone(),
            payload_hash: c.payload_hash.clone(),
            summary: c.summary.clone(),
            reason: c.reason.clone(),
            payload: c.payload.clone(),
            created_ms: c.created_ms,
        }
    }
}

impl From<&Card> for CardBody {
    fn from(c: &Card) -> Self {
        CardBody {
            run: c.run_id.clone(),
            delivery: c.delivery.clone(),
            payload_hash: c.payload_hash.clone(),
            summary: c.summary.clone(),
            reason: c.reason.clone(),
            payload: None,
            created_ms: c.created_ms,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ApproveBody {
    /// The payload hash shown on the card: approval binds to exactly that payload.
    pub hash: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EditBody {
    /// The replacement payload; a new card with a new hash replaces the old one.
    #[schema(value_type = Object)]
    pub payload: Value,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AnswerBody {
    pub text: String,
}

/// Where a run stands after a decision: ended (with its receipt) or waiting again.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunResult {
    pub run: String,
    pub state: String,
    pub outcome: Option<String>,
    pub ended_by: Option<String>,
    /// Why the run waits, when it does.
    pub waiting_reason: Option<String>,
    pub receipt: Option<String>,
    pub open_cards: Vec<CardBody>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct EditResult {
    pub run: String,
    pub delivery: String,
    /// Approve the new payload with this hash.
    pub payload_hash: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct InboxRun {
    pub run: Run,
    /// resumed_as, needs_you, interrupted, see_what_failed, receipt.
    pub todo: String,
    /// The continuation run (resumed_as) or the items that need you (needs_you).
    pub refs: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct InboxBody {
    /// The badge: things waiting for you now, computed, never stored (§11.4).
    pub waiting: usize,
    pub cards: Vec<CardBody>,
    /// Ended runs, newest first, each with what is left to do.
    pub ended: Vec<InboxRun>,
}

impl From<&Inbox> for InboxBody {
    fn from(i: &Inbox) -> Self {
        InboxBody {
            waiting: i.waiting,
            cards: i.cards.iter().map(CardBody::from).collect(),
            ended: i
                .ended
                .iter()
                .map(|e| {
                    let (todo, refs) = match &e.todo {
                        Todo::ResumedAs { run } => ("resumed_as", vec![run.clone()]),
                        Todo::NeedsYou { items } => ("needs_you", items.clone()),
                        Todo::Interrupted => ("interrupted", vec![]),
                        Todo::SeeWhatFailed => ("see_what_failed", vec![]),
                        Todo::Receipt => ("receipt", vec![]),
                    };
                    InboxRun {
                        run: (&e.run).into(),
                        todo: todo.into(),
                        refs,
                    }
                })
                .collect(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ScheduleBody {
    pub name: String,
    pub cron: String,
    pub tz: String,
    #[schema(value_type = Object)]
    pub routine: Value,
    #[schema(schema_with = catch_up_schema)]
    pub catch_up: CatchUp,
    #[schema(schema_with = overlap_schema)]
    pub overlap: Overlap,
    pub grace_ms: i64,
    pub created_ms: i64,
}

/// A policy's schema: its words, from the one list the store and the scheduler use.
fn policy_schema(
    words: &[&'static str],
    optional: bool,
    description: String,
) -> utoipa::openapi::Object {
    use utoipa::openapi::schema::{ObjectBuilder, SchemaType, Type};
    let (ty, mut values): (SchemaType, Vec<Value>) = if optional {
        (
            SchemaType::from_iter([Type::String, Type::Null]),
            vec![Value::Null],
        )
    } else {
        (Type::String.into(), vec![])
    };
    values.splice(0..0, words.iter().map(|w| Value::from(*w)));
    ObjectBuilder::new()
        .schema_type(ty)
        .enum_values(Some(values))
        .description(Some(description))
        .build()
}

fn catch_up_schema() -> utoipa::openapi::Object {
    policy_schema(
        &CatchUp::ALL.map(CatchUp::as_str),
        false,
        "Slots missed while no scheduler ran: `skip` (each reported as missed) or `latest` (the newest also runs late).".into(),
    )
}

fn overlap_schema() -> utoipa::openapi::Object {
    policy_schema(
        &Overlap::ALL.map(Overlap::as_str),
        false,
        "A slot due while the previous run is still going: `skip` it or `allow` both.".into(),
    )
}

fn new_catch_up_schema() -> utoipa::openapi::Object {
    policy_schema(
        &CatchUp::ALL.map(CatchUp::as_str),
        true,
        "skip (default) or latest.".into(),
    )
}

fn new_overlap_schema() -> utoipa::openapi::Object {
    policy_schema(
        &Overlap::ALL.map(Overlap::as_str),
        true,
        "skip (default) or allow.".into(),
    )
}

impl From<&Schedule> for ScheduleBody {
    fn from(s: &Schedule) -> Self {
        ScheduleBody {
            name: s.name.clone(),
            cron: s.cron.clone(),
            tz: s.tz.clone(),
            routine: s.routine.clone(),
            catch_up: s.catch_up,
            overlap: s.overlap,
            grace_ms: s.grace_ms,
            created_ms: s.created_ms,
        }
    }
}

/// A run to start now, as the person's own (`interactive`) run: a title and a script of model
/// turns (as `vouch run TITLE --script FILE` takes it), or a routine (as a schedule takes it).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewRun {
    /// What the person asks for, in words: the run's title. Required with `script`; with
    /// `routine` the routine's `prompt` when absent.
    #[serde(default)]
    pub title: Option<String>,
    /// The script's model turns, a JSON array of at least one turn (docs/scripts.md).
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>, min_items = 1)]
    pub script: Option<Value>,
    /// `{"prompt": …, "script": [...]}` or `{"prompt": …, "model": {"kind": "openai"}}`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub routine: Option<Value>,
}

/// A run that started: its id and where to watch it.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct RunStarted {
    pub run: String,
    /// False when the `Idempotency-Key` started this run before (the answer is 200, and the
    /// run is the one that request started, not a second).
    pub created: bool,
    /// The run's events as they become durable (SSE), until it ends.
    pub events: String,
    /// The run as JSON (state, outcome, deliveries).
    pub detail: String,
    /// The run's page in the web console.
    pub page: String,
}

/// A new schedule (§12.1).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewSchedule {
    pub name: String,
    /// Five-field cron, e.g. `0 7 * * *`.
    pub cron: String,
    /// IANA time zone (default UTC).
    #[serde(default)]
    pub tz: Option<String>,
    /// `{"prompt": …, "script": [...]}` or `{"prompt": …, "model": {"kind": "openai"}}`.
    #[schema(value_type = Object)]
    pub routine: Value,
    // A word not in the list is refused before the handler runs: 422 naming the field.
    #[serde(default)]
    #[schema(schema_with = new_catch_up_schema)]
    pub catch_up: Option<CatchUp>,
    #[serde(default)]
    #[schema(schema_with = new_overlap_schema)]
    pub overlap: Option<Overlap>,
    /// How late a slot may still start (default 15 minutes).
    #[serde(default)]
    pub grace_ms: Option<i64>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DestinationBody {
    pub kind: String,
    pub level: String,
    pub connect_step: Option<String>,
    /// The vouch.toml section that connects this kind (shown while it needs setting up).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub example: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct DoctorBody {
    /// The path of the home's vouch.toml, where destinations are connected.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config_path: Option<String>,
    pub destinations: Vec<DestinationBody>,
    /// Per-destination overrides from vouch.toml: pattern → level.
    pub overrides: std::collections::BTreeMap<String, String>,
    pub automation: Vec<String>,
    /// Notification routes whose deliveries keep failing (§11.4), each with what to do next.
    #[serde(default)]
    pub stuck_routes: Vec<StuckRouteBody>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct StuckRouteBody {
    pub route: String,
    /// Notifications on this route not delivered yet.
    pub waiting: usize,
    /// Failed tries of the notification that has failed most.
    pub failures: u32,
    /// The route's own words for its latest failure.
    pub last_error: String,
    pub last_error_ms: i64,
    /// The route is set up wrong (it needs a fix), not down for now.
    pub misconfigured: bool,
    pub next_step: String,
}

impl From<&DoctorReport> for DoctorBody {
    fn from(d: &DoctorReport) -> Self {
        DoctorBody {
            config_path: d.config_path.clone(),
            destinations: d
                .destinations
                .iter()
                .map(|r| DestinationBody {
                    kind: word(r.kind),
                    level: word(r.level),
                    connect_step: r.connect_step.clone(),
                    example: r.example.map(str::to_string),
                })
                .collect(),
            overrides: d
                .overrides
                .iter()
                .map(|(k, v)| (k.clone(), word(v)))
                .collect(),
            automation: d.automation.clone(),
            stuck_routes: d
                .stuck_routes
                .iter()
                .map(|r| StuckRouteBody {
                    route: r.route.clone(),
                    waiting: r.waiting,
                    failures: r.failures,
                    last_error: r.last_error.clone(),
                    last_error_ms: r.last_error_ms,
                    misconfigured: r.misconfigured,
                    next_step: r.next_step.clone(),
                })
                .collect(),
        }
    }
}
