//! Patch attempts against real git repositories in temporary folders (issue 14's Tests).
#![allow(clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;
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
    let ws = Workspace::create(
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
    assert!(ws
        .run(&["touch".into(), "x".into()], &["cargo".into()], 5)
        .unwrap_err()
        .contains("not a command"));
    let ran = ws
        .run(&["cat".into(), "src/lib.rs".into()], &["cat".into()], 5)
        .unwrap();
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
