//! Forward-only migrations, applied in order; `PRAGMA user_version` records the last one.

/// `vouc` in ASCII: marks a SQLite file as a vouch store.
pub const APPLICATION_ID: i64 = 0x766f_7563;

pub const MIGRATIONS: &[&str] = &[
    // 1: the base schema.
    r#"
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    trigger TEXT NOT NULL,
    title TEXT NOT NULL,
    chain_root TEXT NOT NULL,
    parent TEXT,
    scope TEXT NOT NULL,
    spec TEXT NOT NULL,
    state TEXT NOT NULL,
    outcome TEXT,
    ended_by TEXT,
    created_ms INTEGER NOT NULL,
    ended_ms INTEGER,
    owner TEXT,
    lease_until_ms INTEGER
);
CREATE INDEX runs_by_created ON runs(created_ms DESC);

-- The journal is append-only: per-run gap-free sequence, each event chained to the last.
CREATE TABLE journal (
    run_id TEXT NOT NULL REFERENCES runs(id),
    seq INTEGER NOT NULL,
    kind TEXT NOT NULL,
    delivery TEXT,
    body TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
-- Exactly one terminal event per run, enforced by the schema.
CREATE UNIQUE INDEX journal_one_terminal ON journal(run_id) WHERE kind = 'terminal';
CREATE TRIGGER journal_no_update BEFORE UPDATE ON journal
BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
CREATE TRIGGER journal_no_delete BEFORE DELETE ON journal
BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END;
CREATE TRIGGER journal_closed_after_terminal BEFORE INSERT ON journal
WHEN EXISTS (SELECT 1 FROM journal WHERE run_id = NEW.run_id AND kind = 'terminal')
BEGIN SELECT RAISE(ABORT, 'the run already has its terminal event'); END;

CREATE TABLE receipts (run_id TEXT PRIMARY KEY REFERENCES runs(id), text TEXT NOT NULL);
CREATE TABLE payloads (hash TEXT PRIMARY KEY, body TEXT NOT NULL);

CREATE TABLE ledger (
    key TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    run_id TEXT NOT NULL,
    delivery TEXT NOT NULL,
    payload_hash TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('intended','done','failed','unknown')),
    attempts INTEGER NOT NULL,
    detail TEXT NOT NULL,
    updated_ms INTEGER NOT NULL
);

CREATE TABLE cards (
    id INTEGER PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs(id),
    delivery TEXT,
    payload_hash TEXT NOT NULL,
    summary TEXT NOT NULL,
    state TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    decided_ms INTEGER,
    answer TEXT
);
CREATE INDEX cards_open ON cards(state, created_ms DESC);
CREATE INDEX cards_by_run ON cards(run_id);

-- A slot is consumed by a unique row, in the transaction that creates its run.
CREATE TABLE slots (
    schedule TEXT NOT NULL,
    slot_ms INTEGER NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs(id),
    PRIMARY KEY (schedule, slot_ms)
);

CREATE TABLE outbox (
    id INTEGER PRIMARY KEY,
    dedup_key TEXT NOT NULL UNIQUE,
    run_id TEXT NOT NULL,
    route TEXT NOT NULL,
    body TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    sent_ms INTEGER
);
"#,
    // 2: schedules.
    r#"
CREATE TABLE schedules (
    name TEXT PRIMARY KEY,
    cron TEXT NOT NULL,
    tz TEXT NOT NULL,
    routine TEXT NOT NULL,
    catch_up TEXT NOT NULL CHECK (catch_up IN ('skip','latest')),
    overlap TEXT NOT NULL CHECK (overlap IN ('skip','allow')),
    grace_ms INTEGER NOT NULL,
    created_ms INTEGER NOT NULL
);
"#,
    // 3: what start-up and resume look up costs what is open, not what ever happened.
    r#"
CREATE INDEX runs_open ON runs(created_ms) WHERE state != 'ended';
CREATE INDEX runs_by_parent ON runs(parent) WHERE parent IS NOT NULL;
"#,
    // 4: card reasons (§7): why the person is asked, stored with the card.
    r#"
ALTER TABLE cards ADD COLUMN reason TEXT NOT NULL DEFAULT '';
"#,
];
