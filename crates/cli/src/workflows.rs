//! `trellis workflows list | show | validate` and `trellis run --plan-only`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use trellis_workflow::{
    Catalog, Decision, Decisions, Plan, Workflow, assemble, compile, load_file,
};

/// Where workflows come from besides the built-ins and `<repo>/.trellis/workflows`.
#[derive(Debug, Args)]
pub struct DirsArg {
    /// An extra directory of workflow YAML (repeatable; later ones override earlier ones).
    #[arg(long = "workflows-dir", value_name = "DIR", global = true)]
    pub dirs: Vec<PathBuf>,
}

/// `trellis workflows …`.
#[derive(Debug, Args)]
pub struct WorkflowsArgs {
    #[command(subcommand)]
    command: WorkflowsCommand,
    #[command(flatten)]
    dirs: DirsArg,
}

#[derive(Debug, Subcommand)]
enum WorkflowsCommand {
    /// Every discovered workflow: name, type, source, description.
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// A workflow's stages, routing and optional stages.
    Show {
        /// The workflow's name.
        name: String,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// Validate workflow files (default: every discovered workflow); exit 1 on problems.
    Validate {
        /// Files to check.
        files: Vec<PathBuf>,
    },
}

/// `trellis run …`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The request.
    pub(crate) request: String,
    /// Use this workflow instead of asking the orchestrator.
    #[arg(long)]
    pub(crate) workflow: Option<String>,
    /// Include an optional stage (id or name; repeatable).
    #[arg(long = "include", value_name = "STAGE")]
    pub(crate) include: Vec<String>,
    /// Skip an optional stage (id or name; repeatable).
    #[arg(long = "skip", value_name = "STAGE")]
    pub(crate) skip: Vec<String>,
    /// Assemble and print the plan and its compiled graph; do not run it.
    #[arg(long)]
    pub(crate) plan_only: bool,
    /// Approve every action the policy would ask about; questions get "decide yourself".
    #[arg(long, conflicts_with = "no_input")]
    pub(crate) yes: bool,
    /// Never ask: deny every action the policy would ask about; questions get "decide
    /// yourself".
    #[arg(long)]
    pub(crate) no_input: bool,
    /// Do not start the review at the end (use `trellis review RUN` later).
    #[arg(long)]
    pub(crate) no_review: bool,
    /// Record the run for `trellis worker` processes (a PostgreSQL store, `[store] url`)
    /// and return once it is recorded: a worker plans and runs it, and its questions and
    /// approvals wait for answers (`trellis runs resume RUN --answer NODE=VALUE`, the web UI). Follow it
    /// with `trellis runs events RUN --follow`.
    #[arg(long, conflicts_with_all = ["yes", "no_input", "plan_only"])]
    pub(crate) queue: bool,
    /// Print JSON (no progress).
    #[arg(long)]
    pub(crate) json: bool,
    #[command(flatten)]
    pub(crate) dirs: DirsArg,
}

fn discover(repo: &Path, dirs: &DirsArg) -> Catalog {
    trellis_core::discover_workflows(Some(repo), &dirs.dirs)
}

/// Runs `trellis workflows …`.
pub fn workflows(args: WorkflowsArgs, repo: &Path) -> anyhow::Result<ExitCode> {
    let catalog = discover(repo, &args.dirs);
    match args.command {
        WorkflowsCommand::List { json } => {
            if json {
                println!("{}", serde_json::to_string_pretty(catalog.entries())?);
            } else {
                for e in catalog.entries() {
                    let m = &e.workflow.metadata;
                    println!(
                        "{:<32} {:<20} {:<10} {}",
                        m.name,
                        m.workflow_type.as_deref().unwrap_or("-"),
                        match &e.source {
                            trellis_workflow::Source::Builtin => "builtin".to_owned(),
                            other => other.to_string(),
                        },
                        m.description.as_deref().unwrap_or("")
                    );
                }
            }
            for e in catalog.errors() {
                eprintln!("warning: {e}");
            }
            Ok(ExitCode::SUCCESS)
        }
        WorkflowsCommand::Show { name, json } => {
            let entry = catalog.get(&name)?;
            if json {
                println!("{}", serde_json::to_string_pretty(entry)?);
            } else {
                print_workflow(&entry.workflow);
                println!("source: {}", entry.source);
                if let Some(o) = &entry.overrides {
                    println!("overrides: {o}");
                }
            }
            Ok(ExitCode::SUCCESS)
        }
        WorkflowsCommand::Validate { files } => {
            let mut failed = false;
            if files.is_empty() {
                for e in catalog.entries() {
                    println!("ok   {} ({})", e.workflow.name(), e.source);
                }
                for e in catalog.errors() {
                    failed = true;
                    eprintln!("{e}");
                }
            } else {
                for f in &files {
                    match load_file(
                        f,
                        Some(&trellis_agents::retrieval::RetrievalStrategyConfig::check),
                    ) {
                        Ok(w) => println!("ok   {} ({})", w.name(), f.display()),
                        Err(e) => {
                            failed = true;
                            eprintln!("{e}");
                        }
                    }
                }
            }
            Ok(if failed {
                ExitCode::FAILURE
            } else {
                ExitCode::SUCCESS
            })
        }
    }
}

