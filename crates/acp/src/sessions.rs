//! Sessions that outlive the process: `session/load` (the stored conversation replayed as
//! `session/update`s), `session/resume`, `session/list` and `session/close`.
//!
//! An ACP session is recorded in the workspace store (`client_sessions`, client `acp`) with
//! one row per prompt turn naming the run it started (`client_turns`). Loading replays, per
//! turn, the prompt, the run's plan as its recorded node transitions left it, its agents'
//! recorded session events (text, thinking, tool calls with diffs) and the end-of-turn
//! summary — all read from the store, so it works in a process that never ran them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use agent_client_protocol::Error;
use agent_client_protocol::v1::schema as acp;
use serde_json::Value;
use trellis_core::service::Service;
use trellis_protocol::records::{ClientSession, ClientTurn, SessionFilter};
use trellis_protocol::{ServiceEventBody, SessionOwner, StreamId, format_utc_ms};

use crate::map::{StagePlan, session_updates, usage_update};
use crate::turn::{outcome, summary_text};
use crate::{AcpAgent, Session, SessionConfig, commands, internal, lock};

/// The store's client name of ACP sessions.
pub(crate) const CLIENT: &str = "acp";

/// At most this many sessions per `session/list` page.
const PAGE: usize = 50;

/// The `session/update`s that replay one recorded turn.
pub(crate) fn replay_turn(
    service: &Service,
    root: &Path,
    turn: &ClientTurn,
) -> Result<Vec<acp::SessionUpdate>, Error> {
    let mut out = vec![acp::SessionUpdate::UserMessageChunk(
        acp::ContentChunk::new(turn.request.clone().into()),
    )];
    out.push(acp::SessionUpdate::AgentThoughtChunk(
        acp::ContentChunk::new(
            format!(
                "Workflow `{}` (run {}).\n",
                turn.workflow.as_deref().unwrap_or("?"),
                turn.run
            )
            .into(),
        ),
    ));
    let plan_json: Value = serde_json::from_str(&turn.plan).unwrap_or(Value::Null);
    let run_events = service
        .stream_events(&StreamId::Run(turn.run.clone()), 0, None)
        .map_err(internal)?;
    let plan = StagePlan::replayed(&plan_json, &run_events);
    if !plan.is_empty() {
        out.push(acp::SessionUpdate::Plan(plan.to_acp()));
    }
    let mut sessions = service
        .sessions(&SessionFilter {
            run: Some(turn.run.clone()),
            ..SessionFilter::default()
        })
        .map_err(internal)?;
    sessions.sort_by(|a, b| (a.created_ms, a.id.as_str()).cmp(&(b.created_ms, b.id.as_str())));
    for s in sessions {
        let SessionOwner::Agent { node, role, .. } = &s.owner else {
            continue;
        };
        let window = service.context_window(Some(role));
        let events = service
            .stream_events(&StreamId::Session(s.id.clone()), 0, None)
            .map_err(internal)?;
        for e in events {
            if let ServiceEventBody::Session(ev) = &e.event {
                out.extend(session_updates(node.as_str(), root, ev));
                out.extend(window.and_then(|w| usage_update(ev, w)));
            }
        }
    }
    if let Ok(o) = outcome(service, &turn.run) {
        let text = summary_text(&o);
        if !text.is_empty() {
            out.push(acp::SessionUpdate::AgentMessageChunk(
                acp::ContentChunk::new(text.into()),
            ));
        }
    }
    Ok(out)
}

/// A page of sessions for `session/list`: those under `cwd` (all when `None`), from the
/// `cursor`'th (a decimal offset).
pub(crate) fn list_page(
    all: Vec<ClientSession>,
    cwd: Option<&Path>,
    cursor: Option<&str>,
) -> Result<acp::ListSessionsResponse, Error> {
    let start = match cursor {
        None => 0,
        Some(c) => c
            .parse::<usize>()
            .map_err(|_| crate::invalid_params(format!("unknown cursor `{c}`")))?,
    };
    let matching: Vec<ClientSession> = all
        .into_iter()
        .filter(|s| cwd.is_none_or(|cwd| Path::new(&s.cwd) == cwd))
        .collect();
    let sessions = matching
        .iter()
        .skip(start)
        .take(PAGE)
        .map(|s| {
            acp::SessionInfo::new(s.id.clone(), PathBuf::from(&s.cwd))
                .title(s.title.clone())
                .updated_at(format_utc_ms(s.updated_ms).replacen(' ', "T", 1))
        })
        .collect();
    let next = (start + PAGE < matching.len()).then(|| (start + PAGE).to_string());
    Ok(acp::ListSessionsResponse::new(sessions).next_cursor(next))
}

impl AcpAgent {
    /// The recorded session `id`, checked against the `cwd` the client gives.
    async fn recorded(
        &self,
        id: &acp::SessionId,
        cwd: &Path,
    ) -> Result<(Arc<Service>, PathBuf, ClientSession), Error> {
        let cwd = self.workspace_cwd(cwd)?;
        let service = self.open_service().await?;
        let (svc, key) = (service.clone(), id.0.to_string());
        let found = tokio::task::spawn_blocking(move || svc.client_session(&key))
            .await
            .map_err(internal)?
            .map_err(internal)?;
        let Some(session) = found.filter(|s| s.client == CLIENT) else {
            return Err(acp::Error::session_not_found(id.clone()).into());
        };
        if Path::new(&session.cwd) != cwd {
            return Err(crate::invalid_params(format!(
                "session {id} belongs to cwd `{}`, not `{}`",
                session.cwd,
                cwd.display()
            )));
        }
        Ok((service, cwd, session))
    }

