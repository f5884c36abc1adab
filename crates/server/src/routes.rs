//! The route table. Every state-changing route submits one op; reads come from the store.

mod catalog;
pub mod openapi;
mod review;
mod runs;
mod sessions;

use axum::extract::DefaultBodyLimit;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, get, post};
use axum::{Json, Router, middleware};
use serde_json::{Value, json};
use trellis_protocol::Op;
use trellis_protocol::schema::ComponentSchemas;

use crate::error::ApiError;
use crate::{AppState, assets, security, ws};

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

/// A request body's schema, for the OpenAPI document.
type BodySchema = fn(&mut ComponentSchemas) -> Value;

fn body<T: schemars::JsonSchema>(c: &mut ComponentSchemas) -> Value {
    c.schema_for::<T>()
}

/// One route: the router and the OpenAPI document are both built from [`table`].
pub(crate) struct Route {
    /// `GET` or `POST`.
    pub method: &'static str,
    /// The path, with `{param}`s.
    pub path: &'static str,
    /// What it does.
    pub summary: &'static str,
    /// Query parameters: name and meaning.
    pub query: &'static [(&'static str, &'static str)],
    /// The JSON body it takes.
    pub body: Option<BodySchema>,
    /// What it answers.
    pub answer: &'static str,
    handler: MethodRouter<AppState>,
}

fn route(
    method: &'static str,
    path: &'static str,
    summary: &'static str,
    handler: MethodRouter<AppState>,
) -> Route {
    Route {
        method,
        path,
        summary,
        query: &[],
        body: None,
        answer: "a JSON object",
        handler,
    }
}

impl Route {
    fn query(mut self, q: &'static [(&'static str, &'static str)]) -> Self {
        self.query = q;
        self
    }
    fn body(mut self, b: BodySchema) -> Self {
        self.body = Some(b);
        self
    }
    fn answer(mut self, a: &'static str) -> Self {
        self.answer = a;
        self
    }
}

const EVENTS_QUERY: &[(&str, &str)] = &[
    (
        "since",
        "only events with a larger seq (default 0: from the start)",
    ),
    ("limit", "at most this many (default 1000, at most 10000)"),
    (
        "workspace",
        "the workspace of the `workspace` stream (or of an unrecorded session)",
    ),
];
const WORKSPACE_QUERY: &[(&str, &str)] =
    &[("workspace", "the workspace id (default: the only one)")];
const RUN_QUERY: &[(&str, &str)] = &[("run", "the run (or `run` in the body)")];

