//! Patch attempts against real git repositories in temporary folders (issue 14's Tests).
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
use vouch_repo::workspace::Confinement;
use vouch_repo::{apply, Attribution, CheckSpec, PatchInput, Verdict, Workspace};

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

/// A repository with `src/lib.rs`, `src/util.rs`, `README.md` and a `check.sh` that passes when
/// `src/lib.rs` contains "retry".
fn repo() -> (tempfile::TempDir, String) {
    let d = tempfile::tempdir().unwrap();
    let r = d.path().join("repo");
    std::fs::create_dir_all(r.join("src")).unwrap();
    git(&r, &["init", "--quiet", "-b", "main"]);
    git(&r, &["config", "user.name", "t"]);
    git(&r, &["config", "user.email", "t@localhost"]);
    std::fs::write(r.join("src/lib.rs"), "fn send() {}\n").unwrap();
    std::fs::write(r.join("src/util.rs"), "fn util() {}\n").unwrap();
    std::fs::write(r.join("README.md"), "readme\n").unwrap();
    std::fs::write(r.join(".gitignore"), "target/\n").unwrap();
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "--quiet", "-m", "base"]);
    let base = git(&r, &["rev-parse", "HEAD"]);
    (d, base)
}

fn input(d: &Path, base: &str, check: &str, trace: bool) -> PatchInput {
    PatchInput {
        repo: d.join("repo").to_string_lossy().into_owned(),
        base: base.into(),
        allow: vec!["src/**".into()],
        targets: vec!["src/lib.rs".into()],
        checks: vec![CheckSpec {
            name: "tests".into(),
            cmd: check.into(),
            timeout_s: 30,
        }],
        trace,
    }
}

const GREP_RETRY: &str = "grep -q retry src/lib.rs";

#[test]
fn an_allowed_change_with_passing_checks_is_accepted_and_committed_on_the_attempt_branch() {
    let (d, base) = repo();
    let ws = Workspace::create(
        &input(d.path(), &base, GREP_RETRY, false),
        &d.path().join("wt"),
        "t1",
        1,
    )
    .unwrap();
    assert_eq!(ws.record.head, base);
    ws.write("src/lib.rs", b"fn send() { retry() }\n").unwrap();
    let (o, ws) = ws.observe();
    assert_eq!(
        o.evaluation.verdict,
        Verdict::Accepted,
        "{:?}",
        o.evaluation.reasons
    );
    assert_eq!(o.evaluation.changed, vec!["src/lib.rs"]);
    assert_eq!(o.evaluation.checks["tests"], Some(0));
    let commit = o.commit.clone().unwrap();
    let r = d.path().join("repo");
    assert_eq!(git(&r, &["rev-parse", "vouch/t1/1"]), commit);
    assert_eq!(
        git(&r, &["show", "vouch/t1/1:src/lib.rs"]),
        "fn send() { retry() }"
    );
    assert_eq!(git(&r, &["rev-parse", "vouch/t1/1^"]), base);
    // The real branch did not move.
    assert_eq!(git(&r, &["rev-parse", "main"]), base);
    ws.remove().unwrap();
    assert!(!Path::new(&o.workspace.path).exists());
}

#[test]
fn a_collateral_edit_is_rejected_naming_the_path() {
    let (d, base) = repo();
    let ws = Workspace::create(
        &input(d.path(), &base, GREP_RETRY, false),
        &d.path().join("wt"),
        "t2",
        1,
    )
    .unwrap();
    ws.write("src/lib.rs", b"retry\n").unwrap();
    ws.write("README.md", b"changed too\n").unwrap();
    let (o, _) = ws.observe();
    assert_eq!(o.evaluation.verdict, Verdict::Rejected);
    assert_eq!(o.evaluation.collateral, vec!["README.md"]);
    assert!(o
        .evaluation
        .reasons
        .iter()
        .any(|r| r.contains("`README.md`")));
    let lines = vouch_repo::receipt_lines(&o.evaluation);
    assert!(
        lines
            .iter()
            .any(|l| l == "Collateral (outside the allow-list): README.md"),
        "{lines:?}"
    );
}

