//! The HTTP API over real HTTP on loopback against a real store: every route's status codes,
//! problem objects and authentication, SSE resumption, the OpenAPI snapshot and /metrics.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};
use vouch_adapters::config::Config;
use vouch_adapters::folder::FolderProvider;
use vouch_adapters::outbound::WebhookProvider;
use vouch_core::DestinationKind;
use vouch_runtime::clock::SystemClock;
use vouch_runtime::provider::Provider;
use vouch_runtime::{Host, RunEnd, RunSpec};
use vouch_store::{ApiToken, Store};
use vouch_store_sqlite::SqliteStore;

const SECRET: &str = "vouch_test_secret";
const READER_SECRET: &str = "vouch_reader_secret";
const ADMIN_SECRET: &str = "vouch_admin_secret";
/// Worker identities the tests claim as; each has its own worker token.
const WORKERS: [&str; 4] = ["w", "w1", "w2", "someone-else"];

fn worker_secret(w: &str) -> String {
    format!("vouch_worker_secret_{w}")
}

/// A worker's route is called with the worker token of the claimant the request names (in
/// its body or query; `w1` when it names none): the person's token is refused there.
fn token_for(method: &str, path: &str, token: &str, body: Option<&str>) -> String {
    let (route, query) = path.split_once('?').unwrap_or((path, ""));
    let worker_only = vouch_server::auth::route_for(method, route)
        .is_some_and(|(_, scopes)| scopes == [vouch_core::Scope::Worker]);
    if token != SECRET || !worker_only {
        return token.to_string();
    }
    let named = body
        .and_then(|b| serde_json::from_str::<Value>(b).ok())
        .and_then(|v| v["claimant"].as_str().map(String::from))
        .or_else(|| {
            query
                .split('&')
                .find_map(|kv| kv.strip_prefix("claimant=").map(String::from))
        });
    match named {
        Some(w) if WORKERS.contains(&w.as_str()) => worker_secret(&w),
        _ => worker_secret("w1"),
    }
}

/// A webhook receiver on loopback that counts what it applied.
struct Hook {
    url: String,
    hits: Arc<Mutex<usize>>,
}

fn hook() -> Hook {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/in", l.local_addr().unwrap());
    let hits = Arc::new(Mutex::new(0));
    let h = hits.clone();
    std::thread::spawn(move || {
        for mut s in l.incoming().flatten() {
            let mut buf = vec![0u8; 1 << 16];
            let mut n = 0;
            loop {
                match s.read(&mut buf[n..]) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => n += k,
                }
                let t = String::from_utf8_lossy(&buf[..n]).to_lowercase();
                if let Some(end) = t.find("\r\n\r\n") {
                    let len = t
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .and_then(|v| v.trim().parse::<usize>().ok())
                        .unwrap_or(0);
                    if n >= end + 4 + len {
                        break;
                    }
                }
            }
            *h.lock().unwrap() += 1;
            let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 10\r\nConnection: close\r\n\r\n{{\"id\":\"t\"}}");
        }
    });
    Hook { url, hits }
}

struct Server {
    _tmp: tempfile::TempDir,
    base: String,
    host: Arc<Host>,
    /// The store the host writes through, for what the test does behind the API's back.
    store: Arc<dyn Store>,
}

fn host_on(store: Arc<dyn Store>, dir: &std::path::Path) -> Host {
    let mut parts = vouch_adapters::local::parts(dir);
    parts.providers.insert(
        DestinationKind::Webhook,
        Arc::new(WebhookProvider {
            timeout_ms: 5_000,
            idempotent: vec![],
            status_url: None,
        }),
    );
    let owner = vouch_runtime::host::process_owner();
    Host::new(
        store,
        Arc::new(SystemClock),
        owner,
        dir.join("drafts"),
        parts,
    )
}

fn start_with(store: Arc<dyn Store>, tmp: tempfile::TempDir, streams: usize) -> Server {
    start_board(store, None, tmp, streams)
}

fn start_board(
    store: Arc<dyn Store>,
    board: Option<Arc<dyn vouch_store::board::BoardStore>>,
    tmp: tempfile::TempDir,
    streams: usize,
) -> Server {
    start_work(store, board, tmp, streams, |_| {})
}

fn start_work(
    store: Arc<dyn Store>,
    board: Option<Arc<dyn vouch_store::board::BoardStore>>,
    tmp: tempfile::TempDir,
    streams: usize,
    configure: impl FnOnce(&mut vouch_server::AppState),
) -> Server {
    for d in ["files", "surfaces", "drafts", "artifacts"] {
        std::fs::create_dir_all(tmp.path().join(d)).unwrap();
    }
    store
        .put_token(&ApiToken {
            name: "test".into(),
            hash: vouch_server::token_hash(SECRET),
            created_ms: 1,
            scope: vouch_core::Scope::Person,
            identity: None,
        })
        .unwrap();
    for (name, secret, scope) in [
        ("reader-token", READER_SECRET, vouch_core::Scope::Reader),
        ("admin-token", ADMIN_SECRET, vouch_core::Scope::Admin),
    ] {
        store
            .put_token(&ApiToken {
                name: name.into(),
                hash: vouch_server::token_hash(secret),
                created_ms: 1,
                scope,
                identity: None,
            })
            .unwrap();
    }
    // The workers the tests name, each with a worker token bound to it (§17.1.1).
    for w in WORKERS {
        store
            .put_token(&ApiToken {
                name: format!("{w}-token"),
                hash: vouch_server::token_hash(&worker_secret(w)),
                created_ms: 1,
                scope: vouch_core::Scope::Worker,
                identity: Some(w.to_string()),
            })
            .unwrap();
    }
    // As in the CLI: the host writes through its durability buffer; the API reads the store.
    let durable: Arc<dyn Store> = Arc::new(vouch_runtime::durable::Durable::new(store.clone()));
    let host = Arc::new(host_on(durable.clone(), tmp.path()));
    let doctor: vouch_server::DoctorFn = Arc::new(|| {
        let cfg = Config::default();
        let mut p: BTreeMap<DestinationKind, Arc<dyn Provider>> = BTreeMap::new();
        p.insert(
            DestinationKind::Folder,
            Arc::new(FolderProvider::new(std::env::temp_dir())),
        );
        Ok(vouch_adapters::doctor::doctor(&cfg, &p, &[]))
    });
    let mut state = vouch_server::AppState::new(host.clone(), store, doctor);
    state.board = board;
    state.poll_ms = 20;
    state.streams = Arc::new(tokio::sync::Semaphore::new(streams));
    configure(&mut state);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            vouch_server::serve(l, state, std::future::pending())
                .await
                .unwrap();
        });
    });
    let addr = rx.recv().unwrap();
    Server {
        _tmp: tmp,
        base: format!("http://{addr}"),
        host,
        store: durable,
    }
}

fn start() -> Server {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&tmp.path().join("vouch.db")).unwrap());
    start_with(store, tmp, vouch_server::STREAMS_MAX)
}

struct Reply {
    status: u16,
    content_type: String,
    headers: BTreeMap<String, String>,
    body: String,
}

impl Reply {
    fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }
    /// Assert a problem object with this status and code; returns it.
    fn problem(&self, status: u16, code: &str) -> Value {
        assert_eq!(self.status, status, "{}", self.body);
        assert_eq!(
            self.content_type, "application/problem+json",
            "{}",
            self.body
        );
        let p = self.json();
        assert_eq!(p["code"], code, "{p}");
        assert_eq!(p["status"], status, "{p}");
        assert_eq!(p["type"], format!("urn:vouch:problem:{code}"));
        assert!(p["title"].as_str().is_some_and(|t| !t.is_empty()));
        assert!(p["detail"].as_str().is_some_and(|t| !t.is_empty()));
        p
    }
}

impl Server {
    fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<(&str, &str)>,
    ) -> Reply {
        let agent = ureq::AgentBuilder::new().build();
        let mut req = agent.request(method, &format!("{}{path}", self.base));
        if let Some(t) = token {
            let t = token_for(method, path, t, body.map(|b| b.1));
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        let res = match body {
            Some((ct, b)) => req.set("Content-Type", ct).send_string(b),
            None => req.call(),
        };
        let res = match res {
            Ok(r) => r,
            Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("{method} {path}: {e}"),
        };
        let headers = res
            .headers_names()
            .into_iter()
            .filter_map(|h| res.header(&h).map(|v| (h.clone(), v.to_string())))
            .collect();
        Reply {
            status: res.status(),
            content_type: res.content_type().to_string(),
            headers,
            body: res.into_string().unwrap(),
        }
    }
    fn get(&self, path: &str) -> Reply {
        self.call("GET", path, Some(SECRET), None)
    }
    fn post(&self, path: &str, body: Value) -> Reply {
        self.call(
            "POST",
            path,
            Some(SECRET),
            Some(("application/json", &body.to_string())),
        )
    }
    fn delete(&self, path: &str) -> Reply {
        self.call("DELETE", path, Some(SECRET), None)
    }

    fn run(&self, title: &str, turns: Value) -> (String, RunEnd) {
        self.host
            .start(&RunSpec {
                trigger: vouch_core::TriggerKind::Interactive,
                title: title.into(),
                presence: None,
                quiet: false,
                model: json!({"kind": "script", "turns": turns}).into(),
                scope: None,
            })
            .unwrap()
    }
    fn save_run(&self, n: usize) -> String {
        self.run(
            &format!("Save note {n}"),
            json!([
                {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": format!("Notes/{n}.md")}}]}},
                {"deliver": "d1", "payload": {"text": format!("note {n}\n")}},
                {"final": ""}
            ]),
        )
        .0
    }
    /// A run waiting for approval of a webhook send.
    fn send_run(&self, hook: &Hook) -> String {
        let (id, end) = self.run(
            "Post to the hook",
            json!([
                {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": hook.url}}]}},
                {"deliver": "d1", "payload": {"text": "hello"}},
                {"final": ""}
            ]),
        );
        assert!(matches!(end, RunEnd::Suspended { .. }), "{end:?}");
        id
    }
}

/// Every route of the API, with a method.
fn routes(run: &str) -> Vec<(&'static str, String)> {
    vec![
        ("GET", "/api/runs".into()),
        ("POST", "/api/runs".into()),
        ("GET", format!("/api/runs/{run}")),
        ("GET", format!("/api/runs/{run}/journal")),
        ("GET", format!("/api/runs/{run}/receipt")),
        ("GET", format!("/api/runs/{run}/events")),
        ("POST", format!("/api/runs/{run}/deliveries/d1/approve")),
        ("POST", format!("/api/runs/{run}/deliveries/d1/deny")),
        ("POST", format!("/api/runs/{run}/deliveries/d1/edit")),
        ("POST", format!("/api/runs/{run}/answer")),
        ("POST", format!("/api/runs/{run}/cancel")),
        ("POST", format!("/api/runs/{run}/resume")),
        ("GET", "/api/approvals".into()),
        ("GET", "/api/inbox".into()),
        ("GET", "/api/inbox/events".into()),
        ("GET", "/api/schedules".into()),
        ("POST", "/api/schedules".into()),
        ("GET", "/api/schedules/x".into()),
        ("DELETE", "/api/schedules/x".into()),
        ("POST", "/api/schedules/x/run".into()),
        ("GET", "/api/doctor".into()),
        ("GET", "/api/host-key".into()),
        ("GET", "/api/tasks".into()),
        ("GET", "/api/tasks/x".into()),
        ("POST", "/api/tasks/x/cancel".into()),
        ("POST", "/api/tasks".into()),
        ("POST", "/api/tasks/claim-next".into()),
        ("POST", "/api/tasks/x/attempts/1/heartbeat".into()),
        ("POST", "/api/tasks/x/attempts/1/submit".into()),
        ("POST", "/api/tasks/x/attempts/1/fail".into()),
        ("POST", "/api/tasks/x/attempts/1/abort".into()),
        ("PUT", "/api/artifacts/x".into()),
        ("GET", "/api/artifacts/x".into()),
        ("GET", "/api/measures".into()),
        ("GET", "/api/openapi.json".into()),
        ("GET", "/metrics".into()),
        ("GET", "/no/such/route".into()),
    ]
}

#[test]
fn every_route_refuses_a_missing_or_wrong_token_and_changes_nothing() {
    let s = start();
    let hook = hook();
    let run = s.send_run(&hook);
    for (m, path) in routes(&run) {
        for token in [None, Some("vouch_wrong"), Some("")] {
            let r = s.call(
                m,
                &path,
                token,
                Some(("application/json", "{\"hash\":\"x\"}")),
            );
            let p = r.problem(401, "unauthorized");
            assert!(
                r.headers
                    .get("www-authenticate")
                    .is_some_and(|v| v.starts_with("Bearer")),
                "{m} {path}: {:?}",
                r.headers
            );
            assert!(
                p["detail"].as_str().unwrap().contains("vouch token new"),
                "{p}"
            );
        }
    }
    // Nothing was decided: the card is still open and nothing was sent.
    assert_eq!(s.get("/api/approvals").json().as_array().unwrap().len(), 1);
    assert_eq!(*hook.hits.lock().unwrap(), 0);
    // A revoked token is refused from then on.
    assert_eq!(s.get("/api/runs").status, 200);
    assert!(s.store.remove_token("test").unwrap());
    s.get("/api/runs").problem(401, "unauthorized");
}

#[test]
fn runs_are_paged_and_each_run_its_journal_and_receipt_are_readable() {
    let s = start();
    let ids: Vec<String> = (0..3).map(|n| s.save_run(n)).collect();
    let p1 = s.get("/api/runs?limit=2").json();
    assert_eq!(p1["runs"].as_array().unwrap().len(), 2);
    assert_eq!(p1["next_offset"], 2);
    let p2 = s.get("/api/runs?limit=2&offset=2").json();
    assert_eq!(p2["runs"].as_array().unwrap().len(), 1);
    assert_eq!(p2["next_offset"], Value::Null);
    let mut all: Vec<String> = p1["runs"]
        .as_array()
        .unwrap()
        .iter()
        .chain(p2["runs"].as_array().unwrap())
        .map(|r| r["id"].as_str().unwrap().to_string())
        .collect();
    all.sort();
    let mut want = ids.clone();
    want.sort();
    assert_eq!(all, want, "the pages cover every run once");
    for bad in ["limit=0", "limit=501", "limit=abc", "offset=-1"] {
        let p = s
            .get(&format!("/api/runs?{bad}"))
            .problem(422, "invalid_field");
        assert_eq!(p["field"], bad.split('=').next().unwrap());
    }
    s.get("/api/runs?limit=%ZZ").problem(400, "bad_query");

    let id = &ids[0];
    let d = s.get(&format!("/api/runs/{id}")).json();
    assert_eq!(d["run"]["state"], "ended");
    assert_eq!(d["run"]["outcome"], "succeeded");
    assert_eq!(d["deliveries"][0]["id"], "d1");
    assert_eq!(d["deliveries"][0]["status"], "verified");
    assert_eq!(d["deliveries"][0]["destination"], "folder Notes/0.md");
    let journal = s.get(&format!("/api/runs/{id}/journal")).json();
    let seqs: Vec<i64> = journal
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_i64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as i64).collect::<Vec<_>>());
    assert_eq!(
        journal.as_array().unwrap().last().unwrap()["kind"],
        "terminal"
    );
    let tail = s.get(&format!("/api/runs/{id}/journal?after=2")).json();
    assert_eq!(tail[0]["seq"], 3);
    assert_eq!(tail.as_array().unwrap().len(), seqs.len() - 2);
    let r = s.get(&format!("/api/runs/{id}/receipt")).json();
    assert_eq!(r["outcome"], "succeeded");
    assert!(r["receipt"].as_str().unwrap().contains("Notes/0.md"), "{r}");

    for path in [
        "/api/runs/nope",
        "/api/runs/nope/journal",
        "/api/runs/nope/receipt",
        "/api/runs/nope/events",
    ] {
        s.get(path).problem(404, "not_found");
    }
    s.get("/no/such/route").problem(404, "not_found");
    s.call("PUT", "/api/runs", Some(SECRET), None)
        .problem(405, "method_not_allowed");
}

