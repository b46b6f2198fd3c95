#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 21, defects 1 and 2: hostile ids (`..`, a path climbing out to a victim, an absolute
//! path, NUL, 10 KB, a bidirectional override) fed through a script, the OpenAI loop and MCP
//! over stdio: every file the host wrote is beneath its home, nothing outside changed, and the
//! model, the agent or the person gets a clear refusal. And every input is bounded before it
//! is read (`/dev/zero` as a script, routine, input or payload is exit 2 naming the limit).

mod support;

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

/// The refusal's words for an id outside §3.2.1's alphabet.
const REFUSAL: &str = "A–Z a–z 0–9 _ -";
/// The refusal's words for NUL in any string (§17.1), which comes before the id's alphabet.
const NUL_REFUSAL: &str = "NUL (U+0000)";

/// Refused as an id outside the alphabet, or as NUL wherever it appears.
fn refused(text: &str) -> bool {
    text.contains(REFUSAL) || text.contains(NUL_REFUSAL)
}

fn hostile_ids(victim: &Path) -> Vec<String> {
    vec![
        "..".into(),
        "../../../victim/README".into(),
        victim.join("README").display().to_string(),
        "a\u{0}b".into(),
        "x".repeat(10 * 1024),
        "\u{202e}dm.exe".into(),
    ]
}

/// A home on one backend with a victim folder beside it; the victim's README must never change.
struct Home {
    tmp: tempfile::TempDir,
    dir: PathBuf,
    /// `VOUCH_DATABASE_URL` and a schema of its own on PostgreSQL; empty on SQLite.
    env: Vec<(String, String)>,
    pg: Option<(String, String)>,
}

impl Home {
    fn new(pg: bool) -> Home {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("home");
        let pg = pg.then(|| {
            let url = std::env::var("VOUCH_PG_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos();
            let schema = format!(
                "vouch_hostile_{}_{}",
                std::process::id(),
                nanos % 1_000_000_000
            );
            (url, schema)
        });
        let env = pg
            .iter()
            .flat_map(|(u, s)| {
                [
                    ("VOUCH_DATABASE_URL".to_string(), u.clone()),
                    ("VOUCH_DATABASE_SCHEMA".to_string(), s.clone()),
                ]
            })
            .collect();
        let h = Home { tmp, dir, env, pg };
        let out = h.vouch(&["init"], &[]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(
            h.dir.join("vouch.db").exists(),
            h.pg.is_none(),
            "the backend chosen"
        );
        h
    }
    fn command(&self) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vouch"));
        c.arg("--home")
            .arg(&self.dir)
            .env_remove("VOUCH_CRASH_AFTER")
            .env_remove("VOUCH_DATABASE_URL")
            .env_remove("DBUS_SESSION_BUS_ADDRESS");
        for (k, v) in &self.env {
            c.env(k, v);
        }
        c
    }
    fn vouch(&self, args: &[&str], env: &[(&str, &str)]) -> std::process::Output {
        let mut c = self.command();
        c.args(args);
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    }
    fn json(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let out = self.vouch(&a, &[]);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
    }
    fn script(&self, turns: &Value) -> String {
        let p = self.tmp.path().join("script.json");
        std::fs::write(&p, turns.to_string()).unwrap();
        p.to_string_lossy().into_owned()
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        if let Some((url, schema)) = &self.pg {
            if let Ok(mut c) = postgres::Client::connect(url, postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
            }
        }
    }
}

fn setup(pg: bool) -> (Home, PathBuf) {
    let h = Home::new(pg);
    let victim = h.tmp.path().join("victim");
    std::fs::create_dir_all(&victim).unwrap();
    std::fs::write(victim.join("README"), "original\n").unwrap();
    (h, victim)
}

/// Every file beneath `dir` with its bytes (symlinks listed, not followed).
fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                stack.push(e.path());
            } else {
                out.insert(e.path(), std::fs::read(e.path()).unwrap_or_default());
            }
        }
    }
    out
}

