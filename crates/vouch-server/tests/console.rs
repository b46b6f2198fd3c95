//! The web console over real HTTP on loopback against a real store, without a browser (the
//! browser tests are in vouch-cli's `tests/console.rs`): sign-in and its cookie, the refusals
//! (no session, wrong CSRF token, another site's Origin), security headers, and the schedules
//! page with the missed slots the real scheduler produced on a manual clock, each with its
//! receipt, in the person's zone.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use serde_json::json;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use vouch_adapters::config::Config;
use vouch_core::DestinationKind;
use vouch_runtime::clock::ManualClock;
use vouch_runtime::provider::Provider;
use vouch_runtime::Host;
use vouch_store::{ApiToken, Schedule, Store};
use vouch_store_sqlite::SqliteStore;

const SECRET: &str = "vouch_console_secret";
/// 2026-12-01 00:00 UTC.
const T0: i64 = 1_796_083_200_000;

struct Server {
    tmp: tempfile::TempDir,
    base: String,
    host: Arc<Host>,
    /// The store the host writes through, for what the test does behind the console's back.
    store: Arc<dyn Store>,
    board: Arc<dyn vouch_store::board::BoardStore>,
}

fn start() -> Server {
    let tmp = tempfile::tempdir().unwrap();
    for d in ["files", "surfaces", "drafts", "artifacts"] {
        std::fs::create_dir_all(tmp.path().join(d)).unwrap();
    }
    let sqlite = Arc::new(SqliteStore::open(&tmp.path().join("vouch.db")).unwrap());
    let store: Arc<dyn Store> = sqlite.clone();
    let board: Arc<dyn vouch_store::board::BoardStore> = sqlite;
    store
        .put_token(&ApiToken {
            name: "person".into(),
            hash: vouch_server::token_hash(SECRET),
            created_ms: 1,
            scope: vouch_core::Scope::Person,
            identity: None,
        })
        .unwrap();
    let durable: Arc<dyn Store> = Arc::new(vouch_runtime::durable::Durable::new(store.clone()));
    let host = Arc::new(host_on(
        tmp.path(),
        durable.clone(),
        ManualClock::new(T0, 1),
        vouch_runtime::host::process_owner(),
    ));
    let doctor: vouch_server::DoctorFn = Arc::new(|| {
        let p: BTreeMap<DestinationKind, Arc<dyn Provider>> = BTreeMap::new();
        Ok(vouch_adapters::doctor::doctor(&Config::default(), &p, &[]))
    });
    let mut state = vouch_server::AppState::new(host.clone(), store, doctor);
    state.board = Some(board.clone());
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
    Server {
        tmp,
        base: format!("http://{}", rx.recv().unwrap()),
        host,
        store: durable,
        board,
    }
}

/// The host the console serves, over `store` with the home's folders in `dir`.
fn host_on(dir: &Path, store: Arc<dyn Store>, clock: ManualClock, owner: String) -> Host {
    let parts = vouch_adapters::local::parts(dir);
    Host::new(store, Arc::new(clock), owner, dir.join("drafts"), parts)
}

fn agent() -> ureq::Agent {
    ureq::AgentBuilder::new().redirects(0).build()
}

fn status(r: Result<ureq::Response, ureq::Error>) -> (u16, String, Option<ureq::Response>) {
    match r {
        Ok(r) => (r.status(), String::new(), Some(r)),
        Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap(), None),
        Err(e) => panic!("{e}"),
    }
}

impl Server {
    fn url(&self, p: &str) -> String {
        format!("{}{p}", self.base)
    }

    /// Sign in; the session cookie (name=value).
    fn sign_in(&self, tz: &str) -> String {
        let r = agent()
            .post(&self.url("/console/signin"))
            .send_form(&[("token", SECRET), ("tz", tz), ("next", "/console/")])
            .unwrap();
        assert_eq!(r.status(), 303);
        assert_eq!(r.header("location"), Some("/console/"));
        let set = r.header("set-cookie").unwrap().to_string();
        for flag in ["HttpOnly", "SameSite=Strict", "Path=/console"] {
            assert!(set.contains(flag), "{set}");
        }
        set.split(';').next().unwrap().to_string()
    }

