//! The harness loop: for each task and agent not yet recorded, a fresh checkout, the cached
//! environment, the agent's attempt within the limits, the hidden tests, one record.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::mini::{MiniAgent, Served, serve_model};
use crate::results::{self, Ended, Record};
use crate::score::{self, Verdict};
use crate::task::{self, Task};
use crate::trellis::{Attempt, Limits, TrellisAgent};
use crate::{Error, Result};
use crate::{agentenv, workdir};

/// An agent the harness runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agent {
    /// Trellis (`trellis run`).
    Trellis,
    /// The anchor, mini-swe-agent, on the same model behind `trellis models serve`.
    MiniSweAgent,
}

impl Agent {
    /// Its name in records and tables.
    pub fn name(self) -> &'static str {
        match self {
            Agent::Trellis => "trellis",
            Agent::MiniSweAgent => "mini-swe-agent",
        }
    }
}

/// What `trellis eval run` does.
#[derive(Clone, Debug)]
pub struct Options {
    /// The task file.
    pub tasks: PathBuf,
    /// Where results, checkouts and the summary go.
    pub out: PathBuf,
    /// Where environments are cached (by `env_key`).
    pub envs: PathBuf,
    /// Only these task ids (empty: all).
    pub only: Vec<String>,
    /// The agents, in the order they run on each task.
    pub agents: Vec<Agent>,
    /// Trellis, as run on each task (its executable also serves the model to the anchor).
    pub trellis: TrellisAgent,
    /// mini-swe-agent, when it is one of `agents`.
    pub mini: Option<MiniAgent>,
    /// The model profile both use (`None`: the configured default).
    pub profile: Option<String>,
    /// Wall-time limit of one attempt.
    pub wall: Duration,
    /// Model-call limit of one attempt.
    pub calls: u64,
    /// Limit of one environment setup.
    pub setup_timeout: Duration,
    /// Limit of one test command.
    pub test_timeout: Duration,
    /// Whether the agents work in the task's environment ([`crate::agentenv`]); off
    /// reproduces runs recorded before it existed.
    pub task_env: bool,
}

/// The tasks of `tasks` selected by `only` (every id must exist).
pub fn select(tasks: Vec<Task>, only: &[String], file: &Path) -> Result<Vec<Task>> {
    if only.is_empty() {
        return Ok(tasks);
    }
    if let Some(missing) = only
        .iter()
        .find(|id| !tasks.iter().any(|t| &t.instance_id == *id))
    {
        return Err(Error::Failed(format!(
            "task `{missing}` is not in {} ({} tasks)",
            file.display(),
            tasks.len()
        )));
    }
    Ok(tasks
        .into_iter()
        .filter(|t| only.contains(&t.instance_id))
        .collect())
}

