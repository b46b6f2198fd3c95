//! `vouch serve --http`: the host over HTTP (contract §17). JSON routes, an OpenAPI document
//! generated from the handlers' types, SSE streams of run events and of the inbox, Prometheus
//! metrics. The interface decides nothing: every route calls the runtime (Host methods and
//! its library code), and the synchronous host runs on blocking threads, off the async ones.
//! Every route is authenticated with a bearer token whose hash is in the store; every error
//! is a problem object (RFC 9457) with a stable code.

pub mod api;
pub mod attempt;
pub mod auth;
pub mod console;
pub mod dto;
pub mod extract;
pub mod identities;
pub mod mcp;
pub mod metrics;
pub mod openapi;
pub mod problem;
pub mod sse;
pub mod tasks;
pub mod work;

use axum::extract::DefaultBodyLimit;
use axum::routing::{get, post};
use axum::Router;
use std::future::Future;
use std::sync::Arc;
use vouch_runtime::doctor::DoctorReport;
use vouch_runtime::Host;
use vouch_store::Store;

pub use auth::{new_token, token_hash};
pub use problem::{ApiError, ApiResult, Problem};

/// A request body's size at most (a payload is at most 1 MiB, §limits; JSON framing beside).
pub const REQUEST_BYTES_MAX: usize = (1 << 20) + 64 * 1024;
/// Runs one page lists at most.
pub const PAGE_RUNS_MAX: usize = 500;
/// How deep `offset` may page into the runs (newest first).
pub const PAGE_OFFSET_MAX: usize = 100_000;

/// Event streams (run events and inbox) open at once at most; one more is 503 `unavailable`.
pub const STREAMS_MAX: usize = 64;

/// The doctor's report, computed on each request (vouch.toml may change while serving).
pub type DoctorFn = Arc<dyn Fn() -> Result<DoctorReport, String> + Send + Sync>;

/// What every handler shares.
#[derive(Clone)]
pub struct AppState {
    /// Decisions go through the host (its write path buffers to durability points).
    pub host: Arc<Host>,
    /// Reads see what is durable, as every other process does.
    pub store: Arc<dyn Store>,
    pub doctor: DoctorFn,
    pub metrics: Arc<metrics::Metrics>,
    /// How often an SSE stream looks for new durable events (other processes write too).
    pub poll_ms: u64,
    /// The task board, when the store has one (§13).
    pub board: Option<Arc<dyn vouch_store::board::BoardStore>>,
    /// Permits for open event streams (`STREAMS_MAX`).
    pub streams: Arc<tokio::sync::Semaphore>,
    /// The workers' side: identities, artifacts, task types (§13).
    pub work: work::Work,
    /// The web console's sessions and its hooks (presence, artifacts).
    pub console: console::Console,
    /// Wake-ups: bumped whenever a task, a card or a run's state may have changed — by writes
    /// through this server, and on PostgreSQL by every host's writes (`LISTEN`). Event streams
    /// and claim-next long-polls wait on it, with `poll_ms` as the fallback.
    pub wakeups: Arc<tokio::sync::watch::Sender<u64>>,
    /// The `Host` names this server answers to, against DNS rebinding (§17.1); `None` answers
    /// any. `vouch serve --http` on loopback sets [`loopback_hosts`] plus `--allow-host`.
    pub allowed_hosts: Option<Arc<Vec<String>>>,
}

impl AppState {
    pub fn new(host: Arc<Host>, store: Arc<dyn Store>, doctor: DoctorFn) -> Self {
        AppState {
            host,
            store,
            doctor,
            metrics: Arc::new(metrics::Metrics::default()),
            poll_ms: 250,
            board: None,
            streams: Arc::new(tokio::sync::Semaphore::new(STREAMS_MAX)),
            work: work::Work::default(),
            console: console::Console::default(),
            wakeups: Arc::new(tokio::sync::watch::channel(0).0),
            allowed_hosts: None,
        }
    }

    /// Something may have changed: wake every event stream and long-poll waiting now.
    pub fn wake(&self) {
        self.wakeups.send_modify(|n| *n = n.wrapping_add(1));
    }

