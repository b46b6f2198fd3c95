//! Regression tests for issue 11 #4: a name given to the folder provider or `read_file`
//! could reach outside the folder root (a symlink inside the root let `save` write outside
//! it). Every test checks the world outside the root, not only the reply.

use std::os::unix::fs::symlink;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use vouch_adapters::folder::FolderProvider;
use vouch_core::{sha256_hex, Destination, DestinationKind, Verb};
use vouch_runtime::fsroot::{FolderRoot, RootError};
use vouch_runtime::provider::{AttemptReply, AttemptRequest, Provider};

fn req(verb: Verb, address: &str, text: &str) -> AttemptRequest {
    let payload = serde_json::json!({ "text": text });
    AttemptRequest {
        run_id: "run-1".into(),
        delivery: "d1".into(),
        verb,
        destination: Destination::new(DestinationKind::Folder, address),
        payload_hash: sha256_hex(text.as_bytes()),
        payload,
        idempotency_key: None,
    }
}

fn is_rejected(reply: &AttemptReply) -> bool {
    matches!(reply, AttemptReply::Rejected { .. })
}

/// Every file beneath `dir`, recursively (symlinks listed, not followed).
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir").flatten() {
            let ft = e.file_type().expect("file type");
            if ft.is_dir() {
                stack.push(e.path());
            } else {
                out.push(e.path().display().to_string());
            }
        }
    }
    out
}

struct World {
    _tmp: tempfile::TempDir,
    root: std::path::PathBuf,
    outside: std::path::PathBuf,
}

fn world() -> World {
    let tmp = tempfile::tempdir().expect("tempdir");
    let root = tmp.path().join("root");
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&root).expect("root");
    std::fs::create_dir_all(&outside).expect("outside");
    World {
        _tmp: tmp,
        root,
        outside,
    }
}

#[test]
fn a_symlink_at_the_destination_is_refused_like_an_escape() {
    let w = world();
    let target = w.outside.join("victim.txt");
    std::fs::write(&target, "original").expect("victim");
    symlink(&target, w.root.join("link.txt")).expect("symlink");
    std::fs::write(w.root.join("inside.txt"), "inside").expect("inside");
    symlink(w.root.join("inside.txt"), w.root.join("near.txt")).expect("symlink");
    let p = FolderProvider::new(&w.root);
    for name in ["link.txt", "near.txt"] {
        let reply = p.attempt(&req(Verb::Save, name, "pwned"));
        match &reply {
            AttemptReply::Rejected { reason } => assert!(reason.contains(name), "{reason}"),
            other => panic!("{name}: {other:?}"),
        }
        // Neither written through nor replaced: the link is still a link.
        let meta = std::fs::symlink_metadata(w.root.join(name)).expect("meta");
        assert!(meta.file_type().is_symlink(), "{name} was replaced");
    }
    assert_eq!(std::fs::read_to_string(&target).expect("read"), "original");
    assert_eq!(
        std::fs::read_to_string(w.root.join("inside.txt")).expect("read"),
        "inside"
    );
    assert!(matches!(
        FolderRoot::new(&w.root).write_atomic("link.txt", b"x"),
        Err(RootError::Escapes { .. })
    ));
}

#[test]
fn save_into_symlinked_parent_dir_is_refused_and_writes_nothing_outside() {
    let w = world();
    symlink(&w.outside, w.root.join("sub")).expect("symlink");
    let p = FolderProvider::new(&w.root);
    let reply = p.attempt(&req(Verb::Save, "sub/new.txt", "pwned"));
    assert!(is_rejected(&reply), "{reply:?}");
    assert!(
        files_under(&w.outside).is_empty(),
        "{:?}",
        files_under(&w.outside)
    );
}

