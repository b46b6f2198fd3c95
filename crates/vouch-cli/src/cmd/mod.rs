//! One module per group of commands; `main.rs` parses arguments and dispatches here.

pub mod corpus;
pub mod decide;
pub mod runs;
pub mod schedule;
pub mod status;
