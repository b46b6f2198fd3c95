//! `vouch serve --http ADDR`: the scheduler loop on its own thread and the HTTP API
//! (vouch-server) on a tokio runtime, over the same host.

use crate::{bad, home};
use anyhow::{anyhow, Context as _, Result};
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use vouch_runtime::Host;

/// Who may reach the server: `--allow-remote` (listen beyond loopback) and `--allow-host`
/// (more `Host` names than loopback's).
pub struct Reach {
    pub allow_remote: bool,
    pub allow_host: Vec<String>,
}

/// Bytes of one `--allow-host` name at most (a DNS name is at most 253, a port beside).
const ALLOW_HOST_BYTES_MAX: usize = 300;

/// Each `--allow-host` name, checked: a host name or address, with or without a port.
fn allow_hosts(names: &[String], from: &str) -> Result<Vec<String>> {
    names
        .iter()
        .map(|n| {
            let ok = !n.is_empty()
                && n.len() <= ALLOW_HOST_BYTES_MAX
                && n
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b".-:[]_".contains(&b));
            if ok {
                Ok(n.to_ascii_lowercase())
            } else {
                Err(bad(format!(
                    "{from} `{}`: expected a host name or address, optionally with :PORT (like vouch.example or vouch.example:8443)",
                    vouch_core::escape_line(&n.chars().take(80).collect::<String>())
                )))
            }
        })
        .collect()
}

pub fn serve(
    dir: &Path,
    host: Arc<Host>,
    addr: &str,
    reach: Reach,
    tick_ms: u64,
    json: bool,
) -> Result<i32> {
    let addr: SocketAddr = addr.parse().map_err(|_| {
        bad(format!(
            "--http `{addr}`: expected an address with a port, like 127.0.0.1:7070"
        ))
    })?;
    let mut extra_hosts = allow_hosts(&reach.allow_host, "--allow-host")?;
    let cfg = home::config(dir)?;
    if let Some(http) = &cfg.http {
        extra_hosts.extend(allow_hosts(
            &http.allowed_hosts,
            "vouch.toml [http] allowed_hosts",
        )?);
    }
    if !addr.ip().is_loopback() && !reach.allow_remote {
        return Err(bad(format!(
            "--http {addr} listens beyond loopback; pass --allow-remote to mean it (and put a TLS reverse proxy in front)"
        )));
    }
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("VOUCH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .try_init();
    let ticker = host.clone();
    let (_, board) = crate::task::open_board(dir)?;
    std::thread::Builder::new()
        .name("vouch-scheduler".into())
        .spawn(move || loop {
            if let Err(e) = crate::cmd::schedule::scheduler_pass(&ticker, false) {
                tracing::error!(error = %format!("{e:#}"), "scheduler pass failed");
            }
            std::thread::sleep(std::time::Duration::from_millis(tick_ms.max(50)));
            // Runs whose owner died while we serve are ended here (§9.1 b).
            if let Err(e) = ticker.boot() {
                tracing::error!(error = %e, "start-up reconciliation pass failed");
            }
            // A suspended task run waits for the task's next claimant only while its attempt
            // can be resumed; one whose attempt ended is ended here, and a suspended attempt
            // whose run this pass (or any host) ended is settled as that run says (§13.3).
            if let Err(e) = ticker.tend_task_runs(board.as_ref()) {
                tracing::error!(error = %e, "tending the runs of ended and suspended attempts failed");
            }
        })
        .context("start the scheduler thread")?;
    let doctor = doctor_fn(dir, host.clone());
    let mut state = app_state(dir, host, doctor)?;
    // The console's run pages hold `watching` in the home's presence leases (§11.1), which
    // this host reads when it routes a terminal record; artifacts download from the home's
    // artifact store (its folder, or the bucket every host shares).
    state.console.presence = Some(Arc::new(home::FilePresence::new(dir)));
    state.console.artifacts = state.work.artifacts.clone();
    state.poll_ms = poll_ms()?;
    listen_for_wakeups(&state)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("start the async runtime")?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(addr)
            .await
            .map_err(|e| bad(format!("cannot listen on {addr}: {e}")))?;
        let local = listener.local_addr()?;
        // On loopback only loopback's names (and the ones allowed) are answered: a page on
        // another site whose name resolves here cannot drive the API (DNS rebinding). Beyond
        // loopback, any name unless --allow-host lists them.
        if local.ip().is_loopback() || !extra_hosts.is_empty() {
            let mut hosts = if local.ip().is_loopback() {
                vouch_server::loopback_hosts(local)
            } else {
                vec![local.to_string()]
            };
            hosts.extend(extra_hosts);
            state.allowed_hosts = Some(Arc::new(hosts));
        }
        errln!(
            "vouch serve: console on http://{local}/console/ and HTTP API on http://{local}/api (home {}); sign in (or send `Authorization: Bearer TOKEN`) with a token from `vouch token new NAME`. Ctrl-C to stop.",
            dir.display()
        );
        if json {
            outln!("{}", serde_json::json!({"listening": local.to_string()}));
        }
        vouch_server::serve(listener, state, async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await
        .map_err(|e| anyhow!("the HTTP server stopped: {e}"))
    })?;
    Ok(0)
}