#[test]
fn an_approval_binds_to_its_hash_and_sends_once() {
    let s = start();
    let hook = hook();
    let run = s.send_run(&hook);
    let cards = s.get("/api/approvals").json();
    assert_eq!(cards[0]["run"], run.as_str());
    // The script's `{"text"}` in a webhook's shape (scripts.md).
    assert_eq!(
        cards[0]["payload"],
        json!({"json": json!({"text": "hello"}).to_string()})
    );
    assert!(
        cards[0]["reason"].as_str().is_some_and(|r| !r.is_empty()),
        "the card says why it asks: {}",
        cards[0]
    );
    let hash = cards[0]["payload_hash"].as_str().unwrap().to_string();
    let inbox = s.get("/api/inbox").json();
    assert_eq!(inbox["waiting"], 1);
    assert_eq!(inbox["cards"][0]["run"], run.as_str());

    let approve = format!("/api/runs/{run}/deliveries/d1/approve");
    // Bad input: named, nothing decided.
    let p = s.post(&approve, json!({})).problem(422, "invalid_field");
    assert_eq!(p["field"], "hash");
    let p = s
        .post(&approve, json!({"hash": 5}))
        .problem(422, "invalid_field");
    assert_eq!(p["field"], "hash");
    let p = s
        .post(&approve, json!({"hash": " "}))
        .problem(422, "invalid_field");
    assert_eq!(p["field"], "hash");
    s.call(
        "POST",
        &approve,
        Some(SECRET),
        Some(("application/json", "{\"hash\":")),
    )
    .problem(400, "bad_json");
    s.call("POST", &approve, Some(SECRET), Some(("text/plain", "{}")))
        .problem(415, "unsupported_media_type");
    // A hash that matches no card is refused, and the detail names the card's hash.
    let p = s
        .post(&approve, json!({"hash": "0".repeat(64)}))
        .problem(422, "hash_mismatch");
    assert_eq!(p["field"], "hash");
    assert!(p["detail"].as_str().unwrap().contains(&hash[..12]), "{p}");
    s.post(
        "/api/runs/nope/deliveries/d1/approve",
        json!({"hash": hash}),
    )
    .problem(404, "not_found");
    assert_eq!(*hook.hits.lock().unwrap(), 0);
    assert_eq!(s.get("/api/inbox").json()["waiting"], 1);

    let done = s.post(&approve, json!({"hash": hash}));
    assert_eq!(done.status, 200, "{}", done.body);
    let done = done.json();
    assert_eq!(done["state"], "ended");
    assert_eq!(done["outcome"], "succeeded");
    assert!(done["receipt"].as_str().is_some());
    assert_eq!(done["open_cards"], json!([]));
    assert_eq!(*hook.hits.lock().unwrap(), 1);
    // Approving again (or denying) an ended run is refused; it never sends twice.
    s.post(&approve, json!({"hash": hash}))
        .problem(409, "refused");
    s.post(&format!("/api/runs/{run}/deliveries/d1/deny"), json!({}))
        .problem(409, "refused");
    s.post(&format!("/api/runs/{run}/cancel"), json!({}))
        .problem(409, "refused");
    s.post(&format!("/api/runs/{run}/answer"), json!({"text": "yes"}))
        .problem(409, "refused");
    assert_eq!(*hook.hits.lock().unwrap(), 1);
    assert_eq!(s.get("/api/inbox").json()["waiting"], 0);
}

/// Each refusal says by its status and code what the caller should do: fix the request (422),
/// stop asking this run for that decision (409 `refused`), or try again once the process
/// holding the run lets go (409 `owned_elsewhere`). None of them changes anything.
#[test]
fn refusals_are_coded_by_what_the_caller_should_do() {
    let s = start();
    let hook = hook();
    let run = s.send_run(&hook);
    let hash = s.get("/api/approvals").json()[0]["payload_hash"]
        .as_str()
        .unwrap()
        .to_string();
    // A decision the run is not waiting for: it waits for d1, not d2.
    let p = s
        .post(
            &format!("/api/runs/{run}/deliveries/d2/approve"),
            json!({"hash": hash}),
        )
        .problem(409, "refused");
    assert!(
        p["detail"].as_str().unwrap().contains("d1"),
        "names what it waits for: {p}"
    );
    s.post(&format!("/api/runs/{run}/deliveries/d2/deny"), json!({}))
        .problem(409, "refused");
    // A bad request: a payload that is not a JSON object.
    let p = s
        .post(
            &format!("/api/runs/{run}/deliveries/d1/edit"),
            json!({"payload": "just text"}),
        )
        .problem(422, "invalid_field");
    assert_eq!(p["field"], "payload");
    // A run another live process holds: not the caller's fault, and not final.
    let now = s.host.now_ms();
    assert!(s
        .store
        .lease_run(&run, "host-b", now, now + 600_000)
        .unwrap());
    let p = s
        .post(&format!("/api/runs/{run}/cancel"), json!({}))
        .problem(409, "owned_elsewhere");
    assert!(p["detail"].as_str().unwrap().contains("try again"), "{p}");
    s.store.release_run(&run, "host-b").unwrap();
    assert_eq!(
        s.get("/api/approvals").json()[0]["payload_hash"],
        hash.as_str()
    );
    assert_eq!(*hook.hits.lock().unwrap(), 0);
    // A run that is not waiting at all: it has ended.
    let saved = s.save_run(3);
    let p = s
        .post(&format!("/api/runs/{saved}/answer"), json!({"text": "yes"}))
        .problem(409, "refused");
    assert!(
        p["detail"].as_str().unwrap().contains("already ended"),
        "{p}"
    );
}

#[test]
fn edit_supersedes_deny_refuses_cancel_withdraws_and_resume_needs_an_interrupted_run() {
    let s = start();
    let hook = hook();
    let run = s.send_run(&hook);
    let old = s.get("/api/approvals").json()[0]["payload_hash"]
        .as_str()
        .unwrap()
        .to_string();
    let edit = format!("/api/runs/{run}/deliveries/d1/edit");
    let p = s
        .post(&edit, json!({"text": "no wrapper"}))
        .problem(422, "invalid_field");
    assert_eq!(p["field"], "payload");
    // An edit that does not fit a webhook's payload is refused, naming what is wrong.
    let misfit = s.post(&edit, json!({"payload": {"text": "edited"}}));
    assert!((400..500).contains(&misfit.status), "{}", misfit.body);
    assert!(misfit.body.contains("json"), "{}", misfit.body);
    let e = s.post(
        &edit,
        json!({"payload": {"json": "{\"text\": \"edited\"}"}}),
    );
    assert_eq!(e.status, 200, "{}", e.body);
    let new = e.json()["payload_hash"].as_str().unwrap().to_string();
    assert_ne!(new, old);
    let cards = s.get("/api/approvals").json();
    assert_eq!(cards.as_array().unwrap().len(), 1);
    assert_eq!(cards[0]["payload_hash"], new.as_str());
    assert_eq!(
        cards[0]["payload"],
        json!({"json": "{\"text\": \"edited\"}"})
    );
    // The superseded hash approves nothing.
    s.post(
        &format!("/api/runs/{run}/deliveries/d1/approve"),
        json!({"hash": old}),
    )
    .problem(409, "conflict");
    let d = s.post(&format!("/api/runs/{run}/deliveries/d1/deny"), json!({}));
    assert_eq!(d.status, 200, "{}", d.body);
    assert_eq!(d.json()["state"], "ended");
    assert_eq!(*hook.hits.lock().unwrap(), 0);

    let run2 = s.send_run(&hook);
    let p = s
        .post(&format!("/api/runs/{run2}/answer"), json!({"text": ""}))
        .problem(422, "invalid_field");
    assert_eq!(p["field"], "text");
    let c = s.post(&format!("/api/runs/{run2}/cancel"), json!({}));
    assert_eq!(c.status, 200, "{}", c.body);
    let c = c.json();
    assert_eq!(
        (c["state"].as_str(), c["ended_by"].as_str()),
        (Some("ended"), Some("cancel"))
    );
    assert_eq!(*hook.hits.lock().unwrap(), 0);
    // Resume refuses a run that has not ended, and one with nothing left to do.
    let run3 = s.send_run(&hook);
    s.post(&format!("/api/runs/{run3}/resume"), json!({}))
        .problem(409, "refused");
    let saved = s.save_run(9);
    s.post(&format!("/api/runs/{saved}/resume"), json!({}))
        .problem(409, "refused");
    s.post("/api/runs/nope/resume", json!({}))
        .problem(404, "not_found");
    s.post("/api/runs/nope/cancel", json!({}))
        .problem(404, "not_found");
}

#[test]
fn schedules_are_added_listed_and_removed_with_each_bad_field_named() {
    let s = start();
    let good = json!({"name": "brief", "cron": "0 7 * * *", "tz": "Europe/Berlin", "routine": {"prompt": "Morning brief", "script": [{"final": ""}]}});
    let r = s.post("/api/schedules", good.clone());
    assert_eq!(r.status, 201, "{}", r.body);
    let created = r.json();
    assert_eq!(created["routine"]["model"]["kind"], "script");
    assert_eq!(created["catch_up"], "skip");
    assert_eq!(created["grace_ms"], 900_000);
    s.post("/api/schedules", good.clone())
        .problem(409, "conflict");
    // Run now: the routine as the person's own run, outside the slots (none is consumed).
    let r = s.post("/api/schedules/brief/run", json!({}));
    assert_eq!(r.status, 200, "{}", r.body);
    let now = r.json();
    assert_eq!(now["state"], "ended", "{now}");
    let run = s
        .get(&format!("/api/runs/{}", now["run"].as_str().unwrap()))
        .json();
    assert_eq!(run["run"]["trigger"], "interactive", "{run}");
    assert_eq!(run["run"]["title"], "Morning brief", "{run}");
    s.post("/api/schedules/nope/run", json!({}))
        .problem(404, "not_found");
    for (field, body) in [
        (
            "cron",
            json!({"name": "b2", "cron": "every day", "routine": {"prompt": "x"}}),
        ),
        (
            "tz",
            json!({"name": "b2", "cron": "0 7 * * *", "tz": "Mars/Olympus", "routine": {"prompt": "x"}}),
        ),
        (
            "routine",
            json!({"name": "b2", "cron": "0 7 * * *", "routine": {"script": []}}),
        ),
        ("routine", json!({"name": "b2", "cron": "0 7 * * *"})),
        (
            "catch_up",
            json!({"name": "b2", "cron": "0 7 * * *", "catch_up": "all", "routine": {"prompt": "x"}}),
        ),
        (
            "name",
            json!({"name": " ", "cron": "0 7 * * *", "routine": {"prompt": "x"}}),
        ),
        (
            "grace_ms",
            json!({"name": "b2", "cron": "0 7 * * *", "grace_ms": "soon", "routine": {"prompt": "x"}}),
        ),
    ] {
        let p = s
            .post("/api/schedules", body.clone())
            .problem(422, "invalid_field");
        assert_eq!(p["field"], field, "{body}: {p}");
    }
    let p = s
        .post(
            "/api/schedules",
            json!({"name": "b3", "cron": "0 7 * * *", "routine": {"prompt": "x"}, "colour": 1}),
        )
        .problem(422, "invalid_field");
    assert!(p["detail"].as_str().unwrap().contains("colour"), "{p}");
    let list = s.get("/api/schedules").json();
    assert_eq!(list.as_array().unwrap().len(), 1);
    assert_eq!(s.get("/api/schedules/brief").json()["tz"], "Europe/Berlin");
    s.get("/api/schedules/none").problem(404, "not_found");
    assert_eq!(s.delete("/api/schedules/brief").status, 204);
    s.delete("/api/schedules/brief").problem(404, "not_found");
    assert_eq!(s.get("/api/schedules").json(), json!([]));
}

