//! Enrolment (§13.6.1): a worker makes its key where it runs and an admin registers only the
//! public half here. The secret never crosses the wire; a taken name is refused.

use crate::extract::ApiJson;
use crate::problem::{ApiError, ApiResult, Problem};
use crate::{blocking, AppState};
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;
use vouch_identity::EnrolError;

/// A worker's public key to register under a name.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct NewIdentity {
    /// 1–64 of `a-z 0-9 . _ -`, starting with a letter or digit (`host` is reserved).
    pub name: String,
    /// `ed25519:` and 64 lowercase hex digits (as `vouch identity show NAME --public-key`
    /// prints it), or just the 64 hex digits.
    pub public_key: String,
}

/// A registered identity: its name and public key (never a secret).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct IdentityBody {
    pub name: String,
    pub public_key: String,
    pub created_ms: i64,
}

impl From<vouch_store::IdentityRecord> for IdentityBody {
    fn from(r: vouch_store::IdentityRecord) -> Self {
        IdentityBody {
            name: r.name,
            public_key: r.public_key,
            created_ms: r.created_ms,
        }
    }
}

fn identity_store(s: &AppState) -> ApiResult<std::sync::Arc<dyn vouch_store::IdentityStore>> {
    s.work.identities.clone().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "unavailable",
            "this server has no identity store",
        )
    })
}

/// Register a worker's public key (admin): 201 with the identity; a taken name is 409
/// `conflict`; a bad name or key is 422 naming `name` or `public_key`.
#[utoipa::path(post, path = "/api/identities", tag = "identities",
    request_body = NewIdentity,
    responses(
        (status = 201, body = IdentityBody),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
        (status = 409, body = Problem, content_type = "application/problem+json", description = "conflict: the name is taken"),
        (status = 422, body = Problem, content_type = "application/problem+json", description = "invalid_field: the name or the public key"),
    ))]
pub async fn enrol(
    State(s): State<AppState>,
    ApiJson(body): ApiJson<NewIdentity>,
) -> ApiResult<(StatusCode, Json<IdentityBody>)> {
    blocking(move || {
        let store = identity_store(&s)?;
        let now = s.host.now_ms();
        let record = vouch_identity::enrol(store.as_ref(), &body.name, &body.public_key, now)
            .map_err(|e| match e {
                EnrolError::Name(e) => ApiError::field("name", e.to_string()),
                EnrolError::Key(e) => ApiError::field("public_key", e.to_string()),
                EnrolError::Taken(_) => {
                    ApiError::new(StatusCode::CONFLICT, "conflict", e.to_string())
                        .with_field("name")
                }
                EnrolError::Store(e) => e.into(),
            })?;
        Ok((StatusCode::CREATED, Json(record.into())))
    })
    .await
}

/// Every registered identity, by name (admin).
#[utoipa::path(get, path = "/api/identities", tag = "identities",
    responses(
        (status = 200, body = Vec<IdentityBody>),
        (status = 401, body = Problem, content_type = "application/problem+json"),
        (status = 403, body = Problem, content_type = "application/problem+json"),
    ))]
pub async fn list(State(s): State<AppState>) -> ApiResult<Json<Vec<IdentityBody>>> {
    blocking(move || {
        let store = identity_store(&s)?;
        Ok(Json(
            store.identities()?.into_iter().map(Into::into).collect(),
        ))
    })
    .await
}
