#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What a model is told, read from the wire (issue 22): the host drives real OpenAI-compatible
//! HTTP against a recording loopback server (`common::recording`), and each test reads the
//! requests it recorded — the tools and their payload schemas, the task brief, the judge's
//! view, the pauses of an outage.

use serde_json::{json, Value};
use std::sync::Arc;
use vouch_adapters::folder::FolderProvider;
use vouch_adapters::notify::Quiet;
use vouch_adapters::openai::{OpenAiConfig, OpenAiModel};
use vouch_adapters::tools::StandardTools;
use vouch_core::{Presence, TriggerKind};
use vouch_runtime::capability::PatternCapabilities;
use vouch_runtime::clock::ManualClock;
use vouch_runtime::host::{
    AttemptJob, HostParts, ModelFactory, RunEnd, RunSpec, TaskTypes, TaskWork,
};
use vouch_runtime::model::{Model, ModelError};
use vouch_runtime::{schemas, Host};
use vouch_store::board::{
    AttemptRef, BoardStore, ClaimRequest, NewTask, Report, ReportKind, TaskSpec,
};
use vouch_store::Store;
use vouch_store_sqlite::SqliteStore;

#[allow(dead_code)] // each test file uses part of the fake world
mod common;
use common::recording::{Recording, Reply};

/// The recording server as every run's model, no waiting between retries.
struct Wire(String);
impl ModelFactory for Wire {
    fn model(&self, _spec: &Value, _start: usize) -> Result<Box<dyn Model>, ModelError> {
        let mut c = OpenAiConfig::new(&self.0, "wire-model");
        c.max_retries = 0;
        Ok(Box::new(OpenAiModel::with_sleeper(c, Box::new(|_| {}))))
    }
}

fn host(dir: &std::path::Path, base_url: &str) -> Host {
    let parts = HostParts {
        caps: Arc::new(PatternCapabilities::default()),
        providers: common::FakeWorld::accepting().providers(),
        notifier: Arc::new(Quiet),
        models: Arc::new(Wire(base_url.to_string())),
        work: Arc::new(StandardTools {
            folder: FolderProvider::new(dir.join("files")),
            artifacts_dir: dir.join("a"),
        }),
    };
    Host::new(
        Arc::new(SqliteStore::open(&dir.join("vouch.db")).unwrap()),
        Arc::new(ManualClock::new(1_796_083_200_000, 1)),
        "test",
        dir.join("drafts"),
        parts,
    )
}

fn start(h: &Host, title: &str) -> (String, RunEnd) {
    h.start(&RunSpec {
        trigger: TriggerKind::Interactive,
        title: title.into(),
        presence: Some(Presence::Away),
        quiet: true,
        model: json!({"kind": "openai"}).into(),
        scope: None,
    })
    .unwrap()
}

fn tool<'a>(request: &'a Value, name: &str) -> &'a Value {
    request["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == name)
        .unwrap_or_else(|| panic!("no `{name}` tool on the wire"))
}

/// The tool messages of a request, in order.
fn tool_results(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap_or("").to_string())
        .collect()
}

fn declare_email() -> Value {
    json!({"deliveries": [{"id": "d1", "verb": "send",
        "destination": {"kind": "email", "address": "dana@example.com"},
        "confidence": null, "required": null, "attendees": null}],
        "forbid": null, "order": null})
}

#[test]
fn every_verb_tool_on_the_wire_declares_each_kinds_payload_in_strict_mode() {
    let dir = tempfile::tempdir().unwrap();
    let wire = Recording::start(vec![Reply::text("Nothing to do.")]);
    let h = host(dir.path(), &wire.base_url);
    start(&h, "Say hello");
    let first = &wire.requests()[0].body;
    for t in first["tools"].as_array().unwrap() {
        let name = t["function"]["name"].as_str().unwrap();
        assert_eq!(
            schemas::strict_violations(&t["function"]["parameters"]),
            Vec::<String>::new(),
            "{name}"
        );
        assert_eq!(t["function"]["strict"], true, "{name}");
    }
    // The e-mail payload has a subject now (the draft once went out as "Draft: d1").
    let send = tool(first, "send");
    let branches = send["function"]["parameters"]["properties"]["payload"]["anyOf"]
        .as_array()
        .unwrap();
    assert_eq!(branches.len(), vouch_core::DestinationKind::ALL.len());
    let email = branches
        .iter()
        .find(|b| b["description"].as_str().unwrap().contains("`email`"))
        .unwrap();
    for field in ["to", "cc", "subject", "body"] {
        assert!(email["properties"][field].is_object(), "{email}");
    }
    assert_eq!(email["properties"]["cc"]["type"], json!(["array", "null"]));
    let calendar = branches
        .iter()
        .find(|b| b["description"].as_str().unwrap().contains("`calendar`"))
        .unwrap();
    for field in ["title", "start", "end", "tz", "attendees"] {
        assert!(calendar["properties"][field].is_object(), "{calendar}");
    }
    assert!(
        first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["function"]["name"] != "deliver"),
        "one vocabulary: verbs, not `deliver`"
    );
}

