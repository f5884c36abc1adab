//! The store-only reader: a workspace's records read with no runtime (no configuration or
//! models), answering as the service does.

use std::sync::Arc;

use serde_json::json;
use trellis_core::Records;
use trellis_core::records::Error;
use trellis_graph::Engine;
use trellis_protocol::records::RunFilter;
use trellis_store::{Store, StoreOptions};

#[tokio::test]
async fn a_demonstration_run_is_read_and_replayed_from_the_store_alone() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open_workspace(dir.path(), StoreOptions::default()).unwrap();
    let graph = Arc::new(trellis_graph::demo::build("feature", &json!({})).unwrap());
    let outcome = Engine::new(store.clone())
        .start(graph, trellis_graph::demo::feature_input())
        .unwrap()
        .wait()
        .await
        .unwrap();
    let run = outcome.run.clone();

    let records = Records::new(store);
    let listed = records.run_records(&RunFilter::default()).unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(records.run_id(&run.as_str()[..20]).unwrap(), run);
    assert!(records.is_demo(&run).unwrap());
    assert!(records.demo_graph(&run).unwrap().is_some());
    assert_eq!(records.replay(&run).unwrap(), trellis_graph::wire(&outcome));
    assert_eq!(records.checkpoints(&run).unwrap().len(), 10);
    let events = records.run_events(&run, 1, Some(1)).unwrap();
    assert_eq!(events[0].kind.name(), "runStarted");
    // The service's own query reads workflow runs only; a demonstration run is not one.
    assert!(matches!(records.run_state(&run), Err(Error::Runtime(_))));
    assert_eq!(records.usage(&run).unwrap().run.calls, 0);
}
