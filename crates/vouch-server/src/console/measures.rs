//! Measures (§13.7): `GET /api/measures` (JSON, as `vouch measures --json` gives it, plus the
//! small-sample mark) and the console's page, which draws each figure as its own chart by
//! cohort and over time windows — never one combined score. The store computes every count
//! (SQL); this file only divides, marks and draws.

use super::session::Signed;
use super::view::{self, inert, Page};
use super::{BASE, SMALL_SAMPLE_TASKS};
use crate::extract::QueryMap;
use crate::problem::{ApiError, ApiResult, Problem};
use crate::{blocking, AppState};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use chrono::TimeZone as _;
use maud::{html, Markup};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use vouch_store::board::{rates, Cohort, MeasureRow, MeasuresQuery};

/// The friction thresholds (§13.7) a request may set, at most.
const FRICTION_MAX: usize = 10_000;
/// The windows of the "over time" charts: label and length (None: every task).
const WINDOWS: [(&str, Option<i64>); 4] = [
    ("24 h", Some(86_400_000)),
    ("7 d", Some(7 * 86_400_000)),
    ("30 d", Some(30 * 86_400_000)),
    ("all", None),
];

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct MeasuresBody {
    /// all, tag, type, claimant, profile or model.
    pub by: String,
    /// The window's start (tasks queued at or after it), or null for every task.
    pub since_ms: Option<i64>,
    /// The thread measured, or null for every task.
    pub correlation: Option<String>,
    /// `friction_turns`, `friction_failed_tool_calls` (reported with the figures, §13.7) and
    /// `small_sample_tasks` (a cohort with fewer tasks is marked `small_sample`).
    #[schema(value_type = Object)]
    pub thresholds: Value,
    /// One per cohort: `cohort`, raw `counts`, `rates` (null where the denominator is zero)
    /// and `small_sample`.
    #[schema(value_type = Vec<Object>)]
    pub cohorts: Vec<Value>,
}

struct Params {
    by: Cohort,
    by_word: String,
    since: Option<(String, i64)>,
    friction_turns: i64,
    friction_failed_tools: i64,
    /// Only the tasks of this thread (§13.1).
    correlation: Option<String>,
}

fn params(q: &QueryMap) -> ApiResult<Params> {
    let by_word = q.0.get("by").cloned().unwrap_or_else(|| "all".into());
    let by = Cohort::parse(&by_word).ok_or_else(|| {
        ApiError::field(
            "by",
            format!("`{by_word}`: expected all, tag, type, claimant, profile or model"),
        )
    })?;
    let since = match q.0.get("since").map(String::as_str) {
        None | Some("") | Some("all") => None,
        Some(v) => Some((
            v.to_string(),
            vouch_core::input::window_ms(v).ok_or_else(|| {
                ApiError::field(
                    "since",
                    format!("`{v}`: expected a window like 3600s, 90m, 24h or 7d (or `all`)"),
                )
            })?,
        )),
    };
    Ok(Params {
        by,
        by_word,
        since,
        friction_turns: q.number("friction_turns", 8, 1, FRICTION_MAX)? as i64,
        friction_failed_tools: q.number("friction_failed_tools", 3, 1, FRICTION_MAX)? as i64,
        correlation: q.0.get("correlation").filter(|c| !c.is_empty()).cloned(),
    })
}

fn row_json(r: &MeasureRow) -> Value {
    serde_json::json!({
        "cohort": r.cohort,
        "counts": r,
        "rates": rates(r),
        "small_sample": r.tasks < SMALL_SAMPLE_TASKS,
    })
}

async fn compute(
    s: &AppState,
    p: &Params,
    now_ms: i64,
) -> ApiResult<(MeasuresBody, Vec<MeasureRow>)> {
    let board = s
        .board
        .clone()
        .ok_or_else(|| ApiError::not_found("this server has no task board"))?;
    let q = MeasuresQuery {
        by: p.by,
        since_ms: p
            .since
            .as_ref()
            .map(|(_, w)| now_ms.saturating_sub(*w))
            .unwrap_or(i64::MIN),
        friction_turns: p.friction_turns,
        friction_failed_tools: p.friction_failed_tools,
        correlation: p.correlation.clone(),
    };
    let rows = blocking(move || Ok(board.measures(&q)?)).await?;
    Ok((
        MeasuresBody {
            by: p.by_word.clone(),
            since_ms: p.since.as_ref().map(|(_, w)| now_ms.saturating_sub(*w)),
            correlation: p.correlation.clone(),
            thresholds: serde_json::json!({
                "friction_turns": p.friction_turns,
                "friction_failed_tool_calls": p.friction_failed_tools,
                "small_sample_tasks": SMALL_SAMPLE_TASKS,
            }),
            cohorts: rows.iter().map(row_json).collect(),
        },
        rows,
    ))
}

