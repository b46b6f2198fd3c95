#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Remote attempts are vouch runs (§13.2), through real processes on both backends: a host
//! (`vouch serve --http`), a worker home elsewhere (`vouch worker --server`) whose model runs
//! locally while every tool call goes to the attempt's run on the host, and raw HTTP workers
//! signing their own claims and calls. Each test checks the host's stored world (task and
//! attempt rows, runs, cards, receipts, what the webhook received), never timing.

mod support;

use serde_json::{json, Value};
use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

fn pg_url() -> String {
    std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// A home, on SQLite or in a PostgreSQL schema of its own.
struct Home {
    tmp: tempfile::TempDir,
    dir: PathBuf,
    schema: Option<String>,
}

impl Home {
    fn new(pg: bool) -> Home {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("home");
        let schema = pg.then(|| {
            format!(
                "vouch_test_remote_{}_{}",
                std::process::id(),
                now_ms() % 1_000_000_000
            )
        });
        let h = Home { tmp, dir, schema };
        let out = h.run(&["init"]);
        assert!(out.status.success(), "init: {}", err(&out));
        h
    }

    fn cmd(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vouch"));
        c.arg("--home")
            .arg(&self.dir)
            .args(args)
            .env_remove("VOUCH_CRASH_AFTER")
            .env_remove("VOUCH_MODEL_URL")
            .env_remove("VOUCH_DATABASE_URL")
            .env_remove("VOUCH_WORKER_TOKEN")
            .env_remove("DBUS_SESSION_BUS_ADDRESS");
        if let Some(schema) = &self.schema {
            c.env("VOUCH_DATABASE_URL", pg_url())
                .env("VOUCH_DATABASE_SCHEMA", schema);
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
        assert!(out.status.success(), "{args:?}: {}", err(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn token(&self, name: &str, scope: &str, identity: Option<&str>) -> String {
        let mut a = vec!["token", "new", name, "--scope", scope];
        if let Some(i) = identity {
            a.extend(["--identity", i]);
        }
        self.json(&a)["token"].as_str().unwrap().to_string()
    }

    fn offer(&self, brief: &str) -> String {
        self.json(&["task", "offer", "--type", "freeform", "--brief", brief])["id"]
            .as_str()
            .unwrap()
            .to_string()
    }

    fn show(&self, id: &str) -> Value {
        self.json(&["task", "show", id])
    }

    fn script(&self, turns: Value) -> String {
        let p = self.tmp.path().join(format!("script-{}.json", now_ms()));
        std::fs::write(&p, turns.to_string()).unwrap();
        p.to_str().unwrap().to_string()
    }

    /// `vouch serve --http` on a free port.
    fn serve(&self) -> Server {
        let mut child = self
            .cmd(&["--json", "serve", "--http", "127.0.0.1:0"])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
        Server {
            child,
            url: format!("http://{}", v["listening"].as_str().unwrap()),
        }
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        if let Some(schema) = &self.schema {
            if let Ok(mut c) = postgres::Client::connect(&pg_url(), postgres::NoTls) {
                let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
            }
        }
    }
}

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn err(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A nonce never used before by this process (§13.6.3: 16–64 of `A–Z a–z 0–9 _ -`).
fn nonce() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("nonce-{}-{n:08}", std::process::id())
}

/// An HTTP request's status and JSON answer.
fn http(method: &str, url: &str, token: &str, body: Option<&Value>) -> (u16, Value) {
    let req = ureq::request(method, url).set("Authorization", &format!("Bearer {token}"));
    let r = match body {
        Some(b) => req.send_json(b.clone()),
        None => req.call(),
    };
    match r {
        Ok(r) => (r.status(), r.into_json().unwrap_or(Value::Null)),
        Err(ureq::Error::Status(code, r)) => (code, r.into_json().unwrap_or(Value::Null)),
        Err(e) => panic!("{method} {url}: {e}"),
    }
}

/// A host with worker `w1` (its key also in a second, worker-side home), a person token and
/// a worker token for `w1`, serving HTTP.
struct Setup {
    host: Home,
    worker: Home,
    server: Server,
    person: String,
    wtoken: String,
    w1: vouch_identity::Identity,
}

fn setup(pg: bool) -> Setup {
    let host = Home::new(pg);
    host.json(&["identity", "new", "w1"]);
    let person = host.token("person", "person", None);
    let wtoken = host.token("w1-token", "worker", Some("w1"));
    // The worker's machine holds the identity's key; its own home is SQLite.
    let worker = Home::new(false);
    let keys = |h: &Path| vouch_identity::KeyDir::in_home(h).path("w1");
    std::fs::create_dir_all(keys(&worker.dir).parent().unwrap()).unwrap();
    std::fs::copy(keys(&host.dir), keys(&worker.dir)).unwrap();
    let w1 = vouch_identity::KeyDir::in_home(&host.dir)
        .load("w1")
        .unwrap();
    let server = host.serve();
    Setup {
        host,
        worker,
        server,
        person,
        wtoken,
        w1,
    }
}

impl Setup {
    /// `vouch worker --server` from the worker's home, draining the host's board.
    fn drain(&self, script: &str) -> Vec<Value> {
        let out = self
            .worker
            .cmd(&[
                "--json",
                "worker",
                "--name",
                "w1",
                "--script",
                script,
                "--drain",
                "--server",
                &self.server.url,
                "--token",
                &self.wtoken,
            ])
            .output()
            .unwrap();
        assert!(out.status.success(), "remote worker: {}", err(&out));
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.server.url)
    }

    /// A signed claim-next as `w1`.
    fn claim(&self) -> Value {
        let at_ms = now_ms();
        let policy = json!({"profile": "default", "context": "autonomous"});
        let fingerprint =
            vouch_artifacts::content_id(vouch_core::canonical_json(&policy).unwrap().as_bytes());
        let nonce = nonce();
        let statement = json!({"claim": {"claimant": "w1", "task": null, "profile": "default", "policy_fingerprint": fingerprint, "at_ms": at_ms, "nonce": nonce}});
        let body = json!({"claimant": "w1", "at_ms": at_ms, "nonce": nonce, "signature": self.w1.sign(&statement).unwrap()});
        let (code, v) = http(
            "POST",
            &self.url("/api/tasks/claim-next"),
            &self.wtoken,
            Some(&body),
        );
        assert_eq!(code, 200, "{v}");
        v
    }

    /// One signed call of the attempt's run.
    fn call(&self, task: &str, n: u64, epoch: i64, tool: &str, args: Value) -> (u16, Value) {
        self.call_on(&self.server.url, task, n, epoch, tool, args)
    }

    /// One signed call of the attempt's run, sent to the host serving at `base`.
    fn call_on(
        &self,
        base: &str,
        task: &str,
        n: u64,
        epoch: i64,
        tool: &str,
        args: Value,
    ) -> (u16, Value) {
        let (at_ms, nonce) = (now_ms(), nonce());
        let statement = json!({"call": {"task": task, "attempt": n, "claimant": "w1", "epoch": epoch, "tool": tool, "args": args, "at_ms": at_ms, "nonce": nonce}});
        let body = json!({"claimant": "w1", "epoch": epoch, "tool": tool, "args": args, "at_ms": at_ms, "nonce": nonce, "signature": self.w1.sign(&statement).unwrap()});
        http(
            "POST",
            &format!("{base}/api/tasks/{task}/attempts/{n}/call"),
            &self.wtoken,
            Some(&body),
        )
    }
}

/// A loopback HTTP server at `path`: each request's body is kept in `kept` as `keep` reads
/// it, and answered with `answer`'s (status line and content type, body) for it.
fn loopback<T: Send + 'static>(
    path: &str,
    keep: impl Fn(&[u8]) -> T + Send + 'static,
    mut answer: impl FnMut() -> (&'static str, String) + Send + 'static,
) -> (String, Arc<Mutex<Vec<T>>>) {
    use std::io::{BufReader, Read, Write};
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}{path}", l.local_addr().unwrap());
    let got = Arc::new(Mutex::new(vec![]));
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
            seen.lock().unwrap().push(keep(&body));
            let (head, body) = answer();
            let _ = write!(
                r.get_mut(),
                "HTTP/1.1 {head}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    (url, got)
}

/// A webhook that answers 200 and keeps every body it was sent.
fn receiver() -> (String, Arc<Mutex<Vec<String>>>) {
    loopback(
        "/hook",
        |b| String::from_utf8_lossy(b).into_owned(),
        || ("200 OK", String::new()),
    )
}

fn remote_worker_drains_the_hosts_board(pg: bool) {
    let s = setup(pg);
    let tasks = [s.host.offer("first"), s.host.offer("second")];
    let script = s.worker.script(json!([
        {"declare": {"deliveries": []}},
        {"submit": {"summary": "done remotely"}},
        {"final": "submitted"}
    ]));
    let ev = s.drain(&script);
    let reported: Vec<&Value> = ev.iter().filter(|e| e["event"] == "reported").collect();
    assert_eq!(reported.len(), 2, "{ev:?}");
    for t in &tasks {
        let v = s.host.show(t);
        assert_eq!(v["task"]["state"], "completed", "{v}");
        assert_eq!(v["result"], json!({"summary": "done remotely"}), "{v}");
        // The attempt ran as a run on the host, with its receipt.
        let run = v["attempts"][0]["run_id"].as_str().unwrap().to_string();
        let r = s.host.json(&["runs", "show", &run]);
        assert_eq!(r["run"]["trigger"], "task", "{r}");
        assert_eq!(r["run"]["state"], "ended", "{r}");
        assert!(
            v["attempts"][0]["detail"]["receipt"]
                .as_str()
                .is_some_and(|x| x.contains(&run)),
            "{v}"
        );
        // The result reads back over HTTP.
        let (code, got) = http(
            "GET",
            &s.url(&format!("/api/tasks/{t}/result")),
            &s.wtoken,
            None,
        );
        assert_eq!(code, 200, "{got}");
        assert_eq!(got["output"], json!({"summary": "done remotely"}));
        assert_eq!(got["run"], run.as_str());
    }
}

#[test]
fn remote_worker_drains_the_hosts_board_on_sqlite() {
    remote_worker_drains_the_hosts_board(false);
}

#[test]
fn remote_worker_drains_the_hosts_board_on_postgres() {
    remote_worker_drains_the_hosts_board(true);
}

fn an_irreversible_send_waits_for_the_person_on_the_host(pg: bool) {
    let s = setup(pg);
    let (hook, got) = receiver();
    let task = s.host.offer("tell the hook");
    let script = s.worker.script(json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": hook}}]}},
        {"deliver": "d1", "payload": {"text": "hello"}},
        {"submit": {"summary": "sent"}},
        {"final": "done"}
    ]));
    let ev = s.drain(&script);
    assert!(ev.iter().any(|e| e["event"] == "suspended"), "{ev:?}");
    let v = s.host.show(&task);
    assert_eq!(v["attempts"][0]["state"], "suspended", "{v}");
    let run = v["attempts"][0]["run_id"].as_str().unwrap().to_string();
    assert!(
        got.lock().unwrap().is_empty(),
        "nothing goes out before approval"
    );
    // The card is on the host; the worker's own token cannot approve it.
    let cards = s.host.json(&["approvals"]);
    let card = cards
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["run"] == run.as_str())
        .unwrap_or_else(|| panic!("no card for {run}: {cards}"))
        .clone();
    let approve = s.url(&format!("/api/runs/{run}/deliveries/d1/approve"));
    let body = json!({"hash": card["payload_hash"]});
    let (code, p) = http("POST", &approve, &s.wtoken, Some(&body));
    assert_eq!((code, p["code"].as_str()), (403, Some("forbidden")), "{p}");
    let (code, p) = http("POST", &approve, &s.person, Some(&body));
    assert_eq!(code, 200, "{p}");
    assert!(got.lock().unwrap().is_empty(), "approve only decides");
    // The worker claims the resumption: the approved send goes out once, the run goes on.
    let ev = s.drain(&script);
    assert!(
        ev.iter()
            .any(|e| e["event"] == "claimed" && e["resumption"] == true),
        "{ev:?}"
    );
    let v = s.host.show(&task);
    assert_eq!(v["task"]["state"], "completed", "{v}");
    assert_eq!(v["attempts"][0]["run_id"], run.as_str(), "the same run");
    let sent = got.lock().unwrap().clone();
    assert_eq!(sent.len(), 1, "{sent:?}");
    assert!(sent[0].contains("hello"), "{sent:?}");
    let receipt = s.host.run(&["receipt", &run]);
    assert!(receipt.status.success(), "{}", err(&receipt));
    let text = String::from_utf8_lossy(&receipt.stdout);
    assert!(text.contains("d1"), "{text}");
}

#[test]
fn an_irreversible_send_waits_for_the_person_on_the_host_on_sqlite() {
    an_irreversible_send_waits_for_the_person_on_the_host(false);
}

#[test]
fn an_irreversible_send_waits_for_the_person_on_the_host_on_postgres() {
    an_irreversible_send_waits_for_the_person_on_the_host(true);
}

fn an_http_claim_opens_the_run_and_binds_the_report_to_it(pg: bool) {
    let s = setup(pg);
    let task = s.host.offer("by hand");
    let c = s.claim();
    assert_eq!(c["claimed"], true, "{c}");
    let run = c["run"].as_str().unwrap().to_string();
    assert_eq!(c["attempt"]["run_id"], run.as_str(), "{c}");
    assert!(
        c["tools"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["name"] == "submit"),
        "{c}"
    );
    assert!(c["conversation"].to_string().contains("by hand"), "{c}");
    let (n, epoch) = (
        c["attempt"]["n"].as_u64().unwrap(),
        c["attempt"]["epoch"].as_i64().unwrap(),
    );
    let r = s.host.json(&["runs", "show", &run]);
    assert_eq!(r["run"]["trigger"], "task", "{r}");
    // Nothing accepted yet.
    let (code, p) = http(
        "GET",
        &s.url(&format!("/api/tasks/{task}/result")),
        &s.wtoken,
        None,
    );
    assert_eq!((code, p["code"].as_str()), (409, Some("no_result")), "{p}");
    // A submit naming no run, or another, is refused before anything is spent.
    let result = json!({"summary": "by hand"});
    for named in [Value::Null, json!("0000000000007000000")] {
        let cid =
            vouch_artifacts::content_id(vouch_core::canonical_json(&result).unwrap().as_bytes());
        let (at_ms, nonce) = (now_ms(), nonce());
        let statement = json!({"report": {"task": task, "attempt": n, "claimant": "w1", "epoch": epoch, "outcome": "accepted", "output": cid, "run": named, "at_ms": at_ms, "nonce": nonce}});
        let body = json!({"claimant": "w1", "epoch": epoch, "result": result, "run": named, "at_ms": at_ms, "nonce": nonce, "signature": s.w1.sign(&statement).unwrap()});
        let (code, p) = http(
            "POST",
            &s.url(&format!("/api/tasks/{task}/attempts/{n}/submit")),
            &s.wtoken,
            Some(&body),
        );
        assert_eq!((code, p["code"].as_str()), (409, Some("wrong_run")), "{p}");
    }
    // A badly signed call is refused; the run's own calls go through the host.
    let mut bad = json!({"claimant": "w1", "epoch": epoch, "tool": "declare", "args": {"deliveries": []}, "at_ms": now_ms(), "nonce": nonce(), "signature": "00"});
    let (code, p) = http(
        "POST",
        &s.url(&format!("/api/tasks/{task}/attempts/{n}/call")),
        &s.wtoken,
        Some(&bad),
    );
    assert_eq!(
        (code, p["code"].as_str()),
        (403, Some("bad_signature")),
        "{p}"
    );
    bad["tool"] = json!("approve");
    let (code, _) = s.call(&task, n, epoch, "approve", json!({}));
    assert_eq!(code, 422);
    let (code, d) = s.call(&task, n, epoch, "declare", json!({"deliveries": []}));
    assert_eq!(code, 200, "{d}");
    assert_eq!(
        (d["ok"].as_bool(), d["run"].as_str()),
        (Some(true), Some(run.as_str())),
        "{d}"
    );
    let (_, bad_submit) = s.call(&task, n, epoch, "submit", json!({"result": {}}));
    assert_eq!(
        bad_submit["ok"], false,
        "a malformed result goes back: {bad_submit}"
    );
    let (_, sub) = s.call(
        &task,
        n,
        epoch,
        "submit",
        json!({"result": result, "self_assessment": null}),
    );
    assert_eq!(sub["ok"], true, "{sub}");
    let (code, f) = s.call(&task, n, epoch, "finish", json!({"text": "done"}));
    assert_eq!(code, 200, "{f}");
    assert_eq!(f["end"]["state"], "ended", "{f}");
    assert_eq!(f["end"]["attempt_state"], "completed", "{f}");
    let v = s.host.show(&task);
    assert_eq!(v["result"], result, "{v}");
    let (code, got) = http(
        "GET",
        &s.url(&format!("/api/tasks/{task}/result")),
        &s.person,
        None,
    );
    assert_eq!(code, 200, "{got}");
    assert_eq!(
        (got["output"].clone(), got["run"].clone()),
        (result.clone(), json!(run))
    );
    // The completed task continues over HTTP (a person's call; a worker's is 403).
    let cont = s.url(&format!("/api/tasks/{task}/continue"));
    let (code, _) = http("POST", &cont, &s.wtoken, Some(&json!({"brief": "more"})));
    assert_eq!(code, 403);
    let (code, more) = http("POST", &cont, &s.person, Some(&json!({"brief": "more"})));
    assert_eq!(code, 201, "{more}");
    assert_eq!(more["task"]["spec"]["references"], json!([task]), "{more}");
    let input = &more["task"]["spec"]["input"]["continuation"];
    assert_eq!(input["run"], run.as_str(), "{more}");
    // The owner cancels a task while its worker is between calls: the run ends with it.
    let c = s.claim();
    let (t2, run2) = (
        c["task"]["id"].as_str().unwrap().to_string(),
        c["run"].as_str().unwrap().to_string(),
    );
    let (n2, e2) = (
        c["attempt"]["n"].as_u64().unwrap(),
        c["attempt"]["epoch"].as_i64().unwrap(),
    );
    let (code, _) = s.call(&t2, n2, e2, "declare", json!({"deliveries": []}));
    assert_eq!(code, 200);
    let (code, p) = http(
        "POST",
        &s.url(&format!("/api/tasks/{t2}/cancel")),
        &s.person,
        Some(&json!({})),
    );
    assert_eq!(code, 200, "{p}");
    let r = s.host.json(&["runs", "show", &run2]);
    assert_eq!(r["run"]["state"], "ended", "{r}");
    let (code, p) = s.call(&t2, n2, e2, "finish", json!({"text": "late"}));
    assert_eq!((code, p["code"].as_str()), (409, Some("refused")), "{p}");
}

/// One truth (§13.2.2): a signed `…/submit` naming the attempt's open run goes through that
/// run — its `submit`, then its end — so the run's receipt says the result was handed over
/// and the board accepted exactly that result. (It used to be accepted by the board while
/// the run ended "handoff missing", outcome withdrawn.)
fn a_submit_naming_the_open_run_is_the_runs_own_submission(pg: bool) {
    let s = setup(pg);
    let task = s.host.offer("by hand");
    let c = s.claim();
    let run = c["run"].as_str().unwrap().to_string();
    let (n, epoch) = (
        c["attempt"]["n"].as_u64().unwrap(),
        c["attempt"]["epoch"].as_i64().unwrap(),
    );
    let result = json!({"summary": "by hand"});
    let cid = vouch_artifacts::content_id(vouch_core::canonical_json(&result).unwrap().as_bytes());
    let (at_ms, nonce) = (now_ms(), nonce());
    let statement = json!({"report": {"task": task, "attempt": n, "claimant": "w1", "epoch": epoch, "outcome": "accepted", "output": cid, "run": run, "at_ms": at_ms, "nonce": nonce}});
    let body = json!({"claimant": "w1", "epoch": epoch, "result": result, "run": run, "at_ms": at_ms, "nonce": nonce, "signature": s.w1.sign(&statement).unwrap()});
    let (code, p) = http(
        "POST",
        &s.url(&format!("/api/tasks/{task}/attempts/{n}/submit")),
        &s.wtoken,
        Some(&body),
    );
    assert_eq!(code, 200, "{p}");
    let v = s.host.show(&task);
    assert_eq!(v["task"]["state"], "completed", "{v}");
    assert_eq!(v["result"], result, "{v}");
    let out = s.host.cmd(&["receipt", &run]).output().unwrap();
    let receipt = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        !receipt.contains("handoff missing")
            && !receipt.contains("declared nothing")
            && receipt.contains("result"),
        "the run's receipt says the result was handed over: {receipt}"
    );
}

