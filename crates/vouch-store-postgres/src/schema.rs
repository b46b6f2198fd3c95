//! Forward-only migrations, applied in order inside the store's own schema; the table
//! `vouch_migrations` records each one applied (its presence marks a schema as a vouch store).
//!
//! The rules SQLite enforces with triggers are enforced here the same way, so a client that
//! bypasses this crate (psql, another program) still cannot rewrite or extend a closed chain.

/// Custom SQLSTATEs raised by the journal triggers (class `VJ` is not used by PostgreSQL).
pub const SQLSTATE_APPEND_ONLY: &str = "VJ001";
pub const SQLSTATE_RUN_CLOSED: &str = "VJ002";
pub const SQLSTATE_CHAIN_BROKEN: &str = "VJ003";
/// A new run while the store is marked damaged (§10.2).
pub const SQLSTATE_DAMAGED: &str = "VJ004";

pub const MIGRATIONS: &[&str] = &[
    // 1: the base schema (the same tables and rules as the SQLite store's migrations 1 and 2).
    r#"
CREATE TABLE runs (
    id TEXT PRIMARY KEY,
    -- Insertion order, for "newest first" among runs created in the same millisecond.
    ord BIGINT GENERATED ALWAYS AS IDENTITY,
    trigger TEXT NOT NULL,
    title TEXT NOT NULL,
    chain_root TEXT NOT NULL,
    parent TEXT,
    scope TEXT NOT NULL,
    spec TEXT NOT NULL,
    state TEXT NOT NULL,
    outcome TEXT,
    ended_by TEXT,
    created_ms BIGINT NOT NULL,
    ended_ms BIGINT,
    owner TEXT,
    lease_until_ms BIGINT
);
CREATE INDEX runs_by_created ON runs (created_ms DESC, ord DESC);
CREATE INDEX runs_not_ended ON runs (created_ms) WHERE state <> 'ended';

-- The journal is append-only: per-run gap-free sequence, each event chained to the last.
-- Bodies are stored as the exact JSON text that was hashed (not jsonb, which would reorder
-- keys and rewrite numbers, so the text read back would no longer be what was hashed).
CREATE TABLE journal (
    run_id TEXT NOT NULL REFERENCES runs (id),
    seq BIGINT NOT NULL CHECK (seq >= 1),
    kind TEXT NOT NULL,
    delivery TEXT,
    body TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
-- Exactly one terminal event per run, enforced by the schema.
CREATE UNIQUE INDEX journal_one_terminal ON journal (run_id) WHERE kind = 'terminal';

CREATE FUNCTION journal_refuse_change() RETURNS trigger LANGUAGE plpgsql
    -- Resolve `journal` in this schema whatever the caller's search_path.
    SET search_path FROM CURRENT AS $$
BEGIN
    RAISE EXCEPTION 'the journal is append-only' USING ERRCODE = 'VJ001';
END $$;
CREATE TRIGGER journal_no_update BEFORE UPDATE ON journal
    FOR EACH ROW EXECUTE FUNCTION journal_refuse_change();
CREATE TRIGGER journal_no_delete BEFORE DELETE ON journal
    FOR EACH ROW EXECUTE FUNCTION journal_refuse_change();
CREATE TRIGGER journal_no_truncate BEFORE TRUNCATE ON journal
    FOR EACH STATEMENT EXECUTE FUNCTION journal_refuse_change();

-- Closed after the terminal event; and (stricter than SQLite) each new event must extend the
-- chain: the next seq after the last, chained to the last hash.
CREATE FUNCTION journal_check_insert() RETURNS trigger LANGUAGE plpgsql
    -- Resolve `journal` in this schema whatever the caller's search_path.
    SET search_path FROM CURRENT AS $$
DECLARE
    last_seq BIGINT;
    last_hash TEXT;
BEGIN
    IF EXISTS (SELECT 1 FROM journal WHERE run_id = NEW.run_id AND kind = 'terminal') THEN
        RAISE EXCEPTION 'the run already has its terminal event' USING ERRCODE = 'VJ002';
    END IF;
    SELECT seq, hash INTO last_seq, last_hash FROM journal
        WHERE run_id = NEW.run_id ORDER BY seq DESC LIMIT 1;
    IF NEW.seq <> COALESCE(last_seq, 0) + 1
       OR NEW.prev_hash <> COALESCE(last_hash, repeat('0', 64)) THEN
        RAISE EXCEPTION 'event % of run % does not extend its chain', NEW.seq, NEW.run_id
            USING ERRCODE = 'VJ003';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER journal_extends_chain BEFORE INSERT ON journal
    FOR EACH ROW EXECUTE FUNCTION journal_check_insert();

CREATE TABLE receipts (run_id TEXT PRIMARY KEY REFERENCES runs (id), text TEXT NOT NULL);
CREATE TABLE payloads (hash TEXT PRIMARY KEY, body TEXT NOT NULL);

CREATE TABLE ledger (
    key TEXT PRIMARY KEY,
    scope TEXT NOT NULL,
    run_id TEXT NOT NULL,
    delivery TEXT NOT NULL,
    payload_hash TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('intended','done','failed','unknown')),
    attempts BIGINT NOT NULL,
    detail TEXT NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX ledger_by_updated ON ledger (updated_ms DESC);

CREATE TABLE cards (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id TEXT NOT NULL REFERENCES runs (id),
    delivery TEXT,
    payload_hash TEXT NOT NULL,
    summary TEXT NOT NULL,
    state TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    decided_ms BIGINT,
    answer TEXT
);
CREATE INDEX cards_open ON cards (state, created_ms DESC);
CREATE INDEX cards_by_run ON cards (run_id);
-- At most one open card per (run, delivery); a clarify card (no delivery) counts as its own.
CREATE UNIQUE INDEX cards_one_open ON cards (run_id, (delivery IS NULL), COALESCE(delivery, ''))
    WHERE state = 'open';

-- A slot is consumed by a unique row, in the transaction that creates its run.
CREATE TABLE slots (
    schedule TEXT NOT NULL,
    slot_ms BIGINT NOT NULL,
    run_id TEXT NOT NULL REFERENCES runs (id),
    PRIMARY KEY (schedule, slot_ms)
);

CREATE TABLE outbox (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    dedup_key TEXT NOT NULL UNIQUE,
    run_id TEXT NOT NULL,
    route TEXT NOT NULL,
    body TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    sent_ms BIGINT
);
CREATE INDEX outbox_pending ON outbox (id) WHERE sent_ms IS NULL;
CREATE INDEX outbox_by_run ON outbox (run_id);

CREATE TABLE schedules (
    name TEXT PRIMARY KEY,
    cron TEXT NOT NULL,
    tz TEXT NOT NULL,
    routine TEXT NOT NULL,
    catch_up TEXT NOT NULL CHECK (catch_up IN ('skip','latest')),
    overlap TEXT NOT NULL CHECK (overlap IN ('skip','allow')),
    grace_ms BIGINT NOT NULL,
    created_ms BIGINT NOT NULL
);
"#,
    // 2: what start-up and resume look up costs what is open, not what ever happened.
    r#"
CREATE INDEX runs_open ON runs (created_ms, ord) WHERE state <> 'ended';
CREATE INDEX runs_by_parent ON runs (parent) WHERE parent IS NOT NULL;
"#,
    // 3: identities (public keys, immutable) and their append-only signed diaries (§13.6),
    // the same rules as the SQLite store's migration 4.
    r#"
CREATE TABLE identities (
    name TEXT PRIMARY KEY,
    public_key TEXT NOT NULL,
    created_ms BIGINT NOT NULL
);
CREATE FUNCTION identities_refuse_change() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
BEGIN
    RAISE EXCEPTION 'an identity is immutable: make a new one instead' USING ERRCODE = 'VJ001';
END $$;
CREATE TRIGGER identities_no_update BEFORE UPDATE ON identities
    FOR EACH ROW EXECUTE FUNCTION identities_refuse_change();
CREATE TRIGGER identities_no_delete BEFORE DELETE ON identities
    FOR EACH ROW EXECUTE FUNCTION identities_refuse_change();
CREATE TRIGGER identities_no_truncate BEFORE TRUNCATE ON identities
    FOR EACH STATEMENT EXECUTE FUNCTION identities_refuse_change();

-- Bodies are the exact JSON text that was hashed and signed (not jsonb).
CREATE TABLE diary (
    identity TEXT NOT NULL REFERENCES identities (name),
    seq BIGINT NOT NULL CHECK (seq >= 1),
    at_ms BIGINT NOT NULL,
    body TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    signature TEXT NOT NULL,
    PRIMARY KEY (identity, seq)
);
CREATE FUNCTION diary_refuse_change() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
BEGIN
    RAISE EXCEPTION 'the diary is append-only' USING ERRCODE = 'VJ001';
END $$;
CREATE TRIGGER diary_no_update BEFORE UPDATE ON diary
    FOR EACH ROW EXECUTE FUNCTION diary_refuse_change();
CREATE TRIGGER diary_no_delete BEFORE DELETE ON diary
    FOR EACH ROW EXECUTE FUNCTION diary_refuse_change();
CREATE TRIGGER diary_no_truncate BEFORE TRUNCATE ON diary
    FOR EACH STATEMENT EXECUTE FUNCTION diary_refuse_change();
CREATE FUNCTION diary_check_insert() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
DECLARE
    last_seq BIGINT;
    last_hash TEXT;
BEGIN
    SELECT seq, hash INTO last_seq, last_hash FROM diary
        WHERE identity = NEW.identity ORDER BY seq DESC LIMIT 1;
    IF NEW.seq <> COALESCE(last_seq, 0) + 1
       OR NEW.prev_hash <> COALESCE(last_hash, repeat('0', 64)) THEN
        RAISE EXCEPTION 'diary entry % of % does not extend its chain', NEW.seq, NEW.identity
            USING ERRCODE = 'VJ003';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER diary_extends_chain BEFORE INSERT ON diary
    FOR EACH ROW EXECUTE FUNCTION diary_check_insert();
"#,
    // 4: the task board (§13); the same tables as the SQLite store's migration 5.
    r#"
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    ord BIGINT GENERATED ALWAYS AS IDENTITY,
    kind TEXT NOT NULL,
    owner TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('waiting','queued','dispatched','running','completed','failed','cancelled','expired')),
    max_attempts BIGINT NOT NULL CHECK (max_attempts BETWEEN 1 AND 20),
    attempts BIGINT NOT NULL,
    aborts BIGINT NOT NULL,
    epoch BIGINT NOT NULL,
    claimant TEXT,
    lease_until_ms BIGINT,
    lease_ms BIGINT NOT NULL CHECK (lease_ms > 0),
    deadline_ms BIGINT,
    profiles TEXT NOT NULL,
    tags TEXT NOT NULL,
    excluded_claimant TEXT,
    condition TEXT,
    idempotency_key TEXT UNIQUE,
    request_id TEXT NOT NULL,
    spec TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    queued_ms BIGINT,
    ended_ms BIGINT,
    accepted_attempt BIGINT,
    result_id TEXT,
    resuming BOOLEAN NOT NULL,
    updated_ms BIGINT NOT NULL
);
CREATE INDEX tasks_claimable ON tasks (resuming DESC, queued_ms, ord) WHERE state = 'queued';
CREATE INDEX tasks_by_created ON tasks (created_ms, ord);
CREATE INDEX tasks_waiting ON tasks (created_ms) WHERE state = 'waiting';
CREATE TABLE task_tags (
    task_id TEXT NOT NULL REFERENCES tasks (id),
    tag TEXT NOT NULL,
    PRIMARY KEY (tag, task_id)
);
CREATE INDEX task_tags_by_task ON task_tags (task_id);
CREATE TABLE task_attempts (
    task_id TEXT NOT NULL REFERENCES tasks (id),
    n BIGINT NOT NULL CHECK (n >= 1),
    state TEXT NOT NULL CHECK (state IN ('claimed','running','suspended','completed','failed','cancelled','aborted','timed_out')),
    claimant TEXT NOT NULL,
    epoch BIGINT NOT NULL,
    profile TEXT NOT NULL,
    model TEXT,
    policy_fingerprint TEXT NOT NULL,
    claimed_ms BIGINT NOT NULL,
    started_ms BIGINT,
    lease_until_ms BIGINT,
    dispatch_deadline_ms BIGINT,
    running_deadline_ms BIGINT,
    running_left_ms BIGINT,
    ended_ms BIGINT,
    end_reason TEXT,
    retryable BOOLEAN,
    run_id TEXT,
    result_id TEXT,
    turns BIGINT NOT NULL,
    tokens BIGINT NOT NULL,
    tool_calls BIGINT NOT NULL,
    failed_tool_calls BIGINT NOT NULL,
    detail TEXT NOT NULL,
    PRIMARY KEY (task_id, n)
);
CREATE INDEX task_attempts_live ON task_attempts (task_id) WHERE state IN ('claimed','running');
-- An ended attempt never changes again: history is never rewritten.
CREATE FUNCTION task_attempts_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'an ended attempt never changes' USING ERRCODE = 'VJ001';
END $$;
CREATE TRIGGER task_attempts_final BEFORE UPDATE ON task_attempts
    FOR EACH ROW
    WHEN (OLD.state IN ('completed','failed','cancelled','aborted','timed_out'))
    EXECUTE FUNCTION task_attempts_refuse_change();
