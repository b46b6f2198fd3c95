//! Attention (§11): significance from evidence, the presence × significance table, quiet.

use crate::status::Outcome;
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    Watching,
    Nearby,
    Away,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Significance {
    Routine,
    Notable,
    NeedsYou,
    Failure,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    Inline,
    Inbox,
    Badge,
    Notify,
}

impl Presence {
    pub const ALL: [Presence; 3] = [Presence::Watching, Presence::Nearby, Presence::Away];
    pub fn as_str(self) -> &'static str {
        match self {
            Presence::Watching => "watching",
            Presence::Nearby => "nearby",
            Presence::Away => "away",
        }
    }
}

impl Significance {
    pub const ALL: [Significance; 4] = [
        Significance::Routine,
        Significance::Notable,
        Significance::NeedsYou,
        Significance::Failure,
    ];
    pub fn as_str(self) -> &'static str {
        match self {
            Significance::Routine => "routine",
            Significance::Notable => "notable",
            Significance::NeedsYou => "needs_you",
            Significance::Failure => "failure",
        }
    }
}

impl Route {
    pub fn as_str(self) -> &'static str {
        match self {
            Route::Inline => "inline",
            Route::Inbox => "inbox",
            Route::Badge => "badge",
            Route::Notify => "notify",
        }
    }
}

/// §11.2, in order. `outcome` is `None` while the run is suspended.
pub fn significance(
    outcome: Option<Outcome>,
    suspended: bool,
    needs_you_nonempty: bool,
    irreversible_verified: bool,
    findings: bool,
) -> Significance {
    if matches!(
        outcome,
        Some(Outcome::Failed | Outcome::Partial | Outcome::Missed)
    ) {
        Significance::Failure
    } else if suspended || needs_you_nonempty {
        Significance::NeedsYou
    } else if irreversible_verified || findings {
        Significance::Notable
    } else {
        Significance::Routine
    }
}

/// The table of §11.1 as data: rows are significance, columns watching / nearby / away.
pub const TABLE: [(Significance, [Route; 3]); 4] = [
    (
        Significance::Routine,
        [Route::Inline, Route::Inbox, Route::Inbox],
    ),
    (
        Significance::Notable,
        [Route::Inline, Route::Badge, Route::Notify],
    ),
    (
        Significance::NeedsYou,
        [Route::Inline, Route::Notify, Route::Notify],
    ),
    (
        Significance::Failure,
        [Route::Inline, Route::Notify, Route::Notify],
    ),
];

/// §11.1 with quiet (§11.3): quiet caps `routine` and `notable` at `inbox`, never the others.
pub fn route(sig: Significance, presence: Presence, quiet: bool) -> Route {
    let col = match presence {
        Presence::Watching => 0,
        Presence::Nearby => 1,
        Presence::Away => 2,
    };
    let r = TABLE
        .iter()
        .find(|(s, _)| *s == sig)
        .map(|(_, row)| row[col])
        .unwrap_or(Route::Notify);
    if quiet && matches!(sig, Significance::Routine | Significance::Notable) && r != Route::Inline {
        return Route::Inbox;
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_cell() {
        use Presence::*;
        use Route::*;
        use Significance::*;
        let cells = [
            (Routine, Watching, Inline),
            (Routine, Nearby, Inbox),
            (Routine, Away, Inbox),
            (Notable, Watching, Inline),
            (Notable, Nearby, Badge),
            (Notable, Away, Notify),
            (NeedsYou, Watching, Inline),
            (NeedsYou, Nearby, Notify),
            (NeedsYou, Away, Notify),
            (Failure, Watching, Inline),
            (Failure, Nearby, Notify),
            (Failure, Away, Notify),
        ];
        for (s, p, r) in cells {
            assert_eq!(route(s, p, false), r, "{s:?} × {p:?}");
        }
        // Quiet caps routine/notable at inbox and never touches needs_you/failure.
        assert_eq!(route(Notable, Away, true), Inbox);
        assert_eq!(route(Notable, Nearby, true), Inbox);
        assert_eq!(route(Routine, Away, true), Inbox);
        assert_eq!(route(Notable, Watching, true), Inline);
        for p in Presence::ALL {
            assert_eq!(route(Failure, p, true), route(Failure, p, false));
            assert_eq!(route(NeedsYou, p, true), route(NeedsYou, p, false));
        }
    }

    #[test]
    fn significance_order() {
        assert_eq!(
            significance(Some(Outcome::Partial), false, true, true, true),
            Significance::Failure
        );
        assert_eq!(
            significance(Some(Outcome::Missed), false, false, false, false),
            Significance::Failure
        );
        assert_eq!(
            significance(Some(Outcome::Failed), false, false, false, false),
            Significance::Failure
        );
        assert_eq!(
            significance(None, true, false, false, false),
            Significance::NeedsYou
        );
        assert_eq!(
            significance(Some(Outcome::Succeeded), false, true, true, false),
            Significance::NeedsYou
        );
        assert_eq!(
            significance(Some(Outcome::Succeeded), false, false, true, false),
            Significance::Notable
        );
        assert_eq!(
            significance(Some(Outcome::Succeeded), false, false, false, true),
            Significance::Notable
        );
        assert_eq!(
            significance(Some(Outcome::Succeeded), false, false, false, false),
            Significance::Routine
        );
        assert_eq!(
            significance(Some(Outcome::Withdrawn), false, false, false, false),
            Significance::Routine
        );
    }
}
