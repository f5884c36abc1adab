//! `trellis runs trace`: a real run (the loopback OpenAI mock, an agent that reads a file)
//! exported as OTLP/JSON and as a Chrome trace, each checked by an outside parser: the OTLP
//! protobuf schema with protobuf's strict JSON parser (crates/telemetry/tests/py), and Chrome
//! DevTools' trace engine (crates/telemetry/tests/node); both installed by scripts/setup.

use std::path::{Path, PathBuf};
use std::process::Command;

use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::tonic::trace::v1::Span;
use serde_json::{Value, json};

use super::common::*;
use super::mock::*;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn attr<'a>(
    span: &'a Span,
    key: &str,
) -> Option<&'a opentelemetry_proto::tonic::common::v1::any_value::Value> {
    span.attributes
        .iter()
        .find(|kv| kv.key == key)
        .and_then(|kv| kv.value.as_ref()?.value.as_ref())
}

fn text(span: &Span, key: &str) -> Option<String> {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as Any;
    match attr(span, key)? {
        Any::StringValue(s) => Some(s.clone()),
        _ => None,
    }
}

/// The loopback OpenAI mock whose agent reads `inventory.py`, then answers.
fn reading_agent() -> (Wire, Seen) {
    serve(scripted_agent(vec![(
        "call_1",
        "read_file",
        json!({ "path": "inventory.py" }),
    )]))
}

/// A loopback OTLP/HTTP receiver accepting every export.
fn otlp_receiver() -> trellis_test_http::Server {
    trellis_test_http::Server::concurrent(|_| {
        trellis_test_http::Response::new(200, "application/x-protobuf", Vec::new())
    })
}

/// The mock's configuration with live export to `collector`.
fn exporting_config(url: &str, collector: &trellis_test_http::Server) -> String {
    format!(
        "{}\n[telemetry]\notlp_endpoint = \"{}\"\n",
        mock_config(url),
        collector.url()
    )
}

/// Runs a checker; its JSON summary.
fn check(mut cmd: Command, what: &str) -> Value {
    let out = cmd.output().unwrap_or_else(|e| {
        panic!("{what}: {e} (scripts/setup installs it: scripts/setup.d/76-otel.sh)")
    });
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{what} refused the trace: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{what}: {e}: {stdout}"))
}

#[test]
fn runs_trace_exports_a_real_run_as_otlp_json_and_a_chrome_trace() {
    let (url, _seen) = reading_agent();
    let ws = trellis_test_support::example_repo("inventory", &mock_config(&url)).unwrap();
    let out = discuss(
        &ws,
        "Let's discuss the decision to keep stock in memory",
        &["--no-input", "--no-review"],
    );
    let run = run_id(&out);

    // OTLP/JSON on stdout, decoded by the OpenTelemetry SDK's own types.
    let text_out = ok(args(isolated(ws.path()), &["runs", "trace", &run[..12]]));
    let req: ExportTraceServiceRequest = serde_json::from_str(&text_out).unwrap();
    let spans = &req.resource_spans[0].scope_spans[0].spans;
    let by_name = |prefix: &str| -> Vec<&Span> {
        spans
            .iter()
            .filter(|s| s.name.starts_with(prefix))
            .collect()
    };
    let root = by_name("invoke_workflow");
    assert_eq!(
        root.len(),
        1,
        "{:?}",
        spans.iter().map(|s| &s.name).collect::<Vec<_>>()
    );
    assert_eq!(root[0].name, "invoke_workflow architecture_discussion");
    assert!(root[0].parent_span_id.is_empty());
    assert_eq!(
        text(root[0], "trellis.run.status").as_deref(),
        Some("succeeded")
    );
    let trace_hex: String = root[0]
        .trace_id
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    assert_eq!(trace_hex, run, "the trace id is the run id");
    assert!(spans.iter().all(|s| s.trace_id == root[0].trace_id));
    for s in spans {
        assert!(
            s.parent_span_id.is_empty() || spans.iter().any(|p| p.span_id == s.parent_span_id),
            "{}: parent missing",
            s.name
        );
    }
    let stage = by_name("node architectural_analysis");
    assert_eq!(stage.len(), 1);
    let agent = by_name("invoke_agent ");
    assert!(!agent.is_empty());
    let analysis_agent = agent
        .iter()
        .find(|a| a.parent_span_id == stage[0].span_id)
        .expect("the analysis agent under its stage");
    let chats: Vec<_> = by_name("chat mock-model")
        .into_iter()
        .filter(|c| c.parent_span_id == analysis_agent.span_id)
        .collect();
    assert_eq!(chats.len(), 2, "a turn with the tool call, then the answer");
    assert!(attr(chats[0], "gen_ai.usage.input_tokens").is_some());
    let tool = by_name("execute_tool read_file");
    assert_eq!(tool.len(), 1);
    assert_eq!(tool[0].parent_span_id, analysis_agent.span_id);
    assert_eq!(
        text(tool[0], "gen_ai.tool.call.id").as_deref(),
        Some("call_1")
    );
    // The orchestrator's structured calls have no turn: spans of their own, with the model.
    assert!(by_name("chat mock-model").len() > chats.len());
    // No content by default; `--content` adds the prompts and the tool's arguments.
    assert!(!text_out.contains("inventory.py"), "content leaked");
    let with = ok(args(
        isolated(ws.path()),
        &["runs", "trace", &run, "--content"],
    ));
    assert!(with.contains("gen_ai.tool.call.arguments") && with.contains("inventory.py"));

    // Files, checked by outside parsers.
    let dir = tempfile::tempdir().unwrap();
    let otlp = dir.path().join("trace.json");
    let chrome = dir.path().join("trace.chrome.json");
    ok(args(
        isolated(ws.path()),
        &["runs", "trace", &run, "-o", otlp.to_str().unwrap()],
    ));
    ok(args(
        isolated(ws.path()),
        &[
            "runs",
            "trace",
            &run,
            "--format",
            "chrome",
            "--output",
            chrome.to_str().unwrap(),
        ],
    ));
    let root_dir = repo_root();
    let python = std::env::var_os("HOME")
        .map(PathBuf::from)
        .unwrap()
        .join(".cache/trellis/otel-py-venv/bin/python");
    let mut py = Command::new(python);
    py.arg(root_dir.join("crates/telemetry/tests/py/check_otlp.py"))
        .arg(&otlp);
    let summary = check(py, "check_otlp.py (protobuf's JSON parser, OTLP schema)");
    assert_eq!(summary["spans"], json!(spans.len()), "{summary}");
    assert_eq!(
        summary["roots"],
        json!(["invoke_workflow architecture_discussion"])
    );

    let mut node = Command::new("node");
    node.arg(root_dir.join("crates/telemetry/tests/node/chrome-trace.mjs"))
        .arg(&chrome);
    let summary = check(node, "chrome-trace.mjs (Chrome DevTools' trace engine)");
    assert_eq!(summary["entries"], json!(spans.len()), "{summary}");
}