CREATE TABLE task_results (id TEXT PRIMARY KEY, task_id TEXT NOT NULL, body TEXT NOT NULL);
CREATE TABLE task_verdicts (
    judge_task TEXT PRIMARY KEY,
    target TEXT NOT NULL,
    passed BOOLEAN NOT NULL,
    scores TEXT NOT NULL,
    at_ms BIGINT NOT NULL
);
CREATE INDEX task_verdicts_by_target ON task_verdicts (target);
"#,
    // 5: card reasons (§7): why the person is asked, stored with the card.
    r#"
ALTER TABLE cards ADD COLUMN reason TEXT NOT NULL DEFAULT '';
"#,
    // 6: API tokens (§17): only the hash of each secret.
    r#"
CREATE TABLE api_tokens (
    name TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    created_ms BIGINT NOT NULL
);
"#,
    // 7: failed deliveries on the outbox row (§11.4), so `vouch doctor` can name a stuck route.
    r#"
ALTER TABLE outbox
    ADD COLUMN failures INTEGER NOT NULL DEFAULT 0 CHECK (failures >= 0),
    ADD COLUMN last_error TEXT,
    ADD COLUMN misconfigured BOOLEAN NOT NULL DEFAULT false,
    ADD COLUMN last_error_ms BIGINT;
