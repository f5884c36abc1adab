//! The crate's setup errors, and the OpenAI-shaped error answer of every route.

use axum::http::{HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Json, Response};
use trellis_llm::openai_wire::{ErrorBody, ErrorObject};

/// Result alias for this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why the server could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A refused bind address.
    #[error("{0}")]
    Bind(String),
    /// Accepting or serving connections failed.
    #[error("serving: {0}")]
    Io(#[from] std::io::Error),
}

/// An error answer: an HTTP status and OpenAI's `{"error": {message, type, param, code}}`.
#[derive(Clone, Debug, PartialEq)]
pub struct ApiError {
    /// The status.
    pub status: StatusCode,
    /// The body.
    pub body: ErrorBody,
}

impl ApiError {
    fn new(
        status: StatusCode,
        kind: &str,
        message: impl Into<String>,
        param: Option<String>,
        code: Option<&str>,
    ) -> Self {
        Self {
            status,
            body: ErrorBody {
                error: ErrorObject {
                    message: message.into(),
                    kind: kind.into(),
                    param,
                    code: code.map(str::to_string),
                },
            },
        }
    }

    /// 400 `invalid_request_error`: the request is malformed or asks for something not
    /// served; `param` names the field (`messages[0].role`).
    pub fn invalid(message: impl Into<String>, param: Option<String>) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            message,
            param,
            None,
        )
    }

    /// 400 `context_length_exceeded`.
    pub fn context_length(tokens: u64, window: u32) -> Self {
        Self::new(
            StatusCode::BAD_REQUEST,
            "invalid_request_error",
            format!(
                "this model's context window is {window} tokens; the messages take {tokens}: \
                 shorten them"
            ),
            Some("messages".into()),
            Some("context_length_exceeded"),
        )
    }

    /// 401 `invalid_api_key`.
    pub fn unauthorized() -> Self {
        Self::new(
            StatusCode::UNAUTHORIZED,
            "invalid_request_error",
            "missing or wrong API key: send `Authorization: Bearer <token>` with the token in \
             the file `trellis models serve` printed at start",
            None,
            Some("invalid_api_key"),
        )
    }

    /// 403: a refused `Host` or cross-origin request.
    pub fn forbidden(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::FORBIDDEN,
            "invalid_request_error",
            message,
            None,
            Some("forbidden"),
        )
    }

    /// 404 `model_not_found`.
    pub fn model_not_found(name: &str, served: &str, param: Option<String>) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            format!("the model `{name}` does not exist here; this server serves `{served}`"),
            param,
            Some("model_not_found"),
        )
    }

    /// 404 `unknown_url`.
    pub fn unknown_url(method: &Method, path: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            format!(
                "unknown request URL: {method} {path} (served: POST /v1/chat/completions, \
                 GET /v1/models)"
            ),
            None,
            Some("unknown_url"),
        )
    }

    /// 413: the body is larger than the limit.
    pub fn too_large(limit: usize) -> Self {
        Self::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "invalid_request_error",
            format!("the request body is larger than {limit} bytes"),
            None,
            Some("request_too_large"),
        )
    }

    /// 503: the queue is full, or the server is stopping. Clients retry it.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            message,
            None,
            Some("overloaded"),
        )
    }

    /// The answer to a provider error met before any output.
    pub fn from_model(e: &trellis_llm::Error) -> Self {
        use trellis_llm::Error as E;
        match e {
            E::Unsupported { message, .. } => Self::invalid(message.clone(), None),
            // The served endpoint (a remote profile) rejected the request itself.
            E::Http {
                status, message, ..
            } if matches!(status, 400 | 404 | 413 | 422) => Self::new(
                StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST),
                "invalid_request_error",
                message.clone(),
                None,
                Some("upstream_rejected"),
            ),
            E::Http { status: 429, .. } => Self::new(
                StatusCode::TOO_MANY_REQUESTS,
                "rate_limit_error",
                "the model's endpoint is rate-limiting this server; retry later",
                None,
                Some("rate_limited"),
            ),
            E::Cancelled => Self::unavailable("the server is stopping"),
            // Details (paths, upstream bodies) stay in the server's log.
            other => Self::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "server_error",
                format!(
                    "the model failed ({}); the server's log has the details",
                    other.code()
                ),
                None,
                Some(other.code()),
            ),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = self.status;
        let mut res = (status, Json(self.body)).into_response();
        let headers = res.headers_mut();
        match status {
            StatusCode::UNAUTHORIZED => {
                headers.insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
            }
            StatusCode::SERVICE_UNAVAILABLE => {
                headers.insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            }
            _ => {}
        }
        res
    }
}