/// Nothing outside the home changed; every file the host wrote under its folders has a name
/// the host chose (a plain id, or `h.` and a hash).
fn check_world(h: &Home, before_outside: &BTreeMap<PathBuf, Vec<u8>>) {
    let outside: BTreeMap<_, _> = files(h.tmp.path())
        .into_iter()
        .filter(|(p, _)| !p.starts_with(&h.dir) && !p.ends_with("script.json"))
        .collect();
    assert_eq!(
        &outside, before_outside,
        "something outside the home changed"
    );
    for sub in ["surfaces", "drafts", "artifacts", "files"] {
        for p in files(&h.dir.join(sub)).keys() {
            let rel = p.strip_prefix(h.dir.join(sub)).unwrap();
            for c in rel.components() {
                let name = c.as_os_str().to_str().unwrap();
                assert!(
                    name.len() <= 72
                        && name
                            .bytes()
                            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b)),
                    "a file name the host did not choose: {p:?}"
                );
            }
        }
    }
}

fn outside_now(h: &Home) -> BTreeMap<PathBuf, Vec<u8>> {
    files(h.tmp.path())
        .into_iter()
        .filter(|(p, _)| !p.starts_with(&h.dir) && !p.ends_with("script.json"))
        .collect()
}

fn journal_text(h: &Home) -> String {
    let runs = h.json(&["runs", "list"]);
    let mut all = String::new();
    for r in runs.as_array().unwrap() {
        let j = h.json(&["journal", r["id"].as_str().unwrap()]);
        all.push_str(&j.to_string());
    }
    all
}

