//! `vouch demo`: the product in under a minute, on the embedded store, with the scripted
//! model, in a fresh temporary home. Every step is real: files on disk, a real HTTP
//! server on loopback, a real process killed halfway.

use crate::home;
use anyhow::{anyhow, bail, Context as _, Result};
use serde_json::{json, Value};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use vouch_core::{Outcome, TriggerKind};
use vouch_runtime::host::{Progress, RunEnd};
use vouch_runtime::RunSpec;
use vouch_store::CardState;

fn progress() -> Progress {
    Arc::new(|line: &str| houtln!("    {line}"))
}

fn section(n: usize, title: &str) {
    houtln!("\n━━ {n}/7 {title}");
}

fn spec(title: &str, turns: Value) -> RunSpec {
    RunSpec {
        trigger: TriggerKind::Interactive,
        title: title.to_string(),
        presence: None,
        quiet: false,
        model: vouch_runtime::host::ModelSpec::script_of(turns),
        scope: None,
    }
}

fn indent(text: &str) -> String {
    text.lines().map(|l| format!("    │ {l}\n")).collect()
}

/// A loopback HTTP server that answers every request with 503, counting requests.
fn failing_webhook() -> Result<(String, Arc<std::sync::atomic::AtomicU32>)> {
    let listener =
        TcpListener::bind("127.0.0.1:0").context("bind a loopback port for the demo webhook")?;
    let addr = listener.local_addr()?;
    let count = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let c = count.clone();
    std::thread::spawn(move || {
        for mut stream in listener.incoming().flatten() {
            let mut buf = [0u8; 8192];
            let _ = stream.read(&mut buf);
            c.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            let body = "{\"error\":\"team channel is over capacity\"}";
            let _ = write!(stream, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}", body.len());
        }
    });
    Ok((format!("http://{addr}/hooks/team"), count))
}

/// Removes the demo's temporary home when dropped, unless the person asked to keep it.
struct TempHome {
    dir: PathBuf,
    keep: bool,
}

