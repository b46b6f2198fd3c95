#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Issue 11 #10: concurrent processes ended each other's live runs. A run was created
//! unowned and leased a moment later; another process's start-up reconciliation could take it
//! in between, end it `withdrawn (boot)` and make its own command exit 2 ("owned by another
//! live process"). A run is now born with its owner's lease (one transaction), and start-up
//! reconciliation takes only runs whose owner is gone. Real processes on one home.

mod support;

use serde_json::{json, Value};
use std::process::{Command, Output};
use support::Home;

const WORKERS: usize = 4;
const RUNS_EACH: usize = 25;

fn vouch(home: &Home, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_vouch"))
        .arg("--home")
        .arg(&home.dir)
        .args(args)
        .env_remove("VOUCH_CRASH_AFTER")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .output()
        .unwrap()
}

fn script(home: &Home, name: &str, n: usize) -> String {
    let p = home.tmp.path().join(format!("{name}.json"));
    let turns = json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": format!("Notes/{name}-{n}.md")}}]}},
        {"deliver": "d1", "payload": {"text": format!("note {name} {n}\n")}},
        {"final": ""}
    ]);
    std::fs::write(&p, turns.to_string()).unwrap();
    p.to_string_lossy().into_owned()
}

/// Every run in the home ended as its script says: `succeeded` by its own loop, never
/// reconciled at boot by another process.
fn all_succeeded_by_their_loop(home: &Home, expected: usize) -> Vec<String> {
    let runs = home.json(&["runs", "list", "--limit", "1000"]);
    let runs = runs.as_array().unwrap();
    let mut bad = vec![];
    if runs.len() != expected {
        bad.push(format!(
            "{} runs in the store, expected {expected}",
            runs.len()
        ));
    }
    for r in runs {
        let id = r["id"].as_str().unwrap();
        let show = home.json(&["runs", "show", id]);
        let run = &show["run"];
        if run["outcome"] != json!("succeeded") || run["ended_by"] != json!("loop") {
            bad.push(format!(
                "run {id}: {} ({})",
                run["outcome"], run["ended_by"]
            ));
        }
    }
    bad
}

fn run_loop(home: &Home, name: String) -> Vec<String> {
    let mut bad = vec![];
    for n in 0..RUNS_EACH {
        let s = script(home, &name, n);
        let out = vouch(home, &["run", &format!("{name} {n}"), "--script", &s]);
        if out.status.code() != Some(0) {
            bad.push(format!(
                "{name} run {n} exited {:?}: {}",
                out.status.code(),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
    }
    bad
}

#[test]
fn concurrent_runs_on_one_home_never_end_each_other() {
    let home = Home::new("");
    let bad: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..WORKERS)
            .map(|w| {
                let home = &home;
                s.spawn(move || run_loop(home, format!("w{w}")))
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    let bad = all_succeeded_by_their_loop(&home, WORKERS * RUNS_EACH);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn serve_beside_run_never_ends_a_live_run() {
    let home = Home::new("");
    let done = std::sync::atomic::AtomicBool::new(false);
    let (bad, serves) = std::thread::scope(|s| {
        let runner = {
            let (home, done) = (&home, &done);
            s.spawn(move || {
                let bad = run_loop(home, "r".into());
                done.store(true, std::sync::atomic::Ordering::SeqCst);
                bad
            })
        };
        let server = {
            let (home, done) = (&home, &done);
            s.spawn(move || {
                let mut n = 0;
                let mut bad = vec![];
                // `serve --once` does start-up reconciliation each time it starts.
                while !done.load(std::sync::atomic::Ordering::SeqCst) || n == 0 {
                    let out = vouch(home, &["serve", "--once"]);
                    if !out.status.success() {
                        bad.push(format!(
                            "serve --once exited {:?}: {}",
                            out.status.code(),
                            String::from_utf8_lossy(&out.stderr)
                        ));
                    }
                    n += 1;
                }
                (bad, n)
            })
        };
        let mut bad = runner.join().unwrap();
        let (b, n) = server.join().unwrap();
        bad.extend(b);
        (bad, n)
    });
    assert!(serves > 0);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    let bad = all_succeeded_by_their_loop(&home, RUNS_EACH);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    let _: Value = home.json(&["inbox"]);
}

/// Kills the child it holds when dropped, so a failing assertion never leaves it running.
struct Serve(std::process::Child);
impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn a_running_serve_reconciling_every_tick_never_ends_a_live_run() {
    let home = Home::new("");
    // `vouch serve` runs start-up reconciliation on every tick (50 ms here).
    let serve = Serve(
        Command::new(env!("CARGO_BIN_EXE_vouch"))
            .arg("--home")
            .arg(&home.dir)
            .args(["serve", "--tick-ms", "50"])
            .env_remove("VOUCH_CRASH_AFTER")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let bad: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|w| {
                let home = &home;
                s.spawn(move || run_loop(home, format!("s{w}")))
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut serve = serve;
    assert!(
        serve.0.try_wait().unwrap().is_none(),
        "serve kept running beside the runs"
    );
    drop(serve);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    let bad = all_succeeded_by_their_loop(&home, 2 * RUNS_EACH);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}