#[test]
fn a_real_run_exports_its_spans_live_to_an_otlp_http_receiver() {
    use prost::Message;

    let collector = otlp_receiver();
    let (url, _seen) = reading_agent();
    // The mock model has a price: its tokens are costed in the metrics.
    let config = format!(
        "{}\n[models.profiles.mock.price]\ninput_per_mtok = 1000.0\noutput_per_mtok = 2000.0\n",
        exporting_config(&url, &collector)
    );
    let ws = trellis_test_support::example_repo("inventory", &config).unwrap();
    let out = discuss(
        &ws,
        "Let's discuss the decision to keep stock in memory",
        &["--no-input", "--no-review"],
    );
    let run = run_id(&out);

    // What the receiver got: OTLP/HTTP protobuf bodies, decoded — the spans, and the run
    // counters as OTel metrics once at exit.
    let (metrics, traces): (Vec<_>, Vec<_>) = collector
        .requests()
        .into_iter()
        .partition(|r| r.target == "/v1/metrics");
    assert_eq!(metrics.len(), 1, "the metrics, sent once at exit");
    let counted = ExportMetricsServiceRequest::decode(metrics[0].body.as_slice()).unwrap();
    let counted = &counted.resource_metrics[0].scope_metrics[0].metrics;
    let names: Vec<&str> = counted.iter().map(|m| m.name.as_str()).collect();
    assert!(names.contains(&"trellis.tool_calls"), "{names:?}");
    assert_counted_by_model(counted);
    let mut live: Vec<Span> = Vec::new();
    for r in &traces {
        assert_eq!(
            (r.method.as_str(), r.target.as_str()),
            ("POST", "/v1/traces")
        );
        assert_eq!(r.header("content-type"), Some("application/x-protobuf"));
        let req = ExportTraceServiceRequest::decode(r.body.as_slice()).unwrap();
        for rs in req.resource_spans {
            for ss in rs.scope_spans {
                live.extend(ss.spans);
            }
        }
    }
    let names: Vec<&str> = live.iter().map(|s| s.name.as_str()).collect();
    let root = live
        .iter()
        .find(|s| s.name == "invoke_workflow architecture_discussion")
        .unwrap_or_else(|| panic!("no run span in {names:?}"));
    let trace_hex: String = root.trace_id.iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(trace_hex, run);
    for expected in [
        "node architectural_analysis",
        "execute_tool read_file",
        "chat mock-model",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    // Live, a turn names its model (from its `turnStarted`).
    let chat = live.iter().find(|s| s.name == "chat mock-model").unwrap();
    let model = chat
        .attributes
        .iter()
        .find(|kv| kv.key == "gen_ai.request.model")
        .and_then(|kv| kv.value.as_ref())
        .map(|v| format!("{v:?}"));
    assert!(
        model
            .as_deref()
            .is_some_and(|m| m.contains("\"mock-model\"")),
        "{model:?}"
    );
    assert!(!String::from_utf8_lossy(&traces[0].body).contains("inventory.py"));

    // The same spans, ids and parents as the stored run's trace: one mapping.
    let stored: ExportTraceServiceRequest =
        serde_json::from_str(&ok(args(isolated(ws.path()), &["runs", "trace", &run]))).unwrap();
    let stored = &stored.resource_spans[0].scope_spans[0].spans;
    for s in &live {
        let twin = stored
            .iter()
            .find(|t| t.span_id == s.span_id)
            .unwrap_or_else(|| panic!("live span {} is not in the stored trace", s.name));
        assert_eq!(twin.parent_span_id, s.parent_span_id, "{}", s.name);
        assert_eq!(
            twin.start_time_unix_nano, s.start_time_unix_nano,
            "{}",
            s.name
        );
    }
}

/// The tokens of the exported metrics are by model, and the priced model's cost is counted.
fn assert_counted_by_model(counted: &[opentelemetry_proto::tonic::metrics::v1::Metric]) {
    use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point::Value as N};
    let sum = |name: &str| {
        let metric = counted.iter().find(|m| m.name == name);
        match metric.and_then(|m| m.data.as_ref()) {
            Some(Data::Sum(sum)) => sum.data_points.clone(),
            other => panic!("{name}: {other:?}"),
        }
    };
    let tokens = sum("trellis.gen_ai.tokens");
    assert!(!tokens.is_empty());
    assert!(
        tokens
            .iter()
            .all(|p| format!("{:?}", p.attributes).contains("\"mock-model\"")),
        "{tokens:?}"
    );
    let cost = sum("trellis.gen_ai.cost_usd");
    assert_eq!(cost.len(), 1, "{cost:?}");
    assert!(format!("{:?}", cost[0].attributes).contains("\"mock-model\""));
    assert!(
        matches!(cost[0].value, Some(N::AsDouble(usd)) if usd > 0.0),
        "{cost:?}"
    );
}

