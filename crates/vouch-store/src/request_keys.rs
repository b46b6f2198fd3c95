//! `Idempotency-Key`s of requests that create runs (§17.1): kept with the request's hash and
//! what it created, so a request sent again answers the same thing and never creates twice.

/// One `Idempotency-Key` of a request that creates something (§17.1), and what it created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestKey {
    /// What the key is for and whose it is (e.g. `runs:<token name>`): keys of different
    /// scopes never meet.
    pub scope: String,
    pub key: String,
    /// The hash of the request the key came with.
    pub request: String,
    /// What the request created (a run id).
    pub answer: String,
}

/// What a key was kept with the first time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptRequest {
    pub request: String,
    pub answer: String,
}

/// Keeps a request's key unless the scope already holds it (`?1` scope, `?2` key, `?3` the
/// request's hash, `?4` the answer, `?5` now).
pub const KEEP_REQUEST_SQL: &str =
    "INSERT INTO request_keys (scope, key, request, answer, created_ms) \
     VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING";
/// What a key was kept with (`?1` scope, `?2` key).
pub const KEPT_REQUEST_SQL: &str =
    "SELECT request, answer FROM request_keys WHERE scope = ?1 AND key = ?2";
