//! `trellis runs trace RUN`: a stored run's spans — the run, its node activations, agents,
//! model calls and tool calls — as an OTLP/JSON export request (for any OpenTelemetry
//! backend: `curl -H 'Content-Type: application/json' --data @trace.json
//! http://collector:4318/v1/traces`) or a Chrome trace (for Perfetto). Read from the
//! workspace's [`Records`] alone; the mapping is `trellis_telemetry`'s, the same one the live
//! exporter uses (docs/observability.md).

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::ValueEnum;
use trellis_core::Records;
use trellis_telemetry::{Options, StoredRun, chrome, otlp_json, run_spans};

/// What `runs trace` writes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum TraceFormat {
    /// An OTLP/JSON `ExportTraceServiceRequest` (the body of `POST /v1/traces`).
    #[default]
    OtlpJson,
    /// The Chrome trace event format (Perfetto, chrome://tracing, speedscope).
    Chrome,
}

/// Writes the trace of run `run` (an id or a unique prefix) to `output`, or to stdout.
pub fn trace(
    records: &Records,
    run: &str,
    format: TraceFormat,
    output: Option<PathBuf>,
    content: bool,
) -> anyhow::Result<ExitCode> {
    let rec = records.run_record(run)?;
    let stored = StoredRun {
        streams: records.run_streams(&rec.id)?,
        model_calls: records.model_calls(&rec.id)?,
    };
    let spans = run_spans(
        stored,
        Options {
            capture_content: content,
        },
    );
    let doc = match format {
        TraceFormat::OtlpJson => otlp_json::export_request(&otlp_json::Resource::default(), &spans),
        TraceFormat::Chrome => chrome::trace_events(&spans),
    };
    let text = serde_json::to_string(&doc)?;
    match output {
        Some(path) => {
            std::fs::write(&path, text + "\n")
                .with_context(|| format!("writing {}", path.display()))?;
            eprintln!(
                "{} spans of run {} written to {}",
                spans.len(),
                rec.id,
                path.display()
            );
        }
        None => {
            let mut out = std::io::stdout().lock();
            writeln!(out, "{text}")?;
        }
    }
    Ok(ExitCode::SUCCESS)
}
