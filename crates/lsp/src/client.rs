//! One running language server for one workspace root.

use std::collections::HashMap;
use std::hash::{Hash as _, Hasher as _};
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_lsp::router::Router;
use async_lsp::{ErrorCode, LanguageServer, ServerSocket};
use lsp_types::notification::{LogMessage, Progress, PublishDiagnostics, ShowMessage};
use lsp_types::request::{
    RegisterCapability, WorkDoneProgressCreate, WorkspaceConfiguration, WorkspaceDiagnosticRefresh,
};
use lsp_types::{
    ClientCapabilities, DidChangeTextDocumentParams, DidOpenTextDocumentParams,
    DocumentDiagnosticParams, DocumentDiagnosticReport, DocumentDiagnosticReportResult,
    GotoDefinitionParams, GotoDefinitionResponse, HoverParams, InitializeParams, InitializedParams,
    Location, MarkupKind, NumberOrString, ParameterInformationSettings, PartialResultParams,
    Position, ProgressParamsValue, PublishDiagnosticsClientCapabilities, ReferenceContext,
    ReferenceParams, SignatureHelpClientCapabilities, SignatureHelpParams,
    SignatureInformationSettings, TextDocumentClientCapabilities, TextDocumentContentChangeEvent,
    TextDocumentIdentifier, TextDocumentItem, TextDocumentPositionParams, Url,
    VersionedTextDocumentIdentifier, WindowClientCapabilities, WorkDoneProgress,
    WorkDoneProgressParams, WorkspaceFolder,
};
use tokio::sync::watch;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::answers::{self, Diagnostic, FileDiagnostics, Place, Signatures};
use crate::published::Published;
use crate::spec::{Readiness, ServerSpec, install_hint};
use crate::{Error, Result};

struct State {
    indexing_done: Option<watch::Sender<bool>>,
    published: Arc<Published>,
}

/// Ends the client's main loop (async-lsp panics if its sockets all go away while it runs).
struct Stop;

/// A file the server has open: the version it was last sent as, and a hash of that text.
struct Opened {
    version: i32,
    hash: u64,
}

/// One running language server for one workspace root.
pub struct LspClient {
    name: String,
    root: PathBuf,
    spec: ServerSpec,
    server: ServerSocket,
    indexed: watch::Receiver<bool>,
    opened: Mutex<HashMap<PathBuf, Opened>>,
    published: Arc<Published>,
    /// Whether the server answers `textDocument/diagnostic` (pull diagnostics).
    pulls: bool,
    child: Mutex<Option<tokio::process::Child>>,
    pid: Option<u32>,
    mainloop: tokio::task::JoinHandle<()>,
}

impl std::fmt::Debug for LspClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LspClient")
            .field("server", &self.name)
            .field("root", &self.root)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

