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
    let catalog = &w.service.runtime().catalog;
    let entries = serde_json::to_value(catalog.entries())
        .map_err(|e| ApiError::internal("encoding the catalog", e))?;
    let errors: Vec<String> = catalog.errors().iter().map(|e| e.to_string()).collect();
    Ok(Json(
        json!({ "workspace": w.id, "workflows": entries, "errors": errors }),
    ))
}