#[test]
fn a_reported_write_with_an_empty_diff_is_no_effect() {
    let (d, base) = repo();
    let ws = Workspace::create(
        &input(d.path(), &base, GREP_RETRY, false),
        &d.path().join("wt"),
        "t3",
        1,
    )
    .unwrap();
    // "Implemented retry handling": the file is written back exactly as it was.
    ws.write("src/lib.rs", b"fn send() {}\n").unwrap();
    let (o, _) = ws.observe();
    assert!(o.evaluation.no_effect);
    assert!(o.evaluation.changed.is_empty());
    assert_eq!(o.evaluation.attribution, Attribution::Attributed);
    assert_eq!(o.evaluation.verdict, Verdict::Rejected);
    assert_eq!(o.commit, None, "nothing to commit");
    let lines = vouch_repo::receipt_lines(&o.evaluation);
    assert!(
        lines.iter().any(|l| l.starts_with("Changed: nothing")),
        "{lines:?}"
    );
}

#[test]
fn a_failing_check_is_rejected_with_its_exit_code_and_output_tail() {
    let (d, base) = repo();
    let ws = Workspace::create(
        &input(d.path(), &base, "echo boom; exit 3", false),
        &d.path().join("wt"),
        "t4",
        1,
    )
    .unwrap();
    ws.write("src/lib.rs", b"retry\n").unwrap();
    let (o, _) = ws.observe();
    assert_eq!(o.evaluation.verdict, Verdict::Rejected);
    assert_eq!(o.evaluation.checks["tests"], Some(3));
    assert_eq!(o.checks[0].tail, "boom\n");
    assert!(o
        .evaluation
        .reasons
        .contains(&"check `tests` exited 3".to_string()));
    // Rejected but attributed: the diff is still committed for the person to look at.
    assert!(o.commit.is_some());
}

#[test]
fn a_check_past_its_time_limit_is_killed_and_fails() {
    let (d, base) = repo();
    let mut i = input(d.path(), &base, "sleep 30", false);
    i.checks[0].timeout_s = 1;
    let ws = Workspace::create(&i, &d.path().join("wt"), "t5", 1).unwrap();
    ws.write("src/lib.rs", b"retry\n").unwrap();
    let (o, _) = ws.observe();
    assert!(o.checks[0].timed_out);
    assert_eq!(o.evaluation.checks["tests"], None);
    assert_eq!(o.evaluation.verdict, Verdict::Rejected);
}

#[test]
fn head_moved_by_another_writer_is_unknown_never_no_change() {
    let (d, base) = repo();
    let ws = Workspace::create(
        &input(d.path(), &base, GREP_RETRY, false),
        &d.path().join("wt"),
        "t6",
        1,
    )
    .unwrap();
    ws.write("src/lib.rs", b"retry\n").unwrap();
    // Another writer commits inside the worktree during the attempt.
    let p = ws.path().to_path_buf();
    git(
        &p,
        &[
            "-c",
            "user.name=x",
            "-c",
            "user.email=x@x",
            "commit",
            "--quiet",
            "-am",
            "someone else",
        ],
    );
    let (o, _) = ws.observe();
    assert!(!o.integrity.head_matches);
    assert_eq!(o.evaluation.attribution, Attribution::Unknown);
    assert_eq!(o.evaluation.verdict, Verdict::Rejected);
    assert!(
        o.checks.is_empty(),
        "checks are not run on a worktree the attempt lost"
    );
    assert_eq!(o.commit, None);
    let lines = vouch_repo::receipt_lines(&o.evaluation);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("unknown (not \"no change\")")),
        "{lines:?}"
    );
}

#[test]
fn a_lost_lease_or_a_replaced_worktree_is_unknown() {
    let (d, base) = repo();
    let ws = Workspace::create(
        &input(d.path(), &base, GREP_RETRY, false),
        &d.path().join("wt"),
        "t7",
        1,
    )
    .unwrap();
    let admin = git(ws.path(), &["rev-parse", "--absolute-git-dir"]);
    std::fs::write(Path::new(&admin).join("vouch-lease"), "another host").unwrap();
    ws.write("src/lib.rs", b"retry\n").unwrap();
    let (o, _) = ws.observe();
    assert!(!o.integrity.lease_held);
    assert_eq!(o.evaluation.attribution, Attribution::Unknown);

    let ws = Workspace::create(
        &input(d.path(), &base, GREP_RETRY, false),
        &d.path().join("wt"),
        "t7",
        2,
    )
    .unwrap();
    let r = d.path().join("repo");
    let p = ws.path().to_string_lossy().into_owned();
    git(&r, &["worktree", "remove", "--force", &p]);
    git(&r, &["worktree", "add", "--detach", "--quiet", &p, &base]);
    std::fs::write(ws.path().join("src/lib.rs"), "retry\n").unwrap();
    let (o, _) = ws.observe();
    assert!(!o.integrity.identity_matches);
    assert_eq!(o.evaluation.attribution, Attribution::Unknown);
    assert_eq!(o.evaluation.verdict, Verdict::Rejected);
}

