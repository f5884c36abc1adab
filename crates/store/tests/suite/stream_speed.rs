//! How fast service stream batches are stored, session materialisation included (a
//! measurement, ignored by default).

use std::time::Instant;

use serde_json::json;
use trellis_protocol::{
    ServiceEvent, SessionEvent, SessionId, SessionOwner, ToolStatus, TurnUsage,
};
use trellis_store::prelude::*;

use super::fixtures::{block_on, session_batch};

const SESSIONS: usize = 8;
const TURNS: u32 = 60;

/// Agent sessions' traffic, one batch per step of a turn, the sessions interleaved: a start,
/// then per turn a user message, the model call (two thought and six message deltas, a
/// completion) and a tool call — 14 events a turn.
fn traffic() -> Vec<Vec<ServiceEvent>> {
    let ids: Vec<SessionId> = (0..SESSIONS)
        .map(|i| SessionId::from_string(format!("run-speed:node-{i}")))
        .collect();
    let mut next = [1u64; SESSIONS];
    let mut batches = Vec::new();
    let mut push = |s: usize, events: Vec<SessionEvent>| {
        let n = events.len() as u64;
        batches.push(session_batch(&ids[s], next[s], events));
        next[s] += n;
    };
    for s in 0..SESSIONS {
        push(
            s,
            vec![SessionEvent::SessionStarted {
                owner: SessionOwner::Channel {
                    channel: format!("c{s}"),
                },
            }],
        );
    }
    let delta = |turn, text: &str| SessionEvent::MessageDelta {
        turn,
        text: text.into(),
    };
    for turn in 1..=TURNS {
        for s in 0..SESSIONS {
            push(
                s,
                vec![
                    SessionEvent::UserMessage {
                        text: "please go on with the next step of the plan".into(),
                    },
                    SessionEvent::TurnStarted {
                        turn,
                        attempt: 1,
                        model: None,
                    },
                    SessionEvent::ThoughtDelta {
                        turn,
                        text: "The user wants the next step; ".into(),
                    },
                    SessionEvent::ThoughtDelta {
                        turn,
                        text: "read the file first.".into(),
                    },
                ],
            );
            push(
                s,
                vec![
                    delta(turn, "Let me "),
                    delta(turn, "read "),
                    delta(turn, "the file "),
                    delta(turn, "before "),
                    delta(turn, "changing "),
                    delta(turn, "it."),
                ],
            );
            push(
                s,
                vec![
                    SessionEvent::TurnCompleted {
                        turn,
                        message: json!({"role": "assistant", "content": "Let me read the file before changing it."}),
                        usage: TurnUsage {
                            prompt_tokens: 1200,
                            completion_tokens: 40,
                        },
                    },
                    SessionEvent::ToolStarted {
                        turn,
                        call_id: format!("call-{turn}"),
                        name: "read_file".into(),
                        input: json!({"path": "src/lib.rs"}),
                    },
                    SessionEvent::ToolCompleted {
                        turn,
                        call_id: format!("call-{turn}"),
                        name: "read_file".into(),
                        output: "fn main() {}\n".repeat(20),
                        status: ToolStatus::Ok,
                        duration_ms: 3,
                    },
                ],
            );
        }
    }
    batches
}

/// This process's CPU time so far (all threads, user and system), in clock ticks (1/100 s
/// on Linux): less sensitive than the wall time to the machine's other load.
fn cpu_ticks() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split(' ').collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}

/// Stores `traffic()` with at most `window` batches in flight; answers events per second and
/// the CPU ticks it took.
fn append_rate(store: &dyn StreamStore, window: usize) -> (f64, u64) {
    let batches = traffic();
    let events: usize = batches.iter().map(Vec::len).sum();
    let cpu = cpu_ticks();
    let started = Instant::now();
    let mut in_flight = std::collections::VecDeque::<trellis_graph::Commit>::new();
    for batch in batches {
        if in_flight.len() == window {
            block_on(in_flight.pop_front().unwrap()).unwrap();
        }
        in_flight.push_back(store.append_stream(batch));
    }
    for commit in in_flight {
        block_on(commit).unwrap();
    }
    let wall = started.elapsed().as_secs_f64();
    (events as f64 / wall, cpu_ticks() - cpu)
}

fn report(what: &str, rounds: Vec<(f64, u64)>) {
    let (mut rates, mut ticks): (Vec<f64>, Vec<u64>) = rounds.into_iter().unzip();
    rates.sort_by(f64::total_cmp);
    ticks.sort_unstable();
    let all: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
    eprintln!(
        "{what}: median {:.0} events/s (rounds: {}), median CPU {} ticks (rounds: {ticks:?})",
        rates[rates.len() / 2],
        all.join(", "),
        ticks[ticks.len() / 2],
    );
}

/// SQLite, `synchronous = NORMAL` (no fsync per commit: the writer's own work), one batch in
/// flight and 64 in flight; 5 rounds of 11,528 events each.
#[test]
#[ignore = "a measurement: cargo nextest run -p trellis-store --run-ignored only \
            sqlite_stream_append_rate --no-capture"]
fn sqlite_stream_append_rate() {
    use trellis_store::{SqliteStore, StoreOptions, Synchronous};
    for window in [1, 64] {
        let rates = (0..5)
            .map(|_| {
                let dir = tempfile::tempdir().unwrap();
                let opts = StoreOptions {
                    synchronous: Synchronous::Normal,
                    ..Default::default()
                };
                let store = SqliteStore::open_workspace(dir.path(), opts).unwrap();
                append_rate(&store, window)
            })
            .collect();
        report(&format!("sqlite, {window} in flight"), rates);
    }
}

/// PostgreSQL on the test cluster, `synchronous_commit = off`, as above.
#[cfg(feature = "postgres")]
#[test]
#[ignore = "a measurement: cargo nextest run -p trellis-store --features postgres \
            --run-ignored only pg_stream_append_rate --no-capture"]
fn pg_stream_append_rate() {
    use trellis_store::Synchronous;
    use trellis_store::pg::{PgOptions, PgStore};
    let cluster = super::pg_support::cluster();
    for window in [1, 64] {
        let rates = (0..5)
            .map(|_| {
                let db = cluster.database();
                let opts = PgOptions {
                    synchronous: Synchronous::Normal,
                    ..Default::default()
                };
                let store = PgStore::connect(&db.url(), opts).unwrap();
                append_rate(&store, window)
            })
            .collect();
        report(&format!("postgres, {window} in flight"), rates);
    }
}
