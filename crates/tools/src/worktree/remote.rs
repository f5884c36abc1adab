//! Run branches through a git remote (`[repository] remote`, team scale).
//!
//! Workers work in clones of their own; what a run changed travels through the workspace's
//! git remote. After every move of a run's branch the process that moved it pushes it, with
//! the node branches of the run ([`Remote::publish`]); a process that needs a run's branch
//! it did not write (a worker resuming a run another worker started, a server reviewing a
//! run a worker executed) fetches it ([`Remote::fetch`]) into `refs/trellis/remote/…`, a
//! namespace of its own (never a branch checked out in a worktree, which git refuses to
//! fetch into).
//!
//! Fencing: the run branch is pushed with `--force-with-lease` naming the tip this process
//! last fetched or pushed, so a worker that lost its lease (another worker pushed since)
//! cannot overwrite the new holder's work: the push is refused and the error says so. Node
//! branches are pushed with `--force` (each node's branch is only moved by the worker
//! running the node) and `--prune` (a node branch removed here goes from the remote too).

use serde::Deserialize;

use super::RunWorktree;
use super::nodes::NODE_BRANCH_PREFIX;
use crate::error::{Error, Result};
use crate::git::Git;
use trellis_protocol::RunId;

/// Where fetched run branches are kept: `refs/trellis/remote/<branch>`.
pub const FETCHED_PREFIX: &str = "refs/trellis/remote/";

/// The `[repository]` section of the configuration.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RepositoryConfig {
    /// The git remote run branches travel through: a remote's name in the workspace's
    /// repository (`origin`) or a URL git accepts. Unset: runs' branches stay local.
    pub remote: Option<String>,
}

impl RepositoryConfig {
    /// The remote, if one is configured (an empty value is none).
    pub fn remote(&self) -> Option<Remote> {
        self.remote
            .as_deref()
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| Remote { url: r.to_owned() })
    }
}

/// A git remote (a name or a URL).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Remote {
    /// As configured.
    pub url: String,
}

impl Remote {
    /// Fetches `run`'s branch into `refs/trellis/remote/trellis/run-<run>` of the repository
    /// `git` runs in; its tip, or `None` when the remote has no such branch.
    pub fn fetch(&self, git: &Git, run: &RunId) -> Result<Option<String>> {
        let branch = RunWorktree::branch_for(run);
        let local = format!("{FETCHED_PREFIX}{branch}");
        let spec = format!("+refs/heads/{branch}:{local}");
        match git.try_run(&["fetch", "--quiet", "--no-tags", &self.url, &spec])? {
            Ok(_) => git.resolve(&local),
            Err(e) if e.contains("couldn't find remote ref") => Ok(None),
            Err(e) => Err(self.error("fetch", &branch, e)),
        }
    }

    /// Pushes `run`'s branch and its node branches from the repository `git` runs in.
    /// The remote's run branch must be at `expected` (`None`: must not exist yet); the
    /// pushed tip is returned.
    pub fn publish(&self, git: &Git, run: &RunId, expected: Option<&str>) -> Result<String> {
        let branch = RunWorktree::branch_for(run);
        let tip = git
            .resolve(&format!("refs/heads/{branch}"))?
            .ok_or_else(|| Error::Failed(format!("branch {branch} is gone")))?;
        let lease = format!(
            "--force-with-lease=refs/heads/{branch}:{}",
            expected.unwrap_or_default()
        );
        let run_spec = format!("refs/heads/{branch}:refs/heads/{branch}");
        let nodes = format!("refs/heads/{NODE_BRANCH_PREFIX}{run}/*");
        let node_spec = format!("+{nodes}:{nodes}");
        let args = [
            "push", "--quiet", "--atomic", "--prune", &lease, &self.url, &run_spec, &node_spec,
        ];
        match git.try_run(&args)? {
            Ok(_) => {
                // What this process knows the remote holds: the next fetch compares to it.
                let fetched = format!("{FETCHED_PREFIX}{branch}");
                git.run(&["update-ref", &fetched, &tip])?;
                Ok(tip)
            }
            Err(e) if e.contains("stale info") || e.contains("rejected") => {
                Err(Error::Failed(format!(
                    "pushing {branch} to the remote `{}` was refused: another process moved \
                     it (a worker that took the run over); this process no longer holds the \
                     run ({e})",
                    self.url
                )))
            }
            Err(e) => Err(self.error("push", &branch, e)),
        }
    }

    fn error(&self, what: &str, branch: &str, message: String) -> Error {
        Error::Failed(format!(
            "git {what} of {branch} with the remote `{}` ([repository] remote) failed: {message}",
            self.url
        ))
    }
}
