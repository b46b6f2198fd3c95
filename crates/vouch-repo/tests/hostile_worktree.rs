//! Nothing an agent writes in its worktree runs on the host (issue 38): a rewritten `.git`, a
//! filter, a hook, a file-system monitor, an `include.path` or a `core.sshCommand` does
//! nothing when the host observes the attempt, and no folder the sandbox binds follows a link
//! out of the worktree. Each marker file is outside the worktree, where the sandbox cannot
//! write: if it exists, the command ran on the host.
#![allow(clippy::unwrap_used)]

use std::path::{Path, PathBuf};
use std::process::Command;
use vouch_repo::workspace::Confinement;
use vouch_repo::{Attribution, CheckSpec, PatchInput, Verdict, Workspace};

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

/// A repository with `src/lib.rs` and `README.md`, and the base commit.
fn repo(extra: &[(&str, &str)]) -> (tempfile::TempDir, String) {
    let d = tempfile::tempdir().unwrap();
    let r = d.path().join("repo");
    std::fs::create_dir_all(r.join("src")).unwrap();
    git(&r, &["init", "--quiet", "-b", "main"]);
    git(&r, &["config", "user.name", "t"]);
    git(&r, &["config", "user.email", "t@localhost"]);
    std::fs::write(r.join("src/lib.rs"), "fn send() {}\n").unwrap();
    std::fs::write(r.join("README.md"), "readme\n").unwrap();
    for (path, body) in extra {
        let p = r.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, body).unwrap();
    }
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "--quiet", "-m", "base"]);
    let base = git(&r, &["rev-parse", "HEAD"]);
    (d, base)
}

fn workspace(d: &Path, base: &str, task: &str, writable: &[&str]) -> Workspace {
    let input = PatchInput {
        repo: d.join("repo").to_string_lossy().into_owned(),
        base: base.into(),
        allow: vec!["src/**".into(), "out/**".into()],
        targets: vec!["src/lib.rs".into()],
        checks: vec![CheckSpec {
            name: "tests".into(),
            cmd: "grep -q retry src/lib.rs".into(),
            timeout_s: 30,
        }],
        trace: false,
    };
    let mut ws = Workspace::create(&input, &d.join("wt"), task, 1).unwrap();
    ws.confine(Confinement {
        commands: vec!["sh".into()],
        writable: writable.iter().map(|s| s.to_string()).collect(),
        ..Default::default()
    });
    ws
}

fn sh(ws: &Workspace, script: &str) -> vouch_repo::exec::Ran {
    ws.run(&["sh".into(), "-c".into(), script.into()], 20)
        .unwrap()
}

/// Marker paths outside the worktree, one per way git could be made to run something.
fn markers(d: &Path) -> Vec<PathBuf> {
    ["filter", "fsmonitor", "hook", "include", "ssh"]
        .iter()
        .map(|m| d.join(format!("ran-{m}")))
        .collect()
}

fn none_ran(d: &Path) {
    for m in markers(d) {
        assert!(!m.exists(), "{} ran on the host", m.display());
    }
}

/// The agent's script: a git folder `evil/` borrowing the repository's objects, with a filter,
/// a monitor, hooks, an include and an ssh command that each touch a marker; `* filter=x`;
/// and the worktree's `.git` pointed at it.
fn poison(d: &Path) -> String {
    let m = markers(d);
    let objects = d.join("repo/.git/objects");
    format!(
        r#"set -e
mkdir -p evil/objects/info evil/refs evil/hooks
echo {objects} > evil/objects/info/alternates
cp "$(sed 's/^gitdir: //' .git)/HEAD" evil/HEAD 2>/dev/null || git rev-parse HEAD > evil/HEAD
cat > evil/config <<EOF
[core]
	repositoryformatversion = 0
	fsmonitor = "touch {fsm}; false"
	hooksPath = $PWD/evil/hooks
	sshCommand = "touch {ssh}"
[filter "x"]
	clean = "touch {filter}; cat"
	process = "touch {filter}"
[include]
	path = $PWD/evil/more
EOF
printf '[core]\n\tfsmonitor = "touch {include}; false"\n' > evil/more
for h in post-index-change pre-commit post-checkout reference-transaction; do
  printf '#!/bin/sh\ntouch {hook}\n' > evil/hooks/$h; chmod +x evil/hooks/$h
done
echo '* filter=x' > .gitattributes
echo 'fn send() {{ retry() }}' > src/lib.rs
echo "gitdir: $PWD/evil" > .git
"#,
        objects = objects.display(),
        fsm = m[1].display(),
        ssh = m[4].display(),
        filter = m[0].display(),
        include = m[3].display(),
        hook = m[2].display(),
    )
}

