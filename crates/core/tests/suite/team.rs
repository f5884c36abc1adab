//! Services of several processes over one PostgreSQL database (a throwaway cluster on
//! loopback): a service follows a run executing in another one as its batches commit (the
//! store's notifications), not at its next poll, and a subscriber that moves to yet another
//! service with `since` gets the rest of the stream, each event once.

use std::sync::Arc;
use std::time::{Duration, Instant};

use trellis_core::service::{Service, ServiceOptions};
use trellis_core::{InputMode, Runtime};
use trellis_llm::ChatRequest;
use trellis_protocol::{EventKind, Op, RunId, ServiceEvent, ServiceEventBody, StreamId};
use trellis_store::Store;
use trellis_test_pg::Cluster;
use trellis_test_support::scripted::ScriptedProvider;

use super::common::*;

/// A service of the workspace `repo` over its own connection to `url` (another process,
/// as far as the database can tell), whose models answer slowly; `poll` as given.
fn service(repo: &std::path::Path, url: &str, poll: Duration) -> Arc<Service> {
    let store = Store::connect(url, None, Default::default()).unwrap();
    let rt = Runtime::open(repo, &[], &[], store).unwrap();
    let slow = ScriptedProvider::responding(|r: &ChatRequest| {
        // Each model call takes a moment: the run commits its batches over seconds.
        std::thread::sleep(Duration::from_millis(150));
        let asks_queries = r
            .response_format
            .as_ref()
            .is_some_and(|f| f.schema["properties"].get("queries").is_some());
        if asks_queries {
            queries()
        } else {
            report(false, "Stock lives in memory; see ADR 0001.")
        }
    });
    rt.models().install("local", Arc::new(slow));
    Service::start(
        Arc::new(rt),
        ServiceOptions {
            poll,
            ..ServiceOptions::default()
        },
    )
}

fn is_end(e: &ServiceEvent) -> bool {
    matches!(
        &e.event,
        ServiceEventBody::Run(EventKind::RunStatusChanged { status, .. }) if status.is_final()
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_run_in_another_process_is_followed_as_it_commits_and_resumed_elsewhere_with_since() {
    let cluster = Cluster::shared();
    let db = cluster.database();
    let ws = inventory(CONFIG);
    let repo = path_of(&ws);
    // The followers re-read the store only every minute unless told otherwise.
    let minute = Duration::from_secs(60);
    let executing = service(&repo, &db.url(), Duration::from_millis(250));
    let follower = service(&repo, &db.url(), minute);
    let other = service(&repo, &db.url(), minute);

    let out = executing
        .call(Op::StartRun {
            request: "Why is stock kept in memory?".into(),
            repo: None,
            workflow: Some("architecture_discussion".into()),
            include: Vec::new(),
            skip: vec!["decision_documentation".into()],
            input: InputMode::Approve,
            budgets: None,
            plan_only: false,
        })
        .await
        .unwrap();
    let run = RunId::from_string(out["run"].as_str().unwrap());
    let stream = StreamId::Run(run.clone());
    let started = Instant::now();

    // The first follower reads part of the stream, then goes away.
    let mut sub = follower.subscribe(stream.clone(), 0);
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let e = tokio::time::timeout(Duration::from_secs(20), sub.next())
            .await
            .expect("the follower stalled")
            .unwrap()
            .unwrap();
        seen.push(e);
    }
    drop(sub);
    // Another service takes over from the last seq the client saw.
    let since = seen.last().unwrap().seq;
    let mut sub = other.subscribe(stream.clone(), since);
    loop {
        let e = tokio::time::timeout(Duration::from_secs(20), sub.next())
            .await
            .expect("the second follower stalled: notifications did not arrive")
            .unwrap()
            .unwrap();
        let end = is_end(&e);
        seen.push(e);
        if end {
            break;
        }
    }
    assert!(
        started.elapsed() < minute,
        "followed at the pace of the poll, not of the commits"
    );
    executing.wait_run(&run).await;
    let stored = executing.stream_events(&stream, 0, None).unwrap();
    assert_eq!(
        seen.iter().map(|e| e.seq).collect::<Vec<_>>(),
        stored.iter().map(|e| e.seq).collect::<Vec<_>>(),
        "every event once, in order"
    );
    assert_eq!(seen, stored);
    for svc in [executing, follower, other] {
        svc.shutdown().await;
    }
}