/// Runs the tasks not yet in `out/results.jsonl`; each finished task's record is appended
/// at once, so an interrupted run continues where it stopped. Prints progress with `say`.
/// Returns every record (earlier ones included) and writes `out/summary.md`.
pub async fn run(opts: &Options, say: &mut dyn FnMut(&str)) -> Result<Vec<Record>> {
    let all = task::load(&opts.tasks)?;
    let tasks = select(all, &opts.only, &opts.tasks)?;
    let tasks_dir = opts
        .tasks
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    std::fs::create_dir_all(&opts.out).map_err(|e| Error::Io {
        what: format!("creating {}", opts.out.display()),
        source: e,
    })?;
    let path = opts.out.join("results.jsonl");
    let mut records = results::load(&path)?;
    let todo: Vec<(&Task, Agent)> = tasks
        .iter()
        .flat_map(|t| opts.agents.iter().map(move |a| (t, *a)))
        .filter(|(t, a)| {
            !records
                .iter()
                .any(|r| r.instance_id == t.instance_id && r.agent == a.name())
        })
        .collect();
    let pairs = tasks.len() * opts.agents.len();
    say(&format!(
        "{} tasks × {} agents, {} already recorded in {}; running {} ({} min wall, {} model calls each)",
        tasks.len(),
        opts.agents.len(),
        pairs - todo.len(),
        path.display(),
        todo.len(),
        opts.wall.as_secs() / 60,
        opts.calls
    ));
    let mut served: Option<Served> = None;
    for (i, (task, agent)) in todo.iter().enumerate() {
        let place = format!(
            "[{}/{}] {} {}",
            i + 1,
            todo.len(),
            agent.name(),
            task.instance_id
        );
        if *agent == Agent::MiniSweAgent && served.is_none() {
            say("starting `trellis models serve` for mini-swe-agent");
            served = Some(
                serve_model(
                    &opts.trellis,
                    opts.profile.as_deref(),
                    &opts.out,
                    opts.setup_timeout,
                )
                .await?,
            );
        }
        let record = attempt(opts, task, &tasks_dir, *agent, served.as_ref(), &place, say).await;
        say(&format!(
            "{place}: {} ({:?}, {:.1} min, {} calls, {} tokens)",
            if record.resolved {
                "RESOLVED"
            } else {
                "not resolved"
            },
            record.ended,
            record.seconds / 60.0,
            record.model_calls,
            record.prompt_tokens + record.completion_tokens
        ));
        results::append(&path, &record)?;
        records.push(record);
    }
    let summary = results::summary(&records);
    let file = opts.out.join("summary.md");
    std::fs::write(&file, &summary).map_err(|e| Error::Io {
        what: format!("writing {}", file.display()),
        source: e,
    })?;
    Ok(records)
}

async fn attempt(
    opts: &Options,
    task: &Task,
    tasks_dir: &Path,
    agent: Agent,
    served: Option<&Served>,
    place: &str,
    say: &mut dyn FnMut(&str),
) -> Record {
    let checkout = opts
        .out
        .join("work")
        .join(agent.name())
        .join(&task.instance_id);
    let mut record = Record {
        instance_id: task.instance_id.clone(),
        agent: agent.name().to_owned(),
        resolved: false,
        ended: Ended::Error,
        seconds: 0.0,
        model_calls: 0,
        prompt_tokens: 0,
        cached_tokens: 0,
        completion_tokens: 0,
        tool_calls: 0,
        files_changed: Vec::new(),
        run_id: None,
        checkout: checkout.to_string_lossy().into_owned(),
        detail: None,
        verdict: Verdict::default(),
    };
    say(&format!(
        "{place}: environment `{}`",
        task.environment.env_key
    ));
    let env = match workdir::environment(task, tasks_dir, &opts.envs, opts.setup_timeout).await {
        Ok(e) => e,
        Err(e) => {
            record.detail = Some(e.to_string());
            return record;
        }
    };
    if let Err(e) = workdir::checkout(task, tasks_dir, &checkout).await {
        record.detail = Some(e.to_string());
        return record;
    }
    let vars = if opts.task_env {
        match agentenv::agent_env(task, &env, &checkout).await {
            Ok(v) => v,
            Err(e) => {
                record.detail = Some(format!("the agents' environment: {e}"));
                return record;
            }
        }
    } else {
        Vec::new()
    };
    let names: Vec<&str> = vars.iter().map(|(k, _)| k.as_str()).collect();
    say(&format!(
        "{place}: running in {}{}",
        checkout.display(),
        if names.is_empty() {
            String::new()
        } else {
            format!(" (the task's environment: {})", names.join(", "))
        }
    ));
    let limits = Limits {
        wall: opts.wall,
        calls: opts.calls,
    };
    let a = match (agent, &opts.mini, served) {
        (Agent::Trellis, _, _) => opts.trellis.attempt(task, &checkout, &vars, limits).await,
        (Agent::MiniSweAgent, Some(mini), Some(served)) => {
            let dir = opts.out.join("trajectories");
            let _ = std::fs::create_dir_all(&dir);
            let trajectory = dir.join(format!("{}.traj.json", task.instance_id));
            mini.attempt(
                task,
                &checkout,
                &trajectory,
                &served.endpoint,
                &vars,
                limits,
            )
            .await
        }
        (Agent::MiniSweAgent, _, _) => Attempt {
            ended: Some(Ended::Error),
            detail: Some("mini-swe-agent is not configured".into()),
            ..Attempt::default()
        },
    };
    record.run_id = a.run_id;
    record.ended = a.ended.unwrap_or(Ended::Error);
    record.seconds = a.seconds;
    (
        record.model_calls,
        record.prompt_tokens,
        record.cached_tokens,
        record.completion_tokens,
    ) = a.usage;
    record.tool_calls = a.tool_calls;
    record.files_changed = a.files_changed;
    record.detail = a.detail;
    say(&format!("{place}: scoring"));
    record.verdict = score::score(task, &checkout, &env, opts.test_timeout).await;
    record.resolved = record.verdict.resolved;
    record
}

