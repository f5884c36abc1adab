//! The handlers of the connection's requests: which run off the dispatch loop (anything
//! that opens the service, reads the store or waits on the client), how a request's
//! cancellation reaches its work, and the notifications that follow a response.

use std::future::Future;
use std::sync::Arc;

use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::v1::{ConnectionTo, Responder};
use agent_client_protocol::{Client, Error};

use crate::{AcpAgent, TrellisRequest, commands, config};

/// Runs `answer` off the dispatch loop and responds with its result.
fn respond_later<T: agent_client_protocol::JsonRpcResponse + Send + 'static>(
    cx: &ConnectionTo<Client>,
    responder: Responder<T>,
    answer: impl Future<Output = Result<T, Error>> + Send + 'static,
) -> Result<(), Error> {
    cx.spawn(async move {
        let _ = responder.respond_with_result(answer.await);
        Ok(())
    })
}

impl AcpAgent {
    /// `session/new`, off the dispatch loop (opening the service, store and configuration,
    /// is slow); the session's slash commands follow the response.
    pub(crate) fn on_new_session(
        self: &Arc<Self>,
        req: acp::NewSessionRequest,
        responder: Responder<acp::NewSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let agent = self.clone();
        let conn = cx.clone();
        cx.spawn(async move {
            let created = agent.new_session(req).await;
            let id = created.as_ref().ok().map(|r| r.session_id.clone());
            let _ = responder.respond_with_result(created);
            if let Some(id) = id {
                let _ = conn.send_notification(acp::SessionNotification::new(id, commands()));
            }
            Ok(())
        })
    }

    /// `session/prompt`, off the dispatch loop: the turn waits on permission requests, whose
    /// answers would never arrive while it held the loop. `$/cancel_request` for the prompt
    /// cancels the turn like `session/cancel` (the turn then ends `cancelled`, not with an
    /// error).
    pub(crate) fn on_prompt(
        self: &Arc<Self>,
        req: acp::PromptRequest,
        responder: Responder<acp::PromptResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let agent = self.clone();
        let conn = cx.clone();
        let cancellation = responder.cancellation();
        cx.spawn(async move {
            let session = req.session_id.clone();
            let watch = async {
                cancellation.cancelled().await;
                agent.cancel(&session);
                std::future::pending::<()>().await;
            };
            let result = tokio::select! {
                biased;
                r = agent.prompt(req, conn) => r,
                () = watch => Err(Error::request_cancelled()),
            };
            let _ = responder.respond_with_result(result);
            Ok(())
        })
    }

    /// `session/load`, off the dispatch loop (replaying reads the store and sends
    /// notifications); `$/cancel_request` stops the replay (-32800).
    pub(crate) fn on_load_session(
        self: &Arc<Self>,
        req: acp::LoadSessionRequest,
        responder: Responder<acp::LoadSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let agent = self.clone();
        let conn = cx.clone();
        let cancellation = responder.cancellation();
        respond_later(&cx, responder, async move {
            cancellation
                .run_until_cancelled(agent.load_session(req, &conn))
                .await
        })
    }

    /// `session/resume`, off the dispatch loop.
    pub(crate) fn on_resume_session(
        self: &Arc<Self>,
        req: acp::ResumeSessionRequest,
        responder: Responder<acp::ResumeSessionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let agent = self.clone();
        respond_later(
            &cx,
            responder,
            async move { agent.resume_session(req).await },
        )
    }

    /// `session/list`, off the dispatch loop.
    pub(crate) fn on_list_sessions(
        self: &Arc<Self>,
        req: acp::ListSessionsRequest,
        responder: Responder<acp::ListSessionsResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let agent = self.clone();
        respond_later(
            &cx,
            responder,
            async move { agent.list_sessions(req).await },
        )
    }

    /// `session/set_config_option`, off the dispatch loop; a new autonomy is announced as
    /// the session's current mode.
    pub(crate) fn on_set_config_option(
        self: &Arc<Self>,
        req: acp::SetSessionConfigOptionRequest,
        responder: Responder<acp::SetSessionConfigOptionResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let agent = self.clone();
        let conn = cx.clone();
        cx.spawn(async move {
            let value = match &req.value {
                acp::SessionConfigOptionValue::ValueId { value } => value.0.to_string(),
                _ => String::new(),
            };
            let set = agent
                .set_config(&req.session_id, &req.config_id.0, &value)
                .await;
            let mode = set.as_ref().ok().map(|(c, _)| c.autonomy);
            let _ = responder.respond_with_result(
                set.map(|(_, options)| acp::SetSessionConfigOptionResponse::new(options)),
            );
            if let Some(mode) = mode.filter(|_| &*req.config_id.0 == config::AUTONOMY) {
                let _ = conn.send_notification(acp::SessionNotification::new(
                    req.session_id.clone(),
                    acp::SessionUpdate::CurrentModeUpdate(acp::CurrentModeUpdate::new(mode.id())),
                ));
            }
            Ok(())
        })
    }

    /// `session/set_mode` (the autonomy option), off the dispatch loop; the session's
    /// options as they now stand follow the response.
    pub(crate) fn on_set_mode(
        self: &Arc<Self>,
        req: acp::SetSessionModeRequest,
        responder: Responder<acp::SetSessionModeResponse>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let agent = self.clone();
        let conn = cx.clone();
        cx.spawn(async move {
            let set = agent
                .set_config(&req.session_id, config::AUTONOMY, &req.mode_id.0)
                .await;
            let options = set.as_ref().ok().map(|(_, o)| o.clone());
            let _ = responder.respond_with_result(set.map(|_| acp::SetSessionModeResponse::new()));
            if let Some(options) = options {
                let _ = conn.send_notification(acp::SessionNotification::new(
                    req.session_id.clone(),
                    acp::SessionUpdate::ConfigOptionUpdate(acp::ConfigOptionUpdate::new(options)),
                ));
            }
            Ok(())
        })
    }

    /// A `_trellis/...` extension request, off the dispatch loop (graph control may come
    /// while a turn runs; a request for changes waits on permission requests like a
    /// prompt). `$/cancel_request` for a request for changes cancels its revision like
    /// `session/cancel`.
    pub(crate) fn on_extension(
        self: &Arc<Self>,
        req: TrellisRequest,
        responder: Responder<serde_json::Value>,
        cx: ConnectionTo<Client>,
    ) -> Result<(), Error> {
        let agent = self.clone();
        let conn = cx.clone();
        let cancellation = responder.cancellation();
        let session = match &req {
            TrellisRequest::RequestChanges(p) => Some(acp::SessionId::new(p.session_id.clone())),
            _ => None,
        };
        respond_later(&cx, responder, async move {
            // Only a request for changes stops for `$/cancel_request`; the others answer.
            let watch = async {
                let Some(s) = &session else {
                    return std::future::pending::<()>().await;
                };
                cancellation.cancelled().await;
                agent.cancel(s);
                std::future::pending::<()>().await;
            };
            tokio::select! {
                biased;
                r = agent.extension(req, conn) => r,
                () = watch => Err(Error::request_cancelled()),
            }
        })
    }
}
