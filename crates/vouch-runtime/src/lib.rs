//! The vouch host runtime: the agent loop, the ledger in front of irreversible acts,
//! approvals, the one reconciler, receipts. Everything it decides comes from `vouch-core`;
//! everything it remembers goes through a `vouch_store::Store`; everything it does outside
//! goes through a trait (`Provider`, `ModelFactory`, `Notifier`, `WorkTools`,
//! `CapabilityRegistry`, `BoardClient`) whose real implementations live in `vouch-adapters`,
//! so this crate links no HTTP, SMTP or D-Bus client and parses no `vouch.toml`.

pub mod approvals;
pub mod bounded;
pub mod capability;
pub mod clock;
pub mod cost;
pub mod crash;
pub mod doctor;
pub mod durable;
pub mod fsroot;
pub mod host;
pub mod inbox;
pub mod latency;
pub mod model;
pub mod offer;
pub mod provider;
pub mod receipt;
pub mod runs;
pub mod scheduler;
pub mod schemas;
pub mod scripted;
pub mod secret;
pub mod tools;
pub mod turns;
pub mod verify;
pub mod view;
pub mod worker;

pub use host::{Host, HostError, Limits, RunEnd, RunSpec};
