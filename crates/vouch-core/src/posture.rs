//! The posture function (§5.2): first matching rule wins; pure, no I/O.

use crate::capability::{is_irreversible, ActFacts, Capability};
use crate::manifest::{Confidence, DestinationKind, Verb};
use serde::{Deserialize, Serialize};
use std::fmt;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Posture {
    Answer,
    Clarify,
    Draft,
    Confirm,
    Execute,
    Decline,
}

impl Posture {
    pub const ALL: [Posture; 6] = [
        Posture::Answer,
        Posture::Clarify,
        Posture::Draft,
        Posture::Confirm,
        Posture::Execute,
        Posture::Decline,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Posture::Answer => "answer",
            Posture::Clarify => "clarify",
            Posture::Draft => "draft",
            Posture::Confirm => "confirm",
            Posture::Execute => "execute",
            Posture::Decline => "decline",
        }
    }
}

impl fmt::Display for Posture {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Interactive runs have a person at a surface; every other trigger is autonomous (§2.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Context {
    Interactive,
    Autonomous,
}

/// The rule that decided a posture, for journals and oracle citations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Rule {
    R1,
    R2,
    R3,
    R4,
    R5,
    R6,
    R7,
    R8,
    R9,
}

impl Rule {
    pub fn as_str(self) -> &'static str {
        match self {
            Rule::R1 => "R1",
            Rule::R2 => "R2",
            Rule::R3 => "R3",
            Rule::R4 => "R4",
            Rule::R5 => "R5",
            Rule::R6 => "R6",
            Rule::R7 => "R7",
            Rule::R8 => "R8",
            Rule::R9 => "R9",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PostureInput {
    pub act: ActFacts,
    pub capability: Capability,
    pub confidence: Confidence,
    pub context: Context,
    pub clarify_used: bool,
    /// Forbidden by a manifest `forbid` or by the runtime policy for this context.
    pub forbidden: bool,
}

/// §5.2, R1–R9 in order.
pub fn posture(i: PostureInput) -> (Posture, Rule) {
    let verb = i.act.verb;
    if i.forbidden {
        return (Posture::Decline, Rule::R1);
    }
    if i.capability == Capability::Unavailable {
        return (Posture::Decline, Rule::R2);
    }
    if matches!(verb, Verb::Write | Verb::Show)
        && i.act.kind == DestinationKind::Surface
        && i.context == Context::Interactive
    {
        return (Posture::Answer, Rule::R3);
    }
    if i.confidence == Confidence::Low {
        let p = if i.clarify_used {
            Posture::Draft
        } else {
            Posture::Clarify
        };
        return (p, Rule::R4);
    }
    if matches!(
        i.capability,
        Capability::NeedsSetup | Capability::Readable | Capability::Draftable
    ) {
        return (Posture::Draft, Rule::R5);
    }
    if verb == Verb::Draft {
        return (Posture::Execute, Rule::R6);
    }
    let irreversible = is_irreversible(i.act);
    if !irreversible {
        // capability is >= executable here: lower levels were handled by R2 and R5.
        return (Posture::Execute, Rule::R7);
    }
    if i.capability == Capability::Automatable && i.context == Context::Autonomous {
        return (Posture::Execute, Rule::R8);
    }
    (Posture::Confirm, Rule::R9)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn base(verb: Verb, kind: DestinationKind) -> PostureInput {
        PostureInput {
            act: ActFacts {
                verb,
                kind,
                has_other_attendees: false,
                overwrites_existing: false,
            },
            capability: Capability::Executable,
            confidence: Confidence::High,
            context: Context::Interactive,
            clarify_used: false,
            forbidden: false,
        }
    }

    #[test]
    fn every_rule_fires() {
        use DestinationKind::*;
        use Verb::*;
        let p = |i: PostureInput| posture(i);
        assert_eq!(
            p(PostureInput {
                forbidden: true,
                ..base(Save, Folder)
            }),
            (Posture::Decline, Rule::R1)
        );
        assert_eq!(
            p(PostureInput {
                capability: Capability::Unavailable,
                ..base(Save, Folder)
            }),
            (Posture::Decline, Rule::R2)
        );
        assert_eq!(p(base(Write, Surface)), (Posture::Answer, Rule::R3));
        assert_eq!(p(base(Show, Surface)), (Posture::Answer, Rule::R3));
        assert_eq!(
            p(PostureInput {
                confidence: Confidence::Low,
                ..base(Save, Folder)
            }),
            (Posture::Clarify, Rule::R4)
        );
        assert_eq!(
            p(PostureInput {
                confidence: Confidence::Low,
                clarify_used: true,
                ..base(Save, Folder)
            }),
            (Posture::Draft, Rule::R4)
        );
        for c in [
            Capability::NeedsSetup,
            Capability::Readable,
            Capability::Draftable,
        ] {
            assert_eq!(
                p(PostureInput {
                    capability: c,
                    ..base(Send, Email)
                }),
                (Posture::Draft, Rule::R5)
            );
        }
        assert_eq!(p(base(Draft, Email)), (Posture::Execute, Rule::R6));
        assert_eq!(p(base(Save, Folder)), (Posture::Execute, Rule::R7));
        assert_eq!(
            p(PostureInput {
                capability: Capability::Automatable,
                context: Context::Autonomous,
                ..base(Send, Webhook)
            }),
            (Posture::Execute, Rule::R8)
        );
        assert_eq!(p(base(Send, Email)), (Posture::Confirm, Rule::R9));
        assert_eq!(
            p(PostureInput {
                capability: Capability::Automatable,
                ..base(Send, Email)
            }),
            (Posture::Confirm, Rule::R9),
            "automatable needs an autonomous context"
        );
    }

    #[test]
    fn first_match_wins() {
        // Forbidden beats everything, even the surface answer.
        let i = PostureInput {
            forbidden: true,
            capability: Capability::Unavailable,
            ..base(Verb::Write, DestinationKind::Surface)
        };
        assert_eq!(posture(i).1, Rule::R1);
    }

    fn arb_input() -> impl Strategy<Value = PostureInput> {
        (
            0..Verb::ALL.len(),
            0..DestinationKind::ALL.len(),
            any::<bool>(),
            any::<bool>(),
            0..Capability::ALL.len(),
            0..3usize,
            any::<bool>(),
            any::<bool>(),
            any::<bool>(),
        )
            .prop_map(|(v, k, att, ow, c, conf, ctx, cu, forb)| PostureInput {
                act: ActFacts {
                    verb: Verb::ALL[v],
                    kind: DestinationKind::ALL[k],
                    has_other_attendees: att,
                    overwrites_existing: ow,
                },
                capability: Capability::ALL[c],
                confidence: [Confidence::Low, Confidence::Medium, Confidence::High][conf],
                context: if ctx {
                    Context::Interactive
                } else {
                    Context::Autonomous
                },
                clarify_used: cu,
                forbidden: forb,
            })
    }

    proptest! {
        #[test]
        fn irreversible_execute_only_when_automatable_and_autonomous(i in arb_input()) {
            let (p, _) = posture(i);
            if p == Posture::Execute && is_irreversible(i.act) {
                prop_assert_eq!(i.capability, Capability::Automatable);
                prop_assert_eq!(i.context, Context::Autonomous);
            }
        }

        #[test]
        fn forbidden_always_declines(i in arb_input()) {
            let forced = PostureInput { forbidden: true, ..i };
            prop_assert_eq!(posture(forced), (Posture::Decline, Rule::R1));
        }

        #[test]
        fn unavailable_never_acts(i in arb_input()) {
            let i = PostureInput { capability: Capability::Unavailable, ..i };
            prop_assert_eq!(posture(i).0, Posture::Decline);
        }

        #[test]
        fn low_confidence_never_executes(i in arb_input()) {
            let i = PostureInput { confidence: Confidence::Low, ..i };
            let (p, _) = posture(i);
            prop_assert!(p != Posture::Execute && p != Posture::Confirm);
        }
    }
}
