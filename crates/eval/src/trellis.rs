//! Trellis as the agent under test: `trellis run` on the task's checkout, in a child
//! process (its own process group, killed at the wall-time limit), then the run's change
//! set applied with `trellis review --approve-all` and its usage read back.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use trellis_tools::builtin::ShellOutcome;

use crate::results::Ended;
use crate::task::{Task, quote};
use crate::workdir::{sh, tail};
use crate::{Error, Result};

/// How Trellis is run on each task.
#[derive(Clone, Debug)]
pub struct TrellisAgent {
    /// The `trellis` executable.
    pub exe: PathBuf,
    /// `-c KEY=VALUE` overrides given to every command (the model profile, …).
    pub overrides: Vec<String>,
    /// A fixed workflow (`--workflow`); otherwise the orchestrator picks.
    pub workflow: Option<String>,
    /// Optional stages to skip (`--skip`).
    pub skip: Vec<String>,
}

/// The limits of one attempt.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Wall time.
    pub wall: Duration,
    /// Model calls.
    pub calls: u64,
}

/// What one Trellis attempt did.
#[derive(Clone, Debug, Default)]
pub struct Attempt {
    /// The run, when it started.
    pub run_id: Option<String>,
    /// Why it ended.
    pub ended: Option<Ended>,
    /// Wall time of `trellis run`.
    pub seconds: f64,
    /// Model calls, prompt (cached) and completion tokens.
    pub usage: (u64, u64, u64, u64),
    /// Tool calls the agents made.
    pub tool_calls: u64,
    /// Files the applied change touched.
    pub files_changed: Vec<String>,
    /// What went wrong.
    pub detail: Option<String>,
}

impl TrellisAgent {
    fn command(&self, checkout: &Path, args: &[&str]) -> String {
        self.command_with(checkout, &[], args)
    }

    fn command_with(&self, checkout: &Path, extra: &[String], args: &[&str]) -> String {
        let mut words = vec![quote(&self.exe.to_string_lossy()), "-C".into()];
        words.push(quote(&checkout.to_string_lossy()));
        for o in self.overrides.iter().chain(extra) {
            words.push("-c".into());
            words.push(quote(o));
        }
        words.extend(args.iter().map(|a| quote(a)));
        words.join(" ")
    }

    /// Runs the task: the request is its problem statement; approvals are granted by
    /// policy (`--yes`), the model-call limit is the run's `budgets.run.calls`; a run that
    /// stops for more budget ended by the limit. `vars` (the task's environment) are set
    /// for the process, so its tools and test runs see them. The change set is then applied
    /// to the checkout.
    pub async fn attempt(
        &self,
        task: &Task,
        checkout: &Path,
        vars: &[(String, String)],
        limits: Limits,
    ) -> Attempt {
        let Limits { wall, calls } = limits;
        let mut a = Attempt::default();
        let limit = format!("budgets.run.calls={calls}");
        let mut args = vec![
            "run",
            task.problem_statement.as_str(),
            "--yes",
            "--no-review",
            "--json",
        ];
        if let Some(w) = &self.workflow {
            args.extend(["--workflow", w.as_str()]);
        }
        for stage in &self.skip {
            args.extend(["--skip", stage.as_str()]);
        }
        let command = self.command_with(checkout, &[limit], &args);
        let env: Vec<(&str, String)> = vars.iter().map(|(k, v)| (k.as_str(), v.clone())).collect();
        let Some(out) = timed(&mut a, &command, checkout, &env, wall).await else {
            return a;
        };
        a.run_id = run_id(&out.stdout).or(self.latest_run(checkout).await);
        if out.timed_out {
            a.ended = Some(Ended::WallTime);
            a.detail = Some(format!(
                "stopped at the wall-time limit ({} s)",
                wall.as_secs()
            ));
        } else {
            match serde_json::from_str::<Value>(out.stdout.trim()) {
                Ok(v) => {
                    // A run that stopped for input: with `--yes` only a budget (the call
                    // limit) asks; anything else waiting is reported as it is.
                    let waiting = v["status"].as_str() == Some("waitingInput");
                    // The interrupt's data names the exhausted budget unit.
                    let calls = v["waiting"].as_object().is_some_and(|w| {
                        w.values().any(|it| it["data"]["budget"]["unit"] == "calls")
                    });
                    a.ended = Some(if waiting && calls {
                        Ended::Calls
                    } else if waiting || out.exit_code == Some(0) || v["terminal"].is_string() {
                        Ended::Finished
                    } else {
                        Ended::Error
                    });
                    if waiting {
                        a.detail = Some(tail(&v["waiting"].to_string(), 600));
                    } else if v["terminal"].as_str() == Some("ABORT") {
                        a.detail = Some(tail(&v["stages"].to_string(), 600));
                    }
                }
                Err(_) => {
                    a.ended = Some(Ended::Error);
                    a.detail = Some(format!(
                        "`trellis run` exit {:?}: {}",
                        out.exit_code,
                        tail(&format!("{}{}", out.stdout, out.stderr), 1500)
                    ));
                }
            }
        }
        let Some(run) = a.run_id.clone() else {
            return a;
        };
        if let Err(e) = self.read_back(checkout, &run, &mut a).await {
            a.detail = Some(match a.detail.take() {
                Some(d) => format!("{d}; {e}"),
                None => e.to_string(),
            });
        }
        a
    }

