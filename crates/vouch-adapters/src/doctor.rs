//! The doctor's report (`vouch_runtime::doctor`) for a home: each destination kind at the
//! level its configuration gives, unavailable when no provider was built for it, with the
//! `vouch.toml` section that connects it.

use crate::config::Config;
use std::collections::BTreeMap;
use std::sync::Arc;
use vouch_core::{Capability, DestinationKind};
use vouch_runtime::doctor::{stuck_routes, DestinationRow, DoctorReport};
use vouch_runtime::provider::Provider;
use vouch_store::OutboxRow;

/// The `vouch.toml` section that connects each destination kind that needs one (the README's
/// example configuration, section by section).
pub fn toml_example(kind: DestinationKind) -> Option<&'static str> {
    match kind {
        DestinationKind::Email => Some(
            "[email]\nhost = \"smtp.example.com\"\nport = 587\ntls = \"starttls\"   # \"tls\" for port 465, \"none\" for a plain local relay\nfrom = \"me@example.com\"\nusername = { env = \"SMTP_USER\" }\npassword = { env = \"SMTP_PASSWORD\" }",
        ),
        DestinationKind::Calendar => Some("[calendar]\ndir = \"calendar\"   # events as .ics files, in the home"),
        DestinationKind::Payment => Some(
            "[payment]\nurl = \"https://pay.example.com/transfers\"\ntoken = { env = \"PAY_TOKEN\" }",
        ),
        DestinationKind::Webhook => Some(
            "[webhook]\nidempotent = [\"webhook:https://hooks.example.com/*\"]   # receivers that dedupe by key",
        ),
        DestinationKind::Folder => Some("[folder]\nroot = \"files\"   # save/write/delete stay inside it"),
        _ => None,
    }
}

/// The report for a configuration, the providers built from it and the outbox's undelivered
/// rows (`Store::outbox_pending`): a kind the configuration calls executable but for which no
/// provider exists is `unavailable`.
pub fn doctor(
    cfg: &Config,
    providers: &BTreeMap<DestinationKind, Arc<dyn Provider>>,
    pending: &[OutboxRow],
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
                example: toml_example(kind),
                connect_step,
            }
        })
        .collect();
    DoctorReport {
        config_path: None,
        destinations,
        overrides: cfg.capabilities.clone(),
        automation: cfg
            .automation
            .as_ref()
            .map(|a| a.routines.clone())
            .unwrap_or_default(),
        stuck_routes: stuck_routes(pending),
    }
}
