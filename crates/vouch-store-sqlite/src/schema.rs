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
    // 4: identities (public keys, immutable) and their append-only signed diaries (§13.6).
    r#"
CREATE TABLE identities (
    name TEXT PRIMARY KEY,
    public_key TEXT NOT NULL,
    created_ms INTEGER NOT NULL
);
CREATE TRIGGER identities_no_update BEFORE UPDATE ON identities
BEGIN SELECT RAISE(ABORT, 'an identity is immutable: make a new one instead'); END;
CREATE TRIGGER identities_no_delete BEFORE DELETE ON identities
BEGIN SELECT RAISE(ABORT, 'an identity is immutable: make a new one instead'); END;

CREATE TABLE diary (
    identity TEXT NOT NULL REFERENCES identities(name),
    seq INTEGER NOT NULL CHECK (seq >= 1),
    at_ms INTEGER NOT NULL,
    body TEXT NOT NULL,
    prev_hash TEXT NOT NULL,
    hash TEXT NOT NULL,
    signature TEXT NOT NULL,
    PRIMARY KEY (identity, seq)
) WITHOUT ROWID;
CREATE TRIGGER diary_no_update BEFORE UPDATE ON diary
BEGIN SELECT RAISE(ABORT, 'the diary is append-only'); END;
CREATE TRIGGER diary_no_delete BEFORE DELETE ON diary
BEGIN SELECT RAISE(ABORT, 'the diary is append-only'); END;
CREATE TRIGGER diary_extends_chain BEFORE INSERT ON diary
WHEN NEW.seq <> COALESCE((SELECT max(seq) FROM diary WHERE identity = NEW.identity), 0) + 1
  OR NEW.prev_hash <> COALESCE(
       (SELECT hash FROM diary WHERE identity = NEW.identity ORDER BY seq DESC LIMIT 1),
       '0000000000000000000000000000000000000000000000000000000000000000')
BEGIN SELECT RAISE(ABORT, 'a diary entry must extend its chain (next seq, previous hash)'); END;
"#,
    // 5: the task board (§13).
    r#"
CREATE TABLE tasks (
    id TEXT PRIMARY KEY,
    kind TEXT NOT NULL,
    owner TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('waiting','queued','dispatched','running','completed','failed','cancelled','expired')),
    max_attempts INTEGER NOT NULL CHECK (max_attempts BETWEEN 1 AND 20),
    attempts INTEGER NOT NULL,
    aborts INTEGER NOT NULL,
    epoch INTEGER NOT NULL,
    claimant TEXT,
    lease_until_ms INTEGER,
    lease_ms INTEGER NOT NULL CHECK (lease_ms > 0),
    deadline_ms INTEGER,
    profiles TEXT NOT NULL,
    tags TEXT NOT NULL,
    excluded_claimant TEXT,
    condition TEXT,
    idempotency_key TEXT UNIQUE,
    request_id TEXT NOT NULL,
    spec TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    queued_ms INTEGER,
    ended_ms INTEGER,
    accepted_attempt INTEGER,
    result_id TEXT,
    resuming INTEGER NOT NULL,
    updated_ms INTEGER NOT NULL
);
CREATE INDEX tasks_claimable ON tasks(state, resuming DESC, queued_ms);
CREATE INDEX tasks_by_created ON tasks(created_ms);
CREATE TABLE task_tags (
    task_id TEXT NOT NULL REFERENCES tasks(id),
    tag TEXT NOT NULL,
    PRIMARY KEY (tag, task_id)
) WITHOUT ROWID;
CREATE TABLE task_attempts (
    task_id TEXT NOT NULL REFERENCES tasks(id),
    n INTEGER NOT NULL CHECK (n >= 1),
    state TEXT NOT NULL CHECK (state IN ('claimed','running','suspended','completed','failed','cancelled','aborted','timed_out')),
    claimant TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    profile TEXT NOT NULL,
    model TEXT,
    policy_fingerprint TEXT NOT NULL,
    claimed_ms INTEGER NOT NULL,
    started_ms INTEGER,
    lease_until_ms INTEGER,
    dispatch_deadline_ms INTEGER,
    running_deadline_ms INTEGER,
    running_left_ms INTEGER,
    ended_ms INTEGER,
    end_reason TEXT,
    retryable INTEGER,
    run_id TEXT,
    result_id TEXT,
    turns INTEGER NOT NULL,
    tokens INTEGER NOT NULL,
    tool_calls INTEGER NOT NULL,
    failed_tool_calls INTEGER NOT NULL,
    detail TEXT NOT NULL,
    PRIMARY KEY (task_id, n)
) WITHOUT ROWID;
CREATE INDEX task_attempts_live ON task_attempts(state) WHERE state IN ('claimed','running');
-- An ended attempt never changes again: history is never rewritten.
CREATE TRIGGER task_attempts_final BEFORE UPDATE ON task_attempts
WHEN OLD.state IN ('completed','failed','cancelled','aborted','timed_out')
BEGIN SELECT RAISE(ABORT, 'an ended attempt never changes'); END;
CREATE TABLE task_results (id TEXT PRIMARY KEY, task_id TEXT NOT NULL, body TEXT NOT NULL);
CREATE TABLE task_verdicts (
    judge_task TEXT PRIMARY KEY,
    target TEXT NOT NULL,
    passed INTEGER NOT NULL,
    scores TEXT NOT NULL,
    at_ms INTEGER NOT NULL
);
CREATE INDEX task_verdicts_by_target ON task_verdicts(target);
"#,
    // 6: card reasons (§7): why the person is asked, stored with the card.
    r#"
ALTER TABLE cards ADD COLUMN reason TEXT NOT NULL DEFAULT '';
"#,
    // 7: API tokens (§17): only the hash of each secret.
    r#"
