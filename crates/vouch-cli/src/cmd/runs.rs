//! Runs: start one, list and show them, their journals and receipts, follow one live.

use crate::out;
use crate::{bad, home, host_err, open_host};
use anyhow::{anyhow, Result};
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use vouch_runtime::host::ModelSpec;
use vouch_runtime::host::RunEnd;
use vouch_runtime::runs::Named;
use vouch_runtime::{Host, RunSpec};
use vouch_store::{CardState, Store};

/// The filter `runs list` was given, in the store's terms (the words were checked by clap).
fn run_filter(a: &crate::args::RunsListArgs, now_ms: i64) -> Result<vouch_store::RunFilter> {
    let word = |w: &Option<String>| w.as_ref().map(|w| json!(w));
    let since_ms = match &a.since {
        Some(w) => Some(
            now_ms
                - vouch_core::input::window_ms(w).ok_or_else(|| {
                    bad(format!(
                        "--since `{w}`: use a positive whole number and a unit s, m, h or d, e.g. 90m, 24h, 7d"
                    ))
                })?,
        ),
        None => None,
    };
    if let Some(t) = &a.title {
        if t.is_empty() || t.contains('\0') || t.len() > 1024 {
            return Err(bad(
                "--title: give 1 to 1024 bytes of text without NUL, like `notes`",
            ));
        }
    }
    Ok(vouch_store::RunFilter {
        state: word(&a.state).and_then(|v| serde_json::from_value(v).ok()),
        outcome: word(&a.outcome).and_then(|v| serde_json::from_value(v).ok()),
        trigger: word(&a.trigger).and_then(|v| serde_json::from_value(v).ok()),
        schedule: a.schedule.clone(),
        task: a.task.clone(),
        since_ms,
        until_ms: None,
        title: a.title.clone(),
    })
}

/// How long a run took (or has taken so far), for a column: `4.2 s`, `12 min`, `3.5 h`.
pub fn took(from_ms: i64, to_ms: i64) -> String {
    let s = (to_ms - from_ms).max(0) as f64 / 1000.0;
    if s < 60.0 {
        format!("{s:.1} s")
    } else if s < 3600.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    }
}

pub fn list(dir: &Path, a: &crate::args::RunsListArgs, json: bool) -> Result<i32> {
    let host = open_host(dir, false)?;
    let now = host.now_ms();
    let filter = run_filter(a, now)?;
    let runs = host.runs_filtered(&filter, 0, a.limit)?;
    if json {
        outln!("{}", serde_json::to_string(&runs)?);
    } else if runs.is_empty() && filter == vouch_store::RunFilter::default() {
        houtln!("No runs yet in {}. Start one with `vouch run \"PROMPT\" --script FILE` or try `vouch demo`.", dir.display());
    } else if runs.is_empty() {
        houtln!("No run matches these filters; `vouch runs list` without them shows every run.");
    } else {
        let rows: Vec<Vec<String>> = runs
            .iter()
            .map(|r| {
                vec![
                    r.id.clone(),
                    crate::when::local_time(r.created_ms),
                    match r.ended_ms {
                        Some(end) => took(r.created_ms, end),
                        None => format!("{} so far", took(r.created_ms, now)),
                    },
                    r.trigger.as_str().to_string(),
                    r.state.as_str().to_string(),
                    r.outcome.map(|o| o.as_str()).unwrap_or("—").to_string(),
                    out::short(&r.title, 48),
                ]
            })
            .collect();
        let header = [
            "RUN", "STARTED", "TOOK", "TRIGGER", "STATE", "OUTCOME", "TITLE",
        ];
        for l in out::table(&header, &rows) {
            houtln!("{l}");
        }
    }
    Ok(0)
}