    /// The newest run in the checkout (a run killed before it printed its id).
    async fn latest_run(&self, checkout: &Path) -> Option<String> {
        let out = self
            .json(checkout, &["runs", "list", "--json", "--limit", "1"])
            .await
            .ok()?;
        out.get(0)?.get("id")?.as_str().map(str::to_owned)
    }

    async fn json(&self, checkout: &Path, args: &[&str]) -> Result<Value> {
        let command = self.command(checkout, args);
        let out = sh(&command, checkout, &[], Duration::from_secs(300)).await?;
        if out.exit_code != Some(0) {
            return Err(Error::Failed(format!(
                "`trellis {}` failed: {}",
                args.join(" "),
                tail(&out.stderr, 600)
            )));
        }
        serde_json::from_str(out.stdout.trim()).map_err(|e| {
            Error::Failed(format!(
                "`trellis {}` printed no JSON ({e})",
                args.join(" ")
            ))
        })
    }

    /// Applies the run's change set, then reads its usage and tool calls.
    async fn read_back(&self, checkout: &Path, run: &str, a: &mut Attempt) -> Result<()> {
        let set = self.json(checkout, &["review", run, "--json"]).await?;
        a.files_changed = set["files"]
            .as_array()
            .map(|fs| {
                fs.iter()
                    .filter_map(|f| f["path"].as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        if !a.files_changed.is_empty() {
            self.json(checkout, &["review", run, "--approve-all", "--json"])
                .await?;
        }
        let usage = self
            .json(checkout, &["runs", "usage", run, "--json"])
            .await?;
        let total = &usage["usage"]["run"];
        let n = |k: &str| total[k].as_u64().unwrap_or(0);
        a.usage = (
            n("calls"),
            n("promptTokens"),
            n("cachedTokens"),
            n("completionTokens"),
        );
        let turns = self
            .json(checkout, &["runs", "show", run, "--turns", "--json"])
            .await?;
        a.tool_calls = turns
            .as_array()
            .map(|sessions| {
                sessions
                    .iter()
                    .flat_map(|s| s["turns"].as_array().cloned().unwrap_or_default())
                    .map(|t| t["tools"].as_array().map_or(0, Vec::len) as u64)
                    .sum()
            })
            .unwrap_or(0);
        Ok(())
    }
}

/// Runs an agent's command line in `checkout` within `limit`, its wall time in `a`; `None`
/// (with `a` ended by the error) when it could not be run at all.
pub(crate) async fn timed(
    a: &mut Attempt,
    command: &str,
    checkout: &Path,
    env: &[(&str, String)],
    limit: Duration,
) -> Option<ShellOutcome> {
    let started = Instant::now();
    let out = sh(command, checkout, env, limit).await;
    a.seconds = started.elapsed().as_secs_f64();
    match out {
        Ok(o) => Some(o),
        Err(e) => {
            a.ended = Some(Ended::Error);
            a.detail = Some(e.to_string());
            None
        }
    }
}

/// The run id in `trellis run --json`'s output.
fn run_id(stdout: &str) -> Option<String> {
    let v: Value = serde_json::from_str(stdout.trim()).ok()?;
    v["run"].as_str().map(str::to_owned)
}