#[test]
fn dotdot_and_absolute_names_are_refused_as_outside() {
    let w = world();
    let p = FolderProvider::new(&w.root);
    let abs = w.outside.join("abs.txt").display().to_string();
    for name in [
        "../outside/x.txt",
        "a/../../outside/y.txt",
        abs.as_str(),
        "",
    ] {
        let reply = p.attempt(&req(Verb::Save, name, "pwned"));
        match &reply {
            AttemptReply::Rejected { reason } => {
                assert!(
                    reason.contains("outside the folder root"),
                    "{name}: {reason}"
                )
            }
            other => panic!("{name}: {other:?}"),
        }
    }
    assert!(files_under(&w.outside).is_empty());
    let root = FolderRoot::new(&w.root);
    assert!(matches!(
        root.read("../outside/x.txt", 16),
        Err(RootError::Outside { .. })
    ));
}

#[test]
fn delete_through_symlinked_parent_leaves_the_outside_file() {
    let w = world();
    let target = w.outside.join("keep.txt");
    std::fs::write(&target, "keep").expect("keep");
    symlink(&w.outside, w.root.join("sub")).expect("symlink");
    let p = FolderProvider::new(&w.root);
    let reply = p.attempt(&req(Verb::Delete, "sub/keep.txt", ""));
    assert!(is_rejected(&reply), "{reply:?}");
    assert_eq!(std::fs::read_to_string(&target).expect("read"), "keep");
}

#[test]
fn read_through_symlink_to_outside_is_refused() {
    let w = world();
    std::fs::write(w.outside.join("secret.txt"), "secret").expect("secret");
    symlink(w.outside.join("secret.txt"), w.root.join("s.txt")).expect("symlink");
    symlink(&w.outside, w.root.join("dir")).expect("symlink");
    let root = FolderRoot::new(&w.root);
    for name in ["s.txt", "dir/secret.txt"] {
        match root.read(name, 1024) {
            Err(RootError::Escapes { .. }) => {}
            other => panic!("{name}: {other:?}"),
        }
    }
    // A name inside the root still reads.
    std::fs::write(w.root.join("ok.txt"), "fine").expect("ok");
    assert_eq!(root.read("ok.txt", 1024).expect("read"), b"fine");
    // Read-back after a save observes the bytes written.
    let p = FolderProvider::new(&w.root);
    let r = req(Verb::Save, "deep/er/note.txt", "hello");
    assert!(!is_rejected(&p.attempt(&r)));
    assert_eq!(root.read("deep/er/note.txt", 1024).expect("read"), b"hello");
    assert!(matches!(
        p.observe(&r, None),
        vouch_runtime::provider::Observation::Present { .. }
    ));
}

#[test]
fn symlink_swapped_in_between_check_and_write_never_writes_outside() {
    let w = world();
    let sub = w.root.join("sub");
    let stop = Arc::new(AtomicBool::new(false));
    let flipper = {
        let (sub, outside, stop) = (sub.clone(), w.outside.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut flips = 0u64;
            while !stop.load(Ordering::Relaxed) {
                // A real directory, then a symlink to outside, over and over.
                let _ = std::fs::remove_file(&sub);
                let _ = std::fs::remove_dir_all(&sub);
                let _ = std::fs::create_dir(&sub);
                let _ = std::fs::remove_dir_all(&sub);
                let _ = symlink(&outside, &sub);
                flips += 1;
            }
            flips
        })
    };
    let p = FolderProvider::new(&w.root);
    let mut accepted = 0;
    for i in 0..400 {
        let reply = p.attempt(&req(Verb::Save, &format!("sub/f{i}.txt"), "pwned"));
        if !is_rejected(&reply) {
            accepted += 1;
        }
        let _ = p.attempt(&req(Verb::Delete, "sub/keep.txt", ""));
    }
    stop.store(true, Ordering::Relaxed);
    let flips = flipper.join().expect("flipper");
    assert!(flips > 0);
    assert!(
        files_under(&w.outside).is_empty(),
        "written outside the root: {:?} ({accepted} saves accepted)",
        files_under(&w.outside)
    );
}
