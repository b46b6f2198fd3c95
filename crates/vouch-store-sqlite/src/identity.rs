//! [`IdentityStore`] on SQLite: identities and diaries in the same file, written through the
//! same group-committing writer. The schema's triggers (its identities migration) refuse
//! edits, deletes and an entry that does not extend its identity's chain, whoever writes.

use crate::{db_err, json_col, read_err, SqliteStore};
use rusqlite::{params, OptionalExtension, Row};
use vouch_store::codec::{self, json_text, DIARY_COLS, IDENTITY_COLS};
use vouch_store::{
    DiaryEntry, IdentityRecord, IdentityStore, PutIdentity, StoreError, StoreResult,
};

fn identity_row(r: &Row) -> rusqlite::Result<IdentityRecord> {
    Ok(IdentityRecord {
        name: r.get(0)?,
        public_key: r.get(1)?,
        created_ms: r.get(2)?,
    })
}

fn diary_row(r: &Row) -> rusqlite::Result<DiaryEntry> {
    let body: String = r.get(3)?;
    Ok(DiaryEntry {
        identity: r.get(0)?,
        seq: r.get(1)?,
        at_ms: r.get(2)?,
        body: json_col(&body)?,
        prev_hash: r.get(4)?,
        hash: r.get(5)?,
        signature: r.get(6)?,
    })
}

impl IdentityStore for SqliteStore {
    fn put_identity(&self, identity: &IdentityRecord) -> StoreResult<PutIdentity> {
        let rec = identity.clone();
        self.write(move |c| {
            let n = c
                .execute(
                    &format!("INSERT INTO identities ({IDENTITY_COLS}) VALUES (?1, ?2, ?3) ON CONFLICT (name) DO NOTHING"),
                    params![rec.name, rec.public_key, rec.created_ms],
                )
                .map_err(db_err)?;
            if n == 1 {
                return Ok(PutIdentity::Created);
            }
            let existing: String = c
                .query_row(
                    "SELECT public_key FROM identities WHERE name = ?1",
                    [&rec.name],
                    |r| r.get(0),
                )
                .map_err(db_err)?;
            if existing == rec.public_key {
                Ok(PutIdentity::Existing)
            } else {
                Err(StoreError::Conflict(format!(
                    "an identity named `{}` already exists with another public key; pick another name",
                    rec.name
                )))
            }
        })
    }

    fn identity(&self, name: &str) -> StoreResult<Option<IdentityRecord>> {
        self.read(|c| {
            c.query_row(
                &format!("SELECT {IDENTITY_COLS} FROM identities WHERE name = ?1"),
                [name],
                identity_row,
            )
            .optional()
            .map_err(read_err)
        })
    }

    fn identities(&self) -> StoreResult<Vec<IdentityRecord>> {
        self.read(|c| {
            let mut st = c
                .prepare(&format!(
                    "SELECT {IDENTITY_COLS} FROM identities ORDER BY name"
                ))
                .map_err(db_err)?;
            let rows = st.query_map([], identity_row).map_err(db_err)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
        })
    }

    fn diary_append(&self, entry: &DiaryEntry) -> StoreResult<()> {
        let e = entry.clone();
        let body = json_text(&e.body)?;
        codec::check_diary_body_bytes(body.len())?;
        self.write(move |c| {
            let known: Option<i64> = c
                .query_row(
                    "SELECT 1 FROM identities WHERE name = ?1",
                    [&e.identity],
                    |r| r.get(0),
                )
                .optional()
                .map_err(db_err)?;
            if known.is_none() {
                return Err(StoreError::NotFound {
                    what: "identity",
                    id: e.identity,
                });
            }
            c.execute(
                &format!("INSERT INTO diary ({DIARY_COLS}) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)"),
                params![
                    e.identity,
                    e.seq,
                    e.at_ms,
                    body,
                    e.prev_hash,
                    e.hash,
                    e.signature
                ],
            )
            .map_err(db_err)?;
            Ok(())
        })
    }

    fn diary(&self, name: &str) -> StoreResult<Vec<DiaryEntry>> {
        self.read(|c| {
            let mut st = c
                .prepare(&format!(
                    "SELECT {DIARY_COLS} FROM diary WHERE identity = ?1 ORDER BY seq"
                ))
                .map_err(db_err)?;
            let rows = st.query_map([name], diary_row).map_err(db_err)?;
            rows.collect::<rusqlite::Result<Vec<_>>>().map_err(read_err)
        })
    }

    fn diary_head(&self, name: &str) -> StoreResult<Option<(i64, String)>> {
        self.read(|c| {
            c.query_row(
                "SELECT seq, hash FROM diary WHERE identity = ?1 ORDER BY seq DESC LIMIT 1",
                [name],
                |r| Ok((r.get(0)?, r.get(1)?)),
            )
            .optional()
            .map_err(read_err)
        })
    }
}
