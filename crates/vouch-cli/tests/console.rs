//! The web console (issue 15) in a real headless Chromium, driven over WebDriver
//! (chromium-driver), against the real `vouch serve --http` on a fresh home: sign in, a run
//! that suspends shows its card in the inbox, approving it from a second tab makes the receipt
//! arrive on the open run page without a reload (and the file is on disk, and the run ended
//! while `watching`), an edit shows the new hash and supersedes the old card, a denial, a
//! payload with terminal escapes and bidirectional overrides renders inert, and the board and
//! measures pages show a real worker's run. Chromium and chromium-driver come from Debian's
//! packages; `scripts/test.sh` installs them.
//!
//! With `VOUCH_CONSOLE_SCREENSHOTS=DIR` the test also saves the README's screenshots there.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

/// How long a page may take to show what the test waits for (a loaded machine is slow).
const WAIT: Duration = Duration::from_secs(60);

struct Killed(Child);
impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

struct Console {
    tmp: tempfile::TempDir,
    home: PathBuf,
    base: String,
    token: String,
    _server: Killed,
    _driver: Killed,
    browser: Client,
}

fn vouch(home: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vouch"))
        .arg("--home")
        .arg(home)
        .args(args)
        .current_dir(repo_root())
        .env_remove("VOUCH_DATABASE_URL")
        .env_remove("VOUCH_MODEL_URL")
        .env_remove("VOUCH_CRASH_AFTER")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
        .unwrap()
}

fn vouch_json(home: &Path, args: &[&str]) -> Value {
    let mut a = vec!["--json"];
    a.extend_from_slice(args);
    let out = vouch(home, &a);
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn which(name: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join(name))
            .find(|f| f.is_file())
    })
}

