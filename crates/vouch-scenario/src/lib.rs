//! The scenario file format of `scenarios.md` and the report both the oracle and the
//! runner produce for a scenario.
//!
//! Invariant: this crate is pure except for [`load_paths`], which reads files. Every type
//! rejects unknown fields, so a typo in a corpus file is an error, never a silent default.

pub mod load;
pub mod patch;
pub mod pattern;
pub mod report;
pub mod scenario;
pub mod task;

pub use load::{load_paths, parse_scenario, LoadError};
pub use pattern::{dest_key, pattern_matches};
pub use report::{
    compare, compare_reports, Citation, DeliveryReport, Disagreement, Gap, ReportState,
    ScenarioReport,
};
pub use scenario::{
    Behavior, CatchUp, CrashEvent, Decision, Expect, ExpectDelivery, Fault, Overlap, Scenario,
    Trigger, Turn, Undeclared, World,
};
pub use task::{
    AfterCondition, AttemptReport, BoardStep, CancelAt, Does, ExpectTask, JudgePlan, OfferAgain,
    PrerequisiteEnd, ProfilePlan, Reads, TaskPlan, TaskReport, TurnedAway, WorkerStep,
};