#[test]
fn the_doctor_lists_every_destination_kind() {
    let s = start();
    let d = s.get("/api/doctor").json();
    let kinds: Vec<&str> = d["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds.len(), DestinationKind::ALL.len());
    let email = d["destinations"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["kind"] == "email")
        .unwrap();
    assert_eq!(email["level"], "needs_setup");
    assert!(email["connect_step"].as_str().unwrap().contains("[email]"));
}

/// Read an SSE response to its end: (id, event, data) triples.
fn sse_all(r: impl Read) -> Vec<(i64, String, Value)> {
    let mut out = vec![];
    let (mut id, mut ev, mut data) = (None, String::new(), String::new());
    for line in BufReader::new(r).lines() {
        let line = line.unwrap();
        if line.is_empty() {
            if !data.is_empty() {
                out.push((
                    id.unwrap_or(-1),
                    ev.clone(),
                    serde_json::from_str(&data).unwrap(),
                ));
            }
            (id, ev, data) = (None, String::new(), String::new());
        } else if let Some(v) = line.strip_prefix("id:") {
            id = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("event:") {
            ev = v.trim().to_string();
        } else if let Some(v) = line.strip_prefix("data:") {
            data.push_str(v.trim_start());
        }
    }
    out
}

fn sse(s: &Server, path: &str, last: Option<i64>) -> ureq::Response {
    let mut req =
        ureq::get(&format!("{}{path}", s.base)).set("Authorization", &format!("Bearer {SECRET}"));
    if let Some(l) = last {
        req = req.set("Last-Event-ID", &l.to_string());
    }
    let res = req.call().unwrap();
    assert_eq!(res.content_type(), "text/event-stream");
    res
}

#[test]
fn run_events_stream_as_they_become_durable_and_resume_after_last_event_id() {
    let s = start();
    let hook = hook();
    let run = s.send_run(&hook);
    let durable = s
        .get(&format!("/api/runs/{run}/journal"))
        .json()
        .as_array()
        .unwrap()
        .len() as i64;
    // A live stream, resumed from the middle: it sees the rest, then what the approval adds,
    // and ends after the terminal event.
    let res = sse(&s, &format!("/api/runs/{run}/events"), Some(2));
    let reader = std::thread::spawn(move || sse_all(res.into_reader()));
    let hash = s.get("/api/approvals").json()[0]["payload_hash"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        s.post(
            &format!("/api/runs/{run}/deliveries/d1/approve"),
            json!({"hash": hash})
        )
        .status,
        200
    );
    let events = reader.join().unwrap();
    let journal = s.get(&format!("/api/runs/{run}/journal")).json();
    let total = journal.as_array().unwrap().len() as i64;
    assert!(total > durable);
    let ids: Vec<i64> = events.iter().map(|e| e.0).collect();
    assert_eq!(
        ids,
        (3..=total).collect::<Vec<_>>(),
        "no gap, no repeat, from Last-Event-ID + 1"
    );
    let last = events.last().unwrap();
    assert_eq!(last.1, "terminal");
    for (id, kind, data) in &events {
        let j = &journal[(*id - 1) as usize];
        assert_eq!((&data["kind"], &data["hash"]), (&j["kind"], &j["hash"]));
        assert_eq!(kind, j["kind"].as_str().unwrap());
    }
    // After the end: a stream resumed at the last id sends nothing and closes; from 0, all.
    assert!(
        sse_all(sse(&s, &format!("/api/runs/{run}/events"), Some(total)).into_reader()).is_empty()
    );
    assert_eq!(
        sse_all(sse(&s, &format!("/api/runs/{run}/events"), None).into_reader()).len() as i64,
        total
    );
    assert_eq!(
        sse_all(
            sse(
                &s,
                &format!("/api/runs/{run}/events?after={}", total - 1),
                None
            )
            .into_reader()
        )
        .len(),
        1
    );
    let r = s.call(
        "GET",
        &format!("/api/runs/{run}/events"),
        Some(SECRET),
        None,
    );
    assert_eq!(r.status, 200);
    let bad = ureq::get(&format!("{}/api/runs/{run}/events", s.base))
        .set("Authorization", &format!("Bearer {SECRET}"))
        .set("Last-Event-ID", "seven")
        .call();
    match bad {
        Err(ureq::Error::Status(422, r)) => {
            let p: Value = serde_json::from_str(&r.into_string().unwrap()).unwrap();
            assert_eq!(p["field"], "Last-Event-ID");
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn the_inbox_stream_sends_the_inbox_then_each_change() {
    let s = start();
    let hook = hook();
    let res = sse(&s, "/api/inbox/events", None);
    let mut lines = BufReader::new(res.into_reader()).lines();
    let mut next_inbox = || -> Value {
        loop {
            let line = lines.next().unwrap().unwrap();
            if let Some(d) = line.strip_prefix("data:") {
                return serde_json::from_str(d.trim_start()).unwrap();
            }
        }
    };
    assert_eq!(next_inbox()["waiting"], 0);
    let run = s.send_run(&hook);
    let inbox = next_inbox();
    assert_eq!(inbox["waiting"], 1);
    assert_eq!(inbox["cards"][0]["run"], run.as_str());
    s.post(&format!("/api/runs/{run}/cancel"), json!({}));
    // The card closes and the run ends: the stream reaches that state (maybe in two events).
    let inbox = loop {
        let i = next_inbox();
        if i["ended"][0]["run"]["id"] == run.as_str() {
            break i;
        }
    };
    assert_eq!(inbox["waiting"], 0);
    assert_eq!(inbox["ended"][0]["run"]["id"], run.as_str());
}

#[test]
fn the_openapi_document_is_the_committed_one() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("openapi.json");
    let generated = vouch_server::openapi::json();
    if std::env::var_os("VOUCH_UPDATE_OPENAPI").is_some() {
        std::fs::write(&path, format!("{generated}\n")).unwrap();
    }
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    // Name the first line that differs rather than printing both documents.
    if let Some((i, (c, g))) = committed
        .trim_end()
        .lines()
        .zip(generated.lines())
        .enumerate()
        .find(|(_, (c, g))| c != g)
    {
        panic!("the API changed at line {}: committed `{c}`, generated `{g}`; review it, then run with VOUCH_UPDATE_OPENAPI=1 to commit the new document", i + 1);
    }
    assert_eq!(
        committed.trim_end().lines().count(),
        generated.lines().count(),
        "the API changed (lines added or removed); review it, then run with VOUCH_UPDATE_OPENAPI=1"
    );
    let s = start();
    let served = s.get("/api/openapi.json").json();
    assert_eq!(served, serde_json::from_str::<Value>(&generated).unwrap());
    // Every route the server answers is documented.
    for (m, path) in routes("{id}") {
        if path.starts_with("/no/") {
            continue;
        }
        let param = if path.starts_with("/api/tasks") {
            "/{id}"
        } else if path.starts_with("/api/artifacts") {
            "/{cid}"
        } else {
            "/{name}"
        };
        let path = path
            .replace("/d1/", "/{delivery}/")
            .replace("/attempts/1/", "/attempts/{n}/")
            .replace("/x", param);
        assert!(
            served["paths"][&path][m.to_lowercase()].is_object(),
            "{m} {path} is not in the document"
        );
    }
}

#[test]
fn metrics_count_runs_deliveries_and_requests_after_a_run() {
    let s = start();
    let hook = hook();
    for n in 0..2 {
        s.save_run(n);
    }
    let run = s.send_run(&hook);
    let r = s.get("/metrics");
    assert_eq!(r.status, 200);
    assert!(
        r.content_type.starts_with("text/plain"),
        "{}",
        r.content_type
    );
    let m = r.body;
    for line in [
        "vouch_runs{state=\"ended\"} 2",
        "vouch_runs{state=\"suspended\"} 1",
        "vouch_runs_ended{outcome=\"succeeded\"} 2",
        "vouch_deliveries{status=\"verified\"} 2",
        "vouch_waiting 1",
        "vouch_notifications_pending 0",
    ] {
        assert!(m.lines().any(|l| l == line), "missing `{line}` in\n{m}");
    }
    let hash = s.get("/api/approvals").json()[0]["payload_hash"]
        .as_str()
        .unwrap()
        .to_string();
    s.post(
        &format!("/api/runs/{run}/deliveries/d1/approve"),
        json!({"hash": hash}),
    );
    let m = s.get("/metrics").body;
    for line in [
        "vouch_runs{state=\"ended\"} 3",
        "vouch_runs_ended{outcome=\"succeeded\"} 3",
        "vouch_deliveries{status=\"verified\"} 3",
        "vouch_waiting 0",
        "vouch_http_decisions_total{decision=\"approve\"} 1",
        "vouch_http_requests_total{route=\"/api/runs/{id}/deliveries/{delivery}/approve\",status=\"200\"} 1",
        "# TYPE vouch_commit_latency_seconds histogram",
        "# TYPE vouch_claim_latency_seconds histogram",
    ] {
        assert!(m.lines().any(|l| l == line), "missing `{line}` in\n{m}");
    }
    // The host committed its runs' journals: each commit is one observation.
    let commits: u64 = m
        .lines()
        .find_map(|l| l.strip_prefix("vouch_commit_latency_seconds_count "))
        .unwrap()
        .parse()
        .unwrap();
    assert!(commits >= 3, "{m}");
}

/// The same API on PostgreSQL: authentication and a read through the server.
#[test]
fn on_postgresql_tokens_authenticate_and_runs_are_served() {
    let url = std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!("vouch_test_http_{}", std::process::id());
    let store = vouch_store_postgres::PostgresStore::open(&url, &schema).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let s = start_with(Arc::new(store), tmp, 4);
    let id = s.save_run(1);
    s.call("GET", "/api/runs", Some("vouch_wrong"), None)
        .problem(401, "unauthorized");
    let page = s.get("/api/runs").json();
    assert_eq!(page["runs"][0]["id"], id.as_str());
    assert_eq!(
        s.get(&format!("/api/runs/{id}")).json()["deliveries"][0]["status"],
        "verified"
    );
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .unwrap();
}

#[test]
fn an_answer_continues_a_run_that_asked_its_one_question() {
    let s = start();
    let (run, end) = s.run(
        "Save the memo",
        json!([
            {"clarify": "Which memo?"},
            {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Memos/m.md"}}]}},
            {"deliver": "d1", "payload": {"text": "memo\n"}},
            {"final": ""}
        ]),
    );
    assert!(matches!(end, RunEnd::Suspended { .. }), "{end:?}");
    let cards = s.get("/api/approvals").json();
    assert_eq!(cards[0]["run"], run.as_str());
    assert_eq!(cards[0]["delivery"], Value::Null);
    assert_eq!(cards[0]["summary"], "Which memo?");
    let p = s
        .post(&format!("/api/runs/{run}/answer"), json!({"answer": "x"}))
        .problem(422, "invalid_field");
    assert_eq!(p["field"], "text");
    let r = s.post(
        &format!("/api/runs/{run}/answer"),
        json!({"text": "the one from today"}),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    let r = r.json();
    assert_eq!(
        (r["state"].as_str(), r["outcome"].as_str()),
        (Some("ended"), Some("succeeded"))
    );
    s.post(&format!("/api/runs/{run}/answer"), json!({"text": "again"}))
        .problem(409, "refused");
}

#[test]
fn event_streams_are_bounded_and_one_more_is_503() {
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&tmp.path().join("vouch.db")).unwrap());
    let s = start_with(store, tmp, 1);
    let run = s.save_run(1);
    let res = sse(&s, "/api/inbox/events", None);
    let mut lines = BufReader::new(res.into_reader()).lines();
    // The first stream is established (it has sent the inbox).
    while !lines.next().unwrap().unwrap().starts_with("data:") {}
    let r = s.get(&format!("/api/runs/{run}/events"));
    r.problem(503, "unavailable");
    assert!(r.headers.contains_key("retry-after"), "{:?}", r.headers);
    s.get("/api/inbox/events").problem(503, "unavailable");
    // Plain routes are not limited by open streams.
    assert_eq!(s.get("/api/inbox").status, 200);
}

#[test]
fn tasks_are_listed_read_and_cancelled() {
    let tmp = tempfile::tempdir().unwrap();
    let sqlite = Arc::new(SqliteStore::open(&tmp.path().join("vouch.db")).unwrap());
    let board: Arc<dyn vouch_store::board::BoardStore> = sqlite.clone();
    board
        .offer(&vouch_store::board_conformance::new_task("t-1", 3, 10))
        .unwrap();
    board
        .offer(&vouch_store::board_conformance::new_task("t-2", 3, 11))
        .unwrap();
    let s = start_board(sqlite, Some(board), tmp, vouch_server::STREAMS_MAX);
    let list = s.get("/api/tasks").json();
    let ids: Vec<&str> = list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["t-1", "t-2"]);
    assert_eq!(
        s.get("/api/tasks?limit=1").json()["tasks"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let p = s
        .get("/api/tasks?state=sleeping")
        .problem(422, "invalid_field");
    assert_eq!(p["field"], "state");
    let one = s.get("/api/tasks/t-1").json();
    assert_eq!(one["task"]["state"], "queued");
    assert_eq!(one["attempts"], json!([]));
    s.get("/api/tasks/nope").problem(404, "not_found");
    let c = s.post("/api/tasks/t-1/cancel", json!({}));
    assert_eq!(c.status, 200, "{}", c.body);
    assert_eq!(c.json()["task"]["state"], "cancelled");
    assert_eq!(
        s.get("/api/tasks?state=cancelled").json()["tasks"][0]["id"],
        "t-1"
    );
    assert_eq!(
        s.get("/api/tasks?state=queued").json()["tasks"][0]["id"],
        "t-2"
    );
    s.post("/api/tasks/nope/cancel", json!({}))
        .problem(404, "not_found");
    s.call("GET", "/api/tasks", None, None)
        .problem(401, "unauthorized");
}

/// The `vouch_tasks` gauge is the board's own count by state, exact past the bound of one
/// listing (which it once was: a state with more tasks than `TASK_LIST_MAX` showed that).
#[test]
fn the_tasks_gauge_counts_every_task_past_the_listing_bound() {
    let tmp = tempfile::tempdir().unwrap();
    let sqlite = Arc::new(SqliteStore::open(&tmp.path().join("vouch.db")).unwrap());
    let board: Arc<dyn vouch_store::board::BoardStore> = sqlite.clone();
    let queued = vouch_store::board::TASK_LIST_MAX + 1;
    for i in 0..=queued {
        board
            .offer(&vouch_store::board_conformance::new_task(
                &format!("g-{i}"),
                1,
                10,
            ))
            .unwrap();
    }
    board.cancel("g-0", 20).unwrap();
    let s = start_board(sqlite, Some(board), tmp, vouch_server::STREAMS_MAX);
    let m = s.get("/metrics").body;
    let gauge: Vec<&str> = m
        .lines()
        .filter(|l| l.starts_with("vouch_tasks{"))
        .collect();
    let expected: Vec<String> = vouch_core::board::TaskState::ALL
        .iter()
        .map(|st| {
            let n = match st.as_str() {
                "queued" => queued,
                "cancelled" => 1,
                _ => 0,
            };
            format!("vouch_tasks{{state=\"{}\"}} {n}", st.as_str())
        })
        .collect();
    assert_eq!(gauge, expected, "{m}");
}

/// A home whose server has the board, identities, artifacts and the host's key, on SQLite or
/// on PostgreSQL (a schema of its own, dropped with the returned guard).
fn start_workers(artifact_bytes_max: u64) -> (Server, Arc<SqliteStore>) {
    let tmp = tempfile::tempdir().unwrap();
    let sqlite = Arc::new(SqliteStore::open(&tmp.path().join("vouch.db")).unwrap());
    let s = start_workers_on(
        sqlite.clone(),
        sqlite.clone(),
        sqlite.clone(),
        tmp,
        artifact_bytes_max,
    );
    (s, sqlite)
}

fn start_workers_on(
    store: Arc<dyn Store>,
    board: Arc<dyn vouch_store::board::BoardStore>,
    ids: Arc<dyn vouch_store::IdentityStore>,
    tmp: tempfile::TempDir,
    artifact_bytes_max: u64,
) -> Server {
    let home = tmp.path().to_path_buf();
    start_work(
        store,
        Some(board),
        tmp,
        vouch_server::STREAMS_MAX,
        move |st| {
            st.work.home = Some(home.clone());
            st.work.identities = Some(ids);
            st.work.artifacts = Some(Arc::new(vouch_artifacts::LocalStore::new(
                &home.join("objects"),
                artifact_bytes_max,
            )));
            st.work.artifact_bytes_max = artifact_bytes_max;
        },
    )
}

struct DropSchema(String, String);
impl Drop for DropSchema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.0, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.1));
        }
    }
}

/// The workers' server on either backend, with its identity store; on PostgreSQL in a schema
/// of its own named after `test`, since tests run at once.
fn workers_on(
    pg: bool,
    test: &str,
) -> (
    Server,
    Arc<dyn vouch_store::IdentityStore>,
    Option<DropSchema>,
) {
    if !pg {
        let (s, sqlite) = start_workers(1 << 20);
        return (s, sqlite, None);
    }
    let url = std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!("vouch_test_{test}_{}", std::process::id());
    let guard = DropSchema(url.clone(), schema.clone());
    let pgs = Arc::new(vouch_store_postgres::PostgresStore::open(&url, &schema).unwrap());
    let s = start_workers_on(
        pgs.clone(),
        pgs.clone(),
        pgs.clone(),
        tempfile::tempdir().unwrap(),
        1 << 20,
    );
    (s, pgs, Some(guard))
}

