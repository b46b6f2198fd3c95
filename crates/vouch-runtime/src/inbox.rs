//! The inbox (§11): open cards and ended runs' receipts, newest first, each ended run with
//! what is left for the person to do, and the badge count — computed from what is open now,
//! never stored (§11.4). Interfaces render this; none of them decides what a run needs.

use serde::Serialize;
use vouch_core::{EndedBy, Outcome, RunState};
use vouch_store::{Card, Event, EventKind, RunRecord, Store, StoreResult};

/// Ended runs an inbox shows at most (the newest).
pub const INBOX_RUNS_MAX: usize = 50;

/// What an ended run leaves for the person, from its terminal record and its chain.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Todo {
    /// A continuation run already carries it on.
    ResumedAs { run: String },
    /// The terminal record names items that need the person (§9.3).
    NeedsYou { items: Vec<String> },
    /// Ended at start-up after the process died, not succeeded: resume it.
    Interrupted,
    /// Failed, partial or missed: read the receipt.
    SeeWhatFailed,
    /// Nothing to do; the receipt is there to read.
    Receipt,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InboxEntry {
    pub run: RunRecord,
    pub todo: Todo,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Inbox {
    /// Open cards, newest first.
    pub cards: Vec<Card>,
    /// The newest runs (any state), newest first; at most `INBOX_RUNS_MAX`.
    pub runs: Vec<RunRecord>,
    /// The ended ones among `runs`, each with what is left to do.
    pub ended: Vec<InboxEntry>,
    /// Things waiting for the person right now (the badge).
    pub waiting: usize,
}

/// The badge: how many things wait for the person now (open cards), computed, never stored.
pub fn badge(store: &dyn Store) -> StoreResult<usize> {
    Ok(store.open_cards()?.len())
}

/// The whole inbox.
pub fn inbox(store: &dyn Store) -> StoreResult<Inbox> {
    let cards = store.open_cards()?;
    let runs = store.runs(INBOX_RUNS_MAX)?;
    let mut ended = vec![];
    for r in runs.iter().filter(|r| r.state == RunState::Ended) {
        let todo = todo(store, r, &runs)?;
        ended.push(InboxEntry {
            run: r.clone(),
            todo,
        });
    }
    Ok(Inbox {
        waiting: cards.len(),
        cards,
        runs,
        ended,
    })
}

fn todo(store: &dyn Store, r: &RunRecord, runs: &[RunRecord]) -> StoreResult<Todo> {
    // What to do comes from the terminal record: needs_you, or resume, or nothing.
    let terminal = store
        .journal_events(&r.id)?
        .into_iter()
        .rev()
        .find(|e| e.kind == EventKind::Terminal);
    let needs: Vec<String> = match terminal.map(|t| t.event) {
        Some(Ok(Event::Terminal(t))) => t.needs_you,
        // A terminal record that does not parse: the person must look (§3.4.2).
        Some(Err(_)) => vec!["the run's terminal record (it does not parse)".to_string()],
        _ => vec![],
    };
    let child = runs
        .iter()
        .find(|c| c.parent.as_deref() == Some(r.id.as_str()));
    Ok(if let Some(c) = child {
        Todo::ResumedAs { run: c.id.clone() }
    } else if !needs.is_empty() {
        Todo::NeedsYou { items: needs }
    } else if r.ended_by == Some(EndedBy::Boot) && r.outcome != Some(Outcome::Succeeded) {
        Todo::Interrupted
    } else if matches!(
        r.outcome,
        Some(Outcome::Failed | Outcome::Partial | Outcome::Missed)
    ) {
        Todo::SeeWhatFailed
    } else {
        Todo::Receipt
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;
    use vouch_core::TriggerKind;
    use vouch_store::{NewRun, Terminal};
    use vouch_store_sqlite::SqliteStore;

    fn ended(
        s: &dyn Store,
        id: &str,
        parent: Option<&str>,
        outcome: Outcome,
        by: EndedBy,
        body: serde_json::Value,
        at: i64,
    ) {
        s.create_run(&NewRun {
            state: vouch_core::RunState::Created,
            id: id.into(),
            trigger: TriggerKind::Interactive,
            title: format!("run {id}"),
            chain_root: parent.unwrap_or(id).into(),
            parent: parent.map(str::to_string),
            scope: id.into(),
            spec: json!({}),
            created_ms: at,
            lease: None,
        })
        .unwrap();
        s.end_run(
            id,
            &Terminal {
                outcome,
                ended_by: by,
                receipt: String::new(),
                body: typed_terminal(outcome, by, body).into(),
                at_ms: at,
                outbox: None,
            },
        )
        .unwrap();
    }

    /// A terminal body of the journal's type, with `needs_you` from `extra`.
    fn typed_terminal(
        outcome: Outcome,
        by: EndedBy,
        extra: serde_json::Value,
    ) -> serde_json::Value {
        let needs: Vec<String> =
            serde_json::from_value(extra.get("needs_you").cloned().unwrap_or(json!([]))).unwrap();
        Event::from(vouch_store::journal::Terminal {
            outcome,
            ended_by: by,
            statuses: Default::default(),
            needs_you: needs,
            significance: vouch_core::Significance::Routine,
            route: vouch_core::Route::Inbox,
            presence: vouch_core::Presence::Away,
            quiet: false,
            loop_end: None,
            reasons: Default::default(),
            corrupt: vec![],
            receipt_sha256: None,
        })
        .body()
    }

    #[test]
    fn each_ended_run_says_what_is_left_and_the_badge_counts_open_cards() {
        let dir = tempfile::tempdir().unwrap();
        let s = SqliteStore::open(&dir.path().join("v.db")).unwrap();
        ended(
            &s,
            "a-ok",
            None,
            Outcome::Succeeded,
            EndedBy::Loop,
            json!({}),
            1,
        );
        ended(
            &s,
            "b-needs",
            None,
            Outcome::Partial,
            EndedBy::Loop,
            json!({"needs_you": ["d1"]}),
            2,
        );
        ended(
            &s,
            "c-boot",
            None,
            Outcome::Partial,
            EndedBy::Boot,
            json!({}),
            3,
        );
        ended(
            &s,
            "d-fail",
            None,
            Outcome::Failed,
            EndedBy::Loop,
            json!({}),
            4,
        );
        ended(
            &s,
            "e-boot",
            None,
            Outcome::Failed,
            EndedBy::Boot,
            json!({}),
            5,
        );
        ended(
            &s,
            "f-child",
            Some("e-boot"),
            Outcome::Succeeded,
            EndedBy::Loop,
            json!({}),
            6,
        );
        let inbox = inbox(&s).unwrap();
        let todo = |id: &str| {
            inbox
                .ended
                .iter()
                .find(|e| e.run.id == id)
                .unwrap()
                .todo
                .clone()
        };
        assert_eq!(todo("a-ok"), Todo::Receipt);
        assert_eq!(
            todo("b-needs"),
            Todo::NeedsYou {
                items: vec!["d1".into()]
            }
        );
        assert_eq!(todo("c-boot"), Todo::Interrupted);
        assert_eq!(todo("d-fail"), Todo::SeeWhatFailed);
        assert_eq!(
            todo("e-boot"),
            Todo::ResumedAs {
                run: "f-child".into()
            }
        );
        assert_eq!((inbox.waiting, badge(&s).unwrap()), (0, 0));
        s.create_run(&NewRun {
            state: vouch_core::RunState::Created,
            id: "g-open".into(),
            trigger: TriggerKind::Interactive,
            title: "g".into(),
            chain_root: "g-open".into(),
            parent: None,
            scope: "g-open".into(),
            spec: json!({}),
            created_ms: 7,
            lease: None,
        })
        .unwrap();
        s.open_card(&Card {
            run_id: "g-open".into(),
            delivery: None,
            payload_hash: String::new(),
            summary: "which folder?".into(),
            reason: String::new(),
            state: vouch_store::CardState::Open,
            created_ms: 7,
            decided_ms: None,
            answer: None,
        })
        .unwrap();
        assert_eq!(badge(&s).unwrap(), 1);
        let inbox = super::inbox(&s).unwrap();
        assert_eq!(
            (inbox.waiting, inbox.cards.len(), inbox.ended.len()),
            (1, 1, 6)
        );
    }
}
