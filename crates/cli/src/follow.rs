//! Follows a run executing in the runtime service: prints its graph progress and its
//! agents' turns as they are committed, until the run stops executing.

use std::collections::HashMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;
use tokio::sync::broadcast;
use trellis_core::service::LiveEvent;
use trellis_protocol::{
    RunId, ServiceEventBody, SessionEvent, StreamId, ToolStatus, WorkspaceEvent,
};

use crate::drive::Progress;

/// Like [`follow`], and also ends when the run stops executing in `service` (after a grace
/// period for its last events), should the announcement on the workspace stream be lost.
pub async fn follow_run(
    service: &trellis_core::service::Service,
    live: &mut broadcast::Receiver<Arc<LiveEvent>>,
    run: &RunId,
    quiet: bool,
) {
    let stopped = async {
        service.wait_run(run).await;
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    };
    if service.is_live(run) {
        tokio::select! {
            () = follow(live, run, quiet) => {}
            () = stopped => {}
        }
    } else {
        // Executing elsewhere (a `trellis worker`): its graph progress comes from the
        // store, until the workers are done with it.
        let since = service
            .run_record(run.as_str())
            .map_or(0, |r| r.summary.last_seq);
        let stored = service.subscribe(StreamId::Run(run.clone()), since);
        tokio::select! {
            () = follow_stored(stored, quiet) => {}
            () = stopped => {}
        }
    }
    service.wait_run(run).await;
}

/// Prints the graph progress of a run executing in another process, read from its stored
/// stream (its agents' turns are not printed: `trellis runs events` and the web UI have
/// them). Never ends by itself but on a failed read.
async fn follow_stored(mut stored: trellis_core::service::Subscription, quiet: bool) {
    let mut progress = Progress::default();
    while let Ok(Some(e)) = stored.next().await {
        if let ServiceEventBody::Run(kind) = &e.event
            && !quiet
        {
            progress.event(kind);
        }
    }
    std::future::pending::<()>().await;
}