fn now_ms() -> i64 {
    use vouch_runtime::clock::Clock;
    SystemClock.now_ms()
}

/// A fresh nonce for each signed statement of a test (§13.6.3).
fn nonce() -> String {
    static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("nonce-{}-{n:08}", std::process::id())
}

/// The claim a worker signs, written out as the contract documents it (§13.6.2).
fn claim_body(w: &vouch_identity::Identity, at_ms: i64) -> Value {
    let policy = json!({"profile": "default", "context": "autonomous"});
    let fingerprint =
        vouch_artifacts::content_id(vouch_core::canonical_json(&policy).unwrap().as_bytes());
    let nonce = nonce();
    let statement = json!({"claim": {"claimant": w.name(), "task": null, "profile": "default", "policy_fingerprint": fingerprint, "at_ms": at_ms, "nonce": nonce}});
    json!({"claimant": w.name(), "at_ms": at_ms, "nonce": nonce, "signature": w.sign(&statement).unwrap()})
}

/// `body` with the report statement signed by `w` (§13.6.2): `at_ms`, `nonce`, `signature`.
fn signed_report(
    w: &vouch_identity::Identity,
    task: &str,
    n: u32,
    epoch: i64,
    outcome: &str,
    output: Option<&Value>,
    mut body: Value,
) -> Value {
    let output = output
        .map(|r| vouch_artifacts::json_content_id(r).unwrap())
        .map(Value::from)
        .unwrap_or(Value::Null);
    let (at_ms, nonce) = (now_ms(), nonce());
    let run = body.get("run").cloned().unwrap_or(Value::Null);
    let sig = w
        .sign(&json!({"report": {"task": task, "attempt": n, "claimant": w.name(), "epoch": epoch, "outcome": outcome, "output": output, "run": run, "at_ms": at_ms, "nonce": nonce}}))
        .unwrap();
    body["at_ms"] = json!(at_ms);
    body["nonce"] = json!(nonce);
    body["signature"] = json!(sig);
    body
}

/// A heartbeat signed by `w` as the claimant of attempt `n` at `epoch` (§13.6.2).
fn beat(w: &vouch_identity::Identity, task: &str, n: u32, epoch: i64) -> Value {
    let (at_ms, nonce) = (now_ms(), nonce());
    let sig = w
        .sign(&json!({"heartbeat": {"task": task, "attempt": n, "claimant": w.name(), "epoch": epoch, "at_ms": at_ms, "nonce": nonce}}))
        .unwrap();
    json!({"claimant": w.name(), "epoch": epoch, "at_ms": at_ms, "nonce": nonce, "signature": sig})
}

/// The query of an artifact upload signed by `w` (§13.6.2).
fn artifact_query(
    w: &vouch_identity::Identity,
    cid: &str,
    task: &str,
    n: u32,
    epoch: i64,
) -> String {
    let (at_ms, nonce) = (now_ms(), nonce());
    let sig = w
        .sign(&json!({"artifact": {"cid": cid, "task": task, "attempt": n, "claimant": w.name(), "epoch": epoch, "at_ms": at_ms, "nonce": nonce}}))
        .unwrap();
    format!(
        "task={task}&attempt={n}&claimant={}&epoch={epoch}&at_ms={at_ms}&nonce={nonce}&signature={sig}",
        w.name()
    )
}

#[test]
fn tasks_are_offered_claimed_heartbeaten_and_reported_only_with_the_claimants_signature() {
    workers_flow(false);
}

#[test]
fn on_postgresql_workers_claim_and_report_over_http() {
    workers_flow(true);
}

