//! Shared test fixtures: a vouch home driven through the real binary, a real SMTP server
//! (aiosmtpd) and an HTTP receiver that deduplicates by `Idempotency-Key`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Arc, Mutex};

pub struct Home {
    pub tmp: tempfile::TempDir,
    pub dir: PathBuf,
    /// On PostgreSQL: the server's URL and this home's own schema (dropped with the home).
    pub pg: Option<(String, String)>,
}

/// The two stores a home can use.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Sqlite,
    Postgres,
}

impl Home {
    pub fn new(config: &str) -> Home {
        Home::on(Backend::Sqlite, config)
    }
    /// A home on the given store; on PostgreSQL (`VOUCH_PG_URL`, default the local server)
    /// in a fresh schema of its own.
    pub fn on(backend: Backend, config: &str) -> Home {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("home");
        let pg = (backend == Backend::Postgres).then(|| {
            let url = std::env::var("VOUCH_PG_URL")
                .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".into());
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos();
            let n = NEXT_SCHEMA.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            (
                url,
                format!("vouch_home_{}_{nanos}_{n}", std::process::id()),
            )
        });
        let h = Home { tmp, dir, pg };
        let out = h.vouch(&["init"], &[]);
        assert!(
            out.status.success(),
            "init: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(h.dir.join("vouch.toml"), config).unwrap();
        h
    }
    pub fn vouch(&self, args: &[&str], env: &[(&str, &str)]) -> Output {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vouch"));
        c.arg("--home")
            .arg(&self.dir)
            .args(args)
            .env_remove("VOUCH_CRASH_AFTER")
            .env_remove("DBUS_SESSION_BUS_ADDRESS");
        if let Some((url, schema)) = &self.pg {
            c.env("VOUCH_DATABASE_URL", url)
                .env("VOUCH_DATABASE_SCHEMA", schema);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        c.output().unwrap()
    }
    /// Run SQL on the home's store behind vouch's back (tests that damage it on purpose).
    pub fn raw_sql(&self, sql: &str) {
        match &self.pg {
            Some((url, schema)) => {
                let mut client = postgres::Client::connect(url, postgres::NoTls).unwrap();
                client
                    .batch_execute(&format!("SET search_path TO {schema}; {sql}"))
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
            None => {
                let conn = rusqlite::Connection::open(self.dir.join("vouch.db")).unwrap();
                conn.execute_batch(sql)
                    .unwrap_or_else(|e| panic!("{sql}: {e}"));
            }
        }
    }
    pub fn json(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let out = self.vouch(&a, &[]);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("{args:?}: {e}: {}", String::from_utf8_lossy(&out.stdout)))
    }
    pub fn script(&self, turns: &Value) -> String {
        let p = self.tmp.path().join("script.json");
        std::fs::write(&p, turns.to_string()).unwrap();
        p.to_string_lossy().into_owned()
    }
}

static NEXT_SCHEMA: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);

impl Drop for Home {
    fn drop(&mut self) {
        if let Some((url, schema)) = &self.pg {
            if let Ok(mut client) = postgres::Client::connect(url, postgres::NoTls) {
                let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
            }
        }
    }
}

/// A home on `backend` whose `[email]` is `sink`, with one run ("Email the board") waiting
/// for approval of an e-mail of `body` to board@example.com; returns the home and its card.
pub fn email_waiting_for_approval(backend: Backend, sink: &SmtpSink, body: &str) -> (Home, Value) {
    let h = Home::on(
        backend,
        &format!(
            "[email]\nhost = \"127.0.0.1\"\nport = {}\nfrom = \"agent@example.com\"\ntls = \"none\"\ntimeout_ms = 5000\n",
            sink.port
        ),
    );
    let s = h.script(&serde_json::json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "email", "address": "board@example.com"}}]}},
        {"deliver": "d1", "payload": {"to": "board@example.com", "subject": "Q4", "body": body}},
        {"final": ""}
    ]));
    assert_eq!(
        h.vouch(&["run", "Email the board", "--script", &s], &[])
            .status
            .code(),
        Some(3),
        "the e-mail waits for approval: exit 3"
    );
    let card = h.json(&["approvals"])[0].clone();
    (h, card)
}

pub struct SmtpSink {
    child: Child,
    pub dir: PathBuf,
    pub port: u16,
}

