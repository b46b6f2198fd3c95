#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The task board through the real binary, on both backends: racing worker processes, a
//! worker killed with SIGKILL mid-attempt, SIGTERM, cancel at a heartbeat, a report after
//! cancel, a malformed result repaired in-session. Each test checks the stored world (task
//! and attempt rows, accepted outputs), never timing.

use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

fn vouch_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vouch"))
}

/// Polls of the stored state at most (each after a short pause) before a test gives up.
const POLLS_MAX: usize = 600;

struct Board {
    tmp: tempfile::TempDir,
    dir: PathBuf,
    env: Vec<(String, String)>,
    pg_schema: Option<String>,
}

fn pg_url() -> String {
    std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

impl Board {
    fn new(pg: bool) -> Board {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("home");
        let mut env = vec![];
        let mut pg_schema = None;
        if pg {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let schema = format!(
                "vouch_test_board_{}_{}",
                std::process::id(),
                nanos % 1_000_000_000_000
            );
            env.push(("VOUCH_DATABASE_URL".into(), pg_url()));
            env.push(("VOUCH_DATABASE_SCHEMA".into(), schema.clone()));
            pg_schema = Some(schema);
        }
        let b = Board {
            tmp,
            dir,
            env,
            pg_schema,
        };
        let out = b.run(&["init"]);
        assert!(
            out.status.success(),
            "init: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        b
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(vouch_bin());
        c.arg("--home")
            .arg(&self.dir)
            .args(args)
            .env_remove("VOUCH_CRASH_AFTER")
            .env_remove("VOUCH_MODEL_URL")
            .env_remove("VOUCH_DATABASE_URL");
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let out = self.run(&a);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
    }

    fn offer(&self, extra: &[&str]) -> String {
        let mut a = vec!["task", "offer", "--type", "freeform", "--brief", "do it"];
        a.extend_from_slice(extra);
        self.json(&a)["id"].as_str().unwrap().to_string()
    }

    fn show(&self, id: &str) -> Value {
        self.json(&["task", "show", id])
    }

    /// A worker that drains the board with `script`, asserted to have exited successfully;
    /// its `--json` events are in the output's stdout.
    fn drain(&self, name: &str, script: &str) -> Output {
        self.drain_with(name, script, &[])
    }

    fn drain_with(&self, name: &str, script: &str, extra: &[&str]) -> Output {
        let mut a = vec![
            "--json", "worker", "--name", name, "--script", script, "--drain",
        ];
        a.extend_from_slice(extra);
        let out = self.run(&a);
        assert!(
            out.status.success(),
            "worker {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// The payload hash on the open card of `run`, as `vouch approvals` shows it.
    fn card_hash(&self, run: &str) -> String {
        let cards = self.json(&["approvals"]);
        let card = cards
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["run"] == run)
            .unwrap_or_else(|| panic!("no open card for run {run}: {cards}"));
        card["payload_hash"].as_str().unwrap().to_string()
    }

    fn script(&self, turns: Value) -> String {
        let p = self.tmp.path().join(format!(
            "script-{}.json",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos()
        ));
        std::fs::write(&p, turns.to_string()).unwrap();
        p.to_str().unwrap().to_string()
    }

    fn worker(&self, name: &str, script: &str, extra: &[&str]) -> Child {
        let mut a = vec!["--json", "worker", "--name", name, "--script", script];
        a.extend_from_slice(extra);
        self.cmd(&a)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Poll `task show` until `pred` holds.
    fn wait_for(&self, id: &str, what: &str, pred: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..POLLS_MAX {
            let v = self.show(id);
            if pred(&v) {
                return v;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!("task {id} never reached: {what}; last: {}", self.show(id));
    }
}

impl Drop for Board {
    fn drop(&mut self) {
        if let Some(schema) = &self.pg_schema {
            if let Ok(mut c) = postgres::Client::connect(&pg_url(), postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
            }
        }
    }
}

fn events(out: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

fn good_script() -> Value {
    json!([
        {"declare": {"deliveries": []}},
        {"submit": {"summary": "done"}},
        {"final": "submitted"}
    ])
}

fn state(v: &Value) -> &str {
    v["task"]["state"].as_str().unwrap_or("")
}

fn attempt_states(v: &Value) -> Vec<String> {
    v["attempts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["state"].as_str().unwrap().to_string())
        .collect()
}

fn eight_workers_race(pg: bool) {
    let b = Board::new(pg);
    const TASKS: usize = 1_000;
    for _ in 0..TASKS {
        b.offer(&[]);
    }
    let script = b.script(good_script());
    let workers: Vec<Child> = (0..8)
        .map(|i| {
            b.worker(
                &format!("racer-{i}"),
                &script,
                &["--drain", "--concurrency", "2"],
            )
        })
        .collect();
    let outs: Vec<Output> = workers
        .into_iter()
        .map(|w| w.wait_with_output().unwrap())
        .collect();
    let mut reported = vec![];
    for o in &outs {
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        for e in events(o) {
            assert_ne!(e["event"], "refused", "no report may be refused: {e}");
            if e["event"] == "reported" {
                reported.push((
                    e["task"].as_str().unwrap().to_string(),
                    e["attempt"].as_u64().unwrap(),
                ));
            }
        }
    }
    assert_eq!(reported.len(), TASKS, "one report per task");
    reported.sort();
    reported.dedup();
    assert_eq!(reported.len(), TASKS, "no attempt reported twice");
    let tasks = b.json(&["task", "list"]);
    let tasks = tasks.as_array().unwrap();
    assert_eq!(tasks.len(), TASKS);
    for t in tasks {
        assert_eq!(t["state"], "completed", "{t}");
        assert_eq!(t["attempts"], 1, "{t}");
        assert_eq!(t["accepted_attempt"], 1, "{t}");
    }
    let m = b.json(&["measures"]);
    assert_eq!(m["cohorts"][0]["counts"]["accepted"], TASKS as u64);
}

fn sigkill_mid_attempt_lease_lapses(pg: bool) {
    let b = Board::new(pg);
    let id = b.offer(&[
        "--max-attempts",
        "2",
        "--lease-ms",
        "1500",
        "--heartbeat-ms",
        "200",
    ]);
    let script = b.script(good_script());
    let mut a = b.worker("doomed", &script, &["--attempt-delay-ms", "600000"]);
    b.wait_for(&id, "running under the first worker", |v| {
        state(v) == "running"
    });
    a.kill().unwrap(); // SIGKILL: no abort, no report; only the lease can tell.
    a.wait().unwrap();
    let mut rounds = 0;
    let v = loop {
        b.drain("rescuer", &script);
        let v = b.show(&id);
        if state(&v) == "completed" {
            break v;
        }
        rounds += 1;
        assert!(rounds < POLLS_MAX, "never completed: {v}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert_eq!(attempt_states(&v), vec!["timed_out", "completed"]);
    let atts = v["attempts"].as_array().unwrap();
    assert_eq!(atts[0]["claimant"], "doomed");
    assert_eq!(atts[1]["claimant"], "rescuer");
    assert!(atts[0]["result_id"].is_null());
    // The lapsed lease is classified a worker crash and counted against the claimant that
    // crashed, not the rescuer (§13.3.2, §13.7.1).
    assert_eq!(atts[0]["detail"]["failure_class"], "worker_crash", "{v}");
    let m = b.json(&["measures", "--by", "claimant"]);
    let doomed = m["cohorts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cohort"] == "doomed")
        .unwrap_or_else(|| panic!("{m}"));
    assert_eq!(doomed["counts"]["failed_worker_crash"], 1, "{m}");
    assert_eq!(doomed["counts"]["attempts"], 1, "{m}");
    assert_eq!(atts[1]["result_id"], v["task"]["result_id"]);
    assert_eq!(v["result"], json!({"summary": "done"}));
}

fn malformed_result_repaired_in_session(pg: bool) {
    let b = Board::new(pg);
    let id = b.offer(&[]);
    let script = b.script(json!([
        {"declare": {"deliveries": []}},
        {"submit": {"summary": 42}},
        {"submit": {"summary": "repaired"}},
        {"final": "ok"}
    ]));
    b.drain("w", &script);
    let v = b.show(&id);
    assert_eq!(state(&v), "completed");
    assert_eq!(attempt_states(&v), vec!["completed"]);
    assert_eq!(v["result"], json!({"summary": "repaired"}));
    let usage = &v["attempts"][0]["usage"];
    assert_eq!(usage["failed_tool_calls"], 1, "{usage}");
    // Claim and report were signed with the worker's own Ed25519 identity (§13.6).
    for k in ["claim_signature", "report_signature"] {
        let sig = v["attempts"][0]["detail"][k].as_str().unwrap_or_default();
        assert_eq!(sig.len(), 128, "{k}: {sig}");
    }
    assert!(b.dir.join("identities/w.key").exists());
    // The journal holds the path the model was told about.
    let run = v["attempts"][0]["run_id"].as_str().unwrap();
    let j = b.run(&["--json", "journal", run]);
    assert!(
        String::from_utf8_lossy(&j.stdout).contains("at /summary"),
        "the repair error names the path"
    );
    // Without a valid submission, the attempt fails: the host notices the missing handoff.
    let id2 = b.offer(&[]);
    let never = b.script(json!([
        {"declare": {"deliveries": []}},
        {"submit": {"nope": true}},
        {"final": "I did it, trust me"}
    ]));
    b.drain("w", &never);
    let v = b.show(&id2);
    assert_eq!(state(&v), "failed");
    assert_eq!(
        v["attempts"][0]["end_reason"],
        "the run ended without an accepted submission"
    );
    // A worker whose key is not the one the store records cannot claim anything.
    let id3 = b.offer(&[]);
    let key = b.dir.join("identities/w.key");
    let text = std::fs::read_to_string(&key).unwrap();
    let mut k: Value = serde_json::from_str(&text).unwrap();
    k["secret_key"] = json!("00".repeat(32));
    std::fs::write(&key, k.to_string()).unwrap();
    let out = b.run(&["worker", "--name", "w", "--script", &script, "--drain"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(state(&b.show(&id3)), "queued");
}

fn cancel_seen_at_heartbeat_or_on_the_board(pg: bool) {
    let b = Board::new(pg);
    let script = b.script(good_script());
    // Cancel while the worker holds the attempt: its next heartbeat says so.
    let id = b.offer(&["--lease-ms", "60000", "--heartbeat-ms", "200"]);
    let w = b.worker("w1", &script, &["--attempt-delay-ms", "600000", "--drain"]);
    b.wait_for(&id, "running", |v| state(v) == "running");
    b.json(&["task", "cancel", &id]);
    let out = w.wait_with_output().unwrap();
    assert!(out.status.success());
    let ev = events(&out);
    assert!(
        ev.iter()
            .any(|e| e["event"] == "cancelled" && e["task"] == id.as_str()),
        "{ev:?}"
    );
    let v = b.show(&id);
    assert_eq!(attempt_states(&v), vec!["cancelled"]);
    // Cancel while no heartbeat will come before the run starts: the run reads the board
    // itself before its first turn, stops, and reports nothing (issue 22 #5).
    let id = b.offer(&["--lease-ms", "600000", "--heartbeat-ms", "300000"]);
    // Long enough that the cancel lands first even on a loaded machine (no heartbeat comes).
    let w = b.worker("w2", &script, &["--attempt-delay-ms", "20000", "--drain"]);
    b.wait_for(&id, "running", |v| state(v) == "running");
    b.json(&["task", "cancel", &id]);
    let out = w.wait_with_output().unwrap();
    let ev = events(&out);
    assert!(
        ev.iter()
            .any(|e| e["event"] == "cancelled" && e["task"] == id.as_str() && e["run"].is_string()),
        "{ev:?}"
    );
    assert!(
        !ev.iter()
            .any(|e| e["event"] == "reported" && e["task"] == id.as_str()),
        "{ev:?}"
    );
    let v = b.show(&id);
    assert_eq!(state(&v), "cancelled");
    assert_eq!(attempt_states(&v), vec!["cancelled"]);
    assert!(v["task"]["result_id"].is_null() && v["result"].is_null());
}

fn sigterm_aborts_retryably(pg: bool) {
    let b = Board::new(pg);
    let script = b.script(good_script());
    let id = b.offer(&["--heartbeat-ms", "200"]);
    let w = b.worker("w1", &script, &["--attempt-delay-ms", "600000"]);
    b.wait_for(&id, "running", |v| state(v) == "running");
    let st = Command::new("kill")
        .args(["-TERM", &w.id().to_string()])
        .status()
        .unwrap();
    assert!(st.success());
    let out = w.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = b.show(&id);
    assert_eq!(
        state(&v),
        "queued",
        "an abort is retryable even with one attempt"
    );
    assert_eq!(attempt_states(&v), vec!["aborted"]);
    b.drain("w2", &script);
    let v = b.show(&id);
    assert_eq!(attempt_states(&v), vec!["aborted", "completed"]);
}

fn bad_input_is_exit_2(pg: bool) {
    let b = Board::new(pg);
    for args in [
        vec!["task", "offer", "--type", "nope", "--brief", "x"],
        vec![
            "task",
            "offer",
            "--type",
            "freeform",
            "--brief",
            "x",
            "--max-attempts",
            "21",
        ],
        vec!["task", "show", "missing"],
        vec!["task", "cancel", "missing"],
        vec!["task", "list", "--state", "weird"],
        vec!["measures", "--since", "3 weeks"],
    ] {
        let out = b.run(&args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Idempotency: same key + same request → same task; a different request → refused.
    let a = b.json(&[
        "task",
        "offer",
        "--type",
        "freeform",
        "--brief",
        "x",
        "--idempotency-key",
        "k1",
    ]);
    let again = b.json(&[
        "task",
        "offer",
        "--type",
        "freeform",
        "--brief",
        "x",
        "--idempotency-key",
        "k1",
    ]);
    assert_eq!(a["id"], again["id"]);
    assert_eq!(again["existing"], true);
    let out = b.run(&[
        "task",
        "offer",
        "--type",
        "freeform",
        "--brief",
        "y",
        "--idempotency-key",
        "k1",
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("idempotency key"));
}

fn judge_excludes_the_producer_and_criteria_need_self_assessment(pg: bool) {
    let b = Board::new(pg);
    let criteria = b.tmp.path().join("criteria.json");
    std::fs::write(&criteria, r#"["clear", "short"]"#).unwrap();
    let target = b.offer(&["--criteria", criteria.to_str().unwrap()]);
    // Without a self-assessment the submission is sent back; with one it is accepted.
    let producer = b.script(json!([
        {"declare": {"deliveries": []}},
        {"submit": {"summary": "v1"}},
        {"submit": {"summary": "v1"}, "self_assessment": {"clear": "yes", "short": "yes"}},
        {"final": "ok"}
    ]));
    b.drain("producer", &producer);
    let v = b.show(&target);
    assert_eq!(state(&v), "completed", "{v}");
    assert_eq!(
        v["attempts"][0]["detail"]["self_assessment"],
        json!({"clear": "yes", "short": "yes"})
    );
    assert_eq!(v["attempts"][0]["usage"]["failed_tool_calls"], 1);
    let input = b.tmp.path().join("judge.json");
    std::fs::write(
        &input,
        json!({"target": target, "criteria": ["clear", "short"]}).to_string(),
    )
    .unwrap();
    let judge = b.json(&[
        "task",
        "offer",
        "--type",
        "judge",
        "--brief",
        "judge it",
        "--input",
        input.to_str().unwrap(),
    ])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let verdict = b.script(json!([
        {"declare": {"deliveries": []}},
        {"submit": {"passed": true, "scores": {"clear": 0.9, "short": 0.8}}},
        {"final": "judged"}
    ]));
    // The producer may not judge its own output: it finds nothing to claim.
    b.drain("producer", &verdict);
    assert_eq!(state(&b.show(&judge)), "queued");
    b.drain("judge", &verdict);
    let v = b.show(&judge);
    assert_eq!(state(&v), "completed");
    assert_eq!(v["attempts"][0]["claimant"], "judge");
    let t = b.show(&target);
    assert_eq!(t["verdicts"][0][0], judge.as_str());
    assert_eq!(t["verdicts"][0][1]["passed"], true);
    let m = b.json(&["measures", "--by", "type"]);
    let freeform = m["cohorts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cohort"] == "freeform")
        .unwrap();
    assert_eq!(freeform["rates"]["verdict_pass_rate"], 1.0);
}

/// A webhook that answers 200 and keeps every body it was sent.
fn receiver() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/hook", l.local_addr().unwrap());
    let got = std::sync::Arc::new(std::sync::Mutex::new(vec![]));
    let seen = got.clone();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            let mut r = BufReader::new(conn);
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                let lower = line.to_ascii_lowercase();
                if let Some(v) = lower.strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut body = vec![0u8; len];
            let _ = r.read_exact(&mut body);
            seen.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&body).into_owned());
            let _ = r
                .get_mut()
                .write_all(b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\nconnection: close\r\n\r\n");
        }
    });
    (url, got)
}

fn approval_suspends_and_another_worker_finishes(pg: bool) {
    let b = Board::new(pg);
    let (url, got) = receiver();
    let needs_approval = b.offer(&[]);
    let other = b.offer(&[]);
    let script = b.script(json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": url}}]}},
        {"deliver": "d1", "payload": {"text": "hello"}},
        {"submit": {"summary": "sent"}},
        {"final": "done"}
    ]));
    // w1 claims the first task, whose run waits for an approval: the attempt is suspended and
    // w1, free again, takes the other task (same script: it suspends too, then w1 drains).
    let out = b.drain("w1", &script);
    let ev = events(&out);
    let suspended: Vec<&str> = ev
        .iter()
        .filter(|e| e["event"] == "suspended")
        .map(|e| e["task"].as_str().unwrap())
        .collect();
    assert_eq!(
        suspended,
        vec![needs_approval.as_str(), other.as_str()],
        "{ev:?}"
    );
    let v = b.show(&needs_approval);
    assert_eq!(state(&v), "running");
    assert_eq!(attempt_states(&v), vec!["suspended"]);
    assert!(
        v["task"]["claimant"].is_null(),
        "the lease is released: {v}"
    );
    let run = v["attempts"][0]["run_id"].as_str().unwrap().to_string();
    assert!(
        got.lock().unwrap().is_empty(),
        "nothing goes out before approval"
    );
    // The person approves: the task is queued as a resumption, nothing runs in `approve`.
    let hash = b.card_hash(&run);
    let d = b.json(&["approve", &run, "d1", "--hash", &hash]);
    assert_eq!(d["task"], needs_approval.as_str());
    assert_eq!(d["task_state"], "queued");
    assert!(got.lock().unwrap().is_empty(), "approve only decides");
    // Another worker, with a script of its own, continues the same attempt's run.
    let idle = b.script(json!([{"declare": {"deliveries": []}}, {"final": "nothing"}]));
    let out = b.drain("w2", &idle);
    let ev = events(&out);
    assert!(
        ev.iter().any(|e| e["event"] == "claimed"
            && e["task"] == needs_approval.as_str()
            && e["resumption"] == true),
        "{ev:?}"
    );
    let v = b.show(&needs_approval);
    assert_eq!(state(&v), "completed", "{v}");
    assert_eq!(
        attempt_states(&v),
        vec!["completed"],
        "the same attempt, not a new one"
    );
    assert_eq!(v["attempts"][0]["claimant"], "w2");
    assert_eq!(v["attempts"][0]["run_id"], run.as_str(), "the same run");
    assert_eq!(v["result"], json!({"summary": "sent"}));
    let sent = got.lock().unwrap().clone();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].contains("hello"), "{sent:?}");
    // The other task still waits for its own approval; a sweep leaves it alone.
    assert_eq!(attempt_states(&b.show(&other)), vec!["suspended"]);
    assert_eq!(b.json(&["task", "sweep"])["resumed"], json!([]));
    // A decider that stopped after recording the decision but before queuing the task (here:
    // the card decided behind vouch's back) is finished by the sweep.
    let other_run = b.show(&other)["attempts"][0]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let decide = format!("UPDATE cards SET state = 'approved' WHERE run_id = '{other_run}'");
    match &b.pg_schema {
        Some(schema) => {
            let mut c = postgres::Client::connect(&pg_url(), postgres::NoTls).unwrap();
            c.batch_execute(&format!("SET search_path TO \"{schema}\"; {decide}"))
                .unwrap();
        }
        None => {
            let c = rusqlite::Connection::open(b.dir.join("vouch.db")).unwrap();
            c.execute_batch(&decide).unwrap();
        }
    }
    assert_eq!(
        b.json(&["task", "sweep"])["resumed"],
        json!([other.as_str()])
    );
    assert_eq!(state(&b.show(&other)), "queued");
}

fn continuation_goes_on_from_the_parents_conversation(pg: bool) {
    let b = Board::new(pg);
    let id = b.offer(&[]);
    let first = b.script(json!([
        {"declare": {"deliveries": []}},
        {"submit": {"summary": "first draft"}},
        {"final": "ok"}
    ]));
    // Only a completed task can be continued.
    let out = b.run(&["task", "continue", &id, "--brief", "shorter"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    b.drain("w1", &first);
    let parent = b.show(&id);
    assert_eq!(state(&parent), "completed");
    let c = b.json(&["task", "continue", &id, "--brief", "make it shorter"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let v = b.show(&c);
    let cont = &v["task"]["spec"]["input"]["continuation"];
    assert_eq!(cont["parent"], id.as_str());
    assert_eq!(cont["mode"], "extend");
    assert_eq!(cont["run"], parent["attempts"][0]["run_id"]);
    assert_eq!(
        v["task"]["spec"]["correlation"],
        id.as_str(),
        "extend keeps the thread"
    );
    assert_eq!(v["task"]["spec"]["references"], json!([id]));
    // The pinned conversation is the parent's, by content id.
    let cid = cont["conversation"].as_str().unwrap().to_string();
    let got = b.run(&["artifact", "get", &cid]);
    assert!(got.status.success());
    assert!(String::from_utf8_lossy(&got.stdout).contains("first draft"));
    // Another worker runs the continuation, going on from that conversation.
    let second = b.script(json!([
        {"declare": {"deliveries": []}},
        {"submit": {"summary": "short"}},
        {"final": "ok"}
    ]));
    b.drain("w2", &second);
    let v = b.show(&c);
    assert_eq!(state(&v), "completed", "{v}");
    assert_eq!(v["result"], json!({"summary": "short"}));
    // Its own conversation holds the parent's, then the new brief, then its own turns.
    let f = b.json(&["task", "continue", &c, "--brief", "again", "--mode", "fork"]);
    let fv = b.show(f["id"].as_str().unwrap());
    assert_eq!(
        fv["task"]["spec"]["correlation"], "",
        "fork starts a new thread"
    );
    let cid2 = fv["task"]["spec"]["input"]["continuation"]["conversation"]
        .as_str()
        .unwrap()
        .to_string();
    let text = String::from_utf8_lossy(&b.run(&["artifact", "get", &cid2]).stdout).into_owned();
    let (a, m, z) = (
        text.find("first draft").unwrap(),
        text.find("make it shorter").unwrap(),
        text.find("short\\\"")
            .or_else(|| text.find("\"short"))
            .unwrap(),
    );
    assert!(a < m && m < z, "{text}");
    // `task judge` offers a judge task on the accepted output.
    let criteria = b.tmp.path().join("crit.json");
    std::fs::write(&criteria, r#"["short"]"#).unwrap();
    let j = b.json(&[
        "task",
        "judge",
        &c,
        "--criteria",
        criteria.to_str().unwrap(),
    ]);
    let jv = b.show(j["id"].as_str().unwrap());
    assert_eq!(jv["task"]["kind"], "judge");
    assert_eq!(jv["task"]["spec"]["input"]["target"], c.as_str());
    assert_eq!(jv["task"]["excluded_claimant"], "w2");
    std::fs::write(&criteria, r#"{"short": 1}"#).unwrap();
    let out = b.run(&[
        "task",
        "judge",
        &c,
        "--criteria",
        criteria.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
}

fn runtime_profile_snapshot_is_enforced_not_a_later_edit(pg: bool) {
    let b = Board::new(pg);
    let profiles = b.dir.join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    let narrow = json!({"tools": {"autonomous": ["read_file"]}, "network": []});
    std::fs::write(profiles.join("narrow.json"), narrow.to_string()).unwrap();
    // A missing profile is bad input.
    let out = b.run(&["worker", "--name", "w0", "--profile", "nope", "--drain"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = b.script(json!([
        {"declare": {"deliveries": []}},
        {"tool": "search_news", "args": {"q": "markets"}},
        {"submit": {"summary": "done"}},
        {"final": "ok"}
    ]));
    let id = b.offer(&["--profile", "narrow", "--heartbeat-ms", "200"]);
    // A worker under another profile may not claim it.
    b.drain("w0", &script);
    assert_eq!(state(&b.show(&id)), "queued");
    let w = b.worker(
        "w1",
        &script,
        &[
            "--profile",
            "narrow",
            "--attempt-delay-ms",
            "1500",
            "--drain",
        ],
    );
    b.wait_for(&id, "running", |v| state(v) == "running");
    // Widened after the claim: this attempt still runs under the snapshot it claimed.
    std::fs::write(
        profiles.join("narrow.json"),
        json!({"tools": {"autonomous": ["read_file", "search_news"]}}).to_string(),
    )
    .unwrap();
    let out = w.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = b.show(&id);
    assert_eq!(state(&v), "completed", "{v}");
    let a = &v["attempts"][0];
    assert_eq!(a["profile"], "narrow");
    let mut recorded = narrow.clone();
    recorded["name"] = json!("narrow");
    assert_eq!(a["detail"]["policy"], recorded);
    let fp1 = a["policy_fingerprint"].as_str().unwrap().to_string();
    assert!(fp1.starts_with("sha256:") && fp1.len() == 71, "{fp1}");
    assert_eq!(
        a["usage"]["failed_tool_calls"], 1,
        "search_news was refused"
    );
    let j = b.run(&["--json", "journal", a["run_id"].as_str().unwrap()]);
    assert!(String::from_utf8_lossy(&j.stdout).contains("not allowed by runtime profile"));
    // The next claim reads the edited profile: a new fingerprint, the tool allowed.
    let id2 = b.offer(&["--profile", "narrow"]);
    b.drain_with("w2", &script, &["--profile", "narrow"]);
    let v2 = b.show(&id2);
    assert_eq!(state(&v2), "completed", "{v2}");
    let a2 = &v2["attempts"][0];
    assert_ne!(a2["policy_fingerprint"].as_str().unwrap(), fp1);
    assert_eq!(a2["usage"]["failed_tool_calls"], 0);
}

/// The same decision over HTTP (`vouch serve --http`): the server records it and queues the
/// task; it never drives the task's run itself.
fn http_approval_of_a_task_run_queues_it_for_a_worker(pg: bool) {
    use std::io::BufRead;
    let b = Board::new(pg);
    let (url, got) = receiver();
    let id = b.offer(&[]);
    let script = b.script(json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": url}}]}},
        {"deliver": "d1", "payload": {"text": "over http"}},
        {"submit": {"summary": "sent"}},
        {"final": "done"}
    ]));
    b.drain("w1", &script);
    let v = b.show(&id);
    assert_eq!(attempt_states(&v), vec!["suspended"]);
    let run = v["attempts"][0]["run_id"].as_str().unwrap().to_string();
    let hash = b.json(&["approvals"])[0]["payload_hash"]
        .as_str()
        .unwrap()
        .to_string();
    let token = b.json(&["token", "new", "t"])["token"]
        .as_str()
        .unwrap()
        .to_string();
    let mut child = b
        .cmd(&["--json", "serve", "--http", "127.0.0.1:0"])
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = serde_json::from_str::<Value>(&line).unwrap()["listening"]
        .as_str()
        .unwrap()
        .to_string();
    let res = ureq::post(&format!(
        "http://{addr}/api/runs/{run}/deliveries/d1/approve"
    ))
    .set("Authorization", &format!("Bearer {token}"))
    .send_json(json!({"hash": hash}));
    let _ = child.kill();
    let _ = child.wait();
    let res = res.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(state(&b.show(&id)), "queued", "queued for a worker");
    assert!(
        got.lock().unwrap().is_empty(),
        "the server did not drive the run"
    );
    b.drain("w2", &script);
    let v = b.show(&id);
    assert_eq!(state(&v), "completed", "{v}");
    assert_eq!(v["attempts"][0]["claimant"], "w2");
    assert_eq!(got.lock().unwrap().len(), 1);
}

/// §13.4.2: a result submitted before the attempt suspends is kept in the run's durable
/// journal; the worker that resumes the run (another process, with a script of its own)
/// reports that result when the run ends, and the submission is never asked for again.
fn result_submitted_before_suspension_is_kept_for_the_resumption(pg: bool) {
    let b = Board::new(pg);
    let (url, got) = receiver();
    let id = b.offer(&[]);
    let script = b.script(json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": url}}]}},
        {"submit": {"summary": "numbers mailed"}},
        {"deliver": "d1", "payload": {"text": "week 49: 42 tickets"}},
        {"final": "done"}
    ]));
    b.drain("w1", &script);
    let v = b.show(&id);
    assert_eq!(attempt_states(&v), vec!["suspended"], "{v}");
    assert!(
        v["result"].is_null(),
        "nothing accepted while it waits: {v}"
    );
    let run = v["attempts"][0]["run_id"].as_str().unwrap().to_string();
    let hash = b.card_hash(&run);
    assert_eq!(
        b.json(&["approve", &run, "d1", "--hash", &hash])["task_state"],
        "queued"
    );
    // w2's own script never submits: the result it reports is the one kept in the journal.
    let idle = b.script(json!([{"declare": {"deliveries": []}}, {"final": "nothing"}]));
    b.drain("w2", &idle);
    let v = b.show(&id);
    assert_eq!(state(&v), "completed", "{v}");
    assert_eq!(attempt_states(&v), vec!["completed"]);
    assert_eq!(v["attempts"][0]["claimant"], "w2");
    assert_eq!(v["result"], json!({"summary": "numbers mailed"}));
    let sent = got.lock().unwrap().clone();
    assert_eq!(sent.len(), 1, "sent once, after the approval: {sent:?}");
}

/// Issue 21: a cancelled run that waited on a question left the question open forever (the
/// inbox badge stayed +1, answering exited 2). A cancel closes every open card and question.
fn cancel_closes_every_open_card_and_question(pg: bool) {
    let b = Board::new(pg);
    let script = b.script(json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "write", "destination": {"kind": "surface"}, "confidence": "low"}]}},
        {"clarify": "Which week?"},
        {"final": "done"}
    ]));
    let out = b.run(&["--json", "run", "weekly numbers", "--script", &script]);
    assert_eq!(out.status.code(), Some(3), "the run asks first: exit 3");
    let run: Value = serde_json::from_slice(&out.stdout).unwrap();
    let run = run["run"]
        .as_str()
        .unwrap_or_else(|| panic!("{run}"))
        .to_string();
    assert_eq!(
        b.json(&["inbox", "--count"]),
        json!({"waiting": 1}),
        "the question waits"
    );
    b.json(&["cancel", &run]);
    assert_eq!(
        b.json(&["inbox", "--count"]),
        json!({"waiting": 0}),
        "nothing is left open"
    );
    assert_eq!(b.json(&["approvals"]), json!([]));
    let out = b.run(&["answer", &run, "week 49"]);
    assert_eq!(out.status.code(), Some(2), "the run has ended");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("already ended"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// An OpenAI-compatible stand-in on loopback: answers each request with the next `(delay_ms,
/// body)` after that delay, and counts the requests it was sent (a model that is slow to think).
fn slow_model(responses: Vec<(u64, Value)>) -> (String, std::sync::Arc<std::sync::Mutex<usize>>) {
    use std::io::{Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = std::sync::Arc::new(std::sync::Mutex::new(0usize));
    let s2 = seen.clone();
    std::thread::spawn(move || {
        let mut queue = responses.into_iter();
        for mut s in listener.incoming().flatten() {
            // Read the request: headers, then the body its Content-Length announces.
            let mut buf = vec![];
            let mut chunk = [0u8; 8192];
            while let Ok(n) = s.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                buf.extend_from_slice(&chunk[..n]);
                let text = String::from_utf8_lossy(&buf).to_string();
                if let Some((head, body)) = text.split_once("\r\n\r\n") {
                    let len = head
                        .lines()
                        .find_map(|l| {
                            let (k, v) = l.split_once(':')?;
                            k.eq_ignore_ascii_case("content-length")
                                .then(|| v.trim().parse::<usize>().ok())?
                        })
                        .unwrap_or(0);
                    if body.len() >= len {
                        break;
                    }
                }
            }
            *s2.lock().unwrap() += 1;
            let (delay_ms, body) = queue.next().unwrap_or((
                0,
                json!({"choices": [{"message": {"role": "assistant", "content": "out of answers"}}]}),
            ));
            std::thread::sleep(std::time::Duration::from_millis(delay_ms));
            let body = body.to_string();
            let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        }
    });
    (url, seen)
}

fn tool_calls(calls: &[(&str, &str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
        .collect();
    json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": calls}}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
}

/// Issue 22 #5: a task cancelled mid-run kept calling the model, saved a file after the
/// cancel, `submit` answered "accepted" and the receipt said "Succeeded". Now the run stops at
/// its next turn boundary: the model's answer that arrives after the cancel is not carried
/// out (no file, no submission), the model is not called again, and the run ends `cancel`.
fn a_cancel_stops_the_work(pg: bool) {
    let b = Board::new(pg);
    let answers = |file: &str, think_ms: u64| {
        let manifest = json!({"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": file}}]});
        // The first turn's tokens are what a cancelled attempt has spent (§13.7.2).
        let mut declare = tool_calls(&[("c1", "declare", manifest)]);
        declare["usage"] = json!({"prompt_tokens": 100, "completion_tokens": 20});
        vec![
            (0, declare),
            (
                think_ms,
                tool_calls(&[
                    (
                        "c2",
                        "save",
                        json!({"delivery": "d1", "payload": {"text": "# Plan\n"}}),
                    ),
                    (
                        "c3",
                        "submit",
                        json!({"result": {"summary": "saved"}, "self_assessment": null}),
                    ),
                ]),
            ),
            (
                0,
                json!({"choices": [{"message": {"role": "assistant", "content": "Saved."}}]}),
            ),
        ]
    };
    let worker = |url: &str, name: &str| {
        let mut c = b.cmd(&["--json", "worker", "--name", name, "--drain"]);
        c.env("VOUCH_MODEL_URL", url)
            .env("VOUCH_MODEL", "stand-in")
            .env("VOUCH_API_KEY", "sk-test")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().unwrap()
    };
    // Without a cancel the same answers save the file and complete the task: the world the
    // cancel must leave untouched is really within the run's reach.
    let (url, _) = slow_model(answers("Notes/control.md", 0));
    let control = b.offer(&[]);
    let out = worker(&url, "w0").wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(state(&b.show(&control)), "completed");
    assert!(b.dir.join("files/Notes/control.md").exists());
    // The model thinks for 3 s on its second turn; the owner cancels meanwhile. Heartbeats
    // are minutes apart: the run learns of the cancel from the board itself.
    let (url, seen) = slow_model(answers("Notes/plan.md", 3_000));
    let id = b.offer(&["--lease-ms", "600000", "--heartbeat-ms", "300000"]);
    let w = worker(&url, "w1");
    for _ in 0..POLLS_MAX {
        if *seen.lock().unwrap() >= 2 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(*seen.lock().unwrap(), 2, "the second turn is being thought");
    b.json(&["task", "cancel", &id]);
    let out = w.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The world: no file, no further model call, nothing accepted.
    assert!(
        !b.dir.join("files/Notes/plan.md").exists(),
        "nothing is saved after the cancel"
    );
    assert_eq!(
        *seen.lock().unwrap(),
        2,
        "the model is not called after the cancel"
    );
    let v = b.show(&id);
    assert_eq!(state(&v), "cancelled");
    assert_eq!(attempt_states(&v), vec!["cancelled"]);
    assert!(
        v["task"]["result_id"].is_null() && v["result"].is_null(),
        "{v}"
    );
    let ev = events(&out);
    let cancelled = ev
        .iter()
        .find(|e| e["event"] == "cancelled" && e["task"] == id.as_str())
        .unwrap_or_else(|| panic!("{ev:?}"));
    assert!(
        !ev.iter()
            .any(|e| e["event"] == "reported" && e["task"] == id.as_str()),
        "{ev:?}"
    );
    let run = cancelled["run"]
        .as_str()
        .unwrap_or_else(|| panic!("{ev:?}"));
    // The cancelled attempt keeps its run and what it cost (charged from the run's journal
    // once it ended), and the measures count it (§13.7.2).
    let a = &b.show(&id)["attempts"][0];
    assert_eq!(a["run_id"], run, "{a}");
    // At least the first turn's 120 (the turn being thought when the cancel came may have
    // been answered and journaled too: its tokens were spent as well).
    let tokens = a["usage"]["tokens"].as_i64().unwrap();
    assert!(tokens >= 120, "{a}");
    assert!(a["usage"]["turns"].as_i64().unwrap() >= 1, "{a}");
    assert_eq!(a["detail"]["charged"]["after_end"], true, "{a}");
    let m = b.json(&["measures", "--correlation", &id]);
    assert_eq!(m["cohorts"][0]["counts"]["tokens"], tokens, "{m}");
    let r = b.json(&["receipt", run]);
    assert_eq!(r["state"], "ended");
    let text = r["receipt"].as_str().unwrap();
    assert!(text.contains("ended by cancel"), "{text}");
    assert!(text.contains("the task was cancelled"), "{text}");
    assert!(!text.contains("Succeeded"), "{text}");
    // What was done before (the manifest) and what the cancel withdrew, with the result item.
    assert!(text.contains("Outcome: Cancelled"), "{text}");
    assert!(text.contains("Withdrawn at your request"), "{text}");
    assert!(text.contains("✗ result — cancelled"), "{text}");
    // The control run's receipt shows its result accepted (issue 22 #7).
    let control_run = b.show(&control)["attempts"][0]["run_id"]
        .as_str()
        .unwrap()
        .to_string();
    let r = b.json(&["receipt", &control_run]);
    let text = r["receipt"].as_str().unwrap();
    assert!(text.contains("✓ result — accepted"), "{text}");
}

/// Issue 22 #6: a task cancel ends its suspended run — the open card is closed, the run ends
/// `cancel` with its receipt and the `result` item cancelled — and `vouch resume` of a task's
/// run is refused with the board's command to use instead.
fn a_task_cancel_ends_its_suspended_run(pg: bool) {
    let b = Board::new(pg);
    let (url, got) = receiver();
    let id = b.offer(&[]);
    let script = b.script(json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": url}}]}},
        {"deliver": "d1", "payload": {"text": "hello"}},
        {"submit": {"summary": "sent"}},
        {"final": "done"}
    ]));
    b.drain("w1", &script);
    let v = b.show(&id);
    assert_eq!(attempt_states(&v), vec!["suspended"]);
    let run = v["attempts"][0]["run_id"].as_str().unwrap().to_string();
    assert_eq!(b.json(&["inbox", "--count"]), json!({"waiting": 1}));
    let c = b.json(&["task", "cancel", &id]);
    assert_eq!(c["state"], "cancelled");
    assert_eq!(c["run"], run.as_str(), "{c}");
    let v = b.show(&id);
    assert_eq!(state(&v), "cancelled");
    assert_eq!(attempt_states(&v), vec!["cancelled"]);
    assert_eq!(
        b.json(&["inbox", "--count"]),
        json!({"waiting": 0}),
        "the card is closed"
    );
    let r = b.json(&["receipt", &run]);
    assert_eq!(r["state"], "ended");
    let text = r["receipt"].as_str().unwrap();
    assert!(text.contains("ended by cancel"), "{text}");
    assert!(text.contains("Withdrawn at your request"), "{text}");
    assert!(text.contains("✗ result — cancelled"), "{text}");
    // Nothing went out, and nothing is left to decide or resume.
    assert!(got.lock().unwrap().is_empty());
    let out = b.run(&["approve", &run, "d1", "--hash", "sha256:0"]);
    assert_eq!(out.status.code(), Some(2));
    let out = b.run(&["resume", &run]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&format!("vouch task show {id}")), "{err}");
}

/// A decision on the run of an attempt whose worker has not yet told the board that the run
/// waits (here the worker died right after the card opened) is refused (§13.3): the decider
/// does not drive the run beside the live attempt — which the sweep would then time out and
/// the task retry, asking to send the same thing again. Once the sweep suspends the lapsed
/// attempt with its waiting run, the same approval queues it, a worker resumes it, and the
/// send goes out once, on attempt 1.
fn a_decision_before_the_attempt_reports_its_wait_is_refused(pg: bool) {
    let b = Board::new(pg);
    let (url, got) = receiver();
    let id = b.offer(&[
        "--max-attempts",
        "3",
        "--lease-ms",
        "1000",
        "--heartbeat-ms",
        "500",
        "--dispatch-timeout-ms",
        "1000",
    ]);
    let script = b.script(json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": url}}]}},
        {"deliver": "d1", "payload": {"text": "hello"}},
        {"submit": {"summary": "sent"}},
        {"final": "done"}
    ]));
    let out = b
        .cmd(&["worker", "--name", "w1", "--script", &script, "--drain"])
        .env("VOUCH_CRASH_AFTER", "approval_requested")
        .output()
        .unwrap();
    assert!(!out.status.success(), "the worker died at the crash point");
    let v = b.show(&id);
    let live = attempt_states(&v);
    assert!(
        live == ["running"] || live == ["claimed"],
        "the attempt is live: {v}"
    );
    let cards = b.json(&["approvals"]);
    let run = cards[0]["run"].as_str().unwrap().to_string();
    let hash = b.card_hash(&run);
    let out = b.run(&["approve", &run, "d1", "--hash", &hash]);
    assert!(!out.status.success(), "refused while the attempt is live");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("has not yet reported that the run waits"),
        "{err}"
    );
    assert!(got.lock().unwrap().is_empty(), "the decider sent nothing");
    assert_eq!(b.card_hash(&run), hash, "the card is still open");
    // The lease lapses; a sweep suspends the attempt with its waiting run (no retry).
    let mut v = b.show(&id);
    for _ in 0..POLLS_MAX {
        let _ = b.run(&["task", "sweep"]);
        v = b.show(&id);
        if attempt_states(&v) == ["suspended"] {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(attempt_states(&v), vec!["suspended"], "{v}");
    assert_eq!(v["attempts"][0]["run_id"], run.as_str(), "{v}");
    b.json(&["approve", &run, "d1", "--hash", &hash]);
    assert!(
        got.lock().unwrap().is_empty(),
        "approve queues; it sends nothing"
    );
    b.drain("w2", &script);
    let v = b.show(&id);
    assert_eq!(state(&v), "completed", "{v}");
    assert_eq!(attempt_states(&v), vec!["completed"], "{v}");
    assert_eq!(got.lock().unwrap().len(), 1, "sent once");
}

/// A thread (§13.1): `--correlation` on the offer, a filter on `task list` and `measures`,
/// and `task thread` listing its tasks in order with attempts, results and verdicts; a
/// continuation that extends a task without a correlation joins that task's thread.
fn a_thread_is_offered_listed_measured_and_shown(pg: bool) {
    let b = Board::new(pg);
    let first = b.offer(&["--correlation", "release-42"]);
    let other = b.offer(&[]);
    let second = b.offer(&["--correlation", "release-42"]);
    // A correlation is an id: printable, bounded.
    let bad = b.run(&[
        "task",
        "offer",
        "--type",
        "freeform",
        "--brief",
        "x",
        "--correlation",
        "a\nb",
    ]);
    assert_eq!(
        bad.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&bad.stderr)
    );
    let script = b.script(good_script());
    b.drain("w1", &script);
    let listed = b.json(&["task", "list", "--correlation", "release-42"]);
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![first.as_str(), second.as_str()]);
    let m = b.json(&["measures", "--correlation", "release-42"]);
    assert_eq!(m["cohorts"][0]["counts"]["tasks"], 2, "{m}");
    assert_eq!(m["cohorts"][0]["counts"]["accepted"], 2, "{m}");
    let t = b.json(&["task", "thread", "release-42"]);
    let tasks = t["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 2);
    assert_eq!(tasks[0]["task"]["id"], first.as_str());
    assert_eq!(tasks[0]["attempts"][0]["state"], "completed");
    assert_eq!(tasks[0]["result"], json!({"summary": "done"}));
    let human = b.run(&["task", "thread", "release-42"]);
    let text = String::from_utf8_lossy(&human.stdout);
    assert!(text.contains(&first) && text.contains(&second), "{text}");
    assert!(!text.contains(&other), "{text}");
    // A continuation of a task without a correlation joins that task's thread.
    let c = b.json(&["task", "continue", &other, "--brief", "again"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let t = b.json(&["task", "thread", &other]);
    let ids: Vec<&str> = t["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task"]["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![other.as_str(), c.as_str()]);
    // An unknown thread is bad input, said so.
    let out = b.run(&["task", "thread", "no-such-thread"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such-thread"));
}

/// Pinned context (§13.1.2): `--context FILE` is stored and pinned by content id with the
/// task, the attempt's model is given its exact text (the conversation the host keeps shows
/// it), a continuation keeps it, and a file that is not text is bad input.
fn pinned_context_reaches_the_model(pg: bool) {
    let b = Board::new(pg);
    let guide = b.tmp.path().join("guide.md");
    std::fs::write(&guide, "House style: every summary names its sources.\n").unwrap();
    let id = b.offer(&["--context", guide.to_str().unwrap()]);
    let t = b.show(&id);
    let cid = t["task"]["spec"]["context"][0]
        .as_str()
        .unwrap()
        .to_string();
    assert!(cid.starts_with("sha256:"), "{t}");
    let script = b.script(good_script());
    b.drain("w1", &script);
    assert_eq!(state(&b.show(&id)), "completed");
    let c = b.json(&["task", "continue", &id, "--brief", "again"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let cv = b.show(&c);
    assert_eq!(cv["task"]["spec"]["context"][0], cid.as_str(), "{cv}");
    let conversation = cv["task"]["spec"]["input"]["continuation"]["conversation"]
        .as_str()
        .unwrap()
        .to_string();
    let got = b.run(&["artifact", "get", &conversation]);
    let text = String::from_utf8_lossy(&got.stdout);
    assert!(
        text.contains(&format!("Pinned context {cid}")) && text.contains("names its sources"),
        "{text}"
    );
    let binary = b.tmp.path().join("blob.bin");
    std::fs::write(&binary, [0xff, 0xfe, 0x00]).unwrap();
    let out = b.run(&[
        "task",
        "offer",
        "--type",
        "freeform",
        "--brief",
        "x",
        "--context",
        binary.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--context"));
}

/// Input artifacts (§13.1.3): `--input-artifact FILE|CID` binds stored artifacts (a file is
/// stored first); an id nothing is stored under, or neither an id nor a file, is bad input
/// naming it; the model reads only its task's own through `read_input`, and the measures
/// count the reads the host journaled (§13.7.3), by cohort, beside the other figures.
fn input_artifacts_are_bound_read_and_counted(pg: bool) {
    let b = Board::new(pg);
    let notes = b.tmp.path().join("notes.txt");
    std::fs::write(&notes, "Q3 notes: revenue up 4%.\n").unwrap();
    let other = b.tmp.path().join("other.txt");
    std::fs::write(&other, "someone else's").unwrap();
    let other_cid = b.json(&["artifact", "put", other.to_str().unwrap()])["cid"]
        .as_str()
        .unwrap()
        .to_string();
    let id = b.offer(&["--input-artifact", notes.to_str().unwrap(), "--tag", "kb"]);
    let t = b.show(&id);
    let cid = t["task"]["spec"]["input_artifacts"][0]
        .as_str()
        .unwrap()
        .to_string();
    assert!(cid.starts_with("sha256:") && cid != other_cid, "{t}");
    let shown = b.run(&["task", "show", &id]);
    assert!(String::from_utf8_lossy(&shown.stdout).contains(&format!("input artifacts: {cid}")));
    let unknown = format!("sha256:{}", "0".repeat(64));
    for (given, says) in [
        (unknown.as_str(), unknown.as_str()),
        ("no-such-file", "neither a content id"),
    ] {
        let out = b.run(&[
            "task",
            "offer",
            "--type",
            "freeform",
            "--brief",
            "x",
            "--input-artifact",
            given,
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert!(
            err.contains("--input-artifact") && err.contains(says),
            "{err}"
        );
    }
    let read =
        |c: &str| json!({"tool": "read_input", "args": {"cid": c, "offset": null, "length": null}});
    let script = b.script(json!([
        {"declare": {"deliveries": []}},
        read(&cid),
        read(&other_cid),
        read("/etc/passwd"),
        {"submit": {"summary": "done"}},
        {"final": "ok"}
    ]));
    b.drain("w1", &script);
    let v = b.show(&id);
    assert_eq!(state(&v), "completed", "{v}");
    let run = v["attempts"][0]["run_id"].as_str().unwrap();
    let j = b.json(&["journal", run]);
    let reads: Vec<&Value> = j
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "tool_called" && e["body"]["name"] == "read_input")
        .map(|e| &e["body"])
        .collect();
    assert_eq!(reads.len(), 3, "{j}");
    assert_eq!(reads[0]["ok"], true);
    assert!(reads[0]["result"]
        .as_str()
        .unwrap()
        .contains("revenue up 4%"));
    assert_eq!(reads[1]["ok"], false, "another task's artifact is not read");
    assert_eq!(reads[2]["ok"], false, "a path is not read");
    // A continuation keeps what its parent was given.
    let c = b.json(&["task", "continue", &id, "--brief", "again"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(b.show(&c)["task"]["spec"]["input_artifacts"], json!([cid]));
    let m = b.json(&["measures", "--by", "tag"]);
    let kb = m["cohorts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cohort"] == "kb")
        .unwrap_or_else(|| panic!("{m}"));
    assert_eq!(kb["counts"]["input_reads"], 1, "{kb}");
    assert_eq!(kb["counts"]["context_reads"], 0, "{kb}");
    assert_eq!(kb["rates"]["input_reads_per_accepted_output"], 1.0, "{kb}");
    let text = b.run(&["measures", "--by", "tag"]);
    assert!(String::from_utf8_lossy(&text.stdout)
        .contains("input artifacts 1 (1.00 per accepted output)"));
}

/// A runtime profile's default context and its placement are policy (§13.1.2): part of the
/// snapshot and its fingerprint; `system` puts the exact text in the system message, `file`
/// only lists it for `read_context`, whose reads are counted; the run's spec names which
/// content ids went where.
fn profile_context_is_placed_by_policy(pg: bool) {
    let b = Board::new(pg);
    let guide = b.tmp.path().join("guide.md");
    std::fs::write(&guide, "House style: name every source.\n").unwrap();
    let cid = b.json(&["artifact", "put", "--pin", guide.to_str().unwrap()])["cid"]
        .as_str()
        .unwrap()
        .to_string();
    let profiles = b.dir.join("profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    for (name, placement) in [("sys", "system"), ("files", "file")] {
        let p = json!({"context": [cid], "context_placement": placement});
        std::fs::write(profiles.join(format!("{name}.json")), p.to_string()).unwrap();
    }
    std::fs::write(
        profiles.join("bad.json"),
        json!({"context_placement": "clipboard"}).to_string(),
    )
    .unwrap();
    let out = b.run(&["worker", "--name", "w0", "--profile", "bad", "--drain"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("context_placement"));
    // `system`: the exact text is in the system message of the conversation the host keeps.
    let a = b.offer(&["--profile", "sys"]);
    b.drain_with("w1", &b.script(good_script()), &["--profile", "sys"]);
    let va = b.show(&a);
    assert_eq!(state(&va), "completed", "{va}");
    assert_eq!(
        va["attempts"][0]["detail"]["policy"]["context"][0],
        cid.as_str()
    );
    let c = b.json(&["task", "continue", &a, "--brief", "again"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let conv = b.show(&c)["task"]["spec"]["input"]["continuation"]["conversation"]
        .as_str()
        .unwrap()
        .to_string();
    let msgs: Value = serde_json::from_slice(&b.run(&["artifact", "get", &conv]).stdout).unwrap();
    let system = msgs[0].to_string();
    assert!(
        system.contains(&format!("Pinned context {cid}")) && system.contains("name every source"),
        "{msgs}"
    );
    assert!(!msgs[1].to_string().contains("name every source"), "{msgs}");
    // `file`: listed in the first message, read through `read_context`, and counted.
    let f = b.offer(&["--profile", "files"]);
    let script = b.script(json!([
        {"declare": {"deliveries": []}},
        {"tool": "read_context", "args": {"cid": cid, "offset": 0, "length": 11}},
        {"submit": {"summary": "done"}},
        {"final": "ok"}
    ]));
    b.drain_with("w2", &script, &["--profile", "files"]);
    let vf = b.show(&f);
    assert_eq!(state(&vf), "completed", "{vf}");
    assert_ne!(
        vf["attempts"][0]["policy_fingerprint"], va["attempts"][0]["policy_fingerprint"],
        "the placement is part of the fingerprint"
    );
    let run = vf["attempts"][0]["run_id"].as_str().unwrap();
    let j = b.json(&["journal", run]).to_string();
    assert!(j.contains("House style"), "{j}");
    assert!(
        !j.contains("name every source"),
        "only 11 bytes were read: {j}"
    );
    let m = b.json(&["measures", "--by", "profile"]);
    let files = m["cohorts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["cohort"] == "files")
        .unwrap_or_else(|| panic!("{m}"));
    assert_eq!(files["counts"]["context_reads"], 1, "{files}");
}

/// Behind vouch's back (the other process of a race, played by the store): `sql` on the
/// board's store.
fn raw_sql(b: &Board, sql: &str) {
    match &b.pg_schema {
        Some(schema) => {
            let mut c = postgres::Client::connect(&pg_url(), postgres::NoTls).unwrap();
            c.batch_execute(&format!("SET search_path TO \"{schema}\"; {sql}"))
                .unwrap();
        }
        None => {
            let c = rusqlite::Connection::open(b.dir.join("vouch.db")).unwrap();
            c.execute_batch(sql).unwrap();
        }
    }
}

/// The soak's second race (docs/reliability.md): a worker claims the resumption of a decided
/// run while another live process still holds that run. It gives the claim back — an abort,
/// which does not count against the task's one attempt — instead of failing the attempt (the
/// task failed here before). The run its ended attempt leaves behind waits for nothing: once
/// no process holds it, the sweep ends it with its receipt ("the attempt ended"), once, and
/// nothing is sent.
fn a_resumption_refused_its_run_gives_the_claim_back(pg: bool) {
    let b = Board::new(pg);
    let (url, got) = receiver();
    let id = b.offer(&[]);
    let script = b.script(json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": url}}]}},
        {"deliver": "d1", "payload": {"text": "hello"}},
        {"submit": {"summary": "sent"}},
        {"final": "done"}
    ]));
    b.drain("w1", &script);
    let v = b.show(&id);
    assert_eq!(attempt_states(&v), vec!["suspended"], "{v}");
    let run = v["attempts"][0]["run_id"].as_str().unwrap().to_string();
    let hash = b.card_hash(&run);
    let d = b.json(&["approve", &run, "d1", "--hash", &hash]);
    assert_eq!(d["task_state"], "queued", "{d}");
    // Another live process (of another host, judged by its lease) holds the decided run.
    raw_sql(
        &b,
        &format!("UPDATE runs SET owner = 'elsewhere:1:1', lease_until_ms = 9000000000000000 WHERE id = '{run}'"),
    );
    let out = b.drain("w2", &script);
    let v = b.show(&id);
    assert_eq!(
        attempt_states(&v),
        vec!["aborted", "suspended"],
        "the claim went back; the task's one attempt is not spent: {v}\n{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(state(&v), "running", "{v}");
    assert!(got.lock().unwrap().is_empty(), "nothing sent");
    // While it is held, the sweep leaves the run to its holder.
    let s = b.json(&["task", "sweep"]);
    assert_eq!(s["runs_ended"], json!([]), "{s}");
    // The holder lets go: the run of the aborted attempt waits for nothing and is ended once.
    raw_sql(
        &b,
        &format!("UPDATE runs SET owner = NULL, lease_until_ms = NULL WHERE id = '{run}'"),
    );
    let s = b.json(&["task", "sweep"]);
    assert_eq!(s["runs_ended"], json!([run.as_str()]), "{s}");
    let s = b.json(&["task", "sweep"]);
    assert_eq!(s["runs_ended"], json!([]), "once: {s}");
    let r = b.json(&["receipt", &run]);
    assert_eq!(r["state"], "ended", "{r}");
    let text = r["receipt"].as_str().unwrap();
    assert!(text.contains("the attempt ended"), "{text}");
    // Nobody asked for this end: the item says why it was not done, never "at your request".
    assert!(text.contains("Not done: the attempt ended"), "{text}");
    assert!(!text.contains("at your request"), "{text}");
    // The new attempt's run still waits for its own approval; nothing was sent twice.
    let run2 = v["attempts"][1]["run_id"].as_str().unwrap().to_string();
    assert_ne!(run2, run);
    let hash2 = b.card_hash(&run2);
    b.json(&["approve", &run2, "d1", "--hash", &hash2]);
    b.drain("w3", &script);
    let v = b.show(&id);
    assert_eq!(state(&v), "completed", "{v}");
    assert_eq!(got.lock().unwrap().len(), 1, "sent once");
}

/// Issue 38 #7: a host killed while a person's approval of a task run's card was in flight
/// (the card's decision committed, the task not yet queued as a resumption, the run still
/// held by the dead host): start-up recovery carries the approval out and ends the run. Its
/// suspended attempt must not wait for nothing — the sweep settles it as the run's end says:
/// a result submitted before the suspension completes the task; none fails the attempt, and
/// the task is retried while attempts remain. Each send went out once.
fn a_suspended_attempt_whose_run_recovery_ended_moves_on(pg: bool) {
    let b = Board::new(pg);
    let (url, got) = receiver();
    let declare = json!({"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": url}}]}});
    let submitted = b.offer(&[]);
    b.drain(
        "w1",
        &b.script(json!([
            declare,
            {"submit": {"summary": "numbers mailed"}},
            {"deliver": "d1", "payload": {"text": "week 49"}},
            {"final": "done"}
        ])),
    );
    let unsubmitted = b.offer(&["--max-attempts", "2"]);
    b.drain(
        "w1",
        &b.script(
            json!([declare, {"deliver": "d1", "payload": {"text": "week 50"}}, {"final": "done"}]),
        ),
    );
    let mut runs = vec![];
    for id in [&submitted, &unsubmitted] {
        let v = b.show(id);
        assert_eq!(attempt_states(&v), vec!["suspended"], "{v}");
        let run = v["attempts"][0]["run_id"].as_str().unwrap().to_string();
        // The approval's first write landed, then its host died holding the run.
        raw_sql(
            &b,
            &format!(
                "UPDATE cards SET state = 'approved' WHERE run_id = '{run}'; \
                 UPDATE runs SET owner = 'elsewhere:1:1', lease_until_ms = 1 WHERE id = '{run}'"
            ),
        );
        runs.push(run);
    }
    // Any command's start-up recovery ends both runs (`ended_by: boot`), each send once.
    b.run(&["runs"]);
    for run in &runs {
        assert_eq!(b.json(&["receipt", run])["state"], "ended");
    }
    assert_eq!(got.lock().unwrap().len(), 2, "each approved send once");
    let s = b.json(&["task", "sweep"]);
    assert_eq!(
        s["settled"],
        json!([
            [submitted.as_str(), 1, runs[0].as_str()],
            [unsubmitted.as_str(), 1, runs[1].as_str()]
        ]),
        "{s}"
    );
    let v = b.show(&submitted);
    assert_eq!(state(&v), "completed", "{v}");
    assert_eq!(attempt_states(&v), vec!["completed"]);
    assert_eq!(v["result"], json!({"summary": "numbers mailed"}));
    let v = b.show(&unsubmitted);
    assert_eq!(state(&v), "queued", "retried: {v}");
    assert_eq!(attempt_states(&v), vec!["failed"]);
    let why = v["attempts"][0]["end_reason"].as_str().unwrap_or_default();
    assert!(why.contains("without an accepted submission"), "{v}");
    // Once: a second sweep settles nothing.
    assert_eq!(b.json(&["task", "sweep"])["settled"], json!([]));
    assert_eq!(got.lock().unwrap().len(), 2, "nothing sent again");
}

macro_rules! both {
    ($($name:ident),*) => {
        mod sqlite { $( #[test] fn $name() { super::$name(false) } )* }
        mod postgresql { $( #[test] fn $name() { super::$name(true) } )* }
    };
}

both!(
    eight_workers_race,
    pinned_context_reaches_the_model,
    input_artifacts_are_bound_read_and_counted,
    profile_context_is_placed_by_policy,
    a_thread_is_offered_listed_measured_and_shown,
    sigkill_mid_attempt_lease_lapses,
    malformed_result_repaired_in_session,
    bad_input_is_exit_2,
    judge_excludes_the_producer_and_criteria_need_self_assessment,
    sigterm_aborts_retryably,
    cancel_seen_at_heartbeat_or_on_the_board,
    approval_suspends_and_another_worker_finishes,
    continuation_goes_on_from_the_parents_conversation,
    runtime_profile_snapshot_is_enforced_not_a_later_edit,
    http_approval_of_a_task_run_queues_it_for_a_worker,
    result_submitted_before_suspension_is_kept_for_the_resumption,
    cancel_closes_every_open_card_and_question,
    a_cancel_stops_the_work,
    a_task_cancel_ends_its_suspended_run,
    a_decision_before_the_attempt_reports_its_wait_is_refused,
    a_resumption_refused_its_run_gives_the_claim_back,
    a_suspended_attempt_whose_run_recovery_ended_moves_on
);
