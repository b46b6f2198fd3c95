#![allow(clippy::unwrap_used, clippy::expect_used)]
//! The README's tour, line by line, on a fresh home (issue 11, newcomer path): every line
//! pastes and works. The lines are read from README.md itself, so the tour cannot drift from
//! what the binary does. `HASH` is the one word a person copies from `vouch approvals`.

use std::path::{Path, PathBuf};
use std::process::Command;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn tour_lines() -> Vec<String> {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let start = readme.find("## A short tour").expect("README has a tour");
    let rest = &readme[start..];
    let open = rest.find("```sh\n").expect("the tour is a sh block") + "```sh\n".len();
    let close = rest[open..].find("```").unwrap();
    rest[open..open + close]
        .lines()
        .map(str::to_string)
        .filter(|l| !l.trim().is_empty())
        .collect()
}

fn console_answers(bin: &Path, home: &Path) {
    use std::io::BufRead;
    let mut child = Command::new(bin)
        .args(["--json", "serve", "--http", "127.0.0.1:0"])
        .env("VOUCH_HOME", home)
        .env_remove("VOUCH_DATABASE_URL")
        .env_remove("DBUS_SESSION_BUS_ADDRESS")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = serde_json::from_str::<serde_json::Value>(&line).unwrap()["listening"]
        .as_str()
        .unwrap()
        .to_string();
    let page = ureq::get(&format!("http://{addr}/console/")).call();
    let _ = child.kill();
    let _ = child.wait();
    let body = page.unwrap().into_string().unwrap();
    assert!(body.contains("Sign in to vouch"), "{body}");
}

#[test]
fn every_tour_line_of_the_readme_works_on_a_fresh_home() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_vouch"));
    let bin_dir = bin.parent().unwrap().to_path_buf();
    let tmp = tempfile::tempdir().unwrap();
    let home = tmp.path().join("home");
    let path = format!(
        "{}:{}",
        bin_dir.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let lines = tour_lines();
    assert!(lines.len() >= 15, "{lines:?}");
    let vouch_json = |args: &[&str]| -> serde_json::Value {
        let o = Command::new(&bin)
            .arg("--json")
            .args(args)
            .env("VOUCH_HOME", &home)
            .current_dir(repo_root())
            .output()
            .unwrap();
        serde_json::from_slice(&o.stdout).unwrap()
    };
    for line in &lines {
        // Building and choosing the home are the test's own: the binary under test, a
        // fresh temporary home.
        if line.starts_with("cargo build") || line.starts_with("export ") {
            continue;
        }
        assert!(
            line.starts_with("vouch "),
            "a tour line that is not a command: {line}"
        );
        // The console line starts the server in the background: here it listens on a free
        // port, the console's start page must answer (it asks to sign in), then it stops.
        if line.starts_with("vouch serve --http") {
            console_answers(&bin, &home);
            continue;
        }
        let mut cmd_line = line.clone();
        if cmd_line.contains("HASH") {
            let cards = vouch_json(&["approvals"]);
            let hash = cards[0]["payload_hash"]
                .as_str()
                .expect("a card to approve");
            cmd_line = cmd_line.replace("HASH", &hash[..12]);
        }
        // A line that ends otherwise than 0 says so: `(exit 1)` the work did not succeed,
        // `(exit 3)` the run waits for you.
        let expected = match line.find("(exit ") {
            Some(at) => line[at + 6..at + 7].parse().unwrap(),
            None => 0,
        };
        let out = Command::new("sh")
            .arg("-c")
            .arg(&cmd_line)
            .env("PATH", &path)
            .env("VOUCH_HOME", &home)
            .env_remove("VOUCH_MODEL_URL")
            .env_remove("VOUCH_DATABASE_URL")
            .env_remove("DBUS_SESSION_BUS_ADDRESS")
            .current_dir(repo_root())
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(expected),
            "tour line `{line}`:\n{}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // The world after the tour: the files the runs promised, the draft, the schedule.
    let files = home.join("files");
    let notes = std::fs::read_to_string(files.join("Notes/today.md")).unwrap();
    assert!(
        notes.contains("write the tour"),
        "the approved overwrite: {notes}"
    );
    assert!(files.join("Plans/offsite.md").exists());
    let runs = vouch_json(&["runs", "list"]);
    assert_eq!(runs.as_array().unwrap().len(), 4, "{runs}");
    let drafted = std::fs::read_dir(home.join("drafts"))
        .unwrap()
        .flatten()
        .any(|d| d.path().join("d1.eml").exists());
    assert!(drafted, "the e-mail was drafted as .eml");
    assert_eq!(vouch_json(&["schedule", "list"])[0]["name"], "brief");
}

#[test]
fn every_example_the_readme_names_is_in_examples() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let named: std::collections::BTreeSet<&str> = readme
        .match_indices("examples/")
        .map(|(at, _)| {
            let rest = &readme[at..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || "/.-_".contains(c)))
                .unwrap_or(rest.len());
            rest[..end].trim_end_matches('.')
        })
        .filter(|p| *p != "examples/")
        .collect();
    assert!(named.contains("examples/worker-script.json"), "{named:?}");
    for p in named {
        assert!(
            repo_root().join(p).is_file(),
            "the README names {p}, which is missing"
        );
    }
}

#[test]
fn every_example_script_is_valid() {
    let dir = repo_root().join("examples");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).unwrap().flatten() {
        let text = std::fs::read_to_string(e.path()).unwrap();
        let v: serde_json::Value = serde_json::from_str(&text)
            .unwrap_or_else(|err| panic!("{}: {err}", e.path().display()));
        assert!(
            v.is_array() || v.get("script").is_some(),
            "{}",
            e.path().display()
        );
        n += 1;
    }
    assert!(n >= 5, "the examples the tour uses are there");
}
