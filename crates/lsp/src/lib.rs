//! Language servers as a code-intelligence source.
//!
//! [`LspClient`] starts one language server for one workspace root over stdio (`async-lsp`),
//! completes the handshake, answers the server's own requests (`workspace/configuration`,
//! `client/registerCapability`, `window/workDoneProgress/create`,
//! `workspace/diagnostic/refresh`), waits until it has taken in the workspace ([`Readiness`]:
//! rust-analyzer answers incompletely before its `rustAnalyzer/Indexing` and `cachePriming`
//! progress ends, pyright's references cover only the opened files before it logs the source
//! files it found), opens the files it is asked about (and sends their new text when they
//! have changed on disk), and retries requests the server answers with `ContentModified`. It
//! answers definitions, references, hovers, signatures (`textDocument/signatureHelp`) and
//! diagnostics (pushed `textDocument/publishDiagnostics` kept per file, waited for until they
//! settle; pulled with `textDocument/diagnostic` where the server offers it). Positions in and
//! out are 1-based lines and columns (UTF-16 code units, as LSP counts them).
//!
//! Which server serves which language: [`ServerSpec::for_path`] and [`locate`]. [`LspPool`]
//! keeps one workspace's servers: started on first use, started again after a crash, shut
//! down when idle ([`LspConfig::idle_shutdown_secs`]).

mod answers;
mod client;
mod error;
mod pool;
mod published;
mod spec;

pub use answers::{Diagnostic, FileDiagnostics, Parameter, Place, Signature, Signatures};
pub use client::LspClient;
pub use error::{Error, Result};
pub use pool::LspPool;
pub use spec::{LspConfig, Readiness, ServerCommand, ServerSpec, find, installed_dirs, locate};