    fn page(&self, cookie: &str, p: &str) -> (u16, String) {
        match agent().get(&self.url(p)).set("Cookie", cookie).call() {
            Ok(r) => (r.status(), r.into_string().unwrap()),
            Err(ureq::Error::Status(c, r)) => (c, r.into_string().unwrap()),
            Err(e) => panic!("{e}"),
        }
    }
}

fn csrf_of(page: &str) -> String {
    let at = page.find("name=\"csrf\" value=\"").unwrap() + "name=\"csrf\" value=\"".len();
    page[at..at + 64].to_string()
}

#[test]
fn sign_in_sets_a_strict_http_only_session_and_every_form_is_checked() {
    let s = start();
    // Not signed in: every page sends the person to the sign-in page, and back after it.
    let (code, _, r) = status(agent().get(&s.url("/console/board")).call());
    assert_eq!(code, 303);
    assert_eq!(
        r.unwrap().header("location"),
        Some("/console/signin?next=/console/board")
    );
    // A form sent without a session goes back to its page after sign-in, not to the form.
    let (code, _, r) = status(
        agent()
            .post(&s.url("/console/runs/r1/cards/d1/approve"))
            .send_form(&[("hash", "x")]),
    );
    assert_eq!(code, 303);
    assert_eq!(
        r.unwrap().header("location"),
        Some("/console/signin?next=/console/runs/r1/cards/d1")
    );
    let (code, _, r) = status(agent().get(&s.url("/")).call());
    assert_eq!(code, 303);
    assert_eq!(r.unwrap().header("location"), Some("/console/"));
    // A wrong token, an unknown zone and an open redirect are refused or neutralised.
    let (code, body, _) = status(
        agent()
            .post(&s.url("/console/signin"))
            .send_form(&[("token", "vouch_wrong"), ("tz", "UTC")]),
    );
    assert_eq!(code, 401);
    assert!(body.contains("vouch token new"), "{body}");
    let (code, body, _) = status(
        agent()
            .post(&s.url("/console/signin"))
            .send_form(&[("token", SECRET), ("tz", "Mars/Olympus")]),
    );
    assert_eq!(code, 422);
    assert!(body.contains("Mars/Olympus"), "{body}");
    let r = agent()
        .post(&s.url("/console/signin"))
        .send_form(&[("token", SECRET), ("next", "https://evil.example/")])
        .unwrap();
    assert_eq!(r.header("location"), Some("/console"));

    let cookie = s.sign_in("Europe/Berlin");
    let r = agent()
        .get(&s.url("/console/"))
        .set("Cookie", &cookie)
        .call()
        .unwrap();
    let csp = r.header("content-security-policy").unwrap().to_string();
    assert!(
        csp.contains("default-src 'none'") && csp.contains("script-src 'self'"),
        "{csp}"
    );
    assert_eq!(r.header("x-frame-options"), Some("DENY"));
    let inbox = r.into_string().unwrap();
    assert!(inbox.contains("Nothing waits for you."), "{inbox}");
    assert!(
        inbox.contains("No receipt yet"),
        "an empty state says what to do: {inbox}"
    );
    let csrf = csrf_of(&inbox);

    // Forms: a wrong CSRF token or another site's Origin changes nothing (403).
    let zone = |token: &str, origin: Option<&str>| {
        let mut req = agent().post(&s.url("/console/zone")).set("Cookie", &cookie);
        if let Some(o) = origin {
            req = req.set("Origin", o);
        }
        status(req.send_form(&[("csrf", token), ("tz", "Asia/Tokyo"), ("next", "/console/")])).0
    };
    assert_eq!(zone("f".repeat(64).as_str(), None), 403);
    assert_eq!(zone(&csrf, Some("http://evil.example")), 403);
    assert!(s
        .page(&cookie, "/console/")
        .1
        .contains("value=\"Europe/Berlin\""));
    assert_eq!(zone(&csrf, Some(&s.base)), 303);
    assert!(s
        .page(&cookie, "/console/")
        .1
        .contains("value=\"Asia/Tokyo\""));

    // Revoking the token signs its sessions out.
    assert!(s.store.remove_token("person").unwrap());
    let (code, _) = s.page(&cookie, "/console/");
    assert_eq!(code, 303);
}

