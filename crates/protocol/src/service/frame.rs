//! The WebSocket frame that carries one [`ServiceEvent`] to a `trellis serve` client.

use std::borrow::Cow;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::{Deserialize, Serialize};

use super::{ServiceEvent, ServiceEventBody, StreamId, TOPICS};
use crate::SubmissionId;

/// One event as `trellis serve` pushes it over a WebSocket:
///
/// ```json
/// {"type": "event", "name": "turn:message_delta", "workspace": "/src/app",
///  "stream": "session:ses-0191…", "seq": 12, "ts": 1763759045123,
///  "submission": "sub-0191…", "event": {"type": "messageDelta", "turn": 2, "text": "Hel"}}
/// ```
///
/// `type` is always `"event"` (written by serde from the struct's tag, so it is not a field);
/// `name` is the event's topic ([`ServiceEvent::topic`], one of [`TOPICS`]), so a client can
/// dispatch on one string; the other fields are those of the [`ServiceEvent`]. The schema is
/// [`crate::schema::event_schema`], published as `docs/events.schema.json`.
///
/// [`EventFrame::new`] borrows the workspace and the payload, so framing an event for many
/// subscribers copies nothing; a deserialised frame owns its data.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(tag = "type", rename = "event", rename_all = "camelCase")]
#[schemars(
    rename = "EventFrame",
    description = "One event pushed by `trellis serve` over a WebSocket. `name` is the event's \
        topic (one per stream and payload, see docs/events.md); `stream`, `seq`, `ts`, \
        `submission` and `event` are those of the event as the service recorded it. `seq` \
        numbers the events of one stream from 1.",
    transform = add_frame_type
)]
pub struct EventFrame<'a> {
    /// The event's topic name (`graph:node_status_changed`, `turn:message_delta`, …).
    #[schemars(schema_with = "topic_schema")]
    pub name: Cow<'static, str>,
    /// The workspace the event belongs to (its repository root).
    pub workspace: Cow<'a, str>,
    /// The stream the event is on.
    pub stream: StreamId,
    /// Position in the stream, from 1.
    pub seq: u64,
    /// Milliseconds since the Unix epoch.
    pub ts: i64,
    /// The submission that caused it, when one did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission: Option<SubmissionId>,
    /// What happened: a graph event on a `run:` stream, a session event on a `session:`
    /// stream, a workspace event on `workspace`.
    pub event: Cow<'a, ServiceEventBody>,
}

impl<'a> EventFrame<'a> {
    /// The frame of `ev`, recorded by the service of `workspace`.
    pub fn new(workspace: &'a str, ev: &'a ServiceEvent) -> Self {
        Self {
            name: Cow::Borrowed(ev.topic()),
            workspace: Cow::Borrowed(workspace),
            stream: ev.stream.clone(),
            seq: ev.seq,
            ts: ev.ts,
            submission: ev.submission.clone(),
            event: Cow::Borrowed(&ev.event),
        }
    }

    /// A copy that owns its data (to keep or send to another task).
    pub fn into_owned(self) -> EventFrame<'static> {
        EventFrame {
            name: self.name,
            workspace: Cow::Owned(self.workspace.into_owned()),
            stream: self.stream,
            seq: self.seq,
            ts: self.ts,
            submission: self.submission,
            event: Cow::Owned(self.event.into_owned()),
        }
    }

    /// The [`ServiceEvent`] the frame carries (without the workspace and topic).
    pub fn to_service_event(&self) -> ServiceEvent {
        ServiceEvent {
            stream: self.stream.clone(),
            seq: self.seq,
            ts: self.ts,
            submission: self.submission.clone(),
            event: self.event.clone().into_owned(),
        }
    }
}

/// `name`: one of [`TOPICS`].
fn topic_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "description": "The event's topic name: fixed by its stream and payload (see docs/events.md).",
        "type": "string",
        "enum": TOPICS,
    })
}

/// The `type` tag serde writes for the struct (`#[serde(tag)]` on a struct is not in the
/// derived schema): a required `"type": "event"`.
fn add_frame_type(schema: &mut Schema) {
    if let Some(props) = schema
        .ensure_object()
        .get_mut("properties")
        .and_then(serde_json::Value::as_object_mut)
    {
        props.insert(
            "type".to_owned(),
            serde_json::json!({ "type": "string", "const": "event" }),
        );
    }
    let obj = schema.ensure_object();
    let required = obj
        .entry("required")
        .or_insert_with(|| serde_json::Value::Array(Vec::new()));
    if let Some(list) = required.as_array_mut() {
        list.insert(0, serde_json::Value::from("type"));
    }
}