fn print_workflow(w: &Workflow) {
    let m = &w.metadata;
    println!("{}  {}", m.name, m.description.as_deref().unwrap_or(""));
    println!(
        "type: {}   version: {}",
        m.workflow_type.as_deref().unwrap_or("-"),
        m.version.as_deref().unwrap_or("-")
    );
    println!(
        "adaptive retrieval: {}",
        if w.allows_enrichment() { "on" } else { "off" }
    );
    println!("stages:");
    for s in &w.stages {
        let agents: Vec<&str> = s.parallel_agents.iter().map(|a| a.agent.as_str()).collect();
        let r = &s.routing;
        println!(
            "  {:>3} {:<32} {:<9} agents: {}{}",
            s.stage_id.value,
            s.name.value,
            if s.required { "required" } else { "optional" },
            agents.join(", "),
            if agents.len() > 1 {
                format!(" ({})", s.failure_aggregation.value.name())
            } else {
                String::new()
            }
        );
        println!(
            "      success → {}   failure → {}   max_attempts: {}",
            r.next_stage_on_success.value,
            r.next_stage_on_failure.value,
            r.max_attempts.map_or("unlimited".into(), |n| n.to_string())
        );
        if let Some(g) = &s.reasoning_guidance {
            println!("      include if: {}", g.trim().replace('\n', " "));
        }
    }
    if !w.hooks.is_empty() {
        println!("hooks (after the configuration's [[hooks]]):");
        for h in &w.hooks {
            let tools = if h.hook.tools.is_empty() {
                String::new()
            } else {
                format!("  tools: {}", h.hook.tools.join(", "))
            };
            println!("  {:<13} {}{tools}", h.hook.event.as_str(), h.hook.label());
        }
    }
}

/// Runs `trellis run --plan-only --workflow NAME …` (no model, no store).
pub fn run(args: RunArgs, repo: &Path) -> anyhow::Result<ExitCode> {
    let Some(name) = &args.workflow else {
        bail!("internal: the orchestrator path handles `trellis run` without --workflow");
    };
    let catalog = discover(repo, &args.dirs);
    let workflow = &catalog.get(name)?.workflow;
    let mut decisions = Decisions::default();
    for s in &args.include {
        decisions.set(
            s,
            Decision::Include,
            Some("--include on the command line".into()),
        );
    }
    for s in &args.skip {
        decisions.set(s, Decision::Skip, Some("--skip on the command line".into()));
    }
    let plan = assemble(workflow, &decisions, &args.request)?;
    print_plan(&plan, args.json)
}

/// Prints a plan and its compiled graph (`--plan-only`).
pub fn print_plan(plan: &Plan, json: bool) -> anyhow::Result<ExitCode> {
    let graph = compile(plan, &trellis_core::PlanOnly).context("compiling the plan")?;
    if json {
        let nodes: Vec<String> = graph.node_ids().map(|n| n.to_string()).collect();
        let out = serde_json::json!({
            "plan": plan,
            "graph": { "name": graph.name(), "entry": graph.entry().as_str(), "nodes": nodes, "fingerprint": graph.fingerprint() },
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(ExitCode::SUCCESS);
    }
    println!("workflow: {}", plan.workflow);
    println!("task: {}", plan.task);
    println!("planned:");
    for p in &plan.planned {
        let agents: Vec<&str> = p.context.agents.iter().map(|a| a.agent.as_str()).collect();
        println!(
            "  {:>3} {:<32} agents: {:<28} ({})",
            p.context.stage_id,
            p.context.stage_name,
            agents.join(", "),
            p.reason
        );
    }
    if !plan.skipped.is_empty() {
        println!("skipped:");
        for s in &plan.skipped {
            println!("  {:>3} {:<32} ({})", s.stage_id, s.stage_name, s.reason);
        }
    }
    println!("routing:");
    for r in &plan.routing {
        println!(
            "  {:<32} success → {:<32} failure → {}",
            r.stage,
            r.next_on_success,
            plan.failure_path(r)
        );
    }
    println!(
        "adaptive retrieval: {}",
        if plan.adaptive_retrieval {
            "on a failure routed back to a stage, up to 2 enrichments per failed stage, each before that stage runs again (failures routed to DONE or ABORT end the run there)"
        } else {
            "off"
        }
    );
    let nodes: Vec<String> = graph.node_ids().map(|n| n.to_string()).collect();
    println!(
        "graph {} ({}): {}",
        graph.name(),
        graph.fingerprint(),
        nodes.join(" ")
    );
    Ok(ExitCode::SUCCESS)
}
