#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! Patch tasks (§14) through the real binary: a real git repository in a temporary folder, a
//! task offered with `vouch task offer --type patch`, a scripted worker, and the stored
//! attempt, output and receipt read back. The verdict comes from the host's diff and checks.

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

struct Home {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    dir: PathBuf,
    repo: PathBuf,
    base: String,
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

impl Home {
    fn new() -> Home {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().to_path_buf();
        let repo = root.join("repo");
        std::fs::create_dir_all(repo.join("src")).unwrap();
        git(&repo, &["init", "--quiet", "-b", "main"]);
        git(&repo, &["config", "user.name", "t"]);
        git(&repo, &["config", "user.email", "t@localhost"]);
        std::fs::write(repo.join("src/client.rs"), "fn send() {}\n").unwrap();
        std::fs::write(repo.join("README.md"), "readme\n").unwrap();
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "--quiet", "-m", "base"]);
        let base = git(&repo, &["rev-parse", "HEAD"]);
        let h = Home {
            dir: root.join("home"),
            _tmp: tmp,
            root,
            repo,
            base,
        };
        let out = h.run(&["init"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        h
    }

    fn run(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_vouch"))
            .arg("--home")
            .arg(&self.dir)
            .args(args)
            .env_remove("VOUCH_CRASH_AFTER")
            .env_remove("VOUCH_MODEL_URL")
            .env_remove("VOUCH_DATABASE_URL")
            .output()
            .unwrap()
    }

    fn json(&self, args: &[&str]) -> Value {
        let mut a = vec!["--json"];
        a.extend_from_slice(args);
        let out = self.run(&a);
        assert!(
            out.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// Offer the standard patch: change src/client.rs (only src/** may change), checked by a
    /// command that passes when the file mentions retry.
    fn offer(&self, check: &str) -> String {
        let repo = self.repo.to_string_lossy().into_owned();
        let check = format!("tests={check}");
        let v = self.json(&[
            "task",
            "offer",
            "--type",
            "patch",
            "--brief",
            "add retry handling",
            "--repo",
            &repo,
            "--base",
            "main",
            "--allow",
            "src/**",
            "--target",
            "src/client.rs",
            "--check",
            &check,
        ]);
        v["id"].as_str().unwrap().to_string()
    }

    fn work(&self, turns: Value) {
        let script = self.root.join("script.json");
        std::fs::write(&script, turns.to_string()).unwrap();
        let out = self.run(&[
            "worker",
            "--name",
            "w",
            "--script",
            script.to_str().unwrap(),
            "--drain",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn show(&self, id: &str) -> Value {
        self.json(&["task", "show", id])
    }
}

fn receipt(show: &Value) -> String {
    show["attempts"][0]["detail"]["receipt"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

const CHECK: &str = "grep -q retry src/client.rs";

#[test]
fn an_allowed_change_with_a_passing_check_is_accepted_with_the_hosts_commit() {
    let h = Home::new();
    let id = h.offer(CHECK);
    h.work(json!([
        {"declare": {"deliveries": []}},
        {"tool": "repo_list", "args": {"path": "src"}},
        {"tool": "repo_write_file", "args": {"path": "src/client.rs", "text": "fn send() { retry() }\n"}},
        {"final": "implemented retry handling"}
    ]));
    let s = h.show(&id);
    assert_eq!(s["task"]["state"], "completed", "{s:#}");
    let result = &s["result"];
    let commit = result["commit"].as_str().unwrap();
    let branch = format!("vouch/{id}/1");
    assert_eq!(result["branch"], branch.as_str());
    assert_eq!(git(&h.repo, &["rev-parse", &branch]), commit);
    assert_eq!(git(&h.repo, &["rev-parse", &format!("{commit}^")]), h.base);
    assert_eq!(
        git(&h.repo, &["rev-parse", "main"]),
        h.base,
        "the real branch is untouched"
    );
    assert_eq!(result["evidence"]["verdict"], "accepted");
    assert_eq!(result["evidence"]["checks"][0]["exit"], 0);
    let r = receipt(&s);
    assert!(r.contains("Changed: src/client.rs"), "{r}");
    assert!(r.contains("Checks (run by the host): tests exit 0"), "{r}");
    assert!(r.contains("Attribution: attributed to this attempt"), "{r}");
    // The worktree is removed once observed; the branch keeps the change.
    assert!(!h.dir.join("worktrees").join(format!("{id}-1")).exists());
}

#[test]
fn implemented_retry_handling_with_an_empty_diff_is_no_effect() {
    let h = Home::new();
    let id = h.offer(CHECK);
    h.work(json!([
        {"declare": {"deliveries": []}},
        {"tool": "repo_write_file", "args": {"path": "src/client.rs", "text": "fn send() {}\n"}},
        {"submit": {"summary": "implemented retry handling; all tests pass"}},
        {"final": "implemented retry handling"}
    ]));
    let s = h.show(&id);
    assert_eq!(s["task"]["state"], "failed", "{s:#}");
    let r = receipt(&s);
    assert!(r.contains("Changed: nothing"), "{r}");
    assert!(r.contains("No effect"), "{r}");
    assert!(r.contains("Targets unchanged: src/client.rs"), "{r}");
    assert!(
        !r.contains("implemented retry"),
        "model text is not evidence: {r}"
    );
    assert!(git(&h.repo, &["branch", "--list", "vouch/*"]).is_empty());
}

#[test]
fn all_tests_pass_in_the_final_text_certifies_nothing_the_hosts_check_decides() {
    let h = Home::new();
    let id = h.offer("exit 1");
    h.work(json!([
        {"declare": {"deliveries": []}},
        {"tool": "repo_write_file", "args": {"path": "src/client.rs", "text": "retry\n"}},
        // The agent may not run what its profile does not allow; its own runs certify nothing.
        {"tool": "repo_run", "args": {"argv": ["sh", "-c", "exit 0"]}},
        {"final": "all tests pass"}
    ]));
    let s = h.show(&id);
    assert_eq!(s["task"]["state"], "failed");
    let r = receipt(&s);
    assert!(r.contains("tests exit 1"), "{r}");
    assert!(r.contains("Why: check `tests` exited 1"), "{r}");
    let reason = s["attempts"][0]["end_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("check `tests` exited 1"), "{reason}");
}

#[test]
fn a_collateral_edit_is_rejected_naming_the_path_and_outside_paths_are_refused() {
    let h = Home::new();
    std::fs::write(h.root.join("secret.txt"), "secret").unwrap();
    let id = h.offer(CHECK);
    h.work(json!([
        {"declare": {"deliveries": []}},
        {"tool": "repo_read_file", "args": {"path": "../../secret.txt"}},
        {"tool": "repo_write_file", "args": {"path": "../../secret.txt", "text": "owned"}},
        {"tool": "repo_write_file", "args": {"path": "src/client.rs", "text": "retry\n"}},
        {"tool": "repo_write_file", "args": {"path": "README.md", "text": "also this\n"}},
        {"final": "done"}
    ]));
    assert_eq!(
        std::fs::read_to_string(h.root.join("secret.txt")).unwrap(),
        "secret"
    );
    let s = h.show(&id);
    assert_eq!(s["task"]["state"], "failed");
    let r = receipt(&s);
    assert!(
        r.contains("Collateral (outside the allow-list): README.md"),
        "{r}"
    );
    // Rejected but attributed: the diff is kept on the attempt's branch for a person to see.
    assert!(!git(&h.repo, &["branch", "--list", &format!("vouch/{id}/1")]).is_empty());
}

#[test]
fn bad_patch_offers_are_refused_with_what_is_wrong() {
    let h = Home::new();
    let repo = h.repo.to_string_lossy().into_owned();
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (
            vec![
                "--repo", &repo, "--base", "nope", "--allow", "src/**", "--target", "src/a.rs",
                "--check", "t=true",
            ],
            "--base nope",
        ),
        (
            vec![
                "--repo",
                &repo,
                "--base",
                "main",
                "--allow",
                "src/**",
                "--target",
                "docs/a.md",
                "--check",
                "t=true",
            ],
            "not matched by the allow-list",
        ),
        (
            vec![
                "--repo", &repo, "--base", "main", "--allow", "src/**", "--target", "src/a.rs",
            ],
            "at least one check",
        ),
        (
            vec![
                "--repo", &repo, "--base", "main", "--allow", "src/**", "--target", "src/a.rs",
                "--check", "oops",
            ],
            "NAME=COMMAND",
        ),
    ];
    for (extra, want) in cases {
        let mut a = vec!["task", "offer", "--type", "patch", "--brief", "x"];
        a.extend(extra);
        let out = h.run(&a);
        assert_eq!(out.status.code(), Some(2), "{a:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "{want}: {err}");
    }
    let input = h.root.join("in.json");
    std::fs::write(
        &input,
        json!({"repo": repo, "base": h.base, "allow": ["src/**"], "targets": ["src/a.rs"],
               "checks": [{"name": "t", "cmd": "true", "timeout_s": 5}], "trust_me": true})
        .to_string(),
    )
    .unwrap();
    let out = h.run(&[
        "task",
        "offer",
        "--type",
        "patch",
        "--brief",
        "x",
        "--input",
        input.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("trust_me"));
    let out = h.run(&[
        "task", "offer", "--type", "freeform", "--brief", "x", "--repo", &repo,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("for --type patch"));
}

fn accepted_task(h: &Home) -> (String, String) {
    let id = h.offer(CHECK);
    h.work(json!([
        {"declare": {"deliveries": []}},
        {"tool": "repo_write_file", "args": {"path": "src/client.rs", "text": "retry\n"}},
        {"final": "done"}
    ]));
    let s = h.show(&id);
    assert_eq!(s["task"]["state"], "completed", "{s:#}");
    (id, s["result"]["commit"].as_str().unwrap().to_string())
}

fn card(h: &Home) -> (String, String) {
    let cards = h.json(&["approvals"]);
    assert_eq!(cards.as_array().unwrap().len(), 1, "{cards}");
    assert_eq!(cards[0]["delivery"], "apply");
    // The card shows the diff it applies.
    let shown = cards[0]["payload"]["diff"].as_str().unwrap_or_default();
    assert!(
        shown.contains("src/client.rs") && shown.contains("+retry"),
        "{cards}"
    );
    assert!(
        cards[0]["reason"]
            .as_str()
            .unwrap()
            .contains("everyone who shares the branch"),
        "{cards}"
    );
    (
        cards[0]["run"].as_str().unwrap().to_string(),
        cards[0]["payload_hash"].as_str().unwrap().to_string(),
    )
}

#[test]
fn applying_to_the_real_branch_waits_for_approval_and_denied_leaves_it_unchanged() {
    let h = Home::new();
    let (id, commit) = accepted_task(&h);
    let out = h.run(&["task", "apply", &id, "--branch", "main"]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        git(&h.repo, &["rev-parse", "main"]),
        h.base,
        "nothing moves before approval"
    );
    let (run, _) = card(&h);
    let v = h.json(&["deny", &run, "apply"]);
    assert_eq!(
        git(&h.repo, &["rev-parse", "main"]),
        h.base,
        "denied: branch unchanged"
    );
    assert_eq!(
        std::fs::read_to_string(h.repo.join("src/client.rs")).unwrap(),
        "fn send() {}\n"
    );
    assert!(
        v["receipt"]
            .as_str()
            .unwrap()
            .contains("Withdrawn at your request"),
        "{v}"
    );

    // Offered again and approved: the branch fast-forwards to the host's commit.
    h.run(&["task", "apply", &id, "--branch", "main"]);
    let (run, hash) = card(&h);
    let out = h.run(&["approve", &run, "apply", "--hash", &hash]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(git(&h.repo, &["rev-parse", "main"]), commit);
    assert_eq!(
        std::fs::read_to_string(h.repo.join("src/client.rs")).unwrap(),
        "retry\n"
    );
    let receipt = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(receipt.contains("the branch reads back at"), "{receipt}");
}

#[test]
fn a_branch_that_moved_on_is_not_rewritten_by_an_approved_apply() {
    let h = Home::new();
    let (id, _) = accepted_task(&h);
    std::fs::write(h.repo.join("README.md"), "someone else\n").unwrap();
    git(&h.repo, &["commit", "--quiet", "-am", "moved on"]);
    let moved = git(&h.repo, &["rev-parse", "main"]);
    h.run(&["task", "apply", &id, "--branch", "main"]);
    let (run, hash) = card(&h);
    let out = h.run(&["--json", "approve", &run, "apply", "--hash", &hash]);
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(git(&h.repo, &["rev-parse", "main"]), moved);
    assert!(v.to_string().contains("rebase"), "{v}");
}

/// A plain-HTTP server on the host's loopback that answers 200 only to the real key, and
/// keeps every request head it saw.
fn key_server(key: &'static str) -> (u16, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(vec![]));
    let log = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            answer_key(&mut std::io::BufReader::new(c), key, &log);
        }
    });
    (port, seen)
}

/// One request on `s`: its head kept in `log`, answered 200 only when it carries `key`.
fn answer_key<S: std::io::Read + std::io::Write>(
    s: &mut std::io::BufReader<S>,
    key: &str,
    log: &std::sync::Mutex<Vec<String>>,
) {
    use std::io::BufRead;
    let mut head = String::new();
    loop {
        let mut line = String::new();
        if s.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
        head.push_str(&line);
    }
    let ok = head
        .to_ascii_lowercase()
        .contains(&format!("authorization: bearer {key}"));
    log.lock().unwrap().push(head);
    let (code, body) = if ok {
        ("200 OK", "ok")
    } else {
        ("401 No", "no")
    };
    let _ = write!(
        s.get_mut(),
        "HTTP/1.1 {code}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// The network tests' script (the fix, then done) and profile `net`: the server's port on
/// the allow-list, and `API_KEY` read from a key file holding `key`. Answers the script.
fn net_profile(h: &Home, port: u16, key: &str) -> PathBuf {
    let turns = json!([
        {"declare": {"deliveries": []}},
        {"tool": "repo_write_file", "args": {"path": "src/client.rs", "text": "fn send() { retry() }\n"}},
        {"final": "done"}
    ]);
    let script = h.root.join("script.json");
    std::fs::write(&script, turns.to_string()).unwrap();
    let key_file = h.root.join("api.key");
    std::fs::write(&key_file, format!("{key}\n")).unwrap();
    std::fs::create_dir_all(h.dir.join("profiles")).unwrap();
    std::fs::write(
        h.dir.join("profiles/net.json"),
        json!({
            "network": [format!("127.0.0.1:{port}")],
            "keys": [{"env": "API_KEY", "host": format!("127.0.0.1:{port}"), "secret": {"file": key_file}}],
        })
        .to_string(),
    )
    .unwrap();
    script
}

/// An HTTPS server on the host's loopback with a certificate from its own test CA (PEM,
/// returned), answering 200 only to the real key and keeping every request head it saw.
fn tls_key_server(
    key: &'static str,
) -> (u16, String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use std::io::Write;
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut p = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = p.self_signed(&ca_key).unwrap();
    let leaf_key = rcgen::KeyPair::generate().unwrap();
    let leaf = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&leaf_key, &ca, &ca_key)
        .unwrap();
    let config = std::sync::Arc::new(
        rustls::ServerConfig::builder_with_provider(std::sync::Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            rustls::pki_types::PrivateKeyDer::Pkcs8(leaf_key.serialize_der().into()),
        )
        .unwrap(),
    );
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = std::sync::Arc::new(std::sync::Mutex::new(vec![]));
    let log = seen.clone();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            let conn = rustls::ServerConnection::new(config.clone()).unwrap();
            let mut s = std::io::BufReader::new(rustls::StreamOwned::new(conn, c));
            answer_key(&mut s, key, &log);
            let s = s.get_mut();
            s.conn.send_close_notify();
            let _ = s.flush();
        }
    });
    (port, ca.pem(), seen)
}

/// Issue 38 #3: a command reaches an HTTPS API with a key it never sees. The proxy ends the
/// sandbox's TLS with the attempt's own authority (trusted inside through `SSL_CERT_FILE`
/// and the like), verifies the real server against the host's roots — here the test's own
/// CA, given to the worker as `SSL_CERT_FILE` — and swaps the placeholder on the way out. A
/// server the host cannot verify is refused, and the refusal named.
#[test]
fn an_https_api_gets_the_key_the_sandbox_never_sees_and_an_unverified_server_is_refused() {
    let h = Home::new();
    let (port, ca_pem, seen) = tls_key_server("real-key-456");
    let roots = h.root.join("test-ca.pem");
    std::fs::write(&roots, &ca_pem).unwrap();
    let check = format!(
        "grep -q retry src/client.rs && test \"$API_KEY\" = vouch-placeholder-API_KEY && curl -sf -H \"Authorization: Bearer $API_KEY\" https://127.0.0.1:{port}/"
    );
    let script = net_profile(&h, port, "real-key-456");
    let worker = |roots: Option<&Path>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_vouch"));
        c.arg("--home").arg(&h.dir);
        c.args(["worker", "--name", "w", "--script"]).arg(&script);
        c.args(["--drain", "--profile", "net"]);
        c.env_remove("VOUCH_DATABASE_URL")
            .env_remove("VOUCH_MODEL_URL");
        match roots {
            Some(r) => c.env("SSL_CERT_FILE", r),
            None => c.env_remove("SSL_CERT_FILE"),
        };
        let out = c.output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // The host trusts the server's CA: the check passes, the key went out only to it.
    let granted = h.offer(&check);
    worker(Some(&roots));
    let show = h.show(&granted);
    assert_eq!(show["task"]["state"], "completed", "{}", receipt(&show));
    let heads = seen.lock().unwrap().join("\n");
    assert!(
        heads.contains("Bearer real-key-456") && !heads.contains("placeholder"),
        "{heads}"
    );
    assert!(!show.to_string().contains("real-key-456"));
    // The host does not trust it (the system's roots only): refused before anything is sent.
    seen.lock().unwrap().clear();
    let refused = h.offer(&check);
    worker(None);
    let show = h.show(&refused);
    let r = receipt(&show);
    assert!(r.contains("Patch rejected"), "{r}");
    assert!(
        r.contains(&format!(
            "Refused by the sandbox: network: 127.0.0.1:{port} is not who it says"
        )),
        "{r}"
    );
    assert!(seen.lock().unwrap().iter().all(|h| !h.contains("real-key")));
}

#[test]
fn a_check_that_needs_the_network_is_refused_by_the_allow_list_and_passes_when_the_profile_grants_it(
) {
    let h = Home::new();
    let (port, seen) = key_server("real-key-123");
    // The check reaches the server through the sandbox's proxy, with the key it was given.
    let check = format!(
        "grep -q retry src/client.rs && curl -sf -H \"Authorization: Bearer $API_KEY\" http://127.0.0.1:{port}/ && test \"$API_KEY\" = vouch-placeholder-API_KEY"
    );
    let script = net_profile(&h, port, "real-key-123");
    let worker = |profile: &str| {
        let out = h.run(&[
            "worker",
            "--name",
            "w",
            "--script",
            script.to_str().unwrap(),
            "--drain",
            "--profile",
            profile,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    // Without a grant: the proxy refuses the host, and the receipt names the allow-list.
    let refused = h.offer(&check);
    worker("default");
    let show = h.show(&refused);
    let r = receipt(&show);
    assert!(r.contains("Patch rejected"), "{r}");
    assert!(
        r.contains(&format!(
            "Refused by the sandbox: network: 127.0.0.1:{port} is not on this runtime profile's network allow-list"
        )),
        "{r}"
    );
    assert!(seen.lock().unwrap().is_empty(), "the server was reached");
    // Granted: the same check passes, and the key reached the server only on the way out.
    let granted = h.offer(&check);
    worker("net");
    let show = h.show(&granted);
    assert_eq!(show["task"]["state"], "completed", "{}", receipt(&show));
    let r = receipt(&show);
    assert!(r.contains("Sandbox: bubblewrap under profile net"), "{r}");
    let heads = seen.lock().unwrap().join("\n");
    assert!(
        heads.contains("real-key-123") && !heads.contains("placeholder"),
        "{heads}"
    );
    assert!(!show.to_string().contains("real-key-123"));
}

#[test]
fn escapes_by_the_agents_own_commands_are_contained_and_the_receipt_names_each_refusal() {
    let h = Home::new();
    let (port, seen) = key_server("never");
    std::fs::create_dir_all(h.dir.join("profiles")).unwrap();
    std::fs::write(
        h.dir.join("profiles/tight.json"),
        json!({"limits": {"processes_max": 16}}).to_string(),
    )
    .unwrap();
    let id = h.offer(CHECK);
    // The worker's key file is in the home before the attempt runs.
    assert!(h.run(&["identity", "new", "w"]).status.success());
    let keys = h.dir.join("identities");
    let turns = json!([
        {"declare": {"deliveries": []}},
        {"tool": "repo_run", "args": {"argv": ["sh", "-c", format!("cat {k}/*; echo owned > {k}/w.key; echo owned > {r}/escaped.txt", k = keys.display(), r = h.root.display())]}},
        {"tool": "repo_run", "args": {"argv": ["sh", "-c", "while :; do sleep 1002 & done"]}},
        {"tool": "repo_run", "args": {"argv": ["sh", "-c", format!("curl -s http://127.0.0.1:{port}/")]}},
        {"tool": "repo_run", "args": {"argv": ["ln", "-s", "/etc/passwd", "src/p"]}},
        {"tool": "repo_write_file", "args": {"path": "../escaped.txt", "text": "x"}},
        {"tool": "repo_write_file", "args": {"path": "src/client.rs", "text": "fn send() { retry() }\n"}},
        {"final": "done"}
    ]);
    let script = h.root.join("script.json");
    std::fs::write(&script, turns.to_string()).unwrap();
    let key_before = std::fs::read_dir(&keys)
        .unwrap()
        .flatten()
        .map(|e| std::fs::read(e.path()).unwrap())
        .collect::<Vec<_>>();
    let out = h.run(&[
        "worker",
        "--name",
        "w",
        "--script",
        script.to_str().unwrap(),
        "--drain",
        "--profile",
        "tight",
        "--allow-command",
        "sh",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let show = h.show(&id);
    let r = receipt(&show);
    for refusal in [
        "Refused by the sandbox: `sh`: killed at ".to_string(),
        format!("Refused by the sandbox: network: 127.0.0.1:{port} is not on this runtime profile's network allow-list"),
        "Refused by the sandbox: `ln` is not a command this runtime profile allows".to_string(),
        "Refused by the sandbox: path `../escaped.txt` is outside the worktree".to_string(),
    ] {
        assert!(r.contains(&refusal), "{refusal} in\n{r}");
    }
    assert!(r.contains("Sandbox: bubblewrap under profile tight"), "{r}");
    assert!(r.contains("limits: 16 processes"), "{r}");
    // Each refusal is evidence in the run itself: the journaled result of the call that met
    // it — the proxy's refused connection with the command that made it (issue 38 #5).
    let run = show["attempts"][0]["run_id"].as_str().unwrap();
    let results: Vec<String> = h
        .json(&["journal", run])
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["kind"] == "tool_called")
        .map(|e| e["body"].to_string())
        .collect();
    for (call, refusal) in [
        (2, "killed at ".to_string()),
        (3, format!("refused by the sandbox: network: 127.0.0.1:{port} is not on this runtime profile's network allow-list")),
        (4, "`ln` is not a command this runtime profile allows".to_string()),
        (5, "path `../escaped.txt` is outside the worktree".to_string()),
    ] {
        assert!(results[call].contains(&refusal), "{refusal} in call {call}: {results:?}");
    }
    // The world: nothing outside the worktree changed, no key was read, the server unseen.
    assert!(!h.root.join("escaped.txt").exists());
    let key_after = std::fs::read_dir(&keys)
        .unwrap()
        .flatten()
        .map(|e| std::fs::read(e.path()).unwrap())
        .collect::<Vec<_>>();
    assert_eq!(key_before, key_after);
    assert!(
        !show.to_string().contains("secret_key"),
        "a key file was read"
    );
    assert!(seen.lock().unwrap().is_empty());
    assert_eq!(show["task"]["state"], "completed", "{r}");
}

#[test]
fn without_bubblewrap_nothing_runs_unconfined_and_the_doctor_says_why() {
    let h = Home::new();
    // A PATH with git, a shell and prlimit, but no bwrap.
    let bin = h.root.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for p in ["git", "sh", "prlimit", "grep", "cat"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {p}")])
            .output()
            .unwrap();
        let at = String::from_utf8_lossy(&found.stdout).trim().to_string();
        std::os::unix::fs::symlink(at, bin.join(p)).unwrap();
    }
    let marker = h.root.join("ran-unconfined");
    let id = h.offer(&format!(
        "touch {}; grep -q retry src/client.rs",
        marker.display()
    ));
    let script = h.root.join("script.json");
    std::fs::write(
        &script,
        json!([
            {"declare": {"deliveries": []}},
            {"tool": "repo_write_file", "args": {"path": "src/client.rs", "text": "retry\n"}},
            {"tool": "repo_run", "args": {"argv": ["sh", "-c", format!("touch {}", marker.display())]}},
            {"final": "done"}
        ])
        .to_string(),
    )
    .unwrap();
    let vouch = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_vouch"))
            .arg("--home")
            .arg(&h.dir)
            .args(args)
            .env("PATH", &bin)
            .env_remove("VOUCH_DATABASE_URL")
            .output()
            .unwrap()
    };
    let out = vouch(&[
        "worker",
        "--name",
        "w",
        "--script",
        script.to_str().unwrap(),
        "--drain",
        "--allow-command",
        "sh",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!marker.exists(), "a command ran without the sandbox");
    let r = receipt(&h.show(&id));
    assert!(r.contains("Patch rejected"), "{r}");
    assert!(
        r.contains("Refused by the sandbox: check `tests`: commands are refused: bubblewrap (`bwrap`) cannot be started"),
        "{r}"
    );
    let doctor: Value = serde_json::from_slice(&vouch(&["--json", "doctor"]).stdout).unwrap();
    assert_eq!(doctor["sandbox"]["available"], false, "{doctor}");
    assert!(doctor["sandbox"]["reason"]
        .as_str()
        .unwrap()
        .contains("install the `bubblewrap` package"));
    assert_eq!(h.json(&["doctor"])["sandbox"]["available"], true);
}