/// The §13.7 figures per cohort, computed by the store; never one combined score.
#[utoipa::path(get, path = "/api/measures", tag = "tasks",
    params(
        ("by" = Option<String>, Query, pattern = "^(all|tag|type|claimant|profile|model)$", description = "all (default), tag, type, claimant, profile or model"),
        ("since" = Option<String>, Query, pattern = "^(all|[0-9]*[1-9][0-9]*[smhd])?$", description = "only tasks queued within this window: 3600s, 90m, 24h, 7d (default: all)"),
        ("friction_turns" = Option<usize>, Query, minimum = 1, maximum = 10_000, description = "an attempt with at least this many turns is high-friction (default 8)"),
        ("friction_failed_tools" = Option<usize>, Query, minimum = 1, maximum = 10_000, description = "… or with at least this many failed tool calls (default 3)"),
        ("correlation" = Option<String>, Query, description = "only the tasks of this thread: its correlation, or the thread's first task's id"),
    ),
    responses(
        (status = 200, body = MeasuresBody),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 404, body = Problem, content_type = "application/problem+json"),
        (status = 422, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn api(State(s): State<AppState>, q: QueryMap) -> ApiResult<Json<MeasuresBody>> {
    let p = params(&q)?;
    let now = s.host.now_ms();
    Ok(Json(compute(&s, &p, now).await?.0))
}

/// One figure: its name, how to read it, and its value from a row.
struct Figure {
    key: &'static str,
    label: &'static str,
    unit: Unit,
    value: fn(&MeasureRow, &Value) -> Option<f64>,
    /// The denominator, for the small-sample mark and the "n =" beside each bar.
    n: fn(&MeasureRow) -> i64,
}

#[derive(Clone, Copy)]
enum Unit {
    Rate,
    Count,
    Ms,
    /// Reads per accepted output (two decimals: a read in every other output shows).
    PerOutput,
}

const FIGURES: [Figure; 13] = [
    Figure {
        key: "accepted_output_rate",
        label: "Accepted-output rate",
        unit: Unit::Rate,
        value: |_, r| r["accepted_output_rate"].as_f64(),
        n: |m| m.tasks,
    },
    Figure {
        key: "first_attempt_acceptance",
        label: "First-attempt acceptance",
        unit: Unit::Rate,
        value: |_, r| r["first_attempt_acceptance"].as_f64(),
        n: |m| m.tasks,
    },
    Figure {
        key: "terminal_failure",
        label: "Terminal failure",
        unit: Unit::Rate,
        value: |_, r| r["terminal_failure"].as_f64(),
        n: |m| m.tasks,
    },
    Figure {
        key: "retry_recovery",
        label: "Retry recovery",
        unit: Unit::Rate,
        value: |_, r| r["retry_recovery"].as_f64(),
        n: |m| m.retried,
    },
    Figure {
        key: "failed_tool_calls",
        label: "Failed tool calls",
        unit: Unit::Rate,
        value: |_, r| r["failed_tool_calls"].as_f64(),
        n: |m| m.tool_calls,
    },
    Figure {
        key: "high_friction_attempts",
        label: "High-friction attempts",
        unit: Unit::Rate,
        value: |_, r| r["high_friction_attempts"].as_f64(),
        n: |m| m.attempts,
    },
    Figure {
        key: "median_turns",
        label: "Median turns per attempt",
        unit: Unit::Count,
        value: |m, _| m.median_turns,
        n: |m| m.attempts,
    },
    Figure {
        key: "median_queued_to_accepted_ms",
        label: "Median time to accepted output",
        unit: Unit::Ms,
        value: |m, _| m.median_queued_to_accepted_ms,
        n: |m| m.accepted,
    },
    Figure {
        key: "tokens_per_accepted_output",
        label: "Tokens per accepted output",
        unit: Unit::Count,
        value: |_, r| r["tokens_per_accepted_output"].as_f64(),
        n: |m| m.accepted,
    },
    Figure {
        key: "verdict_pass_rate",
        label: "Verdict pass rate (where judged)",
        unit: Unit::Rate,
        value: |_, r| r["verdict_pass_rate"].as_f64(),
        n: |m| m.judged,
    },
    // Knowledge leverage (§13.7.3): each kind of read its own chart, never one score.
    Figure {
        key: "context_reads_per_accepted_output",
        label: "Pinned-context reads per accepted output",
        unit: Unit::PerOutput,
        value: |_, r| r["context_reads_per_accepted_output"].as_f64(),
        n: |m| m.accepted,
    },
    Figure {
        key: "input_reads_per_accepted_output",
        label: "Input-artifact reads per accepted output",
        unit: Unit::PerOutput,
        value: |_, r| r["input_reads_per_accepted_output"].as_f64(),
        n: |m| m.accepted,
    },
    Figure {
        key: "diary_reads_per_accepted_output",
        label: "Diary reads per accepted output",
        unit: Unit::PerOutput,
        value: |_, r| r["diary_reads_per_accepted_output"].as_f64(),
        n: |m| m.accepted,
    },
];

fn fmt(unit: Unit, v: f64) -> String {
    match unit {
        Unit::Rate => format!("{:.0}%", v * 100.0),
        Unit::Count => format!("{v:.0}"),
        Unit::PerOutput => format!("{v:.2}"),
        Unit::Ms if v >= 60_000.0 => format!("{:.1} min", v / 60_000.0),
        Unit::Ms => format!("{:.1} s", v / 1000.0),
    }
}

/// A horizontal bar chart as inline SVG, one bar per (label, value, n). Rates are drawn on a
/// fixed 0–100 % scale; other figures against the largest value shown. The numbers are also
/// written as text beside each bar, so the chart is readable without colour or script.
fn chart(fig: &Figure, bars: &[(String, Option<f64>, i64)]) -> Markup {
    const BAR_H: i64 = 22;
    const LABEL_W: i64 = 150;
    const PLOT_W: i64 = 210;
    let height = BAR_H * bars.len().max(1) as i64 + 4;
    let max = match fig.unit {
        Unit::Rate => 1.0,
        _ => bars
            .iter()
            .filter_map(|b| b.1)
            .fold(0.0_f64, f64::max)
            .max(1e-9),
    };
    html! {
        svg.chart role="img" viewBox={"0 0 " (LABEL_W + PLOT_W + 200) " " (height)} width="100%"
            aria-label={(fig.label) " by cohort"} data-figure=(fig.key) {
            @for (i, (label, v, n)) in bars.iter().enumerate() {
                @let y = i as i64 * BAR_H + 2;
                @let small = *n < SMALL_SAMPLE_TASKS;
                text x="0" y=(y + 15) class="label" { (label.chars().take(16).collect::<String>()) }
                rect x=(LABEL_W) y=(y + 3) width=(PLOT_W) height=(BAR_H - 6) class="track" {}
                @if let Some(v) = v {
                    @let w = ((v / max).clamp(0.0, 1.0) * PLOT_W as f64).round() as i64;
                    rect x=(LABEL_W) y=(y + 3) width=(w) height=(BAR_H - 6) class={"bar" @if small { " small" }} {}
                }
                text x=(LABEL_W + PLOT_W + 6) y=(y + 15) class="value" {
                    @match v { Some(v) => (fmt(fig.unit, *v)), None => "—" }
                    " (n=" (n) ")" @if small { " small" }
                }
            }
        }
    }
}

/// Days in the "over time" series.
const SERIES_DAYS: i64 = 14;
const DAY_MS: i64 = 86_400_000;

/// A time series as inline SVG columns, one per day: the value's height (rates on 0–100 %),
/// the day under it, `n` above; a day with fewer than the small-sample tasks is drawn light
/// and marked `s`, a day without a denominator has no column. Values are in each column's
/// title too.
fn series(fig: &Figure, days: &[(String, Option<f64>, i64)]) -> Markup {
    const COL_W: i64 = 30;
    const PLOT_H: i64 = 60;
    const TOP: i64 = 16;
    let width = COL_W * days.len().max(1) as i64;
    let max = match fig.unit {
        Unit::Rate => 1.0,
        _ => days
            .iter()
            .filter_map(|d| d.1)
            .fold(0.0_f64, f64::max)
            .max(1e-9),
    };
    html! {
        svg.chart.series role="img" viewBox={"0 0 " (width) " " (TOP + PLOT_H + 36)} width="100%"
            aria-label={(fig.label) " per day"} data-figure=(fig.key) {
            line x1="0" y1=(TOP + PLOT_H) x2=(width) y2=(TOP + PLOT_H) class="axis" {}
            @for (i, (label, v, n)) in days.iter().enumerate() {
                @let x = i as i64 * COL_W;
                @let small = *n < SMALL_SAMPLE_TASKS;
                @if let Some(v) = v {
                    @let h = ((v / max).clamp(0.0, 1.0) * PLOT_H as f64).round() as i64;
                    rect x=(x + 5) y=(TOP + PLOT_H - h) width=(COL_W - 10) height=(h.max(1)) class={"bar" @if small { " small" }} {
                        title { (label) ": " (fmt(fig.unit, *v)) " (n=" (n) ")" @if small { ", small sample" } }
                    }
                }
                @if *n > 0 {
                    text x=(x + COL_W / 2) y=(TOP - 4) class="n" text-anchor="middle" { (n) @if small { "s" } }
                }
                // Every third day, counted back from today, so labels never touch.
                @if (days.len() - 1 - i).is_multiple_of(3) {
                    text x=(x + COL_W / 2) y=(TOP + PLOT_H + 16) class="day" text-anchor="middle" { (label) }
                }
            }
        }
        p.legend.muted { "Numbers above the columns are each day's tasks (n); " em { "s" } " marks a small sample. Medians are shown for the windows above only." }
    }
}

pub async fn page(State(s): State<AppState>, signed: Signed, q: QueryMap) -> Response {
    let mut q = q;
    q.0.entry("by".into()).or_insert_with(|| "type".into());
    let p = match params(&q) {
        Ok(p) => p,
        Err(e) => return view::error_page(Some(&signed), e.status, &e.detail),
    };
    let now = s.host.now_ms();
    let (body, rows) = match compute(&s, &p, now).await {
        Ok(x) => x,
        Err(e) => return view::error_page(Some(&signed), e.status, &e.detail),
    };
    let over_time = match over_time(&s, &p, now).await {
        Ok(x) => x,
        Err(e) => return view::error_page(Some(&signed), e.status, &e.detail),
    };
    let window = p
        .since
        .as_ref()
        .map(|x| x.0.clone())
        .unwrap_or_else(|| "all".into());
    let thread = p
        .correlation
        .as_ref()
        .map(|c| format!("&correlation={}", view::url_encode(c)))
        .unwrap_or_default();
    let link = |by: &str, since: &str| {
        format!(
            "{BASE}/measures?by={by}&since={}{thread}",
            view::url_encode(since)
        )
    };
    let html_body = html! {
        h1 { "Measures" }
        p.lead {
            "Each figure on its own, by cohort and over time; never one combined score. "
            "Computed by the store from the board and from the host's own journal of each attempt's run."
        }
        @if let Some(c) = &p.correlation {
            p #thread-filter {
                "Only thread " code { (inert(c)) } ": "
                a href={(BASE) "/threads/" (view::seg(c))} { "its tasks in order" } " · "
                a href={(BASE) "/measures?by=" (p.by_word)} { "every task" }
            }
        }
        (filters(&p.by_word, &window, &link))
        (thresholds(&p))
        @if rows.is_empty() {
            p.empty { "No task in this window yet. Offer tasks with " code { "vouch task offer" } " and run a worker (" code { "vouch worker --name NAME --script FILE --drain" } "); their figures appear here." }
        } @else {
            (cohort_table(&rows, &body))
            (figure_charts(&rows, &over_time, &p.by_word))
        }
    };
    let b = {
        let store = s.store.clone();
        blocking(move || Ok(vouch_runtime::inbox::badge(store.as_ref())?))
            .await
            .ok()
    };
    view::render(
        Some((&signed, b)),
        StatusCode::OK,
        Page {
            title: "Measures",
            live: None,
        },
        html_body,
    )
}

