//! The `_trellis/...` extension methods: graph control from the editor — list a run's graph,
//! message a node, prune a node — and review of a run's change set (show, select hunks,
//! apply, reject, undo) and requests for changes, each one op of the runtime service (or a
//! read of the store). Advertised under `agentCapabilities._meta["trellis.dev/extensions"]`.

use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::{Client, Error, JsonRpcMessage, JsonRpcRequest, UntypedMessage};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use trellis_core::service::Service;
use trellis_protocol::acp::{
    GRAPH_METHOD, GraphParams, MESSAGE_METHOD, MessageNodeParams, PRUNE_METHOD, PruneNodeParams,
    REQUEST_CHANGES_METHOD, REVIEW_METHOD, RequestChangesParams, ReviewParams,
};
use trellis_protocol::{Op, RunId};

use crate::{AcpAgent, internal, invalid_params};

/// The `_meta` key that lists the extension methods in `initialize`.
pub const META_KEY: &str = "trellis.dev/extensions";

/// The extension methods, as advertised.
pub const METHODS: [&str; 5] = [
    GRAPH_METHOD,
    MESSAGE_METHOD,
    PRUNE_METHOD,
    REVIEW_METHOD,
    REQUEST_CHANGES_METHOD,
];

/// A `_trellis/...` request.
#[derive(Clone, Debug)]
pub enum TrellisRequest {
    /// `_trellis/graph`.
    Graph(GraphParams),
    /// `_trellis/message`.
    Message(MessageNodeParams),
    /// `_trellis/prune`.
    Prune(PruneNodeParams),
    /// `_trellis/review`.
    Review(ReviewParams),
    /// `_trellis/requestChanges`.
    RequestChanges(RequestChangesParams),
}

fn parse<T: DeserializeOwned>(params: &Value) -> Result<T, Error> {
    serde_json::from_value(params.clone()).map_err(|e| invalid_params(e.to_string()))
}

impl JsonRpcMessage for TrellisRequest {
    fn matches_method(method: &str) -> bool {
        METHODS.contains(&method)
    }

    fn method(&self) -> &str {
        match self {
            Self::Graph(_) => GRAPH_METHOD,
            Self::Message(_) => MESSAGE_METHOD,
            Self::Prune(_) => PRUNE_METHOD,
            Self::Review(_) => REVIEW_METHOD,
            Self::RequestChanges(_) => REQUEST_CHANGES_METHOD,
        }
    }

    fn to_untyped_message(&self) -> Result<UntypedMessage, Error> {
        match self {
            Self::Graph(p) => UntypedMessage::new(GRAPH_METHOD, p),
            Self::Message(p) => UntypedMessage::new(MESSAGE_METHOD, p),
            Self::Prune(p) => UntypedMessage::new(PRUNE_METHOD, p),
            Self::Review(p) => UntypedMessage::new(REVIEW_METHOD, p),
            Self::RequestChanges(p) => UntypedMessage::new(REQUEST_CHANGES_METHOD, p),
        }
    }

    fn parse_message(method: &str, params: &Value) -> Result<Self, Error> {
        match method {
            GRAPH_METHOD => parse(params).map(Self::Graph),
            MESSAGE_METHOD => parse(params).map(Self::Message),
            PRUNE_METHOD => parse(params).map(Self::Prune),
            REVIEW_METHOD => parse(params).map(Self::Review),
            REQUEST_CHANGES_METHOD => parse(params).map(Self::RequestChanges),
            _ => Err(Error::method_not_found()),
        }
    }
}

impl JsonRpcRequest for TrellisRequest {
    type Response = Value;
}

/// An op's error as a JSON-RPC error: the caller's mistakes are invalid params.
pub(crate) fn op_error(e: trellis_core::service::OpError) -> Error {
    use trellis_protocol::OpErrorKind as K;
    match e.kind {
        K::Invalid | K::NotFound | K::Conflict => invalid_params(e.message),
        _ => internal(e.message),
    }
}

impl AcpAgent {
    /// The run a request means: `run` if it is one of the session's, else the latest.
    pub(crate) async fn session_run(
        &self,
        service: &Arc<Service>,
        session: &str,
        run: Option<&str>,
    ) -> Result<RunId, Error> {
        let (svc, key) = (service.clone(), session.to_owned());
        let (found, turns) = tokio::task::spawn_blocking(move || {
            Ok::<_, trellis_core::service::OpError>((
                svc.client_session(&key)?,
                svc.client_turns(&key)?,
            ))
        })
        .await
        .map_err(internal)?
        .map_err(internal)?;
        // A live session is stored when first used: until then it has no run.
        if found.is_none() && !crate::lock(&self.sessions).contains_key(session) {
            return Err(agent_client_protocol::v1::schema::Error::session_not_found(
                session.to_owned(),
            )
            .into());
        }
        let pick = match run {
            Some(r) => turns
                .iter()
                .rev()
                .find(|t| t.run.as_str() == r || t.run.as_str().starts_with(r)),
            None => turns.last(),
        };
        pick.map(|t| t.run.clone()).ok_or_else(|| {
            invalid_params(match run {
                Some(r) => format!("run `{r}` is not a run of session {session}"),
                None => format!("session {session} has no run yet"),
            })
        })
    }

    /// Answers a `_trellis/...` request; `_trellis/requestChanges` follows the revision
    /// through `conn` like a prompt turn.
    pub(crate) async fn extension(
        self: &Arc<Self>,
        req: TrellisRequest,
        conn: ConnectionTo<Client>,
    ) -> Result<Value, Error> {
        if let TrellisRequest::RequestChanges(p) = req {
            return self.request_changes(p, conn).await;
        }
        let service = self.open_service().await?;
        match req {
            TrellisRequest::Graph(p) => {
                let run = self
                    .session_run(&service, &p.session_id, p.run.as_deref())
                    .await?;
                let svc = service.clone();
                let r = run.clone();
                let o = tokio::task::spawn_blocking(move || svc.run_state(&r))
                    .await
                    .map_err(internal)?
                    .map_err(internal)?;
                let nodes: Vec<Value> = o
                    .nodes
                    .iter()
                    .map(|n| {
                        json!({
                            "id": n.id,
                            "state": n.state,
                            "attempt": n.attempt,
                            "parent": n.parent,
                            "error": n.error,
                            "waiting": n.interrupt.as_ref().map(|i| &i.prompt),
                        })
                    })
                    .collect();
                Ok(json!({ "run": run, "status": o.status, "nodes": nodes }))
            }
            TrellisRequest::Message(p) => {
                let run = self
                    .session_run(&service, &p.session_id, p.run.as_deref())
                    .await?;
                service
                    .call(Op::SendMessage {
                        run: run.to_string(),
                        node: p.node,
                        text: p.text,
                    })
                    .await
                    .map_err(op_error)
            }
            TrellisRequest::Prune(p) => {
                let run = self
                    .session_run(&service, &p.session_id, p.run.as_deref())
                    .await?;
                service
                    .call(Op::Prune {
                        run: run.to_string(),
                        node: p.node,
                        subtree: p.subtree,
                        reason: p.reason.or_else(|| Some("pruned from the editor".into())),
                    })
                    .await
                    .map_err(op_error)
            }
            TrellisRequest::Review(p) => {
                let run = self
                    .session_run(&service, &p.session_id, p.run.as_deref())
                    .await?;
                service
                    .call(Op::Review {
                        run: run.to_string(),
                        action: p.action,
                    })
                    .await
                    .map_err(op_error)
            }
            TrellisRequest::RequestChanges(_) => Err(Error::method_not_found()),
        }
    }
}
