//! [`PgStore`] as a [`Backend`]: the lifecycle beside the domain traits the other modules
//! implement.

use crate::backend::Backend;
use crate::{Owner, Result, StoreStats};

use super::PgStore;

impl Backend for PgStore {
    fn watch(&self) -> Option<tokio::sync::broadcast::Receiver<std::sync::Arc<str>>> {
        Some(self.exec.watch())
    }

    fn location(&self) -> String {
        self.url().to_owned()
    }

    fn owner(&self) -> &Owner {
        PgStore::owner(self)
    }

    fn stats(&self) -> StoreStats {
        self.journal_stats()
    }

    /// The database's size on the server (`pg_database_size`), WAL and other databases
    /// aside.
    fn size_on_disk(&self) -> Result<u64> {
        self.read(async |c| {
            let row = c
                .query_one("SELECT pg_database_size(current_database())", &[])
                .await?;
            Ok(u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
        })
    }

    /// Waits for every write sent before: the write lane runs its jobs in order, so an empty
    /// job answers once they are done.
    fn flush(&self) -> Result<()> {
        self.write(async |_| Ok(()))
    }

    /// `VACUUM` of the database (after everything sent before): the server reclaims dead
    /// rows; the files shrink only with `VACUUM FULL`, which an operator runs.
    fn vacuum(&self) -> Result<()> {
        self.write(async |c| {
            c.batch_execute("VACUUM").await?;
            Ok(())
        })
    }
}
