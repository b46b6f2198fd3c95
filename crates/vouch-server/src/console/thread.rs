//! A thread's page (§13.1, §17.3): every task of one correlation in the order offered, each
//! with its attempts, its accepted output and the verdicts on it. Read through the store's
//! `thread`, the same function `vouch task thread` prints.

use super::session::Signed;
use super::view::{self, hash, inert, json_view, run_link, seg, when, Page};
use super::BASE;
use crate::extract::ApiPath;
use crate::problem::ApiError;
use crate::{blocking, AppState};
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::{html, Markup};
use vouch_store::board::{thread, ThreadTask};

fn task_view(t: &ThreadTask, tz: chrono_tz::Tz) -> Markup {
    html! {
        article.thread-task data-task=(t.task.id) {
            h2 {
                a href={(BASE) "/board/" (seg(&t.task.id))} { code { (inert(&t.task.id)) } }
                " · " span.status { (t.task.state.as_str()) } " · " (inert(&t.task.kind))
            }
            p { (inert(&t.task.spec.brief)) }
            p.meta { "offered " (when(t.task.created_ms, tz)) " · " (t.task.attempts) "/" (t.task.max_attempts) " attempts" }
            @if !t.attempts.is_empty() {
                table.attempts {
                    thead { tr { th { "Attempt" } th { "State" } th { "Claimant" } th { "Tokens" } th { "Run" } th { "Why it ended" } } }
                    tbody {
                        @for a in &t.attempts {
                            tr data-attempt=(a.n) {
                                td { (a.n) }
                                td.status { (a.state.as_str()) }
                                td { (inert(&a.claimant)) }
                                td { (a.usage.tokens) }
                                td { @match &a.run_id { Some(r) => { a href=(run_link(r)) { (inert(r)) } } None => "—" } }
                                td { (a.end_reason.as_deref().map(inert).unwrap_or_default()) }
                            }
                        }
                    }
                }
            }
            @if let (Some(id), Some(v)) = (&t.task.result_id, &t.result) {
                h3 { "Accepted output " (hash(id)) }
                (json_view(v))
            }
            @for (judge, v) in &t.verdicts {
                p.verdict {
                    "Verdict by " a href={(BASE) "/board/" (seg(judge))} { (inert(judge)) } ": "
                    @if v.passed { span.ok { "passed" } } @else { span.bad { "not passed" } }
                }
                (json_view(&v.scores))
            }
        }
    }
}

pub async fn page(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath(id): ApiPath<String>,
) -> Response {
    let Some(board) = s.board.clone() else {
        return view::error_page(
            Some(&signed),
            StatusCode::NOT_FOUND,
            "This server has no task board.",
        );
    };
    let cid = id.clone();
    let read = blocking(move || {
        let tasks = thread(board.as_ref(), &cid)?;
        if tasks.is_empty() {
            return Err(ApiError::not_found(format!(
                "No task has correlation `{cid}`, and none has that id. Offer one with `vouch task offer --correlation {cid}`."
            )));
        }
        Ok(tasks)
    })
    .await;
    let tasks = match read {
        Ok(t) => t,
        Err(e) => return view::error_page(Some(&signed), e.status, &e.detail),
    };
    let tz = signed.session.tz;
    let body = html! {
        p.crumbs { a href={(BASE) "/board"} { "← Board" } }
        h1 { "Thread " code { (inert(&id)) } }
        p.lead {
            (tasks.len()) " tasks, in the order they were offered. "
            a href={(BASE) "/measures?by=type&correlation=" (view::url_encode(&id))} { "This thread's measures" }
        }
        @for t in &tasks { (task_view(t, tz)) }
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
            title: "Thread",
            live: None,
        },
        body,
    )
}
