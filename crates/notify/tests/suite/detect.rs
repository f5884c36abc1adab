//! Which events become notifications, and that each does once.

use trellis_notify::{Detector, NotificationKind};
use trellis_protocol::{EventKind, InterruptKind, RunId, RunStatus};

use super::common::{asked, created, run_event, status};

#[test]
fn each_event_is_notified_once_per_run_kind_and_seq() {
    let run = RunId::from_string("0123456789abcdef0123");
    let mut d = Detector::new(Some("http://127.0.0.1:8420/".to_owned()));
    assert!(d.event(&created(&run, "feature")).is_none());

    let input = d
        .event(&asked(&run, 7, "plan", 1, "Which store?\nmore"))
        .unwrap();
    assert_eq!(input.event, NotificationKind::Input);
    assert_eq!(input.workflow.as_deref(), Some("feature"));
    assert_eq!(input.message, "plan asks: Which store?");
    assert_eq!(input.input, Some(InterruptKind::Question));
    assert_eq!(input.outcome, "waiting_input");
    assert_eq!(
        input.url.as_deref(),
        Some("http://127.0.0.1:8420/#/runs/0123456789abcdef0123")
    );
    assert_eq!(input.timestamp, "2025-12-01T13:05:25.123Z");
    assert_eq!(input.id(), "0123456789abcdef0123:input:7");
    // The same event again (a second delivery), and the same activation asking again after
    // its run was resumed: nothing new.
    assert!(
        d.event(&asked(&run, 7, "plan", 1, "Which store?"))
            .is_none()
    );
    assert!(
        d.event(&asked(&run, 12, "plan", 1, "Which store?"))
            .is_none()
    );
    // Its next activation asking is new.
    assert!(d.event(&asked(&run, 20, "plan", 2, "And now?")).is_some());

    // The planned workflow takes over from the one the run was created with.
    let continued = EventKind::RunContinued {
        graph: "bugfix".to_owned(),
        fingerprint: "f".to_owned(),
        params: serde_json::Value::Null,
        input: serde_json::Value::Null,
    };
    assert!(d.event(&run_event(&run, 21, continued)).is_none());

    // Waiting and cancelled are no notifications; failed and succeeded are, once.
    assert!(
        d.event(&status(&run, 8, RunStatus::WaitingInput, None))
            .is_none()
    );
    assert!(
        d.event(&status(&run, 9, RunStatus::Cancelled, None))
            .is_none()
    );
    let failed = d
        .event(&status(&run, 30, RunStatus::Failed, Some("tests failed")))
        .unwrap();
    assert_eq!(
        (
            failed.event,
            failed.outcome.as_str(),
            failed.message.as_str()
        ),
        (NotificationKind::Failed, "failed", "tests failed")
    );
    assert_eq!(failed.workflow.as_deref(), Some("bugfix"));
    assert!(
        d.event(&status(&run, 30, RunStatus::Failed, Some("tests failed")))
            .is_none()
    );
    let done = d
        .event(&status(&run, 40, RunStatus::Succeeded, None))
        .unwrap();
    assert_eq!(done.event, NotificationKind::Finished);
    assert_eq!(done.outcome, "succeeded");
}
