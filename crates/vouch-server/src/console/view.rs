//! The console's layout and the helpers every page uses. Templates are maud's: every value
//! printed is HTML-escaped by construction; text from a model, a payload or a provider is also
//! passed through `vouch_core`'s escape first, so control and bidirectional characters show
//! as visible `\u{…}` text and cannot reorder or hide what a person reads (§10).

use super::session::{Session, Signed};
use super::BASE;
use axum::http::header::{CACHE_CONTROL, CONTENT_TYPE};
use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chrono::TimeZone as _;
use maud::{html, Markup, DOCTYPE};
use serde_json::Value;

const SCRIPT: &str = include_str!("assets/console.js");
const STYLE: &str = include_str!("assets/console.css");
const FAVICON: &str = include_str!("assets/favicon.svg");

/// Scripts and styles only from this origin, no inline script, no framing, no referrer.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

pub struct Page<'a> {
    pub title: &'a str,
    /// The live stream the page opens: a run page's, or the inbox's.
    pub live: Option<Live<'a>>,
}

#[derive(Clone, Copy)]
pub enum Live<'a> {
    Run(&'a str),
    Inbox,
}

/// Text from a model, a payload or a provider, on one line: controls and bidi escaped.
pub fn inert(s: &str) -> String {
    vouch_core::escape::escape_line(s).into_owned()
}

/// A block of such text whose line breaks are its own (a receipt, a payload's text).
pub fn inert_text(s: &str) -> String {
    vouch_core::escape::escape_text(s).into_owned()
}

/// An instant in the person's zone, e.g. `2026-12-03 23:10:05 CET`.
pub fn when(ms: i64, tz: chrono_tz::Tz) -> Markup {
    match tz.timestamp_millis_opt(ms).single() {
        Some(t) => html! {
            time datetime=(t.to_rfc3339()) { (t.format("%Y-%m-%d %H:%M:%S %Z")) }
        },
        None => html! { "—" },
    }
}

/// An instant in the person's zone, short for narrow places (a board card): `12-05 09:52`,
/// the whole time in its title.
pub fn when_short(ms: i64, tz: chrono_tz::Tz) -> Markup {
    match tz.timestamp_millis_opt(ms).single() {
        Some(t) => html! {
            time datetime=(t.to_rfc3339()) title=(t.format("%Y-%m-%d %H:%M:%S %Z")) { (t.format("%m-%d %H:%M")) }
        },
        None => html! { "—" },
    }
}

/// A hash shown short, with the whole hash in its title and copyable text.
pub fn hash(h: &str) -> Markup {
    let short = h.get(..12).unwrap_or(h);
    html! { code.hash title=(h) { (short) } }
}

