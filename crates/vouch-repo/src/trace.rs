//! The append-only trace of file events in a worktree during an attempt (§14): a final diff
//! cannot show a write that was made and reverted, the trace can. Events come from the
//! kernel (inotify through the `notify` crate); the trace only grows while the attempt runs.
//!
//! Limits: events are kept up to `TRACE_EVENTS_MAX` (past that the trace says it overflowed);
//! a file written within a folder created in the same instant may be missed by a recursive
//! watch, which the trace cannot know — it reports what the kernel told it.

use notify::{EventKind, RecursiveMode, Watcher};
use serde::{Deserialize, Serialize};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Events kept at most.
pub const TRACE_EVENTS_MAX: usize = 100_000;
/// How long the trace waits for its own end marker to come through the kernel's queue.
const DRAIN_WAIT_MS: u64 = 10_000;
const MARKER: &str = ".vouch-trace-end";

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceEvent {
    pub seq: u64,
    /// `create`, `modify` or `remove`.
    pub kind: String,
    pub path: String,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TraceLog {
    pub events: Vec<TraceEvent>,
    pub overflowed: bool,
    /// The end marker never came through: events near the end may be missing.
    pub incomplete: bool,
}

impl TraceLog {
    /// Every path written, created or removed during the attempt.
    pub fn touched(&self) -> Vec<String> {
        self.events
            .iter()
            .map(|e| e.path.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect()
    }
}

#[derive(Default)]
struct Shared {
    log: TraceLog,
    seq: u64,
    marker_seen: bool,
}

pub struct Trace {
    root: PathBuf,
    watcher: notify::RecommendedWatcher,
    shared: Arc<Mutex<Shared>>,
}

fn relative(root: &Path, p: &Path) -> Option<String> {
    let rel = p.strip_prefix(root).ok()?;
    let s = rel.to_string_lossy().into_owned();
    // The worktree's `.git` file and anything git keeps there is not the agent's work.
    if s.is_empty() || s == ".git" || s.starts_with(".git/") {
        return None;
    }
    Some(s)
}

impl Trace {
    /// Start watching `root` (recursively).
    pub fn start(root: &Path) -> Result<Trace, String> {
        let root = root
            .canonicalize()
            .map_err(|e| format!("trace: cannot resolve {}: {e}", root.display()))?;
        let shared = Arc::new(Mutex::new(Shared::default()));
        let (r, s) = (root.clone(), shared.clone());
        let on_event = move |res: notify::Result<notify::Event>| {
            let Ok(ev) = res else { return };
            let kind = match ev.kind {
                // A folder made for a file is not a write; the file's own event follows.
                EventKind::Create(notify::event::CreateKind::Folder) => return,
                EventKind::Create(_) => "create",
                EventKind::Modify(_) => "modify",
                EventKind::Remove(_) => "remove",
                _ => return,
            };
            let mut g = s.lock().unwrap_or_else(|p| p.into_inner());
            for p in &ev.paths {
                let Some(rel) = relative(&r, p) else { continue };
                if rel == MARKER {
                    g.marker_seen = true;
                    continue;
                }
                if g.log.events.len() >= TRACE_EVENTS_MAX {
                    g.log.overflowed = true;
                    continue;
                }
                g.seq += 1;
                let seq = g.seq;
                g.log.events.push(TraceEvent {
                    seq,
                    kind: kind.into(),
                    path: rel,
                });
            }
        };
        // A link in the worktree is an entry, never a way into what it points at (a link to
        // `/` would otherwise watch the machine).
        let config = notify::Config::default().with_follow_symlinks(false);
        let mut watcher = notify::RecommendedWatcher::new(on_event, config)
            .map_err(|e| format!("trace: cannot start a file watcher: {e}"))?;
        watcher
            .watch(&root, RecursiveMode::Recursive)
            .map_err(|e| format!("trace: cannot watch {}: {e}", root.display()))?;
        Ok(Trace {
            root,
            watcher,
            shared,
        })
    }

    /// Stop: write an end marker, wait (bounded) until the kernel's queue has delivered it, so
    /// every earlier event is in, then stop watching.
    pub fn stop(self) -> TraceLog {
        let marker = self.root.join(MARKER);
        let wrote = std::fs::write(&marker, b"end").is_ok();
        let started = Instant::now();
        let mut incomplete = !wrote;
        loop {
            if !wrote {
                break;
            }
            if self
                .shared
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .marker_seen
            {
                break;
            }
            if started.elapsed() >= Duration::from_millis(DRAIN_WAIT_MS) {
                incomplete = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        let mut watcher = self.watcher;
        let _ = watcher.unwatch(&self.root);
        drop(watcher);
        let _ = std::fs::remove_file(&marker);
        let mut log =
            std::mem::take(&mut self.shared.lock().unwrap_or_else(|p| p.into_inner()).log);
        log.incomplete = incomplete;
        log
    }
}