#[test]
fn a_payload_that_breaks_its_schema_is_a_repairable_tool_error_never_stored() {
    let dir = tempfile::tempdir().unwrap();
    let good = json!({"to": "dana@example.com", "cc": null, "subject": "Q4 notes",
        "body": "Hello Dana", "in_reply_to": null});
    let wire = Recording::start(vec![
        Reply::call("declare", declare_email()),
        Reply::call(
            "send",
            json!({"delivery": "d1", "payload": {"text": "Hello Dana"}}),
        ),
        Reply::call(
            "send",
            json!({"delivery": "d1", "payload": {"to": "eve@example.com",
            "cc": null, "subject": "Q4", "body": "x", "in_reply_to": null}}),
        ),
        Reply::call("send", json!({"delivery": "d1", "payload": good})),
    ]);
    let h = host(dir.path(), &wire.base_url);
    let (id, end) = start(&h, "Send Dana the Q4 notes");
    assert!(matches!(end, RunEnd::Suspended { .. }), "{end:?}");
    let seen = wire.requests();
    let results = tool_results(&seen[2].body);
    let broken = results.last().unwrap();
    assert!(
        broken.contains("invalid payload") && broken.contains("subject"),
        "the model is told what to repair: {broken}"
    );
    let redirected = tool_results(&seen[3].body).last().unwrap().clone();
    assert!(
        redirected.contains("eve@example.com") && redirected.contains("declared"),
        "{redirected}"
    );
    // Only the payload that fits is stored, and it is what the card asks about.
    let store = SqliteStore::open(&dir.path().join("vouch.db")).unwrap();
    let cards = h.run_cards(&id).unwrap();
    assert_eq!(cards.len(), 1, "{cards:?}");
    let stored: Value =
        serde_json::from_str(&store.payload(&cards[0].payload_hash).unwrap().unwrap()).unwrap();
    assert_eq!(stored["subject"], "Q4 notes");
    assert!(
        stored.get("cc").is_none(),
        "nulls are stored as absent: {stored}"
    );
    for broken in [
        json!({"text": "Hello Dana"}),
        json!({"to": "eve@example.com", "subject": "Q4", "body": "x"}),
    ] {
        let hash = vouch_core::payload_hash(&broken).unwrap();
        assert_eq!(
            store.payload(&hash).unwrap(),
            None,
            "never stored: {broken}"
        );
    }
}

fn task_job(
    task_id: &str,
    kind: &str,
    brief: &str,
    input: Value,
    criteria: Option<Value>,
) -> AttemptJob {
    AttemptJob {
        task_id: task_id.into(),
        attempt: 1,
        kind: kind.into(),
        brief: brief.into(),
        input,
        criteria,
        model: json!({"kind": "openai"}),
        repairs_max: 3,
        profile: None,
        lease: None,
    }
}

/// The first user message of a request.
fn first_user(request: &Value) -> String {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .and_then(|m| m["content"].as_str())
        .unwrap()
        .to_string()
}