#[test]
fn a_submit_naming_the_open_run_is_the_runs_own_submission_on_sqlite() {
    a_submit_naming_the_open_run_is_the_runs_own_submission(false);
}

#[test]
fn an_http_claim_opens_the_run_and_binds_the_report_to_it_on_sqlite() {
    an_http_claim_opens_the_run_and_binds_the_report_to_it(false);
}

#[test]
fn an_http_claim_opens_the_run_and_binds_the_report_to_it_on_postgres() {
    an_http_claim_opens_the_run_and_binds_the_report_to_it(true);
}

fn a_remote_run_without_a_handoff_fails_its_attempt_visibly(pg: bool) {
    let s = setup(pg);
    let task = s.host.offer("forgets to submit");
    let script = s.worker.script(json!([
        {"declare": {"deliveries": []}},
        {"final": "all done, I think"}
    ]));
    let ev = s.drain(&script);
    assert!(ev.iter().any(|e| e["event"] == "reported"), "{ev:?}");
    let v = s.host.show(&task);
    assert_eq!(v["task"]["state"], "failed", "{v}");
    let a = &v["attempts"][0];
    assert_eq!(a["state"], "failed", "{v}");
    assert!(
        a["end_reason"]
            .as_str()
            .is_some_and(|r| r.contains("without an accepted submission")),
        "{v}"
    );
    // The run is the host's, ended, with its receipt on the attempt.
    let run = a["run_id"].as_str().unwrap();
    assert_eq!(s.host.json(&["runs", "show", run])["run"]["state"], "ended");
    let (code, p) = http(
        "GET",
        &s.url(&format!("/api/tasks/{task}/result")),
        &s.person,
        None,
    );
    assert_eq!((code, p["code"].as_str()), (409, Some("no_result")), "{p}");
}

