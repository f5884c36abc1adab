//! A run's change set: show with hunks, accept/reject files and hunks, apply, reject, undo.

use axum::Json;
use axum::extract::{Path, State};
use serde::Deserialize;
use serde_json::Value;
use trellis_protocol::{FileHunks, Op, ReviewAction};

use super::call;
use crate::AppState;
use crate::error::{ApiError, Body};

async fn review(
    state: &AppState,
    run: String,
    action: ReviewAction,
) -> Result<Json<Value>, ApiError> {
    call(state, Op::Review { run, action }, None).await
}

/// `GET /api/workflows/{id}/changes`: files, hunks and the current selection.
pub(crate) async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    review(&state, id, ReviewAction::Show).await
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SelectBody {
    file: String,
    #[serde(default)]
    hunks: Option<Vec<usize>>,
    accept: bool,
}

/// `POST /api/workflows/{id}/changes/select`: accept or reject a file or some of its hunks.
pub(crate) async fn select(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<SelectBody>,
) -> Result<Json<Value>, ApiError> {
    let action = ReviewAction::Select {
        file: b.file,
        hunks: b.hunks,
        accept: b.accept,
    };
    review(&state, id, action).await
}

#[derive(Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ApplyBody {
    #[serde(default)]
    accept: Option<Vec<FileHunks>>,
}

/// `POST /api/workflows/{id}/changes/apply`: applies the selection (or `accept`).
pub(crate) async fn apply(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<ApplyBody>,
) -> Result<Json<Value>, ApiError> {
    review(&state, id, ReviewAction::Apply { accept: b.accept }).await
}

#[derive(Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct Empty {}

#[derive(Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct RejectBody {
    #[serde(default)]
    comment: Option<String>,
}

/// `POST /api/workflows/{id}/changes/reject`: discards the whole change set.
pub(crate) async fn reject(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<RejectBody>,
) -> Result<Json<Value>, ApiError> {
    review(&state, id, ReviewAction::Reject { comment: b.comment }).await
}

/// `POST /api/workflows/{id}/changes/undo`: reverses the last apply.
pub(crate) async fn undo(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(Empty {}): Body<Empty>,
) -> Result<Json<Value>, ApiError> {
    review(&state, id, ReviewAction::Undo).await
}