"#,
    // 8: damage `vouch journal verify` found (§10.2), kept until repaired or acknowledged;
    // while a finding is open the store refuses new runs, whoever inserts them.
    r#"
CREATE TABLE store_damage (
    fingerprint TEXT PRIMARY KEY,
    found TEXT NOT NULL,
    found_ms BIGINT NOT NULL,
    closed_ms BIGINT,
    closed_by TEXT CHECK (closed_by IN ('acknowledged', 'repaired'))
);
CREATE FUNCTION runs_refuse_while_damaged() RETURNS trigger LANGUAGE plpgsql
    -- Resolve `store_damage` in this schema whatever the caller's search_path.
    SET search_path FROM CURRENT AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM store_damage WHERE closed_ms IS NULL) THEN
        RAISE EXCEPTION 'the store is marked damaged by `vouch journal verify`: no new run starts until it is repaired or the damage is acknowledged (`vouch journal verify --acknowledge`)'
            USING ERRCODE = 'VJ004';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER runs_refused_while_damaged BEFORE INSERT ON runs
    FOR EACH ROW EXECUTE FUNCTION runs_refuse_while_damaged();
"#,
    // 9: wake-ups across hosts (§13.2, §17): whoever writes a task, a card or a run's state, on
    // any host, notifies the store's channel (`vouch_` + md5 of the schema: always a valid
    // channel name) with what changed. One notification per statement and kind, deduplicated
    // per transaction; the journal's appends (the hot path) notify nothing, so a run's event
    // stream wakes on its cards and states and polls for the events between.
    r#"
