//! Reviewers' comments on a run's change set — the review agent's `add_line_comment`,
//! `add_file_comment` and `add_review_comment` — shown by `trellis review` beside
//! the outcome in `change_sets.review`: the `review_comments` table.
//!
//! The comment itself is JSON text (`trellis_tools::review::ReviewComment`), as the review
//! outcome is; the store keeps it opaque.

use rusqlite::{Connection, Row, params};
use serde::Serialize;
use trellis_protocol::{NodeId, RunId};

use crate::error::Result;
use crate::read::Reader;
use crate::schema::now_ms;
use crate::{Msg, Record, Store};

/// A comment to add.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewReviewComment {
    /// The run whose change set it is about.
    pub run: RunId,
    /// The node that wrote it (the review agent's node), if any.
    pub node: Option<NodeId>,
    /// Who wrote it: a role (`review`) or `user`.
    pub author: String,
    /// The comment, as JSON text.
    pub comment: String,
}

/// A stored comment.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReviewCommentRecord {
    /// Its id (increasing in the order comments were added).
    pub id: i64,
    /// The run.
    pub run: RunId,
    /// The node that wrote it.
    pub node: Option<NodeId>,
    /// Who wrote it.
    pub author: String,
    /// The comment, as JSON text.
    pub comment: String,
    /// When it was added, ms since the epoch.
    pub created_ms: i64,
}

pub(crate) fn insert(conn: &Connection, new: &NewReviewComment) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO review_comments (run, node, author, comment, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        new.run.as_str(),
        new.node.as_ref().map(NodeId::as_str),
        new.author,
        new.comment,
        now_ms()
    ])?;
    Ok(conn.last_insert_rowid())
}

fn row(r: &Row<'_>) -> rusqlite::Result<ReviewCommentRecord> {
    Ok(ReviewCommentRecord {
        id: r.get(0)?,
        run: RunId::from_string(r.get::<_, String>(1)?),
        node: r.get::<_, Option<String>>(2)?.map(NodeId::new),
        author: r.get(3)?,
        comment: r.get(4)?,
        created_ms: r.get(5)?,
    })
}

impl Reader {
    fn review_comments(&self, run: &RunId) -> Result<Vec<ReviewCommentRecord>> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT id, run, node, author, comment, created_ms FROM review_comments
                 WHERE run = ?1 ORDER BY id",
            )
            .and_then(|mut st| st.query_map([run.as_str()], row)?.collect())
            .map_err(self.sqlite())
        })
    }
}

impl Store {
    /// Adds a comment to the run's change-set review; returns its id once committed.
    pub fn add_review_comment(&self, new: NewReviewComment) -> Result<i64> {
        self.request(|reply| Msg::Record(Record::ReviewComment(new), reply))?
    }

    /// The run's review comments, in the order they were added.
    pub fn review_comments(&self, run: &RunId) -> Result<Vec<ReviewCommentRecord>> {
        self.reader.review_comments(run)
    }
}
