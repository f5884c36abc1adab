//! The run context's node worktrees ([`crate::nodes`]): the tools' environment and the
//! worktree of an editing activation, landing its work on the run branch, rolling a pruned
//! node back and dropping them all when the run ends.

use tokio_util::sync::CancellationToken;
use trellis_graph::NodeError;
use trellis_protocol::{NodeId, SessionEvent, SessionId};
use trellis_tools::worktree::nodes::NodeWorktree;
use trellis_tools::{ToolEnv, Workspace};

use super::RunContext;
use crate::nodes::Landed;

impl RunContext {
    /// The tools' environment of an activation that edits in the node worktree at `path`.
    pub(crate) fn env_in(
        &self,
        env: &ToolEnv,
        path: &std::path::Path,
    ) -> Result<ToolEnv, NodeError> {
        let mut env = env.clone();
        env.workspace = Workspace::new(path, &self.runtime.tools.secrets)
            .map_err(|e| NodeError::new(e.to_string()))?;
        Ok(env)
    }

    /// The run's worktree, created now if the run has none yet ([`crate::RunSpace`]).
    pub(crate) async fn ensure_worktree(&self) -> Result<(), NodeError> {
        if self.space.get().is_some() {
            return Ok(());
        }
        let me = self
            .me
            .upgrade()
            .ok_or_else(|| NodeError::new("the run's context is gone"))?;
        tokio::task::spawn_blocking(move || me.space.ensure().map(drop))
            .await
            .map_err(|e| NodeError::new(e.to_string()))?
            .map_err(|e| NodeError::new(format!("cannot create the run's worktree: {e}")))
    }

    /// Pushes the run's branches to the remote, when one is configured
    /// ([`crate::RunSpace::publish`]).
    pub(crate) async fn publish(&self) -> Result<(), NodeError> {
        if self.runtime.remote.is_none() || self.space.get().is_none() {
            return Ok(());
        }
        let me = self
            .me
            .upgrade()
            .ok_or_else(|| NodeError::new("the run's context is gone"))?;
        tokio::task::spawn_blocking(move || me.space.publish())
            .await
            .map_err(|e| NodeError::new(e.to_string()))?
            .map_err(|e| NodeError::new(e.to_string()))
    }

    /// The worktree of an editing activation of `node` (see
    /// [`NodeSpaces::checkout`](crate::nodes::NodeSpaces::checkout)).
    /// Whether it was created now (the node had none here).
    pub(crate) async fn node_worktree(
        &self,
        node: &str,
    ) -> Result<(NodeWorktree, bool), NodeError> {
        let (nodes, node) = (self.nodes.clone(), node.to_owned());
        tokio::task::spawn_blocking(move || nodes.checkout(&node))
            .await
            .map_err(|e| NodeError::new(e.to_string()))?
            .map_err(|e| NodeError::new(format!("cannot create the agent's worktree: {e}")))
    }

    /// Commits an editing activation's work and (when `merge`) merges it into the run
    /// branch.
    pub(crate) async fn land(
        &self,
        wt: &NodeWorktree,
        summary: &str,
        merge: bool,
        cancel: &CancellationToken,
    ) -> Result<Landed, NodeError> {
        let nodes = self.nodes.clone();
        let (wt, summary, cancel) = (wt.clone(), summary.to_owned(), cancel.clone());
        let landed = tokio::task::spawn_blocking(move || nodes.land(&wt, &summary, merge, &cancel))
            .await
            .map_err(|e| NodeError::new(e.to_string()))?
            .map_err(NodeError::new)?;
        self.publish().await?;
        Ok(landed)
    }

    /// Undoes what a pruned agent node did: its merges into the run branch are undone, its
    /// worktree (uncommitted edits included) and branch deleted; the node's session notes
    /// it. `None` when the node has no worktree (it never edited).
    pub async fn roll_back(&self, node: &str) -> Option<Result<Vec<String>, String>> {
        let (nodes, id) = (self.nodes.clone(), node.to_owned());
        let pruned = tokio::task::spawn_blocking(move || nodes.prune(&id))
            .await
            .unwrap_or_else(|e| Err(e.to_string()));
        let (restored, undone) = match pruned {
            Ok(None) => return None,
            Ok(Some((report, files))) => match self.publish().await {
                Ok(()) => (Ok(files), report.undone.len()),
                Err(e) => (Err(e.to_string()), report.undone.len()),
            },
            Err(e) => (Err(e), 0),
        };
        if let Some(hub) = &self.options.sessions {
            let id = SessionId::for_node(&self.run, &NodeId::new(node));
            let merges = match undone {
                0 => String::new(),
                1 => "; its merge into the run branch is undone".to_owned(),
                n => format!("; its {n} merges into the run branch are undone"),
            };
            let text = match &restored {
                Ok(p) if p.is_empty() => {
                    format!("pruned; its worktree needed no rollback and is removed{merges}")
                }
                Ok(p) => format!(
                    "pruned; rolled back {} (its worktree and branch are removed){merges}",
                    p.join(", ")
                ),
                Err(e) => format!("pruned; rolling back its worktree failed: {e}"),
            };
            let sink = hub.sink(&id, self.options.cause.clone());
            sink(SessionEvent::Note { text });
            sink(SessionEvent::SessionError {
                error: "pruned".into(),
            });
        }
        Some(restored)
    }

    /// Removes the run's node worktrees and branches (the run ended).
    pub async fn drop_node_worktrees(&self) -> Result<(), String> {
        // Node worktrees branch from the run's: a run without one has none.
        if self.space.get().is_none() {
            return Ok(());
        }
        let nodes = self.nodes.clone();
        tokio::task::spawn_blocking(move || nodes.cleanup())
            .await
            .unwrap_or_else(|e| Err(e.to_string()))?;
        // The run's final branch, and its node branches gone from the remote too.
        self.publish().await.map_err(|e| e.to_string())
    }
}
