//! Sign-in and sessions (§17). A person signs in with an API token (`vouch token new NAME`);
//! the console keeps the token's hash in a server-side session named by a random cookie, and
//! checks on every request that the token still exists, so `vouch token rm` signs its
//! sessions out. Forms carry the session's CSRF token; a request whose `Origin` is another
//! site is refused before anything else.

use super::view::{self, Page};
use super::BASE;
use crate::auth::token_hash;
use crate::{blocking, AppState};
use axum::body::Bytes;
use axum::extract::{FromRequestParts, State};
use axum::http::header::{COOKIE, HOST, ORIGIN, SET_COOKIE};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use maud::html;
use std::collections::BTreeMap;

/// How long a session lasts after sign-in.
pub const SESSION_TTL_MS: i64 = 12 * 3_600_000;
/// Sessions kept at most; signing in beyond it drops the oldest.
pub const SESSIONS_MAX: usize = 1_000;
/// Form fields one request may carry at most, and bytes per form.
const FORM_FIELDS_MAX: usize = 32;
pub const COOKIE_NAME: &str = "vouch_session";

#[derive(Debug, Clone)]
pub struct Session {
    /// The token's name, shown in the header.
    pub name: String,
    pub(crate) token_hash: String,
    /// Compared with every form's `csrf` field.
    pub csrf: String,
    /// The person's IANA time zone; every time on a page is shown in it.
    pub tz: chrono_tz::Tz,
    created_ms: i64,
}

