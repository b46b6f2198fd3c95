//! [`IdentityStore`] on PostgreSQL. An append locks the identity's row, so appends to one
//! diary are serialized while different diaries proceed in parallel; the schema's triggers
//! (its identities migration) refuse edits, deletes and an entry that does not extend its chain.

use crate::{col, db_err, json_col, rows, PostgresStore};
use postgres::Row;
use vouch_store::codec::{self, json_text, DIARY_COLS, IDENTITY_COLS};
use vouch_store::{
    DiaryEntry, IdentityRecord, IdentityStore, PutIdentity, StoreError, StoreResult,
};

fn identity_row(r: &Row) -> StoreResult<IdentityRecord> {
    Ok(IdentityRecord {
        name: col(r, 0, "identity name")?,
        public_key: col(r, 1, "identity public_key")?,
        created_ms: col(r, 2, "identity created_ms")?,
    })
}

fn diary_row(r: &Row) -> StoreResult<DiaryEntry> {
    Ok(DiaryEntry {
        identity: col(r, 0, "diary identity")?,
        seq: col(r, 1, "diary seq")?,
        at_ms: col(r, 2, "diary at_ms")?,
        body: json_col(r, 3, "diary body")?,
        prev_hash: col(r, 4, "diary prev_hash")?,
        hash: col(r, 5, "diary hash")?,
        signature: col(r, 6, "diary signature")?,
    })
}

impl IdentityStore for PostgresStore {
    fn put_identity(&self, identity: &IdentityRecord) -> StoreResult<PutIdentity> {
        self.tx(|t| {
            let n = t
                .execute(
                    &format!(
                        "INSERT INTO identities ({IDENTITY_COLS}) VALUES ($1, $2, $3) ON CONFLICT (name) DO NOTHING"
                    ),
                    &[&identity.name, &identity.public_key, &identity.created_ms],
                )
                .map_err(db_err)?;
            if n == 1 {
                return Ok(PutIdentity::Created);
            }
            let existing: String = t
                .query_one(
                    "SELECT public_key FROM identities WHERE name = $1",
                    &[&identity.name],
                )
                .map_err(db_err)
                .and_then(|r| col(&r, 0, "identity public_key"))?;
            if existing == identity.public_key {
                Ok(PutIdentity::Existing)
            } else {
                Err(StoreError::Conflict(format!(
                    "an identity named `{}` already exists with another public key; pick another name",
                    identity.name
                )))
            }
        })
    }

    fn identity(&self, name: &str) -> StoreResult<Option<IdentityRecord>> {
        self.query_opt(
            &format!("SELECT {IDENTITY_COLS} FROM identities WHERE name = $1"),
            &[&name],
        )?
        .as_ref()
        .map(identity_row)
        .transpose()
    }

    fn identities(&self) -> StoreResult<Vec<IdentityRecord>> {
        rows(
            self.query(
                &format!("SELECT {IDENTITY_COLS} FROM identities ORDER BY name COLLATE \"C\""),
                &[],
            )?,
            identity_row,
        )
    }

    fn diary_append(&self, entry: &DiaryEntry) -> StoreResult<()> {
        let body = json_text(&entry.body)?;
        codec::check_diary_body_bytes(body.len())?;
        self.tx(|t| {
            let known = t
                .query_opt(
                    "SELECT 1 FROM identities WHERE name = $1 FOR NO KEY UPDATE",
                    &[&entry.identity],
                )
                .map_err(db_err)?;
            if known.is_none() {
                return Err(StoreError::NotFound {
                    what: "identity",
                    id: entry.identity.clone(),
                });
            }
            t.execute(
                &format!("INSERT INTO diary ({DIARY_COLS}) VALUES ($1, $2, $3, $4, $5, $6, $7)"),
                &[
                    &entry.identity,
                    &entry.seq,
                    &entry.at_ms,
                    &body,
                    &entry.prev_hash,
                    &entry.hash,
                    &entry.signature,
                ],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn diary(&self, name: &str) -> StoreResult<Vec<DiaryEntry>> {
        rows(
            self.query(
                &format!("SELECT {DIARY_COLS} FROM diary WHERE identity = $1 ORDER BY seq"),
                &[&name],
            )?,
            diary_row,
        )
    }

    fn diary_head(&self, name: &str) -> StoreResult<Option<(i64, String)>> {
        match self.query_opt(
            "SELECT seq, hash FROM diary WHERE identity = $1 ORDER BY seq DESC LIMIT 1",
            &[&name],
        )? {
            Some(r) => Ok(Some((col(&r, 0, "diary seq")?, col(&r, 1, "diary hash")?))),
            None => Ok(None),
        }
    }
}