impl Drop for TempHome {
    fn drop(&mut self) {
        if !self.keep {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

pub fn run(keep: bool) -> Result<i32> {
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("vouch-demo-{}-{stamp}", std::process::id()));
    // The temporary home goes on every way out: a normal end (`finish`), an error returned
    // from any step (the guard's Drop), or Ctrl-C (the handler).
    let _guard = TempHome {
        dir: dir.clone(),
        keep,
    };
    if !keep {
        let d = dir.clone();
        let _ = ctrlc::set_handler(move || {
            // The stories keep writing into the home while this handler runs (on its own
            // thread): a removal can race a file being created, and a file saved just after
            // it brings the home's folders back. Remove until the home has stayed gone for
            // three looks in a row, however long a loaded machine makes that (up to 20 s).
            let mut gone = 0;
            for _ in 0..2_000 {
                let _ = std::fs::remove_dir_all(&d);
                gone = if d.exists() { 0 } else { gone + 1 };
                if gone == 3 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            std::process::exit(130);
        });
    }
    home::init(&dir)?;
    let files = home::folder_root(&dir);
    std::fs::create_dir_all(files.join("sources"))?;
    std::fs::write(
        files.join("sources/notes.md"),
        "Q4: revenue up 12%, churn down to 2.1%, two enterprise deals slipped to January.\n",
    )?;
    houtln!("vouch demo — a fresh home at {}", dir.display());
    houtln!(
        "Seven short stories, each a real run with a scripted model (files on disk, a real HTTP"
    );
    houtln!("server and mail server on loopback), a few seconds in all:");
    houtln!("  1. a document is researched and saved; the receipt follows the file on disk");
    houtln!(
        "  2. the model says \"Done — sent\" while the server refused: the receipt says it failed"
    );
    houtln!("  3. the process is killed on purpose halfway; start-up reconciliation and `resume` finish it");
    houtln!(
        "  4. you approve one e-mail text; the model's regenerated text cannot be sent instead"
    );
    houtln!(
        "  5. a daily schedule: yesterday's slot, missed while the machine was off, is reported"
    );
    houtln!("  6. a patch task: the model says \"implemented retry handling\"; git shows nothing changed");
    houtln!("  7. the task board: a worker is killed mid-task, another finishes it; the measures");
    houtln!("Watch what the model says, and what the receipt says.");
    let mut ok = true;

    // 1. Research, save, end on the tool call with no final text.
    section(
        1,
        "Research, then save a document. The model ends on the tool call, with no final text.",
    );
    let host = home::host(&dir, Some(progress()))?;
    let turns = json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Reports/q4-brief.md"}}]}},
        {"tool": "read_file", "args": {"path": "sources/notes.md"}},
        {"tool": "search_news", "args": {"q": "enterprise churn Q4"}},
        {"deliver": "d1", "payload": {"text": "# Q4 brief\n\nRevenue up 12%; churn 2.1%; two deals moved to January.\n"}}
    ]);
    let (id1, end1) = host
        .start(&spec(
            "Research our Q4 numbers and save a brief to Reports/",
            turns,
        ))
        .map_err(|e| anyhow!("{e}"))?;
    hout!("{}", indent(&host.receipt(&id1)?.unwrap_or_default()));
    let on_disk = std::fs::read_to_string(files.join("Reports/q4-brief.md")).unwrap_or_default();
    houtln!(
        "    The file is really there: {} bytes in Reports/q4-brief.md.",
        on_disk.len()
    );
    ok &=
        end1 == RunEnd::Ended {
            outcome: Outcome::Succeeded,
        } && on_disk.starts_with("# Q4 brief");

    // 2. The model says "Done — sent" while the delivery failed.
    section(2, "Post to the team channel. The person approves; the server refuses; the model says \"Done — sent\".");
    let (url, hits) = failing_webhook()?;
    let turns = json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "webhook", "address": url}}]}},
        {"deliver": "d1", "payload": {"text": "Q4 brief is in Reports/q4-brief.md"}},
        {"final": "Done — sent to the team channel."}
    ]);
    let (id2, end2) = host
        .start(&spec("Tell the team channel the Q4 brief is ready", turns))
        .map_err(|e| anyhow!("{e}"))?;
    let card = host
        .run_cards(&id2)?
        .into_iter()
        .find(|c| c.state == CardState::Open);
    let Some(card) = card else {
        bail!("demo run 2 should wait for approval, but it is {end2:?}")
    };
    houtln!("    The person approves the exact payload (hash {}…), as `vouch approve {id2} d1 --hash …` would.", &card.payload_hash[..12]);
    host.approve(&id2, "d1", &card.payload_hash)
        .map_err(|e| anyhow!("{e}"))?;
    hout!("{}", indent(&host.receipt(&id2)?.unwrap_or_default()));
    let rec2 = host
        .run_record(&id2)?
        .ok_or_else(|| anyhow!("run 2 missing"))?;
    houtln!(
        "    The server saw {} request(s); the receipt follows its answer, not the model's words.",
        hits.load(std::sync::atomic::Ordering::SeqCst)
    );
    ok &= rec2.outcome == Some(Outcome::Failed);

    // 3. Killed halfway, reconciled at start-up, resumed.
    section(
        3,
        "Save two reports; the demo kills the process on purpose right after the first is verified.",
    );
    let script = dir.join("two-reports.json");
    std::fs::write(
        &script,
        serde_json::to_string_pretty(&json!([
            {"declare": {"deliveries": [
                {"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Reports/q4-detail.md"}},
                {"id": "d2", "verb": "save", "destination": {"kind": "folder", "address": "Reports/q4-summary.md"}}]}},
            {"deliver": "d1", "payload": {"text": "# Q4 detail\n"}},
            {"deliver": "d2", "payload": {"text": "# Q4 summary\n"}},
            {"final": "Both reports saved."}
        ]))?,
    )?;
    let exe = std::env::current_exe().context("find the vouch executable")?;
    let status = std::process::Command::new(&exe)
        .args(["--home"])
        .arg(&dir)
        .args(["run", "Write the Q4 detail and summary reports", "--script"])
        .arg(&script)
        .env("VOUCH_CRASH_AFTER", "evidence:d1")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .context("start the child vouch process")?;
    houtln!(
        "    The child process died ({}) — deliberately, to show a crash mid-run.",
        describe_status(&status)
    );
    let host = home::host(&dir, Some(progress()))?;
    let ended = host.boot().map_err(|e| anyhow!("{e}"))?;
    let Some(id3) = ended.first().cloned() else {
        bail!("start-up reconciliation found no interrupted run")
    };
    houtln!("    Start-up reconciliation ended run {id3}:");
    hout!("{}", indent(&host.receipt(&id3)?.unwrap_or_default()));
    houtln!("    `vouch resume {id3}` finishes what is left:");
    let (id4, _) = host.resume(&id3).map_err(|e| anyhow!("{e}"))?;
    hout!("{}", indent(&host.receipt(&id4)?.unwrap_or_default()));
    let rec3 = host
        .run_record(&id3)?
        .ok_or_else(|| anyhow!("run 3 missing"))?;
    let rec4 = host
        .run_record(&id4)?
        .ok_or_else(|| anyhow!("run 4 missing"))?;
    ok &= rec3.outcome == Some(Outcome::Partial) && rec4.outcome == Some(Outcome::Succeeded);
    ok &= files.join("Reports/q4-summary.md").exists();

    // 4. Approval binds to the exact text; the model cannot swap it.
    section(
        4,
        "E-mail the board. You approve one text; the model then tries to send a regenerated one.",
    );
    let (smtp_port, inbox) = smtp_sink()?;
    std::fs::write(
        dir.join("vouch.toml"),
        format!("[email]\nhost = \"127.0.0.1\"\nport = {smtp_port}\nfrom = \"agent@example.com\"\ntls = \"none\"\n"),
    )?;
    let host = home::host(&dir, Some(progress()))?;
    let turns = json!([
        {"declare": {"deliveries": [{"id": "d1", "verb": "send", "destination": {"kind": "email", "address": "board@example.com"}}]}},
        {"deliver": "d1", "payload": {"to": "board@example.com", "subject": "Q4", "body": "Revenue up 12%. Details in Reports/q4-brief.md."}},
        {"deliver": "d1", "payload": {"to": "board@example.com", "subject": "Q4", "body": "Revenue up 15%!! (regenerated)"}},
        {"final": "Sent the board the updated numbers."}
    ]);
    let (id5, _) = host
        .start(&spec("E-mail the board the Q4 headline", turns))
        .map_err(|e| anyhow!("{e}"))?;
    let card = host
        .run_cards(&id5)?
        .into_iter()
        .find(|c| c.state == CardState::Open);
    let Some(card) = card else {
        bail!("demo run 4 should wait for approval")
    };
    houtln!(
        "    You approve the text you were shown (hash {}…).",
        &card.payload_hash[..12]
    );
    host.approve(&id5, "d1", &card.payload_hash)
        .map_err(|e| anyhow!("{e}"))?;
    hout!("{}", indent(&host.receipt(&id5)?.unwrap_or_default()));
    let received = inbox.lock().map(|v| v.clone()).unwrap_or_default();
    houtln!("    The mail server received {} message(s); the approved text: {}; the regenerated one: {}.",
        received.len(),
        received.iter().any(|m| m.contains("Revenue up 12%")),
        received.iter().any(|m| m.contains("regenerated")));
    ok &= received.len() == 1
        && received[0].contains("Revenue up 12%")
        && !received[0].contains("regenerated");

    // 5. The 7am brief: one slot that ran, one that never did.
    section(
        5,
        "The daily brief. The machine was off for yesterday's slot; today's runs.",
    );
    let now = host.now_ms();
    let slot_min = (now / 60_000 - 5).rem_euclid(24 * 60);
    let cron = format!("{} {} * * *", slot_min % 60, slot_min / 60);
    host.put_schedule(&vouch_store::Schedule {
        name: "daily-brief".into(),
        cron: cron.clone(),
        tz: "UTC".into(),
        routine: json!({"prompt": "Prepare my daily brief and save it to Briefs/", "model": {"kind": "script", "turns": [
            {"declare": {"deliveries": [{"id": "d1", "verb": "save", "destination": {"kind": "folder", "address": "Briefs/today.md"}}]}},
            {"tool": "search_news", "args": {"q": "markets"}},
            {"deliver": "d1", "payload": {"text": "# Brief\nMarkets calm; two meetings.\n"}}
        ]}}),
        catch_up: vouch_core::CatchUp::Skip,
        overlap: vouch_core::Overlap::Skip,
        grace_ms: 15 * 60_000,
        created_ms: now - 36 * 3_600_000,
    })?;
    houtln!(
        "    Schedule `daily-brief` ({cron} UTC), created 36 hours ago; `vouch serve` ticks once:"
    );
    let tick = host.tick().map_err(|e| anyhow!("{e}"))?;
    for (_, _, run) in tick.missed.iter().chain(tick.started.iter()) {
        hout!("{}", indent(&host.receipt(run)?.unwrap_or_default()));
    }
    let notes = std::fs::read_to_string(dir.join("notifications.jsonl")).unwrap_or_default();
    houtln!(
        "    Notifications sent for the missed slot: {}.",
        notes
            .lines()
            .filter(|l| tick.missed.iter().any(|(_, _, r)| l.contains(r.as_str())))
            .count()
    );
    ok &= tick.missed.len() == 1 && tick.started.len() == 1;

    // 6. A patch whose diff is empty, in a real git repository.
    section(
        6,
        "A patch task: add retry handling to src/client.rs. The model writes the file back unchanged.",
    );
    ok &= patch_story(&dir)?;

    // 7. The board: work offered to workers already running; one dies, another finishes.
    section(
        7,
        "The task board. Worker alpha is killed mid-task; worker beta finishes it.",
    );
    ok &= board_story(&dir)?;

    let report = host.verify_store()?;
    houtln!(
        "\nJournal: {} runs, {} events, {} broken chains.",
        report.runs,
        report.events,
        report.breaks.len()
    );
    ok &= report.breaks.is_empty();
    finish(&dir, keep, ok)
}

