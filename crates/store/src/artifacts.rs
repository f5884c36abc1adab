//! Versioned artifacts of runs (the stages' scope cards, research cards and plans; the
//! `three_phase` workflow's discovery.md, plan.md, spec.md, tickets.md): the `artifacts`
//! table, behind [`ArtifactStore`].
//!
//! Writes go through the writer thread as [`Record`]s, like change sets; reads use the
//! reader pool.

use rusqlite::{Connection, OptionalExtension, Row, params, types::Type};
use trellis_protocol::{Artifact, ArtifactStatus, NodeId, RunId};

use crate::error::{Error, Result};
use crate::read::Reader;
use crate::schema::now_ms;
use crate::{Msg, Record, SqliteStore};

/// A new artifact, or a new version of one: [`ArtifactStore::put_artifact`] numbers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewArtifact {
    /// The run.
    pub run: RunId,
    /// The node that produced it.
    pub node: Option<NodeId>,
    /// `scope_card`, `research_card`, `plan`, `discovery`, `spec`, `tickets`, …
    pub kind: String,
    /// The content (markdown or JSON text).
    pub content: String,
    /// Its status.
    pub status: ArtifactStatus,
}

/// A status change for the writer.
pub(crate) struct StatusChange {
    pub(crate) id: i64,
    pub(crate) status: ArtifactStatus,
    pub(crate) feedback: Option<String>,
}

/// Inserts `new` as the next version of its (run, kind); returns its id.
pub(crate) fn insert(conn: &Connection, new: &NewArtifact) -> rusqlite::Result<i64> {
    conn.prepare_cached(
        "INSERT INTO artifacts (run, node, kind, version, content, status, feedback,
                                created_ms, updated_ms)
         VALUES (?1, ?2, ?3,
                 (SELECT COALESCE(MAX(version), 0) + 1 FROM artifacts
                  WHERE run = ?1 AND kind = ?3),
                 ?4, ?5, NULL, ?6, ?6)",
    )?
    .execute(params![
        new.run.as_str(),
        new.node.as_ref().map(NodeId::as_str),
        new.kind,
        new.content,
        new.status.as_str(),
        now_ms()
    ])?;
    Ok(conn.last_insert_rowid())
}

/// Sets an artifact's status and feedback; returns its id, or 0 when there is none.
pub(crate) fn set_status(conn: &Connection, change: &StatusChange) -> rusqlite::Result<i64> {
    let n = conn
        .prepare_cached(
            "UPDATE artifacts SET status = ?2, feedback = ?3, updated_ms = ?4 WHERE id = ?1",
        )?
        .execute(params![
            change.id,
            change.status.as_str(),
            change.feedback,
            now_ms()
        ])?;
    Ok(if n == 0 { 0 } else { change.id })
}

/// The columns an [`Artifact`] is read from, in the row mappers' order (both backends).
pub(crate) const COLUMNS: &str =
    "id, run, node, kind, version, content, status, feedback, created_ms, updated_ms";

/// A stored status (both backends); the error says what was found.
pub(crate) fn parse_status(status: &str) -> Result<ArtifactStatus, String> {
    ArtifactStatus::parse(status).ok_or_else(|| format!("unknown artifact status '{status}'"))
}

fn artifact_row(r: &Row<'_>) -> rusqlite::Result<Artifact> {
    let status: String = r.get(6)?;
    Ok(Artifact {
        id: r.get(0)?,
        run: RunId::from_string(r.get::<_, String>(1)?),
        node: r.get::<_, Option<String>>(2)?.map(NodeId::new),
        kind: r.get(3)?,
        version: r.get(4)?,
        content: r.get(5)?,
        rendered: None,
        status: parse_status(&status).map_err(|detail| {
            rusqlite::Error::FromSqlConversionFailure(6, Type::Text, detail.into())
        })?,
        feedback: r.get(7)?,
        created_ms: r.get(8)?,
        updated_ms: r.get(9)?,
    })
}

impl Reader {
    /// The run's artifacts in creation order.
    pub(crate) fn artifacts(&self, run: &RunId) -> Result<Vec<Artifact>> {
        self.with(|c| {
            c.prepare_cached(&format!(
                "SELECT {COLUMNS} FROM artifacts WHERE run = ?1 ORDER BY id"
            ))
            .and_then(|mut st| st.query_map([run.as_str()], artifact_row)?.collect())
            .map_err(self.sqlite())
        })
    }

    /// One artifact.
    pub(crate) fn artifact(&self, id: i64) -> Result<Option<Artifact>> {
        self.with(|c| {
            c.prepare_cached(&format!("SELECT {COLUMNS} FROM artifacts WHERE id = ?1"))
                .and_then(|mut st| st.query_row([id], artifact_row).optional())
                .map_err(self.sqlite())
        })
    }
}

/// The error for an artifact id that has no row (both backends).
pub(crate) fn not_found(id: i64) -> Error {
    Error::NotFound {
        what: "artifact",
        id: id.to_string(),
    }
}

/// Runs' artifacts, versioned per run and kind: stored, listed, read one by one, and their
/// review status and feedback set.
pub trait ArtifactStore: Send + Sync {
    /// Stores `new` as the next version of its run's artifact of that kind (1, 2, …) and
    /// returns it once committed.
    fn put_artifact(&self, new: NewArtifact) -> Result<Artifact>;

    /// The run's artifacts, every version, in creation order.
    fn artifacts(&self, run: &RunId) -> Result<Vec<Artifact>>;

    /// One artifact; [`Error::NotFound`] when there is none with this id.
    fn artifact(&self, id: i64) -> Result<Artifact>;

    /// Sets an artifact's status and replaces its feedback (`None` clears it); returns the
    /// artifact as committed, or [`Error::NotFound`].
    fn set_artifact_status(
        &self,
        id: i64,
        status: ArtifactStatus,
        feedback: Option<&str>,
    ) -> Result<Artifact>;
}

impl ArtifactStore for SqliteStore {
    fn put_artifact(&self, new: NewArtifact) -> Result<Artifact> {
        let id = self.request(|reply| Msg::Record(Record::Artifact(new), reply))??;
        self.artifact(id)
    }

    fn artifacts(&self, run: &RunId) -> Result<Vec<Artifact>> {
        self.reader.artifacts(run)
    }

    fn artifact(&self, id: i64) -> Result<Artifact> {
        self.reader.artifact(id)?.ok_or_else(|| not_found(id))
    }

    fn set_artifact_status(
        &self,
        id: i64,
        status: ArtifactStatus,
        feedback: Option<&str>,
    ) -> Result<Artifact> {
        let change = StatusChange {
            id,
            status,
            feedback: feedback.map(str::to_owned),
        };
        match self.request(|reply| Msg::Record(Record::ArtifactStatus(change), reply))?? {
            0 => Err(not_found(id)),
            id => self.artifact(id),
        }
    }
}
