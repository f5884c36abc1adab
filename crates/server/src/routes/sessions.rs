//! Agent and channel sessions: `/api/sessions` and `/api/channels` (docs/api.md).

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;
use trellis_protocol::records::SessionFilter;
use trellis_protocol::{Op, SessionOwner};

use super::call;
use crate::AppState;
use crate::error::{ApiError, Body};
use crate::lookup::{blocking, check_id};

fn encode(v: &impl serde::Serialize) -> Result<Value, ApiError> {
    serde_json::to_value(v).map_err(|e| ApiError::internal("encoding a session", e))
}

/// `GET /api/workflows/{id}/sessions`: the run's agent sessions.
pub(crate) async fn of_run(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (w, run) = state.run(&id)?;
    let service = w.service.clone();
    blocking(move || {
        let filter = SessionFilter {
            run: Some(run),
            ..SessionFilter::default()
        };
        Ok(Json(encode(&service.sessions(&filter)?)?))
    })
    .await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ListQuery {
    workspace: Option<String>,
    run: Option<String>,
    channel: Option<String>,
    limit: Option<usize>,
}

/// `GET /api/sessions?workspace=&run=&channel=&limit=`.
pub(crate) async fn list(
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let (w, run) = match &q.run {
        Some(r) => {
            let (w, id) = state.run(r)?;
            (w, Some(id))
        }
        None => (state.workspace(q.workspace.as_deref())?, None),
    };
    let (ws, service) = (w.id.clone(), w.service.clone());
    let filter = SessionFilter {
        run,
        channel: q.channel,
        limit: Some(q.limit.unwrap_or(200).min(1000)),
    };
    blocking(move || {
        let mut rows = encode(&service.sessions(&filter)?)?;
        if let Value::Array(rows) = &mut rows {
            for r in rows {
                r["workspace"] = Value::String(ws.clone());
            }
        }
        Ok(Json(rows))
    })
    .await
}

/// `GET /api/channels?workspace=`: channel sessions, newest first.
pub(crate) async fn channels(
    State(state): State<AppState>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Value>, ApiError> {
    let w = state.workspace(q.workspace.as_deref())?;
    let (ws, service) = (w.id.clone(), w.service.clone());
    let limit = q.limit.unwrap_or(200).min(1000);
    blocking(move || {
        let rows: Vec<Value> = service
            .sessions(&SessionFilter {
                channel: q.channel,
                ..SessionFilter::default()
            })?
            .into_iter()
            .filter(|s| matches!(s.owner, SessionOwner::Channel { .. }))
            .take(limit)
            .map(|s| {
                let mut v = encode(&s)?;
                v["workspace"] = Value::String(ws.clone());
                Ok(v)
            })
            .collect::<Result<_, ApiError>>()?;
        Ok(Json(Value::Array(rows)))
    })
    .await
}

/// `GET /api/sessions/{id}`: the session and its turns (messages, thoughts, tool calls).
pub(crate) async fn show(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (w, sid) = state.session(&id)?;
    let (ws, service) = (w.id.clone(), w.service.clone());
    blocking(move || {
        let session = service.session(&sid)?;
        let turns = service.turns(&sid)?;
        let mut v = encode(&session)?;
        v["workspace"] = Value::String(ws);
        v["turns"] = encode(&turns)?;
        Ok(Json(v))
    })
    .await
}

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct SessionMessageBody {
    text: String,
}

/// `POST /api/sessions/{id}/message`: a message to a channel session (answered when the
/// turn ends; its deltas stream on `session:<id>`), or to an agent session's node.
pub(crate) async fn message(
    State(state): State<AppState>,
    Path(id): Path<String>,
    Body(b): Body<SessionMessageBody>,
) -> Result<Json<Value>, ApiError> {
    let (_, sid) = state.session(&id)?;
    if b.text.trim().is_empty() {
        return Err(ApiError {
            field: Some("text".into()),
            ..ApiError::invalid("the message is empty")
        });
    }
    let op = Op::SessionMessage {
        session: sid,
        text: b.text,
    };
    call(&state, op, None).await
}

/// `POST /api/sessions/{id}/cancel`: stops a channel session's turn in progress.
pub(crate) async fn cancel(
    State(state): State<AppState>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let (_, sid) = state.session(&id)?;
    call(&state, Op::CancelSession { session: sid }, None).await
}

#[derive(Default, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub(crate) struct ChannelBody {
    #[serde(default)]
    workspace: Option<String>,
    #[serde(default)]
    message: Option<String>,
}

/// `POST /api/channels/{id}/session`: starts a discussion session in channel
/// `{id}`; with `message`, answers it before returning.
pub(crate) async fn start_channel(
    State(state): State<AppState>,
    Path(channel): Path<String>,
    Body(b): Body<ChannelBody>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    check_id("channel", &channel)?;
    let op = Op::StartChannel {
        channel,
        message: b.message,
    };
    let out = call(&state, op, b.workspace.as_deref()).await?;
    Ok((StatusCode::CREATED, out))
}
