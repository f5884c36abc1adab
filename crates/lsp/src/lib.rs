//! Language servers as a code-intelligence source.
//!
//! [`LspClient`] starts one language server for one workspace root over stdio (`async-lsp`),
//! completes the handshake, answers the server's own requests (`workspace/configuration`,
//! `client/registerCapability`, `window/workDoneProgress/create`), waits until it has taken in
//! the workspace ([`Readiness`]: rust-analyzer answers incompletely before its
//! `rustAnalyzer/Indexing` and `cachePriming` progress ends, pyright's references cover only
//! the opened files before it logs the source files it found), opens the files it is asked about, and retries requests
//! the server answers with `ContentModified`. Positions in and out are 1-based lines and
//! columns (UTF-16 code units, as LSP counts them, on the way in).
//!
//! Which server serves which language: [`ServerSpec::for_path`].

use std::collections::HashSet;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_lsp::router::Router;
use async_lsp::{ErrorCode, LanguageServer, ServerSocket};
use lsp_types::notification::{LogMessage, Progress, PublishDiagnostics, ShowMessage};
use lsp_types::request::{RegisterCapability, WorkDoneProgressCreate, WorkspaceConfiguration};
use lsp_types::{
    ClientCapabilities, DidOpenTextDocumentParams, GotoDefinitionParams, GotoDefinitionResponse,
    HoverContents, HoverParams, InitializeParams, InitializedParams, Location, MarkedString,
    NumberOrString, PartialResultParams, Position, ProgressParamsValue, ReferenceContext,
    ReferenceParams, TextDocumentIdentifier, TextDocumentItem, TextDocumentPositionParams, Url,
    WindowClientCapabilities, WorkDoneProgress, WorkDoneProgressParams, WorkspaceFolder,
};
use serde::Serialize;
use tokio::sync::watch;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

/// Progress tokens rust-analyzer uses while it indexes (old and new names).
const INDEXING_TOKENS: &[&str] = &["rustAnalyzer/Indexing", "rustAnalyzer/cachePriming"];

/// What pyright logs once it has enumerated the workspace's source files.
const PYRIGHT_ENUMERATED: &str = "source file";

/// An LSP client error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server could not be started.
    #[error("cannot start {program}: {message}")]
    Start {
        /// The program.
        program: String,
        /// Why.
        message: String,
    },
    /// A request failed.
    #[error("{server}: {method} failed: {message}")]
    Request {
        /// The server.
        server: String,
        /// The LSP method.
        method: &'static str,
        /// Why.
        message: String,
    },
    /// A path outside the workspace, or unreadable.
    #[error("{0}")]
    Path(String),
}

/// A result of this crate.
pub type Result<T> = std::result::Result<T, Error>;

/// How to start a language server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerSpec {
    /// LSP language id of the files (`rust`, `python`, `typescript`, …).
    pub language: &'static str,
    /// The program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// What says the server has taken in the workspace and answers completely.
    pub readiness: Readiness,
}

/// What a language server sends once it has taken in the workspace (before that, answers
/// such as references cover only the files opened so far).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Readiness {
    /// Ready as soon as the handshake is done.
    Immediate,
    /// Ready when a `$/progress` with one of these tokens ends (rust-analyzer's
    /// `rustAnalyzer/Indexing` and `rustAnalyzer/cachePriming`).
    ProgressEnds(&'static [&'static str]),
    /// Ready when a `window/logMessage` contains this text (pyright's and basedpyright's
    /// "Found 2 source files" / "No source files found" once the workspace is enumerated).
    LogMessage(&'static str),
}