#[test]
fn a_write_made_and_reverted_is_reported_as_transient_with_trace() {
    let (d, base) = repo();
    let ws = Workspace::create(
        &input(d.path(), &base, GREP_RETRY, true),
        &d.path().join("wt"),
        "t8",
        1,
    )
    .unwrap();
    ws.write("src/lib.rs", b"retry\n").unwrap();
    ws.write("src/util.rs", b"fn util() { panic!() }\n")
        .unwrap();
    ws.write("src/util.rs", b"fn util() {}\n").unwrap();
    let (o, _) = ws.observe();
    assert_eq!(o.evaluation.changed, vec!["src/lib.rs"]);
    assert_eq!(o.evaluation.transient, vec!["src/util.rs"]);
    let t = o.trace.unwrap();
    assert!(!t.incomplete);
    assert!(t.events.iter().any(|e| e.path == "src/util.rs"));
    assert_eq!(o.evaluation.verdict, Verdict::Accepted);
}

#[test]
fn paths_outside_the_worktree_are_refused() {
    let (d, base) = repo();
    let outside = d.path().join("secret.txt");
    std::fs::write(&outside, "secret").unwrap();
    let mut ws = Workspace::create(
        &input(d.path(), &base, GREP_RETRY, false),
        &d.path().join("wt"),
        "t9",
        1,
    )
    .unwrap();
    std::os::unix::fs::symlink(&outside, ws.path().join("src/link")).unwrap();
    for p in [
        "../secret.txt",
        "/etc/passwd",
        ".git/config",
        "src/../../secret.txt",
    ] {
        assert!(
            ws.read(p, 100)
                .unwrap_err()
                .contains("outside the worktree"),
            "{p}"
        );
        assert!(ws.write(p, b"x").is_err(), "{p}");
    }
    let e = ws.read("src/link", 100).unwrap_err();
    assert!(e.contains("outside the worktree"), "{e}");
    assert!(ws.write("src/link", b"x").is_err());
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "secret");
    assert_eq!(ws.list("src").unwrap(), vec!["lib.rs", "link", "util.rs"]);
    // Commands: only the profile's programs.
    ws.confine(Confinement {
        commands: vec!["cat".into()],
        ..Default::default()
    });
    assert!(ws
        .run(&["touch".into(), "x".into()], 5)
        .unwrap_err()
        .contains("not a command"));
    let ran = ws.run(&["cat".into(), "src/lib.rs".into()], 5).unwrap();
    assert_eq!((ran.exit, ran.tail.as_str()), (Some(0), "fn send() {}\n"));
}

#[test]
fn an_attempt_cannot_take_an_existing_worktree_or_branch_or_a_wrong_base() {
    let (d, base) = repo();
    let i = input(d.path(), &base, GREP_RETRY, false);
    let _ws = Workspace::create(&i, &d.path().join("wt"), "t10", 1).unwrap();
    assert!(Workspace::create(&i, &d.path().join("wt"), "t10", 1).is_err());
    let mut bad = i.clone();
    bad.base = "f".repeat(40);
    let e = Workspace::create(&bad, &d.path().join("wt"), "t10", 2)
        .unwrap_err()
        .to_string();
    assert!(e.contains("not a commit"), "{e}");
    assert!(Workspace::create(&i, &d.path().join("wt"), "../x", 1).is_err());
}

