#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The `notify` route for real: a private D-Bus session bus (dbus-daemon) with a listener
//! that owns org.freedesktop.Notifications and records what it receives; and a push route
//! set up wrong, as `vouch doctor` names it.

mod support;

use serde_json::json;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

struct Bus {
    daemon: Child,
    sink: Child,
    address: String,
    out: PathBuf,
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.sink.kill();
        let _ = self.daemon.kill();
        let _ = self.sink.wait();
        let _ = self.daemon.wait();
    }
}

impl Bus {
    fn start(dir: &Path) -> Bus {
        let address = format!("unix:path={}", dir.join("bus").display());
        let daemon = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--nopidfile"])
            .arg(format!("--address={address}"))
            .stdout(Stdio::null())
            .spawn()
            .expect("start dbus-daemon");
        for _ in 0..100 {
            if dir.join("bus").exists() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        let out = dir.join("notifications.jsonl");
        let mut sink = Command::new("python3")
            .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/notify_sink.py"))
            .arg(&out)
            .env("DBUS_SESSION_BUS_ADDRESS", &address)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the notification listener (python3 with dbus-next: ./scripts/test.sh installs it)");
        let mut line = String::new();
        BufReader::new(sink.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(line.trim(), "READY", "notification listener did not start");
        Bus {
            daemon,
            sink,
            address,
            out,
        }
    }
    fn received(&self) -> Vec<serde_json::Value> {
        std::fs::read_to_string(&self.out)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }
}

fn vouch(home: &Path, bus: &Bus, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_vouch"));
    c.arg("--home")
        .arg(home)
        .args(args)
        .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
        .env_remove("VOUCH_CRASH_AFTER");
    for (k, v) in env {
        c.env(k, v);
    }
    c.output().unwrap()
}

fn failing_script(dir: &Path) -> String {
    let p = dir.join("s.json");
    std::fs::write(
        &p,
        json!([
            {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "../outside.md"}}]}},
            {"deliver": "d1", "payload": {"text": "x"}},
            {"final": "Saved!"}
        ])
        .to_string(),
    )
    .unwrap();
    p.to_string_lossy().into_owned()
}

#[test]
fn a_failure_while_away_reaches_the_desktop_once_even_across_a_crash() {
    let tmp = tempfile::tempdir().unwrap();
    let bus = Bus::start(tmp.path());
    let home = tmp.path().join("home");
    assert!(vouch(&home, &bus, &["init"], &[]).status.success());
    let s = failing_script(tmp.path());

    // Watching: the failure is shown inline, no desktop notification.
    let out = vouch(&home, &bus, &["run", "Save it", "--script", &s], &[]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(bus.received().len(), 0);

    // Away, even with quiet: a failure always reaches the person, once.
    let out = vouch(
        &home,
        &bus,
        &[
            "run",
            "Save it",
            "--script",
            &s,
            "--presence",
            "away",
            "--quiet",
        ],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = bus.received();
    assert_eq!(got.len(), 1, "{got:?}");
    assert_eq!(got[0]["app"], "vouch");
    assert!(
        got[0]["summary"].as_str().unwrap().contains("failed"),
        "{got:?}"
    );

    // Killed after the terminal record, before dispatch: the next start-up sends it, once.
    let out = vouch(
        &home,
        &bus,
        &["run", "Save it", "--script", &s, "--presence", "away"],
        &[("VOUCH_CRASH_AFTER", "terminal")],
    );
    assert!(out.status.code().is_none(), "should have been killed");
    assert_eq!(bus.received().len(), 1);
    for _ in 0..3 {
        assert!(vouch(&home, &bus, &["runs", "list"], &[]).status.success());
    }
    assert_eq!(
        bus.received().len(),
        2,
        "exactly one notification for the crashed run"
    );
}

/// A notification route set up wrong keeps its notifications in the outbox; `vouch doctor`
/// names it, in human and JSON output, with what to do next. Once it is fixed, the next
/// command that opens the home delivers what waited, and the doctor names nothing.
#[test]
fn the_doctor_names_a_misconfigured_notification_route_and_what_to_do() {
    let h = support::Home::new("[notify]\npush_url = \"ftp://127.0.0.1/push\"\n");
    let s = failing_script(h.tmp.path());
    let out = h.vouch(
        &["run", "Save it", "--script", &s, "--presence", "away"],
        &[],
    );
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let d = h.vouch(&["doctor"], &[]);
    assert!(d.status.success(), "{}", String::from_utf8_lossy(&d.stderr));
    let text = String::from_utf8_lossy(&d.stdout);
    assert!(
        text.contains("notification route `notify` is stuck: 1 waiting, 1 failed tries"),
        "{text}"
    );
    assert!(
        text.contains("fix [notify] push_url in vouch.toml"),
        "{text}"
    );
    assert!(text.contains("  next: fix what the error names"), "{text}");

    let j = h.json(&["doctor"]);
    let stuck = j["stuck_routes"].as_array().unwrap();
    assert_eq!(stuck.len(), 1, "{j}");
    assert_eq!(stuck[0]["route"], "notify");
    assert_eq!(stuck[0]["waiting"], 1);
    assert_eq!(stuck[0]["failures"], 1);
    assert_eq!(stuck[0]["misconfigured"], true);
    let last = stuck[0]["last_error"].as_str().unwrap();
    assert!(
        last.starts_with("push webhook ftp://127.0.0.1/push:") && last.contains("push_url"),
        "{last}"
    );
    assert!(
        stuck[0]["next_step"]
            .as_str()
            .unwrap()
            .starts_with("fix what the error names"),
        "{j}"
    );

    // Fixed: the next command that opens the home sends it, and nothing is stuck any more.
    let push = support::Receiver::start(false);
    std::fs::write(
        h.dir.join("vouch.toml"),
        format!("[notify]\npush_url = \"{}\"\n", push.url),
    )
    .unwrap();
    assert!(h.vouch(&["inbox"], &[]).status.success());
    assert_eq!(push.applied(), 1);
    assert_eq!(h.json(&["doctor"])["stuck_routes"], serde_json::json!([]));
}
