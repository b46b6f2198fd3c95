//! A schedule's two policies (§12.1, §12.3), as the words a person types and a store keeps.

use serde::{Deserialize, Serialize};

/// Slots missed while no scheduler ran (§12.3): each is reported as missed; with `latest` the
/// newest of them also runs late.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    #[default]
    Skip,
    Latest,
}

impl CatchUp {
    pub const ALL: [CatchUp; 2] = [CatchUp::Skip, CatchUp::Latest];

    pub fn as_str(self) -> &'static str {
        match self {
            CatchUp::Skip => "skip",
            CatchUp::Latest => "latest",
        }
    }

    pub fn parse(s: &str) -> Option<CatchUp> {
        CatchUp::ALL.into_iter().find(|c| c.as_str() == s)
    }
}

/// A slot due while the schedule's previous run is still going (§12.1): `skip` it (reported
/// as missed), or `allow` both to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    #[default]
    Skip,
    Allow,
}

impl Overlap {
    pub const ALL: [Overlap; 2] = [Overlap::Skip, Overlap::Allow];

    pub fn as_str(self) -> &'static str {
        match self {
            Overlap::Skip => "skip",
            Overlap::Allow => "allow",
        }
    }

    pub fn parse(s: &str) -> Option<Overlap> {
        Overlap::ALL.into_iter().find(|o| o.as_str() == s)
    }
}

impl std::fmt::Display for CatchUp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::fmt::Display for Overlap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_policy_is_stored_as_its_serde_name_and_parses_back() {
        for c in CatchUp::ALL {
            assert_eq!(serde_json::to_value(c).ok(), Some(c.as_str().into()));
            assert_eq!(CatchUp::parse(c.as_str()), Some(c));
        }
        for o in Overlap::ALL {
            assert_eq!(serde_json::to_value(o).ok(), Some(o.as_str().into()));
            assert_eq!(Overlap::parse(o.as_str()), Some(o));
        }
        assert_eq!(CatchUp::parse("all"), None);
        assert_eq!(Overlap::parse("Skip"), None);
        assert_eq!(
            (CatchUp::default(), Overlap::default()),
            (CatchUp::Skip, Overlap::Skip)
        );
    }
}
