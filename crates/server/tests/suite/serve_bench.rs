//! Smoke test of the server benchmark (`examples/serve_bench`): a tiny round, every client
//! must see every stored event of its run, in order, and every frame must be timed.

use std::time::Duration;

#[path = "../../examples/serve_bench/workload/mod.rs"]
#[allow(dead_code)]
mod workload;

use workload::{Pacing, Server, Workload};

#[test]
fn serve_bench_round_delivers_every_event_to_every_client() {
    round_of(Workload::Discussion);
}

/// The G1 workload: nine one-agent stages per run, every event delivered too.
#[test]
fn serve_bench_g1_round_delivers_every_event_to_every_client() {
    round_of(Workload::G1);
}

/// Over PostgreSQL: the runs execute in one server, the clients follow them from a second
/// one (events through the database), each client seeing every event once, in order.
#[test]
fn serve_bench_round_over_postgresql_delivers_through_another_server() {
    let cluster = trellis_test_pg::Cluster::shared();
    let db = cluster.database();
    round_on(Workload::G1, Some(&db.url()));
}

fn round_of(workload: Workload) {
    round_on(workload, None);
}

fn round_on(workload: Workload, db: Option<&str>) {
    let server = Server::start_on(
        Pacing {
            query_chunks: 1,
            agent_chunks: 3,
            chunk: Duration::from_millis(1),
            workload,
        },
        db,
    )
    .unwrap();
    assert_eq!(server.follow_addr() != server.addr, db.is_some());
    let r = server.round(2, 2).unwrap();
    assert!(r.failures.is_empty(), "{:?}", r.failures);
    assert_eq!(r.runs_ok, 2);
    assert_eq!(r.client.clients.len(), 4);
    assert!(r.events_per_run > 3, "{}", r.events_per_run);
    assert_eq!(r.frames, 4 * r.events_per_run);
    assert_eq!(r.untapped, 0, "every frame has its publish time");
    assert_eq!(r.latency_all.n as u64, r.frames);
    assert_eq!(r.latency_live.n as u64 + r.replayed, r.frames);
    let (queries, reports) = workload.calls();
    assert_eq!(
        (r.model_calls.0, r.model_calls.1),
        (2 * queries as u64, 2 * reports as u64)
    );
    let deltas = u32::try_from(2 * (queries + 3 * reports)).unwrap();
    assert_eq!(r.model_calls.2, Duration::from_millis(1) * deltas);
    assert!(r.wall > Duration::ZERO && r.client.process_cpu > Duration::ZERO);
    server.shutdown();
}