    /// Wait until woken (see [`AppState::wakeups`]) or `fallback` passed, whichever is first;
    /// true when woken.
    pub async fn woken_or(
        &self,
        seen: &mut tokio::sync::watch::Receiver<u64>,
        fallback: std::time::Duration,
    ) -> bool {
        tokio::select! {
            r = seen.changed() => {
                if r.is_err() {
                    tokio::time::sleep(fallback).await;
                }
                r.is_ok()
            }
            () = tokio::time::sleep(fallback) => false,
        }
    }
}

/// Run the host's synchronous work on a blocking thread.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> ApiResult<T> + Send + 'static,
) -> ApiResult<T> {
    tokio::task::spawn_blocking(f).await?
}

/// The runs, their cards, schedules, the host's own routes and identities.
fn run_routes() -> Router<AppState> {
    Router::new()
        .route("/api/runs", get(api::list_runs).post(api::start_run))
        .route("/api/runs/{id}", get(api::get_run))
        .route("/api/runs/{id}/journal", get(api::get_journal))
        .route("/api/runs/{id}/receipt", get(api::get_receipt))
        .route("/api/runs/{id}/events", get(sse::run_events))
        .route(
            "/api/runs/{id}/deliveries/{delivery}/approve",
            post(api::approve),
        )
        .route("/api/runs/{id}/deliveries/{delivery}/deny", post(api::deny))
        .route("/api/runs/{id}/deliveries/{delivery}/edit", post(api::edit))
        .route("/api/runs/{id}/answer", post(api::answer))
        .route("/api/runs/{id}/cancel", post(api::cancel))
        .route("/api/runs/{id}/resume", post(api::resume))
        .route("/api/approvals", get(api::approvals))
        .route("/api/inbox", get(api::inbox))
        .route("/api/inbox/events", get(sse::inbox_events))
        .route(
            "/api/schedules",
            get(api::list_schedules).post(api::add_schedule),
        )
        .route(
            "/api/schedules/{name}",
            get(api::get_schedule).delete(api::remove_schedule),
        )
        .route("/api/schedules/{name}/run", post(api::run_schedule_now))
        .route("/api/doctor", get(api::doctor))
        .route("/api/host-key", get(api::host_key))
        .route(
            "/api/identities",
            get(identities::list).post(identities::enrol),
        )
}

/// The board's tasks, workers and artifacts (§13).
fn board_routes() -> Router<AppState> {
    Router::new()
        .route("/api/tasks/{id}", get(tasks::get_task))
        .route("/api/tasks/{id}/cancel", post(tasks::cancel_task))
        .route("/api/tasks", get(tasks::list_tasks).post(tasks::offer_task))
        .route("/api/tasks/claim-next", post(tasks::claim_next))
        .route(
            "/api/tasks/{id}/attempts/{n}/heartbeat",
            post(tasks::heartbeat),
        )
        .route("/api/tasks/{id}/attempts/{n}/submit", post(tasks::submit))
        .route("/api/tasks/{id}/attempts/{n}/fail", post(tasks::fail))
        .route("/api/tasks/{id}/attempts/{n}/abort", post(tasks::abort))
        .route("/api/tasks/{id}/attempts/{n}/call", post(tasks::call))
        .route("/api/tasks/{id}/result", get(tasks::task_result))
        .route("/api/tasks/{id}/continue", post(tasks::continue_task))
        .route(
            "/api/artifacts/{cid}",
            get(tasks::get_artifact).put(tasks::put_artifact),
        )
}

/// Every route, behind authentication.
pub fn router(state: AppState) -> Router {
    let api = run_routes()
        .merge(board_routes())
        .nest_service("/mcp", mcp::http_service(state.clone()))
        .route("/api/openapi.json", get(openapi::document))
        .route("/api/measures", get(console::measures::api))
        .route("/metrics", get(metrics::render))
        .fallback(api::no_route)
        .method_not_allowed_fallback(api::method_not_allowed);
    let api = api.layer(axum::middleware::from_fn(limit_mcp_body)).layer(
        axum::middleware::from_fn_with_state(state.clone(), auth::require_token),
    );
    // The web console: its own sign-in (a session cookie), beside the token-guarded API.
    console::router()
        .merge(api)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::count_requests,
        ))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            wake_after_writes,
        ))
        .layer(DefaultBodyLimit::max(REQUEST_BYTES_MAX))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            check_host,
        ))
        .with_state(state)
}

