//! API tokens (§17) on SQLite: only each secret's SHA-256 is stored.

use super::*;

fn token_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<ApiToken> {
    let scope: String = r.get(3)?;
    Ok(ApiToken {
        name: r.get(0)?,
        hash: r.get(1)?,
        created_ms: r.get(2)?,
        // The schema's CHECK admits only the four words.
        scope: vouch_core::Scope::parse(&scope).ok_or_else(|| {
            rusqlite::Error::FromSqlConversionFailure(
                3,
                rusqlite::types::Type::Text,
                format!("unknown token scope `{scope}`").into(),
            )
        })?,
        identity: r.get(4)?,
    })
}

pub(super) fn put_token(store: &SqliteStore, t: &ApiToken) -> StoreResult<()> {
    let t = t.clone();
    store.write(move |c| {
        execute_cached(
            c,
            &format!("INSERT INTO api_tokens ({TOKEN_COLS}) VALUES (?1, ?2, ?3, ?4, ?5)"),
            params![t.name, t.hash, t.created_ms, t.scope.as_str(), t.identity],
        )
        .map_err(|e| match db_err(e) {
            StoreError::Conflict(_) => codec::token_exists(&t.name),
            other => other,
        })?;
        Ok(())
    })
}

pub(super) fn token_by_hash(store: &SqliteStore, hash: &str) -> StoreResult<Option<ApiToken>> {
    store.read(|c| {
        query_row_cached(
            c,
            &format!("SELECT {TOKEN_COLS} FROM api_tokens WHERE hash = ?1"),
            [hash],
            token_row,
        )
        .optional()
        .map_err(read_err)
    })
}

pub(super) fn tokens(store: &SqliteStore) -> StoreResult<Vec<ApiToken>> {
    store.read(|c| {
        let mut st = c
            .prepare_cached(&format!(
                "SELECT {TOKEN_COLS} FROM api_tokens ORDER BY name"
            ))
            .map_err(db_err)?;
        let rows = st.query_map([], token_row).map_err(db_err)?;
        rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
    })
}

pub(super) fn remove_token(store: &SqliteStore, name: &str) -> StoreResult<bool> {
    let name = name.to_string();
    store.write(move |c| {
        Ok(
            execute_cached(c, "DELETE FROM api_tokens WHERE name = ?1", [name]).map_err(db_err)?
                == 1,
        )
    })
}