fn workers_flow(pg: bool) {
    let (s, ids, _schema) = workers_on(pg, "workers");
    let w1 = vouch_identity::Identity::from_secret("w1", &[1; 32]);
    let w2 = vouch_identity::Identity::from_secret("w2", &[2; 32]);
    ids.put_identity(&w1.record(1)).unwrap();
    ids.put_identity(&w2.record(1)).unwrap();

    // Offer, with an idempotency key: the same request returns the same task.
    let offer = json!({"type": "freeform", "brief": "Summarise the notes", "max_attempts": 2});
    let post_key = |body: &Value, key: &str| {
        let agent = ureq::AgentBuilder::new().build();
        let r = agent
            .post(&format!("{}/api/tasks", s.base))
            .set("Authorization", &format!("Bearer {SECRET}"))
            .set("Idempotency-Key", key)
            .set("Content-Type", "application/json")
            .send_string(&body.to_string());
        match r {
            Ok(r) => (r.status(), r.into_string().unwrap()),
            Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap()),
            Err(e) => panic!("{e}"),
        }
    };
    let (code, body) = post_key(&offer, "k1");
    assert_eq!(code, 201, "{body}");
    let first: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(first["created"], true);
    let task = first["task"]["id"].as_str().unwrap().to_string();
    assert_eq!(first["task"]["state"], "queued");
    let (code, body) = post_key(&offer, "k1");
    assert_eq!(code, 200, "{body}");
    let again: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        (again["created"].clone(), again["task"]["id"].as_str()),
        (json!(false), Some(task.as_str()))
    );
    let (code, body) = post_key(
        &json!({"type": "freeform", "brief": "Something else"}),
        "k1",
    );
    assert_eq!(code, 409, "{body}");
    // Each bad field is named.
    for (body, field) in [
        (json!({"type": "poem", "brief": "x"}), "type"),
        (json!({"type": "freeform", "brief": " "}), "brief"),
        (
            json!({"type": "freeform", "brief": "x", "lease_ms": 10, "heartbeat_ms": 10}),
            "heartbeat_ms",
        ),
        (
            json!({"type": "freeform", "brief": "x", "max_attempts": 0}),
            "max_attempts",
        ),
        (
            json!({"type": "freeform", "brief": "x", "input": {"brief": 5}}),
            "input",
        ),
        (json!({"type": "freeform"}), "brief"),
        (
            json!({"type": "freeform", "brief": "x", "colour": "red"}),
            "colour",
        ),
    ] {
        let p = s
            .post("/api/tasks", body.clone())
            .problem(422, "invalid_field");
        assert_eq!(p["field"], field, "{body}: {p}");
    }

    // A claim signed by another key, or far from the host's clock, is refused; nothing changes.
    let mut forged = claim_body(&w1, now_ms());
    forged["signature"] = claim_body(&w2, forged["at_ms"].as_i64().unwrap())["signature"].clone();
    let p = s
        .post("/api/tasks/claim-next", forged)
        .problem(403, "bad_signature");
    assert_eq!(p["field"], "signature");
    assert!(p["detail"].as_str().unwrap().contains("\"claim\""), "{p}");
    let p = s
        .post(
            "/api/tasks/claim-next",
            claim_body(&w1, now_ms() - 3_600_000),
        )
        .problem(422, "invalid_field");
    assert_eq!(p["field"], "at_ms");
    assert_eq!(
        s.get(&format!("/api/tasks/{task}")).json()["task"]["state"],
        "queued"
    );

    let claim = claim_body(&w1, now_ms());
    let c = s.post("/api/tasks/claim-next", claim.clone());
    assert_eq!(c.status, 200, "{}", c.body);
    let c = c.json();
    // The same signed claim again is a replay, refused before it could claim another task.
    let p = s
        .post("/api/tasks/claim-next", claim)
        .problem(409, "replayed");
    assert_eq!(p["field"], "nonce", "{p}");
    // The claim opened the attempt's run on the host: every report names it (§13.2).
    let run1 = c["run"].as_str().unwrap().to_string();
    assert_eq!(c["attempt"]["run_id"], run1.as_str(), "{c}");
    assert_eq!(
        (c["claimed"].clone(), c["task"]["id"].as_str()),
        (json!(true), Some(task.as_str()))
    );
    let n = c["attempt"]["n"].as_u64().unwrap() as u32;
    let epoch = c["attempt"]["epoch"].as_i64().unwrap();
    assert_eq!(n, 1);
    let none = s
        .post("/api/tasks/claim-next", claim_body(&w2, now_ms()))
        .json();
    assert_eq!(none["claimed"], false, "{none}");

    // Heartbeats: only the claimant, with its epoch.
    let hb = format!("/api/tasks/{task}/attempts/{n}/heartbeat");
    s.post(&hb, beat(&w2, &task, n, epoch))
        .problem(409, "refused");
    s.post(&hb, beat(&w1, &task, n, epoch + 1))
        .problem(409, "refused");
    // Unsigned, or signed by another key: refused, and the lease is not kept.
    let p = s
        .post(&hb, json!({"claimant": "w1", "epoch": epoch}))
        .problem(422, "invalid_field");
    assert!(p["detail"].as_str().unwrap().contains("at_ms"), "{p}");
    let mut forged = beat(&w1, &task, n, epoch);
    forged["signature"] = beat(&w2, &task, n, epoch)["signature"].clone();
    let p = s.post(&hb, forged).problem(403, "bad_signature");
    assert!(
        p["detail"].as_str().unwrap().contains("\"heartbeat\""),
        "{p}"
    );
    let signed = beat(&w1, &task, n, epoch);
    let h = s.post(&hb, signed.clone());
    assert_eq!(h.status, 200, "{}", h.body);
    // The same signed heartbeat again is a replay.
    let p = s.post(&hb, signed).problem(409, "replayed");
    assert_eq!(p["field"], "nonce", "{p}");
    assert_eq!(h.json()["cancelled"], false);
    assert_eq!(
        s.get(&format!("/api/tasks/{task}")).json()["task"]["state"],
        "running"
    );
    s.post(
        "/api/tasks/nope/attempts/1/heartbeat",
        beat(&w1, "nope", 1, 1),
    )
    .problem(404, "not_found");
    s.post(&hb, json!({"claimant": "w1"}))
        .problem(422, "invalid_field");

    // Artifacts: the claimant's, hashed to their id.
    let bytes = b"the summary, in full";
    let cid = vouch_artifacts::content_id(bytes);
    let put_query = |query: &str, cid: &str, claimant: &str, body: &[u8]| {
        let agent = ureq::AgentBuilder::new().build();
        let r = agent
            .put(&format!("{}/api/artifacts/{cid}?{query}", s.base))
            .set(
                "Authorization",
                &format!("Bearer {}", worker_secret(claimant)),
            )
            .set("Content-Type", "application/octet-stream")
            .send_bytes(body);
        match r {
            Ok(r) => (r.status(), r.into_string().unwrap()),
            Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap()),
            Err(e) => panic!("{e}"),
        }
    };
    let put = |cid: &str, claimant: &str, body: &[u8]| {
        let w = if claimant == "w1" { &w1 } else { &w2 };
        put_query(
            &artifact_query(w, cid, &task, n, epoch),
            cid,
            claimant,
            body,
        )
    };
    let (code, body) = put(&cid, "w2", bytes);
    assert_eq!(code, 409, "{body}");
    // Unsigned, or the same signed upload twice: refused.
    let unsigned = format!("task={task}&attempt={n}&claimant=w1&epoch={epoch}");
    let (code, body) = put_query(&unsigned, &cid, "w1", bytes);
    assert_eq!(code, 422, "{body}");
    let once = artifact_query(&w1, &cid, &task, n, epoch);
    let (code, body) = put_query(&once, &cid, "w1", bytes);
    assert_eq!(code, 201, "{body}");
    let (code, body) = put_query(&once, &cid, "w1", bytes);
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("\"code\":\"replayed\""), "{body}");
    let (code, body) = put(&vouch_artifacts::content_id(b"other"), "w1", bytes);
    assert_eq!(code, 422, "{body}");
    assert!(body.contains("\"field\":\"cid\""), "{body}");
    let (code, body) = put("sha256:XYZ", "w1", bytes);
    assert_eq!(code, 422, "{body}");
    let (code, body) = put(&cid, "w1", bytes);
    assert_eq!(code, 201, "{body}");
    assert_eq!(
        s.get(&format!("/api/artifacts/{cid}")).body.as_bytes(),
        bytes
    );
    s.get(&format!(
        "/api/artifacts/{}",
        vouch_artifacts::content_id(b"never")
    ))
    .problem(404, "not_found");
    s.get("/api/artifacts/md5:abc")
        .problem(422, "invalid_field");

    // Submit: a malformed result names its path and costs a repair; a forged report changes
    // nothing; the claimant's signed report completes the task.
    let submit = format!("/api/tasks/{task}/attempts/{n}/submit");
    let bad = json!({"summary": ""});
    let p = s
        .post(
            &submit,
            signed_report(
                &w1,
                &task,
                n,
                epoch,
                "accepted",
                Some(&bad),
                json!({"claimant": "w1", "epoch": epoch, "run": run1, "result": bad}),
            ),
        )
        .problem(422, "invalid_result");
    assert!(p["detail"].as_str().unwrap().contains("at /summary"), "{p}");
    assert!(
        p["detail"].as_str().unwrap().contains("3 repair(s) left"),
        "{p}"
    );
    // Issue 21 defect 6: a result's artifacts are content ids stored here, else malformed.
    let unstored = vouch_artifacts::content_id(b"never stored");
    for (bad, says) in [
        (json!(["../../victim/README"]), "is not a content id"),
        (json!([unstored]), "is stored here"),
    ] {
        let r = json!({"summary": "Three notes, one decision.", "artifacts": bad});
        let p = s
            .post(
                &submit,
                signed_report(
                    &w1,
                    &task,
                    n,
                    epoch,
                    "accepted",
                    Some(&r),
                    json!({"claimant": "w1", "epoch": epoch, "run": run1, "result": r}),
                ),
            )
            .problem(422, "invalid_result");
        let detail = p["detail"].as_str().unwrap();
        assert!(
            detail.contains("at /artifacts/0") && detail.contains(says),
            "{p}"
        );
    }
    let result = json!({"summary": "Three notes, one decision.", "artifacts": [cid]});
    let p = s
        .post(
            &submit,
            signed_report(
                &w2,
                &task,
                n,
                epoch,
                "accepted",
                Some(&result),
                json!({"claimant": "w1", "epoch": epoch, "run": run1, "result": result}),
            ),
        )
        .problem(403, "bad_signature");
    assert!(p["detail"].as_str().unwrap().contains("\"report\""), "{p}");
    assert_eq!(
        s.get(&format!("/api/tasks/{task}")).json()["task"]["state"],
        "running"
    );
    // A run is named, so its journal counts the usage: a worker's own count is refused.
    let bad_usage = json!({"turns": 1, "tokens": -5, "tool_calls": 0, "failed_tool_calls": 0});
    let p = s
        .post(&submit, signed_report(&w1, &task, n, epoch, "accepted", Some(&result), json!({"claimant": "w1", "epoch": epoch, "run": run1, "result": result, "usage": bad_usage})))
        .problem(422, "invalid_field");
    assert_eq!(p["field"], "usage", "{p}");
    let accepted = signed_report(
        &w1,
        &task,
        n,
        epoch,
        "accepted",
        Some(&result),
        json!({"claimant": "w1", "epoch": epoch, "run": run1, "result": result}),
    );
    let done = s.post(&submit, accepted.clone());
    assert_eq!(done.status, 200, "{}", done.body);
    s.post(&submit, accepted).problem(409, "replayed");
    let done = done.json();
    assert_eq!(done["task"]["state"], "completed");
    assert_eq!(done["attempt"]["state"], "completed");
    // The run's journal counts the attempt: each submission went through the run (three
    // malformed, one accepted: four turns) and its end is one more (§13.2.2).
    assert_eq!(done["attempt"]["run_id"], run1.as_str(), "{done}");
    assert_eq!(done["attempt"]["usage"]["turns"], 5, "{done}");
    assert_eq!(
        done["task"]["result_id"],
        vouch_artifacts::json_content_id(&result).unwrap()
    );
    // A report after the attempt ended is refused and changes nothing.
    s.post(
        &format!("/api/tasks/{task}/attempts/{n}/fail"),
        signed_report(
            &w1,
            &task,
            n,
            epoch,
            "failed",
            None,
            json!({"claimant": "w1", "epoch": epoch, "retryable": true, "reason": "late"}),
        ),
    )
    .problem(409, "refused");
    assert_eq!(
        s.get(&format!("/api/tasks/{task}")).json()["task"]["state"],
        "completed"
    );

    // Pinned context names stored text: an id nothing is stored under is refused at offer.
    let p = s
        .post(
            "/api/tasks",
            json!({"type": "freeform", "brief": "x", "context": [vouch_artifacts::content_id(b"nothing stored")]}),
        )
        .problem(422, "invalid_field");
    assert_eq!(p["field"], "context", "{p}");
    // So do input artifacts (§13.1.3), naming the id.
    let unstored = vouch_artifacts::content_id(b"no input stored");
    let p = s
        .post(
            "/api/tasks",
            json!({"type": "freeform", "brief": "x", "input_artifacts": [unstored]}),
        )
        .problem(422, "invalid_field");
    assert_eq!(p["field"], "input_artifacts", "{p}");
    assert!(
        p["detail"].as_str().unwrap_or_default().contains(&unstored),
        "{p}"
    );

    // Abort (retryable, does not count) then fail (not retryable) ends the task failed.
    let t2 = s
        .post(
            "/api/tasks",
            json!({"type": "freeform", "brief": "Second", "max_attempts": 1}),
        )
        .json()["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let c = s
        .post("/api/tasks/claim-next", claim_body(&w2, now_ms()))
        .json();
    let e2 = c["attempt"]["epoch"].as_i64().unwrap();
    let a = s.post(
        &format!("/api/tasks/{t2}/attempts/1/abort"),
        signed_report(
            &w2,
            &t2,
            1,
            e2,
            "aborted",
            None,
            json!({"claimant": "w2", "epoch": e2, "reason": "shutting down"}),
        ),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(a.json()["task"]["state"], "queued");
    let c = s
        .post("/api/tasks/claim-next", claim_body(&w2, now_ms()))
        .json();
    assert_eq!(c["attempt"]["n"], 2, "{c}");
    let e3 = c["attempt"]["epoch"].as_i64().unwrap();
    let p = s.post(&format!("/api/tasks/{t2}/attempts/2/fail"), json!({"claimant": "w2", "epoch": e3, "retryable": false, "reason": " ", "at_ms": now_ms(), "nonce": nonce(), "signature": "00"}))
        .problem(422, "invalid_field");
    assert_eq!(p["field"], "reason");
    let f = s.post(&format!("/api/tasks/{t2}/attempts/2/fail"), signed_report(&w2, &t2, 2, e3, "failed", None, json!({"claimant": "w2", "epoch": e3, "retryable": false, "reason": "cannot read the notes", "run": c["run"]})));
    assert_eq!(f.status, 200, "{}", f.body);
    assert_eq!(f.json()["task"]["state"], "failed");

    let m = s.get("/metrics").body;
    assert!(
        m.lines()
            .any(|l| l == "vouch_claim_latency_seconds_count 4"),
        "{m}"
    );
}

/// Issue 23 item 3: the repair budget is the attempt row's, one rule on every interface —
/// once the repairs are spent, a valid submission is refused too (409), and the count
/// survives the server (it is read from the store, not from the process).
#[test]
fn a_valid_submit_after_the_repairs_are_spent_is_refused() {
    let (s, sqlite) = start_workers(16);
    let w1 = vouch_identity::Identity::from_secret("w1", &[1; 32]);
    use vouch_store::IdentityStore as _;
    sqlite.put_identity(&w1.record(1)).unwrap();
    let task = s
        .post("/api/tasks", json!({"type": "freeform", "brief": "x"}))
        .json()["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let c = s
        .post("/api/tasks/claim-next", claim_body(&w1, now_ms()))
        .json();
    let epoch = c["attempt"]["epoch"].as_i64().unwrap();
    let submit = format!("/api/tasks/{task}/attempts/1/submit");
    let body = |r: &Value| {
        signed_report(
            &w1,
            &task,
            1,
            epoch,
            "accepted",
            Some(r),
            json!({"claimant": "w1", "epoch": epoch, "run": c["run"], "result": r}),
        )
    };
    let bad = json!({"summary": ""});
    // The default budget: 3 repairs, so four malformed submissions are answered.
    for left in [3, 2, 1, 0] {
        let p = s.post(&submit, body(&bad)).problem(422, "invalid_result");
        let detail = p["detail"].as_str().unwrap();
        assert!(detail.contains(&format!("{left} repair(s) left")), "{p}");
    }
    use vouch_store::board::BoardStore as _;
    assert_eq!(
        sqlite.repairs_spent(&task, 1).unwrap(),
        4,
        "counted on the row"
    );
    let good = json!({"summary": "a fine result"});
    let p = s.post(&submit, body(&good)).problem(409, "refused");
    assert!(
        p["detail"].as_str().unwrap().contains("no repairs left"),
        "{p}"
    );
    let t = s.get(&format!("/api/tasks/{task}")).json();
    assert!(
        t["task"]["result_id"].is_null(),
        "nothing was accepted: {t}"
    );
}

#[test]
fn an_artifact_over_the_limit_is_413_and_nothing_is_stored() {
    let (s, sqlite) = start_workers(16);
    let w1 = vouch_identity::Identity::from_secret("w1", &[1; 32]);
    use vouch_store::IdentityStore as _;
    sqlite.put_identity(&w1.record(1)).unwrap();
    let task = s
        .post("/api/tasks", json!({"type": "freeform", "brief": "x"}))
        .json()["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let c = s
        .post("/api/tasks/claim-next", claim_body(&w1, now_ms()))
        .json();
    let epoch = c["attempt"]["epoch"].as_i64().unwrap();
    let bytes = [7u8; 17];
    let cid = vouch_artifacts::content_id(&bytes);
    let agent = ureq::AgentBuilder::new().build();
    let r = agent
        .put(&format!(
            "{}/api/artifacts/{cid}?{}",
            s.base,
            artifact_query(&w1, &cid, &task, 1, epoch)
        ))
        .set("Authorization", &format!("Bearer {}", worker_secret("w1")))
        .send_bytes(&bytes);
    let Err(ureq::Error::Status(413, r)) = r else {
        panic!("expected 413");
    };
    assert_eq!(r.content_type(), "application/problem+json");
    assert!(r.into_string().unwrap().contains("\"code\":\"too_large\""));
    s.get(&format!("/api/artifacts/{cid}"))
        .problem(404, "not_found");
}

#[test]
fn a_signed_receipt_is_served_once_the_run_has_ended_and_verifies_offline() {
    let (s, _) = start_workers(1 << 20);
    let run = s.save_run(1);
    s.store.flush().unwrap();
    let r = s.get(&format!("/api/runs/{run}/receipt?signed=true"));
    assert_eq!(r.status, 200, "{}", r.body);
    let parsed = vouch_identity::receipt::parse(&r.body).unwrap();
    assert!(
        vouch_identity::receipt::check_offline(&parsed).ok,
        "{}",
        r.body
    );
    assert_eq!(r.json()["run"], run.as_str());
    assert_eq!(r.json()["outcome"], "succeeded");
    // The key to pin is the one that signed, and a worker may read it too.
    let key = s.get("/api/host-key").json();
    assert_eq!(key["name"], "host");
    assert_eq!(key["public_key"], r.json()["host_key"]);
    let agent = ureq::AgentBuilder::new().build();
    let by_worker: Value = agent
        .get(&format!("{}/api/host-key", s.base))
        .set("Authorization", &format!("Bearer {}", worker_secret("w1")))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    assert_eq!(by_worker, key);
    let hook = hook();
    let waiting = s.send_run(&hook);
    s.get(&format!("/api/runs/{waiting}/receipt?signed=true"))
        .problem(409, "not_ended");
    s.get("/api/runs/nope/receipt?signed=true")
        .problem(404, "not_found");
    let p = s
        .get(&format!("/api/runs/{run}/receipt?signed=maybe"))
        .problem(422, "invalid_field");
    assert_eq!(p["field"], "signed");
}

#[test]
fn a_server_without_a_home_has_no_host_key_to_publish() {
    let s = start();
    let p = s.get("/api/host-key").problem(503, "unavailable");
    assert!(p["detail"].as_str().unwrap().contains("no home"), "{p}");
}

/// The MCP tools in process (the Python SDK drives them over stdio and HTTP in vouch-cli's
/// tests): an agent's run is under the contract and waits between calls.
#[test]
fn an_agents_run_over_mcp_waits_for_the_person_and_is_never_finished_for_it() {
    let tmp = tempfile::tempdir().unwrap();
    let sqlite = Arc::new(SqliteStore::open(&tmp.path().join("vouch.db")).unwrap());
    let captured: Arc<Mutex<Option<vouch_server::AppState>>> = Arc::new(Mutex::new(None));
    let c = captured.clone();
    let home = tmp.path().to_path_buf();
    let ids = sqlite.clone();
    let s = start_work(
        sqlite.clone(),
        Some(sqlite.clone()),
        tmp,
        vouch_server::STREAMS_MAX,
        move |st| {
            st.work.home = Some(home);
            st.work.identities = Some(ids);
            *c.lock().unwrap() = Some(st.clone());
        },
    );
    let mcp = vouch_server::mcp::VouchMcp {
        state: captured.lock().unwrap().clone().unwrap(),
        signer: None,
        via: "test",
        caller: None,
    };
    let hook = hook();
    let d = mcp
        .call(
            "declare",
            &json!({"title": "Post to the hook", "deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": hook.url}}]}),
        )
        .unwrap();
    assert_eq!(d["ok"], true, "{d}");
    let run = d["run"].as_str().unwrap().to_string();
    // Between calls the run waits for the agent, unleased; start-up reconciliation leaves it.
    assert_eq!(
        s.get(&format!("/api/runs/{run}")).json()["run"]["state"],
        "suspended"
    );
    assert!(s.host.boot().unwrap().is_empty());
    let r = mcp
        .call(
            "send",
            &json!({"run": run, "delivery": "d9", "payload": {"json": "{}"}}),
        )
        .unwrap();
    assert_eq!(r["ok"], false, "an undeclared item is rejected: {r}");
    // Sending cannot be undone: it waits for the person, whatever the agent says.
    let r = mcp
        .call(
            "send",
            &json!({"run": run, "delivery": "d1", "payload": {"json": "{\"text\": \"hello\"}"}}),
        )
        .unwrap();
    assert!(r["waiting"].is_string(), "{r}");
    assert_eq!(*hook.hits.lock().unwrap(), 0);
    let e = mcp
        .call("finish", &json!({"run": run, "text": "done"}))
        .unwrap_err();
    assert_eq!(e.code, "refused", "{e:?}");
    assert!(e.detail.contains("waits for the person"), "{e:?}");
    // Ids over MCP follow the one rule (issue 21 #3): a NUL is bad input on every backend.
    for (tool, args) in [
        ("run_status", json!({"run": "r\u{0}"})),
        ("finish", json!({"run": "r\n", "text": "done"})),
    ] {
        let e = mcp.call(tool, &args).unwrap_err();
        assert_eq!(
            (e.code, e.field.as_deref()),
            ("invalid_field", Some("run")),
            "{e:?}"
        );
        assert!(e.detail.contains("control character"), "{e:?}");
    }
    let st = mcp.call("run_status", &json!({"run": run})).unwrap();
    let hash = st["open_cards"][0]["payload_hash"]
        .as_str()
        .unwrap()
        .to_string();
    let a = s.post(
        &format!("/api/runs/{run}/deliveries/d1/approve"),
        json!({"hash": hash}),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        a.json()["state"],
        "suspended",
        "back to the agent: {}",
        a.body
    );
    assert_eq!(*hook.hits.lock().unwrap(), 1);
    let st = mcp.call("run_status", &json!({"run": run})).unwrap();
    assert_eq!(st["deliveries"][0]["status"], "verified", "{st}");
    // The one question: the person's answer is there for the agent.
    let q = mcp
        .call("clarify", &json!({"run": run, "question": "Which day?"}))
        .unwrap();
    assert!(q["waiting"].is_string(), "{q}");
    let a = s.post(
        &format!("/api/runs/{run}/answer"),
        json!({"text": "Friday"}),
    );
    assert_eq!(a.status, 200, "{}", a.body);
    assert_eq!(
        mcp.call("run_status", &json!({"run": run})).unwrap()["answer"],
        "Friday"
    );
    let f = mcp
        .call("finish", &json!({"run": run, "text": "Posted."}))
        .unwrap();
    assert_eq!(f["ended"], "succeeded", "{f}");
    assert!(f["receipt"].as_str().unwrap().contains("webhook"), "{f}");
    assert_eq!(*hook.hits.lock().unwrap(), 1, "sent exactly once");
    let e = mcp
        .call(
            "send",
            &json!({"run": run, "delivery": "d1", "payload": {"json": "{}"}}),
        )
        .unwrap_err();
    assert_eq!(e.code, "refused");
    // Only an agent's own runs, and only runs that exist.
    let own = s.save_run(1);
    let e = mcp
        .call(
            "save",
            &json!({"run": own, "delivery": "d1", "payload": {"text": "x"}}),
        )
        .unwrap_err();
    assert_eq!(e.code, "refused", "{e:?}");
    let e = mcp.call("finish", &json!({"run": "nope"})).unwrap_err();
    assert_eq!(e.code, "not_found");
    let e = mcp.call("declare", &json!({"deliveries": []})).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("title"));
    // An agent that goes silent: the person cancels; nothing reports it finished.
    let d = mcp
        .call(
            "declare",
            &json!({"title": "Left behind", "deliveries": []}),
        )
        .unwrap();
    let left = d["run"].as_str().unwrap();
    let c = s.post(&format!("/api/runs/{left}/cancel"), json!({}));
    assert_eq!(c.status, 200, "{}", c.body);
    assert_eq!(c.json()["state"], "ended");
    let e = mcp
        .call(
            "task_continue",
            &json!({"task": "t", "instructions": "more"}),
        )
        .unwrap_err();
    assert_eq!((e.status.as_u16(), e.code), (404, "not_found"));
}

