//! The vouch host runtime: the agent loop, providers, the ledger in front of irreversible
//! acts, approvals, the one reconciler, receipts. Everything it decides comes from
//! `vouch-core`; everything it remembers goes through a `vouch_store::Store`.

pub mod approvals;
pub mod bounded;
pub mod capability;
pub mod clock;
pub mod config;
pub mod cost;
pub mod crash;
pub mod doctor;
pub mod durable;
pub mod fsroot;
pub mod host;
pub mod inbox;
pub mod latency;
pub mod model;
pub mod notify;
pub mod offer;
pub mod outbound;
pub mod provider;
pub mod receipt;
pub mod remote;
pub mod repository;
pub mod runs;
pub mod scheduler;
pub mod schemas;
pub mod scripted;
pub mod tools;
pub mod verify;
pub mod view;
pub mod worker;

pub use host::{Host, HostError, Limits, RunEnd, RunSpec};
