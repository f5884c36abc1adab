//! Checkpoints of tool DAG executions: saved, replaced, read back by another process,
//! removed.

use trellis_store::prelude::*;
use trellis_store::{SqliteStore, StoreOptions};

const ID: &str = "run:node:call_1";

/// Saves a checkpoint twice: the second replaces the first.
fn save(store: &dyn DagCheckpointStore) {
    assert_eq!(store.dag_checkpoint(ID).unwrap(), None);
    store
        .save_dag_checkpoint(ID, r#"{"done":1}"#.into())
        .unwrap();
    store
        .save_dag_checkpoint(ID, r#"{"done":2}"#.into())
        .unwrap();
}

/// Reads back what [`save`] saved, then removes it.
fn read_and_remove(store: &dyn DagCheckpointStore) {
    assert_eq!(
        store.dag_checkpoint(ID).unwrap().as_deref(),
        Some(r#"{"done":2}"#)
    );
    assert_eq!(store.dag_checkpoint("another").unwrap(), None);
    store.remove_dag_checkpoint(ID).unwrap();
    assert_eq!(store.dag_checkpoint(ID).unwrap(), None);
    // Removing what is not there is no error.
    store.remove_dag_checkpoint(ID).unwrap();
}

fn dag_checkpoints_are_saved_replaced_and_removed(store: &dyn DagCheckpointStore) {
    save(store);
    read_and_remove(store);
}
both!(dag_checkpoints_are_saved_replaced_and_removed);

fn dag_checkpoints_are_seen_by_another_store(
    a: &dyn DagCheckpointStore,
    b: &dyn DagCheckpointStore,
) {
    save(a);
    read_and_remove(b);
}
two!(dag_checkpoints_are_seen_by_another_store);

#[test]
fn dag_checkpoints_are_kept_across_reopening() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_workspace(dir.path(), StoreOptions::default()).unwrap();
    save(&store);
    store.flush().unwrap();
    drop(store);
    read_and_remove(&SqliteStore::open_workspace(dir.path(), StoreOptions::default()).unwrap());
}
