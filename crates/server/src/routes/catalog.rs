//! Workspaces and the workflows catalog.

use axum::Json;
use axum::extract::{Query, State};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::AppState;
use crate::error::ApiError;

/// `GET /api/workspaces`.
pub(crate) async fn workspaces(State(state): State<AppState>) -> Json<Value> {
    Json(Value::Array(
        state
            .workspaces()
            .iter()
            .map(|w| json!({ "id": w.id, "root": w.root }))
            .collect(),
    ))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WorkspaceQuery {
    workspace: Option<String>,
}

/// `GET /api/catalog/workflows?workspace=`: the workflows a run can use, and the files
/// that failed to load (with the reason).
pub(crate) async fn workflows(
    State(state): State<AppState>,
    Query(q): Query<WorkspaceQuery>,
) -> Result<Json<Value>, ApiError> {
    let w = state.workspace(q.workspace.as_deref())?;
    let catalog = w
        .service
        .workflow_catalog()
        .map_err(|e| ApiError::internal("encoding the catalog", e))?;
    Ok(Json(
        json!({ "workspace": w.id, "workflows": catalog.workflows, "errors": catalog.errors }),
    ))
}

/// `GET /api/tools/graph?workspace=`: the tool knowledge graph the agents' calls taught the
/// workspace, with the speculation threshold and outcomes (`trellis tools graph --format
/// json`).
pub(crate) async fn tool_graph(
    State(state): State<AppState>,
    Query(q): Query<WorkspaceQuery>,
) -> Result<Json<Value>, ApiError> {
    let w = state.workspace(q.workspace.as_deref())?;
    let (id, service) = (w.id.clone(), w.service.clone());
    crate::lookup::blocking(move || {
        let graph = service
            .tool_graph()
            .map_err(|e| ApiError::internal("reading the tool knowledge graph", e))?;
        let mut graph = serde_json::to_value(graph)
            .map_err(|e| ApiError::internal("encoding the tool knowledge graph", e))?;
        if let Some(map) = graph.as_object_mut() {
            map.insert("workspace".into(), json!(id));
        }
        Ok(Json(graph))
    })
    .await
}
