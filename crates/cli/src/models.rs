//! `trellis models list | test [PROFILE] | serve`.

mod serve;

use std::path::Path;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::Context;
use clap::Subcommand;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio_util::sync::CancellationToken;
use trellis_llm::{
    ChatRequest, ContextWindow, Message, ModelRegistry, ProviderKind, StructuredOptions,
    complete_structured,
};

use crate::workspace::load_config;

/// `trellis models` subcommands.
#[derive(Debug, Subcommand)]
pub enum ModelsCommand {
    /// List model profiles, their providers and the roles that use them.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Make a real call with a structured answer (default: the default profile).
    Test {
        /// The profile to test.
        profile: Option<String>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Serve a profile's model over the OpenAI chat-completions API on loopback (token
    /// protected), for editors, other tools and other Trellis processes.
    Serve(serve::ServeArgs),
}

/// The structured answer `models test` asks for.
#[derive(Debug, Serialize, Deserialize, JsonSchema)]
struct CapitalAnswer {
    /// The capital city.
    #[schemars(length(max = 40))]
    city: String,
    /// The country.
    #[schemars(length(max = 40))]
    country: String,
}

/// Runs a `models` subcommand.
pub async fn execute(
    cmd: &ModelsCommand,
    repo: &Path,
    overrides: &[String],
) -> anyhow::Result<ExitCode> {
    let config = load_config(repo, overrides)?;
    let registry = ModelRegistry::from_config(&config)?;
    match cmd {
        ModelsCommand::List { json } => list(&registry, *json),
        ModelsCommand::Test { profile, json } => test(&registry, profile.as_deref(), *json).await,
        ModelsCommand::Serve(args) => serve::serve(args, &registry).await,
    }
}

fn list(registry: &ModelRegistry, json: bool) -> anyhow::Result<ExitCode> {
    let profiles = registry.summaries();
    if json {
        println!("{}", serde_json::to_string_pretty(&profiles)?);
        return Ok(ExitCode::SUCCESS);
    }
    let width = profiles
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(4)
        .max(4);
    println!(
        "  {:width$}  {:9}  {:28}  ROLES",
        "NAME", "PROVIDER", "MODEL"
    );
    for p in &profiles {
        let provider = serde_json::to_value(p.provider)?
            .as_str()
            .unwrap_or_default()
            .to_string();
        let mark = if p.default { "*" } else { " " };
        let roles = if p.roles.is_empty() {
            "-".to_string()
        } else {
            p.roles.join(",")
        };
        println!(
            "{mark} {:width$}  {provider:9}  {:28}  {roles}",
            p.name, p.model
        );
        let cached = match p.cached {
            Some(true) => " (cached)",
            Some(false) => " (fetched on first use)",
            None => "",
        };
        let context = match (p.context, p.provider) {
            (Some(tokens), _) => format!("  (context {tokens})"),
            (None, ProviderKind::Embedded) => String::new(),
            // Remote: asked of the server (or the table) on first use; `models test` shows it.
            (None, _) => "  (context found on first use)".to_string(),
        };
        println!("  {:width$}  {}{cached}{context}", "", p.location);
    }
    println!("\n* default profile ({})", registry.default_profile());
    Ok(ExitCode::SUCCESS)
}

#[derive(Serialize)]
struct TestReport {
    profile: String,
    provider: String,
    model: String,
    answer: serde_json::Value,
    repairs: usize,
    prompt_tokens: u64,
    completion_tokens: u64,
    /// The context window the provider found (`null` when it states none).
    context_window: Option<ContextWindow>,
    /// Where the window comes from, in words.
    context_source: Option<String>,
    prepare_ms: u128,
    call_ms: u128,
}

async fn test(
    registry: &ModelRegistry,
    profile: Option<&str>,
    json: bool,
) -> anyhow::Result<ExitCode> {
    let name = profile.unwrap_or(registry.default_profile());
    let provider = registry.provider(name)?;
    let info = provider.info().clone();
    let started = Instant::now();
    provider
        .prepare()
        .await
        .with_context(|| format!("preparing profile `{name}`"))?;
    // A remote endpoint is asked for its window here, as a run would on its first call.
    let window = provider.context_window().await;
    let prepare_ms = started.elapsed().as_millis();
    if let Some(warning) = window.and_then(|w| w.warning(name)) {
        eprintln!("warning: {warning}");
    }
    let request = ChatRequest {
        max_tokens: Some(256),
        temperature: Some(0.0),
        ..ChatRequest::new(vec![
            Message::system("You are a helpful assistant. You answer in JSON."),
            Message::user("What is the capital of France? Give the city and the country."),
        ])
    };
    let started = Instant::now();
    let answer = complete_structured::<CapitalAnswer>(
        provider.as_ref(),
        request,
        StructuredOptions::default(),
        CancellationToken::new(),
    )
    .await
    .with_context(|| format!("calling profile `{name}`"))?;
    let call_ms = started.elapsed().as_millis();
    let usage = answer
        .completions
        .iter()
        .fold(trellis_llm::Usage::default(), |mut u, c| {
            u.add(&c.usage);
            u
        });
    let report = TestReport {
        profile: name.to_string(),
        provider: serde_json::to_value(info.kind)?
            .as_str()
            .unwrap_or_default()
            .to_string(),
        model: info.model.clone(),
        answer: serde_json::to_value(&answer.value)?,
        repairs: answer.repairs.len(),
        prompt_tokens: usage.prompt_tokens,
        completion_tokens: usage.completion_tokens,
        context_window: window,
        context_source: window.map(|w| w.source.to_string()),
        prepare_ms,
        call_ms,
    };
    if json {
        println!("{}", serde_json::to_string_pretty(&report)?);
    } else {
        println!(
            "profile   {} ({} {})",
            report.profile, report.provider, report.model
        );
        if let Some(w) = window {
            println!("window    {} tokens ({})", w.tokens, w.source);
        }
        println!("answer    {}", report.answer);
        println!(
            "repairs   {}{}",
            report.repairs,
            if answer.completions.len() > 1 {
                " (after a re-ask)"
            } else {
                ""
            }
        );
        let secs = call_ms as f64 / 1000.0;
        println!(
            "tokens    {} prompt + {} generated in {secs:.2} s (load {prepare_ms} ms)",
            report.prompt_tokens, report.completion_tokens
        );
        println!("ok: structured answer parsed");
    }
    Ok(ExitCode::SUCCESS)
}
