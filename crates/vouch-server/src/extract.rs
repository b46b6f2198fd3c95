//! Request extractors whose every rejection is a problem object naming the field at fault.

use crate::problem::ApiError;
use axum::body::Bytes;
use axum::extract::{FromRequest, FromRequestParts, RawPathParams, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::request::Parts;
use axum::http::StatusCode;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;

/// A JSON body; syntax errors are 400 `bad_json`, a wrong or missing field 422 naming it.
pub struct ApiJson<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for ApiJson<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let json_type = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                let mime = v
                    .split(';')
                    .next()
                    .unwrap_or("")
                    .trim()
                    .to_ascii_lowercase();
                mime == "application/json" || mime.ends_with("+json")
            })
            .unwrap_or(false);
        if !json_type {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON with `Content-Type: application/json`",
            ));
        }
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            if e.status() == StatusCode::PAYLOAD_TOO_LARGE {
                return crate::too_large();
            }
            ApiError::new(
                e.status(),
                "bad_body",
                format!("cannot read the body: {}", e.body_text()),
            )
        })?;
        parse_json(&bytes).map(ApiJson)
    }
}

pub fn parse_json<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    refuse_nul(bytes)?;
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    match serde_path_to_error::deserialize::<_, T>(de) {
        Ok(v) => Ok(v),
        Err(e) => {
            let path = e.path().to_string();
            let inner = e.into_inner();
            if inner.is_syntax() || inner.is_eof() {
                return Err(ApiError::new(
                    StatusCode::BAD_REQUEST,
                    "bad_json",
                    format!("the body is not valid JSON: {inner}"),
                ));
            }
            let msg = inner.to_string();
            // A missing field is reported at its parent; name the field itself.
            let field = match (path.as_str(), missing_field(&msg)) {
                (".", Some(f)) => f,
                (p, Some(f)) => format!("{p}.{f}"),
                (".", None) => "body".to_string(),
                (p, None) => p.to_string(),
            };
            Err(ApiError::field(
                field,
                format!("{msg}; see GET /api/openapi.json for the shape"),
            ))
        }
    }
}

fn missing_field(msg: &str) -> Option<String> {
    let rest = msg.strip_prefix("missing field `")?;
    Some(rest[..rest.find('`')?].to_string())
}

/// Query parameters as text; handlers parse each and name the one at fault.
pub struct QueryMap(pub BTreeMap<String, String>);

impl<S: Send + Sync> FromRequestParts<S> for QueryMap {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        QueryMap::parse(parts.uri.query().unwrap_or(""))
    }
}

impl QueryMap {
    /// The query string of a request, each name and value decoded (the server's one parser,
    /// `vouch_core::input::parse_query`); bad encoding is a 400 naming the parameter.
    pub fn parse(q: &str) -> Result<Self, ApiError> {
        vouch_core::input::parse_query(q)
            .map(QueryMap)
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_query", e.to_string()))
    }

    /// A whole number within `[min, max]`, or `default` when absent.
    pub fn number(
        &self,
        name: &str,
        default: usize,
        min: usize,
        max: usize,
    ) -> Result<usize, ApiError> {
        match self.0.get(name) {
            None => Ok(default),
            Some(v) => vouch_core::input::whole_number(v, min, max).ok_or_else(|| {
                ApiError::field(
                    name,
                    format!("`{v}`: expected a whole number from {min} to {max}"),
                )
            }),
        }
    }
}

/// Path parameters; a rejection is a problem object.
pub struct ApiPath<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned + Send> FromRequestParts<S> for ApiPath<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        let raw = RawPathParams::from_request_parts(parts, state)
            .await
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_path", e.body_text()))?;
        for (name, value) in &raw {
            path_id(name, value)?;
        }
        axum::extract::Path::<T>::from_request_parts(parts, state)
            .await
            .map(|p| ApiPath(p.0))
            .map_err(|e| ApiError::new(StatusCode::BAD_REQUEST, "bad_path", e.body_text()))
    }
}

/// An id or a name in a request's path: NUL, control characters, an empty or an overlong
/// one are refused before any store sees it, the same on both backends (400 `bad_path`
/// naming the parameter).
pub fn path_id(name: &str, value: &str) -> Result<(), ApiError> {
    vouch_core::input::check_id(value).map_err(|e| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "bad_path",
            format!("`{name}` {e}; give the id as listed (e.g. by GET /api/runs)"),
        )
        .with_field(name)
    })
}

/// §17.1: no string in a body holds NUL (PostgreSQL cannot keep it, SQLite would): a 422
/// naming the field, before any of the body is used. JSON can carry NUL only escaped, so a
/// body without `\u0000` is passed through unparsed.
fn refuse_nul(bytes: &[u8]) -> Result<(), ApiError> {
    if !bytes.windows(6).any(|w| w.eq_ignore_ascii_case(b"\\u0000")) {
        return Ok(());
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(bytes) else {
        return Ok(()); // the syntax error is reported by the caller
    };
    match vouch_core::input::nul_in_json(&v) {
        Some((path, e)) => {
            let field = path.trim_start_matches('.');
            let field = if field.is_empty() { "body" } else { field };
            Err(ApiError::field(field.to_string(), format!("`{field}` {e}")))
        }
        None => Ok(()),
    }
}