/// The empty-diff story (§14): the model reports the work done; the host's own diff of the
/// attempt's worktree is empty, so the receipt says nothing changed and the task fails.
fn patch_story(dir: &Path) -> Result<bool> {
    let repo = dir.join("repo");
    std::fs::create_dir_all(repo.join("src"))?;
    std::fs::write(repo.join("src/client.rs"), "fn send() { post() }\n")?;
    let git = |args: &[&str]| -> Result<String> {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(["-c", "user.name=demo", "-c", "user.email=demo@localhost"])
            .args(args)
            .output()
            .context("run git (the patch story needs it)")?;
        if !out.status.success() {
            bail!("git {args:?}: {}", String::from_utf8_lossy(&out.stderr));
        }
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    git(&["init", "--quiet", "-b", "main"])?;
    git(&["add", "-A"])?;
    git(&["commit", "--quiet", "-m", "client"])?;
    let base = git(&["rev-parse", "HEAD"])?;
    let host = home::host(dir, Some(progress()))?;
    let work = Arc::new(
        vouch_runtime::host::TaskWork::new(host.work().clone()).with_patch(
            vouch_runtime::host::PatchWork::new(dir.join("worktrees"), vec![]),
        ),
    );
    let host = host.with_work(work.clone());
    let job = vouch_runtime::host::AttemptJob {
        task_id: "demo-patch".into(),
        attempt: 1,
        kind: "patch".into(),
        brief: "add retry handling to src/client.rs".into(),
        input: json!({"repo": repo.to_string_lossy(), "base": base, "allow": ["src/**"],
            "targets": ["src/client.rs"],
            "checks": [{"name": "tests", "cmd": "grep -q retry src/client.rs", "timeout_s": 30}]}),
        criteria: None,
        model: json!({"kind": "script", "turns": [
            {"declare": {"deliveries": []}},
            {"tool": "repo_read_file", "args": {"path": "src/client.rs"}},
            {"tool": "repo_write_file", "args": {"path": "src/client.rs", "text": "fn send() { post() }\n"}},
            {"final": "Implemented retry handling in src/client.rs; all tests pass."}
        ]}),
        repairs_max: 0,
        profile: None,
        lease: None,
    };
    let types = vouch_runtime::host::TaskTypes::builtin();
    let out = host
        .run_task_attempt(&work, &types, &job)
        .map_err(|e| anyhow!("{e}"))?;
    houtln!("    The model's final text: \"Implemented retry handling in src/client.rs; all tests pass.\"");
    let receipt = out.receipt.unwrap_or_default();
    hout!("{}", indent(&receipt));
    let failed = matches!(
        out.report,
        Some(vouch_store::board::ReportKind::Failed { .. })
    );
    houtln!(
        "    The board hears: {}.",
        if failed {
            "attempt failed — nothing to accept"
        } else {
            "something else (unexpected)"
        }
    );
    Ok(failed && receipt.contains("Changed: nothing"))
}

/// Story 6 (§13): real worker processes on the demo's home; the lease, not a report, tells
/// the board that alpha is gone.
fn board_story(dir: &Path) -> Result<bool> {
    use std::process::{Command, Stdio};
    use vouch_core::board::TaskState;
    let exe = std::env::current_exe().context("find the vouch executable")?;
    let vouch = |args: &[&str]| {
        let mut c = Command::new(&exe);
        c.arg("--home")
            .arg(dir)
            .args(args)
            .env_remove("VOUCH_CRASH_AFTER")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    };
    let script = dir.join("board-script.json");
    std::fs::write(
        &script,
        serde_json::to_string(&json!([
            {"declare": {"deliveries": []}},
            {"submit": {"summary": "Q4: revenue +12%, churn 2.1%, two deals slipped."}},
            {"final": "Summary submitted."}
        ]))?,
    )?;
    let script = script.to_string_lossy().into_owned();
    let out = vouch(&[
        "--json",
        "task",
        "offer",
        "--type",
        "freeform",
        "--brief",
        "Summarize the Q4 notes",
        "--tag",
        "demo",
        "--max-attempts",
        "2",
        "--lease-ms",
        "1500",
        "--heartbeat-ms",
        "200",
    ])
    .stdout(Stdio::piped())
    .output()
    .context("offer the demo task")?;
    let offered: Value = serde_json::from_slice(&out.stdout).context("read the offered task")?;
    let Some(id) = offered["id"].as_str().map(String::from) else {
        bail!("the demo task was not offered")
    };
    houtln!("    Offered task {id}: 2 attempts allowed, a 1.5 s lease renewed by heartbeats.");
    let (_, board) = crate::task::open_board(dir)?;
    let state = |id: &str| -> Result<TaskState> {
        board
            .task(id)?
            .map(|t| t.state)
            .ok_or_else(|| anyhow!("the demo task is gone"))
    };
    let mut alpha = vouch(&[
        "worker",
        "--name",
        "alpha",
        "--script",
        &script,
        "--attempt-delay-ms",
        "600000",
    ])
    .spawn()
    .context("start worker alpha")?;
    let mut polls = 0;
    while state(&id)? != TaskState::Running {
        polls += 1;
        if polls > 1_200 {
            let _ = alpha.kill();
            bail!("worker alpha never started the demo task");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    alpha.kill().context("kill worker alpha")?;
    let status = alpha.wait()?;
    houtln!(
        "    Worker alpha claimed it, started, and died ({}): no report, no goodbye.",
        describe_status(&status)
    );
    // Beta drains the board; once alpha's lease lapses, its sweep times the attempt out
    // and the task is claimable again.
    let mut rounds = 0;
    while state(&id)? != TaskState::Completed {
        rounds += 1;
        if rounds > 300 {
            bail!("worker beta never finished the demo task");
        }
        vouch(&["worker", "--name", "beta", "--script", &script, "--drain"])
            .status()
            .context("run worker beta")?;
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let attempts = board.attempts(&id)?;
    for a in &attempts {
        houtln!(
            "    attempt {} by {}: {}{}",
            a.n,
            a.claimant,
            a.state,
            a.end_reason
                .as_deref()
                .map(|r| format!(" — {}", crate::task::clean(r)))
                .unwrap_or_default()
        );
    }
    let measures = Command::new(&exe)
        .arg("--home")
        .arg(dir)
        .args(["measures", "--by", "claimant"])
        .output()
        .context("show the measures")?;
    houtln!("    `vouch measures --by claimant`:");
    hout!("{}", indent(&String::from_utf8_lossy(&measures.stdout)));
    let shape: Vec<(String, String)> = attempts
        .iter()
        .map(|a| (a.claimant.clone(), a.state.to_string()))
        .collect();
    Ok(shape
        == vec![
            ("alpha".to_string(), "timed_out".to_string()),
            ("beta".to_string(), "completed".to_string()),
        ])
}

fn describe_status(s: &std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (s.code(), s.signal()) {
        (_, Some(sig)) => format!("killed by signal {sig}"),
        (Some(c), _) => format!("exit code {c}"),
        _ => "unknown".into(),
    }
}

fn finish(dir: &Path, keep: bool, ok: bool) -> Result<i32> {
    if keep {
        houtln!(
            "The demo home is kept at {} (try `vouch --home {} runs list`).",
            dir.display(),
            dir.display()
        );
    } else {
        let _ = std::fs::remove_dir_all(dir);
    }
    if ok {
        houtln!("Demo finished: every receipt matched what really happened.");
        houtln!("\nWhat to try next (from the repository's root; `vouch` is target/debug/vouch):");
        houtln!("  vouch init                                   # your own home (./.vouch)");
        houtln!(
            "  vouch run \"Save my notes to Notes/\" --script examples/save-notes.json --watch"
        );
        houtln!("  vouch receipt last                           # then the tour in README.md");
        houtln!(
            "  docs/scripts.md                              # write your own scripts and routines"
        );
        Ok(0)
    } else {
        houtln!("Demo finished, but something did not behave as expected (see above).");
        Ok(1)
    }
}

/// A minimal SMTP server on loopback for the demo: accepts every message and keeps it.
fn smtp_sink() -> Result<(u16, Arc<std::sync::Mutex<Vec<String>>>)> {
    use std::io::{BufRead, BufReader};
    let listener = TcpListener::bind("127.0.0.1:0")
        .context("bind a loopback port for the demo mail server")?;
    let port = listener.local_addr()?.port();
    let store = Arc::new(std::sync::Mutex::new(Vec::new()));
    let st = store.clone();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let Ok(read_half) = stream.try_clone() else {
                continue;
            };
            let mut out = stream;
            let mut reader = BufReader::new(read_half);
            let _ = write!(out, "220 demo ESMTP\r\n");
            let mut line = String::new();
            loop {
                line.clear();
                if reader.read_line(&mut line).unwrap_or(0) == 0 {
                    break;
                }
                let cmd = line.trim_end().to_ascii_uppercase();
                if cmd.starts_with("EHLO") || cmd.starts_with("HELO") {
                    let _ = write!(out, "250-demo\r\n250 8BITMIME\r\n");
                } else if cmd.starts_with("DATA") {
                    let _ = write!(out, "354 go ahead\r\n");
                    let mut msg = String::new();
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).unwrap_or(0) == 0 || line == ".\r\n" {
                            break;
                        }
                        msg.push_str(&line);
                    }
                    if let Ok(mut v) = st.lock() {
                        v.push(msg);
                    }
                    let _ = write!(out, "250 2.0.0 accepted\r\n");
                } else if cmd.starts_with("QUIT") {
                    let _ = write!(out, "221 bye\r\n");
                    break;
                } else {
                    let _ = write!(out, "250 ok\r\n");
                }
            }
        }
    });
    Ok((port, store))
}
