//! Bearer tokens (§17): `vouch token new NAME` shows a secret once; the store keeps only its
//! SHA-256. Every route requires `Authorization: Bearer <secret>`.

use crate::problem::ApiError;
use crate::{blocking, AppState};
use axum::extract::{Request, State};
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use sha2::{Digest, Sha256};

/// Bytes of randomness in a token's secret.
pub const TOKEN_SECRET_BYTES: usize = 32;
/// What every secret starts with, so a leaked one is recognisable.
pub const TOKEN_PREFIX: &str = "vouch_";

/// The stored form of a secret: hex SHA-256 of its text.
pub fn token_hash(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// A fresh secret and its hash, from the operating system's randomness.
pub fn new_token() -> Result<(String, String), String> {
    let mut bytes = [0u8; TOKEN_SECRET_BYTES];
    getrandom::fill(&mut bytes).map_err(|e| format!("no randomness for a token: {e}"))?;
    let secret = format!("{TOKEN_PREFIX}{}", hex::encode(bytes));
    let hash = token_hash(&secret);
    Ok((secret, hash))
}

pub async fn require_token(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let secret = req
        .headers()
        .get(AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(|s| s.trim().to_string());
    let Some(secret) = secret.filter(|s| !s.is_empty()) else {
        return ApiError::unauthorized(
            "missing `Authorization: Bearer <token>`; create a token with `vouch token new NAME`",
        )
        .into_response();
    };
    let store = state.store.clone();
    let hash = token_hash(&secret);
    match blocking(move || Ok(store.token_by_hash(&hash)?)).await {
        Ok(Some(_)) => next.run(req).await,
        Ok(None) => ApiError::unauthorized(
            "the bearer token is not known to this vouch home; create one with `vouch token new NAME`",
        )
        .into_response(),
        Err(e) => e.into_response(),
    }
}
