#![allow(clippy::unwrap_used, clippy::expect_used)]
//! Identities, diaries, signed receipts and artifacts through the real `vouch` binary
//! (§13.5, §13.6, §16), on SQLite and on PostgreSQL.

mod support;

use serde_json::Value;
use std::os::unix::fs::PermissionsExt as _;
use std::process::Output;
use support::Home;

const PG_DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";

fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}
fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn is_public_key(s: &str) -> bool {
    s.strip_prefix("ed25519:")
        .is_some_and(|h| h.len() == 64 && h.chars().all(|c| c.is_ascii_hexdigit()))
}

/// `identity new` and `identity list` with the given environment (the backend).
fn identity_new_and_list(h: &Home, env: &[(&str, &str)]) {
    let out = h.vouch(&["identity", "new", "worker-1"], env);
    assert!(out.status.success(), "{}", stderr(&out));
    let key = stdout(&out).trim().to_string();
    assert!(is_public_key(&key), "prints the public key: {key}");
    let file = h.dir.join("identities/worker-1.key");
    let mode = std::fs::metadata(&file).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600, "the key file is the owner's alone");
    let before = std::fs::read(&file).unwrap();

    let again = h.vouch(&["identity", "new", "worker-1"], env);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(
        stderr(&again).contains("already exists"),
        "{}",
        stderr(&again)
    );
    assert_eq!(std::fs::read(&file).unwrap(), before, "never overwritten");

    for bad in ["Bad/Name", "../x", "", "host"] {
        let o = h.vouch(&["identity", "new", bad], env);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
        assert!(stderr(&o).contains("name"), "{bad}: {}", stderr(&o));
    }

    let out = h.vouch(&["--json", "identity", "new", "judge"], env);
    assert!(out.status.success(), "{}", stderr(&out));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["name"], "judge");
    assert!(is_public_key(v["public_key"].as_str().unwrap()));

    let out = h.vouch(&["--json", "identity", "list"], env);
    assert!(out.status.success(), "{}", stderr(&out));
    let list: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    let names: Vec<&str> = list.iter().filter_map(|r| r["name"].as_str()).collect();
    assert_eq!(names, ["judge", "worker-1"]);
    assert_eq!(list[1]["public_key"], key.as_str());
    assert_eq!(list[1]["state"], "key here");
    let text = stdout(&h.vouch(&["identity", "list"], env));
    assert!(text.contains("worker-1") && text.contains(&key), "{text}");
}

#[test]
fn identity_new_and_list_on_sqlite() {
    let h = Home::new("");
    identity_new_and_list(&h, &[]);
}

/// A fresh PostgreSQL schema for one test, dropped at the end.
struct PgSchema {
    url: String,
    name: String,
}

impl PgSchema {
    fn new(tag: &str) -> PgSchema {
        let url = std::env::var("VOUCH_PG_URL").unwrap_or_else(|_| PG_DEFAULT_URL.into());
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let name = format!("vouch_test_{tag}_{}_{nanos}", std::process::id());
        postgres::Client::connect(&url, postgres::NoTls).unwrap_or_else(|e| {
            panic!("these tests need PostgreSQL at {url} (trust auth, database `test`): {e}")
        });
        PgSchema { url, name }
    }
    fn env(&self) -> [(&str, &str); 2] {
        [
            ("VOUCH_DATABASE_URL", self.url.as_str()),
            ("VOUCH_DATABASE_SCHEMA", self.name.as_str()),
        ]
    }
}

impl Drop for PgSchema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&self.url, postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.name));
        }
    }
}

#[test]
fn identity_new_and_list_on_postgres() {
    let pg = PgSchema::new("ident");
    let h = Home::new("");
    let init = h.vouch(&["init"], &pg.env());
    assert!(init.status.success(), "{}", stderr(&init));
    identity_new_and_list(&h, &pg.env());
}