#[test]
fn schedules_show_the_next_slot_in_the_persons_zone_and_every_missed_slot_with_its_receipt() {
    let s = start();
    s.host
        .put_schedule(&Schedule {
            name: "brief".into(),
            cron: "0 7 * * *".into(),
            tz: "UTC".into(),
            routine: json!({"prompt": "7am brief", "model": {"kind": "script", "turns": [{"final": "ok"}]}}),
            catch_up: vouch_store::CatchUp::Skip,
            overlap: vouch_store::Overlap::Skip,
            grace_ms: 15 * 60_000,
            created_ms: T0,
        })
        .unwrap();
    // The machine was off for three mornings: the scheduler consumes them as missed (§12.3).
    let clock = ManualClock::new(T0 + 3 * 86_400_000 + 6 * 3_600_000, 1);
    // Another host on the same store, with the clock three days on.
    let owner = format!("{}-ticker", vouch_runtime::host::process_owner());
    let host = host_on(s.tmp.path(), s.store.clone(), clock, owner);
    let report = host.tick().unwrap();
    assert_eq!(report.missed.len(), 3, "{report:?}");
    let cookie = s.sign_in("America/New_York");
    let (code, page) = s.page(&cookie, "/console/schedules");
    assert_eq!(code, 200);
    assert!(page.contains("0 7 * * *"), "{page}");
    // 07:00 UTC is 02:00 in New York (EST in December).
    assert!(page.contains("2026-12-02 02:00:00 EST"), "{page}");
    assert_eq!(page.matches("class=\"missed\"").count(), 3, "{page}");
    assert!(
        page.contains("Missed"),
        "each missed slot shows its receipt: {page}"
    );
    // The next slot is after the server's clock (T0, the manual clock of the served host).
    assert!(page.contains("2026-12-01 02:00:00 EST"), "{page}");
    assert!(page.contains("07:00:00 UTC"), "{page}");
}

#[test]
fn an_unknown_console_page_is_a_page_and_the_api_stays_behind_its_token() {
    let s = start();
    let cookie = s.sign_in("UTC");
    let (code, body) = s.page(&cookie, "/console/nowhere");
    assert_eq!(code, 404);
    assert!(body.contains("no such page"), "{body}");
    // The session cookie opens the console, never the API.
    let (code, body) = s.page(&cookie, "/api/runs");
    assert_eq!(code, 401);
    assert!(body.contains("unauthorized"), "{body}");
    let (code, body) = s.page(&cookie, "/api/measures");
    assert_eq!(code, 401, "{body}");
}

#[test]
fn a_cr_lf_in_the_consoles_next_redirects_to_the_inbox_not_a_500() {
    let s = start();
    for next in [
        "/console/runs/x\r\nSet-Cookie: a=b",
        "/console/\n",
        "/console/é",
        "/console/\u{0}",
    ] {
        let (code, body, r) = status(agent().post(&s.url("/console/signin")).send_form(&[
            ("token", SECRET),
            ("tz", "UTC"),
            ("next", next),
        ]));
        assert_eq!(code, 303, "{next:?}: {body}");
        let r = r.unwrap();
        assert_eq!(r.header("location"), Some("/console"), "{next:?}");
        assert!(r.header("a").is_none());
    }
    // The sign-in page's hidden field gets the same treatment.
    let (code, body) = s.page("", "/console/signin?next=/console/%0D%0Ax");
    assert_eq!(code, 200);
    assert!(body.contains("name=\"next\" value=\"/console\""), "{body}");
}

#[test]
fn console_measures_with_a_multibyte_since_is_refused_not_a_panic() {
    let s = start();
    let cookie = s.sign_in("UTC");
    for since in [
        "%E2%82%AC",
        "1%E2%82%AC",
        "%E2%82%ACd",
        "-5h",
        "99999999999999999d",
    ] {
        let (code, body) = s.page(&cookie, &format!("/console/measures?since={since}"));
        assert_eq!(code, 422, "{since}: {body}");
        assert!(body.contains("expected a window like"), "{since}: {body}");
    }
}