/// A worker agent over MCP does its attempt as a vouch run (trigger `task`): the report
/// carries that run's receipt and the host's own count of its turns (§13.1, §13.7).
#[test]
fn an_mcp_workers_attempt_runs_as_a_task_run_whose_receipt_goes_with_the_report() {
    let tmp = tempfile::tempdir().unwrap();
    let sqlite = Arc::new(SqliteStore::open(&tmp.path().join("vouch.db")).unwrap());
    let w = Arc::new(vouch_identity::Identity::from_secret("agent-1", &[9; 32]));
    use vouch_store::IdentityStore as _;
    sqlite.put_identity(&w.record(1)).unwrap();
    let captured: Arc<Mutex<Option<vouch_server::AppState>>> = Arc::new(Mutex::new(None));
    let c = captured.clone();
    let ids = sqlite.clone();
    let objects = tempfile::tempdir().unwrap();
    let arts: Arc<dyn vouch_artifacts::ArtifactStore> =
        Arc::new(vouch_artifacts::LocalStore::in_home(objects.path()));
    let _s = start_work(
        sqlite.clone(),
        Some(sqlite.clone()),
        tmp,
        vouch_server::STREAMS_MAX,
        move |st| {
            st.work.identities = Some(ids);
            st.work.artifacts = Some(arts);
            *c.lock().unwrap() = Some(st.clone());
        },
    );
    let mcp = vouch_server::mcp::VouchMcp {
        state: captured.lock().unwrap().clone().unwrap(),
        signer: Some(w),
        via: "test",
        caller: None,
    };
    let task = mcp
        .call(
            "task_offer",
            &json!({"type": "freeform", "brief": "Summarise"}),
        )
        .unwrap()["task"]["id"]
        .as_str()
        .unwrap()
        .to_string();
    let claim = mcp.call("task_claim", &json!({})).unwrap();
    assert_eq!(claim["task"]["id"], task.as_str(), "{claim}");
    let (n, epoch) = (
        claim["attempt"]["n"].clone(),
        claim["attempt"]["epoch"].clone(),
    );
    // The claim opened the attempt's run (trigger `task`); the agent's calls go to it.
    let run = claim["run"].as_str().unwrap().to_string();
    assert_eq!(claim["attempt"]["run_id"], run.as_str(), "{claim}");
    let rec = mcp.state.store.run(&run).unwrap().unwrap();
    assert_eq!(rec.trigger, vouch_core::TriggerKind::Task);
    let d = mcp
        .call("declare", &json!({"run": run, "deliveries": []}))
        .unwrap();
    assert_eq!(d["run"], run.as_str(), "{d}");
    // A submit naming no run, or another, is refused: the attempt runs as its own run.
    let e = mcp
        .call(
            "task_submit",
            &json!({"task": task, "attempt": n, "epoch": epoch, "result": {"summary": "x"}}),
        )
        .unwrap_err();
    assert_eq!(e.code, "wrong_run", "{e:?}");
    // This server signs only as its own worker: another claimant must sign for itself.
    let e = mcp
        .call(
            "task_submit",
            &json!({"task": task, "attempt": n, "epoch": epoch, "claimant": "someone-else", "result": {"summary": "x"}}),
        )
        .unwrap_err();
    assert_eq!(
        (e.code, e.field.as_deref()),
        ("invalid_field", Some("signature")),
        "{e:?}"
    );
    let done = mcp
        .call(
            "task_submit",
            &json!({"task": task, "attempt": n, "epoch": epoch, "run": run, "result": {"summary": "Summarised."}}),
        )
        .unwrap();
    assert_eq!(done["task"]["state"], "completed", "{done}");
    assert_eq!(done["attempt"]["run_id"], run.as_str());
    assert!(done["attempt"]["detail"]["receipt"]
        .as_str()
        .is_some_and(|r| r.contains(&run)));
    assert!(
        done["attempt"]["usage"]["turns"].as_i64().unwrap() >= 2,
        "{done}"
    );
    // Input artifacts over MCP (§13.1.3): a stored one is bound, an unknown one refused.
    let store = mcp.state.work.artifacts.clone().unwrap();
    let notes = store.put(b"Q3 notes").unwrap();
    let bound = mcp
        .call(
            "task_offer",
            &json!({"type": "freeform", "brief": "Summarise", "input_artifacts": [notes]}),
        )
        .unwrap();
    assert_eq!(
        bound["task"]["spec"]["input_artifacts"],
        json!([notes]),
        "{bound}"
    );
    let unknown = vouch_artifacts::content_id(b"never stored");
    let e = mcp
        .call(
            "task_offer",
            &json!({"type": "freeform", "brief": "x", "input_artifacts": [unknown]}),
        )
        .unwrap_err();
    assert_eq!(
        (e.code, e.field.as_deref()),
        ("invalid_field", Some("input_artifacts")),
        "{e:?}"
    );
}

#[test]
fn a_body_over_the_request_limit_is_413_naming_the_limit_on_json_routes_and_mcp() {
    let s = start();
    let limit = vouch_server::REQUEST_BYTES_MAX;
    let big =
        json!({"name": "x", "cron": "0 9 * * *", "prompt": "p".repeat(limit + 100)}).to_string();
    for path in ["/api/schedules", "/mcp"] {
        let r = s.call("POST", path, Some(SECRET), Some(("application/json", &big)));
        let p = r.problem(413, "too_large");
        assert!(
            p["detail"].as_str().unwrap().contains(&limit.to_string()),
            "{path}: {p}"
        );
    }
    // Nothing was added by either.
    assert_eq!(s.get("/api/schedules").json(), json!([]));
}

#[test]
fn measures_since_with_a_multibyte_character_is_a_422_not_a_panic() {
    let s = start();
    for since in [
        "%E2%82%AC",
        "1%E2%82%AC",
        "%E2%82%ACh",
        "-5h",
        "99999999999999999d",
    ] {
        let p = s
            .get(&format!("/api/measures?since={since}"))
            .problem(422, "invalid_field");
        assert_eq!(p["field"], "since", "{p}");
    }
    // Query numbers: no sign, no overflow, no bad escape.
    for q in ["limit=%2B5", "limit=99999999999999999999999", "offset=-1"] {
        s.get(&format!("/api/runs?{q}"))
            .problem(422, "invalid_field");
    }
    for q in ["limit=%+5", "limit=%E2%82", "a=%"] {
        s.get(&format!("/api/runs?{q}")).problem(400, "bad_query");
    }
    s.get(&format!("/api/runs?{}", "a=1&".repeat(65)))
        .problem(400, "bad_query");
}

/// NUL and control characters in an id are bad input on both backends: 400 before the
/// store, never PostgreSQL's 409 or SQLite's silent miss.
fn nul_in_an_id_is_a_400(s: &Server) {
    let id = s.save_run(1);
    for bad in ["%00", "r%00x", "r%0Ax", "r%0D", "r%7F", "r%C2%85"] {
        for (m, path) in [
            ("GET", format!("/api/runs/{bad}")),
            ("GET", format!("/api/runs/{id}/journal?x={bad}")),
            ("GET", format!("/api/runs/{bad}/receipt")),
            ("POST", format!("/api/runs/{bad}/cancel")),
            ("POST", format!("/api/runs/{id}/deliveries/{bad}/deny")),
            ("GET", format!("/api/schedules/{bad}")),
            ("DELETE", format!("/api/schedules/{bad}")),
            ("GET", format!("/api/tasks/{bad}")),
            ("GET", format!("/api/artifacts/{bad}")),
        ] {
            let r = s.call(m, &path, Some(SECRET), None);
            if path.contains("?x=") {
                assert_eq!(r.status, 200, "{m} {path}: {}", r.body);
                continue;
            }
            let p = r.problem(400, "bad_path");
            assert!(
                p["detail"].as_str().unwrap().contains("control character"),
                "{m} {path}: {p}"
            );
        }
    }
    let long = "x".repeat(vouch_core::input::ID_BYTES_MAX + 1);
    s.get(&format!("/api/runs/{long}")).problem(400, "bad_path");
    // In a body: a schedule's name and a task's names are refused the same way (422).
    let p = s
        .post(
            "/api/schedules",
            json!({"name": "a\u{0}b", "cron": "0 7 * * *",
                   "routine": {"prompt": "p", "script": [{"final": ""}]}}),
        )
        .problem(422, "invalid_field");
    assert_eq!(p["field"], "name", "{p}");
    assert!(s
        .get("/api/schedules")
        .json()
        .as_array()
        .unwrap()
        .is_empty());
    // The run is untouched.
    assert_eq!(
        s.get(&format!("/api/runs/{id}")).json()["run"]["state"],
        "ended"
    );
}

#[test]
fn nul_in_an_id_is_a_400_on_sqlite() {
    nul_in_an_id_is_a_400(&start());
}

#[test]
fn nul_in_an_id_is_a_400_on_postgresql() {
    let url = std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!("vouch_test_http_nul_{}", std::process::id());
    let store = vouch_store_postgres::PostgresStore::open(&url, &schema).unwrap();
    let s = start_with(Arc::new(store), tempfile::tempdir().unwrap(), 4);
    nul_in_an_id_is_a_400(&s);
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .unwrap();
}

#[test]
fn a_claim_or_an_offer_with_extreme_times_is_a_422_not_a_panic() {
    let (s, _) = start_workers(1 << 20);
    for at_ms in [i64::MIN, i64::MIN + 1, i64::MAX] {
        let p = s
            .post(
                "/api/tasks/claim-next",
                json!({"claimant": "w", "profile": "p", "at_ms": at_ms, "nonce": nonce(), "signature": "00"}),
            )
            .problem(422, "invalid_field");
        assert_eq!(p["field"], "at_ms", "{p}");
    }
    for field in [
        "lease_ms",
        "heartbeat_ms",
        "dispatch_timeout_ms",
        "running_timeout_ms",
    ] {
        let mut offer = json!({"type": "freeform", "brief": "b", "lease_ms": 600_000});
        offer[field] = json!(i64::MAX);
        let p = s.post("/api/tasks", offer).problem(422, "invalid_field");
        assert_eq!(p["field"], field, "{p}");
    }
    // Names with a NUL are refused before the board; the board stays empty.
    for (field, v) in [
        ("tags", json!(["a\u{0}"])),
        ("type", json!("free\u{0}form")),
    ] {
        let mut offer = json!({"type": "freeform", "brief": "b"});
        offer[field] = v;
        let p = s.post("/api/tasks", offer).problem(422, "invalid_field");
        // The field, or the item in it (`tags[0]`).
        assert!(p["field"].as_str().unwrap().starts_with(field), "{p}");
    }
    assert_eq!(s.get("/api/tasks").json()["tasks"], json!([]));
}

/// The status of one request and its problem code, without reading a stream's body (a HEAD
/// answer has none: its code is `None`). `token` None sends no `Authorization`.
fn status_of(s: &Server, method: &str, path: &str, token: Option<&str>) -> (u16, Option<String>) {
    let agent = ureq::AgentBuilder::new().build();
    let mut req = agent
        .request(method, &format!("{}{path}", s.base))
        .set("Accept", "application/json, text/event-stream");
    if let Some(t) = token {
        req = req.set("Authorization", &format!("Bearer {t}"));
    }
    let res = match method {
        "GET" | "HEAD" => req.call(),
        _ => req
            .set("Content-Type", "application/json")
            .send_string("{\"hash\":\"x\"}"),
    };
    let res = match res {
        Ok(r) | Err(ureq::Error::Status(_, r)) => r,
        Err(e) => panic!("{method} {path}: {e}"),
    };
    let status = res.status();
    let code = (method != "HEAD" && res.content_type() == "application/problem+json")
        .then(|| res.into_string().unwrap())
        .and_then(|b| serde_json::from_str::<Value>(&b).ok())
        .and_then(|p| p["code"].as_str().map(String::from));
    (status, code)
}

/// The methods the scope walk sends to every route: the router's, HEAD (answered by a GET
/// route's handler, so authorized as that GET) and methods no route takes.
const METHODS: [&str; 7] = ["GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS"];

/// Every scope, and no token at all (`None`); the person goes last, since its calls decide.
const CALLERS: [Option<vouch_core::Scope>; 5] = [
    Some(vouch_core::Scope::Worker),
    Some(vouch_core::Scope::Reader),
    Some(vouch_core::Scope::Admin),
    None,
    Some(vouch_core::Scope::Person),
];

fn secret_of(scope: vouch_core::Scope) -> String {
    use vouch_core::Scope;
    match scope {
        Scope::Person => SECRET.to_string(),
        Scope::Worker => worker_secret("w1"),
        Scope::Reader => READER_SECRET.to_string(),
        Scope::Admin => ADMIN_SECRET.to_string(),
    }
}

/// What the authorization table gives a request.
#[derive(Debug, PartialEq, Clone, Copy)]
enum Expect {
    /// 401 `unauthorized`: no token.
    Unauthorized,
    /// 403 `forbidden`: the table does not admit the scope.
    Forbidden,
    /// 405: the table has no row for the method on this route, nor does the router.
    NoMethod,
    /// The handler answers, whatever it says (never 401, 403 or 405).
    Admitted,
}

/// The runs the walks read: the person's (waiting on its card), and the runs of an attempt of
/// `w1` (the worker token's identity) and of `w2`.
struct Runs {
    person: String,
    own: String,
    other: String,
}

/// What `auth::ROUTES` (and `auth::WORKER_OWN_RUNS`) give `caller` for `method` on
/// `template` with its `{id}` being `run`: HEAD is GET's row.
fn expect(caller: Option<vouch_core::Scope>, method: &str, template: &str, run: &str) -> Expect {
    use vouch_core::Scope;
    let Some(scope) = caller else {
        return Expect::Unauthorized;
    };
    let row_method = if method == "HEAD" { "GET" } else { method };
    let Some((_, _, allowed)) = vouch_server::auth::ROUTES
        .iter()
        .find(|(m, t, _)| *t == template && *m == row_method)
    else {
        return Expect::NoMethod;
    };
    let own = scope == Scope::Worker
        && run == "own"
        && vouch_server::auth::WORKER_OWN_RUNS.contains(&template);
    if allowed.contains(&scope) || own {
        Expect::Admitted
    } else {
        Expect::Forbidden
    }
}

fn check(what: &str, want: Expect, (status, code): (u16, Option<String>), head: bool) {
    match want {
        Expect::Unauthorized => assert_eq!(status, 401, "{what}"),
        Expect::NoMethod => assert_eq!(status, 405, "{what}"),
        Expect::Forbidden if head => assert_eq!(status, 403, "{what}"),
        Expect::Forbidden => assert_eq!(
            (status, code.as_deref()),
            (403, Some("forbidden")),
            "{what}"
        ),
        Expect::Admitted => assert!(![401, 403, 405].contains(&status), "{what}: {status}"),
    }
}

/// An attempt claimed by worker `name` over HTTP: its run (the claim opens it, §13.2.1).
fn claimed_run(s: &Server, ids: &dyn vouch_store::IdentityStore, name: &str, key: u8) -> String {
    let w = vouch_identity::Identity::from_secret(name, &[key; 32]);
    ids.put_identity(&w.record(1)).unwrap();
    let offer = s.post(
        "/api/tasks",
        json!({"type": "freeform", "brief": format!("a task for {name}")}),
    );
    assert_eq!(offer.status, 201, "{}", offer.body);
    let c = s.post("/api/tasks/claim-next", claim_body(&w, now_ms()));
    assert_eq!(c.status, 200, "{}", c.body);
    c.json()["run"].as_str().unwrap().to_string()
}