#[test]
fn a_remote_run_without_a_handoff_fails_its_attempt_visibly_on_sqlite() {
    a_remote_run_without_a_handoff_fails_its_attempt_visibly(false);
}

#[test]
fn a_remote_run_without_a_handoff_fails_its_attempt_visibly_on_postgres() {
    a_remote_run_without_a_handoff_fails_its_attempt_visibly(true);
}

/// A remote worker that dies mid-attempt (it claimed over HTTP, made a call, then went
/// silent): the sweep times the attempt out, and the attempt's run — idle between calls, no
/// process holding it — is ended by the host with its receipt ("the attempt ended"), once,
/// rather than left waiting for calls that will never come (§13.3).
fn a_dead_remote_workers_run_is_ended_with_its_attempt(pg: bool) {
    let s = setup(pg);
    let task = s.host.json(&[
        "task",
        "offer",
        "--type",
        "freeform",
        "--brief",
        "dies midway",
        "--lease-ms",
        "1000",
        "--heartbeat-ms",
        "500",
        "--dispatch-timeout-ms",
        "1000",
    ])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let c = s.claim();
    assert_eq!(c["claimed"], true, "{c}");
    let run = c["run"].as_str().unwrap().to_string();
    let (n, epoch) = (
        c["attempt"]["n"].as_u64().unwrap(),
        c["attempt"]["epoch"].as_i64().unwrap(),
    );
    let (code, v) = s.call(&task, n, epoch, "declare", json!({"deliveries": []}));
    assert_eq!(code, 200, "{v}");
    // The worker is gone: no heartbeat, no call. Sweeps until the lease has lapsed.
    let mut ended = vec![];
    let mut v = s.host.show(&task);
    for _ in 0..300 {
        let swept = s.host.json(&["task", "sweep"]);
        ended.extend(swept["runs_ended"].as_array().cloned().unwrap_or_default());
        v = s.host.show(&task);
        if v["attempts"][0]["state"] == "timed_out" {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    assert_eq!(v["attempts"][0]["state"], "timed_out", "{v}");
    // Whichever sweeper held the duty (this command's or the server's before a claim) ended
    // the run; one more sweep finds nothing left.
    let swept = s.host.json(&["task", "sweep"]);
    ended.extend(swept["runs_ended"].as_array().cloned().unwrap_or_default());
    assert!(ended.len() <= 1, "ended once: {ended:?}");
    let r = s.host.json(&["runs", "show", &run]);
    assert_eq!(r["run"]["state"], "ended", "{r}");
    let receipt = s.host.json(&["receipt", &run]);
    let text = receipt["receipt"].as_str().unwrap();
    assert!(text.contains("the attempt ended"), "{text}");
    assert!(!text.contains("at your request"), "{text}");
    assert_eq!(s.host.json(&["task", "sweep"])["runs_ended"], json!([]));
}

#[test]
fn a_dead_remote_workers_run_is_ended_with_its_attempt_on_sqlite() {
    a_dead_remote_workers_run_is_ended_with_its_attempt(false);
}

#[test]
fn a_dead_remote_workers_run_is_ended_with_its_attempt_on_postgres() {
    a_dead_remote_workers_run_is_ended_with_its_attempt(true);
}

/// An OpenAI-compatible server on loopback that answers from a queue and keeps every request
/// body it was sent: what the remote worker's model is told, read off the wire.
fn recording_model(answers: Vec<Value>) -> (String, Arc<Mutex<Vec<Value>>>) {
    let mut queue = answers.into_iter();
    loopback(
        "/v1",
        |b| serde_json::from_slice(b).unwrap_or(Value::Null),
        move || {
            let answer = queue.next().unwrap_or_else(|| {
                json!({"choices": [{"message": {"role": "assistant", "content": "out of answers"}}]})
            });
            (
                "200 OK\r\nContent-Type: application/json",
                answer.to_string(),
            )
        },
    )
}

/// A model answer that makes the given tool calls, spending 10 + 5 tokens.
fn model_calls(calls: &[(&str, &str, Value)]) -> Value {
    let calls: Vec<Value> = calls
        .iter()
        .map(|(id, name, args)| json!({"id": id, "type": "function", "function": {"name": name, "arguments": args.to_string()}}))
        .collect();
    json!({"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": calls}}], "usage": {"prompt_tokens": 10, "completion_tokens": 5}})
}

