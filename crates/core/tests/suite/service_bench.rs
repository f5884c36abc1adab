//! Smoke test of the runtime-service benchmark (`examples/service_bench`): its workload,
//! tiny, with recording on and off; every subscriber must see every committed event.

use std::time::Duration;

#[path = "../../examples/service_bench/workload.rs"]
#[allow(dead_code)]
mod workload;

use trellis_protocol::RunStatus;
use workload::Settings;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn service_bench_workload_delivers_every_committed_event() {
    for record in [true, false] {
        let o = workload::run(Settings {
            runs: 2,
            subscribers: 3,
            deltas: 20,
            pace: Duration::from_millis(1),
            record,
            test_command: true,
        })
        .await
        .unwrap();
        assert_eq!(o.statuses, vec![RunStatus::Succeeded; 2], "record {record}");
        assert!(o.missing.is_empty(), "record {record}: {:?}", o.missing);
        assert!(o.checked > 0);
        assert_eq!(o.lagged(), 0);
        assert_eq!(o.agent_calls, 2, "one report call per run");
        assert!(o.raw_deltas >= 2 * 20);
        let first = o.subscribers[0].received;
        assert!(o.subscribers.iter().all(|s| s.received == first));
        assert!(o.session_latency.n > 0 && o.run_latency.n > 0);
        assert!(o.subscribers[0].message_deltas > 0);
        if record {
            // Every published delta is a stored row (coalescing happens before both).
            assert_eq!(o.stored_message_deltas, o.subscribers[0].message_deltas);
            assert!(o.store.stream_events > 0);
        } else {
            assert_eq!(o.stored_message_deltas, 0);
            assert_eq!(o.store.stream_events, 0);
        }
        assert!(o.wall > Duration::ZERO && o.cpu > Duration::ZERO);
    }
}
