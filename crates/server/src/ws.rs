//! `GET /api/events`: the WebSocket. Pushes event frames of the streams a client
//! subscribes to (from `since`, exactly once, in order), and takes ops.
//!
//! Client frames: `{"type":"subscribe","stream":"run:…","since":0}`,
//! `{"type":"unsubscribe","stream":"…"}`, `{"type":"op","id":1,"op":{"op":"prune",…}}`,
//! `{"type":"ping"}`. Server frames: `event`, `subscribed`, `unsubscribed`, `result`,
//! `error`, `pong` (see `docs/api.md`).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::{CloseFrame, Message, Utf8Bytes, WebSocket, WebSocketUpgrade};
use axum::extract::{Query, State};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use serde::Deserialize;
use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};
use tokio_util::sync::CancellationToken;
use trellis_core::service::{Delivered, Service};
use trellis_protocol::{EventFrame, Op, ServiceEvent, StreamId};

use crate::AppState;
use crate::error::{ApiError, parse};

/// Streams one connection may follow at once.
const MAX_SUBSCRIPTIONS: usize = 64;
/// Ops one connection may have in flight.
const MAX_OPS_IN_FLIGHT: usize = 16;
/// The server pings this often; a client silent for [`IDLE`] is dropped.
const PING_EVERY: Duration = Duration::from_secs(30);
const IDLE: Duration = Duration::from_secs(120);
/// Close code for a client that fell too far behind (RFC 6455 1013: try again later).
const CLOSE_TOO_SLOW: u16 = 1013;
/// Close code on server shutdown (1001: going away).
const CLOSE_GOING_AWAY: u16 = 1001;

/// The frame of `e` as JSON (the REST replay routes return these).
pub(crate) fn frame(workspace: &str, e: &ServiceEvent) -> Value {
    serde_json::to_value(EventFrame::new(workspace, e)).unwrap_or(Value::Null)
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct WsQuery {
    stream: Option<String>,
    since: Option<u64>,
    workspace: Option<String>,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "camelCase", deny_unknown_fields)]
enum ClientFrame {
    Subscribe {
        stream: String,
        #[serde(default)]
        since: u64,
        #[serde(default)]
        workspace: Option<String>,
    },
    Unsubscribe {
        stream: String,
    },
    Op {
        #[serde(default)]
        id: Value,
        #[serde(default)]
        workspace: Option<String>,
        op: Box<Op>,
    },
    Ping {
        #[serde(default)]
        id: Value,
    },
}

/// A stream resolved to its workspace.
struct Target {
    workspace: String,
    service: Arc<Service>,
    stream: StreamId,
}

fn resolve(state: &AppState, stream: &str, workspace: Option<&str>) -> Result<Target, ApiError> {
    let stream: StreamId = stream.parse().map_err(|e| ApiError {
        field: Some("stream".into()),
        ..ApiError::invalid(format!("{e}"))
    })?;
    let (w, stream) = state.stream(&stream, workspace)?;
    Ok(Target {
        workspace: w.id.clone(),
        service: w.service.clone(),
        stream,
    })
}

/// `GET /api/events?stream=&since=&workspace=`: upgrades to the event socket, subscribed to
/// `stream` when given (an unknown stream is refused before the upgrade).
pub(crate) async fn upgrade(
    State(state): State<AppState>,
    Query(q): Query<WsQuery>,
    ws: WebSocketUpgrade,
) -> Result<Response, ApiError> {
    let initial = match &q.stream {
        Some(s) => Some(resolve(&state, s, q.workspace.as_deref())?),
        None => None,
    };
    let limit = state.0.settings.limits.ws_message_bytes;
    let since = q.since.unwrap_or(0);
    Ok(ws
        .max_message_size(limit)
        .max_frame_size(limit)
        .on_upgrade(move |socket| connection(state, socket, initial, since)))
}

/// One connection's shared parts.
#[derive(Clone)]
struct Conn {
    state: AppState,
    out: Outbox,
}

impl std::ops::Deref for Conn {
    type Target = Outbox;
    fn deref(&self) -> &Outbox {
        &self.out
    }
}

/// The bounded queue of frames to one client.
#[derive(Clone)]
struct Outbox {
    tx: mpsc::Sender<Message>,
    /// Cancelled when the connection ends (client gone, too slow, server stopping).
    end: CancellationToken,
    /// Set with the reason when the server closes the connection.
    close: Arc<std::sync::Mutex<Option<(u16, &'static str)>>>,
}

impl Outbox {
    fn new(tx: mpsc::Sender<Message>, end: CancellationToken) -> Self {
        Self {
            tx,
            end,
            close: Arc::default(),
        }
    }

