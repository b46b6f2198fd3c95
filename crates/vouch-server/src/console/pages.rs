//! The console's pages. Reads use the runtime's library functions (inbox, approvals, run
//! detail, doctor) and the stores' read methods; every decision goes through the JSON API's
//! own handler (`crate::api`), so the console decides nothing.

use super::actions::act;
use super::session::Signed;
use super::view::{
    self, card_link, hash, inert, inert_text, json_view, raw_json, run_link, seg, when, Live, Page,
};
use super::{BASE, EDIT_PAYLOAD_BYTES_MAX, INBOX_ACTIVE_MAX};
use crate::dto::{AnswerBody, ApproveBody, EditBody};
use crate::extract::{ApiJson, ApiPath, QueryMap};
use crate::problem::ApiError;
use crate::{api, blocking, AppState};
use axum::body::Bytes;
use axum::extract::State;
use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::{html, Markup};
use serde_json::Value;
use std::collections::BTreeMap;
use vouch_core::board::{AttemptState, TaskState};
use vouch_core::RunId;
use vouch_core::{Outcome, RunState};
use vouch_runtime::inbox::Todo;
use vouch_store::board::{AttemptRecord, TaskFilter, TaskRecord, TASK_LIST_MAX};
use vouch_store::{CardState, EventKind, JournalEntry, RunRecord};

/// The badge for the header: open cards, computed now (§11.4).
pub(super) async fn badge(s: &AppState) -> Option<usize> {
    let store = s.store.clone();
    blocking(move || Ok(vouch_runtime::inbox::badge(store.as_ref())?))
        .await
        .ok()
}

async fn show(
    s: &AppState,
    signed: &Signed,
    title: &str,
    live: Option<Live<'_>>,
    body: Markup,
) -> Response {
    let b = badge(s).await;
    view::render(
        Some((signed, b)),
        StatusCode::OK,
        Page { title, live },
        body,
    )
}

fn failed(signed: &Signed, e: ApiError) -> Response {
    view::error_page(Some(signed), e.status, &e.detail)
}

/// A console address that names no page: said in words, with the way back.
pub async fn not_found(signed: Signed) -> Response {
    view::error_page(
        Some(&signed),
        StatusCode::NOT_FOUND,
        "There is no such page in the console. Use the menu above, or start from the inbox.",
    )
}

pub async fn root() -> Redirect {
    Redirect::to(&format!("{BASE}/"))
}

pub(super) fn outcome_class(o: Option<Outcome>) -> &'static str {
    match o {
        Some(Outcome::Succeeded) => "ok",
        Some(Outcome::Failed | Outcome::Missed) => "bad",
        Some(Outcome::Partial) => "warn",
        _ => "muted",
    }
}

fn outcome_word(r: &RunRecord) -> String {
    match r.outcome {
        Some(o) => crate::dto::word(o),
        None => crate::dto::word(r.state),
    }
}

fn todo_text(t: &Todo) -> Markup {
    match t {
        Todo::ResumedAs { run } => {
            html! { "Continued as run " a href=(run_link(run)) { (inert(run)) } "; nothing to do here." }
        }
        Todo::NeedsYou { items } => {
            html! { "Needs you: " (inert(&items.join(", "))) ". Open the run to see what is left to do." }
        }
        Todo::Interrupted => {
            html! { "Interrupted when its process stopped. Resume it with " code { "vouch resume RUN" } "." }
        }
        Todo::SeeWhatFailed => html! { "Read the receipt: it says what did not happen and why." },
        Todo::Receipt => html! { "Nothing to do; the receipt says what happened." },
    }
}

pub async fn inbox(State(s): State<AppState>, signed: Signed) -> Response {
    let store = s.store.clone();
    let read = blocking(move || {
        let version = super::live::inbox_version(store.as_ref())?.1;
        let inbox = vouch_runtime::inbox::inbox(store.as_ref())?;
        let cards = vouch_runtime::approvals::open_cards(store.as_ref())?;
        let mut titles = BTreeMap::new();
        for c in &cards {
            if let Some(r) = store.run(&c.run)? {
                titles.insert(c.run.clone(), r.title);
            }
        }
        Ok((inbox, cards, titles, version))
    })
    .await;
    let (inbox, cards, titles, version) = match read {
        Ok(x) => x,
        Err(e) => return failed(&signed, e),
    };
    let tz = signed.session.tz;
    let attention: Vec<_> = inbox
        .ended
        .iter()
        .filter(|e| {
            matches!(
                e.todo,
                Todo::NeedsYou { .. } | Todo::SeeWhatFailed | Todo::Interrupted
            )
        })
        .collect();
    let receipts: Vec<_> = inbox
        .ended
        .iter()
        .filter(|e| matches!(e.todo, Todo::Receipt | Todo::ResumedAs { .. }))
        .collect();
    let active: Vec<_> = inbox
        .runs
        .iter()
        .filter(|r| r.state != RunState::Ended)
        .take(INBOX_ACTIVE_MAX)
        .collect();
    let body = html! {
        h1 { "Inbox" }
        p.notice #inbox-changed role="status" aria-live="polite" data-version=(version) hidden {
            "Something new arrived. " a href={(BASE) "/"} { "Show it" }
        }
        p.lead #waiting data-waiting=(inbox.waiting) {
            @if inbox.waiting == 0 { "Nothing waits for you." }
            @else if inbox.waiting == 1 { "1 thing waits for you." }
            @else { (inbox.waiting) " things wait for you." }
        }
        (waiting_cards(&cards, &titles, tz))
        (needs_a_look(&attention))
        (in_progress(&active, tz))
        (receipts_list(&receipts, tz))
    };
    show(&s, &signed, "Inbox", Some(Live::Inbox), body).await
}

/// The inbox's receipts: ended runs with nothing more to do but read what they did.
fn receipts_list(receipts: &[&vouch_runtime::inbox::InboxEntry], tz: chrono_tz::Tz) -> Markup {
    html! {
        section aria-labelledby="h-receipts" {
            h2 #h-receipts { "Receipts" }
            @if receipts.is_empty() {
                p.empty { "No receipt yet. " a href={(BASE) "/runs/new"} { "Start a run" } " (or " code { "vouch run \"…\" --script FILE" } ", or offer a task to the board); what it really did lands here." }
            } @else {
                ul.runs {
                    @for e in receipts {
                        li {
                            a href=(run_link(&e.run.id)) { (inert(&e.run.title)) }
                            " " span.(outcome_class(e.run.outcome)) { (outcome_word(&e.run)) }
                            " " span.muted { (when(e.run.ended_ms.unwrap_or(e.run.created_ms), tz)) }
                            p.todo { (todo_text(&e.todo)) }
                        }
                    }
                }
            }
        }
    }
}

