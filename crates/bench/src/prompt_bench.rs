//! `trellis-prompt-bench`: how reliably the embedded model answers Trellis's real requests in
//! each tool format (`grammar`, `native`), on the committed prompt set
//! (`fixtures/prompt-set/cases.jsonl`: tool calls, final reports, structured answers).
//!
//! ```sh
//! cargo build -p trellis-bench --bin trellis-prompt-bench   # llama.cpp is optimised in dev builds
//! flock /tmp/trellis-model.lock target/debug/trellis-prompt-bench \
//!     --format grammar,native --out prompt-bench.jsonl
//! target/debug/trellis-prompt-bench --out prompt-bench.jsonl --report   # the table only
//! ```
//!
//! Every case runs greedily (temperature 0) once per format; each result is appended to the
//! `--out` JSONL as soon as it is known, and a case already there is not run again, so a
//! killed run resumes where it stopped. The table (markdown) goes to stdout at the end.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::Context;
use clap::Parser;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_llm::embedded::{EmbeddedProvider, EmbeddedSettings, ModelSource, ToolFormat};
use trellis_llm::normalise::{NormaliseOptions, normalise_value};
use trellis_llm::{ChatRequest, ModelProvider};

/// Tool-call and structured-answer reliability of the embedded model, per tool format.
#[derive(Debug, Parser)]
#[command(
    name = "trellis-prompt-bench",
    version,
    about = "How reliably the embedded model answers Trellis's real requests in each tool format (grammar, native), on the committed prompt set."
)]
struct Args {
    /// The GGUF (default: the `local` profile's model in ~/.cache/trellis/models).
    #[arg(long)]
    model: Option<PathBuf>,
    /// The prompt set.
    #[arg(long, default_value = "fixtures/prompt-set/cases.jsonl")]
    cases: PathBuf,
    /// Formats to run, in order.
    #[arg(long, value_delimiter = ',', default_value = "grammar,native")]
    format: Vec<String>,
    /// Results (JSONL), appended per case; cases already in it are skipped.
    #[arg(long, default_value = "prompt-bench.jsonl")]
    out: PathBuf,
    /// Run only these case ids.
    #[arg(long, value_delimiter = ',')]
    only: Vec<String>,
    /// Context size (the `local` profile's).
    #[arg(long, default_value_t = 16_384)]
    context: u32,
    /// `max_tokens` of requests that set none (the `local` profile's).
    #[arg(long, default_value_t = 1024)]
    max_tokens: u32,
    /// CPU threads (default: the provider's).
    #[arg(long)]
    threads: Option<u32>,
    /// Print the table of the results in `--out` and run nothing.
    #[arg(long)]
    report: bool,
}

/// One case of the prompt set.
#[derive(Debug, Deserialize)]
struct Case {
    id: String,
    /// `tool_call`, `final_report` or `structured`.
    kind: String,
    role: String,
    #[serde(default)]
    expect: Expect,
    request: ChatRequest,
}

#[derive(Debug, Default, Deserialize)]
struct Expect {
    /// Acceptable tools (`tool_call` cases).
    #[serde(default)]
    tools: Vec<String>,
    /// Arguments the call must have, for the tools whose schema has them.
    #[serde(default)]
    arguments: BTreeMap<String, Value>,
}

/// One measured answer.
#[derive(Debug, Serialize, Deserialize)]
struct Outcome {
    id: String,
    kind: String,
    role: String,
    format: String,
    seconds: f64,
    prompt_tokens: u64,
    cached_tokens: u64,
    completion_tokens: u64,
    finish: String,
    /// What the answer was: `tool_call`, `text` or `error`.
    answer: String,
    tools: Vec<String>,
    /// Strict: a call of an offered tool with object arguments, or text that is exactly the
    /// JSON object the schema asks for.
    well_formed: bool,
    /// Text the normaliser (what the product runs on structured answers) turns into a valid
    /// object; for calls, same as `well_formed`.
    usable: bool,
    /// Tool cases: the expected tool (and key arguments); final reports: a valid report.
    right: Option<bool>,
    detail: String,
    text: String,
}

fn default_model() -> PathBuf {
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("."), PathBuf::from);
    home.join(".cache/trellis/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf")
}

fn load_cases(path: &Path) -> anyhow::Result<Vec<Case>> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(i, l)| {
            serde_json::from_str(l).with_context(|| format!("{}:{}", path.display(), i + 1))
        })
        .collect()
}

fn load_outcomes(path: &Path) -> anyhow::Result<Vec<Outcome>> {
    if !path.exists() {
        return Ok(Vec::new());
    }
    let text = std::fs::read_to_string(path)?;
    // A line cut by a kill is dropped (its case runs again).
    Ok(text
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect())
}

