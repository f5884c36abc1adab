//! Finding the workspace an id belongs to, and validating ids from URLs.

use std::sync::Arc;

use trellis_core::service::{OpErrorKind, Service};
use trellis_protocol::{Op, RunId, SessionId, StreamId};

use crate::{AppState, Workspace, error::ApiError};

/// Longest id accepted in a URL or body.
const MAX_ID: usize = 200;

/// Refuses ids that cannot be ids: empty, too long, control characters, path separators
/// that are not part of node ids, `..`.
pub fn check_id<'a>(what: &str, id: &'a str) -> Result<&'a str, ApiError> {
    let bad = id.is_empty()
        || id.len() > MAX_ID
        || id.chars().any(|c| c.is_control() || c == '\\')
        || id.split('/').any(|part| part == "..");
    if bad {
        return Err(ApiError::invalid(format!(
            "`{}` is not a valid {what} id",
            id.chars().take(MAX_ID).collect::<String>().escape_debug()
        )));
    }
    Ok(id)
}

impl AppState {
    /// The workspace named `id`, or the only one when `id` is absent.
    pub(crate) fn workspace(&self, id: Option<&str>) -> Result<&Workspace, ApiError> {
        let all = &self.0.workspaces;
        match id {
            Some(id) => all.iter().find(|w| w.id == id).ok_or_else(|| {
                ApiError::not_found(format!(
                    "no workspace `{id}` (workspaces: {})",
                    ids(all).join(", ")
                ))
            }),
            None if all.len() == 1 => Ok(&all[0]),
            None => Err(ApiError {
                field: Some("workspace".into()),
                ..ApiError::invalid(format!(
                    "this server has several workspaces; name one with `workspace` ({})",
                    ids(all).join(", ")
                ))
            }),
        }
    }

    /// The workspace holding run `id` (a full id or a unique prefix), and the full id.
    pub(crate) fn run(&self, id: &str) -> Result<(&Workspace, RunId), ApiError> {
        check_id("run", id)?;
        let mut found = None;
        for w in &self.0.workspaces {
            match w.service.run_id(id) {
                Ok(run) => {
                    if found.is_some() {
                        return Err(ApiError::invalid(format!(
                            "run prefix `{id}` matches runs in several workspaces; give more of \
                             the id"
                        )));
                    }
                    found = Some((w, run));
                }
                Err(e) if e.kind == OpErrorKind::NotFound => {}
                Err(e) => return Err(e.into()),
            }
        }
        found.ok_or_else(|| ApiError::not_found(format!("no run `{id}`")))
    }

    /// The workspace holding session `id`.
    pub(crate) fn session(&self, id: &str) -> Result<(&Workspace, SessionId), ApiError> {
        check_id("session", id)?;
        let sid = SessionId::from_string(id);
        for w in &self.0.workspaces {
            if w.service.session(&sid).is_ok() {
                return Ok((w, sid));
            }
        }
        Err(ApiError::not_found(format!("no session `{id}`")))
    }

    /// The workspace a stream lives in (`workspace` names it for the workspace stream, or
    /// for a session not recorded yet).
    pub(crate) fn stream(
        &self,
        stream: &StreamId,
        workspace: Option<&str>,
    ) -> Result<(&Workspace, StreamId), ApiError> {
        match stream {
            StreamId::Workspace => Ok((self.workspace(workspace)?, StreamId::Workspace)),
            StreamId::Run(run) => {
                let (w, id) = self.run(run.as_str())?;
                Ok((w, StreamId::Run(id)))
            }
            StreamId::Session(s) => match self.session(s.as_str()) {
                Ok((w, s)) => Ok((w, StreamId::Session(s))),
                Err(e) => match workspace {
                    Some(ws) => Ok((self.workspace(Some(ws))?, stream.clone())),
                    None => Err(e),
                },
            },
        }
    }

    /// The service that should take `op`: the workspace of the run or session it names,
    /// else `workspace` (or the only one).
    pub(crate) fn service_for(
        &self,
        op: &Op,
        workspace: Option<&str>,
    ) -> Result<(&Workspace, Arc<Service>), ApiError> {
        let w = match op {
            Op::ResumeRun { run, .. }
            | Op::Answer { run, .. }
            | Op::Approve { run, .. }
            | Op::RequestChanges { run, .. }
            | Op::SendMessage { run, .. }
            | Op::Prune { run, .. }
            | Op::Inject { run, .. }
            | Op::Cancel { run, .. }
            | Op::Review { run, .. } => self.run(run)?.0,
            Op::SessionMessage { session, .. } | Op::CancelSession { session } => {
                match self.session(session.as_str()) {
                    Ok((w, _)) => w,
                    Err(e) if workspace.is_none() => return Err(e),
                    Err(_) => self.workspace(workspace)?,
                }
            }
            Op::StartRun { .. }
            | Op::StartChannel { .. }
            | Op::RecordClientSession { .. }
            | Op::RecordClientTurn { .. } => self.workspace(workspace)?,
        };
        Ok((w, w.service.clone()))
    }
}

fn ids(all: &[Workspace]) -> Vec<&str> {
    all.iter().map(|w| w.id.as_str()).collect()
}

/// Runs store reads off the async workers.
pub async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::internal("a store read", e))?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_checked() {
        assert!(check_id("run", "0193-abc").is_ok());
        assert!(check_id("node", "fanout/3").is_ok());
        for bad in ["", "a\nb", "../etc", "x/../y", "a\\b", &"x".repeat(201)] {
            assert!(check_id("node", bad).is_err(), "{bad:?}");
        }
    }
}
