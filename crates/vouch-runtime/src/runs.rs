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
    /// The person's answer to the run's question (§5.3), as the journal's fold states it.
    pub answer: Option<String>,
}

/// One run with its deliveries as the journal's fold states them.
pub fn detail(store: &dyn Store, run: RunRecord) -> StoreResult<RunDetail> {
    let journal = store.journal_events(&run.id)?;
    let view = RunView::from_events(&journal);
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
        answer: view.clarify_answer,
    })
}

/// The run a person named (§10.1): by its id, by `last` (the newest run), or by the start of
/// an id that only one run has.
#[derive(Debug, Clone, PartialEq)]
pub enum Named {
    Run(Box<RunRecord>),
    /// `last`, and there is no run yet.
    NoRunYet,
    /// No run's id is or starts with the name.
    NoMatch,
    /// More than one run's id starts with the name.
    Ambiguous,
    /// `last` for an answer, and no run waits for one.
    NothingWaits,
}

/// Which run `name` means: an exact id first, then `last`, then a unique prefix.
pub fn named(store: &dyn Store, name: &str) -> StoreResult<Named> {
    if let Some(r) = store.run(name)? {
        return Ok(Named::Run(Box::new(r)));
    }
    if name == "last" {
        let newest = store.runs(1)?.into_iter().next();
        return Ok(newest.map_or(Named::NoRunYet, |r| Named::Run(Box::new(r))));
    }
    // Two are enough to tell "unique" from "ambiguous".
    let mut matches = if name.is_empty() {
        vec![]
    } else {
        store.runs_by_prefix(name, 2)?
    };
    Ok(match matches.len() {
        1 => Named::Run(Box::new(matches.remove(0))),
        0 => Named::NoMatch,
        _ => Named::Ambiguous,
    })
}

/// Which run `name` means when the person answers a card: `last` is the run of the newest
/// open card of that kind — an approval of `delivery`, or a question when `delivery` is
/// `None` — unless a run is called `last`; any other name as [`named`].
pub fn named_waiting(store: &dyn Store, name: &str, delivery: Option<&str>) -> StoreResult<Named> {
    if name != "last" || store.run(name)?.is_some() {
        return named(store, name);
    }
    let newest = store
        .open_cards()?
        .into_iter()
        .filter(|c| c.delivery.as_deref() == delivery)
        .max_by_key(|c| c.created_ms);
    match newest {
        Some(c) => named(store, &c.run_id),
        None => Ok(Named::NothingWaits),
    }
}

/// Bytes an `Idempotency-Key` holds at most (visible ASCII).
pub const REQUEST_KEY_BYTES_MAX: usize = 255;

/// A run started once per key: its id, and whether this call created it (and so is the one
/// to drive it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Begun {
    pub run: String,
    pub created: bool,
}

/// Why a keyed start did not start (or find) the run.
#[derive(Debug, thiserror::Error)]
pub enum BeginError {
    /// The key is not 1–255 visible ASCII characters.
    #[error("the key must be 1 to {REQUEST_KEY_BYTES_MAX} visible ASCII characters")]
    BadKey,
    /// The key was used before with another request: a new request needs a new key.
    #[error("this key started run {run} with another request; use a new key for a new run")]
    KeyReused { run: String },
    #[error(transparent)]
    Host(#[from] crate::HostError),
}

/// Start `spec` as a new run at most once per `Idempotency-Key` in `scope` (the caller's, e.g.
/// `runs:<token name>`, §17.1): the key is kept with the request's hash and the new run's id
/// before the run is created, so a retry — after a timeout, a double click, or a crash between
/// the two writes — finds the same run (creating it if the crash came first) and never starts
/// a second; the same key with another request is refused.
pub fn begin_once(
    host: &crate::Host,
    scope: &str,
    key: &str,
    spec: &crate::RunSpec,
) -> Result<Begun, BeginError> {
    if key.is_empty()
        || key.len() > REQUEST_KEY_BYTES_MAX
        || !key.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(BeginError::BadKey);
    }
    let request = request_hash(spec)?;
    let fresh = crate::host::new_id(host.clock.as_ref());
    let kept = host
        .store
        .keep_request(
            &vouch_store::request_keys::RequestKey {
                scope: scope.to_string(),
                key: key.to_string(),
                request: request.clone(),
                answer: fresh.clone(),
            },
            host.clock.now_ms(),
        )
        .map_err(crate::HostError::from)?;
    let run = match kept {
        None => fresh,
        Some(k) if k.request != request => return Err(BeginError::KeyReused { run: k.answer }),
        Some(k) => k.answer,
    };
    if host
        .store
        .run(&run)
        .map_err(crate::HostError::from)?
        .is_some()
    {
        return Ok(Begun {
            run,
            created: false,
        });
    }
    match host.create(&run, spec, None, None) {
        Ok(_) => Ok(Begun { run, created: true }),
        // Another request with the key created it meanwhile: that one drives it.
        Err(crate::HostError::Store(vouch_store::StoreError::Conflict(_))) => Ok(Begun {
            run,
            created: false,
        }),
        Err(e) => Err(e.into()),
    }
}

/// The hash of what a run start asks for: its trigger, title, presence, quietness and model.
fn request_hash(spec: &crate::RunSpec) -> Result<String, crate::HostError> {
    let v = serde_json::json!({
        "trigger": spec.trigger,
        "title": spec.title,
        "presence": spec.presence,
        "quiet": spec.quiet,
        "model": spec.model,
        "scope": spec.scope,
    });
    let text = vouch_core::canonical_json(&v)
        .map_err(|e| crate::HostError::Internal(format!("the request does not encode: {e}")))?;
    Ok(vouch_core::sha256_hex(text.as_bytes()))
}
