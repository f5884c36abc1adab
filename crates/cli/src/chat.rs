//! `trellis chat`: a channel session about the codebase (a discussion agent) — a
//! REPL over the runtime service. Each line is a message; the answer streams as it is
//! recorded. `--json` prints one JSON object per answer (for scripts); `--session` continues
//! a stored session.

use std::io::{BufRead, IsTerminal, Write};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};

use clap::Args;
use serde_json::json;
use trellis_core::service::Service;
use trellis_protocol::{Op, ServiceEventBody, SessionEvent, SessionId, StreamId};

/// `trellis chat` arguments.
#[derive(Debug, Args)]
pub struct ChatArgs {
    /// The channel (sessions of one channel share its name).
    #[arg(long, default_value = "general")]
    pub channel: String,
    /// Continue this stored session instead of starting one.
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// Send this message and exit (otherwise read messages from stdin, one per line).
    #[arg(long, short = 'm', value_name = "TEXT")]
    pub message: Vec<String>,
    /// Print one JSON object per answer, and nothing else.
    #[arg(long)]
    pub json: bool,
}

/// Runs the chat.
pub async fn chat(service: &Arc<Service>, args: ChatArgs) -> anyhow::Result<ExitCode> {
    let mut session: Option<SessionId> = args.session.as_deref().map(SessionId::from_string);
    if let Some(s) = &session {
        // Fails early, naming the session, if it is not a channel session of this store.
        let rec = service.session(s)?;
        if !args.json {
            println!("session {s} ({:?})", rec.owner);
        }
    }
    let interactive = args.message.is_empty() && std::io::stdin().is_terminal() && !args.json;
    let mut lines: Box<dyn Iterator<Item = String>> = if args.message.is_empty() {
        Box::new(std::io::stdin().lock().lines().map_while(Result::ok))
    } else {
        Box::new(args.message.clone().into_iter())
    };
    loop {
        if interactive {
            print!("you> ");
            let _ = std::io::stdout().flush();
        }
        let Some(line) = lines.next() else { break };
        let text = line.trim().to_owned();
        if text.is_empty() {
            continue;
        }
        let live = service.live();
        let op = match &session {
            None => Op::StartChannel {
                channel: args.channel.clone(),
                message: Some(text),
            },
            Some(s) => Op::SessionMessage {
                session: s.clone(),
                text,
            },
        };
        // Stream the answer's text as it is recorded (the session id is known once the
        // first event of a new session arrives).
        let printed = Arc::new(Mutex::new(false));
        let printer = (!args.json).then(|| {
            let printed = printed.clone();
            let known = session.clone();
            tokio::spawn(stream_answer(live, known, printed))
        });
        let result = service.call(op).await;
        if let Some(p) = printer {
            p.abort();
        }
        let out = match result {
            Ok(out) => out,
            Err(e) => {
                if args.json {
                    println!("{}", json!({ "error": e.message }));
                } else {
                    eprintln!("error: {e}");
                }
                continue;
            }
        };
        let id = SessionId::from_string(out["session"].as_str().unwrap_or_default());
        let answer = out["answer"].as_str().unwrap_or_default().to_owned();
        if args.json {
            println!("{}", json!({ "session": id, "answer": answer }));
        } else {
            if !*printed.lock().unwrap_or_else(|p| p.into_inner()) {
                println!("{answer}");
            } else {
                println!();
            }
            if session.is_none() {
                println!("(session {id}; continue it with `trellis chat --session {id}`)");
            }
        }
        session = Some(id);
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints the answer's text deltas of `session` (or of the first channel session that
/// starts) as they arrive.
async fn stream_answer(
    mut live: tokio::sync::broadcast::Receiver<Arc<trellis_core::service::LiveEvent>>,
    mut session: Option<SessionId>,
    printed: Arc<Mutex<bool>>,
) {
    let mut silence = crate::follow::Silence::default();
    while let Ok(e) = live.recv().await {
        let StreamId::Session(s) = &e.stream else {
            continue;
        };
        let ServiceEventBody::Session(ev) = &e.event else {
            continue;
        };
        match (&session, ev) {
            (None, SessionEvent::SessionStarted { owner }) => {
                if matches!(owner, trellis_protocol::SessionOwner::Channel { .. }) {
                    session = Some(s.clone());
                }
            }
            // A long silent wait (a local model reading a long prompt) shows its progress
            // on stderr, once per ten seconds of silence.
            (Some(want), SessionEvent::TurnProgress { .. }) if want == s => {
                if silence.progress_due(want.as_str(), std::time::Instant::now())
                    && let Some(text) = ev.turn_progress_text()
                {
                    eprintln!("  … model {text}");
                }
            }
            (Some(want), _) if want == s => {
                silence.spoke(want.as_str(), std::time::Instant::now());
                if let SessionEvent::MessageDelta { text, .. } = ev {
                    let mut out = std::io::stdout().lock();
                    let _ = write!(out, "{text}");
                    let _ = out.flush();
                    if let Ok(mut p) = printed.lock() {
                        *p = true;
                    }
                } else if let SessionEvent::ToolStarted { name, input, .. } = ev {
                    println!(
                        "\n  → {name} {}",
                        crate::display::truncate(&input.to_string(), 120)
                    );
                }
            }
            _ => {}
        }
    }
}