fn model_chosen_delivery_id_never_becomes_a_path_through_a_script(pg: bool) {
    let (h, victim) = setup(pg);
    let before = outside_now(&h);
    for (i, id) in hostile_ids(&victim).iter().enumerate() {
        // A script declaring a hostile id is refused whole: exit 2, no run.
        let script = h.script(&json!([
            {"declare": {"deliveries": [
                {"id": id, "verb": "write", "destination": {"kind": "surface"}}]}},
            {"deliver": id, "payload": {"text": "pwned\n"}},
            {"final": "done"}
        ]));
        let out = h.vouch(&["run", &format!("hostile {i}"), "--script", &script], &[]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{i}: {err}");
        assert!(refused(&err), "{i}: {err}");
        assert_eq!(h.json(&["runs", "list"]), json!([]));
    }
    for (i, id) in hostile_ids(&victim).iter().enumerate() {
        // A hostile id as the delivery or the artifact name of a declared run.
        let script = h.script(&json!([
            {"declare": {"deliveries": [
                {"id": "d1", "verb": "write", "destination": {"kind": "surface"}}]}},
            {"deliver": id, "payload": {"text": "pwned\n"}},
            {"tool": "write_artifact", "args": {"name": id, "text": "pwned\n"}},
            {"deliver": "d1", "payload": {"text": "fine\n"}},
            {"final": "done"}
        ]));
        let out = h.vouch(&["run", &format!("hostile {i}"), "--script", &script], &[]);
        if id.contains('\0') {
            // A script holding NUL anywhere is refused whole (§17.1).
            assert_eq!(out.status.code(), Some(2));
            continue;
        }
        assert!(
            matches!(out.status.code(), Some(0..=1)),
            "{i}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    check_world(&h, &before);
    assert_eq!(
        std::fs::read_to_string(victim.join("README")).unwrap(),
        "original\n"
    );
    let journal = journal_text(&h);
    let n = hostile_ids(&victim)
        .iter()
        .filter(|id| !id.contains('\0'))
        .count();
    assert_eq!(
        journal.matches("A–Z a–z 0–9 . _ -").count(),
        n,
        "one artifact refusal per run"
    );
    assert_eq!(
        journal.matches("not covered by any manifest item").count(),
        n,
        "one undeclared delivery per run"
    );
    // Every run saved its own surface record, named by the host.
    assert_eq!(files(&h.dir.join("surfaces")).len(), n);
}

/// Serves canned chat completions in order and records every request body.
fn stand_in(responses: Vec<Value>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(vec![]));
    let s2 = seen.clone();
    std::thread::spawn(move || {
        let mut queue = responses.into_iter();
        for mut s in listener.incoming().flatten() {
            let text = support::read_request(&mut s);
            let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
            s2.lock()
                .unwrap()
                .push(serde_json::from_str(body).unwrap_or(Value::Null));
            let resp = queue
                .next()
                .unwrap_or(
                    json!({"choices": [{"message": {"role": "assistant", "content": "done"}}]}),
                )
                .to_string();
            let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{resp}", resp.len());
        }
    });
    (url, seen)
}

fn tool_call(name: &str, args: &Value) -> Value {
    json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function", "function": {"name": name, "arguments": args.to_string()}}]}}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
}

fn model_chosen_delivery_id_never_becomes_a_path_through_the_openai_loop(pg: bool) {
    let (h, victim) = setup(pg);
    let before = outside_now(&h);
    for (i, id) in hostile_ids(&victim).iter().enumerate() {
        let manifest = json!({"deliveries": [
            {"id": id, "verb": "write", "destination": {"kind": "surface"}}]});
        let (url, seen) = stand_in(vec![
            tool_call("declare", &manifest),
            tool_call(
                "write",
                &json!({"delivery": id, "payload": {"text": "pwned\n"}}),
            ),
        ]);
        let out = h.vouch(
            &["run", &format!("hostile model {i}")],
            &[("VOUCH_MODEL_URL", &url), ("VOUCH_MODEL", "stand-in")],
        );
        assert!(
            matches!(out.status.code(), Some(0..=2)),
            "{i}: {:?} {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        // The model was told, in a tool message, what an id must be.
        let reqs = seen.lock().unwrap().clone();
        let told = reqs.iter().any(|r| {
            r["messages"].as_array().is_some_and(|ms| {
                ms.iter()
                    .any(|m| m["role"] == "tool" && m["content"].as_str().is_some_and(refused))
            })
        });
        assert!(told, "{i}: {reqs:?}");
    }
    check_world(&h, &before);
    assert_eq!(
        std::fs::read_to_string(victim.join("README")).unwrap(),
        "original\n"
    );
}

/// One JSON-RPC exchange over `vouch mcp`'s stdio: initialize, then each call; the answers.
fn mcp_stdio(h: &Home, calls: &[Value]) -> Vec<Value> {
    let mut child = h
        .command()
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut send = |v: Value| writeln!(stdin, "{v}").unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "hostile", "version": "0"}}}),
    );
    let _init = lines.next().unwrap().unwrap();
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    let mut answers = vec![];
    for (n, c) in calls.iter().enumerate() {
        send(json!({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call", "params": c}));
        let line = lines.next().unwrap().unwrap();
        answers.push(serde_json::from_str::<Value>(&line).unwrap());
    }
    drop(stdin);
    let _ = child.wait();
    answers
}

fn model_chosen_delivery_id_never_becomes_a_path_through_mcp(pg: bool) {
    let (h, victim) = setup(pg);
    let before = outside_now(&h);
    let calls: Vec<Value> = hostile_ids(&victim)
        .iter()
        .map(|id| {
            json!({"name": "declare", "arguments": {"title": "hostile agent", "deliveries": [
                {"id": id, "verb": "write", "destination": {"kind": "surface"}}]}})
        })
        .collect();
    let answers = mcp_stdio(&h, &calls);
    for (a, id) in answers.iter().zip(hostile_ids(&victim)) {
        let text = a.to_string();
        assert!(
            a["result"]["isError"] == true && refused(&text),
            "{:.60}: {text:.600}",
            id
        );
    }
    // Refused before a run exists: the store holds none.
    assert_eq!(h.json(&["runs", "list"]), json!([]));
    check_world(&h, &before);
    assert_eq!(
        std::fs::read_to_string(victim.join("README")).unwrap(),
        "original\n"
    );
}

fn every_input_is_bounded_before_it_is_read(pg: bool) {
    let (h, _victim) = setup(pg);
    let zero = "/dev/zero";
    let cases: Vec<Vec<&str>> = vec![
        vec!["run", "endless", "--script", zero],
        vec![
            "schedule",
            "add",
            "endless",
            "--cron",
            "0 9 * * *",
            "--routine",
            zero,
        ],
        vec![
            "task", "offer", "--type", "freeform", "--brief", "b", "--input", zero,
        ],
    ];
    for args in cases {
        let out = h.vouch(&args, &[]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(zero) && err.contains("2097152") && err.contains("limit"),
            "{args:?}: {err}"
        );
    }
    // No run was left behind by any of them.
    assert_eq!(h.json(&["runs", "list"]), json!([]));
    // A pinned context file is read only up to the offer's context limit.
    let out = h.vouch(
        &[
            "task",
            "offer",
            "--type",
            "freeform",
            "--brief",
            "b",
            "--context",
            zero,
        ],
        &[],
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "--context: {err}");
    assert!(err.contains(zero) && err.contains("262144"), "{err}");
    assert_eq!(h.json(&["task", "list"]), json!([]));
    // A scenario folder holding a link to /dev/zero: the scenario runner and the oracle
    // refuse that file at the limit, naming it.
    let dir = h.tmp.path().join("scenarios");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(zero, dir.join("endless.json")).unwrap();
    let shown = dir.join("endless.json").display().to_string();
    for cmd in ["oracle", "scenario"] {
        let mut args = vec![cmd];
        if cmd == "scenario" {
            args.push("run");
        }
        args.push(dir.to_str().unwrap());
        // These make their own home (--home is refused for them).
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_vouch"))
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{cmd}: {err}");
        assert!(
            err.contains(&shown) && err.contains("1048576"),
            "{cmd}: {err}"
        );
    }
}

fn an_empty_title_is_refused_before_a_run_exists(pg: bool) {
    let (h, _victim) = setup(pg);
    let script = h.script(&json!([{"final": "done"}]));
    let out = h.vouch(&["run", "  ", "--script", &script], &[]);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("title"), "{err}");
    assert_eq!(h.json(&["runs", "list"]), json!([]));
}

#[test]
fn model_chosen_delivery_id_never_becomes_a_path_through_a_script_on_sqlite() {
    model_chosen_delivery_id_never_becomes_a_path_through_a_script(false);
}

#[test]
fn model_chosen_delivery_id_never_becomes_a_path_through_a_script_on_postgresql() {
    model_chosen_delivery_id_never_becomes_a_path_through_a_script(true);
}

#[test]
fn model_chosen_delivery_id_never_becomes_a_path_through_the_openai_loop_on_sqlite() {
    model_chosen_delivery_id_never_becomes_a_path_through_the_openai_loop(false);
}

#[test]
fn model_chosen_delivery_id_never_becomes_a_path_through_the_openai_loop_on_postgresql() {
    model_chosen_delivery_id_never_becomes_a_path_through_the_openai_loop(true);
}

#[test]
fn model_chosen_delivery_id_never_becomes_a_path_through_mcp_on_sqlite() {
    model_chosen_delivery_id_never_becomes_a_path_through_mcp(false);
}

#[test]
fn model_chosen_delivery_id_never_becomes_a_path_through_mcp_on_postgresql() {
    model_chosen_delivery_id_never_becomes_a_path_through_mcp(true);
}

#[test]
fn every_input_is_bounded_before_it_is_read_on_sqlite() {
    every_input_is_bounded_before_it_is_read(false);
}

#[test]
fn every_input_is_bounded_before_it_is_read_on_postgresql() {
    every_input_is_bounded_before_it_is_read(true);
}

#[test]
fn an_empty_title_is_refused_before_a_run_exists_on_sqlite() {
    an_empty_title_is_refused_before_a_run_exists(false);
}

#[test]
fn an_empty_title_is_refused_before_a_run_exists_on_postgresql() {
    an_empty_title_is_refused_before_a_run_exists(true);
}

/// A model's turn larger than `TURN_BYTES_MAX` (a 5 MiB payload, past one journal event) ends the run as a model error,
/// recorded and readable, instead of leaving a run that cannot journal and reads "interrupted";
/// an agent's call that large over MCP is refused before a run exists.
fn a_payload_over_the_limit_leaves_no_interrupted_run(pg: bool) {
    let (h, _victim) = setup(pg);
    let manifest = json!({"deliveries": [
        {"id": "d1", "verb": "write", "destination": {"kind": "surface"}}]});
    let huge = "x".repeat(5 << 20);
    let (url, _seen) = stand_in(vec![
        tool_call("declare", &manifest),
        tool_call(
            "write",
            &json!({"delivery": "d1", "payload": {"text": huge}}),
        ),
    ]);
    let out = h.vouch(
        &["run", "a huge payload"],
        &[("VOUCH_MODEL_URL", &url), ("VOUCH_MODEL", "stand-in")],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let runs = h.json(&["runs", "list"]);
    assert_eq!(runs.as_array().unwrap().len(), 1, "{runs}");
    assert_eq!(runs[0]["state"], "ended", "{runs}");
    assert_ne!(runs[0]["ended_by"], "boot", "{runs}");
    let journal = journal_text(&h);
    assert!(
        journal.contains("more than the limit of 2097152"),
        "{journal:.2000}"
    );
    // Over MCP: a 3 MiB call is answered with the limit; an 8 MiB line ends the session
    // as it is read, never held whole.
    let big = "x".repeat(3 << 20);
    let call = json!({"name": "declare", "arguments": {"title": "huge", "deliveries": [
        {"id": "d1", "verb": "write", "destination": {"kind": "surface"}, "object": big}]}});
    let answers = mcp_stdio(&h, &[call]);
    let text = answers[0].to_string();
    assert!(text.contains("2097152"), "{text:.600}");
    let mut child = h
        .command()
        .arg("mcp")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let writer = std::thread::spawn(move || {
        let chunk = vec![b'x'; 1 << 20];
        for _ in 0..8 {
            if stdin.write_all(&chunk).is_err() {
                return false;
            }
        }
        // Still connected after 8 MiB: keep the pipe open so only the limit can end it.
        std::thread::sleep(std::time::Duration::from_secs(20));
        true
    });
    let started = std::time::Instant::now();
    let ended = loop {
        if child.try_wait().unwrap().is_some() {
            break true;
        }
        if started.elapsed() > std::time::Duration::from_secs(15) {
            let _ = child.kill();
            break false;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    assert!(ended, "an 8 MiB line did not end the MCP session");
    assert!(
        !writer.join().unwrap(),
        "the session kept reading past the limit"
    );
    assert_eq!(h.json(&["runs", "list"]).as_array().unwrap().len(), 1);
}

#[test]
fn a_payload_over_the_limit_leaves_no_interrupted_run_on_sqlite() {
    a_payload_over_the_limit_leaves_no_interrupted_run(false);
}

#[test]
fn a_payload_over_the_limit_leaves_no_interrupted_run_on_postgresql() {
    a_payload_over_the_limit_leaves_no_interrupted_run(true);
}

/// §17.1: NUL in free text (a title, a delivery's words, a final answer, a routine) is refused
/// alike on both backends before anything is written: PostgreSQL cannot hold it, SQLite could,
/// and the same words must get the same answer. A model is told and can repair.
fn nul_in_a_title_is_refused_alike(pg: bool) {
    let (h, _victim) = setup(pg);
    let nul = "a\u{0}b";
    // An agent over MCP: a title, or a delivery's words, holding NUL.
    let answers = mcp_stdio(
        &h,
        &[
            json!({"name": "declare", "arguments": {"title": nul, "deliveries": [
                {"id": "d1", "verb": "write", "destination": {"kind": "surface"}}]}}),
            json!({"name": "declare", "arguments": {"title": "fine", "deliveries": [
                {"id": "d1", "verb": "write", "destination": {"kind": "surface"}, "object": nul}]}}),
        ],
    );
    for (a, field) in answers.iter().zip(["title", "deliveries[0].object"]) {
        let text = a.to_string();
        assert!(
            a["result"]["isError"] == true && text.contains("NUL") && text.contains(field),
            "{field}: {text:.600}"
        );
    }
    // A script or a routine holding NUL anywhere: exit 2 naming the field.
    let script = h.script(&json!([{"final": nul}]));
    let routine = h.tmp.path().join("routine.json");
    std::fs::write(&routine, json!({"prompt": nul}).to_string()).unwrap();
    let routine = routine.to_string_lossy().into_owned();
    for args in [
        vec!["run", "nul", "--script", &script],
        vec![
            "schedule",
            "add",
            "nul",
            "--cron",
            "0 9 * * *",
            "--routine",
            &routine,
        ],
    ] {
        let out = h.vouch(&args, &[]);
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains("NUL"), "{args:?}: {err}");
    }
    assert_eq!(h.json(&["runs", "list"]), json!([]));
    assert_eq!(h.json(&["schedule", "list"]), json!([]));
    // A model: its call is refused as repairable, and the run goes on to a true end.
    let manifest = json!({"deliveries": [
        {"id": "d1", "verb": "write", "destination": {"kind": "surface"}, "object": nul}]});
    let (url, seen) = stand_in(vec![tool_call("declare", &manifest)]);
    let out = h.vouch(
        &["run", "a model says NUL"],
        &[("VOUCH_MODEL_URL", &url), ("VOUCH_MODEL", "stand-in")],
    );
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(matches!(out.status.code(), Some(0..=1)), "{err}");
    let runs = h.json(&["runs", "list"]);
    assert_eq!(runs[0]["state"], "ended", "{runs}");
    let reqs = seen.lock().unwrap().clone();
    let told = reqs.iter().any(|r| {
        r["messages"].as_array().is_some_and(|ms| {
            ms.iter().any(|m| {
                m["role"] == "tool"
                    && m["content"]
                        .as_str()
                        .is_some_and(|c| c.contains("NUL") && c.contains("deliveries[0].object"))
            })
        })
    });
    assert!(told, "{reqs:?}");
}

#[test]
fn nul_in_a_title_is_refused_alike_on_sqlite() {
    nul_in_a_title_is_refused_alike(false);
}

#[test]
fn nul_in_a_title_is_refused_alike_on_postgresql() {
    nul_in_a_title_is_refused_alike(true);
}

/// A real `vouch serve --http` on loopback; killed when dropped.
struct Served(std::process::Child);
impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The same exchange as [`mcp_stdio`] over `/mcp` of a real `vouch serve --http` with a token.
fn mcp_http(h: &Home, calls: &[Value]) -> Vec<Value> {
    let token = h.json(&["token", "new", "mcp"])["token"]
        .as_str()
        .unwrap()
        .to_string();
    let mut child = h
        .command()
        .args(["--json", "serve", "--http", "127.0.0.1:0"])
        .env_remove("VOUCH_FOLDER_ROOT")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _server = Served(child);
    let mut line = String::new();
    BufReader::new(stdout).read_line(&mut line).unwrap();
    let listening: Value = serde_json::from_str(&line).unwrap();
    let url = format!("http://{}/mcp", listening["listening"].as_str().unwrap());
    let mut session: Option<String> = None;
    let mut post = |v: Value| -> Option<Value> {
        let mut req = ureq::post(&url)
            .set("Content-Type", "application/json")
            .set("Accept", "application/json, text/event-stream")
            .set("Authorization", &format!("Bearer {token}"));
        if let Some(s) = &session {
            req = req.set("Mcp-Session-Id", s);
        }
        let resp = req.send_string(&v.to_string()).unwrap();
        if let Some(s) = resp.header("mcp-session-id") {
            session = Some(s.to_string());
        }
        let body = resp.into_string().unwrap();
        let body = body
            .lines()
            .find_map(|l| l.strip_prefix("data:"))
            .unwrap_or(&body)
            .trim()
            .to_string();
        serde_json::from_str(&body).ok()
    };
    post(
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "hostile", "version": "0"}}}),
    )
    .expect("initialize answered");
    post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    calls
        .iter()
        .enumerate()
        .map(|(n, c)| {
            post(json!({"jsonrpc": "2.0", "id": n + 1, "method": "tools/call", "params": c}))
                .expect("a JSON-RPC answer")
        })
        .collect()
}