impl ServerSpec {
    /// The server for a file, by extension: rust-analyzer for `.rs`, pyright for `.py`,
    /// typescript-language-server for `.ts`/`.tsx`/`.js`/`.jsx`.
    pub fn for_path(path: &Path) -> Option<Self> {
        let ext = path.extension()?.to_str()?;
        let immediate = Readiness::Immediate;
        let (language, program, args, readiness) = match ext {
            "rs" => (
                "rust",
                "rust-analyzer",
                vec![],
                Readiness::ProgressEnds(INDEXING_TOKENS),
            ),
            "py" => (
                "python",
                "pyright-langserver",
                vec!["--stdio"],
                Readiness::LogMessage(PYRIGHT_ENUMERATED),
            ),
            "ts" | "mts" | "cts" => (
                "typescript",
                "typescript-language-server",
                vec!["--stdio"],
                immediate,
            ),
            "tsx" => (
                "typescriptreact",
                "typescript-language-server",
                vec!["--stdio"],
                immediate,
            ),
            "js" | "mjs" | "cjs" => (
                "javascript",
                "typescript-language-server",
                vec!["--stdio"],
                immediate,
            ),
            "jsx" => (
                "javascriptreact",
                "typescript-language-server",
                vec!["--stdio"],
                immediate,
            ),
            _ => return None,
        };
        Some(Self {
            language,
            program: program.to_owned(),
            args: args.into_iter().map(str::to_owned).collect(),
            readiness,
        })
    }
}

/// The `[lsp]` configuration section.
///
/// ```toml
/// [lsp.servers.python]
/// command = "basedpyright-langserver"
/// args = ["--stdio"]
/// ```
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct LspConfig {
    /// Replacement servers by language: `rust`, `python`, `typescript` (also `.tsx`),
    /// `javascript` (also `.jsx`).
    pub servers: std::collections::BTreeMap<String, ServerCommand>,
    /// How long a server may index before it answers anyway (seconds).
    pub ready_timeout_secs: f64,
}

impl Default for LspConfig {
    fn default() -> Self {
        Self {
            servers: std::collections::BTreeMap::new(),
            ready_timeout_secs: 120.0,
        }
    }
}

/// A language server's command.
#[derive(Clone, Debug, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ServerCommand {
    /// The program (on `PATH`, or a path).
    pub command: String,
    /// Its arguments (pyright and typescript-language-server need `--stdio`).
    #[serde(default)]
    pub args: Vec<String>,
}

/// A place in the workspace, 1-based.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Place {
    /// Path relative to the workspace root (absolute when outside it, e.g. a library).
    pub path: String,
    /// Line, 1-based.
    pub line: u32,
    /// Column, 1-based (UTF-16 code units).
    pub column: u32,
    /// Last line of the range, 1-based.
    pub end_line: u32,
}

struct State {
    indexing_done: Option<watch::Sender<bool>>,
}

/// Ends the client's main loop (async-lsp panics if its sockets all go away while it runs).
struct Stop;