pub fn url_encode(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                out.push(b as char)
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

/// Form and query decoding: the one parser the API's queries use too.
pub fn url_decode(s: &str) -> Option<String> {
    vouch_core::input::percent_decode(s)
}

/// One path segment (a run id, a delivery, a task id) inside a console link.
pub fn seg(s: &str) -> String {
    url_encode(s).replace('/', "%2F")
}

pub fn run_link(id: &str) -> String {
    format!("{BASE}/runs/{}", seg(id))
}

pub fn card_link(run: &str, delivery: &str, hash: &str) -> String {
    format!(
        "{BASE}/runs/{}/cards/{}?hash={}",
        seg(run),
        seg(delivery),
        seg(hash)
    )
}

/// A JSON value rendered for reading: objects as labelled rows, text as preformatted,
/// every string made inert.
pub fn json_view(v: &Value) -> Markup {
    match v {
        Value::Object(m) if !m.is_empty() => html! {
            dl.json {
                @for (k, x) in m {
                    dt { (inert(k)) }
                    dd { (json_view(x)) }
                }
            }
        },
        Value::Array(a) if !a.is_empty() => html! {
            ol.json { @for x in a { li { (json_view(x)) } } }
        },
        Value::String(s) => html! { pre.text { (inert_text(s)) } },
        // Nothing there is said in words, never as `null`, `{}` or `[]`.
        Value::Null => html! { span.muted { "none" } },
        Value::Object(_) | Value::Array(_) => html! { span.muted { "none" } },
        Value::Bool(b) => html! { (if *b { "yes" } else { "no" }) },
        other => html! { code { (inert(&other.to_string())) } },
    }
}

/// JSON for a form field a person edits: the same value, with every character a person must
/// not see raw (controls, bidi overrides) written as a JSON `\uXXXX` escape, so the text is
/// inert on the page and parses back to exactly the value it shows.
pub fn editable_json(v: &Value) -> String {
    let pretty = serde_json::to_string_pretty(v).unwrap_or_default();
    let mut out = String::with_capacity(pretty.len());
    for c in pretty.chars() {
        if vouch_core::escape::needs_escape(c) && c != '\n' {
            let mut units = [0u16; 2];
            for u in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{:04x}", u));
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Text a person may edit as text in a form: nothing in it needs escaping (line breaks and
/// tabs are its own). Text with control or bidirectional characters is edited as JSON only,
/// where they show as `\uXXXX` escapes.
pub fn plain_text(t: &str) -> bool {
    !t.chars()
        .any(|c| vouch_core::escape::needs_escape(c) && c != '\n' && c != '\t')
}

/// The raw JSON text (already canonical when it came from the store), made inert.
pub fn raw_json(text: &str) -> Markup {
    html! { pre.raw { code { (inert(text)) } } }
}

fn security_headers(resp: &mut Response) {
    let h = resp.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(CSP));
    h.insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    // `same-origin`, not `no-referrer`: with no referrer a browser sends `Origin: null` on
    // its own forms, and the origin check would refuse them.
    h.insert("referrer-policy", HeaderValue::from_static("same-origin"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
}

fn nav(s: &Session, badge: Option<usize>) -> Markup {
    html! {
        nav aria-label="Main" {
            a.brand href={(BASE) "/"} { "vouch" }
            ul {
                li {
                    a href={(BASE) "/"} {
                        "Inbox"
                        @if let Some(n) = badge {
                            @if n > 0 {
                                " " span.badge #badge aria-label={(n) " waiting for you"} { (n) }
                            }
                        }
                    }
                }
                li { a href={(BASE) "/runs"} { "Runs" } }
                li { a href={(BASE) "/board"} { "Board" } }
                li { a href={(BASE) "/measures"} { "Measures" } }
                li { a href={(BASE) "/schedules"} { "Schedules" } }
                li { a href={(BASE) "/doctor"} { "Doctor" } }
            }
            form.signout method="post" action={(BASE) "/signout"} {
                input type="hidden" name="csrf" value=(s.csrf);
                span.who { "Signed in as " (inert(&s.name)) }
                " "
                button type="submit" { "Sign out" }
            }
        }
    }
}

/// A whole page. `signed` is None only on the sign-in page and before sign-in.
pub fn render(
    signed: Option<(&Signed, Option<usize>)>,
    status: StatusCode,
    p: Page<'_>,
    body: Markup,
) -> Response {
    let doc = html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (p.title) " · vouch" }
                link rel="icon" type="image/svg+xml" href={(BASE) "/assets/favicon.svg"};
                link rel="stylesheet" href={(BASE) "/assets/console.css"};
                script src={(BASE) "/assets/console.js"} defer {}
            }
            body data-live=[p.live.map(|l| match l {
                Live::Run(r) => format!("{}/live", run_link(r)),
                Live::Inbox => format!("{BASE}/live"),
            })] {
                a.skip href="#main" { "Skip to content" }
                @if let Some((sg, badge)) = signed {
                    header { (nav(&sg.session, badge)) }
                }
                main #main tabindex="-1" { (body) }
                @if let Some((sg, _)) = signed {
                    footer {
                        form.zone method="post" action={(BASE) "/zone"} {
                            input type="hidden" name="csrf" value=(sg.session.csrf);
                            label for="zone" { "Times are shown in" }
                            " "
                            input #zone type="text" name="tz" value=(sg.session.tz.name()) size="18";
                            " "
                            button type="submit" { "Change" }
                        }
                    }
                }
            }
        }
    };
    let mut resp = (
        status,
        [(CONTENT_TYPE, "text/html; charset=utf-8")],
        doc.into_string(),
    )
        .into_response();
    security_headers(&mut resp);
    resp
}

/// An error said in words, with what to do next.
pub fn error_page(signed: Option<&Signed>, status: StatusCode, msg: &str) -> Response {
    let title = crate::problem::plain_status(status);
    let body = html! {
        h1 { (title) }
        p.error role="alert" { (inert(msg)) }
        p { a href={(BASE) "/"} { "Back to the inbox" } }
    };
    render(
        signed.map(|s| (s, None)),
        status,
        Page { title, live: None },
        body,
    )
}

pub async fn script() -> Response {
    let mut r = ([(CONTENT_TYPE, "text/javascript; charset=utf-8")], SCRIPT).into_response();
    security_headers(&mut r);
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    r
}

pub async fn favicon() -> Response {
    let mut r = ([(CONTENT_TYPE, "image/svg+xml")], FAVICON).into_response();
    security_headers(&mut r);
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("max-age=86400"));
    r
}

pub async fn style() -> Response {
    let mut r = ([(CONTENT_TYPE, "text/css; charset=utf-8")], STYLE).into_response();
    security_headers(&mut r);
    r.headers_mut()
        .insert(CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    r
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn editable_json_is_inert_and_parses_back_to_the_same_value() {
        let v = serde_json::json!({"text": "ok\u{1b}[2J\u{202e}gpj.exe\n\u{85}é\u{1F600}"});
        let e = editable_json(&v);
        assert!(
            !e.chars()
                .any(|c| vouch_core::escape::needs_escape(c) && c != '\n'),
            "{e}"
        );
        assert!(e.contains("\\u202e"), "{e}");
        assert_eq!(serde_json::from_str::<Value>(&e).unwrap(), v);
    }

    #[test]
    fn model_text_in_a_template_is_escaped_twice_over() {
        let m = html! { p { (inert("<b>hi</b>\u{202e}")) } }.into_string();
        assert_eq!(m, "<p>&lt;b&gt;hi&lt;/b&gt;\\u{202e}</p>");
    }
}
