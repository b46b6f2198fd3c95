//! Issue 24 #4: TLS to PostgreSQL with rustls (`sslmode=disable|require|verify-full`, a root
//! certificate file), against the local server with a certificate made here.
//!
//! The server is the one at `VOUCH_PG_URL` (default postgres://postgres@127.0.0.1:5432/test)
//! and must run on this machine, as it does for development and CI: the first test to need it
//! makes a CA and a server certificate for 127.0.0.1 and localhost with the `openssl` command
//! (only the command: the vouch binary links no OpenSSL), writes them into the server's data
//! directory, and points the server at them (`ALTER SYSTEM SET ssl = on, ssl_cert_file,
//! ssl_key_file`, then `pg_reload_conf()`). It is idempotent (an existing certificate of ours
//! is kept) and plain connections keep working: pg_hba's `host` lines take both.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use postgres::{Client, NoTls};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use vouch_store::Store;
use vouch_store_postgres::PostgresStore;

const DEFAULT_URL: &str = "postgres://postgres@127.0.0.1:5432/test";
const CERT: &str = "vouch-test-server.crt";
const KEY: &str = "vouch-test-server.key";
const CA: &str = "vouch-test-ca.crt";
/// How long the server may take to load its new certificate after the reload.
const RELOAD_WAIT_MS_MAX: u64 = 10_000;

fn url() -> String {
    std::env::var("VOUCH_PG_URL").unwrap_or_else(|_| DEFAULT_URL.to_string())
}

fn admin() -> Client {
    Client::connect(&url(), NoTls).expect("PostgreSQL must run at VOUCH_PG_URL (trust auth)")
}

fn openssl(args: &[&str], dir: &Path) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command makes the test certificates");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA and a certificate it signed for 127.0.0.1 and localhost, made in `dir`.
fn make_certificates(dir: &Path, prefix: &str) {
    openssl(
        &[
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "3650",
            "-subj",
            "/CN=vouch test CA",
            "-keyout",
            &format!("{prefix}ca.key"),
            "-out",
            &format!("{prefix}ca.crt"),
        ],
        dir,
    );
    openssl(
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-subj",
            "/CN=127.0.0.1",
            "-keyout",
            &format!("{prefix}server.key"),
            "-out",
            &format!("{prefix}server.csr"),
        ],
        dir,
    );
    std::fs::write(
        dir.join(format!("{prefix}ext.cnf")),
        "subjectAltName = IP:127.0.0.1, DNS:localhost\n",
    )
    .unwrap();
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            &format!("{prefix}server.csr"),
            "-CA",
            &format!("{prefix}ca.crt"),
            "-CAkey",
            &format!("{prefix}ca.key"),
            "-CAcreateserial",
            "-days",
            "3650",
            "-extfile",
            &format!("{prefix}ext.cnf"),
            "-out",
            &format!("{prefix}server.crt"),
        ],
        dir,
    );
}

/// The server serves our certificate; returns the CA's file. Once per machine.
fn server_tls() -> PathBuf {
    let mut admin = admin();
    let data: String = admin.query_one("SHOW data_directory", &[]).unwrap().get(0);
    let data = PathBuf::from(data);
    let ca = data.join(CA);
    // One setter at a time across test processes.
    let lock = std::fs::File::create(std::env::temp_dir().join("vouch-test-pg-tls.lock")).unwrap();
    lock.lock().unwrap();
    let cert_file: String = admin.query_one("SHOW ssl_cert_file", &[]).unwrap().get(0);
    let ours = cert_file == data.join(CERT).to_string_lossy() && ca.exists();
    if !ours {
        let tmp = tempfile::tempdir().unwrap();
        make_certificates(tmp.path(), "");
        let meta = std::fs::metadata(&data).unwrap_or_else(|e| {
            panic!(
                "the server's data directory {} must be reachable from this test (the server runs on this machine, and the test as root): {e}",
                data.display()
            )
        });
        use std::os::unix::fs::MetadataExt;
        for (from, to, mode) in [
            ("server.crt", CERT, 0o644),
            ("server.key", KEY, 0o600),
            ("ca.crt", CA, 0o644),
        ] {
            let target = data.join(to);
            std::fs::copy(tmp.path().join(from), &target).unwrap();
            std::os::unix::fs::chown(&target, Some(meta.uid()), Some(meta.gid())).unwrap();
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&target, std::fs::Permissions::from_mode(mode)).unwrap();
        }
        // One statement at a time: ALTER SYSTEM refuses to run inside a transaction.
        for statement in [
            "ALTER SYSTEM SET ssl = on".to_string(),
            format!(
                "ALTER SYSTEM SET ssl_cert_file = '{}'",
                data.join(CERT).display()
            ),
            format!(
                "ALTER SYSTEM SET ssl_key_file = '{}'",
                data.join(KEY).display()
            ),
            "SELECT pg_reload_conf()".to_string(),
        ] {
            admin.batch_execute(&statement).unwrap();
        }
    }
    // The reload is asynchronous: wait until the server hands out our certificate.
    let started = std::time::Instant::now();
    loop {
        match open(&format!("sslmode=verify-full&sslrootcert={}", ca.display())) {
            Ok(_) => break,
            Err(e) if started.elapsed().as_millis() > RELOAD_WAIT_MS_MAX as u128 => {
                panic!("the server did not take its TLS certificate: {e}")
            }
            Err(_) => std::thread::sleep(std::time::Duration::from_millis(100)),
        }
    }
    ca
}