/// The remote worker's model, read off the wire (a recording OpenAI-compatible server on the
/// worker's side): it is told the task's brief, its criteria and the output schema it must
/// submit, and offered the host's tools; every call it makes is carried out on the host's run
/// (the file is saved in the host's home, not the worker's), and the task completes there.
fn a_remote_workers_model_is_told_the_task_and_acts_on_the_host(pg: bool) {
    let s = setup(pg);
    let criteria = s.host.tmp.path().join("criteria.json");
    std::fs::write(&criteria, r#"["names the revenue figure"]"#).unwrap();
    let out = s.host.json(&[
        "task",
        "offer",
        "--type",
        "freeform",
        "--brief",
        "Summarise the Q4 notes into Notes/q4.md",
        "--criteria",
        criteria.to_str().unwrap(),
    ]);
    let task = out["id"].as_str().unwrap().to_string();
    let manifest = json!({"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Notes/q4.md"}}]});
    let (url, seen) = recording_model(vec![
        model_calls(&[("c1", "declare", manifest)]),
        model_calls(&[
            (
                "c2",
                "save",
                json!({"delivery": "d1", "payload": {"text": "Revenue up 12%.\n"}}),
            ),
            (
                "c3",
                "submit",
                json!({"result": {"summary": "Revenue up 12%."},
                "self_assessment": {"names the revenue figure": {"met": true, "note": "12%"}}}),
            ),
        ]),
        json!({"choices": [{"message": {"role": "assistant", "content": "Saved and submitted."}}]}),
    ]);
    let out = s
        .worker
        .cmd(&[
            "--json",
            "worker",
            "--name",
            "w1",
            "--drain",
            "--server",
            &s.server.url,
            "--token",
            &s.wtoken,
        ])
        .env("VOUCH_MODEL_URL", &url)
        .env("VOUCH_MODEL", "stand-in")
        .env("VOUCH_API_KEY", "sk-test")
        .output()
        .unwrap();
    assert!(out.status.success(), "remote worker: {}", err(&out));
    let requests = seen.lock().unwrap().clone();
    assert_eq!(requests.len(), 3, "{requests:?}");
    let first = &requests[0];
    let told = first["messages"].to_string();
    for must in [
        "Summarise the Q4 notes into Notes/q4.md",
        "names the revenue figure",
        "self_assessment",
    ] {
        assert!(
            told.contains(must),
            "`{must}` missing from what the model is told: {told}"
        );
    }
    let tools: Vec<&str> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    for must in ["declare", "save", "submit"] {
        assert!(tools.contains(&must), "`{must}` not offered: {tools:?}");
    }
    let submit = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["function"]["name"] == "submit")
        .unwrap();
    assert!(
        submit["function"]["parameters"]["properties"]["result"]["properties"]["summary"]
            .is_object(),
        "submit's `result` is the type's output schema: {submit}"
    );
    // The host's answers to the calls reached the model as tool results.
    let last = requests[2]["messages"].as_array().unwrap();
    assert_eq!(
        last.iter().filter(|m| m["role"] == "tool").count(),
        3,
        "{last:?}"
    );
    // The world: the file is in the host's home, the task completed there with the result.
    let saved = std::fs::read_to_string(s.host.dir.join("files/Notes/q4.md")).unwrap();
    assert_eq!(saved, "Revenue up 12%.\n");
    assert!(!s.worker.dir.join("files/Notes/q4.md").exists());
    let v = s.host.show(&task);
    assert_eq!(v["task"]["state"], "completed", "{v}");
    assert_eq!(v["result"], json!({"summary": "Revenue up 12%."}), "{v}");
    // The cost is the model's, reported by the worker with its calls: two answers of 10 + 5
    // tokens (the third said none), in the attempt's usage and the host's receipt.
    assert_eq!(v["attempts"][0]["usage"]["tokens"], 30, "{v}");
    let receipt = v["attempts"][0]["detail"]["receipt"].as_str().unwrap();
    assert!(receipt.contains("30 tokens"), "{receipt}");
}

