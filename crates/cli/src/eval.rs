//! `trellis eval`: the task harness (`trellis_eval`) — `run` scores Trellis on a task file,
//! `validate` checks that each task fails without its reference fix and is resolved with it.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::{Args, Subcommand};
use trellis_eval::mini::MiniAgent;
use trellis_eval::run::{Agent, Options, validate};
use trellis_eval::trellis::TrellisAgent;

/// `trellis eval …`.
#[derive(Debug, Subcommand)]
pub enum EvalCommand {
    /// Run Trellis on every task (or `--tasks`) of TASKS.jsonl, each in a fresh checkout, and
    /// score it by the task's hidden tests; results go to `DIR/results.jsonl` (resumable: run
    /// it again and recorded tasks are kept) and `DIR/summary.md`.
    Run(RunArgs),
    /// Check the task file: each task's FAIL_TO_PASS must fail on the unpatched checkout
    /// and every listed test pass with its reference `patch`.
    Validate(ValidateArgs),
}

/// What both subcommands share.
#[derive(Debug, Args)]
pub struct Selection {
    /// The task file (SWE-bench instances plus `environment`, one JSON object per line;
    /// docs/eval.md).
    pub file: PathBuf,
    /// Only these task ids (comma-separated or repeated).
    #[arg(long = "tasks", value_delimiter = ',')]
    pub tasks: Vec<String>,
    /// Only the task ids listed in this file (one per line, `#` comments), e.g. the scored
    /// subset.
    #[arg(long)]
    pub subset: Option<PathBuf>,
    /// Where environments are cached, one directory per `env_key` (default
    /// `~/.cache/trellis/eval-envs`).
    #[arg(long)]
    pub envs: Option<PathBuf>,
    /// Time limit of one environment setup, minutes.
    #[arg(long, default_value_t = 30)]
    pub setup_minutes: u64,
    /// Time limit of one test command, minutes.
    #[arg(long, default_value_t = 10)]
    pub test_minutes: u64,
}

/// `trellis eval run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    #[command(flatten)]
    pub selection: Selection,
    /// The output directory (results, summary, the tasks' checkouts).
    #[arg(long)]
    pub out: PathBuf,
    /// The agents run on each task: `trellis`, `mini-swe-agent` (the anchor, on the same
    /// model behind `trellis models serve`, started for it).
    #[arg(long, value_delimiter = ',', default_value = "trellis,mini-swe-agent")]
    pub agents: Vec<String>,
    /// mini-swe-agent's `mini` (default: the venv `scripts/setup` makes,
    /// `~/.cache/trellis/mini-swe-agent-venv/bin/mini`).
    #[arg(long)]
    pub mini: Option<PathBuf>,
    /// The model profile every role uses (`models.default`), and the one served to the
    /// anchor.
    #[arg(long)]
    pub model: Option<String>,
    /// Run this workflow on every task instead of letting the orchestrator choose.
    #[arg(long)]
    pub workflow: Option<String>,
    /// Skip this optional stage of the workflow (repeatable).
    #[arg(long)]
    pub skip: Vec<String>,
    /// Wall-time limit of one task's run, minutes.
    #[arg(long, default_value_t = 15)]
    pub wall_minutes: u64,
    /// Model-call limit of one task's run (`budgets.run.calls`).
    #[arg(long, default_value_t = 40)]
    pub max_calls: u64,
    /// Run the agents without the task's environment (its virtualenv or node_modules first
    /// on PATH, the variables its test command sets), as runs recorded before 2026-11-29
    /// (docs/eval.md) were.
    #[arg(long)]
    pub no_task_env: bool,
}

/// `trellis eval validate`.
#[derive(Debug, Args)]
pub struct ValidateArgs {
    #[command(flatten)]
    pub selection: Selection,
    /// Where the checkouts are made (default: a temporary directory).
    #[arg(long)]
    pub work: Option<PathBuf>,
}

impl Selection {
    fn ids(&self) -> anyhow::Result<Vec<String>> {
        let mut ids = self.tasks.clone();
        if let Some(path) = &self.subset {
            let text = std::fs::read_to_string(path)
                .with_context(|| format!("reading the subset {}", path.display()))?;
            ids.extend(
                text.lines()
                    .map(|l| l.split('#').next().unwrap_or_default().trim())
                    .filter(|l| !l.is_empty())
                    .map(str::to_owned),
            );
        }
        Ok(ids)
    }

