//! Every domain trait is object-safe, `Send` and `Sync`: a feature holds the store as the one
//! trait it persists through (`Arc<dyn ToolGraphStore>`, `&dyn ReviewStore`, …), converted
//! from the `Arc<Store>` the `[store]` section opened, and each answers through the trait
//! object — on SQLite and on PostgreSQL.

use std::sync::Arc;

use trellis_protocol::{RunId, StreamId};
use trellis_store::{
    ArtifactStore, ClientSessionStore, DagCheckpointStore, ReviewStore, RunFilter, RunStore,
    SessionFilter, SessionStore, Store, StoreConfig, StreamStore, ToolGraphStore, UsageStore,
};

fn shared<T: Send + Sync + ?Sized>(_: &T) {}

#[test]
fn every_domain_trait_is_a_shareable_trait_object_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let config = StoreConfig::default();
    let store = Store::open_configured(dir.path(), &config, Default::default(), false).unwrap();
    assert!(
        store.location().ends_with("trellis.db"),
        "{}",
        store.location()
    );
    every_domain_answers(store);
}

#[cfg(feature = "postgres")]
#[test]
fn every_domain_trait_is_a_shareable_trait_object_on_postgres() {
    let cluster = trellis_test_pg::Cluster::shared();
    let db = cluster.database();
    let bare = db
        .url()
        .replacen(&format!(":{}@", trellis_test_pg::PASSWORD), "@", 1);
    let config = StoreConfig {
        url: Some(bare),
        password_env: Some("TRELLIS_NOT_READ_HERE".into()),
        ..StoreConfig::default()
    };
    // The password as `password_env`'s variable would give it.
    let password = config
        .password_from(|_| Some(trellis_test_pg::PASSWORD.to_owned()))
        .unwrap();
    let url = config.url.as_deref().unwrap();
    let store = Store::connect(url, password.as_deref(), Default::default()).unwrap();
    assert!(
        store.location().starts_with("postgres://"),
        "{}",
        store.location()
    );
    every_domain_answers(store);
}

fn every_domain_answers(store: Arc<Store>) {
    let run = RunId::from_string("run-none");

    let runs: Arc<dyn RunStore> = store.clone();
    let usage: Arc<dyn UsageStore> = store.clone();
    let review: Arc<dyn ReviewStore> = store.clone();
    let artifacts: Arc<dyn ArtifactStore> = store.clone();
    let streams: Arc<dyn StreamStore> = store.clone();
    let sessions: Arc<dyn SessionStore> = store.clone();
    let clients: Arc<dyn ClientSessionStore> = store.clone();
    let dags: Arc<dyn DagCheckpointStore> = store.clone();
    let graph: Arc<dyn ToolGraphStore> = store.clone();
    shared(&*runs);
    shared(&*usage);
    shared(&*review);
    shared(&*artifacts);
    shared(&*streams);
    shared(&*sessions);
    shared(&*clients);
    shared(&*dags);
    shared(&*graph);

    assert!(runs.list_runs(&RunFilter::default()).unwrap().is_empty());
    assert!(usage.tool_calls(&run).unwrap().is_empty());
    assert!(review.change_sets().unwrap().is_empty());
    assert!(artifacts.artifacts(&run).unwrap().is_empty());
    assert_eq!(streams.stream_last_seq(&StreamId::Workspace).unwrap(), 0);
    assert!(
        sessions
            .sessions(&SessionFilter::default())
            .unwrap()
            .is_empty()
    );
    assert!(clients.client_sessions("acp").unwrap().is_empty());
    dags.save_dag_checkpoint("dag-1", "{}".into()).unwrap();
    assert_eq!(dags.dag_checkpoint("dag-1").unwrap().as_deref(), Some("{}"));
    assert!(graph.tool_graph().unwrap().nodes.is_empty());
}
