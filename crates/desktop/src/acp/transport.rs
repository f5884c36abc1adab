//! How the client reaches the agent: a child process (`trellis acp`) or any pair of byte
//! streams (stdio given by a caller, an in-memory pipe in tests). Both become newline-framed
//! JSON-RPC through the SDK's `Lines` transport, with each incoming line checked first: one
//! that is not JSON is reported (an [`Event::Malformed`]) and dropped instead of reaching the
//! SDK, whose parse error the window would never see.

use std::collections::VecDeque;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use agent_client_protocol::Lines;
use futures::channel::mpsc::UnboundedSender;
use futures::{Sink, Stream, StreamExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};

use super::Event;
use crate::error::{Error, Result};

/// Lines of the agent's stderr kept to explain its death.
const STDERR_TAIL: usize = 20;

/// How to start the agent: `program acp args…`.
#[derive(Clone, Debug)]
pub struct AgentCommand {
    /// The `trellis` binary (a path, or a name looked up on `PATH`).
    pub program: PathBuf,
    /// Arguments after `acp` (`--repo DIR`, `-c KEY=VALUE`, …); global flags go first.
    pub args: Vec<String>,
    /// The agent's working directory.
    pub cwd: Option<PathBuf>,
    /// Extra environment variables.
    pub env: Vec<(String, String)>,
}

impl AgentCommand {
    /// `trellis acp` from `PATH`.
    pub fn trellis() -> Self {
        Self {
            program: PathBuf::from("trellis"),
            args: Vec::new(),
            cwd: None,
            env: Vec::new(),
        }
    }
}

type BoxSink = std::pin::Pin<Box<dyn Sink<String, Error = std::io::Error> + Send>>;
type BoxStream = std::pin::Pin<Box<dyn Stream<Item = std::io::Result<String>> + Send>>;

/// A way to the agent, ready to connect.
pub struct Transport {
    pub(crate) reader: Box<dyn AsyncRead + Send + Unpin>,
    pub(crate) writer: Box<dyn AsyncWrite + Send + Unpin>,
    /// The agent process, when this client started it.
    pub(crate) child: Option<tokio::process::Child>,
    /// The last lines the agent wrote to stderr.
    pub(crate) stderr: Arc<Mutex<VecDeque<String>>>,
    /// What the agent is, for messages ("`trellis acp`").
    pub(crate) name: String,
    /// Files under this directory are served to the agent (`fs/read_text_file`).
    pub(crate) files: Option<PathBuf>,
    /// The task reading the agent's stderr (it ends when the agent does).
    pub(crate) stderr_task: Option<tokio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Transport")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl Transport {
    /// Byte streams to an agent already running (its stdout, its stdin).
    pub fn streams(
        reader: impl AsyncRead + Send + Unpin + 'static,
        writer: impl AsyncWrite + Send + Unpin + 'static,
        name: impl Into<String>,
    ) -> Self {
        Self {
            reader: Box::new(reader),
            writer: Box::new(writer),
            child: None,
            stderr: Arc::default(),
            name: name.into(),
            files: None,
            stderr_task: None,
        }
    }

    /// Lets the agent read the files under `root` through the client (`fs/read_text_file`,
    /// advertised in `initialize`): what an editor does for the files it has open.
    pub fn serve_files(mut self, root: PathBuf) -> Self {
        self.files = Some(root);
        self
    }

    /// Starts `cmd.program acp cmd.args…` with piped stdio. Must be called inside a tokio
    /// runtime (the child's pipes register with its reactor).
    pub fn spawn(cmd: &AgentCommand) -> Result<Self> {
        let mut c = tokio::process::Command::new(&cmd.program);
        c.arg("acp")
            .args(&cmd.args)
            .envs(cmd.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        if let Some(dir) = &cmd.cwd {
            c.current_dir(dir);
        }
        let mut child = c.spawn().map_err(|source| Error::Spawn {
            program: cmd.program.clone(),
            source,
        })?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(Error::Pipes(cmd.program.clone()));
        };
        let stderr: Arc<Mutex<VecDeque<String>>> = Arc::default();
        let stderr_task = child.stderr.take().map(|err| {
            let tail = stderr.clone();
            tokio::spawn(async move {
                let mut lines = BufReader::new(err).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    tracing::debug!(target: "trellis_desktop::agent", "{line}");
                    if let Ok(mut t) = tail.lock() {
                        if t.len() == STDERR_TAIL {
                            t.pop_front();
                        }
                        t.push_back(line);
                    }
                }
            })
        });
        Ok(Self {
            reader: Box::new(stdout),
            writer: Box::new(stdin),
            child: Some(child),
            stderr,
            name: format!("{} acp", cmd.program.display()),
            files: None,
            stderr_task,
        })
    }

    /// The last lines of the agent's stderr, joined.
    pub(crate) fn stderr_tail(tail: &Mutex<VecDeque<String>>) -> String {
        tail.lock()
            .map(|t| t.iter().cloned().collect::<Vec<_>>().join("\n"))
            .unwrap_or_default()
    }

    /// The SDK transport: newline-framed lines, incoming ones checked to be JSON.
    pub(crate) fn lines(
        reader: Box<dyn AsyncRead + Send + Unpin>,
        writer: Box<dyn AsyncWrite + Send + Unpin>,
        events: UnboundedSender<Event>,
    ) -> Lines<BoxSink, BoxStream> {
        let incoming = futures::stream::unfold(BufReader::new(reader).lines(), |mut lines| async {
            match lines.next_line().await {
                Ok(Some(line)) => Some((Ok(line), lines)),
                Ok(None) => None,
                Err(e) => Some((Err(e), lines)),
            }
        })
        .filter_map(move |line| {
            let keep = match &line {
                Ok(l) if l.trim().is_empty() => false,
                Ok(l) => match serde_json::from_str::<serde::de::IgnoredAny>(l) {
                    Ok(_) => true,
                    Err(e) => {
                        let _ = events.unbounded_send(Event::Malformed(format!(
                            "the agent sent a line that is not JSON ({e}): {}",
                            clip(l, 200)
                        )));
                        false
                    }
                },
                Err(_) => true,
            };
            futures::future::ready(keep.then_some(line))
        })
        // The SDK keeps a connection whose incoming side ended open while it can still
        // write; an agent that closed its stdout is gone, so end the connection with why.
        .chain(futures::stream::once(async {
            Err(std::io::Error::new(
                std::io::ErrorKind::UnexpectedEof,
                "the agent closed its stdout",
            ))
        }));
        let outgoing = futures::sink::unfold(writer, |mut w, line: String| async move {
            w.write_all(line.as_bytes()).await?;
            w.write_all(b"\n").await?;
            w.flush().await?;
            Ok::<_, std::io::Error>(w)
        });
        Lines::new(Box::pin(outgoing), Box::pin(incoming))
    }
}

/// At most `n` characters of `s`, with an ellipsis when cut.
pub(crate) fn clip(s: &str, n: usize) -> String {
    match s.char_indices().nth(n) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_owned(),
    }
}
