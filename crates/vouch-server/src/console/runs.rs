//! The runs page (issue 28): every run, newest first, filtered by state, outcome, trigger,
//! schedule, task, time window and title, and paged. It reads through the store's one filter
//! (`Store::runs_filtered`, the same the CLI's `runs list` uses); it decides nothing.

use super::plain;
use super::session::Signed;
use super::view::{self, inert, run_link, url_encode, when, Page};
use super::BASE;
use crate::extract::QueryMap;
use crate::problem::ApiError;
use crate::{blocking, AppState};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use vouch_core::{Outcome, RunState, TriggerKind};
use vouch_store::{RunFilter, RunRecord};

/// Runs per page.
pub const RUNS_PAGE: usize = 50;
/// How far a person can page back (the API's own bound on `offset`).
pub const RUNS_OFFSET_MAX: usize = 100_000;
/// The windows offered for "started within".
const WINDOWS: [(&str, &str); 4] = [
    ("1h", "the last hour"),
    ("24h", "the last 24 hours"),
    ("7d", "the last 7 days"),
    ("30d", "the last 30 days"),
];

/// A vocabulary word from the query: one of `all`, or a 400 naming the field.
fn pick<T: Copy>(
    q: &QueryMap,
    name: &str,
    all: &[T],
    word: fn(T) -> &'static str,
) -> Result<Option<T>, ApiError> {
    match q.0.get(name).map(String::as_str) {
        None | Some("") => Ok(None),
        Some(w) => all
            .iter()
            .copied()
            .find(|v| word(*v) == w)
            .map(Some)
            .ok_or_else(|| {
                let words: Vec<_> = all.iter().map(|v| word(*v)).collect();
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "bad_query",
                    format!("`{name}` must be one of {}", words.join(", ")),
                )
                .with_field(name)
            }),
    }
}

/// A name or id from the query: printable text, or a 400 naming the field.
fn text(q: &QueryMap, name: &str) -> Result<Option<String>, ApiError> {
    match q.0.get(name).map(|s| s.trim()) {
        None | Some("") => Ok(None),
        Some(t) => vouch_core::input::check_id(t)
            .map(|()| Some(t.to_string()))
            .map_err(|e| {
                ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "bad_query",
                    format!("`{name}` {e}"),
                )
                .with_field(name)
            }),
    }
}

const STATES: [RunState; 5] = [
    RunState::Created,
    RunState::Declaring,
    RunState::Running,
    RunState::Suspended,
    RunState::Ended,
];
const OUTCOMES: [Outcome; 5] = [
    Outcome::Succeeded,
    Outcome::Partial,
    Outcome::Failed,
    Outcome::Withdrawn,
    Outcome::Missed,
];
const TRIGGERS: [TriggerKind; 4] = [
    TriggerKind::Interactive,
    TriggerKind::Scheduled,
    TriggerKind::Event,
    TriggerKind::Task,
];

/// The filter a query asks for (`since` is a window before `now_ms`).
pub fn filter(q: &QueryMap, now_ms: i64) -> Result<RunFilter, ApiError> {
    let since_ms = match q.0.get("since").map(String::as_str) {
        None | Some("") => None,
        Some(w) => Some(
            now_ms
                - vouch_core::input::window_ms(w).ok_or_else(|| {
                    ApiError::new(
                        StatusCode::BAD_REQUEST,
                        "bad_query",
                        "`since` is a positive number and one of s m h d, like 24h",
                    )
                    .with_field("since")
                })?,
        ),
    };
    Ok(RunFilter {
        state: pick(q, "state", &STATES, RunState::as_str)?,
        outcome: pick(q, "outcome", &OUTCOMES, Outcome::as_str)?,
        trigger: pick(q, "trigger", &TRIGGERS, TriggerKind::as_str)?,
        schedule: text(q, "schedule")?,
        task: text(q, "task")?,
        since_ms,
        until_ms: None,
        title: text(q, "q")?,
    })
}

/// The query that shows `f` again at `offset` (for the paging links).
fn query_of(q: &QueryMap, offset: usize) -> String {
    let mut parts: Vec<String> = [
        "q", "state", "outcome", "trigger", "schedule", "task", "since",
    ]
    .iter()
    .filter_map(|k| {
        q.0.get(*k)
            .filter(|v| !v.is_empty())
            .map(|v| format!("{k}={}", url_encode(v)))
    })
    .collect();
    if offset > 0 {
        parts.push(format!("offset={offset}"));
    }
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

fn select<T: Copy>(
    name: &str,
    label: &str,
    all: &[T],
    term: fn(T) -> &'static str,
    words: fn(T) -> &'static str,
    chosen: Option<&String>,
) -> Markup {
    html! {
        label for=(name) { (label) }
        select #(name) name=(name) {
            option value="" { "any" }
            @for v in all {
                option value=(term(*v)) selected[chosen.map(String::as_str) == Some(term(*v))] { (words(*v)) " (" (term(*v)) ")" }
            }
        }
    }
}

