//! Run lifecycle vocabulary (§2).

use crate::posture::Context;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TriggerKind {
    Interactive,
    Scheduled,
    Event,
    Task,
}

impl TriggerKind {
    pub fn context(self) -> Context {
        match self {
            TriggerKind::Interactive => Context::Interactive,
            _ => Context::Autonomous,
        }
    }
    pub fn as_str(self) -> &'static str {
        match self {
            TriggerKind::Interactive => "interactive",
            TriggerKind::Scheduled => "scheduled",
            TriggerKind::Event => "event",
            TriggerKind::Task => "task",
        }
    }
}

/// §2.2. `interrupted` is not a state: it is a non-ended run whose owner is gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunState {
    Created,
    Declaring,
    Running,
    Suspended,
    Ended,
}

impl RunState {
    pub fn as_str(self) -> &'static str {
        match self {
            RunState::Created => "created",
            RunState::Declaring => "declaring",
            RunState::Running => "running",
            RunState::Suspended => "suspended",
            RunState::Ended => "ended",
        }
    }
    pub fn parse(s: &str) -> Option<RunState> {
        [
            RunState::Created,
            RunState::Declaring,
            RunState::Running,
            RunState::Suspended,
            RunState::Ended,
        ]
        .into_iter()
        .find(|r| r.as_str() == s)
    }
}

/// §2.3.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EndedBy {
    Loop,
    Boot,
    Schedule,
    Cancel,
}

impl EndedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            EndedBy::Loop => "loop",
            EndedBy::Boot => "boot",
            EndedBy::Schedule => "schedule",
            EndedBy::Cancel => "cancel",
        }
    }
}