pub fn show(dir: &Path, run: &str, json: bool) -> Result<i32> {
    let host = open_host(dir, false)?;
    let rec = host_run(&host, run)?;
    let journal = host.events(&rec.id)?;
    let view = vouch_runtime::view::RunView::from_journal(&journal);
    let cards = host.run_cards(&rec.id)?;
    let items: Vec<Value> = view
        .manifest
        .iter()
        .flat_map(|m| m.deliveries.iter())
        .map(|d| {
            let iv = view.items.get(&d.id).cloned().unwrap_or_default();
            // The open card of this item, with why the person is asked (§7).
            let approval = cards
                .iter()
                .rev()
                .find(|c| c.state == CardState::Open && c.delivery.as_deref() == Some(d.id.as_str()))
                .map(|c| json!({"payload_hash": c.payload_hash, "reason": c.reason}));
            json!({"id": d.id, "verb": d.verb, "destination": d.destination, "posture": iv.posture, "status": view.final_status(&d.id), "approval": approval})
        })
        .collect();
    if json {
        outln!("{}", json!({"run": rec, "deliveries": items}));
    } else {
        houtln!(
            "Run {} · {} · {}",
            rec.id,
            rec.trigger.as_str(),
            out::line(&rec.title)
        );
        houtln!(
            "State: {}{}",
            rec.state.as_str(),
            rec.outcome
                .map(|o| format!(" · outcome {}", o.as_str()))
                .unwrap_or_default()
        );
        if let Some(e) = rec.ended_by {
            houtln!("Ended by: {}", e.as_str());
        }
        if let Some(p) = &rec.parent {
            houtln!("Continues: {p}");
        }
        for i in items {
            houtln!(
                "  {} {} → {}  posture {}  status {}",
                i["id"].as_str().unwrap_or(""),
                i["verb"].as_str().unwrap_or(""),
                serde_json::from_value::<vouch_core::Destination>(i["destination"].clone())
                    .map(|d| d.to_string())
                    .unwrap_or_default(),
                i["posture"].as_str().unwrap_or("—"),
                i["status"].as_str().unwrap_or("")
            );
            if let Some(a) = i["approval"].as_object() {
                houtln!(
                    "     waits for your approval: {}\n     hash {} — `vouch approvals` shows the payload",
                    out::line(a["reason"].as_str().unwrap_or("")),
                    a["payload_hash"].as_str().unwrap_or("")
                );
            }
        }
        houtln!(
            "{}, {}. Receipt: `vouch receipt {}`; journal: `vouch journal {}`",
            out::count(view.turns, "turn", "turns"),
            out::count(journal.len(), "event", "events"),
            rec.id,
            rec.id
        );
    }
    Ok(0)
}

pub fn journal_verify(dir: &Path, acknowledge: bool, json: bool) -> Result<i32> {
    use vouch_runtime::clock::{Clock, SystemClock};
    let store = home::open_store(dir)?;
    let v =
        vouch_runtime::verify::verify_and_keep(store.as_ref(), SystemClock.now_ms(), acknowledge)?;
    let report = &v.report;
    if json {
        let mut out = serde_json::to_value(report)?;
        out["refusing_new_runs"] = serde_json::json!(!v.open.is_empty());
        out["acknowledged"] = serde_json::json!(if acknowledge { v.closed } else { 0 });
        outln!("{}", serde_json::to_string(&out)?);
    } else if report.intact() {
        houtln!(
            "Store and journal intact: {}, {}, every hash chain verifies and every row reads back.",
            out::count(report.runs, "run", "runs"),
            out::count(report.events, "event", "events")
        );
    } else {
        let kept = if home::database_url().is_some() {
            "a dump of the database".to_string()
        } else {
            format!("a copy of {}", dir.join(home::DB_FILE).display())
        };
        for d in &report.damage {
            houtln!("DAMAGED: {d}");
        }
        for b in &report.breaks {
            houtln!("BROKEN: run {} event #{}: {}", b.run_id, b.seq, b.reason);
        }
        if !report.damage.is_empty() {
            houtln!("The store itself is damaged ({} above). Keep {kept} before doing anything else; then restore it from a backup, or run `vouch init` in a new folder.", out::count(report.damage.len(), "problem", "problems"));
        }
        if !report.breaks.is_empty() {
            houtln!("{} of {} {} a broken chain. The journal was changed outside vouch; keep {kept} before doing anything else.", report.breaks.len(), out::count(report.runs, "run", "runs"), if report.breaks.len() == 1 { "has" } else { "have" });
        }
    }
    if !json {
        verify_said(&v, acknowledge);
    }
    Ok(if report.intact() { 0 } else { 1 })
}

/// What verification kept, closed or could not keep (§10.2).
fn verify_said(v: &vouch_runtime::verify::Verified, acknowledge: bool) {
    if let Some(why) = &v.not_kept {
        if !v.report.intact() || acknowledge {
            houtln!("This home is read-only ({why}): what was found is not kept and nothing is acknowledged.");
        }
    } else if acknowledge && v.closed > 0 {
        houtln!("Acknowledged: new runs start again. The damage above stays in the store; verify reports it until it is repaired.");
    } else if acknowledge {
        houtln!("Nothing to acknowledge: no damage is open.");
    } else if v.report.intact() && v.closed > 0 {
        houtln!("The damage found before is repaired: new runs start again.");
    }
    if !v.open.is_empty() {
        houtln!("New runs are refused until the store is repaired or the damage acknowledged: keep a copy of the store, then run `vouch journal verify --acknowledge`.");
    }
}

