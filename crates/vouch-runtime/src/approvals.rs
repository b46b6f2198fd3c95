//! The approvals listing (§7, §5.3): every open card with the exact payload it would approve.
//! Interfaces (CLI, HTTP, MCP) render this; none of them decides what is open.

use serde::Serialize;
use serde_json::Value;
use vouch_store::{Card, Store, StoreResult};

/// One open card: an approval (`delivery` set) or the run's question (`delivery` = None).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OpenCard {
    pub run: String,
    pub delivery: Option<String>,
    pub payload_hash: String,
    pub summary: String,
    /// Why the person is asked (§7), e.g. "sending e-mail cannot be undone (rule R9)".
    pub reason: String,
    /// The exact payload an approval would execute (approval cards only), parsed as stored.
    pub payload: Option<Value>,
    /// The payload as stored (canonical JSON text), for showing it byte for byte.
    #[serde(skip)]
    pub payload_text: Option<String>,
    #[serde(skip)]
    pub created_ms: i64,
}

/// Open cards across runs, newest first, each with its payload read back by hash.
pub fn open_cards(store: &dyn Store) -> StoreResult<Vec<OpenCard>> {
    store
        .open_cards()?
        .into_iter()
        .map(|c| with_payload(store, c))
        .collect()
}

fn with_payload(store: &dyn Store, c: Card) -> StoreResult<OpenCard> {
    let payload_text = match &c.delivery {
        Some(_) => store.payload(&c.payload_hash)?,
        None => None,
    };
    let payload = payload_text
        .as_deref()
        .and_then(|p| serde_json::from_str::<Value>(p).ok());
    Ok(OpenCard {
        run: c.run_id,
        delivery: c.delivery,
        payload_hash: c.payload_hash,
        summary: c.summary,
        reason: c.reason,
        payload,
        payload_text,
        created_ms: c.created_ms,
    })
}

/// Bytes of a destination's current content read for a card at most (a larger file is shown
/// as its first this-many bytes, and said to be cut).
pub const REPLACED_BYTES_MAX: usize = 256 * 1024;

/// What an approval card's delivery would replace: the destination's current content, read by
/// its provider (a folder file an overwrite replaces), or `None` when nothing is there or the
/// provider cannot read it back. `(text, cut)`: `cut` when the file is longer than the limit.
pub fn replaced(
    host: &crate::Host,
    run: &str,
    delivery: &str,
) -> StoreResult<Option<(String, bool)>> {
    let view = crate::view::RunView::from_events(&host.store.journal_events(run)?);
    let Some(d) = view
        .manifest
        .iter()
        .flat_map(|m| m.deliveries.iter())
        .find(|d| d.id == delivery)
    else {
        return Ok(None);
    };
    let Some(p) = host.providers.get(&d.destination.kind) else {
        return Ok(None);
    };
    Ok(p.current(&d.destination, REPLACED_BYTES_MAX + 1).map(|b| {
        let cut = b.len() > REPLACED_BYTES_MAX;
        let b = &b[..b.len().min(REPLACED_BYTES_MAX)];
        (String::from_utf8_lossy(b).into_owned(), cut)
    }))
}

/// The change an approval card's payload would make, as its provider shows it (the diff a
/// patch applies to a branch), cut to [`REPLACED_BYTES_MAX`]; `None` when the provider shows
/// none. `(diff, cut)`.
pub fn previewed(
    host: &crate::Host,
    run: &str,
    delivery: &str,
    payload: &Value,
) -> StoreResult<Option<(String, bool)>> {
    let view = crate::view::RunView::from_events(&host.store.journal_events(run)?);
    let Some(d) = view
        .manifest
        .iter()
        .flat_map(|m| m.deliveries.iter())
        .find(|d| d.id == delivery)
    else {
        return Ok(None);
    };
    let Some(p) = host.providers.get(&d.destination.kind) else {
        return Ok(None);
    };
    Ok(p.preview(&d.destination, payload, REPLACED_BYTES_MAX + 1)
        .map(|t| {
            let cut = t.len() > REPLACED_BYTES_MAX;
            (t.chars().take(REPLACED_BYTES_MAX).collect(), cut)
        }))
}