/// Prints one run's events from the service's live broadcast (subscribed before the run was
/// started or resumed, so nothing is missed) until the run stops executing here. With
/// `quiet`, prints nothing and only waits.
pub async fn follow(live: &mut broadcast::Receiver<Arc<LiveEvent>>, run: &RunId, quiet: bool) {
    let mut progress = Progress::default();
    let pending = Mutex::new(Printer::default());
    let prefix = format!("{run}:");
    loop {
        let e = match live.recv().await {
            Ok(e) => e,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                if !quiet {
                    println!(
                        "    ({n} progress events skipped; `trellis runs events {run}` has them all)"
                    );
                }
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        match (&e.stream, &e.event) {
            (StreamId::Run(r), ServiceEventBody::Run(kind)) if r == run && !quiet => {
                progress.event(kind);
            }
            (StreamId::Session(s), ServiceEventBody::Session(ev)) => {
                if let Some(node) = s.as_str().strip_prefix(&prefix)
                    && !quiet
                {
                    let mut out = std::io::stdout().lock();
                    print_event(&mut out, &pending, node, ev.clone());
                }
            }
            (_, ServiceEventBody::Workspace(WorkspaceEvent::RunStopped { run: r, .. }))
                if r == run =>
            {
                return;
            }
            _ => {}
        }
    }
}

/// A silent wait shorter than this shows no progress line; longer ones get one such line
/// per this interval (a model reading a long prompt on a few cores, say). The environment
/// variable [`QUIET_ENV`] sets another number of seconds (0: every report).
pub(crate) const QUIET: Duration = Duration::from_secs(10);

/// Names the seconds of silence before a progress line, instead of [`QUIET`].
pub(crate) const QUIET_ENV: &str = "TRELLIS_PROGRESS_QUIET_SECS";

/// [`QUIET`], or the seconds [`QUIET_ENV`] names when it holds a whole number.
fn quiet_from_env() -> Duration {
    std::env::var(QUIET_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(QUIET, Duration::from_secs)
}

/// When each of several speakers (nodes, sessions) last showed something, so that progress
/// reports are printed only into a silence of `quiet` ([`QUIET`] unless [`QUIET_ENV`] says
/// otherwise) and then once per `quiet`.
#[derive(Debug)]
pub(crate) struct Silence {
    last: HashMap<String, Instant>,
    quiet: Duration,
}

impl Default for Silence {
    fn default() -> Self {
        Self {
            last: HashMap::new(),
            quiet: quiet_from_env(),
        }
    }
}

impl Silence {
    /// `key` showed something at `now`.
    pub(crate) fn spoke(&mut self, key: &str, now: Instant) {
        self.last.insert(key.to_owned(), now);
    }

    /// Whether a progress report of `key` at `now` is worth a line (and if so, it counts as
    /// `key` speaking). The first report of a key only marks the start of its silence.
    pub(crate) fn progress_due(&mut self, key: &str, now: Instant) -> bool {
        match self.last.get(key) {
            Some(last) if now.saturating_duration_since(*last) < self.quiet => false,
            Some(_) => {
                self.spoke(key, now);
                true
            }
            None => {
                self.spoke(key, now);
                false
            }
        }
    }
}

/// What the printer keeps between events: every node's unfinished line and when each node
/// last printed.
#[derive(Debug, Default)]
pub(crate) struct Printer {
    open: Vec<(String, String)>,
    silence: Silence,
}

/// Prints one event of `node` to `out`; `printer` holds every node's unfinished line.
pub(crate) fn print_event(
    out: &mut dyn Write,
    printer: &Mutex<Printer>,
    node: &str,
    e: SessionEvent,
) {
    print_event_at(out, printer, node, e, Instant::now());
}

/// [`print_event`] at time `now`.
fn print_event_at(
    out: &mut dyn Write,
    printer: &Mutex<Printer>,
    node: &str,
    e: SessionEvent,
    now: Instant,
) {
    let flush_node = |out: &mut dyn Write, text: &str| {
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let _ = writeln!(out, "    [{node}] {line}");
        }
    };
    let Ok(mut printer) = printer.lock() else {
        return;
    };
    if let SessionEvent::TurnProgress { .. } = &e {
        if printer.silence.progress_due(node, now)
            && let Some(text) = e.turn_progress_text()
        {
            let _ = writeln!(out, "    [{node}] … model {text}");
            let _ = out.flush();
        }
        return;
    }
    printer.silence.spoke(node, now);
    let pending = &mut printer.open;
    if let SessionEvent::MessageDelta { text, .. } = &e {
        let i = match pending.iter().position(|(n, _)| n == node) {
            Some(i) => i,
            None => {
                pending.push((node.to_owned(), String::new()));
                pending.len() - 1
            }
        };
        pending[i].1.push_str(text);
        if let Some(cut) = pending[i].1.rfind('\n') {
            let done: String = pending[i].1.drain(..=cut).collect();
            flush_node(out, &done);
        }
        let _ = out.flush();
        return;
    }
    // Anything else ends the node's streamed text.
    if let Some(i) = pending.iter().position(|(n, _)| n == node) {
        let (_, rest) = pending.remove(i);
        flush_node(out, &rest);
    }
    let first_line =
        |text: &str| crate::display::truncate(text.lines().next().unwrap_or_default(), 160);
    let _ = match e {
        SessionEvent::ToolStarted { name, input, .. } => {
            let args = match input {
                Value::String(s) => s,
                other => other.to_string(),
            };
            writeln!(
                out,
                "    [{node}] → {name} {}",
                crate::display::truncate(&args, 160)
            )
        }
        SessionEvent::ToolCompleted { output, status, .. } => {
            let (label, text) = match status {
                ToolStatus::Ok => ("ok", output.as_str()),
                ToolStatus::Error | ToolStatus::Denied => {
                    ("error:", output.strip_prefix("error: ").unwrap_or(&output))
                }
                ToolStatus::Interrupted => ("interrupted:", ""),
                ToolStatus::Cancelled => ("cancelled", ""),
            };
            writeln!(out, "    [{node}]   {label} {}", first_line(text))
        }
        SessionEvent::ToolProgress { .. } => match e.progress_text() {
            Some(text) => writeln!(out, "    [{node}]   … {}", first_line(&text)),
            None => Ok(()),
        },
        SessionEvent::MessagesReceived { texts, .. } => {
            let mut r = Ok(());
            for t in texts {
                r = r.and(writeln!(out, "    [{node}] ← {}", first_line(&t)));
            }
            r
        }
        SessionEvent::Note { text } => writeln!(out, "    [{node}] note: {text}"),
        SessionEvent::ContextCompacted { .. } => match e.compaction_text() {
            Some(text) => writeln!(out, "    [{node}] {text}"),
            None => Ok(()),
        },
        _ => Ok(()),
    };
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn the_printer_shows_text_by_line_tool_calls_and_notes_per_node() {
        let pending = Mutex::new(Printer::default());
        let mut out = Vec::new();
        let events = [
            (
                "code",
                SessionEvent::MessageDelta {
                    turn: 1,
                    text: "Reading ".into(),
                },
            ),
            (
                "test",
                SessionEvent::Note {
                    text: "index up to date".into(),
                },
            ),
            (
                "code",
                SessionEvent::MessageDelta {
                    turn: 1,
                    text: "the file.\nThen ".into(),
                },
            ),
            (
                "code",
                SessionEvent::ThoughtDelta {
                    turn: 1,
                    text: "hidden".into(),
                },
            ),
            (
                "code",
                SessionEvent::TurnCompleted {
                    turn: 1,
                    message: Value::Null,
                    usage: Default::default(),
                },
            ),
            (
                "code",
                SessionEvent::ToolStarted {
                    turn: 1,
                    call_id: "c1".into(),
                    name: "read_file".into(),
                    input: json!({ "path": "a.rs" }),
                },
            ),
            (
                "code",
                SessionEvent::ToolProgress {
                    turn: 1,
                    call_id: "c1".into(),
                    progress: 2.0,
                    total: Some(5.0),
                    message: Some("reading".into()),
                },
            ),
            (
                "code",
                SessionEvent::ToolCompleted {
                    turn: 1,
                    call_id: "c1".into(),
                    name: "read_file".into(),
                    output: "error: no such file\nmore".into(),
                    status: ToolStatus::Error,
                    duration_ms: 3,
                },
            ),
            (
                "code",
                SessionEvent::MessagesReceived {
                    turn: 2,
                    texts: vec!["user: use b.rs".into()],
                },
            ),
        ];
        for (node, e) in events {
            print_event(&mut out, &pending, node, e);
        }
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "    [test] note: index up to date\n\
             \x20   [code] Reading the file.\n\
             \x20   [code] Then \n\
             \x20   [code] → read_file {\"path\":\"a.rs\"}\n\
             \x20   [code]   … 2/5 (40%) · reading\n\
             \x20   [code]   error: no such file\n\
             \x20   [code] ← user: use b.rs\n"
        );
    }

    #[test]
    fn model_progress_shows_only_in_a_long_silence_and_then_every_ten_seconds() {
        let printer = Mutex::new(Printer::default());
        let mut out = Vec::new();
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let reading = |done| SessionEvent::TurnProgress {
            turn: 1,
            prompt_tokens: 2048,
            prompt_done: done,
            generated: 0,
        };
        let mut print = |node, e, t| print_event_at(&mut out, &printer, node, e, t);
        print(
            "code",
            SessionEvent::TurnStarted {
                turn: 1,
                attempt: 1,
                model: None,
            },
            at(0),
        );
        print("code", reading(512), at(4)); // quiet for 4 s: nothing
        print("code", reading(1024), at(11)); // 11 s: a line
        print("code", reading(1536), at(15)); // 4 s after that line: nothing
        print("test", reading(512), at(15)); // another node's first report: nothing
        print(
            "code",
            SessionEvent::TurnProgress {
                turn: 1,
                prompt_tokens: 2048,
                prompt_done: 2048,
                generated: 32,
            },
            at(22),
        );
        print(
            "code",
            SessionEvent::Note {
                text: "done".into(),
            },
            at(25),
        );
        print("code", reading(100), at(30)); // 5 s after the note: nothing
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "    [code] … model reading the prompt: 1024/2048 tokens (50%)\n\
             \x20   [code] … model writing: 32 tokens\n\
             \x20   [code] note: done\n"
        );
    }
}