#[test]
fn a_task_attempts_model_is_told_its_brief_output_schema_criteria_and_pinned_context() {
    let dir = tempfile::tempdir().unwrap();
    let wire = Recording::start(vec![
        Reply::call(
            "declare",
            json!({"deliveries": [], "forbid": null, "order": null}),
        ),
        Reply::call(
            "submit",
            json!({"result": {"summary": "Revenue up 12%."},
            "self_assessment": {"names the revenue figure": {"met": true, "note": "12%"},
                "under 100 words": {"met": true, "note": "3 words"}}}),
        ),
    ]);
    let h = host(dir.path(), &wire.base_url);
    let work = Arc::new(TaskWork::new(h.work().clone()));
    let h = h.with_work(work.clone());
    let types = TaskTypes::builtin();
    let job = task_job(
        "t1",
        "freeform",
        "Summarise the Q4 notes",
        json!({"brief": "Summarise the Q4 notes", "notes": "sha256:4f2a"}),
        Some(json!(["names the revenue figure", "under 100 words"])),
    );
    let out = h.run_task_attempt(&work, &types, &job).unwrap();
    assert!(
        matches!(out.report, Some(ReportKind::Accepted { .. })),
        "{:?}",
        out.report
    );
    let first = &wire.requests()[0].body;
    let told = first_user(first);
    for must in [
        "Summarise the Q4 notes",
        "Pinned context",
        "sha256:4f2a",
        "1. names the revenue figure",
        "2. under 100 words",
        "self_assessment",
        "\"summary\"",
        "ends only by `submit`",
    ] {
        assert!(
            told.contains(must),
            "`{must}` missing from the brief:\n{told}"
        );
    }
    // The `result` parameter IS the type's output schema, not `{"type":"object"}`.
    let submit = tool(first, "submit");
    assert_eq!(
        submit["function"]["parameters"]["properties"]["result"],
        types.get("freeform").unwrap().output_schema
    );
    assert!(
        first["tools"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["function"]["name"] != "read_target"),
        "only a judge reads a target"
    );
}

#[test]
fn a_judge_is_told_the_criteria_and_reads_the_targets_accepted_output_through_a_tool() {
    let dir = tempfile::tempdir().unwrap();
    use vouch_artifacts::ArtifactStore as _;
    let store = Arc::new(vouch_artifacts::LocalStore::in_home(dir.path()));
    let notes = store.put(b"Q4 notes: revenue up 12%.").unwrap();
    let board = Arc::new(SqliteStore::open(&dir.path().join("board.db")).unwrap());
    let mut target = new_task("t0");
    target.spec.input_artifacts = vec![notes.clone()];
    board.offer(&target).unwrap();
    let c = board.claim(&claim_req("alice", "t0")).unwrap().unwrap();
    board
        .report(&Report {
            attempt: AttemptRef {
                task_id: "t0".into(),
                n: c.attempt.n,
                claimant: "alice".into(),
                epoch: c.attempt.epoch,
            },
            kind: ReportKind::Accepted {
                result: json!({"summary": "Revenue up 12%.", "artifacts": ["sha256:aa11"]}),
                self_assessment: None,
                verdict: None,
            },
            run_id: None,
            receipt: None,
            usage: Default::default(),
            signature: None,
            stamp: None,
            now_ms: 2,
        })
        .unwrap();
    let wire = Recording::start(vec![
        Reply::call(
            "declare",
            json!({"deliveries": [], "forbid": null, "order": null}),
        ),
        Reply::call("read_target", json!({})),
        Reply::call(
            "read_input",
            json!({"cid": notes, "offset": null, "length": null}),
        ),
        Reply::call(
            "submit",
            json!({"result": {"passed": true, "scores": {"names the revenue figure": 1}},
                "self_assessment": null}),
        ),
    ]);
    let h = host(dir.path(), &wire.base_url);
    let work = Arc::new(
        TaskWork::new(h.work().clone())
            .with_board(board.clone())
            .with_artifacts(store.clone()),
    );
    let h = h.with_work(work.clone());
    let job = task_job(
        "j1",
        "judge",
        "Judge t0",
        json!({"target": "t0", "criteria": ["names the revenue figure"]}),
        None,
    );
    let out = h
        .run_task_attempt(&work, &TaskTypes::builtin(), &job)
        .unwrap();
    assert!(
        matches!(out.report, Some(ReportKind::Accepted { .. })),
        "{:?}",
        out.report
    );
    let seen = wire.requests();
    let told = first_user(&seen[0].body);
    assert!(told.contains("1. names the revenue figure"), "{told}");
    assert!(
        told.contains("read_target") && told.contains("every criterion"),
        "{told}"
    );
    assert!(
        !told.contains("Revenue up 12%"),
        "the host never pastes the target's output into the brief: {told}"
    );
    tool(&seen[0].body, "read_target");
    let read = tool_results(&seen[2].body).last().unwrap().clone();
    assert!(
        read.contains("Revenue up 12%.") && read.contains("sha256:aa11"),
        "the judge reads the accepted output and its artifacts: {read}"
    );
    // It sees what the target was given (§13.1.3): named by `read_target`, read by `read_input`.
    assert!(read.contains(&notes), "{read}");
    assert!(told.contains(&notes), "{told}");
    let input = tool_results(&seen[3].body).last().unwrap().clone();
    assert!(input.contains("Q4 notes: revenue up 12%."), "{input}");
}

