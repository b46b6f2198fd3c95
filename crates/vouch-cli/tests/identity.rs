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

fn diary_add_list_verify(h: &Home, env: &[(&str, &str)]) {
    assert!(h.vouch(&["identity", "new", "w"], env).status.success());
    for text in ["first", "second \u{1b}[31mred\u{202e}", "third"] {
        let o = h.vouch(&["diary", "w", "--add", text], env);
        assert!(o.status.success(), "{}", stderr(&o));
    }
    let o = h.vouch(&["diary", "w"], env);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    assert!(text.contains("#1") && text.contains("first"), "{text}");
    assert!(
        !text.contains('\u{1b}') && !text.contains('\u{202e}') && text.contains("\\u{1b}"),
        "control and bidi characters are shown escaped: {text}"
    );
    let v: Vec<Value> =
        serde_json::from_slice(&h.vouch(&["--json", "diary", "w"], env).stdout).unwrap();
    assert_eq!(v.len(), 3);
    assert_eq!(v[0]["body"]["text"], "first");
    assert_eq!(v[1]["prev_hash"], v[0]["hash"]);
    let o = h.vouch(&["diary", "w", "--verify"], env);
    assert!(o.status.success(), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("intact: 3 entries"), "{}", stdout(&o));

    let o = h.vouch(&["diary", "nobody"], env);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no identity `nobody`"),
        "{}",
        stderr(&o)
    );
    let o = h.vouch(&["diary", "w", "--verify", "--add", "x"], env);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn diary_on_sqlite_and_a_tampered_row_is_named() {
    let h = Home::new("");
    diary_add_list_verify(&h, &[]);
    let db = h.dir.join("vouch.db");
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        assert!(
            c.execute(
                "UPDATE diary SET body = '{\"text\":\"forged\"}' WHERE seq = 2",
                []
            )
            .is_err(),
            "the schema refuses edits"
        );
        c.execute_batch("DROP TRIGGER diary_no_update").unwrap();
        c.execute(
            "UPDATE diary SET body = '{\"text\":\"forged\"}' WHERE seq = 2",
            [],
        )
        .unwrap();
    }
    let o = h.vouch(&["diary", "w", "--verify"], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("entry #2") && stdout(&o).contains("edited after it was written"),
        "{}",
        stdout(&o)
    );
    let v: Value =
        serde_json::from_slice(&h.vouch(&["--json", "diary", "w", "--verify"], &[]).stdout)
            .unwrap();
    assert_eq!(v["intact"], false);
    assert_eq!(v["break"]["seq"], 2);

    // A forger who also recomputes the hash is caught by the signature.
    {
        let c = rusqlite::Connection::open(&db).unwrap();
        let (prev, at_ms): (String, i64) = c
            .query_row(
                "SELECT prev_hash, at_ms FROM diary WHERE seq = 2",
                [],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .unwrap();
        let st = serde_json::json!({"diary": "w", "seq": 2, "prev_hash": prev, "at_ms": at_ms, "body": {"text": "forged"}});
        let hash = vouch_core::sha256_hex(vouch_core::canonical_json(&st).unwrap().as_bytes());
        c.execute("UPDATE diary SET hash = ?1 WHERE seq = 2", [&hash])
            .unwrap();
    }
    let o = h.vouch(&["diary", "w", "--verify"], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("entry #2") && stdout(&o).contains("signature"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn diary_on_postgres() {
    let pg = PgSchema::new("diary");
    let h = Home::new("");
    assert!(h.vouch(&["init"], &pg.env()).status.success());
    diary_add_list_verify(&h, &pg.env());
}

/// A finished scripted run that saves one file; returns its id.
fn finished_run(h: &Home, env: &[(&str, &str)]) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let file = format!(
        "n{}.md",
        N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    );
    let s = h.script(&serde_json::json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": file}}]}},
        {"deliver": "d1", "payload": {"text": "x"}}
    ]));
    let o = h.vouch(&["run", "Save a note", "--script", &s], env);
    assert!(o.status.success(), "{}", stderr(&o));
    let runs: Vec<Value> =
        serde_json::from_slice(&h.vouch(&["--json", "runs", "list"], env).stdout).unwrap();
    runs[0]["id"].as_str().unwrap().to_string()
}

