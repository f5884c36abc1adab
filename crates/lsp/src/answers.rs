//! What the client answers, in 1-based lines and columns, and the conversions from LSP's
//! types.

use lsp_types::{
    Documentation, HoverContents, MarkedString, NumberOrString, ParameterLabel,
    SignatureInformation,
};
use serde::Serialize;

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

/// The signatures of the call around a position (`textDocument/signatureHelp`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Signatures {
    /// The callable's signatures (overloads), as the server gives them.
    pub signatures: Vec<Signature>,
    /// Which of them the call matches, 0-based.
    pub active_signature: u32,
}

/// One signature of a callable.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Signature {
    /// The signature (`add(a: number, b: number): number`).
    pub label: String,
    /// Its documentation (Markdown or plain text; empty if none).
    pub documentation: String,
    /// Its parameters, in order.
    pub parameters: Vec<Parameter>,
    /// The parameter the position is at, 0-based (as the server says; 0 when it does not).
    pub active_parameter: u32,
    /// That parameter's label (empty when the signature has no such parameter).
    pub active_parameter_label: String,
}

/// A parameter of a signature.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Parameter {
    /// Its label, as it stands in the signature (`b: number`).
    pub label: String,
    /// Its documentation (empty if none).
    pub documentation: String,
}

/// A problem the language server reports in a file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct Diagnostic {
    /// First line, 1-based.
    pub line: u32,
    /// First column, 1-based (UTF-16 code units).
    pub column: u32,
    /// Last line, 1-based.
    pub end_line: u32,
    /// Column after the end, 1-based.
    pub end_column: u32,
    /// `error`, `warning`, `information`, `hint`, or empty when the server does not say.
    pub severity: String,
    /// The server's code for it (`2322`, `reportArgumentType`, `E0308`; empty if none).
    pub code: String,
    /// Who reports it (`typescript`, `Pyright`, `rust-analyzer`, `rustc`; empty if unknown).
    pub source: String,
    /// What is wrong.
    pub message: String,
}

/// The diagnostics of one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, schemars::JsonSchema)]
pub struct FileDiagnostics {
    /// By position.
    pub diagnostics: Vec<Diagnostic>,
    /// Whether the server answered for this version of the file in time (false: what it
    /// said before, or nothing, once the wait ran out).
    pub complete: bool,
}

impl From<lsp_types::SignatureHelp> for Signatures {
    fn from(h: lsp_types::SignatureHelp) -> Self {
        let signatures: Vec<Signature> = h
            .signatures
            .into_iter()
            .map(|s| signature(s, h.active_parameter))
            .collect();
        let active = h.active_signature.unwrap_or(0);
        Self {
            active_signature: if (active as usize) < signatures.len() {
                active
            } else {
                0
            },
            signatures,
        }
    }
}

fn signature(s: SignatureInformation, active_parameter: Option<u32>) -> Signature {
    let parameters: Vec<Parameter> = s
        .parameters
        .unwrap_or_default()
        .into_iter()
        .map(|p| Parameter {
            label: match p.label {
                ParameterLabel::Simple(l) => l,
                ParameterLabel::LabelOffsets([from, to]) => utf16_slice(&s.label, from, to),
            },
            documentation: p.documentation.map(documentation).unwrap_or_default(),
        })
        .collect();
    let active = s.active_parameter.or(active_parameter).unwrap_or(0);
    Signature {
        active_parameter_label: parameters
            .get(active as usize)
            .map(|p| p.label.clone())
            .unwrap_or_default(),
        active_parameter: active,
        label: s.label,
        documentation: s.documentation.map(documentation).unwrap_or_default(),
        parameters,
    }
}

/// The part of `s` between UTF-16 offsets `from` and `to`.
fn utf16_slice(s: &str, from: u32, to: u32) -> String {
    let units: Vec<u16> = s.encode_utf16().collect();
    let (from, to) = (from as usize, (to as usize).min(units.len()));
    String::from_utf16_lossy(units.get(from..to).unwrap_or_default())
}

fn documentation(d: Documentation) -> String {
    match d {
        Documentation::String(s) => s,
        Documentation::MarkupContent(m) => m.value,
    }
}

