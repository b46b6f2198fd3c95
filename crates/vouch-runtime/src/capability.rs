//! The capability registry (§4): a local, bounded answer per destination. No network.

use vouch_core::manifest::glob_match;
use vouch_core::{Capability, Context, Destination, Verb};

/// The registry's answer: a level, and the connect step when the level is `needs_setup`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapabilityAnswer {
    pub level: Capability,
    pub connect_step: Option<String>,
}

pub trait CapabilityRegistry: Send + Sync {
    fn probe(
        &self,
        verb: Verb,
        dest: &Destination,
        context: Context,
        irreversible: bool,
    ) -> CapabilityAnswer;
}

/// Capabilities from patterns (`kind:address`, `*` wildcard): the scenario world's
/// `capabilities` and `automation` lists, and the same shape from `vouch.toml`.
#[derive(Debug, Clone, Default)]
pub struct PatternCapabilities {
    /// Destination pattern → level; unlisted destinations get `default_level`.
    pub levels: Vec<(String, Capability)>,
    /// `verb:kind:address` patterns opted into trusted automation (§5.2 R8).
    pub automation: Vec<String>,
    pub default_level: Option<Capability>,
}

pub fn pattern_matches(pattern: &str, key: &str) -> bool {
    glob_match(pattern, key)
}

/// Trusted automation (§5.2 R8): an irreversible act in an autonomous run whose
/// `verb:kind:address` matches an opt-in is `automatable`, from `executable` or above only.
pub fn with_automation(
    level: Capability,
    verb: Verb,
    dest: &Destination,
    context: Context,
    irreversible: bool,
    opt_ins: &[String],
) -> Capability {
    let act = format!("{verb}:{}", dest.key());
    if irreversible
        && context == Context::Autonomous
        && level >= Capability::Executable
        && opt_ins.iter().any(|p| pattern_matches(p, &act))
    {
        Capability::Automatable
    } else {
        level
    }
}

impl CapabilityRegistry for PatternCapabilities {
    fn probe(
        &self,
        verb: Verb,
        dest: &Destination,
        context: Context,
        irreversible: bool,
    ) -> CapabilityAnswer {
        let key = dest.key();
        let level = self
            .levels
            .iter()
            .find(|(p, _)| pattern_matches(p, &key))
            .map(|(_, l)| *l)
            .unwrap_or(self.default_level.unwrap_or(Capability::Executable));
        let level = with_automation(level, verb, dest, context, irreversible, &self.automation);
        let connect_step = (level == Capability::NeedsSetup).then(|| {
            format!(
                "connect {} in vouch.toml, then run `vouch doctor` to check it",
                dest.kind
            )
        });
        CapabilityAnswer {
            level,
            connect_step,
        }
    }
}