    /// Makes a recorded session live in this process (its turn state starts empty); returns
    /// its settings.
    fn activate(&self, id: &acp::SessionId, cwd: PathBuf, record: &ClientSession) -> SessionConfig {
        let config = SessionConfig::from_json(&record.config);
        let mut sessions = lock(&self.sessions);
        let live = sessions
            .entry(id.0.to_string())
            .or_insert_with(|| Session::new(cwd, config.clone(), true));
        live.title = record.title.clone();
        live.config.clone()
    }

    /// `session/load`: replays the conversation, then the session is live.
    pub(crate) async fn load_session(
        &self,
        req: acp::LoadSessionRequest,
        conn: &agent_client_protocol::v1::ConnectionTo<agent_client_protocol::Client>,
    ) -> Result<acp::LoadSessionResponse, Error> {
        let (service, cwd, record) = self.recorded(&req.session_id, &req.cwd).await?;
        crate::mcp::attach(&service, &req.mcp_servers)?;
        let root = service.root().to_path_buf();
        let (svc, key) = (service.clone(), req.session_id.0.to_string());
        let turns = tokio::task::spawn_blocking(move || svc.client_turns(&key))
            .await
            .map_err(internal)?
            .map_err(internal)?;
        for turn in &turns {
            let svc = service.clone();
            let (root, turn) = (root.clone(), turn.clone());
            let updates = tokio::task::spawn_blocking(move || replay_turn(&svc, &root, &turn))
                .await
                .map_err(internal)??;
            for u in updates {
                conn.send_notification(acp::SessionNotification::new(req.session_id.clone(), u))?;
            }
        }
        let config = self.activate(&req.session_id, cwd, &record);
        conn.send_notification(acp::SessionNotification::new(
            req.session_id.clone(),
            commands(),
        ))?;
        tracing::info!(session = %req.session_id, turns = turns.len(), "session loaded");
        Ok(acp::LoadSessionResponse::new()
            .modes(config.modes())
            .config_options(config.options(&self.workflows())))
    }

    /// `session/resume`: the session is live again, nothing replayed.
    pub(crate) async fn resume_session(
        &self,
        req: acp::ResumeSessionRequest,
    ) -> Result<acp::ResumeSessionResponse, Error> {
        let (service, cwd, record) = self.recorded(&req.session_id, &req.cwd).await?;
        crate::mcp::attach(&service, &req.mcp_servers)?;
        let config = self.activate(&req.session_id, cwd, &record);
        tracing::info!(session = %req.session_id, "session resumed");
        Ok(acp::ResumeSessionResponse::new()
            .modes(config.modes())
            .config_options(config.options(&self.workflows())))
    }

    /// `session/close`: cancels the session's turn, if any, and forgets it in this process
    /// (it stays recorded: `session/load` brings it back).
    pub(crate) fn close_session(
        &self,
        req: &acp::CloseSessionRequest,
    ) -> Result<acp::CloseSessionResponse, Error> {
        let Some(session) = lock(&self.sessions).remove(req.session_id.0.as_ref()) else {
            return Err(acp::Error::session_not_found(req.session_id.clone()).into());
        };
        if let Some(turn) = session.turn {
            turn.cancel();
        }
        tracing::info!(session = %req.session_id, "session closed");
        Ok(acp::CloseSessionResponse::new())
    }

    /// `session/list`: the workspace's recorded ACP sessions, most recent first.
    pub(crate) async fn list_sessions(
        &self,
        req: acp::ListSessionsRequest,
    ) -> Result<acp::ListSessionsResponse, Error> {
        // No workspace known yet: a `cwd` names one.
        if lock(&self.root).is_none() {
            let Some(cwd) = &req.cwd else {
                return Ok(acp::ListSessionsResponse::new(Vec::new()));
            };
            self.workspace_cwd(cwd)?;
        }
        let service = self.open_service().await?;
        let cwd = req
            .cwd
            .as_ref()
            .map(|c| c.canonicalize().unwrap_or_else(|_| c.clone()));
        let svc = service.clone();
        let all = tokio::task::spawn_blocking(move || svc.client_sessions(CLIENT))
            .await
            .map_err(internal)?
            .map_err(internal)?;
        list_page(all, cwd.as_deref(), req.cursor.as_deref())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn rec(id: &str, cwd: &str) -> ClientSession {
        ClientSession {
            id: id.into(),
            client: CLIENT.into(),
            cwd: cwd.into(),
            title: Some(format!("t {id}")),
            config: "{}".into(),
            created_ms: 0,
            updated_ms: 1_700_000_000_000,
        }
    }

    #[test]
    fn lists_filter_by_cwd_and_page_with_a_cursor() {
        let all: Vec<ClientSession> = (0..PAGE + 3)
            .map(|i| rec(&format!("s{i}"), if i % 2 == 0 { "/a" } else { "/b" }))
            .collect();
        let page = list_page(all.clone(), None, None).unwrap();
        assert_eq!(page.sessions.len(), PAGE);
        assert_eq!(page.next_cursor.as_deref(), Some("50"));
        let rest = list_page(all.clone(), None, Some("50")).unwrap();
        assert_eq!(rest.sessions.len(), 3);
        assert!(rest.next_cursor.is_none());
        let a = list_page(all.clone(), Some(Path::new("/a")), None).unwrap();
        assert_eq!(a.sessions.len(), 27);
        assert!(a.sessions.iter().all(|s| s.cwd == Path::new("/a")));
        let v = serde_json::to_value(&a.sessions[0]).unwrap();
        assert_eq!(v["title"], "t s0");
        assert_eq!(v["updatedAt"], "2023-11-14T22:13:20.000Z");
        assert!(list_page(all, None, Some("x")).is_err());
    }
}
