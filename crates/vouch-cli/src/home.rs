//! The vouch home: `$VOUCH_HOME` (default `./.vouch`) holding the embedded store, the
//! surfaces, drafts, artifacts and the notification log.

use anyhow::{Context as _, Result};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use vouch_adapters::config::{Config, ConfigCapabilities};
use vouch_adapters::models::ConfiguredModels;
use vouch_adapters::notify::DesktopNotifier;
use vouch_adapters::outbound::{CalendarProvider, EmailProvider, PaymentProvider, WebhookProvider};
use vouch_core::DestinationKind;
use vouch_runtime::clock::SystemClock;
use vouch_runtime::crash::{CrashMode, CrashPlan};
use vouch_runtime::host::{HostParts, Notifier, NotifyError, Progress};
use vouch_runtime::provider::Provider;
use vouch_runtime::Host;
use vouch_store::{IdentityStore, OutboxRow, Store};
use vouch_store_sqlite::SqliteStore;

pub const DB_FILE: &str = "vouch.db";

pub fn home_dir(flag: Option<&Path>) -> PathBuf {
    if let Some(p) = flag {
        return p.to_path_buf();
    }
    match std::env::var_os("VOUCH_HOME") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => PathBuf::from(".vouch"),
    }
}

pub fn init(dir: &Path) -> Result<bool> {
    let db = dir.join(DB_FILE);
    let existed = db.exists();
    std::fs::create_dir_all(dir)
        .with_context(|| format!("create the home folder {}", dir.display()))?;
    for sub in ["files", "surfaces", "drafts", "artifacts"] {
        std::fs::create_dir_all(dir.join(sub))
            .with_context(|| format!("create {}", dir.join(sub).display()))?;
    }
    if let Some((url, schema)) = database_url() {
        let existed = dir.join("files").exists() && dir.join(".postgres").exists();
        vouch_store_postgres::PostgresStore::open(&url, &schema)
            .map_err(|e| anyhow::anyhow!("{e}"))?;
        std::fs::write(dir.join(".postgres"), format!("schema {schema}\n"))?;
        return Ok(!existed);
    }
    SqliteStore::open(&db).map_err(|e| anyhow::anyhow!("{e}"))?;
    Ok(!existed)
}

/// `VOUCH_DATABASE_URL=postgres://…` selects the PostgreSQL store (schema from
/// `VOUCH_DATABASE_SCHEMA`, default `vouch`); otherwise the embedded SQLite file in the home.
pub fn database_url() -> Option<(String, String)> {
    let url = std::env::var("VOUCH_DATABASE_URL")
        .ok()
        .filter(|u| !u.trim().is_empty())?;
    let schema = std::env::var("VOUCH_DATABASE_SCHEMA")
        .ok()
        .filter(|s| !s.trim().is_empty())
        .unwrap_or_else(|| "vouch".into());
    Some((url, schema))
}

/// `VOUCH_READ_ONLY=1`: open the store for reading only, whichever backend.
fn read_only_requested() -> bool {
    std::env::var("VOUCH_READ_ONLY").is_ok_and(|v| v == "1")
}

pub fn open_store(dir: &Path) -> Result<Arc<dyn Store>> {
    Ok(open_stores(dir)?.0)
}

/// The home's store seen through both of its interfaces: runs and identities (§13.6).
pub fn open_stores(dir: &Path) -> Result<(Arc<dyn Store>, Arc<dyn IdentityStore>)> {
    if let Some((url, schema)) = database_url() {
        if !dir.exists() {
            return Err(crate::bad(format!(
                "no vouch home at {} — run `vouch init` first (or set VOUCH_HOME to your home)",
                dir.display()
            )));
        }
        let store = if read_only_requested() {
            vouch_store_postgres::PostgresStore::open_read_only(
                &url,
                &schema,
                "opened with VOUCH_READ_ONLY=1",
            )
        } else {
            vouch_store_postgres::PostgresStore::open(&url, &schema)
        }
        .map_err(|e| match e {
            vouch_store::StoreError::ReadOnly(_) => crate::bad(e.to_string()),
            other => anyhow::anyhow!("{other}"),
        })?;
        let store = Arc::new(store);
        return Ok((store.clone(), store));
    }
    let db = dir.join(DB_FILE);
    if !db.exists() {
        return Err(crate::bad(format!(
            "no vouch home at {} — run `vouch init` first (or set VOUCH_HOME to your home)",
            dir.display()
        )));
    }
    // `VOUCH_READ_ONLY=1` opens the home for reading only (a backup, a copy from another
    // machine): nothing is written, not even start-up reconciliation.
    let store = if read_only_requested() {
        SqliteStore::open_read_only(&db, "opened with VOUCH_READ_ONLY=1")
    } else {
        SqliteStore::open(&db)
    }
    .map_err(|e| match e {
        vouch_store::StoreError::ReadOnly(_) => crate::bad(e.to_string()),
        other => anyhow::anyhow!("{other}"),
    })?;
    let store = Arc::new(store);
    Ok((store.clone(), store))
}