fn signed_file(h: &Home, run: &str, env: &[(&str, &str)]) -> (std::path::PathBuf, Value) {
    let o = h.vouch(&["receipt", run, "--signed"], env);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: Value = serde_json::from_slice(&o.stdout).unwrap();
    let o = h.vouch(&["--json", "receipt", run, "--signed"], env);
    assert_eq!(
        serde_json::from_slice::<Value>(&o.stdout).unwrap(),
        v,
        "`--json` prints the same statement, the file format"
    );
    let path = h.tmp.path().join(format!("{run}.receipt.json"));
    std::fs::write(&path, serde_json::to_string_pretty(&v).unwrap()).unwrap();
    (path, v)
}

fn verify(h: &Home, file: &std::path::Path, extra: &[&str], env: &[(&str, &str)]) -> Output {
    let mut args = vec!["verify", file.to_str().unwrap()];
    args.extend_from_slice(extra);
    h.vouch(&args, env)
}

fn signed_receipt_verifies_and_a_changed_field_is_named(h: &Home, env: &[(&str, &str)]) {
    let run = finished_run(h, env);
    let (path, v) = signed_file(h, &run, env);
    assert_eq!(v["run"], run.as_str());
    assert_eq!(v["outcome"], "succeeded");
    assert_eq!(v["deliveries"][0]["id"], "d1");
    assert_eq!(v["deliveries"][0]["status"], "verified");
    assert!(v["signature"].as_str().unwrap().len() == 128);
    let journal: Vec<Value> =
        serde_json::from_slice(&h.vouch(&["--json", "journal", &run], env).stdout).unwrap();
    let last = journal.last().unwrap();
    assert_eq!(last["kind"], "terminal");
    assert_eq!(v["journal_head"]["hash"], last["hash"]);
    let mode = std::fs::metadata(h.dir.join("identities/host.key"))
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600, "the host's key was made on first use, 0600");
    let ids: Vec<Value> =
        serde_json::from_slice(&h.vouch(&["--json", "identity", "list"], env).stdout).unwrap();
    assert!(ids
        .iter()
        .any(|i| i["name"] == "host" && i["public_key"] == v["host_key"]));

    let o = verify(h, &path, &[], env);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(
        stdout(&o).contains("Verified (with this home's store)"),
        "{}",
        stdout(&o)
    );
    let o = verify(h, &path, &["--offline"], env);
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    let j: Value = serde_json::from_slice(
        &h.vouch(&["--json", "verify", path.to_str().unwrap()], env)
            .stdout,
    )
    .unwrap();
    assert_eq!(j["verified"], true);

    for (field, value) in [
        ("outcome", serde_json::json!("failed")),
        (
            "deliveries",
            serde_json::json!([{"id": "d1", "status": "failed", "evidence": null, "evidence_event": null}]),
        ),
        ("journal_head", serde_json::json!({"seq": 1, "hash": "00"})),
    ] {
        let mut t = v.clone();
        t[field] = value;
        let tampered = h.tmp.path().join("tampered.json");
        std::fs::write(&tampered, t.to_string()).unwrap();
        let o = verify(h, &tampered, &[], env);
        assert_eq!(o.status.code(), Some(1), "{field}: {}", stdout(&o));
        assert!(
            stdout(&o).contains(&format!("FAILED field {field}")),
            "{field} is named: {}",
            stdout(&o)
        );
        assert!(stdout(&o).contains("FAILED signature"), "{}", stdout(&o));
        let o = verify(h, &tampered, &["--offline"], env);
        assert_eq!(o.status.code(), Some(1), "{field} offline: {}", stdout(&o));
        assert!(stdout(&o).contains("FAILED signature"), "{}", stdout(&o));
    }

    let not_json = h.tmp.path().join("not.json");
    std::fs::write(&not_json, "hello").unwrap();
    let o = verify(h, &not_json, &[], env);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("not JSON"), "{}", stderr(&o));
    let o = verify(h, &h.tmp.path().join("missing.json"), &[], env);
    assert_eq!(o.status.code(), Some(2));
}

