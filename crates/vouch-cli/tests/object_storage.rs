#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Issue 24 #5: artifacts and pinned task conversations in an S3-compatible bucket, so they
//! follow the work to another host. A real S3 server on loopback (moto in server mode, from
//! the tests' Python environment), real `vouch` processes with homes of their own; the world
//! is checked in the bucket itself and through another host, never in logs.

use serde_json::{json, Value};
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

fn vouch_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_vouch"))
}

fn pg_url() -> String {
    std::env::var("VOUCH_PG_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into())
}

fn nanos() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// A moto S3 server on a loopback port, stopped (killed and reaped) on drop.
struct S3Server {
    child: Child,
    addr: String,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One raw HTTP/1.1 request to the server as the test's key (moto names the caller by the
/// credential and checks no signature): (status, body).
fn http(addr: &str, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    let auth = "AWS4-HMAC-SHA256 Credential=testing/20260101/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00";
    let head = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\nauthorization: {auth}\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut resp = vec![];
    s.read_to_end(&mut resp).unwrap();
    let text = String::from_utf8_lossy(&resp);
    let status = text
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .unwrap_or(0);
    let at = resp
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map_or(resp.len(), |p| p + 4);
    (status, resp[at..].to_vec())
}

impl S3Server {
    /// Start moto on a free port and create `bucket`.
    fn start(bucket: &str) -> S3Server {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new("python3")
            .args([
                "-m",
                "moto.server",
                "-H",
                "127.0.0.1",
                "-p",
                &port.to_string(),
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("python3 with moto[server] (scripts/test.sh installs it in target/venv)");
        let s = S3Server {
            child,
            addr: format!("127.0.0.1:{port}"),
        };
        for _ in 0..300 {
            if TcpStream::connect(&s.addr).is_ok() {
                let (status, body) = http(&s.addr, "PUT", &format!("/{bucket}"), b"");
                assert_eq!(
                    status,
                    200,
                    "create bucket: {}",
                    String::from_utf8_lossy(&body)
                );
                return s;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        panic!(
            "moto did not listen on {} (is moto[server] installed?)",
            s.addr
        );
    }

    /// The `[storage]` section that puts a home's artifacts in `bucket/prefix` here.
    fn storage_toml(&self, bucket: &str, prefix: &str) -> String {
        format!(
            "[storage]\nartifacts = \"s3://{bucket}/{prefix}\"\nendpoint = \"http://{}\"\nregion = \"us-east-1\"\nallow_http = true\naccess_key_id = {{ env = \"VOUCH_TEST_S3_KEY\" }}\nsecret_access_key = {{ env = \"VOUCH_TEST_S3_SECRET\" }}\n",
            self.addr
        )
    }
}

/// A vouch home (its own folder: another host), on SQLite or on a PostgreSQL schema.
struct Host {
    tmp: tempfile::TempDir,
    dir: PathBuf,
    schema: Option<String>,
}

impl Host {
    fn new(schema: Option<&str>, toml: &str) -> Host {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("home");
        let h = Host {
            tmp,
            dir,
            schema: schema.map(String::from),
        };
        let out = h.run(&["init"]);
        assert!(out.status.success(), "init: {}", err(&out));
        std::fs::write(h.dir.join("vouch.toml"), toml).unwrap();
        h
    }

    fn run(&self, args: &[&str]) -> Output {
        let mut c = Command::new(vouch_bin());
        c.arg("--home")
            .arg(&self.dir)
            .args(args)
            .env_remove("VOUCH_CRASH_AFTER")
            .env_remove("VOUCH_MODEL_URL")
            .env_remove("VOUCH_DATABASE_URL")
            .env("VOUCH_TEST_S3_KEY", "testing")
            .env("VOUCH_TEST_S3_SECRET", "testing");
        if let Some(schema) = &self.schema {
            c.env("VOUCH_DATABASE_URL", pg_url())
                .env("VOUCH_DATABASE_SCHEMA", schema);
        }
        c.output().unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let out = self.run(&a);
        assert!(out.status.success(), "{args:?}: {}", err(&out));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    fn file(&self, name: &str, bytes: &[u8]) -> String {
        let p = self.tmp.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p.to_str().unwrap().to_string()
    }

    fn drain(&self, name: &str, script: &Value) {
        let s = self.file(
            &format!("script-{}.json", nanos()),
            script.to_string().as_bytes(),
        );
        let out = self.run(&[
            "--json", "worker", "--name", name, "--script", &s, "--drain",
        ]);
        assert!(out.status.success(), "worker {name}: {}", err(&out));
    }
}

fn err(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn object_key(prefix: &str, cid: &str) -> String {
    let hex = cid.strip_prefix("sha256:").unwrap();
    format!("{prefix}/sha256/{}/{hex}", &hex[..2])
}

#[test]
fn artifacts_live_in_the_bucket_and_another_host_reads_them() {
    let bucket = "vouch-artifacts";
    let s3 = S3Server::start(bucket);
    let a = Host::new(None, &s3.storage_toml(bucket, "team/a"));
    let cid = a.json(&[
        "artifact",
        "put",
        &a.file("report.txt", b"the quarterly report"),
    ])["cid"]
        .as_str()
        .unwrap()
        .to_string();
    // The bytes are in the bucket under the prefix, not in the home.
    let (status, body) = http(
        &s3.addr,
        "GET",
        &format!("/{bucket}/{}", object_key("team/a", &cid)),
        b"",
    );
    assert_eq!(
        (status, body.as_slice()),
        (200, &b"the quarterly report"[..])
    );
    assert!(
        !a.dir.join("objects").exists(),
        "nothing stored in the home's folder"
    );
    // Another home configured with the same bucket reads them; one without it does not.
    let b = Host::new(None, &s3.storage_toml(bucket, "team/a"));
    let got = b.run(&["artifact", "get", &cid]);
    assert!(got.status.success(), "{}", err(&got));
    assert_eq!(got.stdout, b"the quarterly report");
    let local = Host::new(None, "");
    let out = local.run(&["artifact", "get", &cid]);
    assert_eq!(out.status.code(), Some(2), "{}", err(&out));
    // Staged until pinned; a pin is seen by every host.
    let staged = b.json(&["artifact", "list"]);
    assert_eq!(staged.as_array().unwrap().len(), 1, "{staged}");
    let pinned = a.json(&[
        "artifact",
        "put",
        "--pin",
        &a.file("r2.txt", b"the quarterly report"),
    ]);
    assert_eq!(pinned["pinned"], true, "{pinned}");
    assert_eq!(b.json(&["artifact", "list"]), json!([]));
}

#[test]
fn a_changed_object_in_the_bucket_is_refused() {
    let bucket = "vouch-tamper";
    let s3 = S3Server::start(bucket);
    let a = Host::new(None, &s3.storage_toml(bucket, "p"));
    let cid = a.json(&["artifact", "put", &a.file("x.txt", b"pay 10 EUR to Alice")])["cid"]
        .as_str()
        .unwrap()
        .to_string();
    let key = format!("/{bucket}/{}", object_key("p", &cid));
    let (status, _) = http(&s3.addr, "PUT", &key, b"pay 9999 EUR to Mallory");
    assert_eq!(status, 200);
    let out = a.run(&["artifact", "get", &cid]);
    assert!(!out.status.success());
    assert!(
        out.stdout.is_empty(),
        "no byte of the changed copy is served"
    );
    assert!(err(&out).contains("corrupt"), "{}", err(&out));
    let out_file = a.tmp.path().join("out.txt");
    let out = a.run(&["artifact", "get", &cid, "-o", out_file.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(!out_file.exists(), "nothing written from a changed copy");
    // A configured bucket that is not there is an error naming it, never the home instead.
    let bad = Host::new(None, &s3.storage_toml("no-such-bucket", "p"));
    let out = bad.run(&["artifact", "put", &bad.file("y.txt", b"y")]);
    assert!(!out.status.success());
    assert!(!bad.dir.join("objects").exists());
}

#[test]
fn a_bad_storage_section_is_refused_with_what_is_wrong() {
    for (toml, says) in [
        ("[storage]\nartifacts = \"file:///etc\"\n", "s3://"),
        ("[storage]\nartifacts = \"s3://Bad_Bucket\"\n", "bucket"),
        ("[storage]\nartifacts = \"s3://bucket/../x\"\n", "prefix"),
        (
            "[storage]\nartifacts = \"s3://bucket\"\naccess_key_id = { env = \"VOUCH_TEST_UNSET_VAR\" }\nsecret_access_key = { env = \"VOUCH_TEST_UNSET_VAR\" }\n",
            "VOUCH_TEST_UNSET_VAR",
        ),
        ("[storage]\nartifact = \"s3://bucket\"\n", "artifact"),
    ] {
        let h = Host::new(None, "");
        std::fs::write(h.dir.join("vouch.toml"), toml).unwrap();
        let out = h.run(&["artifact", "list"]);
        assert_eq!(out.status.code(), Some(2), "{toml}: {}", err(&out));
        assert!(err(&out).contains(says), "{toml}: {}", err(&out));
    }
}

/// A continuation offered on host A, claimed by a worker on host B (another home, the same
/// PostgreSQL schema and bucket), goes on from the parent's conversation; the conversation
/// pinned on A is read on B from the bucket, and B's pinned conversation on A.
#[test]
fn a_continuation_claimed_on_another_host_reloads_the_parents_conversation() {
    let bucket = "vouch-continuation";
    let s3 = S3Server::start(bucket);
    let schema = format!(
        "vouch_s3_{}_{}",
        std::process::id(),
        nanos() % 1_000_000_000
    );
    let toml = s3.storage_toml(bucket, "shared");
    let a = Host::new(Some(&schema), &toml);
    let b = Host::new(Some(&schema), &toml);
    let _drop = DropSchema(schema.clone());
    let id = a.json(&["task", "offer", "--type", "freeform", "--brief", "draft it"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    a.drain("wa", &json!([{"declare": {"deliveries": []}}, {"submit": {"summary": "first draft"}}, {"final": "ok"}]));
    let c = a.json(&["task", "continue", &id, "--brief", "make it shorter"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let cont = b.json(&["task", "show", &c])["task"]["spec"]["input"]["continuation"].clone();
    let cid = cont["conversation"].as_str().unwrap().to_string();
    let got = b.run(&["artifact", "get", &cid]);
    assert!(got.status.success(), "{}", err(&got));
    assert!(String::from_utf8_lossy(&got.stdout).contains("first draft"));
    // B's worker claims and finishes it.
    b.drain("wb", &json!([{"declare": {"deliveries": []}}, {"submit": {"summary": "short"}}, {"final": "ok"}]));
    let v = a.json(&["task", "show", &c]);
    assert_eq!(v["task"]["state"], "completed", "{v}");
    assert_eq!(v["attempts"][0]["claimant"], "wb");
    // Its conversation, pinned by a fork offered on B, is read on A: the parent's turns,
    // then the new brief, then B's own.
    let f = b.json(&["task", "continue", &c, "--brief", "again", "--mode", "fork"]);
    let fv = a.json(&["task", "show", f["id"].as_str().unwrap()]);
    let cid2 = fv["task"]["spec"]["input"]["continuation"]["conversation"]
        .as_str()
        .unwrap()
        .to_string();
    let got = a.run(&["artifact", "get", &cid2]);
    assert!(got.status.success(), "{}", err(&got));
    let text = String::from_utf8_lossy(&got.stdout).into_owned();
    let (p, m, s) = (
        text.find("first draft").unwrap(),
        text.find("make it shorter").unwrap(),
        text.find("\"short")
            .or_else(|| text.find("short\\\""))
            .unwrap(),
    );
    assert!(p < m && m < s, "{text}");
    for h in [&a, &b] {
        assert!(
            !h.dir.join("objects").exists(),
            "nothing in {}",
            h.dir.display()
        );
    }
}

struct DropSchema(String);

impl Drop for DropSchema {
    fn drop(&mut self) {
        if let Ok(mut c) = postgres::Client::connect(&pg_url(), postgres::NoTls) {
            let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.0));
        }
    }
}
