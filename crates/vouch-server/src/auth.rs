//! Bearer tokens (§17): `vouch token new NAME` shows a secret once; the store keeps only its
//! SHA-256. Every route requires `Authorization: Bearer <secret>`, and the token's scope
//! (§17.1.1) must be one the route admits: `ROUTES` is the one table of who may call what
//! (`MCP_TOOLS` the same for MCP's tools), checked here before any handler runs.

use crate::problem::ApiError;
use crate::{blocking, AppState};
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};
use vouch_core::{Principal, Scope};

/// Bytes of randomness in a token's secret.
pub const TOKEN_SECRET_BYTES: usize = 32;
/// What every secret starts with, so a leaked one is recognisable.
pub const TOKEN_PREFIX: &str = "vouch_";

/// The stored form of a secret: hex SHA-256 of its text.
pub fn token_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// A fresh secret and its hash, from the operating system's randomness.
pub fn new_token() -> Result<(String, String), String> {
    let mut bytes = [0u8; TOKEN_SECRET_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for a token: {e}"))?;
    let secret = format!("{TOKEN_PREFIX}{}", hex::encode(bytes));
    let hash = token_hash(&secret);
    Ok((secret, hash))
}

/// Who is calling: the token that authenticated the request. Handlers read it from the
/// request's extensions; a decision journals it as its principal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    /// The token's name.
    pub token: String,
    /// The token's stored hash: an open stream re-reads it so that removing the token (from
    /// any process) ends the stream.
    pub token_hash: String,
    pub scope: Scope,
    /// The identity a worker token acts as.
    pub identity: Option<String>,
    /// How the request came: `http` (the JSON API and `/mcp`) or `console`.
    pub via: &'static str,
}

impl Caller {
    /// This caller as the principal of a decision it takes.
    pub fn principal(&self) -> Principal {
        Principal {
            name: self.token.clone(),
            scope: self.scope,
            via: self.via.into(),
        }
    }

    /// Whether this caller may read `run` once its scope admitted the route or tool: a worker
    /// token reads only the runs of its own identity's attempts, live or ended (§17.1.1); any
    /// other run is 403 `forbidden`, one that does not exist too, so a worker cannot tell
    /// another's run from none. Every other scope reads every run.
    pub fn reads_run(&self, state: &AppState, run: &str) -> crate::ApiResult<()> {
        if self.scope != Scope::Worker {
            return Ok(());
        }
        let claimant = match &state.board {
            Some(board) => board.attempt_of_run(run)?.map(|a| a.claimant),
            None => None,
        };
        match (claimant, &self.identity) {
            (Some(c), Some(me)) if c == *me => Ok(()),
            _ => Err(ApiError::forbidden(format!(
                "run `{}` is not the run of an attempt of `{}`; a worker token reads only its own attempts' runs",
                vouch_core::escape_line(run),
                self.identity.as_deref().unwrap_or_default()
            ))),
        }
    }

    /// A worker token acts only as its own identity: any other claimant is 403 `forbidden`.
    pub fn acts_as(&self, claimant: &str) -> Result<(), ApiError> {
        match (&self.scope, &self.identity) {
            (Scope::Worker, Some(me)) if me == claimant => Ok(()),
            (Scope::Worker, Some(me)) => Err(ApiError::forbidden(format!(
                "this worker token acts only as `{me}`, not as `{}`; use that identity's own token",
                vouch_core::escape_line(claimant)
            ))),
            _ => Err(ApiError::forbidden(format!(
                "a {} token cannot act as a worker; make one with `vouch token new NAME --scope worker --identity {}`",
                self.scope,
                vouch_core::escape_line(claimant)
            ))),
        }
    }
}

use Scope::{Admin as A, Person as P, Reader as R, Worker as W};

