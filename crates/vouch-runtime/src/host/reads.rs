//! What an interface asks of the host besides decisions: the rows a command or a page
//! renders, the run a person named, and the host's time. The CLI and the server go through
//! these and never reach the host's store or clock, so what they may touch is what is here.
//! Reads only, save `put_schedule`; no transition logic.

use super::Host;
use crate::approvals::OpenCard;
use crate::inbox::Inbox;
use crate::runs::Named;
use vouch_store::{
    Card, JournalEntry, LedgerEntry, OutboxRow, RunFilter, RunRecord, Schedule, StoreResult,
    VerifyReport,
};

impl Host {
    /// The time on the host's clock (epoch milliseconds), so an interface's stamps, windows
    /// and deadlines follow the same clock as the host's (a manual one in tests).
    pub fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }

    /// A fresh run, card or attempt id from the host's clock ([`super::new_id`]).
    pub fn new_id(&self) -> String {
        super::new_id(self.clock.as_ref())
    }

    /// Why the host's store takes no writes (it was opened read-only), or `None`.
    pub fn read_only(&self) -> Option<String> {
        self.store.read_only()
    }

    /// The run a person named: its id, `last`, or a unique start of an id.
    pub fn named_run(&self, name: &str) -> StoreResult<Named> {
        crate::runs::named(self.store.as_ref(), name)
    }

    /// The run a person named to answer a card: `last` is the newest open card's run, an
    /// approval of `delivery` or (`None`) a question.
    pub fn named_waiting(&self, name: &str, delivery: Option<&str>) -> StoreResult<Named> {
        crate::runs::named_waiting(self.store.as_ref(), name, delivery)
    }

    /// One run's record as stored (`None`: no run has this exact id).
    pub fn run_record(&self, run_id: &str) -> StoreResult<Option<RunRecord>> {
        self.store.run(run_id)
    }

    /// The newest runs first, at most `limit`.
    pub fn runs(&self, limit: usize) -> StoreResult<Vec<RunRecord>> {
        self.store.runs(limit)
    }

    /// The runs `filter` lets through, newest first, skipping `offset`, at most `limit`.
    pub fn runs_filtered(
        &self,
        filter: &RunFilter,
        offset: usize,
        limit: usize,
    ) -> StoreResult<Vec<RunRecord>> {
        self.store.runs_filtered(filter, offset, limit)
    }

    /// An ended run's receipt (`None` until the run ends).
    pub fn receipt(&self, run_id: &str) -> StoreResult<Option<String>> {
        self.store.receipt(run_id)
    }

    /// A run's journal, in order.
    pub fn events(&self, run_id: &str) -> StoreResult<Vec<JournalEntry>> {
        self.store.journal(run_id)
    }

    /// A run's journal entries after `after_seq`, in order (what a watcher has not seen).
    pub fn events_since(&self, run_id: &str, after_seq: i64) -> StoreResult<Vec<JournalEntry>> {
        self.store.journal_since(run_id, after_seq)
    }

    /// Every card of one run, open or decided.
    pub fn run_cards(&self, run_id: &str) -> StoreResult<Vec<Card>> {
        self.store.cards_for_run(run_id)
    }

    /// Every open card, as stored.
    pub fn open_cards(&self) -> StoreResult<Vec<Card>> {
        self.store.open_cards()
    }

    /// The open cards with their payloads, as the person reviews them.
    pub fn approvals(&self) -> StoreResult<Vec<OpenCard>> {
        crate::approvals::open_cards(self.store.as_ref())
    }

    /// The inbox (§11.4).
    pub fn inbox(&self) -> StoreResult<Inbox> {
        crate::inbox::inbox(self.store.as_ref())
    }

    /// The badge: how many things wait for the person now.
    pub fn badge(&self) -> StoreResult<usize> {
        crate::inbox::badge(self.store.as_ref())
    }

    /// The ledger of irreversible acts.
    pub fn ledger(&self) -> StoreResult<Vec<LedgerEntry>> {
        self.store.ledger_list()
    }

    /// The notifications not yet delivered (what the doctor looks at).
    pub fn outbox_pending(&self) -> StoreResult<Vec<OutboxRow>> {
        self.store.outbox_pending()
    }

    /// Every schedule.
    pub fn schedules(&self) -> StoreResult<Vec<Schedule>> {
        self.store.schedules()
    }

    /// Add a schedule; `Conflict` if its name is taken.
    pub fn put_schedule(&self, schedule: &Schedule) -> StoreResult<()> {
        self.store.put_schedule(schedule)
    }

    /// Every run's hash chain and the store itself checked (§10.2).
    pub fn verify_store(&self) -> StoreResult<VerifyReport> {
        self.store.verify()
    }
}