/// The system message of a request.
fn system(request: &Value) -> String {
    request["messages"][0]["content"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// What an attempt is given, from the wire (§13.1.2, §13.1.3): the task's pinned context and
/// its profile's default context where the profile places them (`system`: the exact texts in
/// the system message; `file`: only listed, with `read_context`), the input artifacts listed
/// with the `read_input` tool and its schema, the brief and criteria; a read returns the bytes.
#[test]
fn an_attempts_model_is_told_its_context_where_the_profile_places_it_and_reads_its_inputs() {
    use vouch_artifacts::ArtifactStore as _;
    let dir = tempfile::tempdir().unwrap();
    let store = Arc::new(vouch_artifacts::LocalStore::in_home(dir.path()));
    let own = store.put(b"Task context: figures in euros.").unwrap();
    let house = store.put(b"House style: name every source.").unwrap();
    let notes = store.put(b"Q4 notes: revenue up 12%.").unwrap();
    let board = Arc::new(SqliteStore::open(&dir.path().join("board.db")).unwrap());
    let mut t = new_task("t-kb");
    t.spec.context = vec![own.clone()];
    t.spec.input_artifacts = vec![notes.clone()];
    board.offer(&t).unwrap();
    let profile = |placement: &str| {
        vouch_runtime::host::RuntimeProfile::from_policy(
            json!({"name": "kb", "context": [house], "context_placement": placement}),
        )
        .unwrap()
    };
    let read = |tool: &str, cid: &str| {
        Reply::call(tool, json!({"cid": cid, "offset": null, "length": null}))
    };
    let declare = || {
        Reply::call(
            "declare",
            json!({"deliveries": [], "forbid": null, "order": null}),
        )
    };
    let submit = || {
        Reply::call(
            "submit",
            json!({"result": {"summary": "Revenue up 12%."},
                "self_assessment": {"cites the notes": {"met": true, "note": "yes"}}}),
        )
    };
    let wire = Recording::start(vec![
        declare(),
        read("read_input", &notes),
        submit(),
        Reply::text("submitted"),
        declare(),
        read("read_context", &house),
        submit(),
        Reply::text("submitted"),
    ]);
    let h = host(dir.path(), &wire.base_url);
    let work = Arc::new(
        TaskWork::new(h.work().clone())
            .with_artifacts(store.clone())
            .with_board(board.clone()),
    );
    let h = h.with_work(work.clone());
    let types = TaskTypes::builtin();
    let mut job = task_job(
        "t-kb",
        "freeform",
        "Summarise the Q4 notes",
        json!({"brief": "Summarise the Q4 notes"}),
        Some(json!(["cites the notes"])),
    );
    job.profile = Some(profile("system"));
    let out = h.run_task_attempt(&work, &types, &job).unwrap();
    assert!(
        matches!(out.report, Some(ReportKind::Accepted { .. })),
        "{:?}",
        out.report
    );
    let seen = wire.requests();
    let (sys, told) = (system(&seen[0].body), first_user(&seen[0].body));
    for must in [
        format!("Pinned context {own}:\nTask context: figures in euros."),
        format!("Pinned context {house}:\nHouse style: name every source."),
    ] {
        assert!(
            sys.contains(&must),
            "`{must}` missing from the system message:\n{sys}"
        );
        assert!(
            !told.contains(&must),
            "placed in the system message only:\n{told}"
        );
    }
    for must in [
        "Summarise the Q4 notes",
        "1. cites the notes",
        "read_input",
        notes.as_str(),
    ] {
        assert!(
            told.contains(must),
            "`{must}` missing from the brief:\n{told}"
        );
    }
    let params = &tool(&seen[0].body, "read_input")["function"]["parameters"];
    assert_eq!(
        params["required"],
        json!(["cid", "offset", "length"]),
        "{params}"
    );
    assert_eq!(params["properties"]["cid"]["type"], "string", "{params}");
    assert_eq!(
        params["properties"]["length"]["maximum"], 65_536,
        "{params}"
    );
    let names: Vec<&str> = seen[0].body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(
        !names.contains(&"read_context"),
        "nothing is placed as a file: {names:?}"
    );
    let got = tool_results(&seen[2].body).last().unwrap().clone();
    assert!(got.contains("Q4 notes: revenue up 12%."), "{got}");
    // `file`: only listed in the first message, read through `read_context`.
    let n = seen.len();
    job.profile = Some(profile("file"));
    let out = h.run_task_attempt(&work, &types, &job).unwrap();
    assert!(
        matches!(out.report, Some(ReportKind::Accepted { .. })),
        "{:?}",
        out.report
    );
    let seen = wire.requests();
    let (sys, told) = (system(&seen[n].body), first_user(&seen[n].body));
    assert!(!sys.contains("name every source") && !told.contains("name every source"));
    assert!(
        told.contains("read_context") && told.contains(house.as_str()),
        "{told}"
    );
    tool(&seen[n].body, "read_context");
    let got = tool_results(&seen[n + 2].body).last().unwrap().clone();
    assert!(got.contains("House style: name every source."), "{got}");
}

fn new_task(id: &str) -> NewTask {
    NewTask {
        id: id.into(),
        kind: "freeform".into(),
        owner: "owner".into(),
        max_attempts: 1,
        deadline_ms: None,
        profiles: vec![],
        tags: vec![],
        excluded_claimant: None,
        condition: None,
        idempotency_key: None,
        request_id: format!("sha256:{id}"),
        spec: TaskSpec {
            context: vec![],
            input_artifacts: vec![],
            brief: format!("brief of {id}"),
            input: json!({"brief": format!("brief of {id}")}),
            correlation: id.into(),
            criteria: None,
            references: vec![],
            lease_ms: 1_000,
            heartbeat_ms: 200,
            dispatch_timeout_ms: 5_000,
            running_timeout_ms: 60_000,
        },
        created_ms: 0,
    }
}

fn claim_req(claimant: &str, task_id: &str) -> ClaimRequest {
    ClaimRequest {
        claimant: claimant.into(),
        profile: "default".into(),
        model: None,
        policy_fingerprint: "sha256:policy".into(),
        types: vec![],
        tags: vec![],
        task_id: Some(task_id.into()),
        signature: None,
        nonce: None,
        policy: json!({}),
        now_ms: 1,
        run_id: None,
    }
}

#[test]
fn a_run_records_its_model_profile_so_another_process_without_model_settings_continues_it() {
    let dir = tempfile::tempdir().unwrap();
    let key = dir.path().join("model.key");
    std::fs::write(&key, "sk-wire-secret\n").unwrap();
    let good = json!({"to": "dana@example.com", "cc": null, "subject": "Q4",
        "body": "Hello", "in_reply_to": null});
    let wire = Recording::start(vec![
        Reply::call("declare", declare_email()),
        Reply::call("send", json!({"delivery": "d1", "payload": good})),
        Reply::text("Sent."),
    ]);
    // The process that starts the run has `[model]` (vouch.toml) with its key by reference.
    let a = host(dir.path(), &wire.base_url);
    let a = a.with_models(Arc::new(vouch_adapters::models::ConfiguredModels {
        profile: Some(vouch_adapters::config::ModelConfig {
            name: Some("work".into()),
            url: Some(wire.base_url.clone()),
            model: Some("wire-model".into()),
            key: Some(vouch_runtime::secret::SecretRef {
                env: None,
                file: Some(key.clone()),
            }),
            timeout_ms: Some(5_000),
            max_retries: Some(0),
            ..Default::default()
        }),
    }));
    let (id, end) = start(&a, "Send Dana the Q4 notes");
    assert!(matches!(end, RunEnd::Suspended { .. }), "{end:?}");
    let spec = a.run_record(&id).unwrap().unwrap().spec;
    assert_eq!(spec["model"]["profile"]["name"], "work", "{spec}");
    assert_eq!(spec["model"]["profile"]["url"], wire.base_url.as_str());
    assert!(
        !spec.to_string().contains("sk-wire-secret"),
        "never the key: {spec}"
    );
    drop(a);
    // Another process of the home — no `[model]`, no VOUCH_MODEL_* — approves: the run goes
    // on with the profile it recorded instead of ending "the model could not be started".
    let b = host(dir.path(), &wire.base_url)
        .with_models(Arc::new(vouch_adapters::models::DefaultModels));
    let card = b.run_cards(&id).unwrap().remove(0);
    let end = b.approve(&id, "d1", &card.payload_hash).unwrap();
    assert!(
        matches!(
            end,
            RunEnd::Ended {
                outcome: vouch_core::Outcome::Succeeded
            }
        ),
        "{end:?}"
    );
    let seen = wire.requests();
    assert_eq!(
        seen.len(),
        3,
        "the approving process asked the model once more"
    );
    assert_eq!(
        seen[2].authorization.as_deref(),
        Some("Bearer sk-wire-secret"),
        "with the key read from the reference it recorded"
    );
}

/// The recording server with one retry a turn; each wait the client chose is kept.
struct Retrying(String, Arc<std::sync::Mutex<Vec<std::time::Duration>>>);
impl ModelFactory for Retrying {
    fn model(&self, _spec: &Value, _start: usize) -> Result<Box<dyn Model>, ModelError> {
        let mut c = OpenAiConfig::new(&self.0, "wire-model");
        c.max_retries = 1;
        let waits = self.1.clone();
        Ok(Box::new(OpenAiModel::with_sleeper(
            c,
            Box::new(move |d| waits.lock().unwrap().push(d)),
        )))
    }
}

fn failed_attempt(replies: Vec<Reply>) -> (ReportKind, Vec<std::time::Duration>, usize) {
    let dir = tempfile::tempdir().unwrap();
    let wire = Recording::start(replies);
    let waits = Arc::new(std::sync::Mutex::new(vec![]));
    let retrying = Arc::new(Retrying(wire.base_url.clone(), waits.clone()));
    let h = host(dir.path(), &wire.base_url).with_models(retrying);
    let work = Arc::new(TaskWork::new(h.work().clone()));
    let h = h.with_work(work.clone());
    let job = task_job(
        "t1",
        "freeform",
        "Summarise",
        json!({"brief": "Summarise"}),
        None,
    );
    let out = h
        .run_task_attempt(&work, &TaskTypes::builtin(), &job)
        .unwrap();
    let w = waits.lock().unwrap().clone();
    (out.report.unwrap(), w, wire.requests().len())
}

#[test]
fn a_model_outage_is_classified_and_named_as_the_attempts_end() {
    // 503 with Retry-After: waited as the server asked, then the attempt ends retryable,
    // naming the outage.
    let (report, waits, asked) = failed_attempt(vec![
        Reply::status(503, &[("Retry-After", "7")]),
        Reply::status(503, &[("Retry-After", "7")]),
    ]);
    assert_eq!(asked, 2, "one try and one retry");
    assert_eq!(
        waits,
        vec![std::time::Duration::from_secs(7)],
        "Retry-After honoured"
    );
    let ReportKind::Failed {
        retryable,
        reason,
        class,
    } = report
    else {
        panic!("{report:?}")
    };
    // The host classifies the outage (§13.3.2); the retry is still `retryable`'s.
    assert_eq!(class, Some(vouch_core::board::FailureClass::ModelOutage));
    assert!(retryable);
    assert!(
        reason.contains("overloaded") && reason.contains("HTTP 503"),
        "{reason}"
    );
    let mut backoff = vouch_runtime::model::OutageBackoff::default();
    backoff.record(vouch_runtime::model::Outage::of(&reason), 0);
    assert_eq!(
        backoff.wait_ms(0),
        vouch_runtime::model::OutageBackoff::BASE_MS
    );

    // A 401 is fatal: not retried within the turn, nor across attempts.
    let (report, waits, asked) = failed_attempt(vec![Reply::status(401, &[])]);
    assert_eq!((asked, waits.len()), (1, 0));
    let ReportKind::Failed {
        retryable,
        reason,
        class,
    } = report
    else {
        panic!("{report:?}")
    };
    // The host classifies the outage (§13.3.2); the retry is still `retryable`'s.
    assert_eq!(class, Some(vouch_core::board::FailureClass::ModelOutage));
    assert!(!retryable, "{reason}");
    assert!(
        reason.contains("refused") && reason.contains("401"),
        "{reason}"
    );

    // Nobody listening: unreachable, retryable.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}/v1", l.local_addr().unwrap())
    };
    let dir = tempfile::tempdir().unwrap();
    let h = host(dir.path(), &closed);
    let work = Arc::new(TaskWork::new(h.work().clone()));
    let h = h.with_work(work.clone());
    let job = task_job(
        "t2",
        "freeform",
        "Summarise",
        json!({"brief": "Summarise"}),
        None,
    );
    let out = h
        .run_task_attempt(&work, &TaskTypes::builtin(), &job)
        .unwrap();
    let Some(ReportKind::Failed {
        retryable, reason, ..
    }) = out.report
    else {
        panic!("{:?}", out.report)
    };
    assert!(retryable && reason.contains("unreachable"), "{reason}");
}