pub fn journal(dir: &Path, target: &str, json: bool) -> Result<i32> {
    let store = home::open_store(dir)?;
    let rec = find_run(store.as_ref(), target)?;
    let entries = store.journal(&rec.id)?;
    if json {
        outln!("{}", serde_json::to_string(&entries)?);
    } else {
        let t0 = entries.first().map(|e| e.at_ms).unwrap_or(0);
        for e in &entries {
            houtln!(
                "#{:<4} +{:>7.3}s  {:<20} {:<6} {}",
                e.seq,
                (e.at_ms - t0) as f64 / 1000.0,
                e.kind.as_str(),
                e.delivery.as_deref().unwrap_or(""),
                describe(&e.body)
            );
        }
    }
    Ok(0)
}

pub fn run(
    dir: &Path,
    prompt: String,
    script: Option<PathBuf>,
    watch: bool,
    presence: Option<String>,
    quiet: bool,
    json: bool,
) -> Result<i32> {
    let host = open_host(dir, watch)?;
    let model = match &script {
        Some(path) => ModelSpec::script_of(read_script(path)?),
        None => {
            // Settings are checked before a run exists: a missing or malformed model
            // setting is bad input and leaves no run behind.
            // The profile is `[model]` in vouch.toml under the VOUCH_MODEL_* overrides; a
            // variable that is set is checked as itself, so the error names it.
            let set = |v: &str| std::env::var(v).is_ok_and(|v| !v.trim().is_empty());
            if set("VOUCH_MODEL_URL") && set("VOUCH_MODEL") {
                if let Err(e) = vouch_adapters::openai::OpenAiConfig::from_env() {
                    return Err(bad(format!("no model is configured: {e}")));
                }
            }
            let model = host.models().record(&ModelSpec::openai());
            let profile = match &model {
                ModelSpec::OpenAi { profile, .. } => profile.as_ref(),
                _ => None,
            };
            let checked = match profile {
                Some(p) => {
                    vouch_adapters::openai::OpenAiConfig::from_profile(p, |v| std::env::var(v).ok())
                        .map(|_| ())
                }
                None => vouch_adapters::openai::OpenAiConfig::from_env().map(|_| ()),
            };
            if let Err(e) = checked {
                return Err(bad(match profile {
                    Some(_) => format!("the model profile cannot be used: {e}"),
                    None => format!(
                        "no model is configured: {e} (or give vouch.toml a [model] with url and model)"
                    ),
                }));
            }
            model
        }
    };
    let spec = RunSpec {
        trigger: vouch_core::TriggerKind::Interactive,
        title: prompt,
        presence: presence.and_then(|p| serde_json::from_value(json!(p)).ok()),
        quiet,
        model,
        scope: None,
    };
    let (id, end) = host.start(&spec).map_err(host_err)?;
    finish(&host, &id, &end, json)
}

pub fn receipt(dir: &Path, run: &str, json: bool) -> Result<i32> {
    let host = open_host(dir, false)?;
    let rec = host_run(&host, run)?;
    let text = match host.receipt(&rec.id)? {
        Some(t) => t,
        None => format!(
            "Run {} has not ended yet ({}); no receipt. Open cards: `vouch approvals`.\n",
            rec.id,
            rec.state.as_str()
        ),
    };
    if json {
        outln!(
            "{}",
            json!({"run": rec.id, "state": rec.state, "outcome": rec.outcome, "receipt": text})
        );
    } else {
        hout!("{text}");
    }
    Ok(0)
}

pub fn finish(host: &Host, id: &str, end: &RunEnd, json: bool) -> Result<i32> {
    let rec = host
        .run_record(id)?
        .ok_or_else(|| anyhow!("run {id} vanished"))?;
    let receipt = host.receipt(id)?;
    let cards: Vec<_> = host
        .run_cards(id)?
        .into_iter()
        .filter(|c| c.state == CardState::Open)
        .collect();
    let waits_for_you = !cards.is_empty();
    if json {
        outln!(
            "{}",
            json!({"run": id, "state": rec.state, "outcome": rec.outcome, "ended_by": rec.ended_by, "receipt": receipt, "open_cards": cards, "why": run_why(host, id)?})
        );
    } else {
        match end {
            RunEnd::Ended { .. } => hout!("\n{}", receipt.unwrap_or_default()),
            RunEnd::Suspended { reason } => {
                houtln!("\nRun {id} is waiting for you ({}).", out::line(reason));
                for c in cards {
                    match c.delivery {
                        Some(d) => houtln!("  {d} waits for your approval: {}\n  approve: vouch approve {id} {d} --hash {}\n  deny:    vouch deny {id} {d}", out::line(&c.reason), c.payload_hash),
                        None => houtln!("  answer:  vouch answer {id} \"…\""),
                    }
                }
            }
        }
    }
    Ok(exit_for(&rec, waits_for_you))
}

