//! Every error a request can end in is a problem object (RFC 9457, `application/problem+json`)
//! with a stable `code`; every error type converts into one, so no request goes unanswered.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use utoipa::ToSchema;
use vouch_runtime::HostError;
use vouch_store::StoreError;

/// A problem object (RFC 9457). `code` is stable; `detail` says what is wrong and what to do.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct Problem {
    /// `urn:vouch:problem:<code>`.
    #[serde(rename = "type")]
    pub type_: String,
    pub title: String,
    pub status: u16,
    pub detail: String,
    /// Stable, machine-readable: unauthorized, forbidden, not_found, method_not_allowed, bad_json,
    /// bad_query, bad_path, unsupported_media_type, invalid_field, invalid_input,
    /// hash_mismatch, invalid_result, bad_signature, conflict, refused, owned_elsewhere,
    /// not_ended, too_large, read_only, not_supported, unavailable, model_error, internal,
    /// misdirected (contract §17.1).
    pub code: String,
    /// The request field at fault, when one is.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub detail: String,
    pub field: Option<String>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, detail: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            detail: detail.into(),
            field: None,
        }
    }
    /// Bad input in one named field (422).
    pub fn field(field: impl Into<String>, detail: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::UNPROCESSABLE_ENTITY,
            code: "invalid_field",
            detail: detail.into(),
            field: Some(field.into()),
        }
    }
    /// Name the request field at fault.
    pub fn with_field(mut self, field: impl Into<String>) -> Self {
        self.field = Some(field.into());
        self
    }
    pub fn unauthorized(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::UNAUTHORIZED, "unauthorized", detail)
    }
    /// 403: the token's scope does not allow this (§17.1.1).
    pub fn forbidden(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::FORBIDDEN, "forbidden", detail)
    }
    pub fn not_found(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", detail)
    }
    pub fn internal(detail: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", detail)
    }

    pub fn problem(&self) -> Problem {
        Problem {
            type_: format!("urn:vouch:problem:{}", self.code),
            title: title(self.code, self.status).to_string(),
            status: self.status.as_u16(),
            detail: self.detail.clone(),
            code: self.code.to_string(),
            field: self.field.clone(),
        }
    }
}

/// A problem's title in plain words, by its stable code (a person reads it in the console, a
/// program keys on `code`): "The request's JSON is not valid", not "Bad Request".
pub fn title(code: &str, status: StatusCode) -> &'static str {
    match code {
        "unauthorized" => "You are not signed in, or the token is not valid",
        "not_found" => "Nothing here has that name or id",
        "method_not_allowed" => "This address does not take that method",
        "bad_json" => "The request's JSON is not valid",
        "bad_query" => "The address's query is not valid",
        "bad_path" => "The address names something that cannot exist",
        "unsupported_media_type" => "The request's body is not JSON",
        "invalid_field" => "A field of the request cannot be used",
        "invalid_input" => "The request cannot be used",
        "hash_mismatch" => "The hash matches no card of this delivery",
        "invalid_result" => "The result does not fit the task type's schema",
        "bad_signature" => "The signature is not the claimant's",
        "conflict" => "This conflicts with what is already there",
        "refused" => "The run is not waiting for this",
        "owned_elsewhere" => "Another process is driving this now",
        "not_ended" => "The run has not ended yet",
        "too_large" => "The request is too large",
        "read_only" => "This home takes no writes",
        "not_supported" => "This is not supported yet",
        "unavailable" => "vouch is busy; try again shortly",
        "model_error" => "The model did not give a usable answer",
        "internal" => "Something went wrong inside vouch",
        "misdirected" => "This server does not answer to that host name",
        _ => plain_status(status),
    }
}

/// A status in plain words, for a page that has no problem code.
pub fn plain_status(status: StatusCode) -> &'static str {
    match status.as_u16() {
        400 => "The request is not valid",
        401 => "You are not signed in",
        403 => "This is not allowed",
        404 => "There is no such page",
        405 => "This address does not take that method",
        409 => "This cannot be done now",
        413 => "That is too large",
        415 => "The request's body is not JSON",
        422 => "The request cannot be used",
        503 => "vouch is busy; try again shortly",
        s if s >= 500 => "Something went wrong inside vouch",
        _ => "That did not work",
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            // Logged where it is handled: here, once, with its code.
            tracing::error!(code = self.code, status = self.status.as_u16(), detail = %self.detail, "request failed");
        } else {
            tracing::debug!(code = self.code, status = self.status.as_u16(), detail = %self.detail, "request refused");
        }
        let body = serde_json::to_vec(&self.problem()).unwrap_or_default();
        let mut res = (self.status, body).into_response();
        res.headers_mut().insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if self.status == StatusCode::UNAUTHORIZED {
            res.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"vouch\""),
            );
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            res.headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
        }
        res
    }
}