fn took(r: &RunRecord, now_ms: i64) -> String {
    let end = r.ended_ms.unwrap_or(now_ms);
    let s = (end - r.created_ms).max(0) as f64 / 1000.0;
    let t = if s < 60.0 {
        format!("{s:.1} s")
    } else if s < 3600.0 {
        format!("{:.0} min", s / 60.0)
    } else {
        format!("{:.1} h", s / 3600.0)
    };
    if r.ended_ms.is_some() {
        t
    } else {
        format!("{t} so far")
    }
}

fn form(q: &QueryMap) -> Markup {
    let get = |k: &str| q.0.get(k).cloned().unwrap_or_default();
    html! {
        form.filters method="get" action={(BASE) "/runs"} role="search" aria-label="Filter runs" {
            div { label for="q" { "Title holds" } input #q type="search" name="q" value=(get("q")) placeholder="notes"; }
            div { (select("state", "State", &STATES, RunState::as_str, plain::state, q.0.get("state"))) }
            div { (select("outcome", "Outcome", &OUTCOMES, Outcome::as_str, plain::outcome, q.0.get("outcome"))) }
            div { (select("trigger", "Started", &TRIGGERS, TriggerKind::as_str, plain::trigger, q.0.get("trigger"))) }
            div { label for="schedule" { "Schedule" } input #schedule type="text" name="schedule" value=(get("schedule")) size="10"; }
            div { label for="task" { "Task" } input #task type="text" name="task" value=(get("task")) size="12"; }
            div {
                label for="since" { "Within" }
                select #since name="since" {
                    option value="" { "any time" }
                    @for (w, words) in WINDOWS { option value=(w) selected[get("since") == w] { (words) } }
                }
            }
            div.go { button type="submit" { "Show runs" } " " a href={(BASE) "/runs"} { "Clear" } }
        }
    }
}

pub async fn page(
    State(s): State<AppState>,
    signed: Signed,
    q: Result<QueryMap, ApiError>,
) -> Response {
    let q = match q {
        Ok(q) => q,
        Err(e) => return view::error_page(Some(&signed), e.status, &e.detail),
    };
    let now = s.host.now_ms();
    let read = filter(&q, now).and_then(|f| Ok((f, q.number("offset", 0, 0, RUNS_OFFSET_MAX)?)));
    let (f, offset) = match read {
        Ok(x) => x,
        Err(e) => return view::error_page(Some(&signed), e.status, &e.detail),
    };
    let store = s.store.clone();
    let (f2, filtered) = (f.clone(), f != RunFilter::default());
    let runs = match blocking(move || Ok(store.runs_filtered(&f2, offset, RUNS_PAGE + 1)?)).await {
        Ok(r) => r,
        Err(e) => return view::error_page(Some(&signed), e.status, &e.detail),
    };
    let more = runs.len() > RUNS_PAGE;
    let tz = signed.session.tz;
    let body = html! {
        h1 { "Runs" }
        p.page-actions { a.button.primary #start-run href={(BASE) "/runs/new"} { "Start a run" } }
        (form(&q))
        @if runs.is_empty() {
            @if filtered { p.empty { "No run matches these filters. " a href={(BASE) "/runs"} { "Show every run" } "." } }
            @else { p.empty { "No run yet. " a href={(BASE) "/runs/new"} { "Start one from a script" } ", or with " code { "vouch run \"…\" --script FILE" } "." } }
        } @else {
            div.scroll {
                table.runs-table {
                    thead { tr { th { "Title" } th { "State" } th { "Outcome" } th { "Started by" } th { "Started" } th { "Took" } } }
                    tbody {
                        @for r in runs.iter().take(RUNS_PAGE) {
                            tr {
                                td { a href=(run_link(&r.id)) { (inert(&r.title)) } }
                                td { (plain::with_term(plain::state(r.state), r.state.as_str())) }
                                td.(super::pages::outcome_class(r.outcome)) {
                                    @match r.outcome { Some(o) => (plain::with_term(plain::outcome(o), o.as_str())), None => "—" }
                                }
                                td { (plain::trigger(r.trigger)) }
                                td { (when(r.created_ms, tz)) }
                                td { (took(r, now)) }
                            }
                        }
                    }
                }
            }
            nav.paging aria-label="Pages" {
                @if offset > 0 { a rel="prev" href={(BASE) "/runs" (query_of(&q, offset.saturating_sub(RUNS_PAGE)))} { "← Newer" } }
                span.muted { "Runs " (offset + 1) "–" (offset + runs.len().min(RUNS_PAGE)) }
                @if more { a rel="next" href={(BASE) "/runs" (query_of(&q, offset + RUNS_PAGE))} { "Older →" } }
            }
        }
    };
    let b = super::pages::badge(&s).await;
    view::render(
        Some((&signed, b)),
        StatusCode::OK,
        Page {
            title: "Runs",
            live: None,
        },
        body,
    )
}
