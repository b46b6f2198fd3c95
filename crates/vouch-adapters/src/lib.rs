//! The host's adapters: what `vouch-runtime` reaches through its traits, implemented against
//! the world outside it. Nothing here decides about a run; each module answers one trait:
//! - [`openai`] and [`models`] — `Model` and `ModelFactory` (the OpenAI-compatible client over
//!   ureq, and the scripted model by the run's spec);
//! - [`folder`], [`outbound`], [`repository`] — `Provider` (folder and surface files; webhook,
//!   SMTP e-mail, calendar and payment; a local git repository);
//! - [`tools`] — `WorkTools` (read a file from the allowed folder, write an artifact);
//! - [`notify`] — `Notifier` (the desktop over D-Bus, or a push webhook; `Quiet` sends none);
//! - [`config`] — `vouch.toml` (toml) and the `CapabilityRegistry` answered from it, with
//!   [`doctor`] building the doctor's report from them;
//! - [`remote`] — `BoardClient` over another host's HTTP API;
//! - [`local`] — a local host's parts put together (providers under one directory, work
//!   tools, models, a quiet notifier), for the simulator, the runner and tests to start from.

pub mod config;
pub mod doctor;
pub mod folder;
pub mod local;
pub mod models;
pub mod notify;
pub mod openai;
pub mod outbound;
pub mod remote;
pub mod repository;
pub mod tools;