/// The inbox's notify route for now: one JSON line per notification in the home.
pub struct FileNotifier {
    pub path: PathBuf,
}

impl Notifier for FileNotifier {
    fn notify(&self, row: &OutboxRow) -> std::result::Result<(), NotifyError> {
        let line = serde_json::json!({"run": row.run_id, "route": row.route, "dedup": row.dedup_key, "body": row.body});
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .and_then(|mut f| writeln!(f, "{line}"))
            .map_err(|e| log_error(&self.path, e))
    }
}

/// A home whose inbox log cannot be opened for writing stays so until the person changes it; a
/// full disk or an interrupted write may pass.
fn log_error(path: &Path, e: std::io::Error) -> NotifyError {
    use std::io::ErrorKind::{IsADirectory, NotFound, PermissionDenied, ReadOnlyFilesystem};
    let what = format!("inbox log {}: {e}", path.display());
    match e.kind() {
        PermissionDenied | ReadOnlyFilesystem | NotFound | IsADirectory => {
            NotifyError::Misconfigured(format!(
                "{what}; make the home writable (or remove what is in the log's place)"
            ))
        }
        _ => NotifyError::Retry(what),
    }
}

/// Every notification is logged in the home (the inbox's record), then sent to the desktop.
pub struct InboxAndDesktop {
    pub log: FileNotifier,
    pub desktop: DesktopNotifier,
}

impl Notifier for InboxAndDesktop {
    fn notify(&self, row: &OutboxRow) -> std::result::Result<(), NotifyError> {
        self.desktop.notify(row)?;
        self.log.notify(row)
    }
}

pub fn folder_root(dir: &Path) -> PathBuf {
    match std::env::var_os("VOUCH_FOLDER_ROOT") {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => Config::load(dir)
            .ok()
            .and_then(|c| c.folder.map(|f| f.root))
            .unwrap_or_else(|| dir.join("files")),
    }
}

/// The artifact store of this home (§13.5): the bucket `[storage] artifacts` names, shared by
/// every host of one store, or the home's own `objects/` folder when none is configured.
pub fn open_artifacts(dir: &Path) -> Result<Arc<dyn vouch_artifacts::ArtifactStore>> {
    let cfg = config(dir)?;
    let Some(st) = cfg.storage.filter(|s| s.artifacts.is_some()) else {
        return Ok(Arc::new(vouch_artifacts::LocalStore::in_home(dir)));
    };
    let secret = |what: &str, r: &Option<vouch_runtime::secret::SecretRef>| {
        r.as_ref()
            .map(|r| {
                r.resolve()
                    .map_err(|step| crate::bad(format!("[storage] {what}: {step}")))
            })
            .transpose()
    };
    let s3 = vouch_artifacts::S3Config {
        url: st.artifacts.clone().unwrap_or_default(),
        endpoint: st.endpoint.clone(),
        region: st.region.clone(),
        access_key_id: secret("access_key_id", &st.access_key_id)?,
        secret_access_key: secret("secret_access_key", &st.secret_access_key)?,
        allow_http: st.allow_http,
        bytes_max: vouch_artifacts::ARTIFACT_BYTES_MAX_DEFAULT,
    };
    let store = vouch_artifacts::S3Store::open(&s3)
        .map_err(|e| crate::bad(format!("[storage] in vouch.toml: {e}")))?;
    Ok(Arc::new(store))
}

pub fn config(dir: &Path) -> Result<Config> {
    Config::load(dir)
        .map_err(|e| crate::bad(format!("{e}; fix vouch.toml (see README) and try again")))
}

