//! Review: a run's change set (`change_sets`), the operations that apply, undo and redo it
//! (`change_ops`) and the reviewers' comments on it (`review_comments`), behind
//! [`ReviewStore`].
//!
//! Reviewers' comments are the review agent's `add_line_comment`, `add_file_comment` and
//! `add_review_comment`, shown by `trellis review` beside the outcome in
//! `change_sets.review`. The comment itself is JSON text
//! (`trellis_tools::review::ReviewComment`), as the review outcome is; the store keeps it
//! opaque.
//!
//! Writes go through the writer thread like everything else; reads use the reader pool.

use rusqlite::{Connection, OptionalExtension, Row, params};
use serde::Serialize;
use trellis_protocol::records::{ChangeOpRecord, ChangeSetRecord};
use trellis_protocol::{NodeId, RunId};

use crate::error::{Error, Result};
use crate::read::Reader;
use crate::schema::now_ms;
use crate::{Msg, Record, SqliteStore};

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

/// A run's change set under review: its record (keyed by run id), the journaled operations
/// that apply, undo and redo it, and the reviewers' comments on it.
pub trait ReviewStore: Send + Sync {
    /// Inserts or updates a change set (keyed by run id).
    fn put_change_set(&self, record: ChangeSetRecord) -> Result<()>;

    /// The change set of the run `id_or_prefix` (an id or a unique prefix).
    fn change_set(&self, id_or_prefix: &str) -> Result<ChangeSetRecord>;

    /// The change set of `run` (its exact id), if it has one: a run has none until its
    /// worktree is created (it has not written).
    fn change_set_of(&self, run: &RunId) -> Result<Option<ChangeSetRecord>>;

    /// Every change set, newest first.
    fn change_sets(&self) -> Result<Vec<ChangeSetRecord>>;

    /// Inserts or updates a change operation (keyed by run id and seq).
    fn put_change_op(&self, record: ChangeOpRecord) -> Result<()>;

    /// The run's change operations, in order.
    fn change_ops(&self, run: &RunId) -> Result<Vec<ChangeOpRecord>>;

    /// Adds a comment to the run's change-set review; returns its id once committed.
    fn add_review_comment(&self, new: NewReviewComment) -> Result<i64>;

    /// The run's review comments, in the order they were added.
    fn review_comments(&self, run: &RunId) -> Result<Vec<ReviewCommentRecord>>;
}

impl ReviewStore for SqliteStore {
    fn put_change_set(&self, record: ChangeSetRecord) -> Result<()> {
        self.request(|reply| Msg::Record(Record::ChangeSet(record), reply))?
            .map(drop)
    }

    fn change_set(&self, id_or_prefix: &str) -> Result<ChangeSetRecord> {
        self.reader.change_set(id_or_prefix)
    }

    fn change_set_of(&self, run: &RunId) -> Result<Option<ChangeSetRecord>> {
        self.reader.change_set_of(run.as_str())
    }

    fn change_sets(&self) -> Result<Vec<ChangeSetRecord>> {
        self.reader.change_sets()
    }

    fn put_change_op(&self, record: ChangeOpRecord) -> Result<()> {
        self.request(|reply| Msg::Record(Record::ChangeOp(record), reply))?
            .map(drop)
    }

    fn change_ops(&self, run: &RunId) -> Result<Vec<ChangeOpRecord>> {
        self.reader.change_ops(run)
    }

    fn add_review_comment(&self, new: NewReviewComment) -> Result<i64> {
        self.request(|reply| Msg::Record(Record::ReviewComment(new), reply))?
    }

    fn review_comments(&self, run: &RunId) -> Result<Vec<ReviewCommentRecord>> {
        self.reader.review_comments(run)
    }
}

/// Inserts or updates a change set; returns 0.
pub(crate) fn write_change_set(conn: &Connection, r: &ChangeSetRecord) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO change_sets (run_id, repo, branch, base_commit, worktree, state,
                                          review, created_at, updated_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
                 ON CONFLICT (run_id) DO UPDATE SET
                    repo = excluded.repo, branch = excluded.branch,
                    base_commit = excluded.base_commit, worktree = excluded.worktree,
                    state = excluded.state, review = excluded.review,
                    updated_at = excluded.updated_at",
    )?
    .execute(params![
        r.run_id.as_str(),
        r.repo,
        r.branch,
        r.base_commit,
        r.worktree,
        r.state,
        r.review,
        r.created_at,
        r.updated_at
    ])?;
    Ok(0)
}

/// Inserts or updates a change operation; returns 0.
pub(crate) fn write_change_op(conn: &Connection, r: &ChangeOpRecord) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO change_ops (run_id, seq, kind, state, journal, files, created_at,
                                         finished_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
                 ON CONFLICT (run_id, seq) DO UPDATE SET
                    kind = excluded.kind, state = excluded.state, journal = excluded.journal,
                    files = excluded.files, finished_at = excluded.finished_at",
    )?
    .execute(params![
        r.run_id.as_str(),
        r.seq,
        r.kind,
        r.state,
        r.journal,
        r.files,
        r.created_at,
        r.finished_at
    ])?;
    Ok(0)
}