/// The inbox's ended runs that need a look (needs you, failed, interrupted).
fn needs_a_look(attention: &[&vouch_runtime::inbox::InboxEntry]) -> Markup {
    html! {
        @if !attention.is_empty() {
            section aria-labelledby="h-attention" {
                h2 #h-attention { "Needs a look" }
                ul.runs {
                    @for e in attention {
                        li {
                            a href=(run_link(&e.run.id)) { (inert(&e.run.title)) }
                            " " span.(outcome_class(e.run.outcome)) { (outcome_word(&e.run)) }
                            p.todo { (todo_text(&e.todo)) }
                        }
                    }
                }
            }
        }
    }
}

/// The inbox's runs that have not ended.
fn in_progress(active: &[&RunRecord], tz: chrono_tz::Tz) -> Markup {
    html! {
        @if !active.is_empty() {
            section aria-labelledby="h-active" {
                h2 #h-active { "In progress" }
                ul.runs {
                    @for r in active {
                        li {
                            a href=(run_link(&r.id)) { (inert(&r.title)) }
                            " " span.muted { (super::plain::state(r.state)) " since " (when(r.created_ms, tz)) }
                        }
                    }
                }
            }
        }
    }
}

/// The inbox's open cards: each approval and question with its run's title and a link to
/// decide or answer it.
fn waiting_cards(
    cards: &[vouch_runtime::approvals::OpenCard],
    titles: &BTreeMap<String, String>,
    tz: chrono_tz::Tz,
) -> Markup {
    html! {
        section aria-labelledby="h-cards" {
            h2 #h-cards { "Waiting for you" }
            @if cards.is_empty() {
                p.empty { "No card waits for a decision. When a run needs your approval or asks a question, it appears here." }
            } @else {
                ul.cards {
                    @for c in cards {
                        li.card {
                            @match &c.delivery {
                                Some(d) => {
                                    p.kind { "Approval · " (inert(titles.get(&c.run).map(String::as_str).unwrap_or(&c.run))) }
                                    p.summary { (inert_text(&c.summary)) }
                                    p.reason { "Why you are asked: " (inert(&c.reason)) }
                                    p.meta { "Payload " (hash(&c.payload_hash)) " · " (when(c.created_ms, tz)) }
                                    a.button href=(card_link(&c.run, d, &c.payload_hash)) { "Review and decide" }
                                }
                                None => {
                                    p.kind { "Question · " (inert(titles.get(&c.run).map(String::as_str).unwrap_or(&c.run))) }
                                    p.summary { (inert(&c.summary)) }
                                    p.meta { (when(c.created_ms, tz)) }
                                    a.button href={(run_link(&c.run)) "#answer"} { "Answer it" }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A short description of a journal event for the timeline (the whole body is beside it).
pub(super) fn event_line(kind: EventKind, body: &Value) -> String {
    let pick = |k: &str| body.get(k).and_then(Value::as_str).map(str::to_string);
    let text = match kind {
        EventKind::Terminal => body
            .get("outcome")
            .and_then(Value::as_str)
            .map(|o| format!("ended: {o}")),
        _ => pick("reason")
            .or_else(|| pick("status"))
            .or_else(|| pick("summary"))
            .or_else(|| pick("state"))
            .or_else(|| pick("text")),
    };
    text.map(|t| {
        let t = inert(&t);
        if t.chars().count() > 160 {
            format!("{}…", t.chars().take(160).collect::<String>())
        } else {
            t
        }
    })
    .unwrap_or_default()
}

/// What a person may do with a run from its page: cancel it while it has not ended; resume
/// one that ended without its work (interrupted, or with drafts to finish) and has no
/// continuation yet. The API decides; a refusal comes back in words.
fn run_actions(rec: &RunRecord, no_continuation: bool, csrf: &str) -> Markup {
    let cancel = rec.state != RunState::Ended;
    let resume = rec.state == RunState::Ended
        && no_continuation
        && !matches!(rec.outcome, Some(Outcome::Succeeded | Outcome::Withdrawn));
    html! {
        @if cancel || resume {
            div.actions {
                @if resume {
                    form method="post" action={(run_link(&rec.id)) "/resume"} {
                        input type="hidden" name="csrf" value=(csrf);
                        button.primary #resume type="submit" { "Resume: finish what is left" }
                    }
                }
                @if cancel {
                    form method="post" action={(run_link(&rec.id)) "/cancel"} {
                        input type="hidden" name="csrf" value=(csrf);
                        button.danger #cancel type="submit" { "Cancel this run" }
                    }
                }
            }
        }
    }
}

/// Bytes of a journal event's body shown inline on the timeline at most; a larger one (a long
/// tool result) stays behind its "Raw event" toggle.
const STEP_INLINE_BYTES_MAX: usize = 4096;

/// A step's inputs and outputs inline (tool calls and results, payloads, observations,
/// evidence): the event's body as labelled rows, every string inert.
fn step_io(body: &Value) -> Markup {
    let size = body.to_string().len();
    match body {
        Value::Object(m) if !m.is_empty() && size <= STEP_INLINE_BYTES_MAX => {
            html! { div.io { (json_view(body)) } }
        }
        Value::Object(m) if !m.is_empty() => {
            html! { p.io.muted { "A large step (" (size) " bytes): open the raw event below." } }
        }
        _ => html! {},
    }
}

/// One step of a run's timeline, in full: what it is, when, its hash, its inputs and outputs
/// inline and the raw event. The same markup on the page as drawn and for a step that arrives
/// live (`fresh`), so a step seen live shows what a reload shows.
pub(super) fn timeline_entry(e: &JournalEntry, tz: chrono_tz::Tz, fresh: bool) -> Markup {
    html! {
        li.fresh[fresh] data-seq=(e.seq) {
            span.seq { "#" (e.seq) }
            " " strong.kind { (e.kind.as_str()) }
            @if let Some(d) = &e.delivery { " " span.muted { (inert(d)) } }
            " " span.what { (event_line(e.kind, &e.body)) }
            " " span.muted { (when(e.at_ms, tz)) }
            " " (hash(&e.hash))
            (step_io(&e.body))
            details {
                summary { "Raw event" }
                p { "prev " (hash(&e.prev_hash)) }
                (raw_json(&e.body.to_string()))
            }
        }
    }
}

pub async fn run(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath(id): ApiPath<String>,
) -> Response {
    let store = s.store.clone();
    let rid = id.clone();
    let read = blocking(move || run_page_data(store.as_ref(), &rid)).await;
    let (rec, detail, journal, receipt, cards, children) = match read {
        Ok(x) => x,
        Err(e) => return failed(&signed, e),
    };
    let ended = rec.state == RunState::Ended;
    if !ended {
        // The page is the run's surface: while it is open the person is watching (§11.1).
        s.console.watch(&rec.id, s.host.now_ms());
    }
    let tz = signed.session.tz;
    let chain = vouch_store::verify_chain(&journal);
    // Evidence and reasons as the journal's fold states them (the receipt's own source).
    let fold = vouch_runtime::view::RunView::from_journal(&journal);
    let open: Vec<_> = cards
        .iter()
        .filter(|c| c.state == CardState::Open)
        .collect();
    let last_seq = journal.last().map(|e| e.seq).unwrap_or(0);
    let body = html! {
        h1 { (inert(&rec.title)) }
        (run_facts(&rec, &children, tz))
        (run_actions(&rec, children.is_empty(), &signed.session.csrf))
        (open_cards_section(&rec.id, &open, &signed.session.csrf))
        (deliveries_table(&detail, &fold))
        section aria-labelledby="h-receipt" #receipt-section {
            h2 #h-receipt { "Receipt" }
            @match &receipt {
                Some(r) => { pre #receipt.receipt { (inert_text(r)) } }
                None => {
                    p #receipt-waiting.empty aria-live="polite" { "The run has not ended; its receipt appears here as soon as it does, without reloading." }
                    pre #receipt.receipt hidden {}
                }
            }
        }
        section aria-labelledby="h-journal" {
            h2 #h-journal { "Journal" }
            @match &chain {
                Ok(()) => p.ok #chain { (super::live::chain_words(journal.len())) }
                Err(b) => p.bad #chain role="alert" { "Chain broken at event " (b.seq) ": " (inert(&b.reason)) ". Run " code { "vouch journal verify" } "." }
            }
            ol.timeline #timeline data-after=(last_seq) {
                @for e in &journal { (timeline_entry(e, tz, false)) }
            }
        }
    };
    let live = (!ended).then_some(Live::Run(rec.id.as_str()));
    show(&s, &signed, &inert(&rec.title), live, body).await
}

/// The run's facts: outcome, trigger, when it started and ended, what it continues and what
/// continues it.
fn run_facts(rec: &RunRecord, children: &[RunRecord], tz: chrono_tz::Tz) -> Markup {
    html! {
        dl.facts {
            dt { "Outcome" } dd #outcome.(outcome_class(rec.outcome)) { (outcome_word(rec)) }
            dt { "Started by" } dd { (super::plain::with_term(super::plain::trigger(rec.trigger), rec.trigger.as_str())) }
            dt { "Started" } dd { (when(rec.created_ms, tz)) }
            dt { "Ended" }
            dd #ended {
                @match rec.ended_ms {
                    Some(t) => (when(t, tz)),
                    None => span.muted { "not yet (" (super::plain::state(rec.state)) ")" },
                }
            }
            @if let Some(p) = &rec.parent {
                dt { "Continues" } dd { a href=(run_link(p)) { "run " (inert(p)) } }
            }
            @for c in children {
                dt { "Continued as" } dd { a href=(run_link(&c.id)) { "run " (inert(&c.id)) } }
            }
            dt { "Run id" } dd { code { (inert(&rec.id)) } }
        }
    }
}

/// What the run page shows: the run, its detail, journal, receipt, cards and the runs that
/// continue it.
type RunPageData = (
    RunRecord,
    vouch_runtime::runs::RunDetail,
    Vec<JournalEntry>,
    Option<String>,
    Vec<vouch_store::Card>,
    Vec<RunRecord>,
);

fn run_page_data(
    store: &dyn vouch_store::Store,
    rid: &str,
) -> crate::problem::ApiResult<RunPageData> {
    let rec = store.run(rid)?.ok_or_else(|| {
        ApiError::not_found(format!(
            "There is no run `{rid}`. Open the inbox to see the runs there are."
        ))
    })?;
    let detail = vouch_runtime::runs::detail(store, rec.clone())?;
    let journal = store.journal(rid)?;
    let receipt = store.receipt(rid)?;
    let cards = store.cards_for_run(rid)?;
    let children: Vec<RunRecord> = store
        .runs(vouch_runtime::inbox::INBOX_RUNS_MAX)?
        .into_iter()
        .filter(|r| r.parent.as_deref() == Some(rid))
        .collect();
    Ok((rec, detail, journal, receipt, cards, children))
}

/// The run's open cards: an approval links to its card, a question is answered here.
fn open_cards_section(run: &str, open: &[&vouch_store::Card], csrf: &str) -> Markup {
    html! {
        @if !open.is_empty() {
            section #open-cards aria-labelledby="h-open" {
                h2 #h-open { "Waiting for you" }
                ul.cards {
                    @for c in open {
                        li.card {
                            p.summary { (inert(&c.summary)) }
                            @match &c.delivery {
                                Some(d) => {
                                    p.reason { "Why you are asked: " (inert(&c.reason)) }
                                    a.button href=(card_link(run, d, &c.payload_hash)) { "Review and decide" }
                                }
                                None => {
                                    form #answer method="post" action={(run_link(run)) "/answer"} {
                                        input type="hidden" name="csrf" value=(csrf);
                                        label for="answer-text" { "Your answer" }
                                        textarea #answer-text name="text" rows="3" required {}
                                        button type="submit" { "Answer" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// Each declared item: its verb, destination, the host's decision, status and evidence.
fn deliveries_table(
    detail: &vouch_runtime::runs::RunDetail,
    fold: &vouch_runtime::view::RunView,
) -> Markup {
    html! {
        section aria-labelledby="h-deliveries" {
            h2 #h-deliveries { "Deliveries" }
            @if detail.deliveries.is_empty() {
                p.empty { "This run declared no delivery (yet)." }
            } @else {
                div.scroll {
                    table {
                        thead { tr { th { "Item" } th { "Verb" } th { "Destination" } th { "Host's decision" } th { "Status" } th { "Evidence · why" } } }
                        tbody {
                            @for d in &detail.deliveries {
                                tr data-delivery=(inert(&d.id)) {
                                    td { (inert(&d.id)) }
                                    td { (crate::dto::word(d.verb)) }
                                    td { (inert(&d.destination.to_string())) }
                                    td {
                                        @match d.posture {
                                            Some(p) => (super::plain::with_term(super::plain::posture(p), &crate::dto::word(p))),
                                            None => "—",
                                        }
                                    }
                                    td.status { (super::plain::with_term(super::plain::status(d.status), &crate::dto::word(d.status))) }
                                    td.evidence {
                                        @if let Some(iv) = fold.items.get(&d.id) {
                                            @if !iv.evidence.is_empty() { code { (inert(&iv.evidence)) } }
                                            @if !iv.reason.is_empty() { " " span.muted { (inert(&iv.reason)) } }
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

/// A decision the API refused, said for a card: a card that is not there (404) was decided
/// or superseded meanwhile.
fn decided(e: ApiError, run: &str) -> ApiError {
    if e.status == StatusCode::NOT_FOUND {
        ApiError::not_found(format!("This card is no longer open: it was decided or superseded by an edit. Open run {run} or the inbox for what waits now."))
    } else {
        e
    }
}

pub async fn card(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath((id, delivery)): ApiPath<(String, String)>,
    q: QueryMap,
) -> Response {
    let want = q.0.get("hash").cloned().unwrap_or_default();
    let store = s.store.clone();
    let host = s.host.clone();
    let (rid, did) = (id.clone(), delivery.clone());
    let read = blocking(move || card_page_data(store.as_ref(), &host, &rid, &did, &want)).await;
    let (rec, card, current, payload, (replaced, preview)) = match read {
        Ok(x) => x,
        Err(e) => return failed(&signed, e),
    };
    let tz = signed.session.tz;
    let parsed: Option<Value> = payload
        .as_deref()
        .and_then(|p| serde_json::from_str(p).ok());
    let pretty = parsed.as_ref().map(view::editable_json).unwrap_or_default();
    let edited = q.0.get("edited").cloned();
    let action = |what: &str| {
        format!(
            "{}/runs/{}/cards/{}/{what}",
            BASE,
            seg(&rec.id),
            seg(&delivery)
        )
    };
    let body = html! {
        p.crumbs { a href=(run_link(&rec.id)) { "← " (inert(&rec.title)) } }
        h1 { "Approval card" }
        @if let Some(old) = &edited {
            p.notice role="status" #edited {
                "Edited: the new payload has hash " code #new-hash { (card.payload_hash) }
                ". The card with hash " (hash(old)) " is superseded. Check the payload below, then approve exactly this hash."
            }
        }
        (card_state_notice(&card, current.as_ref(), &rec.id, &delivery, tz))
        dl.facts {
            dt { "What" } dd.summary { (inert_text(&card.summary)) }
            dt { "Why you are asked" } dd.reason { (inert(&card.reason)) }
            dt { "Item" } dd { (inert(&delivery)) }
            dt { "Payload hash" } dd { code.fullhash #payload-hash { (card.payload_hash) } }
            dt { "Opened" } dd { (when(card.created_ms, tz)) }
        }
        (payload_section(parsed.as_ref(), payload.as_deref()))
        @if let Some((diff, cut)) = &preview {
            section aria-labelledby="h-preview" {
                h2 #h-preview { "The change it applies" }
                @if *cut { p.muted { "The diff is long: its first " (vouch_runtime::approvals::REPLACED_BYTES_MAX / 1024) " KiB are shown." } }
                (super::diff::patch(diff))
            }
        }
        @if let (Some((old, cut)), Some(new)) = (&replaced, parsed.as_ref().and_then(|v| v.get("text")).and_then(Value::as_str)) {
            section aria-labelledby="h-diff" {
                h2 #h-diff { "What it changes in the file it replaces" }
                @if *cut { p.muted { "The file is long: the first " (vouch_runtime::approvals::REPLACED_BYTES_MAX / 1024) " KiB are compared." } }
                (super::diff::unified(old, new))
            }
        }
        @if card.state == CardState::Open {
            (decide_forms(&card, parsed.as_ref(), &pretty, &signed.session.csrf, &action))
        }
    };
    show(&s, &signed, "Approval card", None, body).await
}

/// Whether the card can still be decided: superseded (with a link to the current card) or
/// already decided; nothing for an open card.
fn card_state_notice(
    card: &vouch_store::Card,
    current: Option<&vouch_store::Card>,
    run: &str,
    delivery: &str,
    tz: chrono_tz::Tz,
) -> Markup {
    html! {
        @match card.state {
            CardState::Open => {}
            CardState::Superseded => {
                p.bad role="alert" #superseded {
                    "This card was superseded by an edit; it can no longer be approved."
                    @if let Some(c) = current {
                        " " a href=(card_link(run, delivery, &c.payload_hash)) { "Open the current card (" (c.payload_hash.get(..12).unwrap_or("")) ")" }
                    }
                }
            }
            other => {
                p.muted role="status" #decided {
                    "Decided: " (other.as_str())
                    @if let Some(t) = card.decided_ms { " at " (when(t, tz)) }
                    ". " a href=(run_link(run)) { "See the run and its receipt." }
                }
            }
        }
    }
}

/// The exact payload the hash is over, rendered and raw.
fn payload_section(parsed: Option<&Value>, payload: Option<&str>) -> Markup {
    html! {
        section aria-labelledby="h-payload" {
            h2 #h-payload { "The exact payload" }
            @match parsed {
                Some(v) => div #payload-rendered { (json_view(v)) }
                None => p.bad { "The payload with this hash is not in the store; do not approve." }
            }
            details {
                summary { "Raw canonical JSON (what the hash is over)" }
                (raw_json(payload.unwrap_or("")))
            }
        }
    }
}

/// What the card page shows: the run, the card asked for (by hash, else the open one), the
/// card open now, its payload, and (for an open card) what it replaces and the change it
/// applies as its provider shows them.
type CardPageData = (
    RunRecord,
    vouch_store::Card,
    Option<vouch_store::Card>,
    Option<String>,
    (Option<(String, bool)>, Option<(String, bool)>),
);

fn card_page_data(
    store: &dyn vouch_store::Store,
    host: &vouch_runtime::Host,
    rid: &str,
    did: &str,
    want: &str,
) -> crate::problem::ApiResult<CardPageData> {
    let rec = store.run(rid)?.ok_or_else(|| {
        ApiError::not_found(format!(
            "There is no run `{rid}`. Open the inbox to see what waits."
        ))
    })?;
    let cards: Vec<_> = store
        .cards_for_run(rid)?
        .into_iter()
        .filter(|c| c.delivery.as_deref() == Some(did))
        .collect();
    let card = if want.is_empty() {
        cards.iter().find(|c| c.state == CardState::Open).cloned()
    } else {
        let w = want.to_ascii_lowercase();
        cards
            .iter()
            .find(|c| c.payload_hash == w || (w.len() >= 12 && c.payload_hash.starts_with(&w)))
            .cloned()
    };
    let card = card.ok_or_else(|| {
        ApiError::not_found(format!(
            "Run {rid} has no card for {did} with that hash. Open the run to see its cards."
        ))
    })?;
    let current = cards.iter().find(|c| c.state == CardState::Open).cloned();
    let payload = store.payload(&card.payload_hash)?;
    // What an open card's delivery would replace, read by its provider (issue 28).
    let replaced = match card.state {
        CardState::Open => vouch_runtime::approvals::replaced(host, rid, did)?,
        _ => None,
    };
    // The change the payload makes as its provider shows it (a patch's diff).
    let parsed: Option<Value> = payload
        .as_deref()
        .and_then(|p| serde_json::from_str(p).ok());
    let preview = match (card.state, &parsed) {
        (CardState::Open, Some(v)) => vouch_runtime::approvals::previewed(host, rid, did, v)?,
        _ => None,
    };
    Ok((rec, card, current, payload, (replaced, preview)))
}

/// An open card's decisions: approve exactly its hash, deny, or edit the text or the JSON
/// (a new card with a new hash).
fn decide_forms(
    card: &vouch_store::Card,
    parsed: Option<&Value>,
    pretty: &str,
    csrf: &str,
    action: &dyn Fn(&str) -> String,
) -> Markup {
    html! {
        section.decide aria-labelledby="h-decide" {
            h2 #h-decide { "Decide" }
            form method="post" action=(action("approve")) {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="hash" value=(card.payload_hash);
                button.primary #approve type="submit" { "Approve exactly this payload (" (card.payload_hash.get(..12).unwrap_or("")) ")" }
            }
            form method="post" action=(action("deny")) {
                input type="hidden" name="csrf" value=(csrf);
                button.danger #deny type="submit" { "Deny: do not do it" }
            }
            @if let Some(t) = parsed.and_then(|v| v.get("text")).and_then(Value::as_str).filter(|t| view::plain_text(t)) {
                form.edit method="post" action=(action("edit")) {
                    input type="hidden" name="csrf" value=(csrf);
                    input type="hidden" name="from" value=(card.payload_hash);
                    label for="text" { "Edit the text. Saving makes a new card with a new hash, shown before you can approve it." }
                    textarea #text name="text" rows="10" { (t) }
                    button #save-text type="submit" { "Save the text" }
                }
            }
            details.edit-json {
                summary { "Edit the payload as JSON" }
                form.edit method="post" action=(action("edit")) {
                    input type="hidden" name="csrf" value=(csrf);
                    label for="payload" { "The payload (JSON). Saving makes a new card with a new hash, shown before you can approve it." }
                    textarea #payload name="payload" rows="10" spellcheck="false" { (pretty) }
                    button #save-edit type="submit" { "Save the edit" }
                }
            }
        }
    }
}

pub async fn approve(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath((id, delivery)): ApiPath<(RunId, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let caller = signed.caller();
    act(&signed, &headers, &body, |form| async move {
        let hash = form.get("hash").to_string();
        let _ = api::approve(
            State(s),
            caller,
            ApiPath((id.clone(), delivery)),
            ApiJson(ApproveBody { hash }),
        )
        .await
        .map_err(|e| decided(e, &id))?;
        Ok(run_link(&id))
    })
    .await
}

pub async fn deny(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath((id, delivery)): ApiPath<(RunId, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let caller = signed.caller();
    act(&signed, &headers, &body, |_| async move {
        let _ = api::deny(State(s), caller, ApiPath((id.clone(), delivery)))
            .await
            .map_err(|e| decided(e, &id))?;
        Ok(run_link(&id))
    })
    .await
}

pub async fn edit(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath((id, delivery)): ApiPath<(RunId, String)>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let caller = signed.caller();
    act(&signed, &headers, &body, |form| async move {
        let payload = if form.0.contains_key("text") {
            edited_text(&s, form.get("from"), form.get("text")).await?
        } else {
            edited_json(form.get("payload"))?
        };
        // The card being replaced, named on the new card's page (read before the edit).
        let old = payload_hash_of(&s, &id, &delivery).await;
        let r = api::edit(
            State(s),
            caller,
            ApiPath((id.clone(), delivery.clone())),
            ApiJson(EditBody { payload }),
        )
        .await
        .map_err(|e| decided(e, &id))?;
        Ok(format!(
            "{}&edited={}",
            card_link(&id, &delivery, &r.0.payload_hash),
            seg(&old)
        ))
    })
    .await
}

fn too_large(what: &str, bytes: usize) -> ApiError {
    ApiError::new(
        StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!(
            "The edited {what} is {bytes} bytes; at most {EDIT_PAYLOAD_BYTES_MAX} are accepted."
        ),
    )
}

/// An edit of the payload as JSON, read as the API reads a body.
fn edited_json(text: &str) -> Result<Value, ApiError> {
    if text.len() > EDIT_PAYLOAD_BYTES_MAX {
        return Err(too_large("payload", text.len()));
    }
    serde_json::from_str(text).map_err(|e| {
        ApiError::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "invalid_field",
            format!("The edited payload is not valid JSON ({e}). Go back, fix it and save again; nothing changed."),
        )
    })
}

/// An edit of a text payload as text: the card's payload (the one the page showed, by its
/// hash) with its `text` replaced, sent to the API's edit like any other payload; the API
/// checks it, and the new card's hash is shown before it can be approved.
async fn edited_text(s: &AppState, from: &str, text: &str) -> Result<Value, ApiError> {
    if text.len() > EDIT_PAYLOAD_BYTES_MAX {
        return Err(too_large("text", text.len()));
    }
    // A browser sends line breaks as CRLF; the text a person typed has LF.
    let text = text.replace("\r\n", "\n");
    let store = s.store.clone();
    let from = from.to_string();
    let base = blocking(move || Ok(store.payload(&from)?)).await;
    let mut payload: Value = base
        .ok()
        .flatten()
        .and_then(|p| serde_json::from_str(&p).ok())
        .ok_or_else(|| {
            ApiError::new(
                StatusCode::CONFLICT,
                "conflict",
                "The payload this text edits is gone from the store; open the card again.",
            )
        })?;
    payload["text"] = Value::String(text);
    Ok(payload)
}

/// The hash of the open card of a delivery (empty when none is open).
async fn payload_hash_of(s: &AppState, id: &str, delivery: &str) -> String {
    let store = s.store.clone();
    let (rid, did) = (id.to_string(), delivery.to_string());
    blocking(move || {
        Ok(store
            .cards_for_run(&rid)?
            .into_iter()
            .find(|c| c.state == CardState::Open && c.delivery.as_deref() == Some(did.as_str()))
            .map(|c| c.payload_hash)
            .unwrap_or_default())
    })
    .await
    .unwrap_or_default()
}

pub async fn answer(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath(id): ApiPath<RunId>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let caller = signed.caller();
    act(&signed, &headers, &body, |form| async move {
        let text = form.get("text").to_string();
        let _ = api::answer(
            State(s),
            caller,
            ApiPath(id.clone()),
            ApiJson(AnswerBody { text }),
        )
        .await
        .map_err(|e| decided(e, &id))?;
        Ok(run_link(&id))
    })
    .await
}

/// The next slot after `now` (in a year at most).
fn next_slot(cron: &str, tz: &str, now: i64) -> Option<(i64, chrono_tz::Tz)> {
    let z = vouch_runtime::scheduler::parse_tz(tz).ok()?;
    vouch_runtime::scheduler::next_slot(cron, tz, now).map(|t| (t, z))
}

/// Slots shown per schedule at most (the newest).
const SLOTS_SHOWN_MAX: usize = 50;

pub async fn schedules(State(s): State<AppState>, signed: Signed) -> Response {
    let store = s.store.clone();
    let read = blocking(move || {
        let mut out = vec![];
        for sc in store.schedules()? {
            let slots = store.slots(&sc.name)?;
            let mut rows = vec![];
            for (t, run) in slots.iter().rev().take(SLOTS_SHOWN_MAX) {
                let rec = store.run(run)?;
                let receipt = match &rec {
                    Some(r) if r.outcome == Some(Outcome::Missed) => store.receipt(run)?,
                    _ => None,
                };
                rows.push((*t, run.clone(), rec, receipt));
            }
            out.push((sc, slots.len(), rows));
        }
        Ok(out)
    })
    .await;
    let all = match read {
        Ok(x) => x,
        Err(e) => return failed(&signed, e),
    };
    let tz = signed.session.tz;
    let now = s.host.now_ms();
    let body = html! {
        h1 { "Schedules" }
        @if all.is_empty() {
            p.empty { "No schedule yet. Add one with " code { "vouch schedule add brief --cron \"0 7 * * *\" --tz Europe/Berlin --routine FILE" } "; it runs while " code { "vouch serve" } " runs." }
        }
        @for (sc, total, rows) in &all {
            section.schedule {
                h2 { (inert(&sc.name)) }
                form.run-now method="post" action={(BASE) "/schedules/" (seg(&sc.name)) "/run"} {
                    input type="hidden" name="csrf" value=(signed.session.csrf);
                    button.primary type="submit" data-schedule=(inert(&sc.name)) { "Run it now (outside its slots)" }
                }
                dl.facts {
                    dt { "Cron" } dd { code { (inert(&sc.cron)) } " in " (inert(&sc.tz)) }
                    dt { "Next slot" } dd {
                        @match next_slot(&sc.cron, &sc.tz, now) {
                            Some((t, z)) => { (when(t, tz)) " (" (when(t, z)) " in the schedule's zone)" }
                            None => "none within a year"
                        }
                    }
                    dt { "Catch-up · overlap · grace" } dd { (sc.catch_up.as_str()) " · " (sc.overlap.as_str()) " · " (sc.grace_ms / 1000) " s" }
                    dt { "Slots so far" } dd { (total) }
                }
                (slot_lists(rows, tz))
            }
        }
    };
    show(&s, &signed, "Schedules", None, body).await
}

/// A schedule's recent slots: when each ran, as which run; a missed one with its receipt.
type SlotRow = (i64, String, Option<RunRecord>, Option<String>);

/// A schedule's missed slots with their receipts, then its recent slots.
fn slot_lists(rows: &[SlotRow], tz: chrono_tz::Tz) -> Markup {
    html! {
        @let missed: Vec<_> = rows.iter().filter(|r| r.2.as_ref().and_then(|x| x.outcome) == Some(Outcome::Missed)).collect();
        h3 { "Missed slots" }
        @if missed.is_empty() {
            p.empty { "No slot was missed." }
        } @else {
            ul.runs {
                @for (t, run, _, receipt) in &missed {
                    li.missed {
                        (when(*t, tz)) " — " a href=(run_link(run)) { "receipt of run " (inert(run)) }
                        @if let Some(r) = receipt { pre.receipt { (inert_text(r)) } }
                    }
                }
            }
        }
        @if !rows.is_empty() {
            details {
                summary { "Recent slots" }
                ul.runs {
                    @for (t, run, rec, _) in rows {
                        li {
                            (when(*t, tz)) " — " a href=(run_link(run)) { (inert(run)) }
                            @if let Some(r) = rec { " " span.(outcome_class(r.outcome)) { (outcome_word(r)) } }
                        }
                    }
                }
            }
        }
    }
}

/// The board's lanes, in the order a person reads them (§13.3).
const LANES: [&str; 7] = [
    "waiting",
    "queued",
    "running",
    "suspended",
    "done",
    "failed",
    "cancelled",
];

fn lane(t: &TaskRecord, latest: Option<&AttemptRecord>) -> &'static str {
    if latest.map(|a| a.state) == Some(AttemptState::Suspended) && !t.state.is_final() {
        return "suspended";
    }
    match t.state {
        TaskState::Waiting => "waiting",
        TaskState::Queued => "queued",
        TaskState::Dispatched | TaskState::Running => "running",
        TaskState::Completed => "done",
        TaskState::Failed | TaskState::Expired => "failed",
        TaskState::Cancelled => "cancelled",
    }
}

fn no_board() -> ApiError {
    ApiError::not_found("This server has no task board. Offer tasks with `vouch task offer` on a home with a board.")
}

pub async fn board(State(s): State<AppState>, signed: Signed) -> Response {
    let Some(board) = s.board.clone() else {
        return failed(&signed, no_board());
    };
    let read = blocking(move || {
        let tasks = board.tasks(&TaskFilter {
            state: None,
            tag: None,
            limit: TASK_LIST_MAX,
            correlation: None,
        })?;
        let mut lanes: BTreeMap<&'static str, Vec<(TaskRecord, Option<AttemptRecord>)>> =
            BTreeMap::new();
        for t in tasks {
            let latest = board.attempts(&t.id)?.pop();
            lanes
                .entry(lane(&t, latest.as_ref()))
                .or_default()
                .push((t, latest));
        }
        Ok(lanes)
    })
    .await;
    let lanes = match read {
        Ok(x) => x,
        Err(e) => return failed(&signed, e),
    };
    let tz = signed.session.tz;
    let empty = lanes.values().all(Vec::is_empty);
    let key = s.host.now_ms();
    let body = html! {
        h1 { "Board" }
        (offer_form(&signed.session.csrf, key))
        @if empty {
            p.empty { "No task yet. Offer one with " code { "vouch task offer --type freeform --brief \"…\"" } " and start a worker with " code { "vouch worker --name NAME --script FILE --drain" } "." }
        }
        div.lanes {
            @for l in LANES {
                @let ts = lanes.get(l).map(Vec::as_slice).unwrap_or(&[]);
                section.lane aria-labelledby={"lane-" (l)} data-lane=(l) {
                    h2 #{"lane-" (l)} { (l) " " span.count { (ts.len()) } }
                    @if ts.is_empty() { p.empty { "—" } }
                    ul {
                        @for (t, a) in ts {
                            li.task {
                                a href={(BASE) "/board/" (seg(&t.id))} { (inert(&t.spec.brief)) }
                                p.meta {
                                    (inert(&t.kind)) " · " (t.attempts) "/" (t.max_attempts) " attempts"
                                    @if let Some(a) = a { " · " (inert(&a.claimant)) }
                                    @for g in &t.tags { " " span.tag { (inert(g)) } }
                                }
                                @match t.ended_ms {
                                    Some(e) => p.meta.ended { "ended " (view::when_short(e, tz)) },
                                    None => p.meta { "queued " (t.queued_ms.map(|q| view::when_short(q, tz)).unwrap_or_else(|| html! { "—" })) },
                                }
                            }
                        }
                    }
                }
            }
        }
    };
    show(&s, &signed, "Board", None, body).await
}

/// The board's form to offer a task; `key` makes a double submit one offer.
fn offer_form(csrf: &str, key: i64) -> Markup {
    html! {
        details.offer {
            summary { "Offer a task" }
            form method="post" action={(BASE) "/board/offer"} {
                input type="hidden" name="csrf" value=(csrf);
                input type="hidden" name="key" value=(key);
                label for="offer-type" { "Type" }
                input #offer-type type="text" name="type" value="freeform" required;
                label for="offer-brief" { "Brief: what the task asks for, in words" }
                textarea #offer-brief name="brief" rows="3" required {}
                label for="offer-tags" { "Tags (comma-separated)" }
                input #offer-tags type="text" name="tags";
                label for="offer-attempts" { "Attempts (1–20)" }
                input #offer-attempts type="text" name="max_attempts" value="1" inputmode="numeric";
                p { button.primary #offer-submit type="submit" { "Offer it" } }
            }
        }
    }
}

/// A patch attempt's sandbox as its receipt names it (§14.0.5): the policy line and each
/// refusal, without their prefixes.
fn sandbox_lines(detail: &serde_json::Value) -> Vec<String> {
    let receipt = detail.get("receipt").and_then(|r| r.as_str()).unwrap_or("");
    receipt
        .lines()
        .filter_map(|l| {
            l.strip_prefix("Sandbox: ").map(String::from).or_else(|| {
                l.strip_prefix("Refused by the sandbox: ")
                    .map(|r| format!("refused: {r}"))
            })
        })
        .take(60)
        .collect()
}

fn cids(v: &Value) -> Vec<String> {
    v.get("artifacts")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .filter(|c| vouch_artifacts::parse_cid(c).is_ok())
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default()
}

pub async fn task(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath(id): ApiPath<String>,
) -> Response {
    let Some(board) = s.board.clone() else {
        return failed(&signed, no_board());
    };
    let store = s.store.clone();
    let tid = id.clone();
    let read = blocking(move || task_page_data(board.as_ref(), store.as_ref(), &tid)).await;
    let (t, attempts, results, verdicts, parents) = match read {
        Ok(x) => x,
        Err(e) => return failed(&signed, e),
    };
    let tz = signed.session.tz;
    let again = matches!(
        t.state,
        TaskState::Failed | TaskState::Expired | TaskState::Cancelled
    );
    let key = s.host.now_ms();
    let body = html! {
        p.crumbs { a href={(BASE) "/board"} { "← Board" } }
        h1 { "Task " code { (inert(&t.id)) } }
        @if again {
            form.retry method="post" action={(BASE) "/board/" (seg(&t.id)) "/retry"} {
                input type="hidden" name="csrf" value=(signed.session.csrf);
                input type="hidden" name="key" value=(key);
                button.primary #retry type="submit" { "Offer it again (a new task, same brief)" }
            }
        }
        dl.facts {
            dt { "Brief" } dd { pre.text { (inert_text(&t.spec.brief)) } }
            dt { "State" } dd #task-state { (t.state.as_str()) }
            dt { "Type" } dd { (inert(&t.kind)) }
            dt { "Attempts" } dd { (t.attempts) " of " (t.max_attempts) }
            @if !t.tags.is_empty() { dt { "Tags" } dd { @for g in &t.tags { span.tag { (inert(g)) } " " } } }
            dt { "Queued" } dd { (t.queued_ms.map(|q| when(q, tz)).unwrap_or_else(|| html! { "—" })) }
            @if let Some(e) = t.ended_ms { dt { "Ended" } dd { (when(e, tz)) } }
            @if let Some(n) = t.accepted_attempt { dt { "Accepted" } dd { "attempt " (n) } }
            @if !t.spec.references.is_empty() {
                dt { "Refers to" } dd { @for r in &t.spec.references { a href={(BASE) "/board/" (seg(r))} { (inert(r)) } " " } }
            }
            @if !t.spec.input.is_null() { dt { "Input" } dd { (json_view(&t.spec.input)) } }
        }
        section aria-labelledby="h-attempts" {
            h2 #h-attempts { "Attempts" }
            @if attempts.is_empty() { p.empty { "No attempt yet: no worker has claimed this task. Start one with " code { "vouch worker --name NAME --script FILE --drain" } "." } }
            @for a in &attempts {
                (attempt_article(a, &results, &parents, tz))
            }
        }
        section aria-labelledby="h-verdicts" {
            h2 #h-verdicts { "Verdicts" }
            @if verdicts.is_empty() { p.empty { "Not judged. Offer a " code { "judge" } " task that targets this one to get a verdict." } }
            ul {
                @for (judge, v) in &verdicts {
                    li {
                        a href={(BASE) "/board/" (seg(judge))} { (inert(judge)) } ": "
                        @if v.passed { span.ok { "passed" } } @else { span.bad { "not passed" } }
                        (json_view(&v.scores))
                    }
                }
            }
        }
    };
    show(&s, &signed, "Task", None, body).await
}

/// What the task page shows: the task, its attempts, their results by id, its verdicts,
/// and the run each attempt's run continues.
type TaskPageData = (
    TaskRecord,
    Vec<AttemptRecord>,
    BTreeMap<String, Value>,
    Vec<(String, vouch_store::board::Verdict)>,
    BTreeMap<String, String>,
);

fn task_page_data(
    board: &dyn vouch_store::board::BoardStore,
    store: &dyn vouch_store::Store,
    tid: &str,
) -> crate::problem::ApiResult<TaskPageData> {
    let t = board.task(tid)?.ok_or_else(|| {
        ApiError::not_found(format!(
            "There is no task `{tid}`. Open the board to see the tasks there are."
        ))
    })?;
    let attempts = board.attempts(tid)?;
    let mut results = BTreeMap::new();
    for a in &attempts {
        if let Some(r) = &a.result_id {
            if let Some(v) = board.result(r)? {
                results.insert(r.clone(), v);
            }
        }
    }
    let verdicts = board.verdicts(tid)?;
    // Lineage: the runs of the attempts and the runs they continue.
    let mut parents = BTreeMap::new();
    for a in &attempts {
        if let Some(r) = &a.run_id {
            if let Some(rec) = store.run(r)? {
                if let Some(p) = rec.parent {
                    parents.insert(r.clone(), p);
                }
            }
        }
    }
    Ok((t, attempts, results, verdicts, parents))
}

/// One attempt of a task: who claimed it, its lease, usage and run, its result with the
/// artifacts it names, and its self-assessment.
fn attempt_article(
    a: &AttemptRecord,
    results: &BTreeMap<String, Value>,
    parents: &BTreeMap<String, String>,
    tz: chrono_tz::Tz,
) -> Markup {
    html! {
        article.attempt data-attempt=(a.n) {
            h3 { "Attempt " (a.n) " · " span.status { (a.state.as_str()) } }
            dl.facts {
                dt { "Claimant" } dd.claimant { (inert(&a.claimant)) }
                dt { "Profile" } dd { (inert(&a.profile)) @if let Some(m) = &a.model { " · model " (inert(m)) } }
                dt { "Profile fingerprint" } dd { (hash(&a.policy_fingerprint)) }
                @let sandbox = sandbox_lines(&a.detail);
                @if !sandbox.is_empty() {
                    dt { "Sandbox" } dd.sandbox { @for l in &sandbox { (inert(l)) br; } }
                }
                dt { "Claimed" } dd { (when(a.claimed_ms, tz)) " (lease epoch " (a.epoch) ")" }
                dt { "Lease" } dd {
                    @match a.lease_until_ms { Some(l) => { "until " (when(l, tz)) } None => "released" }
                }
                @if let Some(e) = a.ended_ms { dt { "Ended" } dd { (when(e, tz)) @if let Some(r) = &a.end_reason { " — " (inert(r)) } } }
                dt { "Usage" } dd { (a.usage.turns) " turns · " (a.usage.tool_calls) " tool calls (" (a.usage.failed_tool_calls) " failed) · " (a.usage.tokens) " tokens" }
                @if let Some(r) = &a.run_id {
                    dt { "Run" } dd {
                        a href=(run_link(r)) { (inert(r)) }
                        @if let Some(p) = parents.get(r) { " — continues " a href=(run_link(p)) { (inert(p)) } }
                    }
                }
            }
            @if let Some(rid) = &a.result_id {
                h4 { "Result " (hash(rid)) }
                @if let Some(v) = results.get(rid) {
                    (json_view(v))
                    @let arts = cids(v);
                    @if !arts.is_empty() {
                        h4 { "Artifacts" }
                        ul.artifacts {
                            @for c in &arts {
                                li { a href={(BASE) "/artifacts/" (seg(c))} download { code { (c) } } }
                            }
                        }
                    }
                }
            }
            h4 { "Self-assessment (advisory)" }
            @match a.detail.get("self_assessment").filter(|v| !v.is_null()) {
                Some(sa) => div.self-assessment { (json_view(sa)) },
                None => p.muted.self-assessment { "The worker gave none." },
            }
        }
    }
}

pub async fn artifact(
    State(s): State<AppState>,
    signed: Signed,
    ApiPath(cid): ApiPath<String>,
) -> Response {
    if let Err(e) = vouch_artifacts::parse_cid(&cid) {
        return view::error_page(Some(&signed), StatusCode::BAD_REQUEST, &e.to_string());
    }
    let Some(store) = s.console.artifacts.clone() else {
        return view::error_page(
            Some(&signed),
            StatusCode::NOT_FOUND,
            "This server keeps no artifacts.",
        );
    };
    let c = cid.clone();
    let got = tokio::task::spawn_blocking(move || store.get(&c)).await;
    match got {
        Ok(Ok(bytes)) => {
            let name = format!("attachment; filename=\"{}\"", cid.replace(':', "-"));
            let mut r = ([(CONTENT_TYPE, "application/octet-stream")], bytes).into_response();
            if let Ok(v) = HeaderValue::from_str(&name) {
                r.headers_mut().insert(CONTENT_DISPOSITION, v);
            }
            r.headers_mut().insert(
                "x-content-type-options",
                HeaderValue::from_static("nosniff"),
            );
            r
        }
        Ok(Err(vouch_artifacts::ArtifactError::NotFound(_))) => view::error_page(
            Some(&signed),
            StatusCode::NOT_FOUND,
            &format!("No artifact {cid} here; it may have been swept."),
        ),
        Ok(Err(e)) => view::error_page(
            Some(&signed),
            StatusCode::INTERNAL_SERVER_ERROR,
            &e.to_string(),
        ),
        Err(e) => view::error_page(
            Some(&signed),
            StatusCode::INTERNAL_SERVER_ERROR,
            &e.to_string(),
        ),
    }
}

pub async fn doctor(State(s): State<AppState>, signed: Signed) -> Response {
    let d = match api::doctor(State(s.clone())).await {
        Ok(d) => d.0,
        Err(e) => return failed(&signed, e),
    };
    let toml = d
        .config_path
        .clone()
        .unwrap_or_else(|| "vouch.toml in the home".into());
    let missing: Vec<_> = d
        .destinations
        .iter()
        .filter(|r| r.connect_step.is_some())
        .collect();
    let body = html! {
        h1 { "Doctor" }
        p.lead { "Every destination kind, what vouch can do there, and how to connect what is missing." }
        p { "Destinations are connected in " code #config-path { (inert(&toml)) } "; vouch reads it again on every request, so an edit shows here when you reload." }
        div.scroll {
            table {
                thead { tr { th { "Destination" } th { "What vouch can do" } th { "To connect" } } }
                tbody {
                    @for r in &d.destinations {
                        tr {
                            td { (r.kind) }
                            td.status { (super::plain::with_term(super::plain::capability(&r.level), &r.level)) }
                            td {
                                @match (&r.connect_step, &r.example) {
                                    (Some(_), Some(_)) => a href={"#write-" (r.kind)} { "write its section into vouch.toml (below)" },
                                    (Some(c), None) => (inert(c)),
                                    (None, _) => span.ok { "connected" },
                                }
                            }
                        }
                    }
                }
            }
        }
        @if !missing.is_empty() {
            section aria-labelledby="h-write" {
                h2 #h-write { "What to write in " (inert(&toml)) }
                @for r in &missing {
                    @if let Some(ex) = &r.example {
                        h3 #{"write-" (r.kind)} { (r.kind) }
                        pre.toml data-kind=(r.kind) { code { (inert_text(ex)) } }
                    }
                }
                p.muted { "Save the file, then reload this page: the row turns to " em { "can do it" } ". A run that drafted such a delivery finishes it with " code { "vouch resume RUN" } " (or its page's Resume). Credentials are written by reference only: " code { "{ env = \"NAME\" }" } " or " code { "{ file = \"/path\" }" } ", never the secret itself." }
            }
        }
        (doctor_notes(&d))
    };
    show(&s, &signed, "Doctor", None, body).await
}

/// The doctor page's notes below the table: overrides, automation, stuck notifications.
fn doctor_notes(d: &crate::dto::DoctorBody) -> Markup {
    html! {
        @if !d.overrides.is_empty() {
            h2 { "Overrides from vouch.toml" }
            ul { @for (k, v) in &d.overrides { li { code { (inert(k)) } " → " (v) } } }
        }
        @if !d.automation.is_empty() {
            h2 { "Automation" }
            ul { @for a in &d.automation { li { (inert(a)) } } }
        }
        @if !d.stuck_routes.is_empty() {
            h2 { "Stuck notifications" }
            ul {
                @for r in &d.stuck_routes {
                    li {
                        "Route " code { (inert(&r.route)) } ": " (r.waiting) " waiting, "
                        (r.failures) " failed tries; last: " (inert(&r.last_error))
                        br;
                        "Next: " (inert(&r.next_step))
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod sandbox_tests {
    use super::sandbox_lines;

    #[test]
    fn an_attempts_sandbox_is_named_from_its_receipt() {
        let detail = serde_json::json!({"receipt": "Patch rejected\nSandbox: bubblewrap under profile p (sha256:ab); commands: sh\nRefused by the sandbox: network: h:80 is not on this runtime profile's network allow-list\nWhy: x"});
        assert_eq!(
            sandbox_lines(&detail),
            vec![
                "bubblewrap under profile p (sha256:ab); commands: sh".to_string(),
                "refused: network: h:80 is not on this runtime profile's network allow-list"
                    .to_string()
            ]
        );
        assert!(sandbox_lines(&serde_json::json!({})).is_empty());
    }
}