#[test]
fn apply_fast_forwards_the_branch_and_refuses_when_it_moved() {
    let (d, base) = repo();
    let r = d.path().join("repo");
    let ws = Workspace::create(
        &input(d.path(), &base, GREP_RETRY, false),
        &d.path().join("wt"),
        "t11",
        1,
    )
    .unwrap();
    ws.write("src/lib.rs", b"retry\n").unwrap();
    let (o, _) = ws.observe();
    let commit = o.commit.unwrap();
    // main is checked out in the repository: its work tree follows.
    assert_eq!(apply::fast_forward(&r, "main", &commit).unwrap(), commit);
    assert_eq!(
        std::fs::read_to_string(r.join("src/lib.rs")).unwrap(),
        "retry\n"
    );
    // A branch that moved on is not rewritten.
    git(&r, &["branch", "other", &base]);
    git(&r, &["checkout", "--quiet", "other"]);
    std::fs::write(r.join("README.md"), "moved\n").unwrap();
    git(&r, &["commit", "--quiet", "-am", "moved"]);
    let before = git(&r, &["rev-parse", "other"]);
    let e = apply::fast_forward(&r, "other", &commit).unwrap_err();
    assert!(matches!(e, apply::ApplyError::NotFastForward(_)), "{e}");
    assert_eq!(git(&r, &["rev-parse", "other"]), before);
}

// ---- Escapes (issue 25): each named after the escape; each contained, and named. ----

/// A worktree whose agent may run `sh` (and `bash`), confined as a patch attempt is.
fn confined(d: &Path, base: &str, task: &str, allow: &[&str]) -> Workspace {
    let mut i = input(d, base, "true", false);
    i.allow = allow.iter().map(|s| s.to_string()).collect();
    let mut ws = Workspace::create(&i, &d.join("wt"), task, 1).unwrap();
    ws.confine(Confinement {
        commands: vec!["sh".into(), "bash".into()],
        ..Default::default()
    });
    ws
}

fn sh(ws: &Workspace, script: &str) -> vouch_repo::exec::Ran {
    ws.run(&["sh".into(), "-c".into(), script.into()], 20)
        .unwrap()
}

#[test]
fn escape_write_outside_the_worktree() {
    let (d, base) = repo();
    let ws = confined(d.path(), &base, "e1", &["src/**"]);
    let outside = d.path().join("outside.txt");
    let target = d.path().join("repo/src/lib.rs");
    let ran = sh(
        &ws,
        &format!(
            "echo owned > {o}; echo owned > {t}; echo owned > /etc/owned; echo owned > /usr/owned; echo ok > src/lib.rs",
            o = outside.display(),
            t = target.display()
        ),
    );
    // The command ran (its last write, inside, worked) and nothing outside changed.
    assert_eq!(ran.exit, Some(0), "{ran:?}");
    assert!(!outside.exists());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "fn send() {}\n");
    assert!(!Path::new("/etc/owned").exists() && !Path::new("/usr/owned").exists());
    assert_eq!(
        std::fs::read_to_string(ws.path().join("src/lib.rs")).unwrap(),
        "ok\n"
    );
}

#[test]
fn escape_read_the_vouch_home_and_its_keys() {
    let (d, base) = repo();
    // The worktrees folder sits in the home, beside the identities.
    let home = d.path().join("home");
    std::fs::create_dir_all(home.join("identities")).unwrap();
    std::fs::write(home.join("identities/w.key"), "SECRET-KEY-MATERIAL").unwrap();
    std::env::set_var("VOUCH_ESCAPE_TEST_KEY", "SECRET-FROM-ENV");
    let i = input(d.path(), &base, "true", false);
    let mut ws = Workspace::create(&i, &home.join("worktrees"), "e2", 1).unwrap();
    ws.confine(Confinement {
        commands: vec!["sh".into()],
        ..Default::default()
    });
    let ran = sh(
        &ws,
        &format!(
            "cat {k} ../../identities/w.key; ls {h} ~ /root; env",
            k = home.join("identities/w.key").display(),
            h = home.display()
        ),
    );
    assert!(!ran.tail.contains("SECRET"), "{}", ran.tail);
    assert!(ran.tail.contains("PATH="), "{}", ran.tail);
    let names: Vec<&str> = ran
        .tail
        .lines()
        .filter_map(|l| l.split_once('=').map(|(k, _)| k))
        .filter(|k| k.chars().all(|c| c.is_ascii_uppercase() || c == '_'))
        .collect();
    for n in names {
        assert!(
            ["PATH", "HOME", "TMPDIR", "LANG", "PWD", "SHLVL", "_", "OLDPWD"].contains(&n),
            "{n} leaked into the sandbox: {}",
            ran.tail
        );
    }
}

