#![allow(clippy::unwrap_used, clippy::expect_used)]
//! What people see and type (issue 11 #5, #6, #7, #9): escaped human output, exact `--json`,
//! approvals a person can act on, a damaged or read-only store, a CLI that means what it
//! says. Every test drives the real binary on a real home.

mod support;

use serde_json::json;
use std::process::Output;
use support::Home;

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Characters that must never reach a terminal raw from model, payload or provider text.
const RAW: &[char] = &[
    '\u{1b}', '\r', '\u{7}', '\u{8}', '\u{9b}', '\u{202e}', '\u{2066}', '\u{200f}',
];

fn assert_no_raw(what: &str, text: &str) {
    if let Some(c) = text.chars().find(|c| RAW.contains(c)) {
        panic!("{what}: raw {c:?} reached the terminal:\n{text:?}");
    }
}

/// A title and a payload built to rewrite what a person sees: clear the screen, set the
/// window title, go back to the line start, reverse the text, a C1 CSI.
const EVIL: &str = "Q3 report\u{1b}[2J\u{1b}]0;owned\u{7}\r\u{202e}gpj.exe\u{9b}31m\u{2066}";

fn evil_webhook_script(h: &Home, url: &str) -> String {
    h.script(&json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": url}}]}},
        {"deliver": "d1", "payload": {"text": EVIL}},
        {"final": format!("Done{EVIL}")}
    ]))
}

#[test]
fn terminal_escapes_in_a_payload_never_reach_the_terminal_raw() {
    let h = Home::new("");
    let rx = support::Receiver::start(true);
    let script = evil_webhook_script(&h, &rx.url);
    let title = format!("Post {EVIL}");
    let out = h.vouch(&["run", &title, "--script", &script, "--watch"], &[]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "waits for approval: {}",
        stderr(&out)
    );
    assert_no_raw("run (stdout)", &stdout(&out));
    assert_no_raw("run (stderr)", &stderr(&out));
    let runs = h.json(&["runs", "list"]);
    let run = runs[0]["id"].as_str().unwrap().to_string();
    // --json stays exact: the title and the payload come back byte for byte.
    assert_eq!(runs[0]["title"], title.as_str());
    let cards = h.json(&["approvals"]);
    // A script's `{"text"}` is a webhook's `{"json"}` text (scripts.md).
    let posted: serde_json::Value =
        serde_json::from_str(cards[0]["payload"]["json"].as_str().unwrap()).unwrap();
    assert_eq!(posted["text"], EVIL);
    for args in [
        vec!["approvals"],
        vec!["runs", "list"],
        vec!["runs", "show", run.as_str()],
        vec!["journal", run.as_str()],
        vec!["inbox"],
        vec!["ledger"],
    ] {
        let o = h.vouch(&args, &[]);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        assert_no_raw(&format!("{args:?}"), &stdout(&o));
        assert_no_raw(&format!("{args:?} (stderr)"), &stderr(&o));
    }
    // The escaped form is visible: a person sees that something odd is in the payload.
    let shown = stdout(&h.vouch(&["approvals"], &[]));
    // (inside a webhook's JSON text the escape is JSON's own `\u001b`)
    assert!(
        shown.contains("\\x1b[2J") || shown.contains("\\u001b[2J"),
        "{shown}"
    );
    assert!(shown.contains("\\u{202e}"), "{shown}");
    // The decision's receipt, and the receipt command, are escaped too.
    let hash = cards[0]["payload_hash"].as_str().unwrap().to_string();
    let o = h.vouch(&["approve", &run, "d1", "--hash", &hash], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_no_raw("approve", &stdout(&o));
    assert_no_raw("approve (stderr)", &stderr(&o));
    let o = h.vouch(&["receipt", &run], &[]);
    assert_no_raw("receipt", &stdout(&o));
    assert!(stdout(&o).contains("Receipt · Post Q3 report\\x1b[2J"));
    let o = h.vouch(&["watch", &run], &[]);
    assert_no_raw("watch", &stdout(&o));
    assert_no_raw("watch (stderr)", &stderr(&o));
    assert_eq!(rx.applied(), 1, "the approved payload went out once");
}

fn email_card(h: &Home) -> (String, String) {
    let script = h.script(&json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "email", "address": "board@example.com"}}]}},
        {"deliver": "d1", "payload": {"to": "board@example.com", "subject": "Q3", "body": "Revenue up."}},
        {"final": "Sent."}
    ]));
    let out = h.vouch(&["run", "E-mail the board", "--script", &script], &[]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    // The run's own output says why it waits.
    assert!(
        stdout(&out).contains("sending e-mail cannot be undone"),
        "{}",
        stdout(&out)
    );
    let cards = h.json(&["approvals"]);
    (
        cards[0]["run"].as_str().unwrap().to_string(),
        cards[0]["payload_hash"].as_str().unwrap().to_string(),
    )
}

