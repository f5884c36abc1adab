//! Checkpoints of tool DAG executions on PostgreSQL: [`DagCheckpointStore`] for [`PgStore`].

use tokio_postgres::types::{ToSql, Type};

use super::PgStore;
use crate::DagCheckpointStore;
use crate::error::Result;
use crate::schema::now_ms;

impl DagCheckpointStore for PgStore {
    fn save_dag_checkpoint(&self, id: &str, state: String) -> Result<()> {
        let id = id.to_owned();
        self.write(async move |c| {
            let now = now_ms();
            let params: [(&(dyn ToSql + Sync), Type); 3] =
                [(&id, Type::TEXT), (&state, Type::TEXT), (&now, Type::INT8)];
            c.execute_typed(
                "INSERT INTO dag_checkpoints (id, state, updated_ms) VALUES ($1, $2, $3)
                 ON CONFLICT (id) DO UPDATE SET state = excluded.state,
                                                updated_ms = excluded.updated_ms",
                &params,
            )
            .await?;
            Ok(())
        })
    }

    fn dag_checkpoint(&self, id: &str) -> Result<Option<String>> {
        let id = id.to_owned();
        self.read(async move |c| {
            let row = c
                .query_typed_opt(
                    "SELECT state FROM dag_checkpoints WHERE id = $1",
                    &[(&id, Type::TEXT)],
                )
                .await?;
            Ok(row.map(|r| r.try_get(0)).transpose()?)
        })
    }

    fn remove_dag_checkpoint(&self, id: &str) -> Result<()> {
        let id = id.to_owned();
        self.write(async move |c| {
            c.execute_typed(
                "DELETE FROM dag_checkpoints WHERE id = $1",
                &[(&id, Type::TEXT)],
            )
            .await?;
            Ok(())
        })
    }
}
