//! From a service's events to [`Notification`]s: an interrupt raised is `input`, a run's
//! status turning `failed` or `succeeded` is `failed` or `finished`. Each is produced once
//! per run, kind and position in the run's log, however often the event reaches the
//! detector; a node asking again after a restart (the same activation re-raising its
//! interrupt at a new position) is recognised too.

use std::collections::{HashMap, VecDeque};

use trellis_protocol::{
    EventKind, InterruptKind, NodeId, Notification, NotificationKind, RunId, RunStatus,
    ServiceEvent, ServiceEventBody, StreamId, WorkspaceEvent, format_utc_ms,
};

/// Runs, and notifications, remembered at most (the oldest are forgotten first).
const REMEMBER: usize = 4096;

/// Turns events into notifications; one per process and service.
#[derive(Debug, Default)]
pub struct Detector {
    workflows: Bounded<RunId, String>,
    seen: Bounded<Key, ()>,
    base_url: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Key {
    /// A run's event at a seq.
    At(RunId, NotificationKind, u64),
    /// An activation's interrupt (raised again at another seq when its run is resumed).
    Asked(RunId, NodeId, u32),
}

impl Detector {
    /// A detector whose notifications link to runs under `base_url` (the web UI's address).
    pub fn new(base_url: Option<String>) -> Self {
        Self {
            base_url,
            ..Self::default()
        }
    }

    /// Sets the web UI's address (known once a server listens).
    pub fn set_base_url(&mut self, base_url: Option<String>) {
        self.base_url = base_url;
    }

    /// Names `run`'s workflow (for a front-end that learned it otherwise than from the events
    /// the detector sees).
    pub fn name_run(&mut self, run: &RunId, workflow: &str) {
        self.workflows.set(run.clone(), workflow.to_owned());
    }

    /// The notification `event` calls for, if any (and if not already produced).
    pub fn event(&mut self, event: &ServiceEvent) -> Option<Notification> {
        match (&event.stream, &event.event) {
            (
                StreamId::Workspace,
                ServiceEventBody::Workspace(WorkspaceEvent::RunCreated { run, workflow, .. }),
            ) => {
                self.workflows.insert(run.clone(), workflow.clone());
                None
            }
            (StreamId::Run(run), ServiceEventBody::Run(kind)) => self.run_event(run, event, kind),
            _ => None,
        }
    }

    fn run_event(
        &mut self,
        run: &RunId,
        event: &ServiceEvent,
        kind: &EventKind,
    ) -> Option<Notification> {
        let (what, outcome, message, node, input) = match kind {
            EventKind::RunStarted { graph, .. } => {
                // A run started elsewhere than through the service's `startRun` (a fork, a
                // resumed run) still gets a name.
                if self.workflows.get(run).is_none() {
                    self.workflows.insert(run.clone(), graph.clone());
                }
                return None;
            }
            // The planned workflow takes over from the planning graph.
            EventKind::RunContinued { graph, .. } => {
                self.workflows.set(run.clone(), graph.clone());
                return None;
            }
            EventKind::InterruptRaised {
                node,
                attempt,
                interrupt,
                ..
            } => {
                if !self
                    .seen
                    .insert_new(Key::Asked(run.clone(), node.clone(), *attempt))
                {
                    return None;
                }
                let asks = match interrupt.kind {
                    InterruptKind::Question => "asks",
                    InterruptKind::Approval => "needs approval",
                    InterruptKind::Review => "needs a review",
                };
                (
                    NotificationKind::Input,
                    "waiting_input",
                    format!("{node} {asks}: {}", one_line(&interrupt.prompt)),
                    Some(node.clone()),
                    Some(interrupt.kind),
                )
            }
            EventKind::RunStatusChanged { status, error, .. } => match status {
                RunStatus::Failed => (
                    NotificationKind::Failed,
                    "failed",
                    error
                        .as_deref()
                        .map_or_else(|| "the run failed".to_owned(), one_line),
                    None,
                    None,
                ),
                RunStatus::Succeeded => (
                    NotificationKind::Finished,
                    "succeeded",
                    "the run succeeded".to_owned(),
                    None,
                    None,
                ),
                // Cancelled runs were cancelled by someone; waiting is told by the interrupt.
                RunStatus::Running | RunStatus::WaitingInput | RunStatus::Cancelled => {
                    return None;
                }
            },
            _ => return None,
        };
        if !self.seen.insert_new(Key::At(run.clone(), what, event.seq)) {
            return None;
        }
        Some(Notification {
            event: what,
            run: run.clone(),
            workflow: self.workflows.get(run).cloned(),
            outcome: outcome.to_owned(),
            message,
            node,
            input,
            url: self.base_url.as_deref().map(|base| run_url(base, run)),
            seq: event.seq,
            timestamp: format_utc_ms(event.ts).replacen(' ', "T", 1),
        })
    }
}

/// The web UI's page of `run` under `base` (`http://127.0.0.1:8420/#/runs/<id>`).
pub fn run_url(base: &str, run: &RunId) -> String {
    format!("{}/#/runs/{run}", base.trim_end_matches('/'))
}

/// The first line of `text`, at most 300 characters.
fn one_line(text: &str) -> String {
    let line = text.trim().lines().next().unwrap_or_default().trim();
    match line.char_indices().nth(300) {
        Some((cut, _)) => format!("{}…", &line[..cut]),
        None => line.to_owned(),
    }
}

/// A map that forgets its oldest entries past [`REMEMBER`].
#[derive(Debug)]
struct Bounded<K, V> {
    map: HashMap<K, V>,
    order: VecDeque<K>,
}

impl<K, V> Default for Bounded<K, V> {
    fn default() -> Self {
        Self {
            map: HashMap::new(),
            order: VecDeque::new(),
        }
    }
}

impl<K: Clone + Eq + std::hash::Hash, V> Bounded<K, V> {
    fn get(&self, key: &K) -> Option<&V> {
        self.map.get(key)
    }

    /// Sets `key` to `value`, replacing what it held.
    fn set(&mut self, key: K, value: V) {
        match self.map.get_mut(&key) {
            Some(held) => *held = value,
            None => self.insert(key, value),
        }
    }

    fn insert(&mut self, key: K, value: V) {
        if self.map.insert(key.clone(), value).is_none() {
            self.order.push_back(key);
            if self.order.len() > REMEMBER
                && let Some(old) = self.order.pop_front()
            {
                self.map.remove(&old);
            }
        }
    }
}

impl<K: Clone + Eq + std::hash::Hash> Bounded<K, ()> {
    /// Whether `key` is new (and remembers it).
    fn insert_new(&mut self, key: K) -> bool {
        if self.map.contains_key(&key) {
            return false;
        }
        self.insert(key, ());
        true
    }
}