/// §17.0: how a run's state reads as an exit code — 0 done (or withdrawn), 1 the work did not
/// succeed, [`crate::EXIT_WAITING`] when it stopped to wait for the person's decision.
pub fn exit_for(rec: &vouch_store::RunRecord, waits_for_you: bool) -> i32 {
    match rec.outcome {
        Some(vouch_core::Outcome::Succeeded | vouch_core::Outcome::Withdrawn) => 0,
        Some(_) => 1,
        None if waits_for_you => crate::EXIT_WAITING,
        None => 0,
    }
}

/// Why an ended run ended as it did, from its terminal record: how the loop stopped (if it
/// stopped without the work) and the reason of every delivery that is not verified.
pub fn run_why(host: &Host, id: &str) -> Result<Value> {
    let terminal = host
        .events(id)?
        .into_iter()
        .rev()
        .find(|e| e.kind == vouch_store::EventKind::Terminal);
    Ok(
        match terminal.map(|e| vouch_store::Event::parse(e.kind, &e.body)) {
            Some(Ok(vouch_store::Event::Terminal(t))) => {
                json!({"loop_end": t.loop_end, "deliveries": t.reasons})
            }
            Some(Err(e)) => json!({"loop_end": null, "deliveries": null, "corrupt": e.to_string()}),
            _ => json!({"loop_end": null, "deliveries": null}),
        },
    )
}

/// Resolve a run id, a unique prefix of one, or `last` (the newest run), in a store opened
/// without a host.
pub fn find_run(store: &dyn Store, id: &str) -> Result<vouch_store::RunRecord> {
    the_run(id, vouch_runtime::runs::named(store, id)?)
}

/// [`find_run`] through the host, for commands that go on to drive or render the run.
pub fn host_run(host: &Host, id: &str) -> Result<vouch_store::RunRecord> {
    the_run(id, host.named_run(id)?)
}

/// The run the host found for the name `id`, or why there is none in the person's words.
pub fn the_run(id: &str, named: Named) -> Result<vouch_store::RunRecord> {
    match named {
        Named::Run(r) => Ok(*r),
        Named::NoRunYet => Err(bad(
            "there is no run yet, so no `last` one; start one with `vouch run \"PROMPT\" --script FILE`",
        )),
        Named::NoMatch | Named::NothingWaits => Err(bad(format!(
            "no run `{id}` in this home; list runs with `vouch runs list`"
        ))),
        Named::Ambiguous => Err(bad(format!(
            "`{id}` matches more than one run; give more of the id"
        ))),
    }
}

pub fn read_script(path: &Path) -> Result<Value> {
    let text = vouch_runtime::bounded::read_text(
        path,
        "script",
        vouch_runtime::bounded::INPUT_FILE_BYTES_MAX,
    )
    .map_err(|e| bad(e.to_string()))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| bad(format!("script {} is not valid JSON: {e}", path.display())))?;
    crate::refuse_nul(&v, "script", path)?;
    vouch_scenario::scenario::script_turns(v)
        .map_err(|e| bad(format!("script {}: {e}", path.display())))
}

/// A journal body on one line: JSON escapes C0 controls but not C1 or bidirectional ones.
pub fn describe(body: &Value) -> String {
    out::short(&body.to_string(), 140)
}

pub fn watch(dir: &Path, run: &str, json: bool) -> Result<i32> {
    let host = open_host(dir, false)?;
    let rec = host_run(&host, run)?;
    let presence = home::FilePresence::new(dir);
    // The last seq shown: each poll reads only what became durable after it.
    let mut seen = 0i64;
    let mut told = false;
    if !json {
        errln!(
            "watching run {} — {} (Ctrl-C to stop)",
            rec.id,
            out::line(&rec.title)
        );
    }
    loop {
        let now = host.now_ms();
        presence.hold_watch(&rec.id, now + 5_000);
        let entries = host.events_since(&rec.id, seen)?;
        for e in &entries {
            if json {
                outln!("{}", serde_json::to_string(e)?);
            } else {
                houtln!(
                    "#{:<4} {:<20} {:<6} {}",
                    e.seq,
                    e.kind.as_str(),
                    e.delivery.as_deref().unwrap_or(""),
                    describe(&e.body)
                );
            }
        }
        if let Some(last) = entries.last() {
            seen = last.seq;
        }
        let cur = host
            .run_record(&rec.id)?
            .ok_or_else(|| anyhow!("run vanished"))?;
        match cur.state {
            vouch_core::RunState::Ended => {
                presence.release_watch(&rec.id);
                if !json {
                    hout!("\n{}", host.receipt(&rec.id)?.unwrap_or_default());
                }
                // Like `vouch run`: 1 when the work did not succeed (§17.0).
                return Ok(exit_for(&cur, false));
            }
            vouch_core::RunState::Suspended if !json && !told => {
                told = true;
                errln!("the run is waiting for you: `vouch approvals` (still watching)");
            }
            _ => {}
        }
        std::thread::sleep(std::time::Duration::from_millis(1_000));
    }
}
