//! Records of tools and changes: the `tool_calls`, `change_sets` and `change_ops` tables.
//!
//! Writes go through the writer thread like everything else (one message kind,
//! [`Record`]); reads use the reader pool.

use rusqlite::{Connection, OptionalExtension, Row, params};
use trellis_protocol::RunId;
use trellis_protocol::records::{ChangeOpRecord, ChangeSetRecord, ToolCallRecord};

use crate::Record;
use crate::error::{Error, Result};
use crate::read::Reader;

/// Writes `record`; returns the new row id for tool calls, model calls, artifacts,
/// review comments and speculations (the last one's for tool executions), the
/// artifact's id for a status change (0 when it does not exist), the turn's number for a
/// client turn, 0 otherwise.
pub(crate) fn write(conn: &Connection, record: &Record) -> rusqlite::Result<i64> {
    match record {
        Record::ModelCall(r) => crate::usage::write(conn, r),
        Record::Artifact(r) => crate::artifacts::insert(conn, r),
        Record::ArtifactStatus(r) => crate::artifacts::set_status(conn, r),
        Record::ClientSession(r) => crate::client_sessions::upsert(conn, r),
        Record::ClientTurn(r) => crate::client_sessions::insert_turn(conn, r),
        Record::ReviewComment(r) => crate::review_comments::insert(conn, r),
        Record::ToolNodes(r) => crate::toolgraph::upsert_nodes(conn, r),
        Record::ToolEmbeddings(r) => crate::toolgraph::set_embeddings(conn, r),
        Record::ToolExecutions(r) => crate::toolgraph::record_executions(conn, r),
        Record::Speculation(r) => crate::toolgraph::insert_speculation(conn, r),
        Record::DagCheckpoint(r) => crate::dag_checkpoints::write(conn, r),
        Record::ToolCall(r) => {
            conn.prepare_cached(
                "INSERT INTO tool_calls (run_id, node_id, tool, args, decision, is_error, summary,
                                         duration_ms, started_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
            )?
            .execute(params![
                r.run_id.as_ref().map(RunId::as_str),
                r.node_id,
                r.tool,
                r.args,
                r.decision,
                r.is_error,
                r.summary,
                r.duration_ms,
                r.started_at
            ])?;
            Ok(conn.last_insert_rowid())
        }
        Record::ChangeSet(r) => {
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
        Record::ChangeOp(r) => {
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
    }
}

const CHANGE_SET_COLUMNS: &str =
    "run_id, repo, branch, base_commit, worktree, state, review, created_at, updated_at";

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
    /// The run's tool calls in order.
    pub(crate) fn tool_calls(&self, run: &RunId) -> Result<Vec<ToolCallRecord>> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT id, run_id, node_id, tool, args, decision, is_error, summary,
                        duration_ms, started_at
                 FROM tool_calls WHERE run_id = ?1 ORDER BY id",
            )
            .and_then(|mut st| {
                st.query_map([run.as_str()], |r| {
                    Ok(ToolCallRecord {
                        id: r.get(0)?,
                        run_id: r.get::<_, Option<String>>(1)?.map(RunId::from_string),
                        node_id: r.get(2)?,
                        tool: r.get(3)?,
                        args: r.get(4)?,
                        decision: r.get(5)?,
                        is_error: r.get(6)?,
                        summary: r.get(7)?,
                        duration_ms: r.get(8)?,
                        started_at: r.get(9)?,
                    })
                })?
                .collect()
            })
            .map_err(self.sqlite())
        })
    }

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
        let exact = self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {CHANGE_SET_COLUMNS} FROM change_sets WHERE run_id = ?1"
            ))
            .and_then(|mut st| st.query_row([id_or_prefix], change_set_row).optional())
            .map_err(self.sqlite())
        })?;
        if let Some(rec) = exact {
            return Ok(rec);
        }
        let matches: Vec<ChangeSetRecord> = self
            .change_sets()?
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
}