    fn envs(&self) -> PathBuf {
        self.envs
            .clone()
            .unwrap_or_else(|| cache_dir().join("eval-envs"))
    }
}

/// `~/.cache/trellis` (`$XDG_CACHE_HOME/trellis`), where `scripts/setup` installs.
fn cache_dir() -> PathBuf {
    std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
        .unwrap_or_else(|| PathBuf::from("."))
        .join("trellis")
}

fn say(line: &str) {
    eprintln!("[eval] {line}");
}

/// Runs `trellis eval`; `overrides` (`-c`) reach every Trellis run.
pub async fn execute(cmd: EvalCommand, overrides: &[String]) -> anyhow::Result<ExitCode> {
    match cmd {
        EvalCommand::Run(args) => {
            let mut overrides = overrides.to_vec();
            if let Some(m) = &args.model {
                overrides.push(format!("models.default={}", toml_string(m)));
            }
            // The anchor is served the model Trellis's code agent uses.
            let config = crate::workspace::load_config(std::path::Path::new("."), &overrides)?;
            let profile = trellis_llm::ModelRegistry::from_config(&config)?
                .profile_for_role("coder")
                .to_owned();
            let mut agents = Vec::new();
            for name in &args.agents {
                agents.push(match name.as_str() {
                    "trellis" => Agent::Trellis,
                    "mini-swe-agent" => Agent::MiniSweAgent,
                    other => bail!("--agents: unknown agent `{other}` (trellis, mini-swe-agent)"),
                });
            }
            let mini = if agents.contains(&Agent::MiniSweAgent) {
                let exe = args
                    .mini
                    .clone()
                    .unwrap_or_else(|| cache_dir().join("mini-swe-agent-venv/bin/mini"));
                if !exe.is_file() {
                    bail!(
                        "mini-swe-agent is not installed at {}: run scripts/setup (step \
                         75-mini-swe-agent.sh), give --mini PATH, or leave it out with \
                         --agents trellis",
                        exe.display()
                    );
                }
                Some(MiniAgent { exe })
            } else {
                None
            };
            let opts = Options {
                tasks: args.selection.file.clone(),
                out: args.out.clone(),
                envs: args.selection.envs(),
                only: args.selection.ids()?,
                agents,
                mini,
                profile: Some(profile),
                trellis: TrellisAgent {
                    exe: std::env::current_exe().context("finding the trellis executable")?,
                    overrides,
                    workflow: args.workflow.clone(),
                    skip: args.skip.clone(),
                },
                wall: Duration::from_secs(args.wall_minutes * 60),
                calls: args.max_calls,
                setup_timeout: Duration::from_secs(args.selection.setup_minutes * 60),
                test_timeout: Duration::from_secs(args.selection.test_minutes * 60),
                task_env: !args.no_task_env,
            };
            let records = trellis_eval::run::run(&opts, &mut say).await?;
            print!("{}", trellis_eval::results::summary(&records));
            say(&format!(
                "results: {} ; summary: {}",
                opts.out.join("results.jsonl").display(),
                opts.out.join("summary.md").display()
            ));
            Ok(ExitCode::SUCCESS)
        }
        EvalCommand::Validate(args) => {
            let temp;
            let work = match &args.work {
                Some(w) => w.clone(),
                None => {
                    temp = tempfile::tempdir().context("creating a work directory")?;
                    temp.path().to_path_buf()
                }
            };
            let s = &args.selection;
            let checks = validate(
                &s.file,
                &s.ids()?,
                &work,
                &s.envs(),
                Duration::from_secs(s.setup_minutes * 60),
                Duration::from_secs(s.test_minutes * 60),
                &mut say,
            )
            .await?;
            let bad = checks.iter().filter(|c| c.problem.is_some()).count();
            println!(
                "{} tasks checked, {} valid, {bad} not",
                checks.len(),
                checks.len() - bad
            );
            for c in checks.iter().filter(|c| c.problem.is_some()) {
                println!(
                    "  {}: {}",
                    c.instance_id,
                    c.problem.as_deref().unwrap_or_default()
                );
            }
            Ok(if bad == 0 {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(2)
            })
        }
    }
}

/// `s` as a TOML string (for `-c KEY=VALUE`).
fn toml_string(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}
