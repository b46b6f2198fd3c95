//! The doctor (§4): every destination kind with the level the host would answer for it now,
//! and the step that connects what is missing. Interfaces render this report.

use crate::config::Config;
use crate::provider::Provider;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use vouch_core::{Capability, DestinationKind};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DestinationRow {
    pub kind: DestinationKind,
    pub level: Capability,
    pub connect_step: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DoctorReport {
    pub destinations: Vec<DestinationRow>,
    /// Per-destination overrides from `vouch.toml` (pattern → level).
    pub overrides: BTreeMap<String, Capability>,
    /// Trusted automation patterns (R8).
    pub automation: Vec<String>,
}

/// The report for a configuration and the providers built from it: a kind the configuration
/// calls executable but for which no provider exists is `unavailable`.
pub fn doctor(
    cfg: &Config,
    providers: &BTreeMap<DestinationKind, Arc<dyn Provider>>,
) -> DoctorReport {
    let destinations = DestinationKind::ALL
        .into_iter()
        .map(|kind| {
            let (mut level, connect_step) = cfg.kind_level(kind);
            if level >= Capability::Executable && !providers.contains_key(&kind) {
                level = Capability::Unavailable;
            }
            DestinationRow {
                kind,
                level,
                connect_step,
            }
        })
        .collect();
    DoctorReport {
        destinations,
        overrides: cfg.capabilities.clone(),
        automation: cfg
            .automation
            .as_ref()
            .map(|a| a.routines.clone())
            .unwrap_or_default(),
    }
}