#[test]
fn signed_receipts_on_sqlite_and_a_changed_journal_is_named() {
    let h = Home::new("");
    signed_receipt_verifies_and_a_changed_field_is_named(&h, &[]);
    let run = finished_run(&h, &[]);
    let (path, _) = signed_file(&h, &run, &[]);

    // Checked where no home exists: the signature alone, said so.
    let elsewhere = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_vouch"))
        .arg("--home")
        .arg(elsewhere.path().join("none"))
        .args(["verify", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
    assert!(stdout(&o).contains("offline"), "{}", stdout(&o));

    // Re-signed by another key: the signature holds offline, but it is not this host's.
    {
        let mut v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let forger = vouch_identity::Identity::from_secret("forger", &[9; 32]);
        let m = v.as_object_mut().unwrap();
        m.remove("signature");
        m.insert("host_key".into(), Value::from(forger.public_key()));
        let sig = forger.sign(&v).unwrap();
        v["signature"] = Value::from(sig);
        let forged = h.tmp.path().join("forged.json");
        std::fs::write(&forged, v.to_string()).unwrap();
        let o = verify(&h, &forged, &["--offline"], &[]);
        assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
        assert!(
            stdout(&o).contains("offline: the signature only"),
            "{}",
            stdout(&o)
        );
        let o = verify(&h, &forged, &[], &[]);
        assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
        assert!(stdout(&o).contains("FAILED host key"), "{}", stdout(&o));
        assert!(
            stdout(&o).contains("FAILED field host_key") || stdout(&o).contains("FAILED host key")
        );
    }

    // The journal changed behind the store's back: the receipt no longer verifies.
    {
        let c = rusqlite::Connection::open(h.dir.join("vouch.db")).unwrap();
        c.execute_batch("DROP TRIGGER journal_no_update").unwrap();
        let n = c
            .execute(
                "UPDATE journal SET body = '{\"status\":\"verified\",\"evidence\":\"forged\"}' WHERE run_id = ?1 AND kind = 'evidence'",
                [&run],
            )
            .unwrap();
        assert!(n >= 1);
    }
    let o = verify(&h, &path, &[], &[]);
    assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
    assert!(
        stdout(&o).contains("FAILED journal chain") && stdout(&o).contains("event #"),
        "{}",
        stdout(&o)
    );
    assert!(
        stdout(&o).contains("FAILED field deliveries"),
        "{}",
        stdout(&o)
    );
    // The file itself is intact: offline, the signature still holds.
    assert_eq!(
        verify(&h, &path, &["--offline"], &[]).status.code(),
        Some(0)
    );
}

/// `file` re-signed by a fresh key that names itself as `host_key`: a valid signature, by
/// someone else.
fn forge(h: &Home, file: &std::path::Path) -> std::path::PathBuf {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(file).unwrap()).unwrap();
    let forger = vouch_identity::Identity::generate("forger").unwrap();
    let m = v.as_object_mut().unwrap();
    m.remove("signature");
    m.insert("host_key".into(), Value::from(forger.public_key()));
    v["signature"] = Value::from(forger.sign(&v).unwrap());
    let forged = h.tmp.path().join("forged-fresh.json");
    std::fs::write(&forged, v.to_string()).unwrap();
    forged
}

#[test]
fn a_pinned_verify_refuses_a_receipt_re_signed_with_a_fresh_key() {
    let h = Home::new("");
    let run = finished_run(&h, &[]);
    let (path, v) = signed_file(&h, &run, &[]);
    let o = h.vouch(&["identity", "host"], &[]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let key = stdout(&o).trim().to_string();
    assert_eq!(key, v["host_key"], "`identity host` prints the signing key");
    let j: Value =
        serde_json::from_slice(&h.vouch(&["--json", "identity", "host"], &[]).stdout).unwrap();
    assert_eq!(j["public_key"], key.as_str());
    let key_file = h.tmp.path().join("host.pub");
    std::fs::write(&key_file, format!("{key}\n")).unwrap();
    let json_file = h.tmp.path().join("host.json");
    std::fs::write(&json_file, j.to_string()).unwrap();
    let forged = forge(&h, &path);

    // Unpinned, offline: the signature holds, and the output says the signer is unchecked.
    for file in [&path, &forged] {
        let o = verify(&h, file, &["--offline"], &[]);
        assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
        assert!(
            stdout(&o).contains("signature valid, signer not checked"),
            "{}",
            stdout(&o)
        );
        assert!(!stdout(&o).contains("Verified"), "{}", stdout(&o));
        let j: Value = serde_json::from_slice(
            &h.vouch(
                &["--json", "verify", file.to_str().unwrap(), "--offline"],
                &[],
            )
            .stdout,
        )
        .unwrap();
        assert_eq!(j["signer_checked"], false);
    }

    // Pinned (the key, or a file holding it): the genuine one verifies, the forgery fails.
    for pin in [
        key.as_str(),
        key_file.to_str().unwrap(),
        json_file.to_str().unwrap(),
    ] {
        let o = verify(&h, &path, &["--offline", "--host-key", pin], &[]);
        assert_eq!(o.status.code(), Some(0), "{}", stdout(&o));
        assert!(
            stdout(&o).contains("Verified: signed by the pinned host key"),
            "{}",
            stdout(&o)
        );
        let o = verify(&h, &forged, &["--offline", "--host-key", pin], &[]);
        assert_eq!(o.status.code(), Some(1), "{}", stdout(&o));
        assert!(
            stdout(&o).contains("FAILED pinned host key")
                && stdout(&o).contains("not by the pinned host key"),
            "{}",
            stdout(&o)
        );
        assert!(stdout(&o).contains("NOT verified"), "{}", stdout(&o));
    }
    let j: Value = serde_json::from_slice(
        &h.vouch(
            &[
                "--json",
                "verify",
                path.to_str().unwrap(),
                "--host-key",
                &key,
            ],
            &[],
        )
        .stdout,
    )
    .unwrap();
    assert_eq!(
        (j["verified"].clone(), j["signer_checked"].clone()),
        (Value::from(true), Value::from(true))
    );

    // A bad pin is bad input, named.
    let junk = h.tmp.path().join("junk.txt");
    std::fs::write(&junk, "not a key").unwrap();
    for bad in ["ed25519:zz", "nothing-here.pub", junk.to_str().unwrap()] {
        let o = verify(&h, &path, &["--host-key", bad], &[]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stdout(&o));
        assert!(stderr(&o).contains("--host-key"), "{bad}: {}", stderr(&o));
    }
}

#[test]
fn signed_receipts_on_postgres() {
    let pg = PgSchema::new("receipt");
    let h = Home::new("");
    assert!(h.vouch(&["init"], &pg.env()).status.success());
    signed_receipt_verifies_and_a_changed_field_is_named(&h, &pg.env());
}

#[test]
fn artifacts_put_get_and_the_size_limit() {
    let h = Home::new("");
    let src = h.tmp.path().join("in.bin");
    let data: Vec<u8> = (0..10_000u32).map(|i| (i % 251) as u8).collect();
    std::fs::write(&src, &data).unwrap();
    let o = h.vouch(&["artifact", "put", src.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let cid = stdout(&o).trim().to_string();
    let expected = format!("sha256:{}", vouch_core::sha256_hex(&data));
    assert_eq!(cid, expected);

    let v: Value = serde_json::from_slice(
        &h.vouch(
            &["--json", "artifact", "put", src.to_str().unwrap(), "--pin"],
            &[],
        )
        .stdout,
    )
    .unwrap();
    assert_eq!(v["cid"], cid.as_str());
    assert_eq!(v["size_bytes"], 10_000);
    assert_eq!(v["pinned"], true);

    let o = h.vouch(&["artifact", "get", &cid], &[]);
    assert!(o.status.success());
    assert_eq!(o.stdout, data, "the exact bytes on stdout");
    let out = h.tmp.path().join("out.bin");
    let v: Value = serde_json::from_slice(
        &h.vouch(
            &[
                "--json",
                "artifact",
                "get",
                &cid,
                "-o",
                out.to_str().unwrap(),
            ],
            &[],
        )
        .stdout,
    )
    .unwrap();
    assert_eq!(v["size_bytes"], 10_000);
    assert_eq!(std::fs::read(&out).unwrap(), data);

    for bad in [
        "sha256:nothex",
        "md5:abc",
        &format!("sha256:{}", "0".repeat(64)),
    ] {
        let o = h.vouch(&["artifact", "get", bad], &[]);
        assert_eq!(o.status.code(), Some(2), "{bad}: {}", stderr(&o));
    }
    assert_eq!(
        h.vouch(&["artifact", "put", "/nonexistent/file"], &[])
            .status
            .code(),
        Some(2)
    );

    // A copy changed on disk is refused, not served.
    let obj = h
        .dir
        .join("objects/sha256")
        .join(&cid[7..9])
        .join(&cid[7..]);
    std::fs::write(&obj, b"changed").unwrap();
    let o = h.vouch(&["artifact", "get", &cid], &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("corrupt"), "{}", stderr(&o));
    assert!(o.stdout.is_empty(), "nothing of the bad copy is printed");

    // 25 MiB is accepted, one byte more is refused by name and nothing is stored.
    let big = h.tmp.path().join("big.bin");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(25 * 1024 * 1024 + 1).unwrap();
    let o = h.vouch(&["artifact", "put", big.to_str().unwrap()], &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("26214401 bytes") && stderr(&o).contains("26214400"),
        "{}",
        stderr(&o)
    );
    f.set_len(25 * 1024 * 1024).unwrap();
    let o = h.vouch(&["artifact", "put", big.to_str().unwrap()], &[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let staged: Vec<Value> =
        serde_json::from_slice(&h.vouch(&["--json", "artifact", "list"], &[]).stdout).unwrap();
    assert_eq!(staged.len(), 1, "the pinned one is not staged: {staged:?}");
    assert_eq!(staged[0]["size_bytes"], 25 * 1024 * 1024);
}

#[test]
fn racing_processes_make_one_identity() {
    let h = Home::new("");
    let children: Vec<_> = (0..6)
        .map(|_| {
            std::process::Command::new(env!("CARGO_BIN_EXE_vouch"))
                .arg("--home")
                .arg(&h.dir)
                .args(["--json", "identity", "new", "racer"])
                .env_remove("VOUCH_DATABASE_URL")
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<Output> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let winners: Vec<&Output> = outs.iter().filter(|o| o.status.success()).collect();
    assert_eq!(winners.len(), 1, "exactly one process creates it");
    for o in outs.iter().filter(|o| !o.status.success()) {
        assert_eq!(o.status.code(), Some(2), "{}", stderr(o));
    }
    let won: Value = serde_json::from_slice(&winners[0].stdout).unwrap();
    let list: Vec<Value> =
        serde_json::from_slice(&h.vouch(&["--json", "identity", "list"], &[]).stdout).unwrap();
    assert_eq!(list.len(), 1);
    assert_eq!(list[0]["public_key"], won["public_key"]);
    assert_eq!(
        list[0]["state"], "key here",
        "the key file here is the stored key"
    );
    let files: Vec<_> = std::fs::read_dir(h.dir.join("identities"))
        .unwrap()
        .collect();
    assert_eq!(files.len(), 1, "no temporary key file is left");
}

/// Enrolment without secrets moving (§13.6.1): a worker's home makes the key and prints its
/// public half; the host's home registers that alone. A taken name or a bad key is bad input
/// (exit 2, naming it), and the host's home never holds the worker's key file.
#[test]
fn a_worker_key_made_in_its_own_home_is_added_to_the_host_by_its_public_key() {
    let worker = Home::new("");
    let host = Home::new("");
    assert!(worker
        .vouch(&["identity", "new", "far-1"], &[])
        .status
        .success());
    let out = worker.vouch(&["identity", "show", "far-1", "--public-key"], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    let key = stdout(&out).trim().to_string();
    assert!(is_public_key(&key), "{key}");

    let out = host.vouch(&["identity", "add", "far-1", "--public-key", &key], &[]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(stdout(&out).trim(), key);
    let out = host.vouch(&["--json", "identity", "show", "far-1"], &[]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        (
            v["public_key"].as_str(),
            v["in_store"].as_bool(),
            v["key_file"].is_null()
        ),
        (Some(key.as_str()), Some(true), true),
        "{v}"
    );
    assert!(!host.dir.join("identities/far-1.key").exists());

    let again = host.vouch(&["identity", "add", "far-1", "--public-key", &key], &[]);
    assert_eq!(again.status.code(), Some(2), "{}", stderr(&again));
    assert!(stderr(&again).contains("far-1"), "{}", stderr(&again));
    for (name, bad) in [
        ("far-2", "ed25519:zz"),
        ("far-2", "not a key"),
        ("Bad Name", key.as_str()),
    ] {
        let o = host.vouch(&["identity", "add", name, "--public-key", bad], &[]);
        assert_eq!(o.status.code(), Some(2), "{name} {bad}: {}", stderr(&o));
    }
    let missing = host.vouch(&["identity", "show", "nobody"], &[]);
    assert_eq!(missing.status.code(), Some(2), "{}", stderr(&missing));
}
