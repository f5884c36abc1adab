//! Workflow runs (`/api/workflows`) and the node interactions (docs/api.md).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::{Value, json};
use trellis_protocol::records::{RunFilter, RunView};
use trellis_protocol::{
    Answer, Budgets, InputMode, Interrupt, NodeAnswer, NodeId, NodeMessage, Op, RunStatus, StreamId,
};

use super::call;
use crate::AppState;
use crate::error::{ApiError, Body};
use crate::lookup::{blocking, check_id};
use crate::ws::frame;

/// `POST /api/workflows`.
#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub(crate) struct Create {
    request: String,
    #[serde(default)]
    workspace: Option<String>,
    #[serde(default)]
    workflow: Option<String>,
    #[serde(default)]
    include: Vec<String>,
    #[serde(default)]
    skip: Vec<String>,
    #[serde(default)]
    input: Option<InputMode>,
    #[serde(default)]
    budgets: Option<Budgets>,
    #[serde(default)]
    plan_only: bool,
}

pub(crate) async fn create(
    State(state): State<AppState>,
    Body(b): Body<Create>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    if b.request.trim().is_empty() {
        return Err(ApiError {
            field: Some("request".into()),
            ..ApiError::invalid("`request` is empty: say what the run should do")
        });
    }
    let op = Op::StartRun {
        request: b.request,
        repo: None,
        workflow: b.workflow,
        include: b.include,
        skip: b.skip,
        input: b.input.unwrap_or(InputMode::Interrupts),
        budgets: b.budgets,
        plan_only: b.plan_only,
    };
    let status = if b.plan_only {
        StatusCode::OK
    } else {
        StatusCode::CREATED
    };
    Ok((status, call(&state, op, b.workspace.as_deref()).await?))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    workspace: Option<String>,
    status: Option<RunStatus>,
    limit: Option<usize>,
}

/// `GET /api/workflows`: newest first, with each run's usage.
pub(crate) async fn list(
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let targets: Vec<_> = match &q.workspace {
        Some(w) => vec![state.workspace(Some(w))?],
        None => state.workspaces().iter().collect(),
    };
    let limit = q.limit.unwrap_or(200).min(1000);
    let mut out = Vec::new();
    for w in targets {
        let (id, service) = (w.id.clone(), w.service.clone());
        let filter = RunFilter {
            status: q.status,
            limit: Some(limit),
        };
        let rows = blocking(move || {
            service
                .run_views(&filter)?
                .into_iter()
                .map(|view| run_json(&id, view))
                .collect::<Result<Vec<_>, _>>()
        })
        .await?;
        out.extend(rows);
    }
    out.sort_by(|a, b| b["createdTs"].as_i64().cmp(&a["createdTs"].as_i64()));
    out.truncate(limit);
    Ok(Json(Value::Array(out)))
}

/// A run as the API shows it: the record's fields, then the workspace, whether this process
/// executes it, its usage and, for workflow runs, the stage (unfinished runs in a listing),
/// workflow and request.
fn run_json(workspace: &str, view: RunView) -> Result<Value, ApiError> {
    let mut v =
        serde_json::to_value(&view.record).map_err(|e| ApiError::internal("encoding a run", e))?;
    v["workspace"] = Value::String(workspace.to_owned());
    v["live"] = Value::Bool(view.live);
    v["usage"] =
        serde_json::to_value(&view.usage).map_err(|e| ApiError::internal("encoding usage", e))?;
    if let Some(stage) = view.stage {
        v["stage"] = stage.into();
    }
    if let (Some(workflow), Some(request)) = (view.workflow, view.request) {
        v["workflow"] = Value::String(workflow);
        v["request"] = Value::String(request);
    }
    Ok(v)
}

/// `GET /api/workflows/{id}`: the run record, its usage, what waits for an answer.
pub(crate) async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (w, run) = state.run(&id)?;
    let (ws, service) = (w.id.clone(), w.service.clone());
    blocking(move || Ok(Json(run_json(&ws, service.run_view(run.as_str())?)?))).await
}