/// Every route and the scopes that may call it (§17.1.1), in one table. A path segment `{x}`
/// matches any one segment; literal routes come before the parametrised ones they overlap.
/// A row's `GET` is also its `HEAD` (the router answers a HEAD with the GET handler). A
/// request matching no entry is the router's (404 `not_found`, 405 for another method) for
/// any authenticated caller. A worker never decides (approve, deny, edit, answer,
/// cancel, resume): no decision route lists `W`, and a test walks this table against the
/// OpenAPI document for every scope.
pub const ROUTES: &[(&str, &str, &[Scope])] = &[
    ("GET", "/api/runs", &[P, R]),
    ("POST", "/api/runs", &[P]),
    ("GET", "/api/runs/{id}", &[P, R]),
    ("GET", "/api/runs/{id}/journal", &[P, R]),
    ("GET", "/api/runs/{id}/receipt", &[P, R]),
    ("GET", "/api/runs/{id}/events", &[P, R]),
    ("POST", "/api/runs/{id}/deliveries/{delivery}/approve", &[P]),
    ("POST", "/api/runs/{id}/deliveries/{delivery}/deny", &[P]),
    ("POST", "/api/runs/{id}/deliveries/{delivery}/edit", &[P]),
    ("POST", "/api/runs/{id}/answer", &[P]),
    ("POST", "/api/runs/{id}/cancel", &[P]),
    ("POST", "/api/runs/{id}/resume", &[P]),
    ("GET", "/api/approvals", &[P, R]),
    ("GET", "/api/inbox", &[P, R]),
    ("GET", "/api/inbox/events", &[P, R]),
    ("GET", "/api/schedules", &[P, R]),
    ("POST", "/api/schedules", &[P]),
    ("GET", "/api/schedules/{name}", &[P, R]),
    ("DELETE", "/api/schedules/{name}", &[P]),
    ("POST", "/api/schedules/{name}/run", &[P]),
    ("GET", "/api/doctor", &[P, R]),
    ("GET", "/api/host-key", &[P, R, W]),
    ("GET", "/api/identities", &[A]),
    ("POST", "/api/identities", &[A]),
    ("GET", "/api/tasks", &[P, R, W]),
    ("POST", "/api/tasks", &[P]),
    ("POST", "/api/tasks/claim-next", &[W]),
    ("GET", "/api/tasks/{id}", &[P, R, W]),
    ("POST", "/api/tasks/{id}/cancel", &[P]),
    ("GET", "/api/tasks/{id}/result", &[P, R, W]),
    ("POST", "/api/tasks/{id}/continue", &[P]),
    ("POST", "/api/tasks/{id}/attempts/{n}/heartbeat", &[W]),
    ("POST", "/api/tasks/{id}/attempts/{n}/submit", &[W]),
    ("POST", "/api/tasks/{id}/attempts/{n}/fail", &[W]),
    ("POST", "/api/tasks/{id}/attempts/{n}/abort", &[W]),
    ("POST", "/api/tasks/{id}/attempts/{n}/call", &[W]),
    ("GET", "/api/artifacts/{cid}", &[P, R, W]),
    ("PUT", "/api/artifacts/{cid}", &[W]),
    ("GET", "/api/openapi.json", &[P, R, W, A]),
    ("GET", "/api/measures", &[P, R]),
    ("GET", "/metrics", &[P, R]),
    // MCP is one endpoint; which of its tools a scope may call is `MCP_TOOLS`.
    ("*", "/mcp", &[P, R, W]),
];

/// The run routes a worker token reads for the runs of its own identity's attempts only (the
/// `{id}` is the run of an attempt it claimed, live or ended), beside what `ROUTES` gives it:
/// its run and receipt, as `run_status` and `receipt` over MCP. Any other run is 403.
pub const WORKER_OWN_RUNS: &[&str] = &["/api/runs/{id}", "/api/runs/{id}/receipt"];