/// The `Host` names a server bound to `local` answers to by default: `localhost`,
/// `127.0.0.1`, `[::1]` and the bound address, each with the bound port.
pub fn loopback_hosts(local: std::net::SocketAddr) -> Vec<String> {
    let port = local.port();
    let mut hosts: Vec<String> = ["localhost", "127.0.0.1", "[::1]"]
        .iter()
        .map(|h| format!("{h}:{port}"))
        .collect();
    let bound = local.to_string();
    if !hosts.contains(&bound) {
        hosts.push(bound);
    }
    hosts
}

/// Whether `host` (a request's `Host`) is one of `allowed`: an entry with a port matches
/// exactly, one without matches that name on any port; case does not matter.
pub fn host_allowed(allowed: &[String], host: &str) -> bool {
    let host = host.trim().to_ascii_lowercase();
    let name = match host.rsplit_once(':') {
        Some((n, port)) if !port.contains(']') && port.bytes().all(|b| b.is_ascii_digit()) => n,
        _ => host.as_str(),
    };
    allowed.iter().any(|a| {
        let a = a.to_ascii_lowercase();
        a == host || a == name
    })
}

/// Refuse a request whose `Host` is not allowed (DNS rebinding: a page on another site whose
/// name resolves to loopback must not reach this server): 421 `misdirected`, naming the
/// allowed hosts. Before authentication, so it holds for the console and the API alike.
async fn check_host(
    axum::extract::State(s): axum::extract::State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let Some(allowed) = &s.allowed_hosts else {
        return next.run(req).await;
    };
    let host = req
        .headers()
        .get(axum::http::header::HOST)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string)
        .or_else(|| req.uri().authority().map(|a| a.to_string()));
    match host {
        Some(h) if host_allowed(allowed, &h) => next.run(req).await,
        h => ApiError::new(
            axum::http::StatusCode::MISDIRECTED_REQUEST,
            "misdirected",
            format!(
                "Host `{}` is not one this server answers to; use one of: {} (add names with `vouch serve --allow-host NAME`)",
                vouch_core::escape_line(&h.unwrap_or_default().chars().take(200).collect::<String>()),
                allowed.join(", ")
            ),
        )
        .into_response(),
    }
}

/// A request that may have changed the board, a card or a run (any answered 2xx but a read, a
/// heartbeat or a claim) wakes this server's event streams and long-polls: the in-process
/// channel, on every backend; other hosts' writes arrive through the store (§9.2.7).
async fn wake_after_writes(
    axum::extract::State(s): axum::extract::State<AppState>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    let path = req.uri().path();
    let writes = !matches!(
        *req.method(),
        axum::http::Method::GET | axum::http::Method::HEAD
    ) && !path.ends_with("/heartbeat")
        && !path.ends_with("/claim-next");
    let res = next.run(req).await;
    if writes && res.status().is_success() {
        s.wake();
    }
    res
}

/// `/mcp` reads its body itself (the MCP SDK), past axum's `DefaultBodyLimit`: its body is
/// read here with the same limit, and a larger one is 413 naming the limit before the SDK
/// sees a byte of it.
async fn limit_mcp_body(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if !req.uri().path().starts_with("/mcp") {
        return next.run(req).await;
    }
    let (parts, body) = req.into_parts();
    match axum::body::to_bytes(body, REQUEST_BYTES_MAX).await {
        Ok(bytes) => {
            next.run(axum::extract::Request::from_parts(
                parts,
                axum::body::Body::from(bytes),
            ))
            .await
        }
        Err(_) => too_large().into_response(),
    }
}

/// 413 naming the request limit.
pub(crate) fn too_large() -> ApiError {
    ApiError::new(
        axum::http::StatusCode::PAYLOAD_TOO_LARGE,
        "too_large",
        format!("the request body is larger than the limit of {REQUEST_BYTES_MAX} bytes; send less (a payload is at most 1 MiB)"),
    )
}

/// Serve until `shutdown` resolves.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: AppState,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, router(state))
        .with_graceful_shutdown(shutdown)
        .await
}