fn router(
    readiness: Readiness,
    done_tx: watch::Sender<bool>,
    published: Arc<Published>,
) -> Router<State> {
    let mut router = Router::new(State {
        indexing_done: Some(done_tx),
        published,
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
        .notification::<PublishDiagnostics>(|state, p| {
            state.published.record(p);
            ControlFlow::Continue(())
        })
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
        .request::<WorkspaceDiagnosticRefresh, _>(|_, _| async { Ok(()) })
        .event(|_, _: Stop| ControlFlow::Break(Ok(())));
    router
}

/// What the client can do: progress, pushed diagnostics (typescript-language-server publishes
/// none unless the client says it takes them), signature help with parameter offsets.
fn capabilities() -> ClientCapabilities {
    ClientCapabilities {
        window: Some(WindowClientCapabilities {
            work_done_progress: Some(true),
            ..WindowClientCapabilities::default()
        }),
        text_document: Some(TextDocumentClientCapabilities {
            publish_diagnostics: Some(PublishDiagnosticsClientCapabilities {
                version_support: Some(true),
                ..PublishDiagnosticsClientCapabilities::default()
            }),
            signature_help: Some(SignatureHelpClientCapabilities {
                signature_information: Some(SignatureInformationSettings {
                    documentation_format: Some(vec![MarkupKind::Markdown, MarkupKind::PlainText]),
                    parameter_information: Some(ParameterInformationSettings {
                        label_offset_support: Some(true),
                    }),
                    active_parameter_support: Some(true),
                }),
                ..SignatureHelpClientCapabilities::default()
            }),
            ..TextDocumentClientCapabilities::default()
        }),
        ..ClientCapabilities::default()
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
        let published = Arc::new(Published::default());
        let state_published = published.clone();
        let (mainloop, server) = async_lsp::MainLoop::new_client(move |_server| {
            router(readiness, done_tx, state_published)
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
                message: match e.kind() {
                    std::io::ErrorKind::NotFound => {
                        format!("{e}; {}", install_hint(&spec.program))
                    }
                    _ => e.to_string(),
                },
            })?;
        let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
            return Err(Error::Start {
                program: spec.program.clone(),
                message: "no stdio".into(),
            });
        };
        let pid = child.id();
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
            capabilities: capabilities(),
            initialization_options: spec.initialization_options.clone(),
            ..InitializeParams::default()
        };
        let init = server.initialize(init).await.map_err(|e| Error::Request {
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
            published,
            pulls: init.capabilities.diagnostic_provider.is_some(),
            child: Mutex::new(Some(child)),
            pid,
            mainloop,
        }))
    }

    /// Has the server take in `paths` (the workspace's files of its language) now, ahead of
    /// the first queries: opens each, so the server analyses them in the background (pyright
    /// checks open files, which fills the caches its `references` otherwise fills file by
    /// file on the first lookups). Returns how many were opened; a file that cannot be read
    /// is skipped.
    pub fn prime(&self, paths: &[&str]) -> usize {
        paths.iter().filter(|p| self.sync(p).is_ok()).count()
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
        if self.mainloop.is_finished() {
            return false;
        }
        // An exited process is noticed here before the main loop sees its output end.
        self.child
            .lock()
            .ok()
            .and_then(|mut c| c.as_mut().map(|c| matches!(c.try_wait(), Ok(None))))
            .unwrap_or(false)
    }

    /// The server's process id (while it runs).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The server's program.
    pub fn program(&self) -> &str {
        &self.name
    }

    /// Brings the server's copy of `path` (relative to the root) up to date with the disk:
    /// opens it the first time, sends its new text when it has changed since. Returns its
    /// URI and whether anything was sent.
    fn sync(&self, path: &str) -> Result<(Url, bool)> {
        let full = self
            .root
            .join(path)
            .canonicalize()
            .map_err(|e| Error::Path(format!("{path}: {e}")))?;
        if !full.starts_with(&self.root) {
            return Err(Error::Path(format!("{path}: outside the workspace")));
        }
        let uri = Url::from_file_path(&full)
            .map_err(|()| Error::Path(format!("{path}: not a file path")))?;
        let text =
            std::fs::read_to_string(&full).map_err(|e| Error::Path(format!("{path}: {e}")))?;
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        text.hash(&mut hasher);
        let hash = hasher.finish();
        let mut server = self.server.clone();
        // Sent under the lock, so a request about the file cannot overtake its opening.
        let mut opened = self
            .opened
            .lock()
            .map_err(|_| self.failed("textDocument/didOpen", "a previous call panicked"))?;
        match opened.get_mut(&full) {
            None => {
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
                opened.insert(full, Opened { version: 0, hash });
                Ok((uri, true))
            }
            Some(o) if o.hash != hash => {
                o.version += 1;
                o.hash = hash;
                server
                    .did_change(DidChangeTextDocumentParams {
                        text_document: VersionedTextDocumentIdentifier {
                            uri: uri.clone(),
                            version: o.version,
                        },
                        content_changes: vec![TextDocumentContentChangeEvent {
                            range: None,
                            range_length: None,
                            text,
                        }],
                    })
                    .map_err(|e| self.failed("textDocument/didChange", e))?;
                Ok((uri, true))
            }
            Some(_) => Ok((uri, false)),
        }
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
                uri: self.sync(path)?.0,
            },
            position: Position::new(line - 1, column - 1),
        })
    }

    /// Retries `f` while the server answers `ContentModified` or `ServerCancelled` (it was
    /// still indexing, or the file changed under it).
    async fn retrying<T, F, Fut>(&self, method: &'static str, f: F) -> Result<T>
    where
        F: Fn(ServerSocket) -> Fut,
        Fut: std::future::Future<Output = std::result::Result<T, async_lsp::Error>>,
    {
        let mut wait = Duration::from_millis(50);
        for _ in 0..20 {
            match f(self.server.clone()).await {
                Ok(v) => return Ok(v),
                Err(async_lsp::Error::Response(r))
                    if r.code == ErrorCode::CONTENT_MODIFIED
                        || r.code == ErrorCode::SERVER_CANCELLED =>
                {
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
        Ok(r.map(|h| answers::hover_text(h.contents)))
    }

    /// The signatures of the call whose argument list `path:line:column` is in, and which
    /// parameter that is; `None` when the position is not in a call's arguments.
    pub async fn signature(
        &self,
        path: &str,
        line: u32,
        column: u32,
    ) -> Result<Option<Signatures>> {
        let at = self.position(path, line, column)?;
        let r = self
            .retrying("textDocument/signatureHelp", |mut s| {
                let at = at.clone();
                async move {
                    s.signature_help(SignatureHelpParams {
                        context: None,
                        text_document_position_params: at,
                        work_done_progress_params: WorkDoneProgressParams::default(),
                    })
                    .await
                }
            })
            .await?;
        Ok(r.filter(|h| !h.signatures.is_empty()).map(Signatures::from))
    }

    /// The server's diagnostics for `path`: opens the file (or sends its new text if it has
    /// changed on disk), then asks for them (`textDocument/diagnostic`) when the server
    /// answers that, and takes what it publishes (`textDocument/publishDiagnostics`), waiting
    /// at most `wait` for a publication about this version of the file to settle.
    pub async fn diagnostics(&self, path: &str, wait: Duration) -> Result<FileDiagnostics> {
        let deadline = tokio::time::Instant::now() + wait;
        let before = self.published.seq();
        let (uri, sent) = self.sync(path)?;
        let mut found: Vec<Diagnostic> = Vec::new();
        let mut pulled = false;
        if self.pulls {
            let report = self
                .retrying("textDocument/diagnostic", |mut s| {
                    let uri = uri.clone();
                    async move {
                        s.document_diagnostic(DocumentDiagnosticParams {
                            text_document: TextDocumentIdentifier { uri },
                            identifier: None,
                            previous_result_id: None,
                            work_done_progress_params: WorkDoneProgressParams::default(),
                            partial_result_params: PartialResultParams::default(),
                        })
                        .await
                    }
                })
                .await;
            match report {
                Ok(DocumentDiagnosticReportResult::Report(DocumentDiagnosticReport::Full(r))) => {
                    found.extend(
                        r.full_document_diagnostic_report
                            .items
                            .into_iter()
                            .map(Diagnostic::from),
                    );
                    pulled = true;
                }
                Ok(_) => {}
                Err(e) => tracing::debug!("{e}; waiting for published diagnostics instead"),
            }
        }
        // A server that answered the pull may publish more (rust-analyzer: cargo check's);
        // take what it has published without waiting for it.
        let deadline = if pulled {
            tokio::time::Instant::now()
        } else {
            deadline
        };
        let (published, settled) = self
            .published
            .settled(&uri, sent.then_some(before), deadline)
            .await;
        found.extend(published.into_iter().map(Diagnostic::from));
        Ok(FileDiagnostics {
            diagnostics: answers::sorted(found),
            complete: pulled || settled,
        })
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