/// Every MCP tool and the scopes that may call it. Verb tools (`save`, `send`, …) are
/// `"verb"`: an agent performing an item of its own run. No tool decides a card.
pub const MCP_TOOLS: &[(&str, &[Scope])] = &[
    ("task_list", &[P, R, W]),
    ("task_offer", &[P]),
    ("task_claim", &[W]),
    ("task_heartbeat", &[W]),
    ("task_submit", &[W]),
    ("task_fail", &[W]),
    ("task_abort", &[W]),
    ("task_continue", &[P]),
    ("task_result", &[P, R, W]),
    ("task_cancel", &[P]),
    ("artifact_put", &[W]),
    ("artifact_get", &[P, R, W]),
    ("declare", &[P, W]),
    ("verb", &[P, W]),
    ("clarify", &[P, W]),
    ("finish", &[P, W]),
    ("run_status", &[P, R, W]),
    ("receipt", &[P, R, W]),
];

/// The table entry for a request, if any: its template and the scopes it admits. The path
/// picks the route as the router does (the first template it matches: a literal before the
/// parametrised one it overlaps), then the method its row; `HEAD` is `GET`'s row, since the
/// router answers a HEAD with the GET route's handler. None: the router answers 404 or 405.
pub fn route_for(method: &str, path: &str) -> Option<(&'static str, &'static [Scope])> {
    if path == "/mcp" || path.starts_with("/mcp/") {
        return Some(("/mcp", &[P, R, W]));
    }
    let method = if method == "HEAD" { "GET" } else { method };
    let segs: Vec<&str> = path.split('/').collect();
    let (_, template, _) = ROUTES.iter().find(|(_, template, _)| {
        let t: Vec<&str> = template.split('/').collect();
        t.len() == segs.len()
            && t.iter()
                .zip(&segs)
                .all(|(t, s)| (t.starts_with('{') && !s.is_empty()) || t == s)
    })?;
    ROUTES
        .iter()
        .find(|(m, t, _)| *m == method && t == template)
        .map(|(_, t, scopes)| (*t, *scopes))
}

/// The scopes an MCP tool admits (a verb tool's are `"verb"`'s); none for an unknown tool.
pub fn tool_scopes(tool: &str) -> &'static [Scope] {
    let key = if vouch_core::Verb::ALL.iter().any(|v| v.as_str() == tool) {
        "verb"
    } else {
        tool
    };
    MCP_TOOLS
        .iter()
        .find(|(t, _)| *t == key)
        .map(|(_, s)| *s)
        .unwrap_or(&[])
}

/// True when the token with this hash is gone: removed (`vouch token rm`, perhaps by another
/// process) since the stream holding it opened. Read from the store on every tick.
pub fn revoked(store: &dyn vouch_store::Store, hash: &str) -> crate::ApiResult<bool> {
    Ok(store.token_by_hash(hash)?.is_none())
}

/// The `error` event an API stream sends as its last when its token was removed.
pub fn revoked_problem() -> ApiError {
    ApiError::unauthorized(
        "the bearer token was removed while this stream was open; the stream ends here",
    )
}

/// 403 `forbidden` naming what the scope lacks and which scopes would do.
pub fn refuse(scope: Scope, what: &str, allowed: &[Scope]) -> ApiError {
    let names: Vec<&str> = allowed.iter().map(|s| s.as_str()).collect();
    ApiError::forbidden(format!(
        "a {scope} token may not call {what}; it takes a token of scope {} (`vouch token new NAME --scope {}`)",
        names.join(" or "),
        names.first().copied().unwrap_or("person"),
    ))
}

