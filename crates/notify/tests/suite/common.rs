//! Events as a service broadcasts them, a notifier fed by hand, reported problems collected.

use std::sync::{Arc, Mutex};

use tokio::sync::broadcast;
use trellis_notify::{Notifier, NotifyConfig, Reporter, outlets};
use trellis_protocol::{
    EventKind, Interrupt, NodeId, RunId, RunStatus, ServiceEvent, ServiceEventBody, StreamId,
    WorkspaceEvent,
};

pub const TS: i64 = 1_764_594_325_123; // 2025-12-01T13:05:25.123Z

pub fn run_event(run: &RunId, seq: u64, kind: EventKind) -> ServiceEvent {
    ServiceEvent {
        stream: StreamId::Run(run.clone()),
        seq,
        ts: TS,
        submission: None,
        event: ServiceEventBody::Run(kind),
    }
}

pub fn created(run: &RunId, workflow: &str) -> ServiceEvent {
    ServiceEvent {
        stream: StreamId::Workspace,
        seq: 1,
        ts: TS,
        submission: None,
        event: ServiceEventBody::Workspace(WorkspaceEvent::RunCreated {
            run: run.clone(),
            workflow: workflow.to_owned(),
            request: "add a flag".to_owned(),
        }),
    }
}

pub fn asked(run: &RunId, seq: u64, node: &str, attempt: u32, question: &str) -> ServiceEvent {
    run_event(
        run,
        seq,
        EventKind::InterruptRaised {
            node: NodeId::from(node),
            attempt,
            interrupt: Interrupt::question(question),
            scratch: serde_json::Value::Null,
        },
    )
}

pub fn status(run: &RunId, seq: u64, status: RunStatus, error: Option<&str>) -> ServiceEvent {
    run_event(
        run,
        seq,
        EventKind::RunStatusChanged {
            status,
            terminal: None,
            error: error.map(str::to_owned),
        },
    )
}

/// Problems reported, in order.
#[derive(Clone, Default)]
pub struct Problems(Arc<Mutex<Vec<String>>>);

impl Problems {
    pub fn reporter(&self) -> Reporter {
        let log = self.0.clone();
        Arc::new(move |line: &str| log.lock().unwrap().push(line.to_owned()))
    }

    pub fn lines(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// A notifier over `config`'s channels with `env` as the environment, fed through the sender.
pub fn notifier(
    config: serde_json::Value,
    env: &[(&str, &str)],
    problems: &Problems,
) -> (Feed, Notifier) {
    let config: NotifyConfig = serde_json::from_value(config).unwrap();
    let env: Vec<(String, String)> = env
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let lookup = move |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    let outlets = outlets(&config, &lookup, &problems.reporter());
    let (tx, rx) = broadcast::channel(64);
    (Feed(tx), Notifier::spawn(rx, outlets, None))
}

/// The broadcast a notifier reads, as a service's live events.
pub struct Feed(broadcast::Sender<Arc<Live>>);

impl Feed {
    pub fn send(&self, event: ServiceEvent) {
        self.0.send(Arc::new(Live(event))).unwrap();
    }
}

/// An event as the live broadcast carries it (the service's `LiveEvent` derefs the same way).
#[derive(Debug)]
pub struct Live(ServiceEvent);

impl std::ops::Deref for Live {
    type Target = ServiceEvent;

    fn deref(&self) -> &ServiceEvent {
        &self.0
    }
}