/// A call's reported tokens are signed with it: changed after signing is 403 `bad_signature`;
/// more than a turn can spend is 422 naming `usage`; a signed report counts on the run.
fn a_calls_reported_tokens_are_signed_and_bounded(pg: bool) {
    let s = setup(pg);
    let task = s.host.offer("report what it cost");
    let claim = s.claim();
    let epoch = claim["attempt"]["epoch"].as_i64().unwrap();
    let declare = json!({"deliveries": []});
    let signed = |usage: Value| {
        let (at_ms, nonce) = (now_ms(), nonce());
        let statement = json!({"call": {"task": task, "attempt": 1, "claimant": "w1", "epoch": epoch, "tool": "declare", "args": declare, "at_ms": at_ms, "nonce": nonce, "usage": usage}});
        json!({"claimant": "w1", "epoch": epoch, "tool": "declare", "args": declare, "at_ms": at_ms, "nonce": nonce, "usage": usage, "signature": s.w1.sign(&statement).unwrap()})
    };
    let url = s.url(&format!("/api/tasks/{task}/attempts/1/call"));
    let mut body = signed(json!({"prompt_tokens": 70, "completion_tokens": 7}));
    body["usage"]["prompt_tokens"] = json!(7);
    let (code, p) = http("POST", &url, &s.wtoken, Some(&body));
    assert_eq!(
        (code, p["code"].as_str()),
        (403, Some("bad_signature")),
        "{p}"
    );
    let body = signed(json!({"prompt_tokens": 100_000_001u64, "completion_tokens": 0}));
    let (code, p) = http("POST", &url, &s.wtoken, Some(&body));
    assert_eq!(code, 422, "{p}");
    assert!(p.to_string().contains("usage"), "{p}");
    let body = signed(json!({"prompt_tokens": 70, "completion_tokens": 7}));
    let (code, p) = http("POST", &url, &s.wtoken, Some(&body));
    assert_eq!(code, 200, "{p}");
    // A call without `usage` reports nothing spent; the run's cost is what was reported.
    let (code, p) = s.call(&task, 1, epoch, "finish", json!({"text": ""}));
    assert_eq!(code, 200, "{p}");
    let v = s.host.show(&task);
    assert_eq!(v["attempts"][0]["usage"]["tokens"], 77, "{v}");
}