pub async fn require_token(
    State(state): State<AppState>,
    mut req: Request,
    next: Next,
) -> Response {
    let secret = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(|s| s.trim().to_string());
    let Some(secret) = secret.filter(|s| !s.is_empty()) else {
        return ApiError::unauthorized(
            "missing `Authorization: Bearer <token>`; create a token with `vouch token new NAME`",
        )
        .into_response();
    };
    let store = state.store.clone();
    let hash = token_hash(&secret);
    let lookup = hash.clone();
    let token = match blocking(move || Ok(store.token_by_hash(&lookup)?)).await {
        Ok(Some(t)) => t,
        Ok(None) => {
            return ApiError::unauthorized(
                "the bearer token is not known to this vouch home; create one with `vouch token new NAME`",
            )
            .into_response()
        }
        Err(e) => return e.into_response(),
    };
    let caller = Caller {
        token: token.name,
        token_hash: hash,
        scope: token.scope,
        identity: token.identity,
        via: "http",
    };
    let method = req.method().as_str().to_string();
    if let Err(e) = authorize(&state, &caller, &method, req.uri().path()).await {
        return e.into_response();
    }
    req.extensions_mut().insert(caller);
    next.run(req).await
}

/// Whether the table admits `caller` for `method` on `path` (any method, HEAD as GET): its
/// scope's row, or for a worker token a run route of `WORKER_OWN_RUNS` on the run of one of
/// its identity's attempts. A request with no row is the router's to answer (404 or 405).
async fn authorize(
    state: &AppState,
    caller: &Caller,
    method: &str,
    path: &str,
) -> crate::ApiResult<()> {
    let Some((template, allowed)) = route_for(method, path) else {
        return Ok(());
    };
    if allowed.contains(&caller.scope) {
        return Ok(());
    }
    if caller.scope == Scope::Worker && WORKER_OWN_RUNS.contains(&template) {
        // `/api/runs/{id}…`: the run is the fourth segment.
        let run = path.split('/').nth(3).unwrap_or_default().to_string();
        let (state, caller) = (state.clone(), caller.clone());
        return blocking(move || caller.reads_run(&state, &run)).await;
    }
    Err(refuse(
        caller.scope,
        &format!("{method} {template}"),
        allowed,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literal_routes_win_and_params_match_one_segment() {
        assert_eq!(
            route_for("POST", "/api/tasks/claim-next").map(|r| r.0),
            Some("/api/tasks/claim-next")
        );
        assert_eq!(
            route_for("GET", "/api/tasks/t1").map(|r| r.0),
            Some("/api/tasks/{id}")
        );
        assert_eq!(route_for("GET", "/api/tasks//x"), None);
        assert_eq!(route_for("GET", "/api/nowhere"), None);
        assert_eq!(route_for("POST", "/mcp").map(|r| r.0), Some("/mcp"));
        // The literal route has no GET: the router answers 405, not `/api/tasks/{id}`'s GET.
        assert_eq!(route_for("GET", "/api/tasks/claim-next"), None);
    }

    #[test]
    fn head_is_authorized_as_get() {
        for (m, path, scopes) in ROUTES.iter().filter(|r| r.0 == "GET") {
            assert_eq!(
                route_for("HEAD", path),
                Some((*path, *scopes)),
                "{m} {path}"
            );
        }
        assert_eq!(
            route_for("HEAD", "/api/identities").map(|r| r.1),
            Some(&[A][..])
        );
    }

    #[test]
    fn no_worker_decides_on_any_route_or_tool() {
        for (m, path, scopes) in ROUTES {
            let decides = [
                "/approve", "/deny", "/edit", "/answer", "/cancel", "/resume",
            ]
            .iter()
            .any(|d| path.ends_with(d));
            if decides {
                assert_eq!(*scopes, &[P][..], "{m} {path}");
            }
        }
        for t in ["task_offer", "task_cancel", "task_continue"] {
            assert!(!tool_scopes(t).contains(&W), "{t}");
        }
        assert!(tool_scopes("no_such_tool").is_empty());
        assert_eq!(tool_scopes("send"), &[P, W][..]);
    }

    #[test]
    fn every_mcp_tool_has_a_row() {
        for t in crate::mcp::tools() {
            assert!(!tool_scopes(&t.name).is_empty(), "{}", t.name);
        }
    }
}
