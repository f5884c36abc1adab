//! The route table. Every state-changing route submits one op; reads come from the store.

mod catalog;
mod review;
mod runs;
mod sessions;

use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router, middleware};
use serde_json::{Value, json};
use trellis_protocol::Op;

use crate::error::ApiError;
use crate::{AppState, security, ws};

/// Submits `op` to the service that owns what it names and waits for its result.
pub(crate) async fn call(
    state: &AppState,
    op: Op,
    workspace: Option<&str>,
) -> Result<Json<Value>, ApiError> {
    let (w, service) = state.service_for(&op, workspace)?;
    let id = w.id.clone();
    let mut out = service.call(op).await?;
    if let Value::Object(map) = &mut out {
        map.insert("workspace".into(), Value::String(id));
    }
    Ok(Json(out))
}

pub(crate) fn router(state: AppState) -> Router {
    let limits = state.0.settings.limits;
    let api = Router::new()
        .route("/api/health", get(health))
        .route("/api/workspaces", get(catalog::workspaces))
        .route("/api/catalog/workflows", get(catalog::workflows))
        .route("/api/workflows", get(runs::list).post(runs::create))
        .route("/api/workflows/{id}", get(runs::show))
        .route("/api/workflows/{id}/graph", get(runs::graph))
        .route("/api/workflows/{id}/events", get(runs::events))
        .route("/api/workflows/{id}/sessions", get(sessions::of_run))
        .route("/api/workflows/{id}/artifacts", get(runs::artifacts))
        .route("/api/workflows/{id}/usage", get(runs::usage))
        .route("/api/workflows/{id}/interrupts", get(runs::interrupts))
        .route("/api/workflows/{id}/answer", post(runs::answer))
        .route("/api/workflows/{id}/approve", post(runs::approve))
        .route(
            "/api/workflows/{id}/request-changes",
            post(runs::request_changes),
        )
        .route("/api/workflows/{id}/cancel", post(runs::cancel))
        .route("/api/workflows/{id}/resume", post(runs::resume))
        .route(
            "/api/workflows/{id}/nodes/{node}/message",
            post(runs::node_message),
        )
        .route(
            "/api/workflows/{id}/nodes/{node}/prune",
            post(runs::node_prune),
        )
        .route(
            "/api/workflows/{id}/nodes/{node}/approve",
            post(runs::node_approve),
        )
        .route(
            "/api/workflows/{id}/nodes/{node}/revise",
            post(runs::node_revise),
        )
        .route("/api/workflows/{id}/changes", get(review::show))
        .route("/api/workflows/{id}/changes/select", post(review::select))
        .route("/api/workflows/{id}/changes/apply", post(review::apply))
        .route("/api/workflows/{id}/changes/reject", post(review::reject))
        .route("/api/workflows/{id}/changes/undo", post(review::undo))
        .route("/api/sessions", get(sessions::list))
        .route("/api/sessions/{id}", get(sessions::show))
        .route("/api/sessions/{id}/message", post(sessions::message))
        .route("/api/sessions/{id}/cancel", post(sessions::cancel))
        .route("/api/channels", get(sessions::channels))
        .route("/api/channels/{id}/session", post(sessions::start_channel))
        .route("/api/streams/{stream}/events", get(runs::stream_events))
        .route("/api/events", get(ws::upgrade))
        // Seed 004's paths for its four interactions (the run goes in the body or `?run=`).
        .route("/ws/agent/{node}/message", post(runs::alias_message))
        .route("/ws/graph/prune/{node}", post(runs::alias_prune))
        .route("/ws/review/{node}/approve", post(runs::alias_approve))
        .route("/ws/review/{node}/revise", post(runs::alias_revise));
    api.route("/login", get(security::login))
        .route("/", get(index))
        .fallback(not_found)
        .layer(DefaultBodyLimit::max(limits.body_bytes))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            security::guard,
        ))
        .layer(middleware::from_fn(no_sniff))
        .with_state(state)
}

async fn health() -> Json<Value> {
    Json(json!({ "ok": true, "version": env!("CARGO_PKG_VERSION") }))
}

async fn index() -> Html<&'static str> {
    Html(
        "<!doctype html><meta charset=utf-8><title>Trellis</title>\
         <h1>Trellis</h1><p>This server speaks the API documented in <code>docs/api.md</code>. \
         Open the login URL that <code>trellis serve</code> printed to sign in.</p>",
    )
}

async fn not_found() -> ApiError {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route")
}

/// Responses are not sniffed, framed or cached by browsers.
async fn no_sniff(req: axum::extract::Request, next: middleware::Next) -> Response {
    let mut res = next.run(req).await;
    let h = res.headers_mut();
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        header::HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::X_FRAME_OPTIONS,
        header::HeaderValue::from_static("DENY"),
    );
    h.entry(header::CACHE_CONTROL)
        .or_insert(header::HeaderValue::from_static("no-store"));
    res.into_response()
}
