//! Reading runs for the interfaces: one run with its deliveries' postures and statuses (from
//! the journal's fold, never from the model's words).

use crate::view::RunView;
use serde::Serialize;
use vouch_core::{DeliveryStatus, Destination, Posture, Verb};
use vouch_store::{RunRecord, Store, StoreResult};

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DeliveryRow {
    pub id: String,
    pub verb: Verb,
    pub destination: Destination,
    pub posture: Option<Posture>,
    pub status: DeliveryStatus,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunDetail {
    pub run: RunRecord,
    pub deliveries: Vec<DeliveryRow>,
    pub turns: usize,
    pub events: usize,
}

/// One run with its deliveries as the journal's fold states them.
pub fn detail(store: &dyn Store, run: RunRecord) -> StoreResult<RunDetail> {
    let journal = store.journal(&run.id)?;
    let view = RunView::from_journal(&journal);
    let deliveries = view
        .manifest
        .iter()
        .flat_map(|m| m.deliveries.iter())
        .map(|d| DeliveryRow {
            id: d.id.clone(),
            verb: d.verb,
            destination: d.destination.clone(),
            posture: view.items.get(&d.id).and_then(|i| i.posture),
            status: view.final_status(&d.id),
        })
        .collect();
    Ok(RunDetail {
        run,
        deliveries,
        turns: view.turns,
        events: journal.len(),
    })
}