/// Issue 23 #10 (§17.3): only a person token signs in; behind TLS (a proxy's
/// `X-Forwarded-Proto: https`) the session cookie is also `Secure`, and stays `HttpOnly`
/// and `SameSite=Strict`.
#[test]
fn only_a_person_token_signs_in_and_the_cookie_is_secure_behind_tls() {
    let s = start();
    for (name, secret, scope, identity) in [
        ("w", "vouch_w", vouch_core::Scope::Worker, Some("w1")),
        ("r", "vouch_r", vouch_core::Scope::Reader, None),
        ("a", "vouch_a", vouch_core::Scope::Admin, None),
    ] {
        s.store
            .put_token(&ApiToken {
                name: name.into(),
                hash: vouch_server::token_hash(secret),
                created_ms: 1,
                scope,
                identity: identity.map(String::from),
            })
            .unwrap();
        let (code, body, _) = status(
            agent()
                .post(&s.url("/console/signin"))
                .send_form(&[("token", secret), ("tz", "UTC")]),
        );
        assert_eq!(code, 403, "{name}");
        assert!(body.contains("person token"), "{body}");
    }
    let plain = agent()
        .post(&s.url("/console/signin"))
        .send_form(&[("token", SECRET), ("tz", "UTC")])
        .unwrap();
    assert!(!plain.header("set-cookie").unwrap().contains("Secure"));
    let tls = agent()
        .post(&s.url("/console/signin"))
        .set("X-Forwarded-Proto", "https")
        .send_form(&[("token", SECRET), ("tz", "UTC")])
        .unwrap();
    let set = tls.header("set-cookie").unwrap();
    for flag in ["; Secure", "HttpOnly", "SameSite=Strict"] {
        assert!(set.contains(flag), "{set}");
    }
}

/// A thread's page (§13.1.1) lists every task of the correlation in the order offered, with
/// its attempts and accepted output, and nothing of another thread; the measures page takes
/// the thread as a filter and says so; an unknown thread is a 404 page.
#[test]
fn a_threads_page_lists_its_tasks_in_order() {
    use vouch_store::board::{ReportKind, Usage};
    let s = start();
    let cookie = s.sign_in("UTC");
    let offer = |id: &str, correlation: &str, at: i64| {
        let mut t = vouch_store::board_conformance::new_task(id, 1, at);
        t.spec.correlation = correlation.into();
        t.spec.brief = format!("brief of {id}");
        s.board.offer(&t).unwrap();
    };
    offer("t-first", "", T0);
    offer("t-elsewhere", "other", T0 + 1);
    offer("t-second", "t-first", T0 + 2);
    let c = s
        .board
        .claim(&vouch_store::board_conformance::claim_req(
            "w1",
            Some("t-first"),
            T0 + 10,
        ))
        .unwrap()
        .unwrap();
    s.board
        .report(&vouch_store::board::Report {
            attempt: vouch_store::board::AttemptRef {
                task_id: c.task.id.clone(),
                n: c.attempt.n,
                claimant: c.attempt.claimant.clone(),
                epoch: c.attempt.epoch,
            },
            kind: ReportKind::Accepted {
                result: json!({"summary": "the first answer"}),
                self_assessment: None,
                verdict: None,
            },
            run_id: None,
            receipt: None,
            usage: Usage::default(),
            signature: None,
            stamp: None,
            now_ms: T0 + 20,
        })
        .unwrap();
    let (code, body) = s.page(&cookie, "/console/threads/t-first");
    assert_eq!(code, 200, "{body}");
    let (a, b) = (
        body.find("brief of t-first").unwrap(),
        body.find("brief of t-second").unwrap(),
    );
    assert!(a < b, "in the order offered: {body}");
    assert!(body.contains("the first answer"), "{body}");
    assert!(body.contains("completed"), "{body}");
    assert!(!body.contains("t-elsewhere"), "{body}");
    let (code, body) = s.page(&cookie, "/console/measures?correlation=t-first");
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("Only thread"), "{body}");
    // Knowledge leverage (§13.7.3): each kind of read its own chart, the counts in the table.
    for fig in [
        "Pinned-context reads per accepted output",
        "Input-artifact reads per accepted output",
        "Diary reads per accepted output",
        "Reads (context · input · diary)",
    ] {
        assert!(body.contains(fig), "{fig}: {body}");
    }
    let (code, body) = s.page(&cookie, "/console/threads/nothing-here");
    assert_eq!(code, 404, "{body}");
}

