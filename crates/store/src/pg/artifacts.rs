//! [`ArtifactStore`] on PostgreSQL: the `artifacts` table (SQLite's is in `crate::artifacts`,
//! whose column list, status names and not-found error both use).
//!
//! A new version is numbered as SQLite numbers it — one more than the run and kind's last —
//! but where SQLite's one writer makes that a plain `INSERT … SELECT MAX(version) + 1`,
//! here several processes write at once: two of them reading the same last version would
//! collide on `UNIQUE (run, kind, version)`. So the insert runs in a transaction that first
//! takes an advisory lock on the run and kind (`VERSION_LOCK`); the other waits for the
//! commit, and its insert, a statement begun after the wait, reads the committed version.
//! Writers of other runs or kinds do not wait (but for a hash collision, which only makes
//! one wait).

use tokio_postgres::Row;
use tokio_postgres::types::Type;
use trellis_protocol::{Artifact, ArtifactStatus, NodeId, RunId};

use super::PgStore;
use super::values::{Parsed, U32};
use crate::artifacts::{COLUMNS, not_found};
use crate::error::Result;
use crate::schema::now_ms;
use crate::{ArtifactStore, NewArtifact};

/// The first key of the advisory lock that numbers a run and kind's versions (`"arti"`; the
/// second is a hash of the run and kind). Two-key advisory locks never meet the one-key
/// migration lock.
const VERSION_LOCK: i32 = 0x6172_7469;

impl ArtifactStore for PgStore {
    fn put_artifact(&self, new: NewArtifact) -> Result<Artifact> {
        self.write(async move |c| {
            let tx = c.transaction().await?;
            let run = new.run.as_str();
            tx.execute_typed(
                "SELECT pg_advisory_xact_lock($1, hashtext($2 || chr(10) || $3))",
                &[
                    (&VERSION_LOCK, Type::INT4),
                    (&run, Type::TEXT),
                    (&new.kind, Type::TEXT),
                ],
            )
            .await?;
            let sql = format!(
                "INSERT INTO artifacts (run, node, kind, version, content, status, feedback,
                                        created_ms, updated_ms)
                 VALUES ($1, $2, $3,
                         (SELECT COALESCE(MAX(version), 0) + 1 FROM artifacts
                          WHERE run = $1 AND kind = $3),
                         $4, $5, NULL, $6, $6)
                 RETURNING {COLUMNS}"
            );
            let row = tx
                .query_typed_one(
                    &sql,
                    &[
                        (&run, Type::TEXT),
                        (&new.node.as_ref().map(NodeId::as_str), Type::TEXT),
                        (&new.kind, Type::TEXT),
                        (&super::runs::text(&new.content), Type::TEXT),
                        (&new.status.as_str(), Type::TEXT),
                        (&now_ms(), Type::INT8),
                    ],
                )
                .await?;
            let artifact = artifact_row(&row)?;
            tx.commit().await?;
            Ok(artifact)
        })
    }

    fn artifacts(&self, run: &RunId) -> Result<Vec<Artifact>> {
        let run = run.as_str().to_owned();
        self.read(async move |c| {
            let sql = format!("SELECT {COLUMNS} FROM artifacts WHERE run = $1 ORDER BY id");
            let rows = c.query_typed(&sql, &[(&run, Type::TEXT)]).await?;
            Ok(rows.iter().map(artifact_row).collect::<Result<_, _>>()?)
        })
    }

    fn artifact(&self, id: i64) -> Result<Artifact> {
        self.read(async move |c| {
            let sql = format!("SELECT {COLUMNS} FROM artifacts WHERE id = $1");
            let row = c.query_typed_opt(&sql, &[(&id, Type::INT8)]).await?;
            Ok(row.as_ref().map(artifact_row).transpose()?)
        })?
        .ok_or_else(|| not_found(id))
    }

    fn set_artifact_status(
        &self,
        id: i64,
        status: ArtifactStatus,
        feedback: Option<&str>,
    ) -> Result<Artifact> {
        let feedback = feedback.map(|f| super::runs::text(f).into_owned());
        self.write(async move |c| {
            let sql = format!(
                "UPDATE artifacts SET status = $2, feedback = $3, updated_ms = $4 WHERE id = $1
                 RETURNING {COLUMNS}"
            );
            let row = c
                .query_typed_opt(
                    &sql,
                    &[
                        (&id, Type::INT8),
                        (&status.as_str(), Type::TEXT),
                        (&feedback, Type::TEXT),
                        (&now_ms(), Type::INT8),
                    ],
                )
                .await?;
            Ok(row.as_ref().map(artifact_row).transpose()?)
        })?
        .ok_or_else(|| not_found(id))
    }
}

fn artifact_row(r: &Row) -> Result<Artifact, tokio_postgres::Error> {
    Ok(Artifact {
        id: r.try_get(0)?,
        run: RunId::from_string(r.try_get::<_, String>(1)?),
        node: r.try_get::<_, Option<String>>(2)?.map(NodeId::new),
        kind: r.try_get(3)?,
        version: r.try_get::<_, U32>(4)?.0,
        content: r.try_get(5)?,
        rendered: None,
        status: r.try_get::<_, Parsed<ArtifactStatus>>(6)?.0,
        feedback: r.try_get(7)?,
        created_ms: r.try_get(8)?,
        updated_ms: r.try_get(9)?,
    })
}
