//! Journal event kinds. The names are stable: they are stored and matched by crash points.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    RunCreated,
    Turn,
    ToolCalled,
    ManifestDeclared,
    ManifestRejected,
    ManifestImplied,
    Preflight,
    ProposalRejected,
    ClarifyAsked,
    ClarifyAnswered,
    ApprovalRequested,
    ApprovalGranted,
    ApprovalDenied,
    ApprovalSuperseded,
    Drafted,
    LedgerIntent,
    AttemptStarted,
    AttemptFinished,
    Evidence,
    Suspended,
    Resumed,
    /// The agent loop stopped without the work: a model error, a budget, the repair limit.
    LoopEnded,
    /// A patch attempt's worktree, recorded before the model's first turn (§14).
    Workspace,
    Terminal,
}

impl EventKind {
    pub const ALL: [EventKind; 24] = [
        EventKind::RunCreated,
        EventKind::Turn,
        EventKind::ToolCalled,
        EventKind::ManifestDeclared,
        EventKind::ManifestRejected,
        EventKind::ManifestImplied,
        EventKind::Preflight,
        EventKind::ProposalRejected,
        EventKind::ClarifyAsked,
        EventKind::ClarifyAnswered,
        EventKind::ApprovalRequested,
        EventKind::ApprovalGranted,
        EventKind::ApprovalDenied,
        EventKind::ApprovalSuperseded,
        EventKind::Drafted,
        EventKind::LedgerIntent,
        EventKind::AttemptStarted,
        EventKind::AttemptFinished,
        EventKind::Evidence,
        EventKind::Suspended,
        EventKind::Resumed,
        EventKind::LoopEnded,
        EventKind::Workspace,
        EventKind::Terminal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::RunCreated => "run_created",
            EventKind::Turn => "turn",
            EventKind::ToolCalled => "tool_called",
            EventKind::ManifestDeclared => "manifest_declared",
            EventKind::ManifestRejected => "manifest_rejected",
            EventKind::ManifestImplied => "manifest_implied",
            EventKind::Preflight => "preflight",
            EventKind::ProposalRejected => "proposal_rejected",
            EventKind::ClarifyAsked => "clarify_asked",
            EventKind::ClarifyAnswered => "clarify_answered",
            EventKind::ApprovalRequested => "approval_requested",
            EventKind::ApprovalGranted => "approval_granted",
            EventKind::ApprovalDenied => "approval_denied",
            EventKind::ApprovalSuperseded => "approval_superseded",
            EventKind::Drafted => "drafted",
            EventKind::LedgerIntent => "ledger_intent",
            EventKind::AttemptStarted => "attempt_started",
            EventKind::AttemptFinished => "attempt_finished",
            EventKind::Evidence => "evidence",
            EventKind::Suspended => "suspended",
            EventKind::Resumed => "resumed",
            EventKind::LoopEnded => "loop_ended",
            EventKind::Workspace => "workspace",
            EventKind::Terminal => "terminal",
        }
    }

    pub fn parse(s: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

impl std::fmt::Display for EventKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