/// The runs of a scope walk: a worker token's own attempt's run and another identity's are
/// walked beside the person's on every run route.
fn runs_of(s: &Server, ids: &dyn vouch_store::IdentityStore, hook: &Hook) -> Runs {
    Runs {
        person: s.send_run(hook),
        own: claimed_run(s, ids, "w1", 1),
        other: claimed_run(s, ids, "w2", 2),
    }
}

/// The route templates of `auth::ROUTES` but `/mcp`, in its order: the table must hold every
/// operation of the OpenAPI document, and every row must be one.
fn tabled_routes() -> Vec<&'static str> {
    let doc: Value = serde_json::from_str(&vouch_server::openapi::json()).unwrap();
    for (template, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            let m = method.to_uppercase();
            assert!(
                vouch_server::auth::ROUTES
                    .iter()
                    .any(|(rm, t, _)| *rm == m && t == template),
                "{m} {template} has no row in auth::ROUTES"
            );
        }
    }
    let mut templates: Vec<&'static str> = vec![];
    for (m, t, _) in vouch_server::auth::ROUTES.iter().filter(|r| r.1 != "/mcp") {
        assert!(
            doc["paths"][t][m.to_lowercase()].is_object(),
            "{m} {t} is not documented"
        );
        if !templates.contains(t) {
            templates.push(t);
        }
    }
    templates
}

/// One route with every method for `caller`, its `{id}` being `run` (named `run_name`, as
/// [`expect`] takes it): each answers as the table says, HEAD as GET does. How many sent.
fn walk_route(
    s: &Server,
    caller: Option<vouch_core::Scope>,
    template: &str,
    (run_name, run): (&str, &str),
) -> usize {
    let token = caller.map(secret_of);
    let path = template
        .replace("{id}", run)
        .replace("{delivery}", "d1")
        .replace("{name}", "x")
        .replace("{n}", "1")
        .replace("{cid}", "x");
    let mut get = None;
    for m in METHODS {
        let got = status_of(s, m, &path, token.as_deref());
        let what = format!("{caller:?} {m} {template} ({run_name} run)");
        let head = m == "HEAD";
        check(
            &what,
            expect(caller, m, template, run_name),
            got.clone(),
            head,
        );
        match m {
            "GET" => get = Some(got.0),
            "HEAD" => assert_eq!(Some(got.0), get, "{what}: HEAD answers as GET"),
            _ => {}
        }
    }
    METHODS.len()
}

/// Issue 23 #1, issue 38 #6 (§17.1.1): every route of the authorization table (`auth::ROUTES`,
/// which must hold every operation of the OpenAPI document and nothing else) × every method
/// × every scope and none, over real HTTP. Refused is exactly 403 `forbidden`, admitted is
/// never 401, 403 or 405, HEAD answers as GET does; a worker token reads its own attempt's
/// run and receipt, not another identity's nor the person's. Worker, reader, admin and no
/// token go first and change nothing: the card stays open and nothing is sent.
fn scope_matrix(s: &Server, ids: &dyn vouch_store::IdentityStore) {
    use vouch_core::Scope;
    let hook = hook();
    let runs = runs_of(s, ids, &hook);
    let templates = tabled_routes();
    // A worker token reads its own attempt's run and receipt (issue 39 #4), HEAD as GET.
    let w1 = worker_secret("w1");
    for path in [
        format!("/api/runs/{}", runs.own),
        format!("/api/runs/{}/receipt", runs.own),
    ] {
        let r = s.call("GET", &path, Some(&w1), None);
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        assert!(r.body.contains(&runs.own), "{path}: {}", r.body);
        assert_eq!(status_of(s, "HEAD", &path, Some(&w1)).0, 200, "HEAD {path}");
    }
    let mut walked = 0;
    for caller in CALLERS {
        for template in &templates {
            let mut which = vec![("person", runs.person.as_str())];
            if caller == Some(Scope::Worker) && template.starts_with("/api/runs/{id}") {
                which.extend([("own", runs.own.as_str()), ("other", runs.other.as_str())]);
            }
            for run in which {
                walked += walk_route(s, caller, template, run);
            }
        }
        // MCP is one endpoint: admin is refused there, the others reach the SDK.
        let (status, code) = status_of(s, "POST", "/mcp", caller.map(secret_of).as_deref());
        match caller {
            None => assert_eq!(status, 401, "/mcp without a token"),
            Some(scope) => assert_eq!(
                code.as_deref() == Some("forbidden"),
                scope == Scope::Admin,
                "{scope} /mcp: {status}"
            ),
        }
        if caller.is_none() {
            // Nothing a non-person token did decided anything.
            assert_eq!(s.get("/api/approvals").json().as_array().unwrap().len(), 1);
            assert_eq!(*hook.hits.lock().unwrap(), 0);
        }
    }
    // Every route was walked with every method for every caller, the worker's run routes
    // three times (its own run, another identity's, the person's).
    let run_routes = templates
        .iter()
        .filter(|t| t.starts_with("/api/runs/{id}"))
        .count();
    let walks = CALLERS.len() * templates.len() + 2 * run_routes;
    assert_eq!(walked, METHODS.len() * walks);
}

#[test]
fn every_route_admits_exactly_the_scopes_of_the_authorization_table() {
    let (s, ids, _schema) = workers_on(false, "scopes");
    scope_matrix(&s, ids.as_ref());
}

#[test]
fn on_postgresql_every_route_admits_exactly_the_scopes_of_the_table() {
    let (s, ids, _schema) = workers_on(true, "scopes");
    scope_matrix(&s, ids.as_ref());
}

/// One MCP client over `/mcp` with `token`: `initialize`, then each call is one POST,
/// answering the HTTP status and, when MCP answered, the JSON-RPC result.
fn mcp_client(s: &Server, token: Option<String>) -> impl FnMut(&str, Value) -> (u16, Value) {
    let url = format!("{}/mcp", s.base);
    let mut session: Option<String> = None;
    let mut id = 0;
    let mut post = move |v: Value| -> (u16, Value) {
        let mut req = ureq::post(&url)
            .set("Content-Type", "application/json")
            .set("Accept", "application/json, text/event-stream");
        if let Some(t) = &token {
            req = req.set("Authorization", &format!("Bearer {t}"));
        }
        if let Some(sid) = &session {
            req = req.set("Mcp-Session-Id", sid);
        }
        let res = match req.send_string(&v.to_string()) {
            Ok(r) | Err(ureq::Error::Status(_, r)) => r,
            Err(e) => panic!("/mcp: {e}"),
        };
        if let Some(sid) = res.header("mcp-session-id") {
            session = Some(sid.to_string());
        }
        let status = res.status();
        let body = res.into_string().unwrap();
        let body = body
            .lines()
            .find_map(|l| l.strip_prefix("data:"))
            .unwrap_or(&body)
            .trim()
            .to_string();
        (status, serde_json::from_str(&body).unwrap_or(Value::Null))
    };
    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-03-26", "capabilities": {},
        "clientInfo": {"name": "scopes", "version": "0"}}});
    if post(init).0 == 200 {
        post(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }
    move |method: &str, params: Value| {
        id += 1;
        let (status, answer) =
            post(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        (status, answer["result"].clone())
    }
}

/// Arguments a tool decodes: each required property, and `run` when it takes one, filled by
/// its type (`run` naming `run`), so the call reaches the checks after decoding.
fn arguments_for(schema: &Value, run: &str) -> Value {
    let props = schema["properties"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let mut names: Vec<String> = schema["required"]
        .as_array()
        .map(|r| {
            r.iter()
                .filter_map(|n| n.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    if props.contains_key("run") && !names.iter().any(|n| n == "run") {
        names.push("run".into());
    }
    let mut args = serde_json::Map::new();
    for name in names {
        let v = match (name.as_str(), props[&name]["type"].as_str()) {
            ("run", _) => json!(run),
            (_, Some("integer")) => json!(1),
            (_, Some("boolean")) => json!(false),
            (_, Some("object")) => json!({}),
            (_, Some("array")) => json!([]),
            _ => json!("x"),
        };
        args.insert(name, v);
    }
    Value::Object(args)
}

/// A tool that acts on the run its `run` names: the host's tools and the verbs, not the
/// board's (whose `run` is a report's attempt run).
fn acts_on_a_run(tool: &str) -> bool {
    !tool.starts_with("task_") && !tool.starts_with("artifact_")
}

/// Issue 38 #6 (§17.1.1, §17.2): every MCP tool (`tools/list`, each with its row of
/// `auth::MCP_TOOLS`) × every scope and none, over `/mcp` of a real server. A tool the table
/// does not admit is a tool error whose structured content is the 403 `forbidden` problem; a
/// worker token's tools on a run refuse every run but its own attempts' — the person's
/// waiting run and another identity's attempt's — and read its own (`run_status`, `receipt`).
fn mcp_scope_matrix(s: &Server, ids: &dyn vouch_store::IdentityStore) {
    use vouch_core::Scope;
    let hook = hook();
    let runs = runs_of(s, ids, &hook);
    let (status, list) = mcp_client(s, Some(SECRET.into()))("tools/list", json!({}));
    assert_eq!(status, 200, "{list}");
    let tools = list["tools"].as_array().unwrap().clone();
    assert_eq!(tools.len(), vouch_server::mcp::tools().len());
    let forbidden = |r: &Value| {
        r["isError"] == true
            && r["structuredContent"]["code"] == "forbidden"
            && r["structuredContent"]["status"] == 403
    };
    for caller in CALLERS {
        let mut call = mcp_client(s, caller.map(secret_of));
        let worker = caller == Some(Scope::Worker);
        for t in &tools {
            let name = t["name"].as_str().unwrap();
            let allowed = vouch_server::auth::tool_scopes(name);
            assert!(!allowed.is_empty(), "{name} has no row in auth::MCP_TOOLS");
            let mut which = vec![("person", runs.person.as_str())];
            if worker && acts_on_a_run(name) {
                which.push(("other", runs.other.as_str()));
            }
            for (run_name, run) in which {
                let what = format!("{caller:?} {name} ({run_name} run)");
                let params =
                    json!({"name": name, "arguments": arguments_for(&t["inputSchema"], run)});
                let (status, r) = call("tools/call", params);
                match caller {
                    None => assert_eq!(status, 401, "{what}"),
                    Some(Scope::Admin) => assert_eq!(status, 403, "{what}"),
                    Some(scope) => {
                        assert_eq!(status, 200, "{what}: {r}");
                        let refused = !allowed.contains(&scope) || (worker && acts_on_a_run(name));
                        assert_eq!(forbidden(&r), refused, "{what}: {r}");
                    }
                }
            }
        }
        if worker {
            // Its own attempt's run it reads: where it stands and its receipt.
            let args = json!({"run": runs.own});
            let (_, st) = call(
                "tools/call",
                json!({"name": "run_status", "arguments": args}),
            );
            assert_eq!(st["structuredContent"]["run"], runs.own.as_str(), "{st}");
            assert_eq!(st["isError"], false, "{st}");
            let (_, rc) = call("tools/call", json!({"name": "receipt", "arguments": args}));
            assert_eq!(rc["structuredContent"]["run"], runs.own.as_str(), "{rc}");
            // And the person's waiting run's card, payload and all, it never sees.
            let args = json!({"run": runs.person});
            let (_, st) = call(
                "tools/call",
                json!({"name": "run_status", "arguments": args}),
            );
            assert!(!st.to_string().contains("payload_hash"), "{st}");
        }
    }
    // Nothing the walk did sent anything.
    assert_eq!(*hook.hits.lock().unwrap(), 0);
}

#[test]
fn every_mcp_tool_admits_exactly_the_scopes_of_the_authorization_table() {
    let (s, ids, _schema) = workers_on(false, "mcp_scopes");
    mcp_scope_matrix(&s, ids.as_ref());
}

#[test]
fn on_postgresql_every_mcp_tool_admits_exactly_the_scopes_of_the_table() {
    let (s, ids, _schema) = workers_on(true, "mcp_scopes");
    mcp_scope_matrix(&s, ids.as_ref());
}

fn vouch_server_pg_store(url: &str, schema: &str) -> Arc<dyn Store> {
    Arc::new(vouch_store_postgres::PostgresStore::open(url, schema).unwrap())
}

/// A worker token acts only as its own identity, on every worker route, and never calls a
/// person's MCP tool; the person's token is not a worker's (§17.1.1).
#[test]
fn a_worker_token_acts_only_as_its_identity() {
    let s = start();
    let body = json!({"claimant": "w2", "epoch": 1, "reason": "x", "at_ms": 1, "nonce": nonce(), "signature": "00"}).to_string();
    let (status, code) = {
        let r = s.call(
            "POST",
            "/api/tasks/x/attempts/1/abort",
            Some(&worker_secret("w1")),
            Some(("application/json", &body)),
        );
        (r.status, r.json()["code"].clone())
    };
    assert_eq!((status, code), (403, json!("forbidden")));
    let p = s
        .call(
            "POST",
            "/api/runs/x/cancel",
            Some(&worker_secret("w1")),
            Some(("application/json", "{}")),
        )
        .problem(403, "forbidden");
    assert!(
        p["detail"].as_str().unwrap().contains("--scope person"),
        "{p}"
    );
}

/// Issue 23 #2 (§17.1.1): a decision over HTTP journals its principal — the token's name,
/// scope and how it came — and the receipt names who approved.
#[test]
fn a_decision_names_who_took_it_in_the_journal_and_the_receipt() {
    let s = start();
    let hook = hook();
    let run = s.send_run(&hook);
    let hash = s.get("/api/approvals").json()[0]["payload_hash"].clone();
    let done = s.post(
        &format!("/api/runs/{run}/deliveries/d1/approve"),
        json!({"hash": hash}),
    );
    assert_eq!(done.status, 200, "{}", done.body);
    let journal = s.get(&format!("/api/runs/{run}/journal")).json();
    let granted = journal
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["kind"] == "approval_granted")
        .unwrap()
        .clone();
    assert_eq!(
        granted["body"]["by"],
        json!({"name": "test", "scope": "person", "via": "http"})
    );
    let receipt = s.get(&format!("/api/runs/{run}/receipt")).json();
    let text = receipt["receipt"].as_str().unwrap();
    assert!(
        text.contains("Decided by:\n  • d1: approved by test (person token, http)"),
        "{text}"
    );
    assert_eq!(*hook.hits.lock().unwrap(), 1);
}

/// The console's `watching` presence, as holds and releases in order.
#[derive(Default)]
struct Watching(Mutex<Vec<String>>);

impl vouch_server::console::WatchPresence for Watching {
    fn hold(&self, run: &str, _until_ms: i64) {
        self.0.lock().unwrap().push(format!("hold {run}"));
    }
    fn release(&self, run: &str) {
        self.0.lock().unwrap().push(format!("release {run}"));
    }
}

/// Read a response's lines to its end on another thread; the lines, or a panic if the
/// stream is still open after a bounded wait.
fn read_to_end_within(res: ureq::Response, what: &'static str) -> impl FnOnce() -> Vec<String> {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let lines: Vec<String> = BufReader::new(res.into_reader())
            .lines()
            .map_while(Result::ok)
            .collect();
        let _ = tx.send(lines);
    });
    move || {
        rx.recv_timeout(std::time::Duration::from_secs(30))
            .unwrap_or_else(|_| panic!("{what}: still open after its token was removed"))
    }
}

#[test]
fn removing_a_token_ends_its_streams_and_the_watching_they_hold() {
    const GONE: &str = "vouch_soon_removed";
    let tmp = tempfile::tempdir().unwrap();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&tmp.path().join("vouch.db")).unwrap());
    let watching = Arc::new(Watching::default());
    let w = watching.clone();
    let s = start_work(
        store.clone(),
        None,
        tmp,
        vouch_server::STREAMS_MAX,
        move |st| st.console.presence = Some(w),
    );
    store
        .put_token(&ApiToken {
            name: "gone".into(),
            hash: vouch_server::token_hash(GONE),
            created_ms: 1,
            scope: vouch_core::Scope::Person,
            identity: None,
        })
        .unwrap();
    let hook = hook();
    let run = s.send_run(&hook);
    let open = |path: &str| {
        ureq::get(&format!("{}{path}", s.base))
            .set("Authorization", &format!("Bearer {GONE}"))
            .call()
            .unwrap()
    };
    let events = read_to_end_within(open(&format!("/api/runs/{run}/events")), "run events");
    let inbox = read_to_end_within(open("/api/inbox/events"), "inbox events");
    // The same token signed in to the console, its run page open: the person watches.
    let agent = ureq::AgentBuilder::new().redirects(0).build();
    let signed = agent
        .post(&format!("{}/console/signin", s.base))
        .send_form(&[("token", GONE), ("tz", "UTC"), ("next", "/console/")])
        .unwrap();
    assert_eq!(signed.status(), 303);
    let cookie = signed
        .header("set-cookie")
        .unwrap()
        .split(';')
        .next()
        .unwrap()
        .to_string();
    let live = agent
        .get(&format!("{}/console/runs/{run}/live", s.base))
        .set("Cookie", &cookie)
        .call()
        .unwrap();
    let live = read_to_end_within(live, "console live page");
    assert_eq!(
        watching.0.lock().unwrap().first(),
        Some(&format!("hold {run}"))
    );

    assert!(store.remove_token("gone").unwrap());
    for (lines, event) in [(events(), "error"), (inbox(), "error"), (live(), "failed")] {
        assert!(
            lines.iter().any(|l| l == &format!("event: {event}")),
            "{lines:?}"
        );
    }
    assert_eq!(
        watching.0.lock().unwrap().last(),
        Some(&format!("release {run}")),
        "the closed page no longer watches the run"
    );
    // Its requests are refused; the other tokens' still work.
    assert_eq!(s.call("GET", "/api/runs", Some(GONE), None).status, 401);
    assert_eq!(s.get("/api/runs").status, 200);
}

