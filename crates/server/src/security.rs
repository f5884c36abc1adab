//! The checks every request passes: `Host` allow-list (DNS rebinding), `Origin` on
//! state-changing requests and WebSocket upgrades (cross-site requests), then the token
//! (bearer header or cookie). The token, its file and the host checks themselves are
//! `trellis-access`'s, shared with `trellis models serve`.

use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};

use crate::{AppState, error::ApiError};

/// The name of the session cookie.
pub const COOKIE: &str = "trellis_token";

fn host_allowed(state: &AppState, host: &str) -> bool {
    trellis_access::host_allowed(&state.0.settings.allowed_hosts, host)
}

fn origin_allowed(state: &AppState, origin: &str) -> bool {
    trellis_access::origin_allowed(&state.0.settings.allowed_hosts, origin)
}

fn is_upgrade(headers: &HeaderMap) -> bool {
    headers
        .get(header::UPGRADE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.eq_ignore_ascii_case("websocket"))
}

/// Routes anyone on an allowed host may call without the token: health, the API document,
/// login, and the web UI's page and bundles (they hold no data; the app then calls the API,
/// which needs the token).
fn is_public(method: &Method, path: &str) -> bool {
    if *method != Method::GET {
        return false;
    }
    match path {
        "/api/health" | "/api/openapi.json" => true,
        // Not under /api/, and it says what runs did: the token, as for the API.
        "/metrics" => false,
        p => !(p.starts_with("/api/") || p.starts_with("/ws/") || p == "/api"),
    }
}

/// The checks, in order: `Host`, `Origin`, token.
pub(crate) async fn guard(State(state): State<AppState>, req: Request, next: Next) -> Response {
    let headers = req.headers();
    let host = headers
        .get(header::HOST)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    if !host_allowed(&state, host) {
        return ApiError::new(
            StatusCode::FORBIDDEN,
            "forbidden",
            format!(
                "Host `{host}` is not served here (allowed: {}); add it with --allow-host",
                state.0.settings.allowed_hosts.join(", ")
            ),
        )
        .into_response();
    }
    let changes_state = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS)
        || is_upgrade(headers);
    if changes_state {
        // Browsers always send Origin on these; programs (curl, SDKs) send none.
        if let Some(origin) = headers.get(header::ORIGIN) {
            let origin = origin.to_str().unwrap_or_default();
            if !origin_allowed(&state, origin) {
                return ApiError::new(
                    StatusCode::FORBIDDEN,
                    "forbidden",
                    format!("cross-origin request from `{origin}` refused"),
                )
                .into_response();
            }
        }
        if headers
            .get("sec-fetch-site")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v == "cross-site")
        {
            return ApiError::new(
                StatusCode::FORBIDDEN,
                "forbidden",
                "cross-site request refused",
            )
            .into_response();
        }
    }
    if !is_public(req.method(), req.uri().path()) && !authorized(&state, headers) {
        return ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "missing or wrong access token: send `Authorization: Bearer <token>` (the token is \
             in the file `trellis serve` printed at start), or open the login URL",
        )
        .into_response();
    }
    next.run(req).await
}

fn authorized(state: &AppState, headers: &HeaderMap) -> bool {
    let token = &state.0.settings.token;
    if let Some(given) = trellis_access::bearer(headers) {
        return token.matches(given);
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .any(|(k, v)| k == COOKIE && token.matches(v))
}

#[derive(serde::Deserialize)]
pub(crate) struct Login {
    token: Option<String>,
}

/// `GET /login?token=…`: sets the HttpOnly, SameSite=Strict cookie and goes to `/`.
pub(crate) async fn login(State(state): State<AppState>, Query(q): Query<Login>) -> Response {
    match q.token {
        Some(t) if state.0.settings.token.matches(&t) => {
            let cookie = format!("{COOKIE}={t}; HttpOnly; SameSite=Strict; Path=/");
            let mut res = Redirect::to("/").into_response();
            if let Ok(v) = header::HeaderValue::from_str(&cookie) {
                res.headers_mut().insert(header::SET_COOKIE, v);
            }
            res.headers_mut().insert(
                header::CACHE_CONTROL,
                header::HeaderValue::from_static("no-store"),
            );
            res
        }
        _ => ApiError::new(
            StatusCode::UNAUTHORIZED,
            "unauthorized",
            "wrong or missing token in the login URL",
        )
        .into_response(),
    }
}