/// `GET /api/workflows/{id}/graph`: nodes with states and attempts, the stage routing,
/// fan-out groups (children of one parent) with counts per state, what waits.
pub(crate) async fn graph(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (w, run) = state.run(&id)?;
    let service = w.service.clone();
    blocking(move || {
        let g = service.run_graph(&run)?;
        let nodes: Vec<Value> = g
            .state
            .nodes
            .iter()
            .map(|n| {
                json!({
                    "id": n.id,
                    "attempt": n.attempt,
                    "state": n.state,
                    "parent": n.parent,
                    "error": n.error,
                    "interrupt": n.interrupt,
                })
            })
            .collect();
        let groups: Vec<Value> = g
            .groups
            .iter()
            .map(|g| json!({ "parent": g.parent, "nodes": g.nodes, "counts": g.counts }))
            .collect();
        Ok(Json(json!({
            "run": g.state.run,
            "status": g.state.status,
            "steps": g.state.steps,
            "lastSeq": g.state.last_seq,
            "counters": g.state.counters,
            "nodes": nodes,
            "groups": groups,
            "waiting": waiting_json(&g.state.waiting),
            "workflow": g.workflow,
            "entry": g.entry,
            "routing": g.routing,
            "skipped": g.skipped,
            // The task tree, for runs that keep one (`task_tree`, docs/workflows.md).
            "taskTree": g.task_tree,
        })))
    })
    .await
}