CREATE FUNCTION vouch_wake() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('vouch_' || md5(TG_TABLE_SCHEMA), TG_ARGV[0]);
    RETURN NULL;
END $$;
CREATE TRIGGER tasks_wake AFTER INSERT OR UPDATE OF state ON tasks
    FOR EACH STATEMENT EXECUTE FUNCTION vouch_wake('task');
CREATE TRIGGER cards_wake AFTER INSERT OR UPDATE ON cards
    FOR EACH STATEMENT EXECUTE FUNCTION vouch_wake('card');
CREATE TRIGGER runs_wake AFTER INSERT OR UPDATE OF state ON runs
    FOR EACH STATEMENT EXECUTE FUNCTION vouch_wake('run');
"#,
    // 10: malformed submissions per attempt (§13.4.1): the repair budget is the attempt
    // row's, one rule for every interface and every process that drives the attempt.
    r#"
ALTER TABLE task_attempts ADD COLUMN repairs INTEGER NOT NULL DEFAULT 0 CHECK (repairs >= 0);
"#,
    // 11: token scopes (§17.1.1): what each token may do; tokens made before are the person's.
    // A worker token names the one identity it acts as, and only a worker token names one.
    r#"
ALTER TABLE api_tokens
    ADD COLUMN scope TEXT NOT NULL DEFAULT 'person'
        CHECK (scope IN ('person', 'worker', 'reader', 'admin')),
    ADD COLUMN identity TEXT;