/// A task's check: the unpatched checkout must fail FAIL_TO_PASS, the reference patch must
/// resolve it.
#[derive(Clone, Debug)]
pub struct Check {
    /// The task.
    pub instance_id: String,
    /// Without the reference patch (must not be resolved, FAIL_TO_PASS must fail).
    pub before: Verdict,
    /// With it (must be resolved).
    pub after: Verdict,
    /// What is wrong (none: the task is valid).
    pub problem: Option<String>,
}

/// Checks every task of `tasks` (filtered by `only`) in fresh checkouts under `work`.
pub async fn validate(
    tasks_file: &Path,
    only: &[String],
    work: &Path,
    envs: &Path,
    setup_timeout: Duration,
    test_timeout: Duration,
    say: &mut dyn FnMut(&str),
) -> Result<Vec<Check>> {
    let tasks = select(task::load(tasks_file)?, only, tasks_file)?;
    let tasks_dir = tasks_file
        .parent()
        .map_or_else(|| PathBuf::from("."), Path::to_path_buf);
    let mut checks = Vec::new();
    for (i, task) in tasks.iter().enumerate() {
        let place = format!("[{}/{}] {}", i + 1, tasks.len(), task.instance_id);
        let check = check_one(task, &tasks_dir, work, envs, setup_timeout, test_timeout).await;
        say(&format!(
            "{place}: {}",
            check
                .problem
                .as_deref()
                .unwrap_or("ok (fails without the fix, resolved with it)")
        ));
        checks.push(check);
    }
    Ok(checks)
}

async fn check_one(
    task: &Task,
    tasks_dir: &Path,
    work: &Path,
    envs: &Path,
    setup_timeout: Duration,
    test_timeout: Duration,
) -> Check {
    let mut check = Check {
        instance_id: task.instance_id.clone(),
        before: Verdict::default(),
        after: Verdict::default(),
        problem: None,
    };
    let dir = work.join(&task.instance_id);
    let result: Result<()> = async {
        let env = workdir::environment(task, tasks_dir, envs, setup_timeout).await?;
        workdir::checkout(task, tasks_dir, &dir).await?;
        check.before = score::score(task, &dir, &env, test_timeout).await;
        workdir::checkout(task, tasks_dir, &dir).await?;
        let patch = task.patch.as_deref().ok_or_else(|| {
            Error::Failed("no `patch` (the reference fix) to validate with".into())
        })?;
        score::apply(patch, &dir, "reference patch").await?;
        check.after = score::score(task, &dir, &env, test_timeout).await;
        Ok(())
    }
    .await;
    check.problem = match result {
        Err(e) => Some(e.to_string()),
        Ok(()) if check.before.error.is_some() => check.before.error.clone(),
        Ok(()) if check.after.error.is_some() => check.after.error.clone(),
        Ok(())
            if check
                .before
                .fail_to_pass
                .as_ref()
                .is_some_and(score::TestRun::passed) =>
        {
            Some("FAIL_TO_PASS already passes without the fix".into())
        }
        Ok(()) if !check.after.resolved => Some(format!(
            "not resolved by the reference patch: {}",
            check
                .after
                .fail_to_pass
                .iter()
                .chain(&check.after.pass_to_pass)
                .find(|t| !t.passed())
                .map(|t| workdir::tail(&t.tail, 400))
                .unwrap_or_default()
        )),
        Ok(()) => None,
    };
    let _ = std::fs::remove_dir_all(&dir);
    check
}