fn valid(schema: &Value, value: &Value) -> Result<(), String> {
    let validator = jsonschema::validator_for(schema).map_err(|e| e.to_string())?;
    match validator.iter_errors(value).next() {
        None => Ok(()),
        Some(e) => Err(format!("{e} at {}", e.instance_path())),
    }
}

/// Strictly parsed and valid / valid after the normaliser.
fn judge_text(text: &str, schema: &Value) -> (bool, bool, String) {
    let strict = serde_json::from_str::<Value>(text.trim())
        .map_err(|e| format!("not JSON: {e}"))
        .and_then(|v| valid(schema, &v));
    let usable = normalise_value(text, schema, NormaliseOptions::default())
        .map_err(|e| e.to_string())
        .and_then(|n| valid(schema, &n.value));
    let detail = match (&strict, &usable) {
        (Ok(()), _) => String::new(),
        (Err(s), Ok(())) => format!("repaired by the normaliser; strict: {s}"),
        (Err(s), Err(_)) => s.clone(),
    };
    (strict.is_ok(), usable.is_ok(), detail)
}

fn same_path(a: &Value, b: &Value) -> bool {
    match (a.as_str(), b.as_str()) {
        (Some(x), Some(y)) => x.trim_start_matches("./") == y.trim_start_matches("./"),
        _ => a == b,
    }
}

async fn run_case(provider: &EmbeddedProvider, case: &Case, format: &str) -> Outcome {
    let mut request = case.request.clone();
    request.temperature = Some(0.0);
    let start = Instant::now();
    let result = provider.complete(request, CancellationToken::new()).await;
    let seconds = start.elapsed().as_secs_f64();
    let mut o = Outcome {
        id: case.id.clone(),
        kind: case.kind.clone(),
        role: case.role.clone(),
        format: format.to_string(),
        seconds,
        prompt_tokens: 0,
        cached_tokens: 0,
        completion_tokens: 0,
        finish: String::new(),
        answer: "error".into(),
        tools: Vec::new(),
        well_formed: false,
        usable: false,
        right: None,
        detail: String::new(),
        text: String::new(),
    };
    let c = match result {
        Ok(c) => c,
        Err(e) => {
            o.detail = e.to_string();
            if case.kind != "structured" {
                o.right = Some(false);
            }
            return o;
        }
    };
    o.prompt_tokens = c.usage.prompt_tokens;
    o.cached_tokens = c.usage.cached_prompt_tokens;
    o.completion_tokens = c.usage.completion_tokens;
    o.finish = c
        .finish
        .as_ref()
        .map(|f| format!("{f:?}"))
        .unwrap_or_default();
    o.text = c.text.chars().take(4000).collect();
    let schema = case
        .request
        .response_format
        .as_ref()
        .or(case.request.final_format.as_ref())
        .map(|f| f.schema.clone());
    if !c.tool_calls.is_empty() {
        o.answer = "tool_call".into();
        let mut problems = Vec::new();
        for call in &c.tool_calls {
            o.tools.push(call.name.clone());
            let spec = case.request.tools.iter().find(|t| t.name == call.name);
            match (spec, call.arguments_json()) {
                (None, _) => problems.push(format!("`{}` is not offered", call.name)),
                (Some(_), Ok(Value::Object(_))) => {}
                (Some(_), _) => problems.push(format!("`{}`: arguments not an object", call.name)),
            }
        }
        o.well_formed = problems.is_empty();
        o.usable = o.well_formed;
        let first = &c.tool_calls[0];
        let args = first.arguments_json().unwrap_or(Value::Null);
        let right = case.kind == "tool_call" && case.expect.tools.contains(&first.name) && {
            let props = case
                .request
                .tools
                .iter()
                .find(|t| t.name == first.name)
                .and_then(|t| t.parameters.get("properties"));
            case.expect.arguments.iter().all(|(k, want)| {
                props.and_then(|p| p.get(k)).is_none()
                    || args.get(k).is_some_and(|got| same_path(got, want))
            })
        };
        if !right && case.kind == "tool_call" {
            problems.push(format!(
                "called {} {}, expected {:?} {:?}",
                first.name, args, case.expect.tools, case.expect.arguments
            ));
        }
        o.right = (case.kind != "structured").then_some(right);
        o.detail = problems.join("; ");
    } else {
        o.answer = "text".into();
        match &schema {
            Some(schema) => {
                let (strict, usable, detail) = judge_text(&c.text, schema);
                o.well_formed = strict;
                o.usable = usable;
                o.detail = detail;
            }
            None => o.detail = "no schema to check the text against".into(),
        }
        o.right = match case.kind.as_str() {
            "tool_call" => {
                o.detail = format!("answered instead of calling a tool; {}", o.detail);
                Some(false)
            }
            "final_report" => Some(o.usable),
            _ => None,
        };
    }
    o
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

fn pct(k: usize, n: usize) -> String {
    if n == 0 {
        "–".into()
    } else {
        format!("{k}/{n} ({:.0}%)", 100.0 * k as f64 / n as f64)
    }
}

/// The markdown table: one row per kind and role, then per kind, for each format.
fn table(outcomes: &[Outcome], formats: &[String]) -> String {
    let mut groups: BTreeMap<(String, String), Vec<&Outcome>> = BTreeMap::new();
    for o in outcomes {
        groups
            .entry((o.kind.clone(), o.role.clone()))
            .or_default()
            .push(o);
        groups
            .entry((o.kind.clone(), "(all)".into()))
            .or_default()
            .push(o);
    }
    let mut s = String::from(
        "| kind | role | format | cases | well-formed (strict) | usable (after normaliser) | right | median s |\n\
         |---|---|---|---|---|---|---|---|\n",
    );
    for ((kind, role), all) in &groups {
        for f in formats {
            let rows: Vec<&&Outcome> = all.iter().filter(|o| &o.format == f).collect();
            if rows.is_empty() {
                continue;
            }
            let n = rows.len();
            let wf = rows.iter().filter(|o| o.well_formed).count();
            let us = rows.iter().filter(|o| o.usable).count();
            let judged: Vec<bool> = rows.iter().filter_map(|o| o.right).collect();
            let right = pct(judged.iter().filter(|r| **r).count(), judged.len());
            let med = median(rows.iter().map(|o| o.seconds).collect());
            s.push_str(&format!(
                "| {kind} | {role} | {f} | {n} | {} | {} | {right} | {med:.1} |\n",
                pct(wf, n),
                pct(us, n)
            ));
        }
    }
    s
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|_| "?".into())
}