/// Issue 28: the start form's refusals are the API's, said in words, naming what is wrong;
/// none starts a run. A good form opens the new run's page.
#[test]
fn the_start_form_refuses_bad_input_in_words_and_starts_nothing() {
    let s = start();
    let cookie = s.sign_in("UTC");
    let (code, page) = s.page(&cookie, "/console/runs/new");
    assert_eq!(code, 200);
    assert!(page.contains("Start a run"), "{page}");
    let csrf = csrf_of(&page);
    let post = |fields: &[(&str, &str)]| {
        let mut form = vec![("csrf", csrf.as_str())];
        form.extend_from_slice(fields);
        status(
            agent()
                .post(&s.url("/console/runs/new"))
                .set("Cookie", &cookie)
                .send_form(&form),
        )
    };
    let turns = r#"[{"declare": {"deliveries": []}}, {"final": "done"}]"#;
    let big = "x".repeat(vouch_server::console::EDIT_PAYLOAD_BYTES_MAX + 1);
    for (fields, want_code, words) in [
        (vec![("title", "t"), ("json", "[")], 422, "cannot be read"),
        (vec![("title", "t"), ("json", "  ")], 422, "Paste a script"),
        (vec![("json", turns)], 422, "needs a title"),
        (
            vec![("title", "t"), ("json", r#"[{"fly": 1}]"#)],
            422,
            "turn 0",
        ),
        (
            vec![("kind", "routine"), ("json", r#"{"script": []}"#)],
            422,
            "prompt",
        ),
        (
            vec![("title", "t"), ("kind", "poem"), ("json", turns)],
            422,
            "script or a routine",
        ),
        (vec![("title", "t"), ("json", big.as_str())], 413, "at most"),
    ] {
        let (code, body, _) = post(&fields);
        assert_eq!(code, want_code, "{fields:?}: {body}");
        assert!(body.contains(words), "{fields:?}: {body}");
    }
    assert!(
        s.host.runs(10).unwrap().is_empty(),
        "a refusal started a run"
    );
    // A form without the session's token is refused before anything is read.
    let (code, _, _) = status(
        agent()
            .post(&s.url("/console/runs/new"))
            .set("Cookie", &cookie)
            .send_form(&[("csrf", "0"), ("title", "t"), ("json", turns)]),
    );
    assert_eq!(code, 403);
    // A good form: the run's page opens.
    let (code, _, r) = post(&[("title", "Nothing to do"), ("json", turns)]);
    assert_eq!(code, 303);
    let to = r.unwrap().header("location").unwrap().to_string();
    let run = s.host.runs(10).unwrap()[0].id.clone();
    assert_eq!(to, format!("/console/runs/{run}"));
    // The form carries a key of its own: sent twice (a double click), it starts one run and
    // both land on its page; the same form with another script is refused in words.
    let (_, page) = s.page(&cookie, "/console/runs/new");
    let key = hidden_of(&page, "key");
    assert_eq!(key.len(), 64, "{page}");
    let twice = [("key", key.as_str()), ("title", "Once"), ("json", turns)];
    let (code, _, first) = post(&twice);
    assert_eq!(code, 303);
    let (code, _, second) = post(&twice);
    assert_eq!(code, 303);
    let at = |r: Option<ureq::Response>| r.unwrap().header("location").unwrap().to_string();
    assert_eq!(at(first), at(second));
    let (code, body, _) = post(&[("key", key.as_str()), ("title", "Other"), ("json", turns)]);
    assert_eq!(code, 409, "{body}");
    assert!(body.contains("already started a run"), "{body}");
    let titles: Vec<String> = s
        .host
        .runs(10)
        .unwrap()
        .into_iter()
        .map(|r| r.title)
        .collect();
    assert_eq!(
        titles.iter().filter(|t| *t == "Once").count(),
        1,
        "{titles:?}"
    );
    assert!(!titles.contains(&"Other".to_string()), "{titles:?}");
}

/// The value of the hidden input `name` on a page.
fn hidden_of(page: &str, name: &str) -> String {
    let at = page
        .find(&format!("name=\"{name}\" value=\""))
        .unwrap_or_else(|| panic!("no {name} in {page}"));
    let rest = &page[at + name.len() + 15..];
    rest[..rest.find('"').unwrap()].to_string()
}
