//! The corpus: `vouch oracle` (what the contract prescribes) and `vouch scenario run` (what the runtime does).

use crate::bad;
use anyhow::Result;
use serde_json::json;
use std::path::PathBuf;

pub fn load_scenarios(paths: &[PathBuf]) -> Result<Vec<(PathBuf, vouch_scenario::Scenario)>> {
    vouch_scenario::load_paths(paths).map_err(|e| bad(e.to_string()))
}

pub fn oracle(paths: &[PathBuf], summary: bool, json: bool) -> Result<i32> {
    let all = load_scenarios(paths)?;
    if summary {
        let s = vouch_oracle::summary(&all);
        if json {
            outln!(
                "{}",
                json!({"scenarios": s.scenarios, "agreeing": s.agreeing, "disagreeing": s.disagreeing.len(), "without_expect": s.without_expect, "gaps": s.gaps.iter().map(|(id, q)| json!({"id": id, "question": q})).collect::<Vec<_>>()})
            );
        } else {
            houtln!("{s}");
        }
        return Ok(s.exit_code());
    }
    let mut code = 0;
    for (_, s) in &all {
        let answer = vouch_oracle::evaluate(s);
        let out = answer.output(s);
        if out.expect_ok == Some(false) {
            code = 1;
        }
        if json {
            outln!("{}", out.to_json_line());
        } else {
            hout!("{}", vouch_oracle::render_human(&answer));
            if out.expect_ok == Some(false) {
                for d in out.disagreements.iter().flatten() {
                    houtln!(
                        "  DISAGREES WITH EXPECT {}: expected {} got {}",
                        d.field,
                        d.expected,
                        d.actual
                    );
                }
            }
            outln!();
        }
    }
    Ok(code)
}

pub fn scenario_run(paths: &[PathBuf], json: bool) -> Result<i32> {
    let all = load_scenarios(paths)?;
    let total = all.len();
    let started = std::time::Instant::now();
    let (mut agreeing, mut failing) = (0usize, vec![]);
    let mut gaps = 0usize;
    for (i, (path, s)) in all.iter().enumerate() {
        let oracle = vouch_oracle::evaluate(s);
        let mut report = match vouch_runner::run_typed(s) {
            Ok(r) => r,
            Err(e) => {
                failing.push(format!("{}: the runner failed: {e}", s.id));
                if json {
                    // A program reading the lines sees the failure, not a missing line.
                    outln!(
                        "{}",
                        json!({"id": s.id, "file": path.display().to_string(), "agrees": false,
                            "error": format!("the runner failed: {e}")})
                    );
                } else {
                    errln!(
                        "[{}/{total}] {} ERROR {e} ({})",
                        i + 1,
                        s.id,
                        path.display()
                    );
                }
                continue;
            }
        };
        report.gaps = oracle.report.gaps.clone();
        let mut dis = vouch_scenario::compare_reports(&oracle.report, &report);
        let has_gaps = !oracle.report.gaps.is_empty();
        let expect_ok = s.expect.as_ref().map(|e| {
            // Where the oracle reports a GAP, `expect` holds null for "open": the runner's
            // choice there is not a disagreement.
            let d: Vec<_> = vouch_scenario::compare(&e.to_value(), &report.to_value())
                .into_iter()
                .filter(|x| !(has_gaps && x.expected.is_null()))
                .collect();
            let ok = d.is_empty();
            for x in d {
                dis.push(vouch_scenario::Disagreement {
                    field: format!("expect.{}", x.field),
                    ..x
                });
            }
            ok
        });
        gaps += oracle.report.gaps.len();
        report.agrees = Some(dis.iter().all(|d| d.field.starts_with("expect.")));
        report.expect_ok = expect_ok;
        let ok = dis.is_empty();
        report.disagreements = Some(dis.clone());
        if ok {
            agreeing += 1;
        } else {
            failing.push(format!(
                "{}: {}",
                s.id,
                dis.iter()
                    .map(|d| format!("{} expected {} got {}", d.field, d.expected, d.actual))
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        if json {
            outln!("{}", report.to_json_line());
        } else {
            errln!(
                "[{}/{total}] {:<48} {}",
                i + 1,
                s.id,
                if ok {
                    "agrees".to_string()
                } else {
                    format!("DISAGREES ({} fields)", dis.len())
                }
            );
        }
    }
    if !json {
        houtln!(
            "{total} scenarios run through the host in {:.1} s: {agreeing} agree, {} disagree, {gaps} oracle GAPs",
            started.elapsed().as_secs_f64(),
            failing.len()
        );
        for f in &failing {
            houtln!("  {f}");
        }
    }
    Ok(if failing.is_empty() { 0 } else { 1 })
}