#[test]
fn approval_cards_say_why_and_accept_the_hash_as_shown() {
    // SMTP is configured (so e-mail is executable and needs approval); nothing listens on
    // the port, which this test does not need: it checks the decision, not the send.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let h = Home::new(&format!(
        "[email]\nhost = \"127.0.0.1\"\nport = {port}\nfrom = \"agent@example.com\"\ntls = \"none\"\n"
    ));
    let (run, hash) = email_card(&h);
    // The reason is stored with the card and shown wherever the card is.
    let cards = h.json(&["approvals"]);
    assert_eq!(
        cards[0]["reason"],
        "sending e-mail cannot be undone (rule R9: irreversible acts wait for your approval)"
    );
    let shown = stdout(&h.vouch(&["approvals"], &[]));
    assert!(
        shown.contains("why:     sending e-mail cannot be undone"),
        "{shown}"
    );
    let show = stdout(&h.vouch(&["runs", "show", &run], &[]));
    assert!(
        show.contains("waits for your approval: sending e-mail cannot be undone"),
        "{show}"
    );
    let show = h.json(&["runs", "show", &run]);
    assert_eq!(
        show["deliveries"][0]["approval"]["payload_hash"],
        hash.as_str()
    );

    // Wrong delivery id and wrong hash: two different messages, each with the next step.
    let wrong_delivery = h.vouch(&["approve", &run, "d9", "--hash", &hash], &[]);
    assert_eq!(wrong_delivery.status.code(), Some(2));
    let wd = stderr(&wrong_delivery);
    assert!(
        wd.contains("no delivery `d9`") && wd.contains("it waits for d1"),
        "{wd}"
    );
    let wrong_hash = h.vouch(&["approve", &run, "d1", "--hash", "ffffffffffffffff"], &[]);
    assert_eq!(wrong_hash.status.code(), Some(2));
    let wh = stderr(&wrong_hash);
    assert!(
        wh.contains("matches no hash") && wh.contains(&hash[..12]),
        "{wh}"
    );
    assert_ne!(wd, wh);
    let short = h.vouch(&["approve", &run, "d1", "--hash", &hash[..8]], &[]);
    assert_eq!(short.status.code(), Some(2));
    assert!(stderr(&short).contains("too short"), "{}", stderr(&short));
    let not_hex = h.vouch(&["approve", &run, "d1", "--hash", "sha256:xyz"], &[]);
    assert_eq!(not_hex.status.code(), Some(2));
    assert!(
        stderr(&not_hex).contains("not a hash"),
        "{}",
        stderr(&not_hex)
    );
    let granted = |h: &Home| {
        h.json(&["journal", &run])
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["kind"] == "approval_granted")
            .map(|e| e["body"]["payload_hash"].as_str().unwrap().to_string())
            .collect::<Vec<_>>()
    };
    assert!(granted(&h).is_empty(), "refused approvals changed nothing");

    // The 12-digit form that `vouch run` prints is accepted back, bound to the full hash.
    let ok = h.vouch(&["approve", &run, "d1", "--hash", &hash[..12]], &[]);
    assert_ne!(ok.status.code(), Some(2), "{}", stderr(&ok));
    assert_eq!(granted(&h), vec![hash.clone()]);
}

fn save_script(h: &Home, name: &str) -> String {
    h.script(&json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": format!("Reports/{name}.md")}}]}},
        {"deliver": "d1", "payload": {"text": format!("# {name}\n")}},
        {"final": "Saved."}
    ]))
}

/// Fold the WAL into the database file, so bytes changed in the file are what SQLite reads.
fn checkpoint(db: &std::path::Path) {
    let c = rusqlite::Connection::open(db).unwrap();
    c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
        .unwrap();
}

