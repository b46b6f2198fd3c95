//! `vouch sim`: parses the flags and renders what the simulator (`vouch-sim`) found.

use anyhow::Result;
use serde_json::json;
use vouch_sim::{simulate, Faults, SimConfig, SimReport};

/// Simulated runs one invocation may ask for.
const RUNS_MAX: usize = 10_000_000;

pub fn run(
    seed: u64,
    runs: usize,
    faults: &str,
    database_url: Option<String>,
    replay: bool,
    json_out: bool,
) -> Result<i32> {
    if runs == 0 || runs > RUNS_MAX {
        return Err(crate::bad(format!("--runs must be 1..={RUNS_MAX}")));
    }
    let faults = Faults::parse(faults).map_err(|e| crate::bad(format!("--faults: {e}")))?;
    let cfg = SimConfig {
        seed,
        runs,
        faults,
        database_url,
        trace: replay && !json_out,
    };
    let r = simulate(&cfg).map_err(|e| anyhow::anyhow!("the simulation could not start: {e}"))?;
    let replay_cmd = format!(
        "vouch sim --seed {seed} --runs {runs} --faults {} --replay",
        faults.list()
    );
    if json_out {
        outln!("{}", report_json(&r, &faults, &replay_cmd));
    } else {
        render(&r, &faults, &replay_cmd);
    }
    Ok(if r.failure.is_some() { 1 } else { 0 })
}

fn report_json(r: &SimReport, faults: &Faults, replay: &str) -> serde_json::Value {
    json!({
        "seed": r.seed, "runs": r.runs, "steps": r.steps, "stores": r.stores,
        "crashes": r.crashes, "provider_attempts": r.attempts, "effects": r.effects,
        "tasks": r.tasks, "faults": faults.list(), "seconds": r.elapsed_ms as f64 / 1000.0,
        "runs_per_s": r.runs_per_s(),
        "failure": r.failure.as_ref().map(|f| json!({
            "seed": f.seed, "step": f.step, "invariant": f.violation.invariant,
            "detail": f.violation.detail, "trace": f.trace, "replay": replay,
        })),
    })
}

fn render(r: &SimReport, faults: &Faults, replay: &str) {
    outln!(
        "seed {}: {} simulated runs, {} steps over {} stores, {} crashes, {} provider attempts, {} effects, {} tasks (faults: {}); {:.1} s, {:.0} runs/s",
        r.seed,
        r.runs,
        r.steps,
        r.stores,
        r.crashes,
        r.attempts,
        r.effects,
        r.tasks,
        faults.list(),
        r.elapsed_ms as f64 / 1000.0,
        r.runs_per_s()
    );
    match &r.failure {
        None => outln!("every invariant held after every step"),
        Some(f) => {
            outln!("the last steps:");
            for line in &f.trace {
                outln!("  {line}");
            }
            outln!(
                "FAILED at seed {} step {}: {} — {}",
                f.seed,
                f.step,
                f.violation.invariant,
                f.violation.detail
            );
            outln!("replay: {replay}");
        }
    }
}