impl From<lsp_types::Diagnostic> for Diagnostic {
    fn from(d: lsp_types::Diagnostic) -> Self {
        use lsp_types::DiagnosticSeverity as S;
        Self {
            line: d.range.start.line + 1,
            column: d.range.start.character + 1,
            end_line: d.range.end.line + 1,
            end_column: d.range.end.character + 1,
            severity: match d.severity {
                Some(S::ERROR) => "error",
                Some(S::WARNING) => "warning",
                Some(S::INFORMATION) => "information",
                Some(S::HINT) => "hint",
                _ => "",
            }
            .to_owned(),
            code: match d.code {
                Some(NumberOrString::Number(n)) => n.to_string(),
                Some(NumberOrString::String(s)) => s,
                None => String::new(),
            },
            source: d.source.unwrap_or_default(),
            message: d.message,
        }
    }
}

/// Sorts diagnostics by position and drops repeats (a server that both pushes and answers
/// pulls reports the same ones twice).
pub(crate) fn sorted(mut ds: Vec<Diagnostic>) -> Vec<Diagnostic> {
    ds.sort_by(|a, b| {
        (a.line, a.column, &a.message, &a.source).cmp(&(b.line, b.column, &b.message, &b.source))
    });
    ds.dedup();
    ds
}

/// A hover's text.
pub(crate) fn hover_text(h: HoverContents) -> String {
    match h {
        HoverContents::Markup(m) => m.value,
        HoverContents::Scalar(s) => marked(s),
        HoverContents::Array(a) => a.into_iter().map(marked).collect::<Vec<_>>().join("\n\n"),
    }
}

fn marked(s: MarkedString) -> String {
    match s {
        MarkedString::String(s) => s,
        MarkedString::LanguageString(l) => format!("```{}\n{}\n```", l.language, l.value),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lsp_types::{ParameterInformation, Position, Range};

    #[test]
    fn signature_with_offset_labels_and_active_parameter() {
        let label = "scale(факт: number, by: number): number".to_owned();
        let units = |s: &str| label.encode_utf16().count() as u32 - s.encode_utf16().count() as u32;
        let p = |from: &str, to: &str| ParameterInformation {
            label: ParameterLabel::LabelOffsets([units(from), units(to)]),
            documentation: None,
        };
        let help = lsp_types::SignatureHelp {
            signatures: vec![SignatureInformation {
                label: label.clone(),
                documentation: Some(Documentation::String("Scales.".into())),
                parameters: Some(vec![
                    p("факт: number, by: number): number", ", by: number): number"),
                    p("by: number): number", "): number"),
                ]),
                active_parameter: None,
            }],
            active_signature: Some(7),
            active_parameter: Some(1),
        };
        let s = Signatures::from(help);
        assert_eq!(s.active_signature, 0);
        let sig = &s.signatures[0];
        assert_eq!(sig.parameters[0].label, "факт: number");
        assert_eq!(sig.parameters[1].label, "by: number");
        assert_eq!(sig.active_parameter, 1);
        assert_eq!(sig.active_parameter_label, "by: number");
        assert_eq!(sig.documentation, "Scales.");
    }

    #[test]
    fn diagnostics_are_one_based_sorted_and_deduplicated() {
        let d = |line, message: &str| lsp_types::Diagnostic {
            range: Range::new(Position::new(line, 4), Position::new(line, 9)),
            severity: Some(lsp_types::DiagnosticSeverity::ERROR),
            code: Some(NumberOrString::Number(2322)),
            source: Some("typescript".into()),
            message: message.into(),
            ..lsp_types::Diagnostic::default()
        };
        let ds = sorted(
            [d(3, "b"), d(0, "a"), d(3, "b")]
                .into_iter()
                .map(Diagnostic::from)
                .collect(),
        );
        assert_eq!(ds.len(), 2);
        assert_eq!((ds[0].line, ds[0].column, ds[0].end_column), (1, 5, 10));
        assert_eq!(ds[1].line, 4);
        assert_eq!(ds[1].severity, "error");
        assert_eq!(ds[1].code, "2322");
    }
}
