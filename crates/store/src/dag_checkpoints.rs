//! Checkpoints of tool DAG executions (`dag_checkpoints`): the state of an execution that is
//! paused for a decision or waiting for the user, as JSON the tools crate owns, keyed by the
//! execution's id, behind [`DagCheckpointStore`]. Saving replaces the previous checkpoint; a
//! finished execution's is removed.

use rusqlite::{Connection, OptionalExtension, params};

use crate::error::Result;
use crate::read::Reader;
use crate::schema::now_ms;
use crate::{Msg, Record, SqliteStore};

/// A checkpoint to save (`state: Some`) or remove (`None`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct DagCheckpointWrite {
    id: String,
    state: Option<String>,
}

pub(crate) fn write(conn: &Connection, w: &DagCheckpointWrite) -> rusqlite::Result<i64> {
    match &w.state {
        Some(state) => conn.execute(
            "INSERT INTO dag_checkpoints (id, state, updated_ms) VALUES (?1, ?2, ?3)
             ON CONFLICT (id) DO UPDATE SET state = excluded.state, updated_ms = excluded.updated_ms",
            params![w.id, state, now_ms()],
        )?,
        None => conn.execute("DELETE FROM dag_checkpoints WHERE id = ?1", params![w.id])?,
    };
    Ok(0)
}

impl Reader {
    fn dag_checkpoint(&self, id: &str) -> Result<Option<String>> {
        self.with(|c| {
            c.prepare_cached("SELECT state FROM dag_checkpoints WHERE id = ?1")
                .and_then(|mut st| st.query_row([id], |r| r.get(0)).optional())
                .map_err(self.sqlite())
        })
    }
}

/// Checkpoints of tool DAG executions, by execution id: saved (replacing the previous one),
/// read back to continue, removed when the execution finished.
pub trait DagCheckpointStore: Send + Sync {
    /// Saves the state of DAG execution `id` (JSON), replacing its previous checkpoint.
    fn save_dag_checkpoint(&self, id: &str, state: String) -> Result<()>;

    /// The saved state of DAG execution `id`, if any.
    fn dag_checkpoint(&self, id: &str) -> Result<Option<String>>;

    /// Removes DAG execution `id`'s checkpoint (it finished).
    fn remove_dag_checkpoint(&self, id: &str) -> Result<()>;
}

impl DagCheckpointStore for SqliteStore {
    fn save_dag_checkpoint(&self, id: &str, state: String) -> Result<()> {
        let w = DagCheckpointWrite {
            id: id.to_owned(),
            state: Some(state),
        };
        self.request(|reply| Msg::Record(Record::DagCheckpoint(w), reply))?
            .map(drop)
    }

    fn dag_checkpoint(&self, id: &str) -> Result<Option<String>> {
        self.reader.dag_checkpoint(id)
    }

    fn remove_dag_checkpoint(&self, id: &str) -> Result<()> {
        let w = DagCheckpointWrite {
            id: id.to_owned(),
            state: None,
        };
        self.request(|reply| Msg::Record(Record::DagCheckpoint(w), reply))?
            .map(drop)
    }
}