#[test]
fn a_host_is_allowed_by_its_exact_name_and_port_or_by_a_bare_name() {
    let local: std::net::SocketAddr = "127.0.0.1:7070".parse().unwrap();
    let mut allowed = vouch_server::loopback_hosts(local);
    assert_eq!(allowed, ["localhost:7070", "127.0.0.1:7070", "[::1]:7070"]);
    allowed.push("vouch.example".into());
    for ok in [
        "127.0.0.1:7070",
        "LocalHost:7070",
        "[::1]:7070",
        "vouch.example",
        "vouch.example:8443",
    ] {
        assert!(vouch_server::host_allowed(&allowed, ok), "{ok}");
    }
    for no in [
        "evil.example:7070",
        "localhost",
        "127.0.0.1:7071",
        "[::1]",
        "127.0.0.1:7070.evil.example",
        "vouch.example.evil",
        "",
    ] {
        assert!(!vouch_server::host_allowed(&allowed, no), "{no}");
    }
    let v6: std::net::SocketAddr = "[::1]:9".parse().unwrap();
    assert_eq!(
        vouch_server::loopback_hosts(v6),
        ["localhost:9", "127.0.0.1:9", "[::1]:9"]
    );
}

/// Issue 28: `POST /api/runs` starts the person's own run from a script or a routine and
/// answers at once with where to watch it; the host drives it, to its receipt. A bad body is
/// refused naming its field, and creates nothing.
fn start_a_run_over_http(s: &Server) {
    let script = json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Notes/started.md"}}]}},
        {"deliver": "d1", "payload": {"text": "started over HTTP\n"}},
        {"final": "saved"}
    ]);
    let r = s.post(
        "/api/runs",
        json!({"title": "Save a note from HTTP", "script": script}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let v = r.json();
    let run = v["run"].as_str().unwrap().to_string();
    assert_eq!(v["events"], format!("/api/runs/{run}/events"));
    assert_eq!(v["detail"], format!("/api/runs/{run}"));
    assert_eq!(v["page"], format!("/console/runs/{run}"));
    // Watched where the answer says, to the end: the stream ends after the terminal event.
    let events = sse_all(sse(s, v["events"].as_str().unwrap(), None).into_reader());
    assert_eq!(events.last().unwrap().1, "terminal", "{events:?}");
    let detail = s.get(v["detail"].as_str().unwrap()).json();
    assert_eq!(detail["run"]["title"], "Save a note from HTTP", "{detail}");
    assert_eq!(detail["run"]["trigger"], "interactive", "{detail}");
    assert_eq!(detail["run"]["outcome"], "succeeded", "{detail}");
    let receipt = s.get(&format!("/api/runs/{run}/receipt")).json();
    assert!(
        receipt["receipt"].as_str().unwrap().contains("Saved to"),
        "{receipt}"
    );
    // A routine, as a schedule takes it; without a title its prompt names the run.
    let r = s.post(
        "/api/runs",
        json!({"routine": {"prompt": "Brief me", "script": [{"declare": {"deliveries": []}}, {"final": "nothing to do"}]}}),
    );
    assert_eq!(r.status, 202, "{}", r.body);
    let routine_run = r.json()["run"].as_str().unwrap().to_string();
    sse_all(sse(s, &format!("/api/runs/{routine_run}/events"), None).into_reader());
    let detail = s.get(&format!("/api/runs/{routine_run}")).json();
    assert_eq!(detail["run"]["title"], "Brief me", "{detail}");
    started_once_per_key(s);
    let runs_before = s.get("/api/runs").json()["runs"].as_array().unwrap().len();

    // Bad input: a problem naming what is wrong, and no run.
    s.call(
        "POST",
        "/api/runs",
        Some(SECRET),
        Some(("application/json", "{\"title\": \"x\", \"script\": [")),
    )
    .problem(400, "bad_json");
    let turn = json!([{"final": "ok"}]);
    for (body, field, words) in [
        (json!({"script": turn}), "title", "needs a title"),
        (
            json!({"title": "  ", "script": turn}),
            "title",
            "needs a title",
        ),
        (
            json!({"title": "x\u{0}y", "script": turn}),
            "title",
            "title",
        ),
        (
            json!({"title": "t".repeat(5000), "script": turn}),
            "title",
            "4096",
        ),
        (json!({"title": "x"}), "script", "`script`"),
        (
            json!({"title": "x", "script": turn, "routine": {"prompt": "p"}}),
            "script",
            "not both",
        ),
        (
            json!({"title": "x", "script": [{"final": "ok"}, {"fly": "away"}]}),
            "script",
            "turn 1",
        ),
        (json!({"title": "x", "script": "turns"}), "script", "array"),
        (
            json!({"title": "x", "script": []}),
            "script",
            "at least one",
        ),
        (
            json!({"title": "x", "script": {"script": turn}}),
            "script",
            "array",
        ),
        (json!({"routine": {"script": []}}), "routine", "prompt"),
        (
            json!({"routine": {"prompt": "p", "script": [{"fly": 1}]}}),
            "routine",
            "turn 0",
        ),
        (
            json!({"title": "x", "script": turn, "trust_me": true}),
            "trust_me",
            "unknown field",
        ),
    ] {
        let p = s
            .post("/api/runs", body.clone())
            .problem(422, "invalid_field");
        let detail = p["detail"].as_str().unwrap();
        assert!(
            p["field"].as_str().unwrap().contains(field) && detail.contains(words),
            "{body}: {p}"
        );
    }
    let big =
        json!({"title": "x", "script": [{"final": "p".repeat(vouch_server::REQUEST_BYTES_MAX)}]});
    s.call(
        "POST",
        "/api/runs",
        Some(SECRET),
        Some(("application/json", &big.to_string())),
    )
    .problem(413, "too_large");
    // A reader or a worker may not start a run.
    let good = json!({"title": "x", "script": turn}).to_string();
    for token in [READER_SECRET.to_string(), worker_secret("w1")] {
        s.call(
            "POST",
            "/api/runs",
            Some(&token),
            Some(("application/json", &good)),
        )
        .problem(403, "forbidden");
    }
    let runs_after = s.get("/api/runs").json()["runs"].as_array().unwrap().len();
    assert_eq!(runs_after, runs_before, "a refused start created a run");
}

/// With an `Idempotency-Key`, a start sent twice (a double click, a retry after a timeout) is
/// one run: the same key and request answer that run (200, `created: false`), the key with
/// another request is 409 naming it, a key that is not 1–255 visible ASCII is 422; another
/// token's key of the same text is its own.
fn started_once_per_key(s: &Server) {
    let post_key = |token: &str, body: &Value, key: &str| {
        let r = ureq::AgentBuilder::new()
            .build()
            .post(&format!("{}/api/runs", s.base))
            .set("Authorization", &format!("Bearer {token}"))
            .set("Idempotency-Key", key)
            .set("Content-Type", "application/json")
            .send_string(&body.to_string());
        let (code, text) = match r {
            Ok(r) => (r.status(), r.into_string().unwrap()),
            Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap()),
            Err(e) => panic!("{e}"),
        };
        (code, serde_json::from_str::<Value>(&text).unwrap())
    };
    let once = json!({"title": "Once only", "script": [{"declare": {"deliveries": []}}, {"final": "once"}]});
    let (code, first) = post_key(SECRET, &once, "start-1");
    assert_eq!((code, &first["created"]), (202, &json!(true)), "{first}");
    let run = first["run"].as_str().unwrap().to_string();
    sse_all(sse(s, &format!("/api/runs/{run}/events"), None).into_reader());
    let (code, again) = post_key(SECRET, &once, "start-1");
    assert_eq!((code, &again["created"]), (200, &json!(false)), "{again}");
    assert_eq!(again["run"], run.as_str(), "{again}");
    let other = json!({"title": "Something else", "script": [{"final": "no"}]});
    let (code, p) = post_key(SECRET, &other, "start-1");
    assert_eq!(
        (code, p["field"].as_str()),
        (409, Some("Idempotency-Key")),
        "{p}"
    );
    let (code, p) = post_key(SECRET, &once, &"k".repeat(256));
    assert_eq!(
        (code, p["field"].as_str()),
        (422, Some("Idempotency-Key")),
        "{p}"
    );
    let runs = s.get("/api/runs").json();
    let titled = runs["runs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["title"] == "Once only")
        .count();
    assert_eq!(titled, 1, "{runs}");
}

#[test]
fn a_run_started_over_http_is_driven_to_its_receipt_and_bad_bodies_name_their_field() {
    start_a_run_over_http(&start());
}

#[test]
fn on_postgresql_a_run_started_over_http_is_driven_to_its_receipt() {
    let url = std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let schema = format!("vouch_test_http_start_{}", std::process::id());
    let tmp = tempfile::tempdir().unwrap();
    let s = start_with(vouch_server_pg_store(&url, &schema), tmp, 4);
    start_a_run_over_http(&s);
    let mut c = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    c.batch_execute(&format!("DROP SCHEMA {schema} CASCADE"))
        .unwrap();
}

/// Enrolment (§13.6.1): an admin registers a worker's public key made elsewhere; the secret
/// never crosses. A taken name is 409, a bad name or key 422 naming the field, a person's
/// token 403 — and the enrolled key's signed claim is accepted at once.
fn enrolment(pg: bool) {
    let (s, _ids, _schema) = workers_on(pg, "enrolment");
    let w = vouch_identity::Identity::from_secret("w", &[9; 32]);
    let admin = |method: &str, body: Option<Value>| {
        let text = body.map(|b| b.to_string());
        s.call(
            method,
            "/api/identities",
            Some(ADMIN_SECRET),
            text.as_deref().map(|t| ("application/json", t)),
        )
    };
    let r = admin(
        "POST",
        Some(json!({"name": "w", "public_key": w.public_key()})),
    );
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.json()["public_key"], w.public_key());
    // The same name again, with this key or another: taken.
    let other = vouch_identity::Identity::from_secret("w", &[8; 32]);
    for key in [w.public_key(), other.public_key()] {
        let p =
            admin("POST", Some(json!({"name": "w", "public_key": key}))).problem(409, "conflict");
        assert_eq!(p["field"], "name", "{p}");
    }
    // Bare hex is taken as the key; each bad field is named.
    let bare = other
        .public_key()
        .trim_start_matches("ed25519:")
        .to_string();
    let r = admin("POST", Some(json!({"name": "w-two", "public_key": bare})));
    assert_eq!(r.status, 201, "{}", r.body);
    for (body, field) in [
        (
            json!({"name": "Not A Name", "public_key": w.public_key()}),
            "name",
        ),
        (
            json!({"name": "host", "public_key": w.public_key()}),
            "name",
        ),
        (
            json!({"name": "w3", "public_key": "ed25519:00"}),
            "public_key",
        ),
        (json!({"name": "w3", "public_key": "rsa:abc"}), "public_key"),
        (
            json!({"name": "w3", "public_key": w.public_key(), "secret_key": "x"}),
            "secret_key",
        ),
    ] {
        let p = admin("POST", Some(body.clone())).problem(422, "invalid_field");
        assert_eq!(p["field"], field, "{body}: {p}");
    }
    let listed = admin("GET", None).json();
    let names: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|i| i["name"].as_str())
        .collect();
    assert!(names.contains(&"w") && names.contains(&"w-two"), "{listed}");
    assert!(!listed.to_string().contains("secret"), "{listed}");
    // Only an admin enrols.
    s.call(
        "POST",
        "/api/identities",
        Some(SECRET),
        Some((
            "application/json",
            &json!({"name": "w4", "public_key": w.public_key()}).to_string(),
        )),
    )
    .problem(403, "forbidden");
    // The enrolled key signs a claim the host accepts.
    s.post("/api/tasks", json!({"type": "freeform", "brief": "x"}));
    let c = s.post("/api/tasks/claim-next", claim_body(&w, now_ms()));
    assert_eq!(c.status, 200, "{}", c.body);
    assert_eq!(c.json()["claimed"], true, "{}", c.body);
}

#[test]
fn a_worker_key_made_elsewhere_is_enrolled_by_an_admin() {
    enrolment(false);
}

#[test]
fn on_postgresql_a_worker_key_is_enrolled_by_an_admin() {
    enrolment(true);
}
