//! API tokens (§17) on PostgreSQL: only each secret's SHA-256 is stored.

use super::*;

fn token_row(r: &Row) -> StoreResult<ApiToken> {
    Ok(ApiToken {
        name: col(r, 0, "token name")?,
        hash: col(r, 1, "token hash")?,
        created_ms: col(r, 2, "token created_ms")?,
        scope: {
            let s: String = col(r, 3, "token scope")?;
            vouch_core::Scope::parse(&s)
                .ok_or_else(|| StoreError::Corrupt(format!("unknown token scope `{s}`")))?
        },
        identity: col(r, 4, "token identity")?,
    })
}

pub(super) fn put_token(store: &PostgresStore, t: &ApiToken) -> StoreResult<()> {
    store
        .exec(
            &format!("INSERT INTO api_tokens ({TOKEN_COLS}) VALUES ($1, $2, $3, $4, $5)"),
            &[
                &t.name,
                &t.hash,
                &t.created_ms,
                &t.scope.as_str(),
                &t.identity,
            ],
        )
        .map_err(|e| match e {
            StoreError::Conflict(_) => codec::token_exists(&t.name),
            other => other,
        })?;
    Ok(())
}

pub(super) fn token_by_hash(store: &PostgresStore, hash: &str) -> StoreResult<Option<ApiToken>> {
    store
        .query_opt(
            &format!("SELECT {TOKEN_COLS} FROM api_tokens WHERE hash = $1"),
            &[&hash],
        )?
        .as_ref()
        .map(token_row)
        .transpose()
}

pub(super) fn tokens(store: &PostgresStore) -> StoreResult<Vec<ApiToken>> {
    rows(
        store.query(
            &format!("SELECT {TOKEN_COLS} FROM api_tokens ORDER BY name COLLATE \"C\""),
            &[],
        )?,
        token_row,
    )
}

pub(super) fn remove_token(store: &PostgresStore, name: &str) -> StoreResult<bool> {
    Ok(store.exec("DELETE FROM api_tokens WHERE name = $1", &[&name])? == 1)
}