impl From<StoreError> for ApiError {
    fn from(e: StoreError) -> Self {
        match e {
            StoreError::NotFound { what, id } => ApiError::not_found(format!(
                "{what} `{id}` not found; list runs with GET /api/runs and open cards with GET /api/approvals"
            )),
            StoreError::Conflict(m) => ApiError::new(StatusCode::CONFLICT, "conflict", m),
            // Not damage and not transient: this home takes no writes.
            StoreError::ReadOnly(m) => ApiError::new(
                StatusCode::FORBIDDEN,
                "read_only",
                format!("the store is read-only ({m}); make the home writable to decide or change anything"),
            ),
            StoreError::Retryable(m) => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "unavailable",
                format!("the store is busy ({m}); try again"),
            ),
            StoreError::Corrupt(m) => ApiError::internal(format!("store is corrupt: {m}")),
            StoreError::Fatal(m) => ApiError::internal(format!("store error: {m}")),
        }
    }
}

impl From<HostError> for ApiError {
    fn from(e: HostError) -> Self {
        match e {
            HostError::Store(s) => s.into(),
            // The request is wrong in itself; no field of the body is named by the host.
            HostError::BadInput(m) => {
                ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, "invalid_input", m)
            }
            HostError::NotFound { what, id } => ApiError::not_found(format!(
                "no {what} `{id}`; list runs with GET /api/runs and open cards with GET /api/approvals"
            )),
            // The run is not waiting for this decision or call (ended, waits for something
            // else, nothing to resume): the same request will not succeed until it changes.
            HostError::NotWaiting(m) => ApiError::new(StatusCode::CONFLICT, "refused", m),
            // Another live process holds the run: the same request may succeed later.
            HostError::OwnedElsewhere(m) => {
                ApiError::new(StatusCode::CONFLICT, "owned_elsewhere", format!("{m}; try again once it has finished"))
            }
            // The hash given matches no card of the delivery: bad input in `hash`.
            HostError::WrongHash(m) => ApiError::new(
                StatusCode::UNPROCESSABLE_ENTITY,
                "hash_mismatch",
                format!("{m}; approve the hash shown on the card (GET /api/approvals)"),
            )
            .with_field("hash"),
            HostError::SlotTaken(m) => ApiError::new(
                StatusCode::CONFLICT,
                "conflict",
                format!("slot {m} was already consumed"),
            ),
            HostError::Model(e) => {
                ApiError::new(StatusCode::BAD_GATEWAY, "model_error", e.to_string())
            }
            HostError::Crashed(m) => ApiError::internal(format!("crash injected after {m}")),
            HostError::Internal(m) => ApiError::internal(m),
        }
    }
}

impl From<tokio::task::JoinError> for ApiError {
    fn from(e: tokio::task::JoinError) -> Self {
        ApiError::internal(format!("the request's work stopped: {e}"))
    }
}

pub type ApiResult<T> = Result<T, ApiError>;

#[cfg(test)]
mod tests {
    use super::*;
    use vouch_runtime::model::ModelError;

    /// Each host error maps by its variant to one status and one stable code.
    #[test]
    fn host_errors_map_to_status_and_code_by_variant() {
        let cases: Vec<(HostError, u16, &str)> = vec![
            (
                HostError::BadInput("the payload must be a JSON object".into()),
                422,
                "invalid_input",
            ),
            (
                HostError::NotFound {
                    what: "run",
                    id: "r1".into(),
                },
                404,
                "not_found",
            ),
            (
                HostError::NotWaiting("run r1 has already ended".into()),
                409,
                "refused",
            ),
            (
                HostError::OwnedElsewhere("run r1 is owned by another live process".into()),
                409,
                "owned_elsewhere",
            ),
            (HostError::WrongHash("hash".into()), 422, "hash_mismatch"),
            (HostError::SlotTaken("s@1".into()), 409, "conflict"),
            (
                HostError::Model(ModelError::Timeout {
                    attempts: 3,
                    timeout_ms: 10,
                }),
                502,
                "model_error",
            ),
            (
                HostError::Internal("task t1 is gone from the board".into()),
                500,
                "internal",
            ),
            (HostError::Crashed("commit".into()), 500, "internal"),
            (
                HostError::Store(StoreError::NotFound {
                    what: "run",
                    id: "r1".into(),
                }),
                404,
                "not_found",
            ),
            (
                HostError::Store(StoreError::Retryable("busy".into())),
                503,
                "unavailable",
            ),
        ];
        for (e, status, code) in cases {
            let shown = format!("{e:?}");
            let a = ApiError::from(e);
            assert_eq!((a.status.as_u16(), a.code), (status, code), "{shown}");
        }
    }

    #[test]
    fn problem_details_keep_the_hosts_words_and_add_the_next_step() {
        let a = ApiError::from(HostError::NotFound {
            what: "run",
            id: "r9".into(),
        });
        assert!(
            a.detail.contains("no run `r9`") && a.detail.contains("GET /api/runs"),
            "{}",
            a.detail
        );
        let a = ApiError::from(HostError::OwnedElsewhere(
            "run r9 is owned by another live process".into(),
        ));
        assert!(
            a.detail.ends_with("try again once it has finished"),
            "{}",
            a.detail
        );
        let a = ApiError::from(HostError::Model(ModelError::Unauthorized {
            status: 401,
            message: "no key".into(),
        }));
        assert!(
            a.detail.contains("VOUCH_API_KEY"),
            "the model error's own advice survives: {}",
            a.detail
        );
    }
}
