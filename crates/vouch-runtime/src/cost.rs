//! Cost that adds up (§13.7.2): every attempt keeps its run and its usage whatever its end.
//! An attempt's report carries both; an attempt that ended without one — cancelled, timed out
//! (its worker died), aborted, or whose report came too late — is charged here afterwards, from
//! the host's own journal of its run, once that run has ended or lost its owner. Every
//! sweeper calls [`charge_uncharged`] after the board's sweep.

use crate::host::usage_of;
use vouch_store::board::{AttemptCost, BoardStore};
use vouch_store::{Store, StoreResult};

/// Charge every ended attempt whose run's cost nobody reported; answers how many were charged.
/// A charge another sweeper made first is skipped, not an error.
pub fn charge_uncharged(
    store: &dyn Store,
    board: &dyn BoardStore,
    now_ms: i64,
) -> StoreResult<usize> {
    let mut charged = 0;
    for (task_id, n, run_id) in board.uncharged(now_ms)? {
        let usage = usage_of(&store.journal_events(&run_id)?);
        let cost = AttemptCost {
            task_id,
            n,
            run_id,
            usage,
            at_ms: now_ms,
        };
        if board.charge(&cost)? {
            charged += 1;
        }
    }
    Ok(charged)
}