/// What waits for an answer: `[{ node, interrupt }]`.
fn waiting_json(waiting: &[(NodeId, Interrupt)]) -> Value {
    Value::Array(
        waiting
            .iter()
            .map(|(node, it)| json!({ "node": node, "interrupt": it }))
            .collect(),
    )
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventsQuery {
    since: Option<u64>,
    limit: Option<usize>,
    workspace: Option<String>,
}

/// `GET /api/workflows/{id}/events?since=&limit=`: the run's stream as frames.
pub(crate) async fn events(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Query(q): Query<EventsQuery>,
) -> Result<Json<Value>, ApiError> {
    let (_, run) = state.run(&id)?;
    read_stream(&state, StreamId::Run(run), q).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct HeadQuery {
    workspace: Option<String>,
}

/// `GET /api/streams/{stream}?workspace=`: the stream's last seq (follow it "from now" with
/// `since` = that).
pub(crate) async fn stream_head(
    State(state): State<AppState>,
    Path(stream): Path<String>,
    Query(q): Query<HeadQuery>,
) -> Result<Json<Value>, ApiError> {
    let stream: StreamId = stream
        .parse()
        .map_err(|e| ApiError::invalid(format!("{e}")))?;
    let (w, stream) = state.stream(&stream, q.workspace.as_deref())?;
    let (ws, service) = (w.id.clone(), w.service.clone());
    blocking(move || {
        let last = service.stream_head(&stream)?;
        Ok(Json(
            json!({ "stream": stream, "workspace": ws, "lastSeq": last }),
        ))
    })
    .await
}

/// `GET /api/streams/{stream}/events?since=&limit=&workspace=`: any stream as frames.
pub(crate) async fn stream_events(
    State(state): State<AppState>,
    Path(stream): Path<String>,
    Query(q): Query<EventsQuery>,
) -> Result<Json<Value>, ApiError> {
    let stream: StreamId = stream
        .parse()
        .map_err(|e| ApiError::invalid(format!("{e}")))?;
    read_stream(&state, stream, q).await
}

async fn read_stream(
    state: &AppState,
    stream: StreamId,
    q: EventsQuery,
) -> Result<Json<Value>, ApiError> {
    let (w, stream) = state.stream(&stream, q.workspace.as_deref())?;
    let (ws, service) = (w.id.clone(), w.service.clone());
    let limit = q.limit.unwrap_or(1000).min(10_000);
    blocking(move || {
        let events = service.stream_events(&stream, q.since.unwrap_or(0), Some(limit))?;
        Ok(Json(Value::Array(
            events.iter().map(|e| frame(&ws, e)).collect(),
        )))
    })
    .await
}

/// `GET /api/workflows/{id}/artifacts`.
pub(crate) async fn artifacts(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (w, run) = state.run(&id)?;
    let service = w.service.clone();
    blocking(move || Ok(Json(to_json(&service.artifacts(&run)?)?))).await
}

/// `GET /api/workflows/{id}/usage`: tokens, cost and calls per model, stage and role.
pub(crate) async fn usage(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (w, run) = state.run(&id)?;
    let service = w.service.clone();
    blocking(move || Ok(Json(to_json(&service.usage(&run)?)?))).await
}

/// `GET /api/workflows/{id}/interrupts`: the questions and reviews waiting for an answer.
pub(crate) async fn interrupts(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (w, run) = state.run(&id)?;
    let service = w.service.clone();
    blocking(move || Ok(Json(waiting_json(&service.interrupts(&run)?)))).await
}

fn to_json(v: &impl serde::Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(v).map_err(|e| ApiError::internal("encoding a response", e))
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AnswerBody {
    node: NodeId,
    answer: Value,
}

/// `POST /api/workflows/{id}/answer`: answers a node's question.
pub(crate) async fn answer(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<AnswerBody>,
) -> Result<Json<Value>, ApiError> {
    check_id("node", b.node.as_str())?;
    let op = Op::Answer {
        run: id,
        node: b.node,
        answer: Answer(b.answer),
    };
    call(&state, op, None).await
}

#[derive(Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApproveBody {
    #[serde(default)]
    node: Option<NodeId>,
    #[serde(default)]
    artifact: Option<i64>,
    #[serde(default)]
    comment: Option<String>,
}

/// `POST /api/workflows/{id}/approve`: approves what waits for approval.
pub(crate) async fn approve(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<ApproveBody>,
) -> Result<Json<Value>, ApiError> {
    if let Some(n) = &b.node {
        check_id("node", n.as_str())?;
    }
    let op = Op::Approve {
        run: id,
        node: b.node,
        artifact: b.artifact,
        comment: b.comment,
    };
    call(&state, op, None).await
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChangesBody {
    #[serde(default)]
    node: Option<NodeId>,
    #[serde(default)]
    artifact: Option<i64>,
    feedback: String,
}

/// `POST /api/workflows/{id}/request-changes`: sends a stage or artifact back with feedback.
pub(crate) async fn request_changes(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<ChangesBody>,
) -> Result<Json<Value>, ApiError> {
    if let Some(n) = &b.node {
        check_id("node", n.as_str())?;
    }
    let op = Op::RequestChanges {
        run: id,
        node: b.node,
        artifact: b.artifact,
        feedback: b.feedback,
    };
    call(&state, op, None).await
}

#[derive(Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CancelBody {
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /api/workflows/{id}/cancel`.
pub(crate) async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<CancelBody>,
) -> Result<Json<Value>, ApiError> {
    call(
        &state,
        Op::Cancel {
            run: id,
            reason: b.reason,
        },
        None,
    )
    .await
}

#[derive(Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResumeBody {
    #[serde(default)]
    answers: Vec<NodeAnswer>,
    #[serde(default)]
    messages: Vec<NodeMessage>,
    #[serde(default)]
    input: Option<InputMode>,
}

/// `POST /api/workflows/{id}/resume`: continues a paused or interrupted run here.
pub(crate) async fn resume(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<ResumeBody>,
) -> Result<Json<Value>, ApiError> {
    let op = Op::ResumeRun {
        run: id,
        answers: b.answers,
        messages: b.messages,
        input: b.input.unwrap_or(InputMode::Interrupts),
    };
    call(&state, op, None).await
}

/// The four interactions with a node: message, prune, approve, revise.
enum NodeAction {
    Message(String),
    Prune(PruneBody),
    Approve(Option<String>),
    Revise(String),
}

/// Submits `action` on `node` of `run`.
async fn act(
    state: &AppState,
    run: String,
    node: String,
    action: NodeAction,
) -> Result<Json<Value>, ApiError> {
    check_id("node", &node)?;
    let node = NodeId::new(node);
    let op = match action {
        NodeAction::Message(text) => {
            if text.trim().is_empty() {
                return Err(ApiError {
                    field: Some("text".into()),
                    ..ApiError::invalid("the message is empty")
                });
            }
            Op::SendMessage { run, node, text }
        }
        NodeAction::Prune(b) => Op::Prune {
            run,
            node,
            subtree: b.subtree,
            reason: b.reason,
        },
        NodeAction::Approve(comment) => Op::Approve {
            run,
            node: Some(node),
            artifact: None,
            comment,
        },
        NodeAction::Revise(feedback) => Op::RequestChanges {
            run,
            node: Some(node),
            artifact: None,
            feedback,
        },
    };
    call(state, op, None).await
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct NodeMessageBody {
    text: String,
}

/// `POST /api/workflows/{id}/nodes/{node}/message`: a message to a node's agent.
pub(crate) async fn node_message(
    State(state): State<AppState>,
    Path((id, node)): Path<(String, String)>,
    Body(b): Body<NodeMessageBody>,
) -> Result<Json<Value>, ApiError> {
    act(&state, id, node, NodeAction::Message(b.text)).await
}

#[derive(Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct PruneBody {
    #[serde(default)]
    subtree: bool,
    #[serde(default)]
    reason: Option<String>,
}

/// `POST /api/workflows/{id}/nodes/{node}/prune`.
pub(crate) async fn node_prune(
    State(state): State<AppState>,
    Path((id, node)): Path<(String, String)>,
    Body(b): Body<PruneBody>,
) -> Result<Json<Value>, ApiError> {
    act(&state, id, node, NodeAction::Prune(b)).await
}

#[derive(Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct CommentBody {
    #[serde(default)]
    comment: Option<String>,
}

/// `POST /api/workflows/{id}/nodes/{node}/approve`: approves a node's human review.
pub(crate) async fn node_approve(
    State(state): State<AppState>,
    Path((id, node)): Path<(String, String)>,
    Body(b): Body<CommentBody>,
) -> Result<Json<Value>, ApiError> {
    act(&state, id, node, NodeAction::Approve(b.comment)).await
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct FeedbackBody {
    feedback: String,
}

/// `POST /api/workflows/{id}/nodes/{node}/revise`: sends a node back with feedback.
pub(crate) async fn node_revise(
    State(state): State<AppState>,
    Path((id, node)): Path<(String, String)>,
    Body(b): Body<FeedbackBody>,
) -> Result<Json<Value>, ApiError> {
    act(&state, id, node, NodeAction::Revise(b.feedback)).await
}

/// The `/ws/…` aliases carry the run in the body or the query.
#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RunQuery {
    run: Option<String>,
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct AliasBody {
    #[serde(default)]
    run: Option<String>,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    subtree: bool,
    #[serde(default)]
    reason: Option<String>,
    #[serde(default)]
    comment: Option<String>,
    #[serde(default)]
    feedback: Option<String>,
}

fn alias_run(q: RunQuery, b: &AliasBody) -> Result<String, ApiError> {
    b.run.clone().or(q.run).ok_or_else(|| ApiError {
        field: Some("run".into()),
        ..ApiError::invalid("name the run: `run` in the body or `?run=` in the URL")
    })
}

/// `POST /ws/agent/{node}/message`: `{run, text}` (or `message`).
pub(crate) async fn alias_message(
    State(state): State<AppState>,
    Path(node): Path<String>,
    Query(q): Query<RunQuery>,
    Body(b): Body<AliasBody>,
) -> Result<Json<Value>, ApiError> {
    let run = alias_run(q, &b)?;
    let text = b.text.or(b.message).ok_or_else(|| ApiError {
        field: Some("text".into()),
        ..ApiError::invalid("missing field `text`")
    })?;
    act(&state, run, node, NodeAction::Message(text)).await
}

/// `POST /ws/graph/prune/{node}`: `{run, subtree?, reason?}`.
pub(crate) async fn alias_prune(
    State(state): State<AppState>,
    Path(node): Path<String>,
    Query(q): Query<RunQuery>,
    Body(b): Body<AliasBody>,
) -> Result<Json<Value>, ApiError> {
    let run = alias_run(q, &b)?;
    let body = PruneBody {
        subtree: b.subtree,
        reason: b.reason,
    };
    act(&state, run, node, NodeAction::Prune(body)).await
}

/// `POST /ws/review/{node}/approve`: `{run, comment?}`.
pub(crate) async fn alias_approve(
    State(state): State<AppState>,
    Path(node): Path<String>,
    Query(q): Query<RunQuery>,
    Body(b): Body<AliasBody>,
) -> Result<Json<Value>, ApiError> {
    let run = alias_run(q, &b)?;
    act(&state, run, node, NodeAction::Approve(b.comment)).await
}

/// `POST /ws/review/{node}/revise`: `{run, feedback}`.
pub(crate) async fn alias_revise(
    State(state): State<AppState>,
    Path(node): Path<String>,
    Query(q): Query<RunQuery>,
    Body(b): Body<AliasBody>,
) -> Result<Json<Value>, ApiError> {
    let run = alias_run(q, &b)?;
    let feedback = b.feedback.or(b.message).ok_or_else(|| ApiError {
        field: Some("feedback".into()),
        ..ApiError::invalid("missing field `feedback`")
    })?;
    act(&state, run, node, NodeAction::Revise(feedback)).await
}
