//! Errors as JSON (`{"error": "...", "kind": "...", "field": "..."}`), and the JSON body
//! extractor whose refusals name the field.

use axum::body::Bytes;
use axum::extract::{FromRequest, Request};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;
use serde_json::json;
use trellis_core::service::{OpError, OpErrorKind};

/// An error answer.
#[derive(Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// A stable kind (`invalid`, `not_found`, `conflict`, `unauthorized`…).
    pub kind: &'static str,
    /// What went wrong and what to do; never a secret or a stack trace.
    pub message: String,
    /// The offending field of the request body, when one is.
    pub field: Option<String>,
}

impl ApiError {
    /// An error with a status, kind and message.
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        Self {
            status,
            kind,
            message: message.into(),
            field: None,
        }
    }

    /// 400.
    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "invalid", message)
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// 500 for a failure below (the details go to the server log, not to the client).
    pub fn internal(what: &str, e: impl std::fmt::Display) -> Self {
        tracing::error!("{what}: {e}");
        Self::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            "internal",
            format!("{what} failed; the server log has the details"),
        )
    }
}

impl From<OpError> for ApiError {
    fn from(e: OpError) -> Self {
        let (status, kind) = match e.kind {
            OpErrorKind::Invalid => (StatusCode::BAD_REQUEST, "invalid"),
            OpErrorKind::NotFound => (StatusCode::NOT_FOUND, "not_found"),
            OpErrorKind::Conflict => (StatusCode::CONFLICT, "conflict"),
            OpErrorKind::Upstream => (StatusCode::BAD_GATEWAY, "upstream"),
            OpErrorKind::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, "unavailable"),
            OpErrorKind::Internal => {
                return Self::internal("the operation", e.message);
            }
        };
        Self::new(status, kind, e.message)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut body = json!({ "error": self.message, "kind": self.kind });
        if let Some(f) = self.field {
            body["field"] = f.into();
        }
        (self.status, axum::Json(body)).into_response()
    }
}

/// A JSON request body. Refusals: 415 without `Content-Type: application/json`, 413 over
/// the size limit, 400 naming the field for anything else. An empty body reads as `{}`
/// (routes whose fields are all optional take no body).
pub struct Body<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for Body<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, ApiError> {
        let json_type = req
            .headers()
            .get(header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .map(|v| {
                v.split(';')
                    .next()
                    .unwrap_or_default()
                    .trim()
                    .eq_ignore_ascii_case("application/json")
            });
        let bytes = Bytes::from_request(req, state).await.map_err(|e| {
            let status = e.status();
            if status == StatusCode::PAYLOAD_TOO_LARGE {
                ApiError::new(status, "too_large", "the request body is too large")
            } else {
                ApiError::invalid(format!("cannot read the request body: {e}"))
            }
        })?;
        let bytes: &[u8] = if bytes.iter().all(u8::is_ascii_whitespace) {
            b"{}"
        } else {
            if json_type != Some(true) {
                return Err(ApiError::new(
                    StatusCode::UNSUPPORTED_MEDIA_TYPE,
                    "invalid",
                    "send the body as JSON with `Content-Type: application/json`",
                ));
            }
            &bytes
        };
        parse(bytes).map(Body)
    }
}

/// Parses JSON, naming the offending field on failure.
pub fn parse<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.inner().to_string();
        // Serde reports a missing or unknown field at its parent: take the name from the
        // message.
        let named = between_backticks(&inner);
        let field = match (path.as_str(), named) {
            (".", Some(n)) => Some(n.to_owned()),
            (".", None) => None,
            (p, Some(n)) if inner.starts_with("missing field") => Some(format!("{p}.{n}")),
            (p, _) => Some(p.to_owned()),
        };
        let message = match &field {
            Some(f) if !inner.contains(f.as_str()) => format!("field `{f}`: {inner}"),
            _ => inner,
        };
        ApiError {
            field,
            ..ApiError::invalid(message)
        }
    })
}

fn between_backticks(s: &str) -> Option<&str> {
    let start = s.find('`')? + 1;
    let len = s[start..].find('`')?;
    Some(&s[start..start + len])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, serde::Deserialize)]
    #[serde(deny_unknown_fields)]
    #[allow(dead_code)]
    struct Req {
        request: String,
        inner: Option<Inner>,
    }

    #[derive(Debug, serde::Deserialize)]
    #[allow(dead_code)]
    struct Inner {
        count: u32,
    }

    #[test]
    fn errors_name_the_field() {
        let e = parse::<Req>(b"{}").unwrap_err();
        assert_eq!(e.field.as_deref(), Some("request"));
        assert!(
            e.message.contains("missing field `request`"),
            "{}",
            e.message
        );
        let e = parse::<Req>(br#"{"request": 3}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("request"));
        let e = parse::<Req>(br#"{"request": "x", "inner": {"count": -1}}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("inner.count"));
        let e = parse::<Req>(br#"{"request": "x", "inner": {}}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("inner.count"));
        let e = parse::<Req>(br#"{"request": "x", "bogus": 1}"#).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("bogus"));
        let e = parse::<Req>(b"{not json").unwrap_err();
        assert_eq!(e.status, StatusCode::BAD_REQUEST);
    }
}