#[test]
fn a_calls_reported_tokens_are_signed_and_bounded_on_sqlite() {
    a_calls_reported_tokens_are_signed_and_bounded(false);
}

#[test]
fn a_calls_reported_tokens_are_signed_and_bounded_on_postgres() {
    a_calls_reported_tokens_are_signed_and_bounded(true);
}

/// A remote worker's model turns reach the host whole (§13.2.2): the text of a tool-calling
/// turn is journaled, two calls in one model turn are one journaled turn (not two), and a
/// call whose arguments are not JSON is answered and counted as a repair on the host — the
/// same journal the host's own loop writes.
fn a_remote_workers_turns_are_journaled_whole_on_the_host(pg: bool) {
    let s = setup(pg);
    let out = s.host.json(&[
        "task",
        "offer",
        "--type",
        "freeform",
        "--brief",
        "Say hello",
    ]);
    let task = out["id"].as_str().unwrap().to_string();
    let mut two = model_calls(&[
        ("c2", "submit", json!({"result": {"summary": "hello"}})),
        ("c3", "submit", json!({"result": {"summary": "again"}})),
    ]);
    two["choices"][0]["message"]["content"] = json!("Submitting now.");
    let mut bad = model_calls(&[("c1", "declare", json!({}))]);
    bad["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = json!("{not json");
    let (url, _) = recording_model(vec![
        bad,
        model_calls(&[("c1b", "declare", json!({"deliveries": []}))]),
        two,
        json!({"choices": [{"message": {"role": "assistant", "content": "Done."}}]}),
    ]);
    let out = s
        .worker
        .cmd(&[
            "--json",
            "worker",
            "--name",
            "w1",
            "--drain",
            "--server",
            &s.server.url,
            "--token",
            &s.wtoken,
        ])
        .env("VOUCH_MODEL_URL", &url)
        .env("VOUCH_MODEL", "stand-in")
        .env("VOUCH_API_KEY", "sk-test")
        .output()
        .unwrap();
    assert!(out.status.success(), "remote worker: {}", err(&out));
    let v = s.host.show(&task);
    assert_eq!(v["task"]["state"], "completed", "{v}");
    let run = v["attempts"][0]["run_id"].as_str().unwrap().to_string();
    let j = s.host.json(&["journal", &run]);
    let events = j["events"]
        .as_array()
        .or(j.as_array())
        .cloned()
        .unwrap_or_default();
    let turns: Vec<&Value> = events.iter().filter(|e| e["kind"] == "turn").collect();
    assert_eq!(
        turns.len(),
        4,
        "four model turns, four journaled turns: {j}"
    );
    assert!(
        j.to_string().contains("Submitting now."),
        "the turn's text is journaled: {j}"
    );
    let text = j.to_string();
    let repaired =
        text.matches(r#"\"repair\":true"#).count() + text.matches(r#""repair":true"#).count();
    assert_eq!(
        repaired, 1,
        "the malformed call is a repair on the host: {j}"
    );
}

#[test]
fn a_remote_workers_turns_are_journaled_whole_on_the_host_on_sqlite() {
    a_remote_workers_turns_are_journaled_whole_on_the_host(false);
}

#[test]
fn a_remote_workers_model_is_told_the_task_and_acts_on_the_host_on_sqlite() {
    a_remote_workers_model_is_told_the_task_and_acts_on_the_host(false);
}

#[test]
fn a_remote_workers_model_is_told_the_task_and_acts_on_the_host_on_postgres() {
    a_remote_workers_model_is_told_the_task_and_acts_on_the_host(true);
}

/// A second host on the first one's PostgreSQL schema: its own home (so its own host id),
/// serving HTTP from a PID namespace of its own when the machine allows, as another machine
/// would — no pid it sees means anything to the first host.
fn second_host(first: &Home) -> (Home, Server) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("home");
    let other = Home {
        tmp,
        dir,
        schema: None,
    };
    let schema = first.schema.clone().expect("a PostgreSQL home");
    let with_store = |c: &mut Command| {
        c.env("VOUCH_DATABASE_URL", pg_url())
            .env("VOUCH_DATABASE_SCHEMA", &schema)
            .env_remove("VOUCH_CRASH_AFTER")
            .env_remove("VOUCH_MODEL_URL")
            .env_remove("DBUS_SESSION_BUS_ADDRESS");
    };
    let mut init = other.cmd(&["init"]);
    with_store(&mut init);
    let out = init.output().unwrap();
    assert!(out.status.success(), "init: {}", err(&out));
    let vouch = env!("CARGO_BIN_EXE_vouch");
    let mut c = if support::namespaces() {
        let mut c = Command::new("unshare");
        c.args(["--pid", "--fork", "--mount-proc", "--kill-child", vouch]);
        c
    } else {
        Command::new(vouch)
    };
    c.arg("--home")
        .arg(&other.dir)
        .args(["--json", "serve", "--http", "127.0.0.1:0"]);
    with_store(&mut c);
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let v: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line}: {e}"));
    let url = format!("http://{}", v["listening"].as_str().unwrap());
    (other, Server { child, url })
}

/// Many hosts (§13.2.1 on one store): an attempt claimed through one host is a run any host
/// on the store can drive, since between calls no process holds it. The first host is killed
/// (SIGKILL) after the claim and the `declare`; the worker goes on through the second host,
/// in another PID namespace, and the task completes there: one run, ended once, its receipt
/// naming the declared work.
#[test]
fn a_remote_attempt_goes_on_through_another_host_when_its_first_dies() {
    let mut s = setup(true);
    let task = s.host.offer("finish it elsewhere");
    let c = s.claim();
    let run = c["run"].as_str().unwrap().to_string();
    let (n, epoch) = (
        c["attempt"]["n"].as_u64().unwrap(),
        c["attempt"]["epoch"].as_i64().unwrap(),
    );
    let (code, p) = s.call(&task, n, epoch, "declare", json!({"deliveries": []}));
    assert_eq!(code, 200, "{p}");
    s.server.child.kill().unwrap();
    s.server.child.wait().unwrap();
    let (_other, b) = second_host(&s.host);
    let submit = json!({"result": {"summary": "finished elsewhere"}, "self_assessment": null});
    let (code, p) = s.call_on(&b.url, &task, n, epoch, "submit", submit);
    assert_eq!(code, 200, "{p}");
    assert_eq!(p["run"], run.as_str(), "{p}");
    let (code, p) = s.call_on(&b.url, &task, n, epoch, "finish", json!({"text": "done"}));
    assert_eq!(code, 200, "{p}");
    assert_eq!(p["end"]["state"], "ended", "{p}");
    let v = s.host.show(&task);
    assert_eq!(v["task"]["state"], "completed", "{v}");
    assert_eq!(v["result"], json!({"summary": "finished elsewhere"}), "{v}");
    assert_eq!(v["attempts"][0]["run_id"], run.as_str(), "{v}");
    let r = s.host.json(&["runs", "show", &run]);
    assert_eq!(r["run"]["state"], "ended", "{r}");
    let receipt = s.host.run(&["receipt", &run]);
    assert!(receipt.status.success(), "{}", err(&receipt));
    // One terminal record: the run's journal ends once.
    let mut db = postgres::Client::connect(&pg_url(), postgres::NoTls).unwrap();
    let schema = s.host.schema.clone().unwrap();
    let ends: i64 = db
        .query_one(
            &format!(
                "SELECT count(*) FROM \"{schema}\".journal WHERE run_id = $1 AND kind = 'terminal'"
            ),
            &[&run],
        )
        .unwrap()
        .get(0);
    assert_eq!(ends, 1);
}