pub(crate) fn random_hex() -> Result<String, String> {
    let mut b = [0u8; 32];
    getrandom::fill(&mut b).map_err(|e| format!("no randomness for a session: {e}"))?;
    Ok(hex::encode(b))
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

fn cookie(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
}

/// Constant-time comparison, so a guessed CSRF token learns nothing from timing.
fn same(a: &str, b: &str) -> bool {
    a.len() == b.len()
        && a.bytes()
            .zip(b.bytes())
            .fold(0u8, |acc, (x, y)| acc | (x ^ y))
            == 0
}

/// A request from another site is refused: its `Origin` must name this host.
fn same_origin(headers: &HeaderMap) -> bool {
    let Some(origin) = headers.get(ORIGIN).and_then(|v| v.to_str().ok()) else {
        return true; // Not sent by a browser for a same-origin navigation; the CSRF token decides.
    };
    let host = headers
        .get(HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let bare = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"))
        .unwrap_or("");
    !host.is_empty() && bare == host
}

/// A signed-in person; pages without one redirect to the sign-in page.
pub struct Signed {
    pub id: String,
    pub session: Session,
}

impl Signed {
    /// The signed-in person as the caller of the API's own handlers: decisions taken in the
    /// console name the token the person signed in with (§17.1.1).
    pub fn caller(&self) -> axum::Extension<crate::auth::Caller> {
        axum::Extension(crate::auth::Caller {
            token: self.session.name.clone(),
            token_hash: self.session.token_hash.clone(),
            scope: vouch_core::Scope::Person,
            identity: None,
            via: "console",
        })
    }
}

/// The answer when no valid session comes with a request.
pub struct SignInFirst {
    next: String,
    live: bool,
}

impl IntoResponse for SignInFirst {
    fn into_response(self) -> Response {
        if self.live {
            return (StatusCode::UNAUTHORIZED, "sign in again at /console/signin").into_response();
        }
        let next = view::url_encode(&self.next);
        Redirect::to(&format!("{BASE}/signin?next={next}")).into_response()
    }
}

impl FromRequestParts<AppState> for Signed {
    type Rejection = SignInFirst;

    async fn from_request_parts(parts: &mut Parts, s: &AppState) -> Result<Self, SignInFirst> {
        let reject = SignInFirst {
            next: if parts.method == axum::http::Method::GET {
                parts
                    .uri
                    .path_and_query()
                    .map(|p| p.as_str().to_string())
                    .unwrap_or_else(|| BASE.into())
            } else {
                // A form sent after the session ended: back to the page it came from (the
                // card, the run), never to the form's own address, which takes no GET.
                let path = parts.uri.path();
                match path.rsplit_once('/') {
                    Some((page, "approve" | "deny" | "edit" | "answer")) => page.to_string(),
                    _ => BASE.to_string(),
                }
            },
            live: parts.uri.path().ends_with("/live"),
        };
        let Some(id) = cookie(&parts.headers, COOKIE_NAME) else {
            return Err(reject);
        };
        let found = {
            let map = s.console.sessions.lock().unwrap_or_else(|p| p.into_inner());
            map.get(&id).cloned()
        };
        let Some(session) = found.filter(|x| now_ms() - x.created_ms < SESSION_TTL_MS) else {
            return Err(reject);
        };
        // A revoked token signs its sessions out.
        let store = s.store.clone();
        let hash = session.token_hash.clone();
        match blocking(move || Ok(store.token_by_hash(&hash)?)).await {
            Ok(Some(_)) => Ok(Signed { id, session }),
            _ => {
                s.console
                    .sessions
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&id);
                Err(reject)
            }
        }
    }
}

/// An `application/x-www-form-urlencoded` body as text fields.
pub struct Form(pub BTreeMap<String, String>);

impl Form {
    pub fn get(&self, k: &str) -> &str {
        self.0.get(k).map(String::as_str).unwrap_or("")
    }
}

pub fn parse_form(body: &[u8]) -> Result<Form, String> {
    let text = std::str::from_utf8(body).map_err(|_| "the form is not UTF-8".to_string())?;
    let mut map = BTreeMap::new();
    for pair in text.split('&').filter(|p| !p.is_empty()) {
        if map.len() >= FORM_FIELDS_MAX {
            return Err(format!("the form has more than {FORM_FIELDS_MAX} fields"));
        }
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        let dec = |s: &str| {
            view::url_decode(s)
                .ok_or_else(|| format!("form field `{k}` is not valid percent-encoded UTF-8"))
        };
        map.insert(dec(k)?, dec(v)?);
    }
    Ok(Form(map))
}

/// A form post from a signed-in person: same origin, CSRF token matching the session's.
// The error is the page answered at once, never carried further: boxing it buys nothing.
#[allow(clippy::result_large_err)]
pub fn checked_form(signed: &Signed, headers: &HeaderMap, body: &Bytes) -> Result<Form, Response> {
    if !same_origin(headers) {
        return Err(view::error_page(
            Some(signed),
            StatusCode::FORBIDDEN,
            "This form was sent from another site, so it was refused. Open the console directly and try again.",
        ));
    }
    let form = parse_form(body)
        .map_err(|e| view::error_page(Some(signed), StatusCode::BAD_REQUEST, &e))?;
    if !same(form.get("csrf"), &signed.session.csrf) {
        return Err(view::error_page(
            Some(signed),
            StatusCode::FORBIDDEN,
            "This form is out of date (its security token does not match your session). Reload the page and send it again.",
        ));
    }
    Ok(form)
}

fn signin_form(next: &str, error: Option<&str>, status: StatusCode) -> Response {
    let body = html! {
        h1 { "Sign in to vouch" }
        @if let Some(e) = error {
            p.error role="alert" { (view::inert(e)) }
        }
        form.signin method="post" action={(BASE) "/signin"} {
            input type="hidden" name="next" value=(next);
            label for="token" { "API token" }
            input #token type="password" name="token" autocomplete="current-password" required autofocus;
            p.hint { "Create one with " code { "vouch token new NAME" } " on the machine that runs vouch; it is shown once." }
            label for="tz" { "Your time zone" }
            input #tz type="text" name="tz" value="UTC" data-browser-zone;
            p.hint { "Every time is shown in this zone (an IANA name such as Europe/Berlin)." }
            button type="submit" { "Sign in" }
        }
    };
    view::render(
        None,
        status,
        Page {
            title: "Sign in",
            live: None,
        },
        body,
    )
}

pub async fn signin_page(q: crate::extract::QueryMap) -> Response {
    let next = q.0.get("next").cloned().unwrap_or_else(|| BASE.into());
    signin_form(&safe_next(&next), None, StatusCode::OK)
}

/// Only a path inside the console may be a redirect target (no open redirect), and only
/// visible ASCII: a CR, an LF or any byte a `Location` header cannot carry would make the
/// redirect itself fail, so such a `next` sends the person to the inbox instead.
fn safe_next(next: &str) -> String {
    if next.starts_with(BASE)
        && !next.starts_with("//")
        && !next.contains("://")
        && next.bytes().all(|b| b.is_ascii_graphic())
    {
        next.to_string()
    } else {
        BASE.to_string()
    }
}

/// Whether the browser reached us over TLS: a reverse proxy in front says so with
/// `X-Forwarded-Proto: https` (or `Forwarded: proto=https`), and a browser's `Origin` names
/// the scheme it used. Marking the cookie `Secure` then only ever narrows where it goes.
fn behind_tls(headers: &HeaderMap) -> bool {
    let text = |h: &str| headers.get(h).and_then(|v| v.to_str().ok()).unwrap_or("");
    text("x-forwarded-proto").eq_ignore_ascii_case("https")
        || text("forwarded")
            .to_ascii_lowercase()
            .split([';', ','])
            .any(|kv| kv.trim() == "proto=https")
        || text(ORIGIN.as_str()).starts_with("https://")
}

fn session_cookie(id: &str, max_age_s: i64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    HeaderValue::from_str(&format!(
        "{COOKIE_NAME}={id}; Path={BASE}; HttpOnly; SameSite=Strict; Max-Age={max_age_s}{secure}"
    ))
    .unwrap_or_else(|_| HeaderValue::from_static("vouch_session=; Path=/console"))
}

pub async fn signin(State(s): State<AppState>, headers: HeaderMap, body: Bytes) -> Response {
    if !same_origin(&headers) {
        return signin_form(
            BASE,
            Some("This sign-in was sent from another site, so it was refused."),
            StatusCode::FORBIDDEN,
        );
    }
    let form = match parse_form(&body) {
        Ok(f) => f,
        Err(e) => return signin_form(BASE, Some(&e), StatusCode::BAD_REQUEST),
    };
    let next = safe_next(form.get("next"));
    let opened = match signin_tz(form.get("tz")) {
        Ok(tz) => open_session(&s, form.get("token").trim(), tz).await,
        Err(e) => Err(e),
    };
    let id = match opened {
        Ok(id) => id,
        Err(e) => return signin_form(&next, Some(&e.detail), e.status),
    };
    let mut resp = Redirect::to(&next).into_response();
    resp.headers_mut().insert(
        SET_COOKIE,
        session_cookie(&id, SESSION_TTL_MS / 1000, behind_tls(&headers)),
    );
    resp
}

/// Why a sign-in was refused: the sign-in form shows `detail`, answered with `status`.
struct Refused {
    status: StatusCode,
    detail: String,
}

impl Refused {
    fn new(status: StatusCode, detail: impl Into<String>) -> Self {
        Refused {
            status,
            detail: detail.into(),
        }
    }
}

/// The time zone the person's browser sent (UTC when none).
fn signin_tz(z: &str) -> Result<chrono_tz::Tz, Refused> {
    match z.trim() {
        "" => Ok(chrono_tz::UTC),
        z => z.parse::<chrono_tz::Tz>().map_err(|_| {
            Refused::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!(
                    "Time zone `{z}` is unknown; use an IANA name such as Europe/Berlin or UTC."
                ),
            )
        }),
    }
}