fn parse_format(f: &str) -> anyhow::Result<ToolFormat> {
    match f {
        "grammar" => Ok(ToolFormat::Grammar),
        "native" => Ok(ToolFormat::Native),
        other => anyhow::bail!("unknown format `{other}` (grammar, native)"),
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    for f in &args.format {
        parse_format(f)?;
    }
    let cases = load_cases(&args.cases)?;
    if args.report {
        std::io::stdout().write_all(table(&load_outcomes(&args.out)?, &args.format).as_bytes())?;
        return Ok(());
    }
    let model = args.model.clone().unwrap_or_else(default_model);
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZero::get);
    eprintln!(
        "model {} · {} cases · formats {} · {cores} cores · load {}",
        model.display(),
        cases.len(),
        args.format.join(","),
        loadavg()
    );
    let done: HashSet<(String, String)> = load_outcomes(&args.out)?
        .into_iter()
        .map(|o| (o.format, o.id))
        .collect();
    let mut out = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&args.out)
        .with_context(|| format!("opening {}", args.out.display()))?;
    let selected: Vec<&Case> = cases
        .iter()
        .filter(|c| args.only.is_empty() || args.only.contains(&c.id))
        .collect();
    for f in &args.format {
        let todo: Vec<&&Case> = selected
            .iter()
            .filter(|c| !done.contains(&(f.clone(), c.id.clone())))
            .collect();
        if todo.is_empty() {
            continue;
        }
        let d = EmbeddedSettings::default();
        let provider = EmbeddedProvider::new(
            "prompt-bench",
            ModelSource::Path(model.clone()),
            EmbeddedSettings {
                context: args.context,
                threads: args.threads.unwrap_or(d.threads),
                max_tokens: args.max_tokens,
                temperature: 0.0,
                tool_format: parse_format(f)?,
                ..d
            },
        );
        provider.prepare().await?;
        for (i, case) in todo.iter().enumerate() {
            let o = run_case(&provider, case, f).await;
            eprintln!(
                "[{f} {}/{}] {:<28} {:>6.1} s  {} tok (cached {})  {:<9} {:<24} well-formed {} usable {} right {}  {}",
                i + 1,
                todo.len(),
                o.id,
                o.seconds,
                o.prompt_tokens,
                o.cached_tokens,
                o.answer,
                o.tools.join(","),
                o.well_formed,
                o.usable,
                o.right.map_or("–".into(), |r| r.to_string()),
                o.detail.chars().take(160).collect::<String>(),
            );
            writeln!(out, "{}", serde_json::to_string(&o)?)?;
            out.flush()?;
        }
    }
    eprintln!("load at the end {}", loadavg());
    std::io::stdout().write_all(table(&load_outcomes(&args.out)?, &args.format).as_bytes())?;
    Ok(())
}