impl Drop for SmtpSink {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl SmtpSink {
    pub fn start(dir: &Path) -> SmtpSink {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/smtp_sink.py");
        let mut child = Command::new("python3")
            .arg(script)
            .arg(port.to_string())
            .arg(dir)
            .stdout(Stdio::piped())
            .spawn()
            .expect("start the SMTP sink");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        assert_eq!(
            line.trim(),
            "READY",
            "the SMTP sink did not start (is aiosmtpd installed?)"
        );
        SmtpSink {
            child,
            dir: dir.to_path_buf(),
            port,
        }
    }
    /// Every message received, oldest first.
    pub fn messages(&self) -> Vec<String> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(&self.dir)
            .map(|r| {
                r.filter_map(|e| e.ok().map(|e| e.path()))
                    .filter(|p| p.extension().map(|x| x == "eml").unwrap_or(false))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v.iter()
            .map(|p| std::fs::read_to_string(p).unwrap_or_default())
            .collect()
    }
    pub fn count(&self) -> usize {
        std::fs::read_dir(&self.dir)
            .map(|r| {
                r.filter_map(|e| e.ok())
                    .filter(|e| e.path().extension().map(|x| x == "eml").unwrap_or(false))
                    .count()
            })
            .unwrap_or(0)
    }
}

/// An HTTP receiver on loopback: applies each distinct `Idempotency-Key` once (or every
/// request when `dedup` is false), answers 200 with `{"id": …}`.
pub struct Receiver {
    pub url: String,
    pub applied: Arc<Mutex<Vec<String>>>,
    pub requests: Arc<Mutex<usize>>,
}

impl Receiver {
    pub fn start(dedup: bool) -> Receiver {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/in", listener.local_addr().unwrap());
        let applied = Arc::new(Mutex::new(Vec::new()));
        let requests = Arc::new(Mutex::new(0usize));
        let (a, r) = (applied.clone(), requests.clone());
        std::thread::spawn(move || {
            for mut s in listener.incoming().flatten() {
                let text = read_request(&mut s);
                *r.lock().unwrap() += 1;
                let key = header(&text, "idempotency-key").unwrap_or_default();
                let mut ap = a.lock().unwrap();
                if !dedup || !ap.contains(&key) {
                    ap.push(key.clone());
                }
                let id = format!("tr_{}", ap.len());
                drop(ap);
                let body = format!("{{\"id\":\"{id}\"}}");
                let _ = write!(s, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
            }
        });
        Receiver {
            url,
            applied,
            requests,
        }
    }
    pub fn applied(&self) -> usize {
        self.applied.lock().unwrap().len()
    }
}

/// Read one HTTP/1.1 request (head and a body of `Content-Length` bytes) as text.
pub fn read_request(s: &mut std::net::TcpStream) -> String {
    let mut buf = vec![0u8; 1 << 20];
    let mut n = 0;
    loop {
        let k = match s.read(&mut buf[n..]) {
            Ok(0) | Err(_) => break,
            Ok(k) => k,
        };
        n += k;
        let text = String::from_utf8_lossy(&buf[..n]);
        if let Some(h) = text.find("\r\n\r\n") {
            let len = header(&text, "content-length")
                .and_then(|v| v.parse::<usize>().ok())
                .unwrap_or(0);
            if n >= h + 4 + len || n == buf.len() {
                break;
            }
        }
    }
    String::from_utf8_lossy(&buf[..n]).into_owned()
}

/// The value of a request header, matched case-insensitively.
pub fn header(request: &str, name: &str) -> Option<String> {
    request.lines().take_while(|l| !l.is_empty()).find_map(|l| {
        let (k, v) = l.split_once(':')?;
        k.trim()
            .eq_ignore_ascii_case(name)
            .then(|| v.trim().to_string())
    })
}

/// Whether this machine lets us make PID namespaces (root, or user namespaces), for the tests
/// that start a host or a worker in one of its own.
pub fn namespaces() -> bool {
    let ok = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .output()
        .is_ok_and(|o| o.status.success());
    // CI runs as root on the same kind of machine: a refusal there is a failure, not a skip.
    assert!(
        ok || std::env::var("CI").is_err(),
        "unshare --pid is refused on CI"
    );
    ok
}
