mod pool;
mod python;
mod rust;
mod typescript;

use std::time::Duration;

use trellis_lsp::{FileDiagnostics, LspClient, Signatures};

/// The active signature's label, the active parameter and that parameter's label.
fn active(help: &Signatures) -> (&str, u32, &str) {
    let sig = &help.signatures[help.active_signature as usize];
    (
        sig.label.as_str(),
        sig.active_parameter,
        sig.active_parameter_label.as_str(),
    )
}

/// The signature help at `path:line:column`, which must be in a call's arguments.
async fn signature(lsp: &LspClient, path: &str, line: u32, column: u32) -> Signatures {
    lsp.signature(path, line, column)
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no signature at {path}:{line}:{column}"))
}

/// `path`'s diagnostics, which must come in 30 s.
async fn diagnostics(lsp: &LspClient, path: &str) -> FileDiagnostics {
    let found = lsp
        .diagnostics(path, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(found.complete, "{path}: {found:?}");
    found
}

/// Each diagnostic's line, column, severity, code and source.
fn brief(found: &FileDiagnostics) -> Vec<(u32, u32, &str, &str, &str)> {
    found
        .diagnostics
        .iter()
        .map(|d| {
            (
                d.line,
                d.column,
                d.severity.as_str(),
                d.code.as_str(),
                d.source.as_str(),
            )
        })
        .collect()
}