/// One running language server for one workspace root.
pub struct LspClient {
    name: String,
    root: PathBuf,
    spec: ServerSpec,
    server: ServerSocket,
    indexed: watch::Receiver<bool>,
    opened: Mutex<HashSet<PathBuf>>,
    child: Mutex<Option<tokio::process::Child>>,
    mainloop: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for LspClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LspClient")
            .field("server", &self.name)
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl LspClient {
    /// Starts `spec` for the workspace at `root` and completes the handshake.
    pub async fn start(spec: &ServerSpec, root: &Path) -> Result<Arc<Self>> {
        let root = root.canonicalize().map_err(|e| Error::Start {
            program: spec.program.clone(),
            message: format!("{}: {e}", root.display()),
        })?;
        let readiness = spec.readiness;
        let (done_tx, indexed) = watch::channel(readiness == Readiness::Immediate);
        let (mainloop, server) = async_lsp::MainLoop::new_client(move |_server| {
            let mut router = Router::new(State {
                indexing_done: Some(done_tx),
            });
            router
                .notification::<Progress>(move |state, p| {
                    let indexing = matches!((&p.token, readiness), (NumberOrString::String(s), Readiness::ProgressEnds(tokens)) if tokens.contains(&s.as_str()));
                    if indexing
                        && matches!(p.value, ProgressParamsValue::WorkDone(WorkDoneProgress::End(_)))
                        && let Some(tx) = state.indexing_done.take()
                    {
                        tx.send_replace(true);
                    }
                    ControlFlow::Continue(())
                })
                .notification::<PublishDiagnostics>(|_, _| ControlFlow::Continue(()))
                .notification::<ShowMessage>(|_, m| {
                    tracing::debug!("language server: {}", m.message);
                    ControlFlow::Continue(())
                })
                .notification::<LogMessage>(move |state, m| {
                    if let Readiness::LogMessage(text) = readiness
                        && m.message.contains(text)
                        && let Some(tx) = state.indexing_done.take()
                    {
                        tx.send_replace(true);
                    }
                    ControlFlow::Continue(())
                })
                .unhandled_notification(|_, _| ControlFlow::Continue(()))
                .request::<WorkspaceConfiguration, _>(|_, params| {
                    let n = params.items.len();
                    async move { Ok(vec![serde_json::Value::Null; n]) }
                })
                .request::<RegisterCapability, _>(|_, _| async { Ok(()) })
                .request::<WorkDoneProgressCreate, _>(|_, _| async { Ok(()) })
                .event(|_, _: Stop| ControlFlow::Break(Ok(())));
            router
        });
        let mut child = tokio::process::Command::new(&spec.program)
            .args(&spec.args)
            .current_dir(&root)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| Error::Start {
                program: spec.program.clone(),
                message: e.to_string(),
            })?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(Error::Start {
                program: spec.program.clone(),
                message: "no stdio".into(),
            });
        };
        let name = spec.program.clone();
        let loop_name = name.clone();
        let mainloop = tokio::spawn(async move {
            if let Err(e) = mainloop
                .run_buffered(stdout.compat(), stdin.compat_write())
                .await
            {
                tracing::debug!("{loop_name}: connection ended: {e}");
            }
        });
        let uri = Url::from_file_path(&root)
            .map_err(|()| Error::Path(format!("{}: not an absolute path", root.display())))?;
        let mut server = server;
        #[allow(deprecated)] // root_uri: older servers still read it.
        let init = InitializeParams {
            process_id: Some(std::process::id()),
            root_uri: Some(uri.clone()),
            workspace_folders: Some(vec![WorkspaceFolder {
                uri,
                name: "workspace".into(),
            }]),
            capabilities: ClientCapabilities {
                window: Some(WindowClientCapabilities {
                    work_done_progress: Some(true),
                    ..WindowClientCapabilities::default()
                }),
                ..ClientCapabilities::default()
            },
            ..InitializeParams::default()
        };
        server.initialize(init).await.map_err(|e| Error::Request {
            server: name.clone(),
            method: "initialize",
            message: e.to_string(),
        })?;
        server
            .initialized(InitializedParams {})
            .map_err(|e| Error::Request {
                server: name.clone(),
                method: "initialized",
                message: e.to_string(),
            })?;
        Ok(Arc::new(Self {
            name,
            root,
            spec: spec.clone(),
            server,
            indexed,
            opened: Mutex::default(),
            child: Mutex::new(Some(child)),
            mainloop,
        }))
    }

    /// Waits (at most `timeout`) until the server has indexed the workspace; true if it has.
    pub async fn ready(&self, timeout: Duration) -> bool {
        let mut rx = self.indexed.clone();
        tokio::time::timeout(timeout, rx.wait_for(|done| *done))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Whether the server's process is still running.
    pub fn alive(&self) -> bool {
        !self.mainloop.is_finished()
    }

    /// Opens `path` (relative to the root) in the server, once.
    fn open(&self, path: &str) -> Result<Url> {
        let full = self.root.join(path);
        let full = full
            .canonicalize()
            .map_err(|e| Error::Path(format!("{path}: {e}")))?;
        if !full.starts_with(&self.root) {
            return Err(Error::Path(format!("{path}: outside the workspace")));
        }
        let uri = Url::from_file_path(&full)
            .map_err(|()| Error::Path(format!("{path}: not a file path")))?;
        let first = self
            .opened
            .lock()
            .map(|mut o| o.insert(full.clone()))
            .unwrap_or(false);
        if first {
            let text =
                std::fs::read_to_string(&full).map_err(|e| Error::Path(format!("{path}: {e}")))?;
            let mut server = self.server.clone();
            server
                .did_open(DidOpenTextDocumentParams {
                    text_document: TextDocumentItem {
                        uri: uri.clone(),
                        language_id: self.spec.language.to_owned(),
                        version: 0,
                        text,
                    },
                })
                .map_err(|e| self.failed("textDocument/didOpen", e))?;
        }
        Ok(uri)
    }

    fn failed(&self, method: &'static str, e: impl std::fmt::Display) -> Error {
        Error::Request {
            server: self.name.clone(),
            method,
            message: e.to_string(),
        }
    }

    fn position(&self, path: &str, line: u32, column: u32) -> Result<TextDocumentPositionParams> {
        if line == 0 || column == 0 {
            return Err(Error::Path(format!(
                "{path}:{line}:{column}: lines and columns are 1-based"
            )));
        }
        Ok(TextDocumentPositionParams {
            text_document: TextDocumentIdentifier {
                uri: self.open(path)?,
            },
            position: Position::new(line - 1, column - 1),
        })
    }

    /// Retries `f` while the server answers `ContentModified` (it was still indexing).
    async fn retrying<T, F, Fut>(&self, method: &'static str, f: F) -> Result<T>
    where
        F: Fn(ServerSocket) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, async_lsp::Error>>,
    {
        let mut wait = Duration::from_millis(50);
        for _ in 0..20 {
            match f(self.server.clone()).await {
                Ok(v) => return Ok(v),
                Err(async_lsp::Error::Response(r)) if r.code == ErrorCode::CONTENT_MODIFIED => {
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(1));
                }
                Err(e) => return Err(self.failed(method, e)),
            }
        }
        Err(self.failed(method, "the server kept answering ContentModified"))
    }

    /// Where the symbol at `path:line:column` is defined.
    pub async fn definition(&self, path: &str, line: u32, column: u32) -> Result<Vec<Place>> {
        let at = self.position(path, line, column)?;
        let r = self
            .retrying("textDocument/definition", |mut s| {
                let at = at.clone();
                async move {
                    s.definition(GotoDefinitionParams {
                        text_document_position_params: at,
                        work_done_progress_params: WorkDoneProgressParams::default(),
                        partial_result_params: PartialResultParams::default(),
                    })
                    .await
                }
            })
            .await?;
        Ok(match r {
            None => Vec::new(),
            Some(GotoDefinitionResponse::Scalar(l)) => vec![self.place(&l)],
            Some(GotoDefinitionResponse::Array(ls)) => ls.iter().map(|l| self.place(l)).collect(),
            Some(GotoDefinitionResponse::Link(ls)) => ls
                .iter()
                .map(|l| {
                    self.place(&Location {
                        uri: l.target_uri.clone(),
                        range: l.target_selection_range,
                    })
                })
                .collect(),
        })
    }

    /// Every reference to the symbol at `path:line:column` (with its declaration).
    pub async fn references(&self, path: &str, line: u32, column: u32) -> Result<Vec<Place>> {
        let at = self.position(path, line, column)?;
        let r = self
            .retrying("textDocument/references", |mut s| {
                let at = at.clone();
                async move {
                    s.references(ReferenceParams {
                        text_document_position: at,
                        work_done_progress_params: WorkDoneProgressParams::default(),
                        partial_result_params: PartialResultParams::default(),
                        context: ReferenceContext {
                            include_declaration: true,
                        },
                    })
                    .await
                }
            })
            .await?;
        let mut places: Vec<Place> = r
            .unwrap_or_default()
            .iter()
            .map(|l| self.place(l))
            .collect();
        places.sort_by(|a, b| (&a.path, a.line, a.column).cmp(&(&b.path, b.line, b.column)));
        Ok(places)
    }

    /// The hover text (type, signature, docs) of the symbol at `path:line:column`.
    pub async fn hover(&self, path: &str, line: u32, column: u32) -> Result<Option<String>> {
        let at = self.position(path, line, column)?;
        let r = self
            .retrying("textDocument/hover", |mut s| {
                let at = at.clone();
                async move {
                    s.hover(HoverParams {
                        text_document_position_params: at,
                        work_done_progress_params: WorkDoneProgressParams::default(),
                    })
                    .await
                }
            })
            .await?;
        Ok(r.map(|h| match h.contents {
            HoverContents::Markup(m) => m.value,
            HoverContents::Scalar(s) => marked(s),
            HoverContents::Array(a) => a.into_iter().map(marked).collect::<Vec<_>>().join("\n\n"),
        }))
    }

    fn place(&self, l: &Location) -> Place {
        let path = l
            .uri
            .to_file_path()
            .map(|p| match p.strip_prefix(&self.root) {
                Ok(rel) => rel.to_string_lossy().replace('\\', "/"),
                Err(_) => p.display().to_string(),
            })
            .unwrap_or_else(|()| l.uri.to_string());
        Place {
            path,
            line: l.range.start.line + 1,
            column: l.range.start.character + 1,
            end_line: l.range.end.line + 1,
        }
    }

    /// Asks the server to shut down and exit; kills it if it does not within 2 s.
    pub async fn shutdown(&self) {
        let mut server = self.server.clone();
        let polite = async {
            let _ = server.shutdown(()).await;
            let _ = server.exit(());
        };
        let _ = tokio::time::timeout(Duration::from_secs(2), polite).await;
        let child = self.child.lock().ok().and_then(|mut c| c.take());
        if let Some(mut child) = child
            && tokio::time::timeout(Duration::from_secs(2), child.wait())
                .await
                .is_err()
        {
            let _ = child.kill().await;
        }
        let _ = self.server.emit(Stop);
    }
}