/// When an attempt counts as high-friction and when a sample is too small to read as a rate.
fn thresholds(p: &Params) -> Markup {
    html! {
        p.thresholds #thresholds {
            "Thresholds: an attempt is high-friction at ≥ " (p.friction_turns) " turns or ≥ "
            (p.friction_failed_tools) " failed tool calls; a cohort with fewer than "
            (SMALL_SAMPLE_TASKS) " tasks (or a figure with a denominator under " (SMALL_SAMPLE_TASKS) ") is marked "
            em { "small" } " — read it as an anecdote, not a rate."
        }
    }
}

/// The cohort and window links: the one shown is marked, every other is a link.
fn filters(by_word: &str, window: &str, link: &dyn Fn(&str, &str) -> String) -> Markup {
    let cohorts = ["all", "type", "tag", "claimant", "profile", "model"];
    html! {
        nav.filters aria-label="Cohort and window" {
            p { "By: "
                @for c in cohorts {
                    @if c == by_word { strong aria-current="true" { (c) } } @else { a href=(link(c, window)) { (c) } }
                    " "
                }
            }
            p { "Window: "
                @for (label, w) in WINDOWS {
                    @let key = match w { Some(ms) => format!("{}h", ms / 3_600_000), None => "all".into() };
                    @if key == window { strong aria-current="true" { (label) } } @else { a href=(link(by_word, &key)) { (label) } }
                    " "
                }
            }
        }
    }
}