#[test]
fn a_rewritten_dot_git_with_filters_hooks_and_a_monitor_runs_nothing_on_the_host() {
    let (d, base) = repo(&[]);
    let ws = workspace(d.path(), &base, "h1", &[]);
    let ran = sh(&ws, &poison(d.path()));
    assert_eq!(ran.exit, Some(0), "{ran:?}");
    let (o, ws) = ws.observe();
    none_ran(d.path());
    // The host read the tree itself: the agent's edit is there, unfiltered.
    let vouch_repo::evaluate::DiffObs::Read { changes } = &o.diff else {
        panic!("the diff was not read: {:?}", o.diff);
    };
    let paths: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
    assert!(paths.contains(&"src/lib.rs"), "{paths:?}");
    assert!(paths.contains(&".gitattributes"), "{paths:?}");
    assert!(
        o.integrity.head_matches,
        "HEAD is read from the host's git folder"
    );
    assert_eq!(o.evaluation.attribution, Attribution::Unknown);
    assert!(o.commit.is_none());
    ws.remove().unwrap();
    none_ran(d.path());
}

#[test]
fn the_repositorys_own_monitor_hooks_and_filters_do_not_run_on_an_attempts_files() {
    let (d, base) = repo(&[(".gitattributes", "*.rs filter=x\n")]);
    let r = d.path().join("repo");
    let m = markers(d.path());
    let hooks = d.path().join("hooks");
    std::fs::create_dir_all(&hooks).unwrap();
    let hook = hooks.join("post-index-change");
    std::fs::write(&hook, format!("#!/bin/sh\ntouch {}\n", m[2].display())).unwrap();
    Command::new("chmod").arg("+x").arg(&hook).status().unwrap();
    for (k, v) in [
        ("core.fsmonitor", format!("touch {}; false", m[1].display())),
        ("core.hooksPath", hooks.display().to_string()),
        (
            "filter.x.clean",
            format!("touch {}; tr a-z A-Z", m[0].display()),
        ),
    ] {
        git(&r, &["config", k, &v]);
    }
    let ws = workspace(d.path(), &base, "h2", &[]);
    ws.write("src/lib.rs", b"fn send() { retry() }\n").unwrap();
    let (o, _) = ws.observe();
    none_ran(d.path());
    assert_eq!(
        o.evaluation.verdict,
        Verdict::Accepted,
        "{:?}",
        o.evaluation
    );
    // The committed blob is the file as written, not what the filter would have made of it.
    let commit = o.commit.unwrap();
    let blob = git(&r, &["show", &format!("{commit}:src/lib.rs")]);
    assert_eq!(blob, "fn send() { retry() }");
}

#[test]
fn a_writable_folder_that_is_a_link_out_of_the_worktree_is_refused() {
    let outside = tempfile::tempdir().unwrap();
    let up = outside.path().to_string_lossy().into_owned();
    let (d, base) = repo(&[]);
    let r = d.path().join("repo");
    std::os::unix::fs::symlink(&up, r.join("out")).unwrap();
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "--quiet", "-m", "a link"]);
    let base2 = git(&r, &["rev-parse", "HEAD"]);
    assert_ne!(base, base2);
    let ws = workspace(d.path(), &base2, "h3", &["out", "src"]);
    let ran = sh(
        &ws,
        "touch out/X; echo 'fn send() { retry() }' > src/lib.rs",
    );
    assert!(!outside.path().join("X").exists(), "the link was followed");
    let refused = ran.refused.clone().unwrap_or_default();
    assert!(
        refused.contains("`out`") && refused.contains("link"),
        "{ran:?}"
    );
    assert!(
        ws.refusals().iter().any(|r| r.contains("link")),
        "{:?}",
        ws.refusals()
    );
}