impl Drop for LspClient {
    fn drop(&mut self) {
        // The main loop ends before its last socket is gone; the child is killed on drop.
        let _ = self.server.emit(Stop);
    }
}

/// The language servers of one workspace: one per server program, started on first use,
/// started again when it has died.
#[derive(Debug)]
pub struct LspPool {
    root: PathBuf,
    ready_timeout: Duration,
    commands: std::collections::BTreeMap<String, ServerCommand>,
    clients: tokio::sync::Mutex<std::collections::HashMap<String, Arc<LspClient>>>,
}

impl LspPool {
    /// A pool for the workspace at `root` with `config`'s servers; a server that has not
    /// finished indexing after `ready_timeout_secs` answers anyway (possibly incompletely).
    pub fn new(root: &Path, config: &LspConfig) -> Self {
        Self {
            root: root.to_path_buf(),
            ready_timeout: Duration::try_from_secs_f64(config.ready_timeout_secs)
                .unwrap_or(Duration::from_secs(120)),
            commands: config.servers.clone(),
            clients: tokio::sync::Mutex::default(),
        }
    }

    /// The running server for `path`'s language (started, or restarted, if need be).
    pub async fn for_path(&self, path: &str) -> Result<Arc<LspClient>> {
        let mut spec = ServerSpec::for_path(Path::new(path)).ok_or_else(|| {
            Error::Path(format!(
                "{path}: no language server for this kind of file (Rust, Python, TypeScript and JavaScript have one)"
            ))
        })?;
        if let Some(c) = self.commands.get(spec.language.trim_end_matches("react")) {
            spec.program.clone_from(&c.command);
            spec.args.clone_from(&c.args);
        }
        let mut clients = self.clients.lock().await;
        if let Some(c) = clients.get(&spec.program)
            && c.alive()
        {
            return Ok(c.clone());
        }
        let client = LspClient::start(&spec, &self.root).await?;
        if !client.ready(self.ready_timeout).await {
            tracing::warn!(
                "{} has not finished indexing after {:?}; answers may be incomplete",
                spec.program,
                self.ready_timeout
            );
        }
        clients.insert(spec.program.clone(), client.clone());
        Ok(client)
    }

    /// Shuts every server down.
    pub async fn shutdown(&self) {
        let clients: Vec<_> = self.clients.lock().await.drain().map(|(_, c)| c).collect();
        for c in clients {
            c.shutdown().await;
        }
    }
}

fn marked(s: MarkedString) -> String {
    match s {
        MarkedString::String(s) => s,
        MarkedString::LanguageString(l) => format!("```{}\n{}\n```", l.language, l.value),
    }
}
