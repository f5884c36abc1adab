//! [`ReviewStore`] on PostgreSQL: `change_sets`, `change_ops` and `review_comments` (SQLite's
//! are in `crate::review`, whose column list and prefix resolution both use).
//!
//! The upserts are SQLite's (`ON CONFLICT … DO UPDATE` with `excluded`); a comment is an
//! `INSERT … RETURNING id`, timed by this process's clock as SQLite's writer does. Listings
//! order as SQLite's: change sets newest first, then by run id descending (text is
//! `COLLATE "C"`, SQLite's bytewise order); operations by seq; comments by id.

use tokio_postgres::Row;
use tokio_postgres::types::Type;
use trellis_protocol::records::{ChangeOpRecord, ChangeSetRecord};
use trellis_protocol::{NodeId, RunId};

use super::PgStore;
use crate::error::Result;
use crate::review::{CHANGE_SET_COLUMNS, by_prefix};
use crate::schema::now_ms;
use crate::{NewReviewComment, ReviewCommentRecord, ReviewStore};

impl PgStore {
    fn change_set_exact(&self, id: String) -> Result<Option<ChangeSetRecord>> {
        self.read(async move |c| {
            let sql = format!("SELECT {CHANGE_SET_COLUMNS} FROM change_sets WHERE run_id = $1");
            let row = c.query_typed_opt(&sql, &[(&id, Type::TEXT)]).await?;
            Ok(row.as_ref().map(change_set_row).transpose()?)
        })
    }
}

impl ReviewStore for PgStore {
    fn put_change_set(&self, r: ChangeSetRecord) -> Result<()> {
        self.write(async move |c| {
            c.execute_typed(
                "INSERT INTO change_sets (run_id, repo, branch, base_commit, worktree, state,
                                          review, created_at, updated_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
                 ON CONFLICT (run_id) DO UPDATE SET
                    repo = excluded.repo, branch = excluded.branch,
                    base_commit = excluded.base_commit, worktree = excluded.worktree,
                    state = excluded.state, review = excluded.review,
                    updated_at = excluded.updated_at",
                &[
                    (&r.run_id.as_str(), Type::TEXT),
                    (&r.repo, Type::TEXT),
                    (&r.branch, Type::TEXT),
                    (&r.base_commit, Type::TEXT),
                    (&r.worktree, Type::TEXT),
                    (&r.state, Type::TEXT),
                    (&r.review, Type::TEXT),
                    (&r.created_at, Type::INT8),
                    (&r.updated_at, Type::INT8),
                ],
            )
            .await?;
            Ok(())
        })
    }

    fn change_set(&self, id_or_prefix: &str) -> Result<ChangeSetRecord> {
        match self.change_set_exact(id_or_prefix.to_owned())? {
            Some(rec) => Ok(rec),
            None => by_prefix(id_or_prefix, self.change_sets()?),
        }
    }

    fn change_set_of(&self, run: &RunId) -> Result<Option<ChangeSetRecord>> {
        self.change_set_exact(run.to_string())
    }

    fn change_sets(&self) -> Result<Vec<ChangeSetRecord>> {
        self.read(async |c| {
            let sql = format!(
                "SELECT {CHANGE_SET_COLUMNS} FROM change_sets ORDER BY created_at DESC, run_id DESC"
            );
            let rows = c.query_typed(&sql, &[]).await?;
            Ok(rows.iter().map(change_set_row).collect::<Result<_, _>>()?)
        })
    }

    fn put_change_op(&self, r: ChangeOpRecord) -> Result<()> {
        self.write(async move |c| {
            c.execute_typed(
                "INSERT INTO change_ops (run_id, seq, kind, state, journal, files, created_at,
                                         finished_at)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (run_id, seq) DO UPDATE SET
                    kind = excluded.kind, state = excluded.state, journal = excluded.journal,
                    files = excluded.files, finished_at = excluded.finished_at",
                &[
                    (&r.run_id.as_str(), Type::TEXT),
                    (&r.seq, Type::INT8),
                    (&r.kind, Type::TEXT),
                    (&r.state, Type::TEXT),
                    (&r.journal, Type::TEXT),
                    (&r.files, Type::INT8),
                    (&r.created_at, Type::INT8),
                    (&r.finished_at, Type::INT8),
                ],
            )
            .await?;
            Ok(())
        })
    }

    fn change_ops(&self, run: &RunId) -> Result<Vec<ChangeOpRecord>> {
        let run = run.as_str().to_owned();
        self.read(async move |c| {
            let rows = c
                .query_typed(
                    "SELECT run_id, seq, kind, state, journal, files, created_at, finished_at
                     FROM change_ops WHERE run_id = $1 ORDER BY seq",
                    &[(&run, Type::TEXT)],
                )
                .await?;
            Ok(rows.iter().map(change_op_row).collect::<Result<_, _>>()?)
        })
    }

    fn add_review_comment(&self, new: NewReviewComment) -> Result<i64> {
        self.write(async move |c| {
            let row = c
                .query_typed_one(
                    "INSERT INTO review_comments (run, node, author, comment, created_ms)
                     VALUES ($1, $2, $3, $4, $5) RETURNING id",
                    &[
                        (&new.run.as_str(), Type::TEXT),
                        (&new.node.as_ref().map(NodeId::as_str), Type::TEXT),
                        (&new.author, Type::TEXT),
                        (&new.comment, Type::TEXT),
                        (&now_ms(), Type::INT8),
                    ],
                )
                .await?;
            Ok(row.try_get(0)?)
        })
    }

    fn review_comments(&self, run: &RunId) -> Result<Vec<ReviewCommentRecord>> {
        let run = run.as_str().to_owned();
        self.read(async move |c| {
            let rows = c
                .query_typed(
                    "SELECT id, run, node, author, comment, created_ms FROM review_comments
                     WHERE run = $1 ORDER BY id",
                    &[(&run, Type::TEXT)],
                )
                .await?;
            Ok(rows.iter().map(comment_row).collect::<Result<_, _>>()?)
        })
    }
}

fn change_set_row(r: &Row) -> Result<ChangeSetRecord, tokio_postgres::Error> {
    Ok(ChangeSetRecord {
        run_id: RunId::from_string(r.try_get::<_, String>(0)?),
        repo: r.try_get(1)?,
        branch: r.try_get(2)?,
        base_commit: r.try_get(3)?,
        worktree: r.try_get(4)?,
        state: r.try_get(5)?,
        review: r.try_get(6)?,
        created_at: r.try_get(7)?,
        updated_at: r.try_get(8)?,
    })
}

fn change_op_row(r: &Row) -> Result<ChangeOpRecord, tokio_postgres::Error> {
    Ok(ChangeOpRecord {
        run_id: RunId::from_string(r.try_get::<_, String>(0)?),
        seq: r.try_get(1)?,
        kind: r.try_get(2)?,
        state: r.try_get(3)?,
        journal: r.try_get(4)?,
        files: r.try_get(5)?,
        created_at: r.try_get(6)?,
        finished_at: r.try_get(7)?,
    })
}

fn comment_row(r: &Row) -> Result<ReviewCommentRecord, tokio_postgres::Error> {
    Ok(ReviewCommentRecord {
        id: r.try_get(0)?,
        run: RunId::from_string(r.try_get::<_, String>(1)?),
        node: r.try_get::<_, Option<String>>(2)?.map(NodeId::new),
        author: r.try_get(3)?,
        comment: r.try_get(4)?,
        created_ms: r.try_get(5)?,
    })
}