/// The overhead benchmark of live export (docs/benchmarks.md, "Telemetry"): the scripted
/// agent run above through the binary, `TRELLIS_OVERHEAD_RUNS` times (default 8) with export
/// off and on (a loopback OTLP/HTTP receiver), interleaved; prints the medians. Ignored by
/// default (about a minute): `cargo nextest run -p trellis --run-ignored only overhead`.
#[test]
#[ignore = "benchmark: run explicitly"]
fn overhead_of_live_export_on_a_scripted_agent_run() {
    let n: usize = std::env::var("TRELLIS_OVERHEAD_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(8);
    let collector = otlp_receiver();
    let (url, _seen) = reading_agent();
    let off = trellis_test_support::example_repo("inventory", &mock_config(&url)).unwrap();
    let on_config = exporting_config(&url, &collector);
    let on = trellis_test_support::example_repo("inventory", &on_config).unwrap();
    let request = "Let's discuss the decision to keep stock in memory";
    // One warm-up each (index, caches).
    discuss(&off, request, &["--no-input", "--no-review"]);
    discuss(&on, request, &["--no-input", "--no-review"]);
    let (mut t_off, mut t_on) = (Vec::new(), Vec::new());
    for _ in 0..n {
        for (ws, times) in [(&off, &mut t_off), (&on, &mut t_on)] {
            let started = std::time::Instant::now();
            discuss(ws, request, &["--no-input", "--no-review"]);
            times.push(started.elapsed().as_secs_f64() * 1000.0);
        }
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    // Each on run against the off run just before it: a drift of the machine's load
    // between pairs cancels out.
    let mut paired: Vec<f64> = t_on.iter().zip(&t_off).map(|(on, off)| on / off).collect();
    let paired = median(&mut paired);
    let (m_off, m_on) = (median(&mut t_off), median(&mut t_on));
    let spans: usize = collector.requests().len();
    println!(
        "live export overhead, scripted agent run ({n} runs each, interleaved): off median {m_off:.0} ms, \
         on median {m_on:.0} ms, ratio of medians {:.3}, median of paired ratios {paired:.3} \
         ({spans} export requests); off {t_off:.0?}, on {t_on:.0?}",
        m_on / m_off
    );
    assert!(spans > 0, "export was on");
}