pub fn providers(dir: &Path, cfg: &Config) -> BTreeMap<DestinationKind, Arc<dyn Provider>> {
    let mut providers = vouch_adapters::local::providers(dir.join("surfaces"), folder_root(dir));
    providers.insert(
        DestinationKind::Repository,
        Arc::new(vouch_adapters::repository::RepositoryProvider),
    );
    let wh = cfg.webhook.clone().unwrap_or_default();
    providers.insert(
        DestinationKind::Webhook,
        Arc::new(WebhookProvider {
            timeout_ms: if wh.timeout_ms == 0 {
                10_000
            } else {
                wh.timeout_ms
            },
            idempotent: wh.idempotent,
            status_url: wh.status_url,
        }),
    );
    if let Some(e) = &cfg.email {
        providers.insert(
            DestinationKind::Email,
            Arc::new(EmailProvider { config: e.clone() }),
        );
    }
    if let Some(c) = &cfg.calendar {
        providers.insert(
            DestinationKind::Calendar,
            Arc::new(CalendarProvider { config: c.clone() }),
        );
    }
    if let Some(p) = &cfg.payment {
        providers.insert(
            DestinationKind::Payment,
            Arc::new(PaymentProvider { config: p.clone() }),
        );
    }
    providers
}

pub fn host(dir: &Path, progress: Option<Progress>) -> Result<Host> {
    host_on(dir, open_store(dir)?, progress)
}

/// The home's host on a store the caller opened (benchmarks keep the concrete store to read
/// its write counters).
pub fn host_on(dir: &Path, store: Arc<dyn Store>, progress: Option<Progress>) -> Result<Host> {
    let cfg = config(dir)?;
    let push_url = cfg.notify.as_ref().and_then(|n| n.push_url.clone());
    let root = folder_root(dir);
    let providers = providers(dir, &cfg);
    let crash = std::env::var("VOUCH_CRASH_AFTER")
        .ok()
        .and_then(|s| CrashPlan::parse(&s, CrashMode::Abort));
    let notifier = InboxAndDesktop {
        log: FileNotifier {
            path: dir.join("notifications.jsonl"),
        },
        desktop: DesktopNotifier {
            push_url,
            timeout_ms: 5_000,
        },
    };
    // The host writes through the durability points (runtime::durable).
    let store_dyn: Arc<dyn Store> = Arc::new(vouch_runtime::durable::Durable::new(store));
    // `[model]`: the profile a run records when it starts (issue 22 #3).
    let profile = cfg.model.clone();
    let parts = HostParts {
        caps: Arc::new(ConfigCapabilities { config: cfg }),
        providers,
        notifier: Arc::new(notifier),
        models: Arc::new(ConfiguredModels { profile }),
        work: vouch_adapters::local::work(root, dir.join("artifacts")),
    };
    let owner = vouch_runtime::host::process_owner();
    Ok(Host::new(
        store_dyn,
        Arc::new(SystemClock),
        owner,
        dir.join("drafts"),
        parts,
    )
    .with_crash(crash)
    .with_progress(progress)
    .with_presence(Arc::new(FilePresence::new(dir))))
}

/// Presence from the home's `presence/` folder: `watch-<run>` holds the expiry of a watching
/// surface's lease (renewed by `vouch watch`); `active` holds the last time the person used
/// vouch. Explicit `--presence` on the run wins over recent activity, never over watching.
pub struct FilePresence {
    dir: PathBuf,
    pub nearby_window_ms: i64,
}

pub const NEARBY_WINDOW_MS: i64 = 10 * 60_000;

impl FilePresence {
    pub fn new(home: &Path) -> Self {
        FilePresence {
            dir: home.join("presence"),
            nearby_window_ms: NEARBY_WINDOW_MS,
        }
    }
    fn read_ms(&self, name: &str) -> Option<i64> {
        // A millisecond count: a few bytes, never read past a small limit.
        vouch_runtime::bounded::read_text(&self.dir.join(name), "presence", 64)
            .ok()?
            .trim()
            .parse()
            .ok()
    }
    fn write_ms(&self, name: &str, ms: i64) {
        let _ = std::fs::create_dir_all(&self.dir);
        let tmp = self.dir.join(format!("{name}.tmp"));
        if std::fs::write(&tmp, ms.to_string()).is_ok() {
            let _ = std::fs::rename(&tmp, self.dir.join(name));
        }
    }
    pub fn touch_active(&self, now_ms: i64) {
        self.write_ms("active", now_ms);
    }
    pub fn hold_watch(&self, run: &str, until_ms: i64) {
        self.write_ms(&watch_file(run), until_ms);
    }
    pub fn release_watch(&self, run: &str) {
        let _ = std::fs::remove_file(self.dir.join(watch_file(run)));
    }
}

