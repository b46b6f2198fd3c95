//! The vouch host runtime.

pub mod model;
