//! The checks every request passes, in the order of `trellis serve`'s and with its code
//! (`trellis-access`): `Host` allow-list (DNS rebinding), `Origin` on POSTs (a web page in
//! the user's browser), then the token.

use axum::extract::{Request, State};
use axum::http::{Method, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use trellis_access::{bearer, host_allowed, origin_allowed};

use crate::{ApiError, AppState};

pub(crate) async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let settings = &state.0.settings;
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !host_allowed(&settings.allowed_hosts, host) {
        return ApiError::forbidden(format!(
            "Host `{host}` is not served here (allowed: {}); add it with --allow-host",
            settings.allowed_hosts.join(", ")
        ))
        .into_response();
    }
    let reads = matches!(*req.method(), Method::GET | Method::HEAD);
    // Browsers send Origin on POSTs; programs (curl, SDKs) send none.
    if let Some(origin) = headers.get(header::ORIGIN).filter(|_| !reads) {
        let origin = origin.to_str().unwrap_or_default();
        if !origin_allowed(&settings.allowed_hosts, origin) {
            return ApiError::forbidden(format!("cross-origin request from `{origin}` refused"))
                .into_response();
        }
    }
    // Liveness holds nothing and lets scripts wait for the server without the token.
    let public = *req.method() == Method::GET && req.uri().path() == "/health";
    if !public && !bearer(headers).is_some_and(|t| settings.token.matches(t)) {
        return ApiError::unauthorized().into_response();
    }
    next.run(req).await
}