/// Every route.
pub(crate) fn table() -> Vec<Route> {
    use review::{ApplyBody, Empty, RejectBody, SelectBody};
    use runs::{
        AliasBody, AnswerBody, ApproveBody, CancelBody, ChangesBody, CommentBody, Create,
        FeedbackBody, NodeMessageBody, PruneBody, ResumeBody,
    };
    use sessions::{ChannelBody, SessionMessageBody};
    vec![
        route("GET", "/api/health", "Liveness (no token needed)", get(health))
            .answer("`{ok: true, version}`"),
        route("GET", "/api/openapi.json", "This document (no token needed)", get(openapi)),
        route("GET", "/metrics", "Prometheus metrics of the served workspaces' runs (token needed; docs/observability.md)", get(metrics))
            .answer("the Prometheus text format: `trellis_runs_total`, `trellis_runs_active`, `trellis_model_calls_total`, `trellis_gen_ai_tokens_total`, `trellis_tool_calls_total`"),
        route("GET", "/api/workspaces", "The served workspaces", get(catalog::workspaces))
            .answer("`[{id, root}]`"),
        route("GET", "/api/catalog/workflows", "The workflows a run can use", get(catalog::workflows))
            .query(WORKSPACE_QUERY)
            .answer("`{workspace, workflows: [{source, workflow}], errors: [string]}`"),
        route("GET", "/api/tools/graph", "The workspace's tool knowledge graph (docs/tools.md) and the state of speculation", get(catalog::tool_graph))
            .query(WORKSPACE_QUERY)
            .answer("`{workspace, nodes: [{tool, pagerank, community, calls, successes}], edges: [{from, to, observedCount, confidence}], speculation: {threshold, acceptance, waste, samples}}`"),
        route("GET", "/api/workflows", "Runs, newest first, with usage", get(runs::list))
            .query(&[
                ("workspace", "only this workspace"),
                ("status", "only runs with this status (running, waitingInput, succeeded, failed, cancelled)"),
                ("limit", "at most this many (default 200, at most 1000)"),
            ])
            .answer("`[run]`: id, graph, status, step, createdTs, updatedTs, workspace, live, usage; workflow and request for workflow runs; stage for unfinished ones"),
        route("POST", "/api/workflows", "Start a run: the orchestrator picks the workflow unless `workflow` names one", post(runs::create))
            .body(body::<Create>)
            .answer("201 `{run, worktree, branch, planning, workspace}` at once: the run's first node (`planning`, the orchestrator) decides the workflow and the run continues with it (`graph:run_continued`); with `planOnly`, 200 `{workflow, orchestration, plan}` after the orchestrator decided"),
        route("GET", "/api/workflows/{id}", "A run: record, usage, workflow and request", get(runs::show)),
        route("GET", "/api/workflows/{id}/graph", "The run's graph: nodes (state, attempt, parent), fan-out groups with counts, routing, what waits", get(runs::graph)),
        route("GET", "/api/workflows/{id}/events", "The run's events as frames (the WebSocket's replay, over REST)", get(runs::events))
            .query(EVENTS_QUERY)
            .answer("`[frame]` (docs/events.schema.json)"),
        route("GET", "/api/workflows/{id}/sessions", "The run's agent sessions", get(sessions::of_run)),
        route("GET", "/api/workflows/{id}/artifacts", "The run's artifacts (scope cards, plans…) and their status", get(runs::artifacts)),
        route("GET", "/api/workflows/{id}/usage", "Tokens, cost and calls per model, stage and role", get(runs::usage)),
        route("GET", "/api/workflows/{id}/interrupts", "Questions and reviews waiting for an answer", get(runs::interrupts))
            .answer("`[{node, interrupt}]`"),
        route("POST", "/api/workflows/{id}/answer", "Answer a node's question", post(runs::answer))
            .body(body::<AnswerBody>),
        route("POST", "/api/workflows/{id}/approve", "Approve what waits for approval", post(runs::approve))
            .body(body::<ApproveBody>),
        route("POST", "/api/workflows/{id}/request-changes", "Send a stage or artifact back with feedback", post(runs::request_changes))
            .body(body::<ChangesBody>),
        route("POST", "/api/workflows/{id}/cancel", "Cancel the run", post(runs::cancel))
            .body(body::<CancelBody>),
        route("POST", "/api/workflows/{id}/resume", "Resume a paused or interrupted run in this server", post(runs::resume))
            .body(body::<ResumeBody>),
        route("POST", "/api/workflows/{id}/nodes/{node}/message", "Message a node's agent: a running agent sees it before its next model call", post(runs::node_message))
            .body(body::<NodeMessageBody>),
        route("POST", "/api/workflows/{id}/nodes/{node}/prune", "Prune a node (with `subtree`, its unfinished children too); its edits are rolled back", post(runs::node_prune))
            .body(body::<PruneBody>),
        route("POST", "/api/workflows/{id}/nodes/{node}/approve", "Approve a node's human review", post(runs::node_approve))
            .body(body::<CommentBody>),
        route("POST", "/api/workflows/{id}/nodes/{node}/revise", "Request a revision of a node with feedback", post(runs::node_revise))
            .body(body::<FeedbackBody>),
        route("GET", "/api/workflows/{id}/changes", "The change set: files, hunks, the current selection", get(review::show)),
        route("POST", "/api/workflows/{id}/changes/select", "Accept or reject a file or some of its hunks", post(review::select))
            .body(body::<SelectBody>),
        route("POST", "/api/workflows/{id}/changes/apply", "Apply the accepted hunks to the working tree", post(review::apply))
            .body(body::<ApplyBody>),
        route("POST", "/api/workflows/{id}/changes/reject", "Reject the whole change set", post(review::reject))
            .body(body::<RejectBody>),
        route("POST", "/api/workflows/{id}/changes/undo", "Reverse the last apply (again: re-apply)", post(review::undo))
            .body(body::<Empty>),
        route("GET", "/api/sessions", "Sessions (agent and channel)", get(sessions::list))
            .query(&[
                ("workspace", "the workspace (default: the only one)"),
                ("run", "only this run's agent sessions"),
                ("channel", "only this channel's sessions"),
                ("limit", "at most this many (default 200)"),
            ]),
        route("GET", "/api/sessions/{id}", "A session and its turns (messages, thoughts, tool calls, usage)", get(sessions::show)),
        route("POST", "/api/sessions/{id}/message", "Message a session: a channel answers it; an agent session's node receives it", post(sessions::message))
            .body(body::<SessionMessageBody>),
        route("POST", "/api/sessions/{id}/cancel", "Stop a channel session's turn in progress", post(sessions::cancel)),
        route("GET", "/api/channels", "Channel sessions", get(sessions::channels))
            .query(&[("workspace", "the workspace"), ("channel", "only this channel"), ("limit", "at most this many")]),
        route("POST", "/api/channels/{id}/session", "Start a discussion session in channel `{id}`", post(sessions::start_channel))
            .body(body::<ChannelBody>)
            .answer("201 `{session, answer?, workspace}`"),
        route("GET", "/api/streams/{stream}", "A stream's last seq (to follow it from now)", get(runs::stream_head))
            .query(WORKSPACE_QUERY)
            .answer("`{stream, workspace, lastSeq}`"),
        route("GET", "/api/streams/{stream}/events", "Any stream's events as frames (`run:<id>`, `session:<id>`, `workspace`)", get(runs::stream_events))
            .query(EVENTS_QUERY)
            .answer("`[frame]` (docs/events.schema.json)"),
        route("GET", "/api/events", "The WebSocket: event frames from `since`, exactly once; ops and subscriptions as client frames (docs/api.md)", get(ws::upgrade))
            .query(&[
                ("stream", "a stream to follow at once (`run:<id>`, `session:<id>`, `workspace`)"),
                ("since", "the last seq already seen (default 0)"),
                ("workspace", "the workspace of the `workspace` stream"),
            ])
            .answer("101 Switching Protocols"),
        route("POST", "/ws/agent/{node}/message", "Alias of nodes/{node}/message", post(runs::alias_message))
            .query(RUN_QUERY)
            .body(body::<AliasBody>),
        route("POST", "/ws/graph/prune/{node}", "Alias of nodes/{node}/prune", post(runs::alias_prune))
            .query(RUN_QUERY)
            .body(body::<AliasBody>),
        route("POST", "/ws/review/{node}/approve", "Alias of nodes/{node}/approve", post(runs::alias_approve))
            .query(RUN_QUERY)
            .body(body::<AliasBody>),
        route("POST", "/ws/review/{node}/revise", "Alias of nodes/{node}/revise", post(runs::alias_revise))
            .query(RUN_QUERY)
            .body(body::<AliasBody>),
        route("GET", "/login", "Set the session cookie from `?token=` and go to `/` (no token header needed)", get(security::login))
            .query(&[("token", "the access token")])
            .answer("303 with an HttpOnly, SameSite=Strict cookie"),
        route("GET", "/", "The web UI (or, in a binary built without it, how to build it)", get(assets::index))
            .answer("HTML"),
        route("GET", "/assets/{*path}", "The web UI's bundles (hashed names, cached for a year; Brotli or gzip when accepted)", get(assets::asset))
            .answer("JavaScript, CSS, images"),
    ]
}