/// A new session for the person token `secret`: refused unless the token is known and a
/// person's (§17.3); answers the session's id.
async fn open_session(s: &AppState, secret: &str, tz: chrono_tz::Tz) -> Result<String, Refused> {
    if secret.is_empty() {
        return Err(Refused::new(
            StatusCode::UNPROCESSABLE_ENTITY,
            "Paste an API token; create one with `vouch token new NAME`.",
        ));
    }
    let store = s.store.clone();
    let hash = token_hash(secret);
    let h = hash.clone();
    let token = blocking(move || Ok(store.token_by_hash(&h)?))
        .await
        .map_err(|e| Refused::new(e.status, e.detail))?
        .ok_or_else(|| {
            Refused::new(
                StatusCode::UNAUTHORIZED,
                "This token is not known to this vouch home. Create one with `vouch token new NAME`.",
            )
        })?;
    // The console is the person's: a worker, reader or admin token does not sign in (§17.3).
    if token.scope != vouch_core::Scope::Person {
        return Err(Refused::new(
            StatusCode::FORBIDDEN,
            format!(
                "This is a {} token; the console takes a person token. Create one with `vouch token new NAME --scope person`.",
                token.scope
            ),
        ));
    }
    let (id, csrf) = match (random_hex(), random_hex()) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => {
            return Err(Refused::new(StatusCode::INTERNAL_SERVER_ERROR, e))
        }
    };
    keep_session(
        s,
        id.clone(),
        Session {
            name: token.name,
            token_hash: hash,
            csrf,
            tz,
            created_ms: now_ms(),
        },
    );
    Ok(id)
}

/// Keeps a session: expired ones are dropped, and the oldest while `SESSIONS_MAX` are kept.
fn keep_session(s: &AppState, id: String, session: Session) {
    let mut map = s.console.sessions.lock().unwrap_or_else(|p| p.into_inner());
    let now = session.created_ms;
    map.retain(|_, x| now - x.created_ms < SESSION_TTL_MS);
    while map.len() >= SESSIONS_MAX {
        let oldest = map
            .iter()
            .min_by_key(|(_, x)| x.created_ms)
            .map(|(k, _)| k.clone());
        match oldest {
            Some(k) => map.remove(&k),
            None => break,
        };
    }
    map.insert(id, session);
}

pub async fn signout(
    State(s): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(r) = checked_form(&signed, &headers, &body) {
        return r;
    }
    s.console
        .sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .remove(&signed.id);
    let mut resp = Redirect::to(&format!("{BASE}/signin")).into_response();
    resp.headers_mut()
        .insert(SET_COOKIE, session_cookie("", 0, behind_tls(&headers)));
    resp
}

/// Change the zone times are shown in.
pub async fn set_zone(
    State(s): State<AppState>,
    signed: Signed,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let form = match checked_form(&signed, &headers, &body) {
        Ok(f) => f,
        Err(r) => return r,
    };
    let z = form.get("tz").trim();
    let Ok(tz) = z.parse::<chrono_tz::Tz>() else {
        return view::error_page(
            Some(&signed),
            StatusCode::UNPROCESSABLE_ENTITY,
            &format!("Time zone `{z}` is unknown; use an IANA name such as Europe/Berlin or UTC."),
        );
    };
    if let Some(x) = s
        .console
        .sessions
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get_mut(&signed.id)
    {
        x.tz = tz;
    }
    Redirect::to(&safe_next(form.get("next"))).into_response()
}