ALTER TABLE api_tokens ADD CONSTRAINT api_tokens_worker_identity
    CHECK ((scope = 'worker') = (identity IS NOT NULL));
"#,
    // 12: a task's thread (§13.1) as a column, so a thread is listed and measured by index
    // instead of by reading every task's spec.
    r#"
ALTER TABLE tasks ADD COLUMN correlation TEXT NOT NULL DEFAULT '';
UPDATE tasks SET correlation = COALESCE(spec::json->>'correlation', '');
CREATE INDEX tasks_by_correlation ON tasks (correlation, created_ms, ord) WHERE correlation <> '';
"#,
    // 13: what an attempt's run cost when the attempt ended without a report carrying it
    // (§13.7.2): written once, beside the attempt row, which never changes once ended.
    r#"
CREATE TABLE task_attempt_costs (
    task_id TEXT NOT NULL,
    n BIGINT NOT NULL CHECK (n >= 1),
    run_id TEXT NOT NULL UNIQUE,
    turns BIGINT NOT NULL CHECK (turns >= 0),
    tokens BIGINT NOT NULL CHECK (tokens >= 0),
    tool_calls BIGINT NOT NULL CHECK (tool_calls >= 0),
    failed_tool_calls BIGINT NOT NULL CHECK (failed_tool_calls >= 0),
    at_ms BIGINT NOT NULL,
    PRIMARY KEY (task_id, n)
);
CREATE FUNCTION task_attempt_costs_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a charged cost never changes' USING ERRCODE = 'VJ001';
END $$;
CREATE TRIGGER task_attempt_costs_final BEFORE UPDATE OR DELETE ON task_attempt_costs
    FOR EACH ROW EXECUTE FUNCTION task_attempt_costs_refuse_change();
"#,
    // 14: the nonces of signed worker statements (§13.6.3), kept while a statement bearing
    // one could still be fresh: a second use by the same identity is a replay.
    r#"
CREATE TABLE worker_nonces (
    identity TEXT NOT NULL,
    nonce TEXT NOT NULL,
    at_ms BIGINT NOT NULL,
    PRIMARY KEY (identity, nonce)
);
CREATE INDEX worker_nonces_by_at ON worker_nonces (at_ms);
"#,
    // 15: the `Idempotency-Key`s of requests that create runs (§17.1): the
    // same key with the same request answers the run it created, never a second run.
    r#"
CREATE TABLE request_keys (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    request TEXT NOT NULL,
    answer TEXT NOT NULL,
    created_ms BIGINT NOT NULL,
    PRIMARY KEY (scope, key)
);
"#,
    // 16: an attempt found by its run (deciding on a task run, the sweep's runs whose
    // attempt ended) without reading every attempt.
    r#"
CREATE INDEX task_attempts_by_run ON task_attempts (run_id) WHERE run_id IS NOT NULL;
"#,
];