/// One figure each: its bars by cohort and its series by day.
fn figure_charts(rows: &[MeasureRow], over_time: &[(String, MeasureRow)], by_word: &str) -> Markup {
    html! {
        div.charts {
            @for fig in &FIGURES {
                @let bars: Vec<_> = rows.iter().map(|r| {
                    let rr = rates(r);
                    (inert(&r.cohort), (fig.value)(r, &rr), (fig.n)(r))
                }).collect();
                @let times: Vec<_> = over_time.iter().map(|(label, r)| {
                    let rr = rates(r);
                    (label.clone(), (fig.value)(r, &rr), (fig.n)(r))
                }).collect();
                figure.figure {
                    figcaption { strong { (fig.label) } }
                    p.sub { "by " (by_word) }
                    (chart(fig, &bars))
                    p.sub { "all tasks, by the day they were queued (last " (SERIES_DAYS) " days, UTC)" }
                    (series(fig, &times))
                }
            }
        }
    }
}

/// Every task's figures per day over the last `SERIES_DAYS` days, labelled by day.
async fn over_time(s: &AppState, p: &Params, now: i64) -> ApiResult<Vec<(String, MeasureRow)>> {
    // Over time: every task's figures per day over the last SERIES_DAYS days, each day the
    // difference of two windows the store computes (tasks queued since the day's start minus
    // those queued since the next day's start).
    // Day boundaries in UTC: day0 starts the oldest day; the last boundary is tomorrow's start.
    let day0 = now - now.rem_euclid(DAY_MS) - (SERIES_DAYS - 1) * DAY_MS;
    let mut since = vec![];
    for j in 0..=SERIES_DAYS {
        let wp = Params {
            by: Cohort::All,
            by_word: "all".into(),
            since: Some((String::new(), now - (day0 + j * DAY_MS))),
            friction_turns: p.friction_turns,
            friction_failed_tools: p.friction_failed_tools,
            correlation: p.correlation.clone(),
        };
        let (_, r) = compute(s, &wp, now).await?;
        since.push(r.into_iter().next().unwrap_or_default());
    }
    Ok(since
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            let start = day0 + i as i64 * DAY_MS;
            let label = chrono::Utc
                .timestamp_millis_opt(start)
                .single()
                .map(|t| t.format("%m-%d").to_string())
                .unwrap_or_default();
            (label, w[0].between(&w[1]))
        })
        .collect())
}

/// The cohorts' counts: tasks, outcomes, attempts, failures by class, reads, sample size.
fn cohort_table(rows: &[MeasureRow], body: &MeasuresBody) -> Markup {
    html! {
        div.scroll {
            table #cohorts {
                thead { tr { th { "Cohort" } th { "Tasks" } th { "Accepted" } th { "Cancelled (apart)" } th { "Attempts" } th { "Failures by class" } th { "Reads (context · input · diary)" } th { "Sample" } } }
                tbody {
                    @for (r, j) in rows.iter().zip(&body.cohorts) {
                        tr {
                            td { (inert(&r.cohort)) }
                            td { (r.tasks) }
                            td { (r.accepted) }
                            td { (r.cancelled) }
                            td { (r.attempts) }
                            td.classes {
                                "outage " (r.failed_model_outage) " · tool " (r.failed_tool_error)
                                " · malformed " (r.failed_malformed_output) " · policy " (r.failed_policy_refusal)
                                " · crash " (r.failed_worker_crash)
                            }
                            td.reads { (r.context_reads) " · " (r.input_reads) " · " (r.diary_reads) }
                            td { @if j["small_sample"] == true { span.warn { "small sample" } } @else { "ok" } }
                        }
                    }
                }
            }
        }
    }
}