impl Console {
    async fn start() -> Console {
        let driver_bin = which("chromedriver").unwrap_or_else(|| {
            panic!("chromedriver is not installed: install Debian's `chromium` and `chromium-driver` (scripts/test.sh does)")
        });
        let chromium = which("chromium")
            .or_else(|| which("chromium-browser"))
            .expect(
                "chromium is not installed: install Debian's `chromium` (scripts/test.sh does)",
            );
        let tmp = tempfile::tempdir().unwrap();
        let home = tmp.path().join("home");
        assert!(vouch(&home, &["init"]).status.success());
        let token = vouch_json(&home, &["token", "new", "browser"])["token"]
            .as_str()
            .unwrap()
            .to_string();
        let mut child = Command::new(env!("CARGO_BIN_EXE_vouch"))
            .arg("--home")
            .arg(&home)
            .args(["--json", "serve", "--http", "127.0.0.1:0"])
            .current_dir(repo_root())
            .env_remove("VOUCH_DATABASE_URL")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let stdout = child.stdout.take().unwrap();
        let server = Killed(child);
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let addr = serde_json::from_str::<Value>(&line).unwrap()["listening"]
            .as_str()
            .unwrap()
            .to_string();
        let port = free_port();
        let driver = Killed(
            Command::new(driver_bin)
                .arg(format!("--port={port}"))
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let wd = format!("http://127.0.0.1:{port}");
        let mut ready = false;
        for _ in 0..200 {
            if ureq::get(&format!("{wd}/status")).call().is_ok() {
                ready = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        assert!(ready, "chromedriver did not answer on {wd}");
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": chromium,
                "args": ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                         "--window-size=1280,900", "--lang=en-US"],
            }),
        );
        let browser = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&wd)
            .await
            .expect("start a headless Chromium session");
        Console {
            tmp,
            home,
            base: format!("http://{addr}"),
            token,
            _server: server,
            _driver: driver,
            browser,
        }
    }

    fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    async fn goto(&self, path: &str) {
        self.browser.goto(&self.url(path)).await.unwrap();
    }

    /// The text of the first element matching `css`, waiting for it (and retrying when a
    /// navigation replaced the page between finding the element and reading it).
    async fn text(&self, css: &str) -> String {
        let deadline = std::time::Instant::now() + WAIT;
        loop {
            let got = match self.browser.find(Locator::Css(css)).await {
                Ok(e) => e.text().await,
                Err(e) => Err(e),
            };
            match got {
                Ok(t) => return t,
                Err(e) if std::time::Instant::now() > deadline => {
                    panic!("no `{css}` on the page: {e}")
                }
                Err(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    }

    async fn has(&self, css: &str) -> bool {
        !self
            .browser
            .find_all(Locator::Css(css))
            .await
            .unwrap()
            .is_empty()
    }

    async fn js(&self, script: &str) -> Value {
        self.browser.execute(script, vec![]).await.unwrap()
    }

    async fn shot(&self, name: &str) {
        if let Some(dir) = std::env::var_os("VOUCH_CONSOLE_SCREENSHOTS") {
            let png = self.browser.screenshot().await.unwrap();
            std::fs::write(Path::new(&dir).join(format!("console-{name}.png")), png).unwrap();
        }
    }

    async fn sign_in(&self) {
        self.goto("/console/").await;
        // Not signed in: the sign-in page, then back to where the person was going.
        let field = self
            .browser
            .wait()
            .at_most(WAIT)
            .for_element(Locator::Css("#token"))
            .await
            .unwrap();
        field.send_keys(&self.token).await.unwrap();
        let tz = self.browser.find(Locator::Css("#tz")).await.unwrap();
        tz.clear().await.unwrap();
        tz.send_keys("Europe/Berlin").await.unwrap();
        self.browser
            .find(Locator::Css("form.signin button"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
        let deadline = std::time::Instant::now() + WAIT;
        while self.text("h1").await != "Inbox" {
            assert!(
                std::time::Instant::now() < deadline,
                "sign-in did not reach the inbox: {}",
                self.browser.source().await.unwrap()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert!(self.text("nav .who").await.contains("browser"));
    }

    /// The session cookie, for plain HTTP requests as the signed-in person.
    async fn cookie(&self) -> String {
        let c = self
            .browser
            .get_named_cookie("vouch_session")
            .await
            .unwrap();
        format!("vouch_session={}", c.value())
    }

    fn script(&self, name: &str, turns: Value) -> String {
        let p = self.tmp.path().join(name);
        std::fs::write(&p, turns.to_string()).unwrap();
        p.to_str().unwrap().to_string()
    }

    /// A run that overwrites Notes/today.md and so waits for approval (rule R9).
    fn suspended_run(&self, title: &str, text: &str) -> (String, String) {
        let script = self.script(
            &format!("run-{}.json", title.len()),
            json!([
                {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Notes/today.md"}}]}},
                {"deliver": "d1", "payload": {"text": text}},
                {"final": "done"}
            ]),
        );
        let out = vouch(
            &self.home,
            &["run", title, "--script", &script, "--presence", "away"],
        );
        assert!(
            String::from_utf8_lossy(&out.stderr).contains("waits for your approval")
                || String::from_utf8_lossy(&out.stdout).contains("waits for your approval"),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let cards = vouch_json(&self.home, &["approvals"]);
        let card = cards
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["payload"]["text"] == text)
            .unwrap_or_else(|| panic!("no open card for {title}: {cards}"));
        (
            card["run"].as_str().unwrap().to_string(),
            card["payload_hash"].as_str().unwrap().to_string(),
        )
    }

    fn notes(&self) -> String {
        std::fs::read_to_string(self.home.join("files/Notes/today.md")).unwrap_or_default()
    }
}

async fn wait_until(c: &Console, what: &str, script: &str) {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        if c.js(script).await == Value::Bool(true) {
            return;
        }
        if std::time::Instant::now() > deadline {
            panic!("never true: {what} ({script})");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approve_edit_and_deny_in_a_real_browser_with_the_receipt_arriving_live() {
    let c = Console::start().await;
    // A first save so the next one overwrites (and so waits for the person).
    let out = vouch(
        &c.home,
        &[
            "run",
            "Save my notes",
            "--script",
            "examples/save-notes.json",
        ],
    );
    assert!(out.status.success());
    c.sign_in().await;
    let (run, hash) = c.suspended_run(
        "Rewrite today's notes",
        "# Today\n\n- approved in the console\n",
    );

    // The card is in the inbox, with the badge.
    c.goto("/console/").await;
    if !c.has("#badge").await {
        panic!(
            "no badge: approvals {} api {} page {}",
            vouch_json(&c.home, &["approvals"]),
            ureq::get(&c.url("/api/inbox"))
                .set("Authorization", &format!("Bearer {}", c.token))
                .call()
                .unwrap()
                .into_string()
                .unwrap(),
            c.browser.source().await.unwrap()
        );
    }
    assert_eq!(
        c.browser
            .find(Locator::Css("#waiting"))
            .await
            .unwrap()
            .attr("data-waiting")
            .await
            .unwrap()
            .as_deref(),
        Some("1")
    );
    assert_eq!(c.text("#badge").await, "1");
    let href = c
        .browser
        .find(Locator::Css(&format!("a.button[href*='{run}/cards/d1']")))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    assert!(c.text("ul.cards").await.contains("overwrites"));
    // A payload's line breaks are line breaks, never a literal `\n`.
    let summary = c.text("ul.cards .summary").await;
    assert!(
        summary.contains("# Today\n") && !summary.contains("\\n"),
        "{summary}"
    );
    c.shot("inbox").await;

    // The run page, open in this tab: it waits for the receipt.
    c.goto(&format!("/console/runs/{run}")).await;
    assert!(c.text("#receipt-waiting").await.contains("has not ended"));
    assert!(c.text("#chain").await.starts_with("Chain verified"));
    let chain_before = c.text("#chain").await;
    // Plain words first, the contract's term beside them.
    let status = c.text("tr[data-delivery=d1] td.status").await;
    assert_eq!(status, "waiting for your approval awaiting", "{status}");
    assert!(c
        .text("tr[data-delivery=d1]")
        .await
        .contains("needs your approval confirm"));
    assert!(c.text("#ended").await.contains("not yet"));
    // Each step's inputs and outputs inline on the timeline, one numbering (#seq).
    assert!(
        c.has("#timeline .io dl.json").await,
        "steps show their inputs and outputs inline"
    );
    c.js("window.__notReloaded = 42; return true;").await;
    let run_tab = c.browser.window().await.unwrap();

    // A second tab: the card, decided with the keyboard alone.
    let card_tab = c.browser.new_window(true).await.unwrap().handle;
    c.browser.switch_to_window(card_tab).await.unwrap();
    c.goto(&href).await;
    assert_eq!(c.text("#payload-hash").await, hash);
    assert!(c
        .text("#payload-rendered")
        .await
        .contains("approved in the console"));
    assert!(c.text(".reason").await.contains("overwrites"));
    // The overwrite shows what it changes in the file it replaces.
    let diff = c.text("#diff").await;
    assert!(
        diff.contains("− - ship the foundation") && diff.contains("+ - approved in the console"),
        "{diff}"
    );
    c.shot("card").await;
    let mut reached = false;
    for _ in 0..60 {
        c.browser
            .active_element()
            .await
            .unwrap()
            .send_keys("\u{E004}")
            .await
            .unwrap();
        if c.js("return document.activeElement && document.activeElement.id === 'approve';")
            .await
            == Value::Bool(true)
        {
            reached = true;
            break;
        }
    }
    assert!(reached, "the approve button is not reachable with Tab");
    c.browser
        .active_element()
        .await
        .unwrap()
        .send_keys("\u{E007}")
        .await
        .unwrap();
    // The approval ran the delivery: the file holds exactly the approved text.
    wait_until(
        &c,
        "the approval navigated to the run",
        &format!("return location.pathname === '/console/runs/{run}';"),
    )
    .await;
    assert_eq!(c.notes(), "# Today\n\n- approved in the console\n");

    // Back on the first tab: the receipt arrived without a reload.
    c.browser.switch_to_window(run_tab).await.unwrap();
    wait_until(
        &c,
        "the receipt arrived on the open run page",
        "var r = document.getElementById('receipt'); return !!r && !r.hidden && r.textContent.length > 0;",
    )
    .await;
    assert_eq!(
        c.js("return window.__notReloaded;").await,
        json!(42),
        "the page reloaded"
    );
    let receipt = c.text("#receipt").await;
    assert!(receipt.contains("Saved to"), "{receipt}");
    assert_eq!(c.text("#outcome").await, "succeeded");
    assert!(
        c.has("#timeline li.fresh").await,
        "journal events arrived live"
    );
    // Everything the end changed arrived too: status, evidence, end time, chain count.
    wait_until(
        &c,
        "the end time arrived",
        "return document.getElementById('ended').textContent.indexOf('not yet') < 0;",
    )
    .await;
    assert_eq!(
        c.text("tr[data-delivery=d1] td.status").await,
        "done, and checked verified"
    );
    assert!(c
        .text("tr[data-delivery=d1] td.evidence")
        .await
        .contains("sha256:"));
    let events = vouch_json(&c.home, &["journal", &run])
        .as_array()
        .unwrap()
        .len();
    let chain = c.text("#chain").await;
    assert!(
        chain.contains(&format!(" {events} events")) && chain != chain_before,
        "{chain}"
    );
    c.shot("run").await;
    c.js("document.getElementById('h-journal').scrollIntoView(); return true;")
        .await;
    c.shot("run-timeline").await;
    // The run ended while its page was open: routed for a person who is watching (§11.1),
    // although it was started with `--presence away`.
    let journal = vouch_json(&c.home, &["journal", &run]);
    let terminal = journal
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["kind"] == "terminal")
        .unwrap()
        .clone();
    assert_eq!(terminal["body"]["presence"], "watching", "{terminal}");
    // Readable without script: the same page over plain HTTP carries the receipt.
    let cookie = c.cookie().await;
    let page = ureq::get(&c.url(&format!("/console/runs/{run}")))
        .set("Cookie", &cookie)
        .call()
        .unwrap()
        .into_string()
        .unwrap();
    assert!(page.contains("Saved to"), "{page}");

    // Edit: the new hash is shown before it can be approved; the old card is superseded.
    let (run2, old) = c.suspended_run("Second rewrite", "# Today\n\n- first draft\n");
    c.goto(&format!("/console/runs/{run2}/cards/d1?hash={old}"))
        .await;
    // A text payload is edited as text.
    let field = c.browser.find(Locator::Css("#text")).await.unwrap();
    field.clear().await.unwrap();
    field
        .send_keys("# Today\n\n- edited in the console\n")
        .await
        .unwrap();
    c.browser
        .find(Locator::Css("#save-text"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let new = c.text("#new-hash").await;
    assert_ne!(new, old);
    assert_eq!(c.text("#payload-hash").await, new);
    let cards = vouch_json(&c.home, &["approvals"]);
    assert_eq!(cards[0]["payload_hash"], new.as_str(), "{cards}");
    assert!(c
        .text("#payload-rendered")
        .await
        .contains("edited in the console"));
    assert_eq!(
        cards[0]["payload"]["text"], "# Today\n\n- edited in the console\n",
        "the text as typed, line breaks as LF"
    );
    // The superseded card says so and offers no approval.
    c.goto(&format!("/console/runs/{run2}/cards/d1?hash={old}"))
        .await;
    assert!(c.text("#superseded").await.contains("superseded"));
    assert!(!c.has("#approve").await);
    // A forged approval of the old hash through the form route changes nothing.
    let csrf = c
        .js("return document.querySelector('input[name=csrf]').value;")
        .await;
    let forged = ureq::post(&c.url(&format!("/console/runs/{run2}/cards/d1/approve")))
        .set("Cookie", &cookie)
        .send_form(&[("csrf", csrf.as_str().unwrap()), ("hash", &old)]);
    assert!(
        matches!(forged, Err(ureq::Error::Status(404 | 409, _))),
        "{forged:?}"
    );
    assert_eq!(
        vouch_json(&c.home, &["approvals"])[0]["payload_hash"],
        new.as_str()
    );
    // A form without the session's CSRF token is refused.
    let no_csrf = ureq::post(&c.url(&format!("/console/runs/{run2}/cards/d1/approve")))
        .set("Cookie", &cookie)
        .send_form(&[("csrf", "0000"), ("hash", &new)]);
    assert!(
        matches!(no_csrf, Err(ureq::Error::Status(403, _))),
        "{no_csrf:?}"
    );
    // Deny the current card: the run is withdrawn and the file is untouched.
    c.goto(&format!("/console/runs/{run2}/cards/d1?hash={new}"))
        .await;
    c.browser
        .find(Locator::Css("#deny"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_until(
        &c,
        "the denial ended the run",
        "var r = document.getElementById('receipt'); return !!r && !r.hidden && r.textContent.indexOf('Withdrawn at your request') >= 0;",
    )
    .await;
    assert_eq!(c.notes(), "# Today\n\n- approved in the console\n");
    assert!(vouch_json(&c.home, &["approvals"])
        .as_array()
        .unwrap()
        .is_empty());

    // Escapes and bidirectional overrides in a title and a payload render inert.
    let evil = "ok\u{1b}[2J\u{202e}gpj.exe <b>bold</b>";
    let (run3, h3) = c.suspended_run("Evil \u{202e}eltit", evil);
    c.goto(&format!("/console/runs/{run3}/cards/d1?hash={h3}"))
        .await;
    let shown = c.text("#payload-rendered").await;
    assert!(
        shown.contains("ok\\x1b[2J\\u{202e}gpj.exe <b>bold</b>"),
        "{shown}"
    );
    let source = c.browser.source().await.unwrap();
    assert!(
        !source.contains('\u{202e}') && !source.contains('\u{1b}'),
        "a raw control reached the page"
    );
    assert!(
        !c.has("#payload-rendered b").await,
        "payload markup was interpreted"
    );
    c.goto(&format!("/console/runs/{run3}")).await;
    assert_eq!(c.text("h1").await, "Evil \\u{202e}eltit");
    c.goto("/console/").await;
    assert!(!c.browser.source().await.unwrap().contains('\u{202e}'));

    // A phone's width: nothing wider than the screen.
    c.browser.set_window_size(390, 844).await.unwrap();
    for path in [
        "/console/".to_string(),
        format!("/console/runs/{run}"),
        format!("/console/runs/{run3}/cards/d1?hash={h3}"),
    ] {
        c.goto(&path).await;
        assert_eq!(
            c.js("return document.documentElement.scrollWidth <= window.innerWidth + 1;")
                .await,
            Value::Bool(true),
            "{path} scrolls sideways at 390 px"
        );
    }
    c.browser.close().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn board_and_measures_show_a_real_worker_run() {
    let c = Console::start().await;
    c.sign_in().await;
    // Empty states say what to do.
    c.goto("/console/schedules").await;
    assert!(c.text("main .empty").await.contains("vouch schedule add"));
    c.goto("/console/board").await;
    assert!(c.text("main .empty").await.contains("vouch task offer"));
    c.goto("/console/measures").await;
    assert!(c.text("main .empty").await.contains("vouch worker"));

    let file = c.tmp.path().join("summary.txt");
    std::fs::write(&file, "the summary, as a file\n").unwrap();
    let cid = vouch_json(&c.home, &["artifact", "put", file.to_str().unwrap()])["cid"]
        .as_str()
        .unwrap()
        .to_string();
    let task = vouch_json(
        &c.home,
        &[
            "task",
            "offer",
            "--type",
            "freeform",
            "--brief",
            "Summarise the week",
            "--tag",
            "weekly",
        ],
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let script = c.script(
        "worker.json",
        json!([
            {"declare": {"deliveries": []}},
            {"submit": {"summary": "done", "artifacts": [cid]}},
            {"final": "submitted"}
        ]),
    );
    let out = vouch(
        &c.home,
        &[
            "--json", "worker", "--name", "w1", "--script", &script, "--drain",
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // More of the board's life: one task still queued, one cancelled.
    let later = |brief: &str| {
        vouch_json(
            &c.home,
            &["task", "offer", "--type", "freeform", "--brief", brief],
        )["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    later("Draft the next agenda");
    let dropped = later("Book the venue");
    assert!(vouch(&c.home, &["task", "cancel", &dropped])
        .status
        .success());

    c.goto("/console/board").await;
    assert!(c
        .text("section[data-lane=done]")
        .await
        .contains("Summarise the week"));
    let href = c
        .browser
        .find(Locator::Css("section[data-lane=done] a"))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    assert!(href.ends_with(&task), "{href}");
    assert!(c
        .text("section[data-lane=queued]")
        .await
        .contains("Draft the next agenda"));
    assert!(c
        .text("section[data-lane=cancelled]")
        .await
        .contains("Book the venue"));
    // The seven lanes fit one row at 1280 px; a done card says when it ended.
    assert_eq!(
        c.js("var t = Array.prototype.map.call(document.querySelectorAll('section.lane'), function (l) { return l.getBoundingClientRect().top; }); return t.length === 7 && t.every(function (x) { return x === t[0]; });")
            .await,
        Value::Bool(true),
        "the lanes wrap at 1280 px"
    );
    assert!(c
        .text("section[data-lane=done] .ended")
        .await
        .starts_with("ended "));
    c.shot("board").await;
    c.browser
        .find(Locator::Css("section[data-lane=done] a"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(c.text("#task-state").await, "completed");
    let assessed = c.text(".attempt .self-assessment").await;
    assert!(!assessed.contains("null"), "{assessed}");
    assert_eq!(c.text(".attempt .claimant").await, "w1");
    let attempt = c.text(".attempt").await;
    assert!(
        attempt.contains("Profile fingerprint") && attempt.contains("completed"),
        "{attempt}"
    );
    // The artifact downloads by its content id, byte for byte.
    let link = c
        .browser
        .find(Locator::Css(".artifacts a"))
        .await
        .unwrap()
        .attr("href")
        .await
        .unwrap()
        .unwrap();
    assert!(link.ends_with(&cid.replace(':', "%3A")), "{link}");
    let cookie = c.cookie().await;
    let mut bytes = vec![];
    std::io::Read::read_to_end(
        &mut ureq::get(&c.url(&link))
            .set("Cookie", &cookie)
            .call()
            .unwrap()
            .into_reader(),
        &mut bytes,
    )
    .unwrap();
    assert_eq!(bytes, b"the summary, as a file\n");
    // The attempt's run is linked (lineage) and opens.
    c.browser
        .find(Locator::Css(".attempt a[href^='/console/runs/']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert!(c.text("#outcome").await.len() > 1);

    // Measures: each figure its own chart, by cohort, thresholds shown, small sample marked.
    c.goto("/console/measures?by=type").await;
    let chart = c.text("svg[data-figure=accepted_output_rate]").await;
    // One of three freeform tasks accepted (one queued, one cancelled).
    assert!(
        chart.contains("freeform") && chart.contains("33% (n=3)") && chart.contains("small"),
        "{chart}"
    );
    assert!(c.text("#thresholds").await.contains("8 turns"));
    assert!(
        c.has("svg[data-figure=median_turns]").await
            && c.has("svg[data-figure=tokens_per_accepted_output]").await
    );
    assert!(!c
        .browser
        .source()
        .await
        .unwrap()
        .to_lowercase()
        .contains("overall score"));
    // Over time: a series of days, today's column with its n, marked small.
    let series = c.text("svg.series[data-figure=accepted_output_rate]").await;
    assert!(series.contains("3s"), "{series}");
    c.shot("measures").await;
    // The same figures as JSON for programs.
    let api: Value = ureq::get(&c.url("/api/measures?by=tag"))
        .set("Authorization", &format!("Bearer {}", c.token))
        .call()
        .unwrap()
        .into_json()
        .unwrap();
    let weekly = api["cohorts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["cohort"] == "weekly")
        .unwrap_or_else(|| panic!("{api}"));
    assert_eq!(weekly["rates"]["accepted_output_rate"], 1.0);
    assert_eq!(weekly["small_sample"], true);
    assert_eq!(api["thresholds"]["friction_turns"], 8);
    let bad = ureq::get(&c.url("/api/measures?by=colour"))
        .set("Authorization", &format!("Bearer {}", c.token))
        .call();
    assert!(matches!(bad, Err(ureq::Error::Status(422, _))), "{bad:?}");

    // A question waits in the inbox and is answered on its run's page. The open inbox says
    // something arrived, live, without reloading by itself.
    c.goto("/console/").await;
    c.js("window.__notReloaded = 7; return true;").await;
    vouch(
        &c.home,
        &[
            "run",
            "Plan the offsite",
            "--script",
            "examples/ask-first.json",
        ],
    );
    wait_until(
        &c,
        "the open inbox showed the new question in place",
        "var u = document.querySelector('ul.cards'); return !!u && u.textContent.indexOf('Which day and city') >= 0;",
    )
    .await;
    assert_eq!(c.js("return window.__notReloaded;").await, json!(7));
    assert_eq!(c.text("#badge").await, "1", "the badge followed");
    c.browser
        .find(Locator::Css("ul.cards a.button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css("#answer-text"))
        .await
        .unwrap()
        .send_keys("Friday, in Berlin")
        .await
        .unwrap();
    c.browser
        .find(Locator::Css("#answer button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_until(
        &c,
        "the answered run ended with its receipt",
        "var r = document.getElementById('receipt'); return !!r && !r.hidden && r.textContent.indexOf('Saved to') >= 0;",
    )
    .await;
    assert!(c.home.join("files/Plans/offsite.md").exists());

    // A schedule: its cron and zone, the next slot in the person's zone and in its own.
    assert!(vouch(
        &c.home,
        &[
            "schedule",
            "add",
            "brief",
            "--cron",
            "0 7 * * *",
            "--tz",
            "America/New_York",
            "--routine",
            "examples/brief-routine.json",
        ],
    )
    .status
    .success());
    c.goto("/console/schedules").await;
    let sched = c.text("section.schedule").await;
    assert!(
        sched.contains("0 7 * * *") && sched.contains("America/New_York"),
        "{sched}"
    );
    assert!(
        sched.contains("CET") && (sched.contains("EST") || sched.contains("EDT")),
        "{sched}"
    );
    assert!(sched.contains("No slot was missed"), "{sched}");
    // A routine runs now from the page, as the person's own run (no slot consumed).
    c.browser
        .find(Locator::Css("form.run-now button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_until(
        &c,
        "run now opened the run",
        "return location.pathname.indexOf('/console/runs/') === 0;",
    )
    .await;
    assert_eq!(c.text("#outcome").await, "succeeded");
    assert!(c.home.join("files/Briefs/today.md").exists());

    // An address that names no page is said in words; a form from another site is refused;
    // a wrong token does not sign in.
    let missing = ureq::get(&c.url("/console/nowhere"))
        .set("Cookie", &cookie)
        .call();
    assert!(
        matches!(missing, Err(ureq::Error::Status(404, _))),
        "{missing:?}"
    );
    let csrf = c
        .js("return document.querySelector('input[name=csrf]').value;")
        .await;
    let cross = ureq::post(&c.url("/console/zone"))
        .set("Cookie", &cookie)
        .set("Origin", "http://evil.example")
        .send_form(&[("csrf", csrf.as_str().unwrap()), ("tz", "UTC")]);
    assert!(
        matches!(cross, Err(ureq::Error::Status(403, _))),
        "{cross:?}"
    );
    let wrong =
        ureq::post(&c.url("/console/signin")).send_form(&[("token", "vouch_nope"), ("tz", "UTC")]);
    match wrong {
        Err(ureq::Error::Status(401, r)) => {
            assert!(r.into_string().unwrap().contains("vouch token new"))
        }
        other => panic!("{other:?}"),
    }

    c.goto("/console/doctor").await;
    assert!(c.text("main table").await.contains("folder"));
    // Where to connect and what to write there.
    let toml = c.home.join("vouch.toml").display().to_string();
    assert_eq!(c.text("#config-path").await, toml);
    assert!(c
        .text("pre.toml[data-kind=email]")
        .await
        .contains("[email]"));
    assert!(!c.text("main").await.contains("run `vouch doctor`"));
    c.shot("doctor").await;

    // Runs: every run, filtered and searched by title, paged.
    c.goto("/console/runs").await;
    assert!(c
        .text("table.runs-table")
        .await
        .contains("Plan the offsite"));
    c.goto("/console/runs?q=OFFSITE&state=ended").await;
    let found = c.text("table.runs-table").await;
    assert!(
        found.contains("Plan the offsite") && !found.contains("Summarise"),
        "{found}"
    );
    c.goto("/console/runs?trigger=task").await;
    assert!(c
        .text("table.runs-table")
        .await
        .contains("Summarise the week"));
    c.goto("/console/runs?trigger=scheduled").await;
    assert!(c.text("main .empty").await.contains("No run matches"));
    let bad = ureq::get(&c.url("/console/runs?state=finished"))
        .set("Cookie", &cookie)
        .call();
    assert!(matches!(bad, Err(ureq::Error::Status(400, _))), "{bad:?}");
    c.goto("/console/runs").await;
    c.shot("runs").await;

    // Actions from the pages, through the API: cancel a waiting run, resume a drafted one,
    // offer a task, offer a cancelled one again.
    vouch(
        &c.home,
        &["run", "Ask again", "--script", "examples/ask-first.json"],
    );
    let waiting = vouch_json(&c.home, &["runs", "list", "--state", "suspended"])[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.goto(&format!("/console/runs/{waiting}")).await;
    c.browser
        .find(Locator::Css("#cancel"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_until(
        &c,
        "the cancel ended the run",
        "var o = document.getElementById('outcome'); return !!o && o.textContent === 'withdrawn';",
    )
    .await;
    vouch(
        &c.home,
        &[
            "run",
            "E-mail the team",
            "--script",
            "examples/email-draft.json",
        ],
    );
    let drafted = vouch_json(&c.home, &["runs", "list", "--outcome", "failed"])[0]["id"]
        .as_str()
        .unwrap()
        .to_string();
    c.goto(&format!("/console/runs/{drafted}")).await;
    c.browser
        .find(Locator::Css("#resume"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_until(
        &c,
        "the resume opened the continuation",
        &format!("return location.pathname.indexOf('/console/runs/') === 0 && location.pathname.indexOf('{drafted}') < 0;"),
    )
    .await;
    assert!(
        c.text("dl.facts").await.contains(&drafted),
        "the continuation names its parent"
    );
    c.goto("/console/board").await;
    c.browser
        .find(Locator::Css("details.offer summary"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.browser
        .find(Locator::Css("#offer-brief"))
        .await
        .unwrap()
        .send_keys("Book a room")
        .await
        .unwrap();
    c.browser
        .find(Locator::Css("#offer-tags"))
        .await
        .unwrap()
        .send_keys("offsite, rooms")
        .await
        .unwrap();
    c.browser
        .find(Locator::Css("#offer-submit"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_until(
        &c,
        "the offer opened its task",
        "return location.pathname.indexOf('/console/board/t') === 0;",
    )
    .await;
    assert_eq!(c.text("#task-state").await, "queued");
    assert!(c.text("dl.facts").await.contains("Book a room"));
    c.goto(&format!("/console/board/{dropped}")).await;
    c.browser
        .find(Locator::Css("#retry"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_until(
        &c,
        "the retry opened a new task",
        &format!("return location.pathname.indexOf('/console/board/t') === 0 && location.pathname.indexOf('{dropped}') < 0;"),
    )
    .await;
    assert_eq!(c.text("#task-state").await, "queued");
    assert!(c.text("dl.facts").await.contains("Book the venue"));

    // A favicon; titles in plain words, in the console and in problem objects.
    let icon = ureq::get(&c.url("/console/assets/favicon.svg"))
        .call()
        .unwrap();
    assert_eq!(icon.content_type(), "image/svg+xml");
    let page = ureq::get(&c.url("/console/nowhere"))
        .set("Cookie", &cookie)
        .call();
    match page {
        Err(ureq::Error::Status(404, r)) => {
            assert!(r
                .into_string()
                .unwrap()
                .contains("<h1>There is no such page</h1>"))
        }
        other => panic!("{other:?}"),
    }
    let problem = ureq::post(&c.url("/api/tasks"))
        .set("Authorization", &format!("Bearer {}", c.token))
        .set("Content-Type", "application/json")
        .send_string("{not json");
    match problem {
        Err(ureq::Error::Status(400, r)) => {
            let p: Value = r.into_json().unwrap();
            assert_eq!(p["title"], "The request's JSON is not valid", "{p}");
        }
        other => panic!("{other:?}"),
    }
    // Signing out ends the session: the next page asks to sign in again.
    c.browser
        .find(Locator::Css("form.signout button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    c.browser
        .wait()
        .at_most(WAIT)
        .for_element(Locator::Css("#token"))
        .await
        .unwrap();
    let after = ureq::AgentBuilder::new()
        .redirects(0)
        .build()
        .get(&c.url("/console/board"))
        .set("Cookie", &cookie)
        .call()
        .unwrap();
    assert_eq!(after.status(), 303);
    c.browser.close().await.unwrap();
}

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// The text of every step on the open run page's timeline, in order.
async fn steps(c: &Console) -> Vec<String> {
    let v = c
        .js("return Array.prototype.map.call(document.querySelectorAll('#timeline > li'), function (li) { return li.textContent; });")
        .await;
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// Issue 28: a run started from the console (a script read from a file, then one pasted),
/// its page following it live with every new step in full, as a reload shows it; and a patch
/// apply judged on its card by the diff it applies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_a_run_follow_each_step_in_full_and_judge_a_patch_by_its_diff() {
    let c = Console::start().await;
    c.sign_in().await;

    // Start a run from the runs page, its script read from a file into the form's field.
    c.goto("/console/runs").await;
    c.browser
        .find(Locator::Css("#start-run"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    assert_eq!(c.text("h1").await, "Start a run");
    let file = repo_root().join("examples/save-notes.json");
    c.browser
        .find(Locator::Css("#start-title"))
        .await
        .unwrap()
        .send_keys("Save my notes")
        .await
        .unwrap();
    c.browser
        .find(Locator::Css("#start-file"))
        .await
        .unwrap()
        .send_keys(file.canonicalize().unwrap().to_str().unwrap())
        .await
        .unwrap();
    wait_until(
        &c,
        "the chosen file was read into the field",
        "var f = document.getElementById('start-json'); return f.value.indexOf('ship the foundation') >= 0;",
    )
    .await;
    assert!(c.text("#start-file-note").await.contains("save-notes.json"));
    c.js("document.activeElement.blur(); document.querySelector('h1').scrollIntoView(); return true;")
        .await;
    c.shot("start").await;
    c.browser
        .find(Locator::Css("#start-submit"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_until(
        &c,
        "the started run ended on its page",
        "var o = document.getElementById('outcome'); return location.pathname !== '/console/runs/new' && !!o && o.textContent === 'succeeded';",
    )
    .await;
    assert_eq!(c.text("h1").await, "Save my notes");
    assert_eq!(
        std::fs::read_to_string(c.home.join("files/Notes/today.md")).unwrap(),
        "# Today\n\n- ship the foundation\n"
    );

    // A pasted script that overwrites the note: it waits for approval, on its live page.
    c.goto("/console/runs/new").await;
    c.browser
        .find(Locator::Css("#start-title"))
        .await
        .unwrap()
        .send_keys("Rewrite my notes")
        .await
        .unwrap();
    let pasted =
        std::fs::read_to_string(repo_root().join("examples/overwrite-notes.json")).unwrap();
    c.browser
        .find(Locator::Css("#start-json"))
        .await
        .unwrap()
        .send_keys(&pasted)
        .await
        .unwrap();
    c.browser
        .find(Locator::Css("#start-submit"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    wait_until(
        &c,
        "the started run's page opened",
        "return /^\\/console\\/runs\\/[^/]+$/.test(location.pathname) && location.pathname !== '/console/runs/new' && !!document.getElementById('timeline');",
    )
    .await;
    let run = c
        .js("return location.pathname.split('/').pop();")
        .await
        .as_str()
        .unwrap()
        .to_string();
    c.js("window.__notReloaded = 28; return true;").await;
    // The host drives the run on the server: it comes to wait for the person's approval.
    let deadline = std::time::Instant::now() + WAIT;
    let card = loop {
        let cards = vouch_json(&c.home, &["approvals"]);
        if let Some(card) = cards
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["run"] == run.as_str())
        {
            break card.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no card for {run}: {cards}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let drawn = steps(&c).await.len();
    // Approved elsewhere: the steps that follow arrive on the open page.
    let out = vouch(
        &c.home,
        &[
            "approve",
            &run,
            "d1",
            "--hash",
            card["payload_hash"].as_str().unwrap(),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    wait_until(
        &c,
        "the receipt arrived on the open run page",
        "var r = document.getElementById('receipt'); return !!r && !r.hidden && r.textContent.indexOf('Saved to') >= 0;",
    )
    .await;
    assert_eq!(c.js("return window.__notReloaded;").await, json!(28));
    // Each step that arrived shows its inputs and outputs and its raw event, in full.
    let fresh = c
        .js("return document.querySelectorAll('#timeline > li.fresh').length;")
        .await
        .as_u64()
        .unwrap();
    assert!(fresh >= 2, "{fresh} steps arrived live");
    assert_eq!(
        c.js("return Array.prototype.every.call(document.querySelectorAll('#timeline > li.fresh'), function (li) { return !!li.querySelector('details pre.raw'); });")
            .await,
        Value::Bool(true),
        "every live step carries its raw event"
    );
    assert!(
        c.has("#timeline > li.fresh .io dl.json").await,
        "live steps show their bodies inline"
    );
    let live = steps(&c).await;
    assert!(live.len() > drawn, "{live:?}");
    let evidence = live[drawn..].join("\n");
    assert!(
        evidence.contains("sha256:"),
        "the evidence arrived: {evidence}"
    );
    // The shot starts at the approval: the steps that arrived after it.
    c.js("var k = Array.prototype.filter.call(document.querySelectorAll('#timeline > li .kind'), function (k) { return k.textContent === 'approval_granted'; })[0]; k.parentNode.scrollIntoView(); return true;")
        .await;
    c.shot("run-live").await;
    // What arrived live is what a reload shows, step by step.
    c.goto(&format!("/console/runs/{run}")).await;
    assert_eq!(steps(&c).await, live);

    // A patch applied to a real branch: its card shows the diff it applies.
    let repo = c.tmp.path().join("repo");
    std::fs::create_dir_all(repo.join("src")).unwrap();
    git(&repo, &["init", "--quiet", "-b", "main"]);
    git(&repo, &["config", "user.name", "t"]);
    git(&repo, &["config", "user.email", "t@localhost"]);
    std::fs::write(repo.join("src/client.rs"), "fn send() {}\n").unwrap();
    git(&repo, &["add", "-A"]);
    git(&repo, &["commit", "--quiet", "-m", "base"]);
    let task = vouch_json(
        &c.home,
        &[
            "task",
            "offer",
            "--type",
            "patch",
            "--brief",
            "add retry handling",
            "--repo",
            repo.to_str().unwrap(),
            "--base",
            "main",
            "--allow",
            "src/**",
            "--target",
            "src/client.rs",
            "--check",
            "tests=grep -q retry src/client.rs",
        ],
    )["id"]
        .as_str()
        .unwrap()
        .to_string();
    let script = c.script(
        "patch-worker.json",
        json!([
            {"declare": {"deliveries": []}},
            {"tool": "repo_write_file", "args": {"path": "src/client.rs", "text": "fn send() { retry() }\n"}},
            {"final": "implemented retry handling"}
        ]),
    );
    let out = vouch(
        &c.home,
        &["worker", "--name", "w", "--script", &script, "--drain"],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = vouch(&c.home, &["task", "apply", &task, "--branch", "main"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let card = vouch_json(&c.home, &["approvals"])[0].clone();
    assert_eq!(card["delivery"], "apply", "{card}");
    c.goto(&format!(
        "/console/runs/{}/cards/apply?hash={}",
        card["run"].as_str().unwrap(),
        card["payload_hash"].as_str().unwrap()
    ))
    .await;
    assert_eq!(c.text("#h-preview").await, "The change it applies");
    let diff = c.text("#preview").await;
    assert!(
        diff.contains("src/client.rs")
            && diff.contains("-fn send() {}")
            && diff.contains("+fn send() { retry() }"),
        "{diff}"
    );
    assert_eq!(
        c.js("return !!document.querySelector('#preview span.add') && !!document.querySelector('#preview span.del');")
            .await,
        Value::Bool(true),
        "what comes and what goes are marked"
    );
    assert_eq!(git(&repo, &["log", "--format=%s", "main"]), "base");
    c.js("document.getElementById('h-preview').scrollIntoView(); return true;")
        .await;
    c.shot("patch-card").await;
    // A phone's width: the start form and the patch card fit the screen.
    c.browser.set_window_size(390, 844).await.unwrap();
    for path in [
        "/console/runs/new".to_string(),
        format!(
            "/console/runs/{}/cards/apply?hash={}",
            card["run"].as_str().unwrap(),
            card["payload_hash"].as_str().unwrap()
        ),
    ] {
        c.goto(&path).await;
        assert_eq!(
            c.js("return document.documentElement.scrollWidth <= window.innerWidth + 1;")
                .await,
            Value::Bool(true),
            "{path} scrolls sideways at 390 px"
        );
    }
    c.browser.close().await.unwrap();
}