#[test]
fn a_damaged_store_is_named_by_verify_never_reported_intact() {
    let h = Home::new("");
    for n in 0..3 {
        let s = save_script(&h, &format!("r{n}"));
        let o = h.vouch(&["run", &format!("Save report {n}"), "--script", &s], &[]);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    }
    let db = h.dir.join("vouch.db");
    checkpoint(&db);
    let ok = h.vouch(&["journal", "verify"], &[]);
    assert_eq!(ok.status.code(), Some(0), "{}", stdout(&ok));
    assert!(stdout(&ok).contains("intact"), "{}", stdout(&ok));
    // Overwrite the `runs` table's page in the closed store's file with garbage.
    let (root, page_size): (i64, i64) = {
        let c = rusqlite::Connection::open(&db).unwrap();
        let root = c
            .query_row(
                "SELECT rootpage FROM sqlite_master WHERE name = 'runs'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        let ps = c.query_row("PRAGMA page_size", [], |r| r.get(0)).unwrap();
        (root, ps)
    };
    let mut bytes = std::fs::read(&db).unwrap();
    let start = ((root - 1) * page_size) as usize;
    for b in &mut bytes[start..start + page_size as usize] {
        *b = 0xAB;
    }
    std::fs::write(&db, &bytes).unwrap();

    let out = h.vouch(&["journal", "verify"], &[]);
    assert_eq!(out.status.code(), Some(1), "{}", stdout(&out));
    let text = stdout(&out);
    assert!(!text.contains("intact"), "{text}");
    assert!(text.contains("DAMAGED: table runs"), "{text}");
    let report = h.json(&["journal", "verify"]);
    let damage = report["damage"].as_array().unwrap();
    assert!(
        damage.iter().any(|d| d.as_str().unwrap().contains("runs")),
        "{report}"
    );
}

#[test]
fn a_read_only_home_reads_as_read_only_not_corrupt() {
    let h = Home::new("");
    let rx = support::Receiver::start(true);
    let s = save_script(&h, "a");
    assert!(h
        .vouch(&["run", "Save a", "--script", &s], &[])
        .status
        .success());
    let card = h.script(&json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": rx.url}}]}},
        {"deliver": "d1", "payload": {"text": "hello"}}
    ]));
    assert_eq!(
        h.vouch(&["run", "Post hello", "--script", &card], &[])
            .status
            .code(),
        Some(3),
        "the post waits for approval: exit 3"
    );
    let runs = h.json(&["runs", "list"]);
    let run = runs[1]["id"].as_str().unwrap().to_string();
    let db = h.dir.join("vouch.db");
    checkpoint(&db);
    let before = std::fs::read(&db).unwrap();

    let check = |env: &[(&str, &str)], how: &str| {
        for args in [
            vec!["runs", "list"],
            vec!["runs", "show", run.as_str()],
            vec!["receipt", run.as_str()],
            vec!["journal", run.as_str()],
            vec!["journal", "verify"],
            vec!["inbox"],
            vec!["approvals"],
            vec!["ledger"],
        ] {
            let o = h.vouch(&args, env);
            assert_eq!(o.status.code(), Some(0), "{how} {args:?}: {}", stderr(&o));
            let all = format!("{}{}", stdout(&o), stderr(&o));
            assert!(!all.contains("corrupt"), "{how} {args:?}: {all}");
        }
        let shown = stdout(&h.vouch(&["approvals"], env));
        assert!(
            shown.contains("Post hello") || shown.contains("hello"),
            "{shown}"
        );
        let o = h.vouch(&["runs", "list"], env);
        assert!(stderr(&o).contains("read-only"), "{how}: {}", stderr(&o));
        // A command that must write says the home is read-only, exit 2.
        let o = h.vouch(&["run", "Save b", "--script", &s], env);
        assert_eq!(o.status.code(), Some(2), "{how}: {}", stderr(&o));
        assert!(stderr(&o).contains("read-only"), "{how}: {}", stderr(&o));
        assert!(!stderr(&o).contains("corrupt"), "{how}: {}", stderr(&o));
    };
    check(&[("VOUCH_READ_ONLY", "1")], "VOUCH_READ_ONLY");
    assert_eq!(std::fs::read(&db).unwrap(), before, "nothing was written");
    assert_eq!(h.json(&["runs", "list"]).as_array().unwrap().len(), 2);

    // A write-protected home (where permissions bind: not for root).
    use std::os::unix::fs::PermissionsExt;
    let set = |mode: u32| {
        for p in [h.dir.clone(), db.clone()] {
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        }
    };
    set(0o555);
    let binds = std::fs::OpenOptions::new().write(true).open(&db).is_err();
    if binds {
        check(&[], "chmod a-w");
    } else if std::path::Path::new("/usr/bin/setpriv").exists() {
        // As root, permissions do not bind: run vouch as `nobody`, for whom the write-protected
        // home (owned by root, mode a-w) really cannot be written.
        std::fs::set_permissions(h.tmp.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let as_nobody = |args: &[&str]| {
            std::process::Command::new("/usr/bin/setpriv")
                .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
                .arg(env!("CARGO_BIN_EXE_vouch"))
                .arg("--home")
                .arg(&h.dir)
                .args(args)
                .env_remove("VOUCH_READ_ONLY")
                .output()
                .unwrap()
        };
        for args in [
            vec!["runs", "list"],
            vec!["receipt", run.as_str()],
            vec!["journal", "verify"],
            vec!["approvals"],
            vec!["inbox"],
        ] {
            let o = as_nobody(&args);
            assert_eq!(o.status.code(), Some(0), "nobody {args:?}: {}", stderr(&o));
            let all = format!("{}{}", stdout(&o), stderr(&o));
            assert!(!all.contains("corrupt"), "nobody {args:?}: {all}");
        }
        let o = as_nobody(&["runs", "list"]);
        assert!(stderr(&o).contains("read-only"), "{}", stderr(&o));
        assert!(stdout(&o).contains("Post hello"), "{}", stdout(&o));
        let o = as_nobody(&["run", "Save b", "--script", &s]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        assert!(stderr(&o).contains("read-only"), "{}", stderr(&o));
    }
    set(0o755);
    std::fs::set_permissions(&db, std::fs::Permissions::from_mode(0o644)).unwrap();
    assert_eq!(std::fs::read(&db).unwrap(), before, "nothing was written");
}

#[test]
fn a_cli_that_means_what_it_says() {
    let h = Home::new("");
    let s = save_script(&h, "a");
    // --watch shows the steps; without it only the outcome is printed.
    let quiet = h.vouch(&["run", "Save a", "--script", &s], &[]);
    assert_eq!(quiet.status.code(), Some(0), "{}", stderr(&quiet));
    assert!(!stderr(&quiet).contains("▶ run"), "{}", stderr(&quiet));
    assert!(stdout(&quiet).contains("Receipt"));
    let watched = h.vouch(&["run", "Save a again", "--script", &s, "--watch"], &[]);
    assert!(stderr(&watched).contains("▶ run"), "{}", stderr(&watched));

    // `runs list --limit 0` is refused; long titles are shortened in lists.
    let o = h.vouch(&["runs", "list", "--limit", "0"], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("at least 1"), "{}", stderr(&o));
    let long = format!("Summarise {}", "the quarterly numbers ".repeat(10));
    assert!(h
        .vouch(&["run", &long, "--script", &s], &[])
        .status
        .success());
    let list = stdout(&h.vouch(&["runs", "list"], &[]));
    let line = list.lines().find(|l| l.contains("Summarise")).unwrap();
    assert!(line.ends_with('…') && !line.contains(long.trim()), "{line}");
    assert!(line.chars().count() < 130, "{line}");

    // --json answers in JSON, errors included (also a refused command line), with exit 2.
    for args in [
        vec!["--json", "runs", "show", "nope"],
        vec!["--json", "runs", "list", "--limit", "0"],
        vec!["--json", "approve", "nope"],
    ] {
        let o = h.vouch(&args, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let v: serde_json::Value = serde_json::from_slice(&o.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: not JSON ({e}): {}", stdout(&o)));
        assert!(v["error"].as_str().is_some_and(|e| !e.is_empty()), "{v}");
        assert_eq!(v["exit_code"], 2);
    }

    // The demo makes its own home and is for people: --home and --json are refused.
    for args in [vec!["demo"], vec!["--json", "demo"]] {
        let o = h.vouch(&args, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
    let o = h.vouch(&["oracle", "corpus"], &[]);
    assert_eq!(o.status.code(), Some(2), "--home on oracle: {}", stderr(&o));
}

#[test]
fn a_malformed_vouch_toml_is_bad_input_naming_the_line() {
    let h = Home::new("[email]\nhost = \"127.0.0.1\"\nport = \"not a number\n");
    let s = save_script(&h, "a");
    for args in [
        vec!["doctor"],
        vec!["run", "Save a", "--script", s.as_str()],
    ] {
        let o = h.vouch(&args, &[]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(
            e.contains("vouch.toml") && e.contains("line 3"),
            "{args:?}: {e}"
        );
    }
    let c = rusqlite::Connection::open(h.dir.join("vouch.db")).unwrap();
    let runs: i64 = c
        .query_row("SELECT count(*) FROM runs", [], |r| r.get(0))
        .unwrap();
    assert_eq!(runs, 0, "no run was left behind");
}

#[test]
fn serve_once_reports_what_it_did_with_slots_as_times() {
    let h = Home::new("");
    let routine = h.tmp.path().join("routine.json");
    std::fs::write(
        &routine,
        json!({"prompt": "Morning brief", "script": [
            {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Briefs/today.md"}}]}},
            {"deliver": "d1", "payload": {"text": "brief"}}
        ]})
        .to_string(),
    )
    .unwrap();
    let o = h.vouch(
        &[
            "schedule",
            "add",
            "brief",
            "--cron",
            "0 7 * * *",
            "--tz",
            "Europe/Berlin",
            "--routine",
            routine.to_str().unwrap(),
        ],
        &[],
    );
    assert!(o.status.success(), "{}", stderr(&o));
    let o = h.vouch(&["serve", "--once"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stdout(&o).contains("One tick: nothing was due"),
        "{}",
        stdout(&o)
    );
    // The schedule existed three days ago: its past 07:00 slots were missed while nobody
    // was serving.
    let db = h.dir.join("vouch.db");
    checkpoint(&db);
    let c = rusqlite::Connection::open(&db).unwrap();
    let three_days_ms: i64 = 3 * 24 * 3_600_000;
    c.execute(
        "UPDATE schedules SET created_ms = created_ms - ?1",
        [three_days_ms],
    )
    .unwrap();
    drop(c);
    let o = h.vouch(&["serve", "--once"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let (out, err) = (stdout(&o), stderr(&o));
    assert!(out.contains("One tick:") && out.contains("missed"), "{out}");
    assert!(err.contains("07:00 Europe/Berlin slot was missed"), "{err}");
    assert!(
        !err.split_whitespace()
            .any(|w| w.len() >= 13 && w.chars().all(|c| c.is_ascii_digit())),
        "no epoch milliseconds: {err}"
    );
    let list = stdout(&h.vouch(&["schedule", "list"], &[]));
    assert!(
        list.contains("Europe/Berlin →") || list.contains(" Europe/Berlin → run"),
        "{list}"
    );
}

#[test]
fn the_demo_says_what_it_shows_that_the_kill_is_deliberate_and_what_to_try_next() {
    let tmp = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_vouch"))
        .arg("demo")
        .env("TMPDIR", tmp.path())
        .env_remove("VOUCH_HOME")
        .output()
        .unwrap();
    let text = stdout(&out);
    assert_eq!(out.status.code(), Some(0), "{text}{}", stderr(&out));
    assert!(text.contains("Seven short stories"), "{text}");
    for n in 1..=7 {
        assert!(text.contains(&format!("━━ {n}/7")), "story {n}: {text}");
    }
    assert!(text.contains("on purpose"), "{text}");
    assert!(text.contains("deliberately"), "{text}");
    let next = text
        .split("What to try next")
        .nth(1)
        .expect("ends with what to try next");
    assert!(next.contains("examples/save-notes.json"), "{next}");
    // What it suggests exists in the repository.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    assert!(root.join("examples/save-notes.json").exists());
    assert!(root.join("docs/scripts.md").exists());
}

/// The same on PostgreSQL: `journal verify` runs the row checks and names what is wrong, and
/// a read-only open (`VOUCH_READ_ONLY=1`: the server refuses every write of the session)
/// reads as read-only.
#[test]
fn postgresql_verify_names_damage_and_a_read_only_open_reads() {
    let url = std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos();
    let schema = format!(
        "vouch_test_surface_{}_{}",
        std::process::id(),
        nanos % 1_000_000_000
    );
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let vouch = |args: &[&str], extra: &[(&str, &str)]| {
        let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_vouch"));
        c.arg("--home")
            .arg(&home)
            .args(args)
            .env("VOUCH_DATABASE_URL", &url)
            .env("VOUCH_DATABASE_SCHEMA", &schema)
            .env_remove("VOUCH_CRASH_AFTER");
        for (k, v) in extra {
            c.env(k, v);
        }
        c.output().unwrap()
    };
    let o = vouch(&["init"], &[]);
    assert!(
        o.status.success(),
        "is PostgreSQL up on {url}? {}",
        stderr(&o)
    );
    let script = tmp.path().join("s.json");
    std::fs::write(
        &script,
        json!([
            {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "a.md"}}]}},
            {"deliver": "d1", "payload": {"text": "a"}}
        ])
        .to_string(),
    )
    .unwrap();
    let o = vouch(
        &["run", "Save a", "--script", script.to_str().unwrap()],
        &[],
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = vouch(&["journal", "verify"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));

    // Read-only: reading works and says so; writing is refused as read-only.
    let ro = [("VOUCH_READ_ONLY", "1")];
    for args in [
        vec!["runs", "list"],
        vec!["receipt", "last"],
        vec!["journal", "verify"],
    ] {
        let o = vouch(&args, &ro);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
    }
    assert!(stderr(&vouch(&["runs", "list"], &ro)).contains("read-only"));
    let o = vouch(
        &["run", "Save b", "--script", script.to_str().unwrap()],
        &ro,
    );
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("read-only"), "{}", stderr(&o));

    // Damage a row behind vouch's back: the run says it ended, its terminal event is gone.
    let mut pg = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    pg.batch_execute(&format!(
        "ALTER TABLE \"{schema}\".journal DISABLE TRIGGER USER; \
         DELETE FROM \"{schema}\".journal WHERE kind = 'terminal'; \
         ALTER TABLE \"{schema}\".journal ENABLE TRIGGER USER;"
    ))
    .unwrap();
    let o = vouch(&["journal", "verify"], &[]);
    let _ = pg.batch_execute(&format!("DROP SCHEMA \"{schema}\" CASCADE"));
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("DAMAGED: runs marked ended whose journal has no terminal event"),
        "{}",
        stdout(&o)
    );
}

/// Issue 11 #9: every bad input exits 2 with a message naming what is wrong; none panics.
#[test]
fn every_bad_input_exits_2_naming_what_is_wrong() {
    let h = Home::new("");
    let dir = h.tmp.path();
    let none = dir.join("none.json").to_string_lossy().into_owned();
    let bad = dir.join("bad.json");
    std::fs::write(&bad, "not json").unwrap();
    let bad = bad.to_string_lossy().into_owned();
    let routine = dir.join("r.json");
    std::fs::write(&routine, r#"{"prompt": "x", "script": []}"#).unwrap();
    let routine = routine.to_string_lossy().into_owned();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["run", "x", "--script", &none], "cannot read script"),
        (vec!["run", "x"], "no model is configured"),
        (vec!["run", "x", "--script", &bad], "not valid JSON"),
        (
            vec![
                "schedule",
                "add",
                "s",
                "--cron",
                "bad",
                "--routine",
                &routine,
            ],
            "cron expression `bad`",
        ),
        (
            vec![
                "schedule",
                "add",
                "s",
                "--cron",
                "0 7 * * *",
                "--tz",
                "Mars/Base",
                "--routine",
                &routine,
            ],
            "time zone `Mars/Base`",
        ),
        (
            vec![
                "schedule",
                "add",
                "s",
                "--cron",
                "0 7 * * *",
                "--grace",
                "5y",
                "--routine",
                &routine,
            ],
            "duration `5y`",
        ),
        (
            vec![
                "schedule",
                "add",
                "s",
                "--cron",
                "0 7 * * *",
                "--routine",
                &bad,
            ],
            "is not JSON",
        ),
        (vec!["schedule", "rm", "nope"], "no schedule `nope`"),
        (vec!["receipt", "nope"], "no run `nope`"),
        (vec!["watch", "nope"], "no run `nope`"),
        (vec!["journal", "nope"], "no run `nope`"),
        (vec!["resume", "nope"], "no run `nope`"),
        (vec!["answer", "nope", "hi"], "no run `nope`"),
        (vec!["runs", "list", "--limit", "x"], "not a whole number"),
        (vec!["runs", "list", "--limit", "0"], "at least 1"),
        (vec!["runs", "show", "last"], "no run yet"),
    ];
    for (args, says) in cases {
        // An empty model URL is no model (whatever the machine's environment holds).
        let o = h.vouch(&args, &[("VOUCH_MODEL_URL", "")]);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert!(stderr(&o).contains(says), "{args:?}: {}", stderr(&o));
        assert!(!stderr(&o).contains("panicked"), "{args:?}: {}", stderr(&o));
    }
    for args in [
        vec!["oracle", none.as_str()],
        vec!["scenario", "run", bad.as_str()],
    ] {
        let o = std::process::Command::new(env!("CARGO_BIN_EXE_vouch"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    }
}