/// Issue 21 defect 1 over `/mcp` of `vouch serve --http`: the same hostile ids, the same
/// world check as over stdio — every id refused before a run exists, nothing outside the home
/// changed, every file beneath it named by the host.
fn model_chosen_delivery_id_never_becomes_a_path_through_mcp_over_http(pg: bool) {
    let (h, victim) = setup(pg);
    let before = outside_now(&h);
    let mut calls: Vec<Value> = hostile_ids(&victim)
        .iter()
        .map(|id| {
            json!({"name": "declare", "arguments": {"title": "hostile agent", "deliveries": [
                {"id": id, "verb": "write", "destination": {"kind": "surface"}}]}})
        })
        .collect();
    // And a hostile id where an id looks a run up.
    calls.extend(
        hostile_ids(&victim)
            .iter()
            .map(|id| json!({"name": "run_status", "arguments": {"run": id}})),
    );
    let answers = mcp_http(&h, &calls);
    let n = hostile_ids(&victim).len();
    for (a, id) in answers[..n].iter().zip(hostile_ids(&victim)) {
        let text = a.to_string();
        assert!(
            a["result"]["isError"] == true && refused(&text),
            "{:.60}: {text:.600}",
            id
        );
    }
    for (a, id) in answers[n..].iter().zip(hostile_ids(&victim)) {
        let text = a.to_string();
        assert!(
            a["result"]["isError"] == true || a["error"].is_object(),
            "{:.60}: {text:.600}",
            id
        );
    }
    assert_eq!(h.json(&["runs", "list"]), json!([]));
    check_world(&h, &before);
    assert_eq!(
        std::fs::read_to_string(victim.join("README")).unwrap(),
        "original\n"
    );
}

#[test]
fn model_chosen_delivery_id_never_becomes_a_path_through_mcp_over_http_on_sqlite() {
    model_chosen_delivery_id_never_becomes_a_path_through_mcp_over_http(false);
}

#[test]
fn model_chosen_delivery_id_never_becomes_a_path_through_mcp_over_http_on_postgresql() {
    model_chosen_delivery_id_never_becomes_a_path_through_mcp_over_http(true);
}