pub(crate) fn router(state: AppState) -> Router {
    let limits = state.0.settings.limits;
    let mut by_path: Vec<(&'static str, MethodRouter<AppState>)> = Vec::new();
    for r in table() {
        match by_path.iter_mut().find(|(p, _)| *p == r.path) {
            Some((_, m)) => *m = std::mem::take(m).merge(r.handler),
            None => by_path.push((r.path, r.handler)),
        }
    }
    let mut router = Router::new();
    for (path, handler) in by_path {
        router = router.route(path, handler);
    }
    router
        .fallback(fallback)
        .layer(DefaultBodyLimit::max(limits.body_bytes))
        .layer(middleware::from_fn_with_state(state.clone(), deadline))
        .layer(middleware::from_fn_with_state(
            state.clone(),
            security::guard,
        ))
        .layer(middleware::from_fn(no_sniff))
        .with_state(state)
}

/// Answers 503 when a request takes longer than the limit (an op it submitted keeps
/// running; its outcome is recorded on the `workspace` stream).
async fn deadline(
    axum::extract::State(state): axum::extract::State<AppState>,
    req: axum::extract::Request,
    next: middleware::Next,
) -> Response {
    let limit = state.0.settings.limits.request_timeout;
    match tokio::time::timeout(limit, next.run(req)).await {
        Ok(res) => res,
        Err(_) => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "timeout",
            format!(
                "no answer within {} s; an operation it started keeps running: its outcome \
                 arrives on the `workspace` stream (op:completed / op:failed)",
                limit.as_secs()
            ),
        )
        .into_response(),
    }
}

async fn openapi() -> Json<Value> {
    Json(openapi::document())
}

async fn health() -> Json<Value> {
    Json(json!({ "ok": true, "version": env!("CARGO_PKG_VERSION") }))
}

/// The run counters in the Prometheus text format.
async fn metrics(axum::extract::State(state): axum::extract::State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        state.0.metrics.prometheus(),
    )
        .into_response()
}

/// Unknown API routes are 404; other GETs are the web UI's client-side routes (`/runs/…`).
async fn fallback(
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
) -> Response {
    let path = uri.path();
    let api = path.starts_with("/api/") || path.starts_with("/ws/") || path == "/api";
    if method == axum::http::Method::GET && !api {
        if let Some(file) = assets::top_level(path, &headers) {
            return file;
        }
        return assets::index(headers).await;
    }
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such route").into_response()
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