/// Inserts a comment; returns its id.
pub(crate) fn insert_comment(conn: &Connection, new: &NewReviewComment) -> rusqlite::Result<i64> {
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

fn comment_row(r: &Row<'_>) -> rusqlite::Result<ReviewCommentRecord> {
    Ok(ReviewCommentRecord {
        id: r.get(0)?,
        run: RunId::from_string(r.get::<_, String>(1)?),
        node: r.get::<_, Option<String>>(2)?.map(NodeId::new),
        author: r.get(3)?,
        comment: r.get(4)?,
        created_ms: r.get(5)?,
    })
}

/// The columns a [`ChangeSetRecord`] is read from, in the row mappers' order (both
/// backends).
pub(crate) const CHANGE_SET_COLUMNS: &str =
    "run_id, repo, branch, base_commit, worktree, state, review, created_at, updated_at";

/// The change set, among `all` (newest first), of the only run whose id starts with
/// `id_or_prefix`, after no run had that exact id (both backends): [`Error::RunNotFound`]
/// for none (or an empty prefix), [`Error::AmbiguousRun`] for several.
pub(crate) fn by_prefix(id_or_prefix: &str, all: Vec<ChangeSetRecord>) -> Result<ChangeSetRecord> {
    let matches: Vec<ChangeSetRecord> = all
        .into_iter()
        .filter(|c| !id_or_prefix.is_empty() && c.run_id.as_str().starts_with(id_or_prefix))
        .collect();
    match matches.len() {
        1 => matches
            .into_iter()
            .next()
            .ok_or_else(|| Error::RunNotFound(id_or_prefix.to_owned())),
        0 => Err(Error::RunNotFound(id_or_prefix.to_owned())),
        _ => Err(Error::AmbiguousRun {
            prefix: id_or_prefix.to_owned(),
            candidates: matches.into_iter().map(|c| c.run_id.to_string()).collect(),
        }),
    }
}

fn change_set_row(r: &Row<'_>) -> rusqlite::Result<ChangeSetRecord> {
    Ok(ChangeSetRecord {
        run_id: RunId::from_string(r.get::<_, String>(0)?),
        repo: r.get(1)?,
        branch: r.get(2)?,
        base_commit: r.get(3)?,
        worktree: r.get(4)?,
        state: r.get(5)?,
        review: r.get(6)?,
        created_at: r.get(7)?,
        updated_at: r.get(8)?,
    })
}

impl Reader {
    /// Every change set, newest first.
    pub(crate) fn change_sets(&self) -> Result<Vec<ChangeSetRecord>> {
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {CHANGE_SET_COLUMNS} FROM change_sets ORDER BY created_at DESC, run_id DESC"
            ))
            .and_then(|mut st| st.query_map([], change_set_row)?.collect())
            .map_err(self.sqlite())
        })
    }

    /// The change set of the run whose id is `id_or_prefix` or, failing that, the only one
    /// whose run id starts with it.
    pub(crate) fn change_set(&self, id_or_prefix: &str) -> Result<ChangeSetRecord> {
        match self.change_set_of(id_or_prefix)? {
            Some(rec) => Ok(rec),
            None => by_prefix(id_or_prefix, self.change_sets()?),
        }
    }

    /// The change set of the run whose id is `id`, if any.
    pub(crate) fn change_set_of(&self, id: &str) -> Result<Option<ChangeSetRecord>> {
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {CHANGE_SET_COLUMNS} FROM change_sets WHERE run_id = ?1"
            ))
            .and_then(|mut st| st.query_row([id], change_set_row).optional())
            .map_err(self.sqlite())
        })
    }

    /// The run's change operations in order.
    pub(crate) fn change_ops(&self, run: &RunId) -> Result<Vec<ChangeOpRecord>> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT run_id, seq, kind, state, journal, files, created_at, finished_at
                 FROM change_ops WHERE run_id = ?1 ORDER BY seq",
            )
            .and_then(|mut st| {
                st.query_map([run.as_str()], |r| {
                    Ok(ChangeOpRecord {
                        run_id: RunId::from_string(r.get::<_, String>(0)?),
                        seq: r.get(1)?,
                        kind: r.get(2)?,
                        state: r.get(3)?,
                        journal: r.get(4)?,
                        files: r.get(5)?,
                        created_at: r.get(6)?,
                        finished_at: r.get(7)?,
                    })
                })?
                .collect()
            })
            .map_err(self.sqlite())
        })
    }

    /// The run's review comments in order.
    fn review_comments(&self, run: &RunId) -> Result<Vec<ReviewCommentRecord>> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT id, run, node, author, comment, created_ms FROM review_comments
                 WHERE run = ?1 ORDER BY id",
            )
            .and_then(|mut st| st.query_map([run.as_str()], comment_row)?.collect())
            .map_err(self.sqlite())
        })
    }
}