#[test]
fn escape_reach_a_loopback_server_not_on_the_allow_list() {
    let (d, base) = repo();
    let ws = confined(d.path(), &base, "e3", &["src/**"]);
    let server = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    server.set_nonblocking(true).unwrap();
    let port = server.local_addr().unwrap().port();
    let ran = ws
        .run(
            &[
                "bash".into(),
                "-c".into(),
                format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo CONNECTED"),
            ],
            20,
        )
        .unwrap();
    assert_ne!(ran.exit, Some(0), "{ran:?}");
    assert!(!ran.tail.contains("CONNECTED"));
    // The host's server never saw a connection.
    assert_eq!(
        server.accept().unwrap_err().kind(),
        std::io::ErrorKind::WouldBlock
    );
}

#[test]
fn escape_fork_bomb() {
    let (d, base) = repo();
    let mut ws = confined(d.path(), &base, "e4", &["src/**"]);
    let mut c = ws.confinement().clone();
    c.limits.processes_max = 16;
    ws.confine(c);
    // Forks without end: every child sleeps, the loop never waits.
    let ran = sh(&ws, "while :; do sleep 1000 & done");
    assert!(!ran.timed_out, "{ran:?}");
    let refused = ran.refused.unwrap();
    assert!(refused.contains("processes"), "{refused}");
    assert!(ws.refusals().iter().any(|r| r.contains("the limit is 16")));
    assert!(gone("sleep 1000"));
}

/// Whether no process on the machine runs `cmdline` (waiting, bounded, for the kernel to
/// finish ending a PID namespace).
fn gone(cmdline: &str) -> bool {
    let running = || {
        std::fs::read_dir("/proc").unwrap().flatten().any(|e| {
            std::fs::read(e.path().join("cmdline"))
                .map(|c| String::from_utf8_lossy(&c).replace('\0', " ").trim() == cmdline)
                .unwrap_or(false)
        })
    };
    (0..250).any(|_| {
        let r = !running();
        if !r {
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        r
    })
}

#[test]
fn escape_a_command_that_outlives_its_limit() {
    let (d, base) = repo();
    let ws = confined(d.path(), &base, "e5", &["src/**"]);
    // A child in its own session, detached from the shell, would outlive a group kill.
    let ran = ws
        .run(
            &[
                "sh".into(),
                "-c".into(),
                "setsid sleep 1001 & sleep 1001".into(),
            ],
            1,
        )
        .unwrap();
    assert!(ran.timed_out);
    assert!(ran.refused.unwrap().contains("time limit"));
    assert!(gone("sleep 1001"));
}

#[test]
fn escape_symlink_out_of_the_repository() {
    let (d, base) = repo();
    let ws = confined(d.path(), &base, "e6", &["src/**"]);
    let ran = sh(
        &ws,
        "ln -s /etc/passwd src/passwd && ln -s ../../outside src/up && ln -s util.rs src/ok",
    );
    assert_eq!(ran.exit, Some(0), "{ran:?}");
    let (o, _) = ws.observe();
    let e = &o.evaluation;
    assert_eq!(e.verdict, Verdict::Rejected);
    assert_eq!(e.collateral, vec!["src/passwd", "src/up"]);
    assert!(e
        .tricks
        .iter()
        .any(|t| t.contains("`src/passwd` is a symlink to `/etc/passwd`")));
    let lines = vouch_repo::receipt_lines(e).join("\n");
    assert!(
        lines.contains("Trick (collateral, never applied)"),
        "{lines}"
    );
}

#[test]
fn escape_hard_link_to_a_file_outside() {
    let (d, base) = repo();
    let ws = confined(d.path(), &base, "e7", &["src/**"]);
    let git_dir = d.path().join("repo/.git/config");
    let ran = sh(
        &ws,
        &format!(
            "ln {g} src/cfg; ln /etc/hostname src/host; ln /etc/passwd /tmp/p && cp /tmp/p src/copy; ls src",
            g = git_dir.display()
        ),
    );
    // Across mounts a hard link is refused by the kernel; what was copied is a new file.
    assert!(!ws.path().join("src/cfg").exists(), "{ran:?}");
    assert!(!ws.path().join("src/host").exists(), "{ran:?}");
    let (o, _) = ws.observe();
    assert!(o.evaluation.tricks.is_empty(), "{:?}", o.evaluation);
}

#[test]
fn escape_dot_dot_in_paths() {
    let (d, base) = repo();
    let ws = confined(d.path(), &base, "e8", &["src/**"]);
    let ran = sh(
        &ws,
        "echo x > ../../escaped.txt; echo x > src/../../escaped.txt; ls -a ../..",
    );
    assert!(!d.path().join("escaped.txt").exists(), "{ran:?}");
    assert!(!d.path().join("wt/escaped.txt").exists());
    // The host's tools refuse it by name.
    assert!(ws.write("../escaped.txt", b"x").is_err());
    assert!(ws
        .refusals()
        .iter()
        .any(|r| r.contains("outside the worktree")));
}

#[test]
fn escape_mode_change_submodule_and_dot_git_are_collateral() {
    let (d, base) = repo();
    let ws = confined(d.path(), &base, "e9", &["src/**", ".gitmodules"]);
    let ran = sh(
        &ws,
        "chmod +x src/util.rs && mkdir src/sub && echo '[submodule]' > .gitmodules",
    );
    assert_eq!(ran.exit, Some(0), "{ran:?}");
    // A nested repository (what `git init` in the worktree makes).
    let sub = ws.path().join("src/sub");
    git(&sub, &["init", "--quiet"]);
    std::fs::write(sub.join("f"), "x").unwrap();
    git(
        &sub,
        &["-c", "user.name=t", "-c", "user.email=t@l", "add", "f"],
    );
    git(
        &sub,
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@l",
            "commit",
            "--quiet",
            "-m",
            "s",
        ],
    );
    let (o, _) = ws.observe();
    let e = &o.evaluation;
    assert_eq!(e.verdict, Verdict::Rejected);
    assert_eq!(e.collateral, vec![".gitmodules", "src/sub", "src/util.rs"]);
    assert_eq!(e.tricks.len(), 3, "{:?}", e.tricks);
}