/// A schema of its own, dropped when the test ends.
struct Schema(String);

impl Schema {
    fn new(name: &str) -> Schema {
        Schema(format!("vouch_tls_{name}_{}", std::process::id()))
    }
}

impl Drop for Schema {
    fn drop(&mut self) {
        let _ = admin().batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.0));
    }
}

fn with_query(query: &str) -> String {
    let base = url();
    let sep = if base.contains('?') { '&' } else { '?' };
    format!("{base}{sep}{query}")
}

fn open(query: &str) -> Result<PostgresStore, vouch_store::StoreError> {
    let schema = Schema::new("probe");
    let r = PostgresStore::open(&with_query(query), &schema.0);
    drop(schema);
    r
}

/// Whether every session of `app` is encrypted, and how many there are.
fn sessions(app: &str) -> (bool, i64) {
    let row = admin()
        .query_one(
            "SELECT COALESCE(bool_and(s.ssl), false), count(*) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid) WHERE a.application_name = $1",
            &[&app],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

/// A store through `query`, used for a run; returns whether its sessions were encrypted.
fn store_works_over(query: &str, name: &str) -> bool {
    let schema = Schema::new(name);
    let app = format!("vouch-tls-{name}-{}", std::process::id());
    let store = PostgresStore::open(
        &with_query(&format!("{query}&application_name={app}")),
        &schema.0,
    )
    .unwrap_or_else(|e| panic!("{query}: {e}"));
    let store: Arc<dyn Store> = Arc::new(store);
    store
        .create_run(&vouch_store::NewRun {
            state: vouch_core::RunState::Running,
            id: "r1".into(),
            trigger: vouch_core::TriggerKind::Interactive,
            title: "over TLS".into(),
            chain_root: "r1".into(),
            parent: None,
            scope: "r1".into(),
            spec: serde_json::json!({}),
            created_ms: 1,
            lease: None,
        })
        .unwrap();
    assert_eq!(store.run("r1").unwrap().unwrap().title, "over TLS");
    let (encrypted, n) = sessions(&app);
    assert!(n >= 1, "no session of {app}");
    encrypted
}

#[test]
fn verify_full_with_the_servers_ca_is_encrypted_and_verified() {
    let ca = server_tls();
    assert!(store_works_over(
        &format!("sslmode=verify-full&sslrootcert={}", ca.display()),
        "full"
    ));
}

#[test]
fn require_is_encrypted_without_a_root_certificate() {
    server_tls();
    assert!(store_works_over("sslmode=require", "require"));
}

#[test]
fn disable_stays_plain() {
    server_tls();
    assert!(!store_works_over("sslmode=disable", "plain"));
}

#[test]
fn verify_full_refuses_a_server_whose_certificate_another_ca_signed() {
    server_tls();
    let tmp = tempfile::tempdir().unwrap();
    make_certificates(tmp.path(), "other-");
    let other = tmp.path().join("other-ca.crt");
    let e = open(&format!(
        "sslmode=verify-full&sslrootcert={}",
        other.display()
    ))
    .err()
    .expect("a certificate of another CA is refused");
    assert!(e.to_string().contains("cannot connect"), "{e}");
    // Without a root file the public roots are trusted, and a private CA is not one of them.
    let e = open("sslmode=verify-full")
        .err()
        .expect("a private CA is not a public root");
    assert!(e.to_string().contains("cannot connect"), "{e}");
}

#[test]
fn a_missing_root_file_is_named() {
    let e = open("sslmode=verify-full&sslrootcert=/nonexistent/ca.pem")
        .err()
        .unwrap();
    assert!(e.to_string().contains("/nonexistent/ca.pem"), "{e}");
}