    /// Queues a frame; a full queue means the client is too slow: it is dropped.
    fn send(&self, text: String) -> bool {
        match self.tx.try_send(Message::Text(Utf8Bytes::from(text))) {
            Ok(()) => true,
            Err(_) => {
                self.close_with(CLOSE_TOO_SLOW, "too slow: reconnect with since");
                false
            }
        }
    }

    fn send_json(&self, v: &Value) -> bool {
        self.send(v.to_string())
    }

    fn close_with(&self, code: u16, reason: &'static str) {
        let mut c = self.close.lock().unwrap_or_else(|p| p.into_inner());
        c.get_or_insert((code, reason));
        self.end.cancel();
    }
}

fn error_frame(id: &Value, e: &ApiError) -> Value {
    let mut v = json!({
        "type": "error",
        "status": e.status.as_u16(),
        "kind": e.kind,
        "error": e.message,
    });
    if !id.is_null() {
        v["id"] = id.clone();
    }
    if let Some(f) = &e.field {
        v["field"] = f.clone().into();
    }
    v
}

async fn connection(state: AppState, socket: WebSocket, initial: Option<Target>, since: u64) {
    let limits = state.0.settings.limits;
    let (mut sink, mut incoming) = socket.split();
    let (tx, mut rx) = mpsc::channel::<Message>(limits.ws_queue.max(1));
    let conn = Conn {
        out: Outbox::new(tx, state.0.shutdown.child_token()),
        state,
    };
    let writer = {
        let conn = conn.clone();
        tokio::spawn(async move {
            let mut ping = tokio::time::interval(PING_EVERY);
            ping.tick().await;
            loop {
                let msg = tokio::select! {
                    biased;
                    m = rx.recv() => match m {
                        Some(m) => m,
                        None => break,
                    },
                    () = conn.end.cancelled() => break,
                    _ = ping.tick() => Message::Ping(Default::default()),
                };
                // Everything queued goes out with one flush: a busy connection (many runs'
                // events) writes a batch of frames per system call, not one each.
                let mut sent = sink.feed(msg).await;
                while sent.is_ok()
                    && let Ok(more) = rx.try_recv()
                {
                    sent = sink.feed(more).await;
                }
                if sent.is_err() || sink.flush().await.is_err() {
                    conn.end.cancel();
                    return;
                }
            }
            let (code, reason) = conn
                .close
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .unwrap_or((CLOSE_GOING_AWAY, "server stopping"));
            let close = Message::Close(Some(CloseFrame {
                code,
                reason: Utf8Bytes::from_static(reason),
            }));
            let _ = tokio::time::timeout(Duration::from_secs(1), sink.send(close)).await;
        })
    };
    let mut subs: HashMap<String, CancellationToken> = HashMap::new();
    if let Some(t) = initial {
        subscribe(&conn, &mut subs, t, since);
    }
    let ops = Arc::new(Semaphore::new(MAX_OPS_IN_FLIGHT));
    loop {
        let next = tokio::select! {
            () = conn.end.cancelled() => break,
            n = tokio::time::timeout(IDLE, incoming.next()) => n,
        };
        match next {
            Err(_) => {
                conn.close_with(CLOSE_GOING_AWAY, "idle");
                break;
            }
            Ok(Some(Ok(Message::Text(text)))) => {
                on_text(&conn, &mut subs, &ops, text.as_bytes());
            }
            Ok(Some(Ok(Message::Binary(_)))) => {
                let e = ApiError::invalid("send JSON text frames, not binary ones");
                conn.send_json(&error_frame(&Value::Null, &e));
            }
            Ok(Some(Ok(Message::Ping(_) | Message::Pong(_)))) => {}
            Ok(Some(Ok(Message::Close(_)) | Err(_)) | None) => break,
        }
    }
    conn.end.cancel();
    for (_, s) in subs.drain() {
        s.cancel();
    }
    let _ = writer.await;
}

fn on_text(
    conn: &Conn,
    subs: &mut HashMap<String, CancellationToken>,
    ops: &Arc<Semaphore>,
    bytes: &[u8],
) {
    let frame: ClientFrame = match parse(bytes) {
        Ok(f) => f,
        Err(e) => {
            conn.send_json(&error_frame(&Value::Null, &e));
            return;
        }
    };
    match frame {
        ClientFrame::Ping { id } => {
            conn.send_json(&json!({ "type": "pong", "id": id }));
        }
        ClientFrame::Subscribe {
            stream,
            since,
            workspace,
        } => {
            if subs.len() >= MAX_SUBSCRIPTIONS && !subs.contains_key(&stream) {
                let e = ApiError::invalid(format!(
                    "at most {MAX_SUBSCRIPTIONS} streams per connection; unsubscribe first"
                ));
                conn.send_json(&error_frame(&Value::Null, &e));
                return;
            }
            match resolve(&conn.state, &stream, workspace.as_deref()) {
                Ok(t) => subscribe(conn, subs, t, since),
                Err(e) => {
                    conn.send_json(&error_frame(&Value::Null, &e));
                }
            }
        }
        ClientFrame::Unsubscribe { stream } => {
            let key = stream
                .parse::<StreamId>()
                .map(|s| s.to_string())
                .unwrap_or(stream);
            let found = subs.remove(&key).map(|t| t.cancel()).is_some();
            conn.send_json(&json!({ "type": "unsubscribed", "stream": key, "found": found }));
        }
        ClientFrame::Op { id, workspace, op } => {
            let Ok(permit) = ops.clone().try_acquire_owned() else {
                let e = ApiError::new(
                    axum::http::StatusCode::TOO_MANY_REQUESTS,
                    "busy",
                    format!("at most {MAX_OPS_IN_FLIGHT} ops in flight per connection"),
                );
                conn.send_json(&error_frame(&id, &e));
                return;
            };
            let mut op = *op;
            // Clients act on the served workspaces only: never on a path they name.
            if let Op::StartRun { repo, .. } = &mut op {
                *repo = None;
            }
            let conn = conn.clone();
            tokio::spawn(async move {
                let _permit = permit;
                let reply = match conn.state.service_for(&op, workspace.as_deref()) {
                    Err(e) => error_frame(&id, &e),
                    Ok((w, service)) => {
                        let ws = w.id.clone();
                        match service.call(op).await {
                            Ok(result) => json!({
                                "type": "result", "id": id, "ok": true,
                                "workspace": ws, "result": result,
                            }),
                            Err(e) => error_frame(&id, &ApiError::from(e)),
                        }
                    }
                };
                conn.send_json(&reply);
            });
        }
    }
}

/// Follows `t.stream` from `since` on its own task.
fn subscribe(conn: &Conn, subs: &mut HashMap<String, CancellationToken>, t: Target, since: u64) {
    let key = t.stream.to_string();
    if let Some(old) = subs.remove(&key) {
        old.cancel();
    }
    let stop = conn.end.child_token();
    subs.insert(key.clone(), stop.clone());
    // Registered before the acknowledgement: every event committed after the client reads
    // `subscribed` reaches it live, none waits for the task below to start.
    let mut sub = t.service.subscribe(t.stream.clone(), since);
    if !conn.send_json(&json!({ "type": "subscribed", "stream": key, "since": since })) {
        return;
    }
    let conn = conn.clone();
    tokio::spawn(async move {
        loop {
            let next = tokio::select! {
                () = stop.cancelled() => return,
                n = sub.next_delivered() => n,
            };
            match next {
                Ok(Some(e)) => {
                    let encode = |ev: &ServiceEvent| {
                        serde_json::to_string(&EventFrame::new(&t.workspace, ev))
                            .map_err(|err| tracing::error!("encoding an event frame: {err}"))
                            .ok()
                    };
                    // A live event is encoded once for all its subscribers.
                    let text = match &e {
                        Delivered::Live(live) => {
                            live.frame(&t.workspace, encode).map(|f| f.to_string())
                        }
                        Delivered::Stored(ev) => encode(ev),
                    };
                    let Some(text) = text else { continue };
                    if !conn.send(text) {
                        return;
                    }
                }
                // The service stopped: the server is shutting down.
                Ok(None) => return,
                Err(e) => {
                    let e = ApiError::internal("reading the stream", e);
                    conn.send_json(&error_frame(&Value::Null, &e));
                    return;
                }
            }
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_that_falls_behind_is_dropped_not_waited_for() {
        let (tx, mut rx) = mpsc::channel(2);
        let out = Outbox::new(tx, CancellationToken::new());
        assert!(out.send("1".into()));
        assert!(out.send("2".into()));
        // The queue is full: the frame is not queued, the connection ends, and the reason
        // is what the client will read in the close frame.
        assert!(!out.send("3".into()));
        assert!(out.end.is_cancelled());
        assert_eq!(
            *out.close.lock().unwrap(),
            Some((CLOSE_TOO_SLOW, "too slow: reconnect with since"))
        );
        assert!(rx.try_recv().is_ok() && rx.try_recv().is_ok() && rx.try_recv().is_err());
        // A later reason does not replace the first.
        out.close_with(CLOSE_GOING_AWAY, "idle");
        assert_eq!(out.close.lock().unwrap().unwrap().0, CLOSE_TOO_SLOW);
    }
}