#[test]
fn escape_rewrite_dot_git() {
    let (d, base) = repo();
    let ws = confined(d.path(), &base, "e10", &["src/**"]);
    let ran = sh(&ws, "echo 'gitdir: /tmp' > .git");
    assert_eq!(ran.exit, Some(0), "{ran:?}");
    let (o, _) = ws.observe();
    let e = &o.evaluation;
    assert_eq!(e.attribution, Attribution::Unknown);
    assert!(e.collateral.contains(&".git".to_string()));
    assert!(o.commit.is_none());
}

#[test]
fn a_check_runs_confined_too() {
    let (d, base) = repo();
    let outside = d.path().join("from-check.txt");
    let i = input(
        d.path(),
        &base,
        &format!("echo x > {}; grep -q retry src/lib.rs", outside.display()),
        false,
    );
    let ws = Workspace::create(&i, &d.path().join("wt"), "e11", 1).unwrap();
    ws.write("src/lib.rs", b"retry\n").unwrap();
    let (o, _) = ws.observe();
    assert_eq!(
        o.evaluation.verdict,
        Verdict::Accepted,
        "{:?}",
        o.evaluation
    );
    assert!(!outside.exists());
}

#[test]
fn escape_output_flood() {
    let (d, base) = repo();
    let mut ws = confined(d.path(), &base, "e12", &["src/**"]);
    let mut c = ws.confinement().clone();
    c.limits.output_bytes_max = 1 << 20;
    ws.confine(c);
    let ran = sh(
        &ws,
        "head -c 3000000 /dev/zero > src/big; head -c 3000000 /dev/zero",
    );
    let refused = ran.refused.clone().unwrap_or_default();
    assert!(refused.contains("output limit"), "{ran:?}");
    let big = std::fs::metadata(ws.path().join("src/big"))
        .map(|m| m.len())
        .unwrap_or(0);
    assert!(big <= 1 << 20, "{big}");
}

#[test]
fn escape_write_outside_the_profiles_writable_folders() {
    let (d, base) = repo();
    let mut ws = confined(d.path(), &base, "e13", &["src/**", "README.md"]);
    let mut c = ws.confinement().clone();
    c.writable = vec!["src".into()];
    ws.confine(c);
    let ran = sh(&ws, "echo x > README.md; echo y > src/util.rs");
    assert!(ran.tail.contains("Read-only file system"), "{ran:?}");
    assert_eq!(
        std::fs::read_to_string(ws.path().join("README.md")).unwrap(),
        "readme\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.path().join("src/util.rs")).unwrap(),
        "y\n"
    );
    let e = ws.write("README.md", b"x").unwrap_err();
    assert!(
        e.contains("not in a folder this runtime profile makes writable"),
        "{e}"
    );
    assert!(ws.write("src/lib.rs", b"retry\n").is_ok());
}