CREATE TABLE api_tokens (
    name TEXT PRIMARY KEY,
    hash TEXT NOT NULL UNIQUE,
    created_ms INTEGER NOT NULL
);
"#,
    // 8: failed deliveries on the outbox row (§11.4), so `vouch doctor` can name a stuck route.
    r#"
ALTER TABLE outbox ADD COLUMN failures INTEGER NOT NULL DEFAULT 0 CHECK (failures >= 0);
ALTER TABLE outbox ADD COLUMN last_error TEXT;
ALTER TABLE outbox ADD COLUMN misconfigured INTEGER NOT NULL DEFAULT 0 CHECK (misconfigured IN (0, 1));
ALTER TABLE outbox ADD COLUMN last_error_ms INTEGER;
"#,
    // 9: the outbox by what is still pending and by run (as on PostgreSQL): every start-up
    // and every end that queued a notification dispatches, and without these each dispatch
    // read the whole outbox history.
    r#"
CREATE INDEX outbox_pending ON outbox(id) WHERE sent_ms IS NULL;
CREATE INDEX outbox_by_run ON outbox(run_id);
"#,
    // 10: damage `vouch journal verify` found (§10.2), kept until repaired or acknowledged;
    // while a finding is open the store refuses new runs, whoever inserts them.
    r#"
CREATE TABLE store_damage (
    fingerprint TEXT PRIMARY KEY,
    found TEXT NOT NULL,
    found_ms INTEGER NOT NULL,
    closed_ms INTEGER,
    closed_by TEXT CHECK (closed_by IN ('acknowledged', 'repaired'))
);
CREATE TRIGGER runs_refused_while_damaged BEFORE INSERT ON runs
WHEN EXISTS (SELECT 1 FROM store_damage WHERE closed_ms IS NULL)
BEGIN SELECT RAISE(ABORT, 'the store is marked damaged by `vouch journal verify`: no new run starts until it is repaired or the damage is acknowledged (`vouch journal verify --acknowledge`)'); END;
"#,
    // 11: malformed submissions per attempt (§13.4.1): the repair budget is the attempt
    // row's, one rule for every interface and every process that drives the attempt.
    r#"
ALTER TABLE task_attempts ADD COLUMN repairs INTEGER NOT NULL DEFAULT 0 CHECK (repairs >= 0);
"#,
    // 12: token scopes (§17.1.1): what each token may do; tokens made before are the person's.
    // A worker token names the one identity it acts as, and only a worker token names one.
    r#"
ALTER TABLE api_tokens ADD COLUMN scope TEXT NOT NULL DEFAULT 'person'
    CHECK (scope IN ('person', 'worker', 'reader', 'admin'));
ALTER TABLE api_tokens ADD COLUMN identity TEXT
    CHECK ((scope = 'worker') = (identity IS NOT NULL));
"#,
    // 13: a task's thread (§13.1) as a column, so a thread is listed and measured by index
    // instead of by reading every task's spec.
    r#"
ALTER TABLE tasks ADD COLUMN correlation TEXT NOT NULL DEFAULT '';
UPDATE tasks SET correlation = COALESCE(json_extract(spec, '$.correlation'), '');
CREATE INDEX tasks_by_correlation ON tasks(correlation, created_ms) WHERE correlation <> '';
"#,
    // 14: what an attempt's run cost when the attempt ended without a report carrying it
    // (§13.7.2): written once, beside the attempt row, which never changes once ended.
    r#"
CREATE TABLE task_attempt_costs (
    task_id TEXT NOT NULL,
    n INTEGER NOT NULL CHECK (n >= 1),
    run_id TEXT NOT NULL UNIQUE,
    turns INTEGER NOT NULL CHECK (turns >= 0),
    tokens INTEGER NOT NULL CHECK (tokens >= 0),
    tool_calls INTEGER NOT NULL CHECK (tool_calls >= 0),
    failed_tool_calls INTEGER NOT NULL CHECK (failed_tool_calls >= 0),
    at_ms INTEGER NOT NULL,
    PRIMARY KEY (task_id, n)
) WITHOUT ROWID;
CREATE TRIGGER task_attempt_costs_no_update BEFORE UPDATE ON task_attempt_costs
BEGIN SELECT RAISE(ABORT, 'a charged cost never changes'); END;
CREATE TRIGGER task_attempt_costs_no_delete BEFORE DELETE ON task_attempt_costs
BEGIN SELECT RAISE(ABORT, 'a charged cost never changes'); END;
"#,
    // 15: the nonces of signed worker statements (§13.6.3), kept while a statement bearing
    // one could still be fresh: a second use by the same identity is a replay.
    r#"
CREATE TABLE worker_nonces (
    identity TEXT NOT NULL,
    nonce TEXT NOT NULL,
    at_ms INTEGER NOT NULL,
    PRIMARY KEY (identity, nonce)
) WITHOUT ROWID;
CREATE INDEX worker_nonces_by_at ON worker_nonces(at_ms);
"#,
    // 16: the `Idempotency-Key`s of requests that create runs (§17.1): the
    // same key with the same request answers the run it created, never a second run.
    r#"
CREATE TABLE request_keys (
    scope TEXT NOT NULL,
    key TEXT NOT NULL,
    request TEXT NOT NULL,
    answer TEXT NOT NULL,
    created_ms INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
) WITHOUT ROWID;
"#,
    // 17: an attempt found by its run (deciding on a task run, the sweep's runs whose
    // attempt ended) without reading every attempt.
    r#"
CREATE INDEX task_attempts_by_run ON task_attempts(run_id) WHERE run_id IS NOT NULL;
"#,
];
