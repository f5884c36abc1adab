//! Reviewers' comments on a change set (the review agent's comment tools), stored beside the
//! review outcome and shown with the change set by `trellis review`.

use serde::{Deserialize, Serialize};
use trellis_protocol::{NodeId, RunId};
use trellis_store::{NewReviewComment, ReviewStore};

use super::ReviewComment;
use crate::error::{Error, Result};

/// A stored comment and who wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AuthoredComment {
    /// Its id (increasing in the order comments were added).
    pub id: i64,
    /// Who wrote it: a role (`review`) or `user`.
    pub author: String,
    /// The node that wrote it, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeId>,
    /// The comment.
    pub comment: ReviewComment,
    /// When it was added, ms since the epoch.
    pub created_ms: i64,
}

/// Adds `comment` by `author` (from `node`) to the run's change-set review; returns its id.
pub fn add_comment(
    store: &dyn ReviewStore,
    run: &RunId,
    node: Option<&NodeId>,
    author: &str,
    comment: &ReviewComment,
) -> Result<i64> {
    let json = serde_json::to_string(comment).map_err(|source| Error::Json {
        what: "encode the review comment".into(),
        source,
    })?;
    Ok(store.add_review_comment(NewReviewComment {
        run: run.clone(),
        node: node.cloned(),
        author: author.to_owned(),
        comment: json,
    })?)
}

/// The run's review comments, in the order they were added (rows that do not decode are
/// skipped).
pub fn comments(store: &dyn ReviewStore, run: &RunId) -> Result<Vec<AuthoredComment>> {
    Ok(store
        .review_comments(run)?
        .into_iter()
        .filter_map(|r| {
            let comment = serde_json::from_str(&r.comment).ok()?;
            Some(AuthoredComment {
                id: r.id,
                author: r.author,
                node: r.node,
                comment,
                created_ms: r.created_ms,
            })
        })
        .collect())
}