/// How often event streams and long-polls look at the store when nothing woke them:
/// `VOUCH_POLL_MS` (10 ms to 10 minutes), default 250 ms.
fn poll_ms() -> Result<u64> {
    match std::env::var("VOUCH_POLL_MS") {
        Err(_) => Ok(250),
        Ok(v) => v
            .trim()
            .parse::<u64>()
            .ok()
            .filter(|n| (10..=600_000).contains(n))
            .ok_or_else(|| {
                bad(format!(
                    "VOUCH_POLL_MS `{}`: expected milliseconds from 10 to 600000",
                    v.chars().take(40).collect::<String>()
                ))
            }),
    }
}

/// On PostgreSQL, every host's writes of tasks, cards and run states wake this server's event
/// streams and long-polls (`LISTEN/NOTIFY`); on SQLite, one machine's processes share the
/// home and the streams poll.
fn listen_for_wakeups(state: &vouch_server::AppState) -> Result<()> {
    let Some((url, schema)) = home::database_url() else {
        return Ok(());
    };
    let pg = vouch_store_postgres::PostgresStore::open(&url, &schema)
        .map_err(|e| anyhow!("open the store to listen for wake-ups: {e}"))?;
    let wakeups = state.wakeups.clone();
    Arc::new(pg)
        .listen(Box::new(move |w| match w {
            Ok(_) => wakeups.send_modify(|n| *n = n.wrapping_add(1)),
            Err(e) => {
                tracing::warn!(error = %e, "wake-ups from PostgreSQL paused; listening again")
            }
        }))
        .context("start the wake-up listener")?;
    Ok(())
}

/// What the HTTP API and MCP serve: the store (reads see what is durable; the host's own
/// writes wait in its buffer until a point), the board, identities, artifacts and task types.
pub fn app_state(
    dir: &Path,
    host: Arc<Host>,
    doctor: vouch_server::DoctorFn,
) -> Result<vouch_server::AppState> {
    let (store, board, ids) = crate::task::open_all(dir)?;
    let mut state = vouch_server::AppState::new(host, store, doctor);
    state.board = Some(board);
    state.work.home = Some(dir.to_path_buf());
    state.work.identities = Some(ids);
    state.work.artifacts = Some(home::open_artifacts(dir)?);
    state.work.types =
        Arc::new(vouch_runtime::host::TaskTypes::with_dir(&dir.join("types")).map_err(bad)?);
    Ok(state)
}

/// The doctor's report, computed on each request (vouch.toml may change while serving, and
/// the outbox with every run that ends).
fn doctor_fn(dir: &Path, host: Arc<Host>) -> vouch_server::DoctorFn {
    let home = dir.to_path_buf();
    Arc::new(move || {
        let cfg = home::config(&home).map_err(|e| format!("{e:#}"))?;
        let pending = host.outbox_pending().map_err(|e| e.to_string())?;
        let mut report =
            vouch_adapters::doctor::doctor(&cfg, &home::providers(&home, &cfg), &pending);
        report.config_path = Some(home.join("vouch.toml").display().to_string());
        Ok(report)
    })
}

/// `vouch mcp [--name NAME]`: MCP on stdin/stdout over this home's host. Logs go to stderr
/// (stdout carries the protocol).
pub fn mcp(dir: &Path, host: Arc<Host>, name: Option<&str>) -> Result<i32> {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("VOUCH_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    let doctor = doctor_fn(dir, host.clone());
    let state = app_state(dir, host, doctor)?;
    let signer = match name {
        None => None,
        Some(name) => {
            let ids = state
                .work
                .identities
                .clone()
                .ok_or_else(|| anyhow!("this home has no identity store"))?;
            let now = vouch_runtime::clock::Clock::now_ms(&vouch_runtime::clock::SystemClock);
            Some(Arc::new(
                vouch_identity::open_or_create(
                    &vouch_identity::KeyDir::in_home(dir),
                    &*ids,
                    name,
                    now,
                )
                .map_err(|e| bad(format!("worker identity `{name}`: {e}")))?,
            ))
        }
    };
    let server = vouch_server::mcp::VouchMcp {
        state,
        signer,
        via: "stdio",
        caller: None,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("start the async runtime")?;
    rt.block_on(vouch_server::mcp::serve_stdio(server))
        .map_err(|e| anyhow!(e))?;
    Ok(0)
}
