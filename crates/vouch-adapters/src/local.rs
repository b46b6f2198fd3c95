//! A local host's parts: what a host on this machine acts through when nothing configures it
//! otherwise. The simulator, the scenario runner and the tests start from [`parts`] and
//! replace the fields their world differs in (its providers, its capability registry, a
//! notifier that counts), so what each one changes stays visible where it builds its host.

use crate::config::{Config, ConfigCapabilities};
use crate::folder::{FolderProvider, SurfaceProvider};
use crate::models::DefaultModels;
use crate::notify::Quiet;
use crate::tools::StandardTools;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use vouch_core::DestinationKind;
use vouch_runtime::host::{HostParts, WorkTools};
use vouch_runtime::provider::Provider;
use vouch_runtime::tools::ScriptWorkTools;

/// The parts of a host whose files live under `dir`: folder files in `files/`, surface
/// records in `surfaces/`, artifacts in `artifacts/`; what a home with an empty `vouch.toml`
/// allows; each run's model from its spec; no notifications (the outbox rows stay in the
/// store).
pub fn parts(dir: &Path) -> HostParts {
    HostParts {
        caps: Arc::new(ConfigCapabilities {
            config: Config::default(),
        }),
        providers: providers(dir.join("surfaces"), dir.join("files")),
        notifier: Arc::new(Quiet),
        models: Arc::new(DefaultModels),
        work: work(dir.join("files"), dir.join("artifacts")),
    }
}

/// The surface provider over `surfaces` and the folder provider over `folder_root`: the two
/// every host has; a configured home adds its outbound ones beside them.
pub fn providers(
    surfaces: PathBuf,
    folder_root: PathBuf,
) -> BTreeMap<DestinationKind, Arc<dyn Provider>> {
    let mut providers: BTreeMap<DestinationKind, Arc<dyn Provider>> = BTreeMap::new();
    providers.insert(
        DestinationKind::Surface,
        Arc::new(SurfaceProvider::new(surfaces)),
    );
    providers.insert(
        DestinationKind::Folder,
        Arc::new(FolderProvider::new(folder_root)),
    );
    providers
}

/// The work tools a local host offers: reading beneath `folder_root` and writing artifacts
/// into `artifacts_dir`, with a scripted run's other tools answered by its script.
pub fn work(
    folder_root: impl Into<PathBuf>,
    artifacts_dir: impl Into<PathBuf>,
) -> Arc<dyn WorkTools> {
    Arc::new(ScriptWorkTools {
        inner: StandardTools {
            folder: FolderProvider::new(folder_root),
            artifacts_dir: artifacts_dir.into(),
        },
    })
}