/// A run's watch file, named by the host whatever the run id holds (§3.2.1).
fn watch_file(run: &str) -> String {
    format!("watch-{}", vouch_runtime::fsroot::host_name(run))
}

impl vouch_runtime::host::PresenceSource for FilePresence {
    fn presence(&self, run: &vouch_store::RunRecord, now_ms: i64) -> Option<vouch_core::Presence> {
        if self
            .read_ms(&watch_file(&run.id))
            .map(|until| until > now_ms)
            .unwrap_or(false)
        {
            return Some(vouch_core::Presence::Watching);
        }
        if vouch_store::spec::SpecHead::read(&run.spec).presence_explicit {
            return None;
        }
        if run.trigger != vouch_core::TriggerKind::Interactive
            && self
                .read_ms("active")
                .map(|t| now_ms - t < self.nearby_window_ms)
                .unwrap_or(false)
        {
            return Some(vouch_core::Presence::Nearby);
        }
        None
    }
}

/// The console's run pages write the same leases `vouch watch` does.
impl vouch_server::console::WatchPresence for FilePresence {
    fn hold(&self, run: &str, until_ms: i64) {
        self.hold_watch(run, until_ms);
    }
    fn release(&self, run: &str) {
        self.release_watch(run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use vouch_core::{Presence, TriggerKind};
    use vouch_runtime::host::PresenceSource;

    fn run(trigger: TriggerKind, spec: serde_json::Value) -> vouch_store::RunRecord {
        vouch_store::RunRecord {
            id: "r1".into(),
            trigger,
            title: "t".into(),
            chain_root: "r1".into(),
            parent: None,
            scope: "r1".into(),
            spec,
            state: vouch_core::RunState::Running,
            outcome: None,
            ended_by: None,
            created_ms: 0,
            ended_ms: None,
            owner: None,
            lease_until_ms: None,
        }
    }

    #[test]
    fn watching_beats_everything_and_activity_makes_scheduled_runs_nearby() {
        let dir = tempfile::tempdir().unwrap();
        let p = FilePresence::new(dir.path());
        let sched = run(TriggerKind::Scheduled, serde_json::json!({}));
        assert_eq!(
            p.presence(&sched, 1_000),
            None,
            "no signal: the run's own default (away)"
        );
        p.touch_active(1_000);
        assert_eq!(p.presence(&sched, 2_000), Some(Presence::Nearby));
        assert_eq!(
            p.presence(&sched, 1_000 + NEARBY_WINDOW_MS + 1),
            None,
            "activity expires"
        );
        let explicit = run(
            TriggerKind::Scheduled,
            serde_json::json!({"presence": "away", "presence_explicit": true}),
        );
        assert_eq!(
            p.presence(&explicit, 2_000),
            None,
            "an explicit presence wins over activity"
        );
        p.hold_watch("r1", 10_000);
        assert_eq!(p.presence(&explicit, 9_999), Some(Presence::Watching));
        assert_eq!(
            p.presence(&explicit, 10_001),
            None,
            "a lapsed watch lease is not watching"
        );
        p.release_watch("r1");
        assert_eq!(p.presence(&sched, 5_000), Some(Presence::Nearby));
        let interactive = run(TriggerKind::Interactive, serde_json::json!({}));
        assert_eq!(p.presence(&interactive, 2_000), None);
    }

    #[test]
    fn an_inbox_log_that_cannot_be_written_is_a_configuration_to_fix_and_a_full_disk_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let row = OutboxRow {
            id: 1,
            dedup_key: "r1:terminal".into(),
            run_id: "r1".into(),
            route: "notify".into(),
            body: serde_json::json!({}),
            created_ms: 1,
            sent_ms: None,
            failure: None,
        };
        let log = FileNotifier {
            path: dir.path().join("inbox.jsonl"),
        };
        assert_eq!(log.notify(&row), Ok(()));
        // A folder where the log should be: every row would fail alike until it is moved.
        let blocked = FileNotifier {
            path: dir.path().to_path_buf(),
        };
        assert!(matches!(
            blocked.notify(&row),
            Err(NotifyError::Misconfigured(_))
        ));
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        assert!(matches!(log_error(&log.path, full), NotifyError::Retry(_)));
    }
}
