//! The "Start a run" page (issue 28): a title and a script of model turns (pasted, or read
//! from a file by the page's script) or a routine, sent to `POST /api/runs` through
//! [`super::actions::start_run`]; the run's live page opens.

use super::session::Signed;
use super::view::{self, Page};
use super::BASE;
use crate::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use maud::html;

pub async fn page(State(s): State<AppState>, signed: Signed) -> Response {
    // One key per rendering of the form: sent twice (a double click, a resend after a
    // timeout), it starts one run and both land on its page.
    let key = super::session::random_hex().unwrap_or_default();
    let body = html! {
        p.crumbs { a href={(BASE) "/runs"} { "← Runs" } }
        h1 { "Start a run" }
        p.lead { "The run does what its script or routine says, under the same rules as any run: what needs you waits for your approval, and its receipt says what really happened." }
        form #start method="post" action={(BASE) "/runs/new"} {
            input type="hidden" name="csrf" value=(signed.session.csrf);
            input type="hidden" name="key" value=(key);
            label for="start-title" { "Title: what you ask for, in words" }
            input #start-title type="text" name="title" maxlength=(vouch_runtime::host::TITLE_BYTES_MAX) placeholder="Save my notes";
            fieldset.kind {
                legend { "What runs it" }
                label.choice {
                    input #kind-script type="radio" name="kind" value="script" checked;
                    " A script of model turns, as " code { "vouch run TITLE --script FILE" } " takes it"
                }
                label.choice {
                    input #kind-routine type="radio" name="kind" value="routine";
                    " A routine, as a schedule takes it (a " code { "prompt" } " and a " code { "script" } " or " code { "model" } "); without a title, its prompt names the run"
                }
            }
            label for="start-json" { "The script or routine (JSON; the format is in " code { "docs/scripts.md" } ")" }
            textarea #start-json name="json" rows="8" spellcheck="false" required placeholder="[{\"declare\": {\"deliveries\": []}}, {\"final\": \"done\"}]" {}
            div #start-upload hidden {
                label for="start-file" { "Or read it from a file" }
                input #start-file type="file" accept=".json,application/json";
                p.hint #start-file-note aria-live="polite" { "The file stays on this computer: it is read into the field above, where you check it before starting." }
            }
            p { button.primary #start-submit type="submit" { "Start the run" } }
        }
    };
    let b = super::pages::badge(&s).await;
    view::render(
        Some((&signed, b)),
        StatusCode::OK,
        Page {
            title: "Start a run",
            live: None,
        },
        body,
    )
}