#[test]
fn a_writable_folder_under_a_link_is_refused_and_a_missing_one_is_made_inside() {
    let outside = tempfile::tempdir().unwrap();
    let (d, base) = repo(&[]);
    let r = d.path().join("repo");
    std::os::unix::fs::symlink(outside.path(), r.join("out")).unwrap();
    git(&r, &["add", "-A"]);
    git(&r, &["commit", "--quiet", "-m", "a link"]);
    let base2 = git(&r, &["rev-parse", "HEAD"]);
    let _ = base;
    let ws = workspace(d.path(), &base2, "h4", &["out/deep", "src/new"]);
    let ran = sh(&ws, "true");
    assert!(
        !outside.path().join("deep").exists(),
        "the link was followed"
    );
    assert!(ran.refused.unwrap_or_default().contains("link"));
    let ws = workspace(d.path(), &base2, "h5", &["src/new"]);
    let ran = sh(&ws, "echo x > src/new/f");
    assert_eq!(ran.exit, Some(0), "{ran:?}");
    assert!(ws.path().join("src/new/f").is_file());
}

/// Each call the filter refuses, by its x86_64 number with its arguments, and the errno it
/// must give: namespaces, mounts, tracing, keyrings, BPF, performance events, `clone3`.
#[cfg(target_arch = "x86_64")]
const REFUSED_CALLS: &str = r#"
import ctypes, threading, subprocess
libc = ctypes.CDLL(None, use_errno=True)
calls = {"unshare": (272, 0x10000000), "setns": (308, 0, 0), "mount": (165, 0, 0, 0, 0, 0),
         "ptrace": (101, 16, 1, 0, 0), "keyctl": (250, 0, 0), "bpf": (321, 0, 0, 0),
         "perf_event_open": (298, 0, 0, -1, -1, 0), "clone_newuser": (56, 0x10000000 | 17, 0, 0, 0, 0),
         "clone3": (435, 0, 0)}
for name, args in calls.items():
    r = libc.syscall(*args)
    print(name, r, ctypes.get_errno())
t = threading.Thread(target=lambda: None); t.start(); t.join()
print("threads", subprocess.run(["true"]).returncode)
"#;

#[cfg(target_arch = "x86_64")]
#[test]
fn the_system_call_filter_refuses_namespaces_mounts_tracing_keyrings_and_bpf() {
    let (d, base) = repo(&[]);
    let mut ws = workspace(d.path(), &base, "h6", &[]);
    let mut c = ws.confinement().clone();
    c.commands.push("python3".into());
    ws.confine(c);
    let ran = ws
        .run(&["python3".into(), "-c".into(), REFUSED_CALLS.into()], 20)
        .unwrap();
    assert_eq!(ran.exit, Some(0), "{ran:?}");
    let lines: Vec<&str> = ran.tail.lines().collect();
    for name in [
        "unshare",
        "setns",
        "mount",
        "ptrace",
        "keyctl",
        "bpf",
        "perf_event_open",
        "clone_newuser",
    ] {
        let want = format!("{name} -1 1");
        assert!(lines.contains(&want.as_str()), "{want} in {lines:?}");
    }
    assert!(lines.contains(&"clone3 -1 38"), "{lines:?}");
    // Threads and child processes still work (the C library falls back from clone3).
    assert!(lines.contains(&"threads 0"), "{lines:?}");
    let nested = sh(&ws, "unshare --user --map-root-user true; echo $?");
    assert!(nested.tail.trim().ends_with('1'), "{nested:?}");
}
