//! The anchor: mini-swe-agent (PyPI `mini-swe-agent`, its default `mini.yaml` config, local
//! environment) on the same task, against the same model served by `trellis models serve`
//! (started once by the harness), within the same limits; its trajectory read back.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::results::Ended;
use crate::task::{Task, quote};
use crate::trellis::{Attempt, Limits, TrellisAgent, timed};
use crate::workdir::{sh, tail};
use crate::{Error, Result};

/// An OpenAI-compatible endpoint.
#[derive(Clone, Debug)]
pub struct Endpoint {
    /// Base URL (`…/v1`).
    pub base_url: String,
    /// The model id to ask for.
    pub model: String,
    /// The API key.
    pub key: String,
}

/// `trellis models serve`, started for the anchor; stopped when dropped.
pub struct Served {
    _child: tokio::process::Child,
    /// Where it answers.
    pub endpoint: Endpoint,
}

/// Starts `trellis models serve` for `profile` (the default profile when `None`) on a free
/// loopback port, with its token in `dir`, and waits (up to `wait`) until it serves.
pub async fn serve_model(
    trellis: &TrellisAgent,
    profile: Option<&str>,
    dir: &Path,
    wait: Duration,
) -> Result<Served> {
    let token = dir.join("models-token");
    let mut command = tokio::process::Command::new(&trellis.exe);
    for o in &trellis.overrides {
        command.arg("-c").arg(o);
    }
    command
        .args(["models", "serve", "--port", "0", "--token-file"])
        .arg(&token);
    if let Some(p) = profile {
        command.args(["--profile", p]);
    }
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| Error::Io {
            what: format!("starting `{} models serve`", trellis.exe.display()),
            source: e,
        })?;
    let stdout = child
        .stdout
        .take()
        .ok_or_else(|| Error::Failed("`trellis models serve` has no stdout".into()))?;
    let mut lines = BufReader::new(stdout).lines();
    let banner = tokio::time::timeout(wait, async {
        while let Ok(Some(line)) = lines.next_line().await {
            // serving `ID` (model, context N tokens) at URL
            if let Some(rest) = line.strip_prefix("serving `")
                && let Some((id, rest)) = rest.split_once('`')
                && let Some((_, url)) = rest.rsplit_once(" at ")
            {
                return Some((id.to_owned(), url.trim().to_owned()));
            }
        }
        None
    })
    .await;
    let Ok(Some((model, base_url))) = banner else {
        return Err(Error::Failed(
            "`trellis models serve` did not start serving (run it by hand to see why)".into(),
        ));
    };
    // The banner is printed; keep reading so the pipe never fills.
    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
    let key = std::fs::read_to_string(&token)
        .map_err(|e| Error::Io {
            what: format!("reading the token {}", token.display()),
            source: e,
        })?
        .trim()
        .to_owned();
    Ok(Served {
        _child: child,
        endpoint: Endpoint {
            base_url,
            model,
            key,
        },
    })
}

/// mini-swe-agent as the anchor.
#[derive(Clone, Debug)]
pub struct MiniAgent {
    /// Its `mini` executable (in the venv `scripts/setup` makes).
    pub exe: PathBuf,
}

impl MiniAgent {
    /// Runs mini-swe-agent on the task in `checkout` (it edits the files in place), its
    /// trajectory saved to `trajectory`: `--yolo --exit-immediately` with `mini.yaml`,
    /// `agent.step_limit` the call limit, `agent.wall_time_limit_seconds` the wall limit (the
    /// process is also killed at it), cost tracking off (a local model has no price); `vars`
    /// (the task's environment) set for the commands it runs.
    pub async fn attempt(
        &self,
        task: &Task,
        checkout: &Path,
        trajectory: &Path,
        endpoint: &Endpoint,
        vars: &[(String, String)],
        limits: Limits,
    ) -> Attempt {
        let Limits { wall, calls } = limits;
        let mut a = Attempt::default();
        let mut words = vec![
            quote(&self.exe.to_string_lossy()),
            "-m".into(),
            quote(&format!("openai/{}", endpoint.model)),
            "-t".into(),
            quote(&task.problem_statement),
            "--yolo".into(),
            "--exit-immediately".into(),
            "-c".into(),
            "mini.yaml".into(),
            "-c".into(),
            quote(&format!("agent.step_limit={calls}")),
            "-c".into(),
            "agent.cost_limit=0".into(),
            "-c".into(),
            quote(&format!("agent.wall_time_limit_seconds={}", wall.as_secs())),
            "-c".into(),
            quote(&format!(
                "model.model_kwargs.api_base={}",
                endpoint.base_url
            )),
            "-c".into(),
            quote(&format!("environment.cwd={}", checkout.display())),
            "-o".into(),
            quote(&trajectory.to_string_lossy()),
        ];
        // The task's environment goes to the commands it runs (`environment.env`), not to
        // mini's own interpreter: a `PYTHONPATH` of the task's sources must not shadow its
        // modules. JSON strings, so that mini reads every value as a string.
        for (k, v) in vars {
            let value = serde_json::to_string(v).unwrap_or_default();
            words.push("-c".into());
            words.push(quote(&format!("environment.env.{k}={value}")));
        }
        let env = [
            ("MSWEA_CONFIGURED", "true".to_owned()),
            ("MSWEA_COST_TRACKING", "ignore_errors".to_owned()),
            ("LITELLM_LOCAL_MODEL_COST_MAP", "True".to_owned()),
            ("OPENAI_API_KEY", endpoint.key.clone()),
        ];
        // A little over the agent's own limit: it stops itself and saves its trajectory.
        let limit = wall + Duration::from_secs(60);
        let Some(out) = timed(&mut a, &words.join(" "), checkout, &env, limit).await else {
            return a;
        };
        let traj: Option<Value> = std::fs::read_to_string(trajectory)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        let Some(traj) = traj else {
            a.ended = Some(if out.timed_out {
                Ended::WallTime
            } else {
                Ended::Error
            });
            a.detail = Some(format!(
                "no trajectory (exit {:?}): {}",
                out.exit_code,
                tail(&format!("{}{}", out.stdout, out.stderr), 1500)
            ));
            return a;
        };
        let status = traj["info"]["exit_status"].as_str().unwrap_or_default();
        a.ended = Some(match status {
            "Submitted" => Ended::Finished,
            "LimitsExceeded" => Ended::Calls,
            "TimeExceeded" => Ended::WallTime,
            _ if out.timed_out => Ended::WallTime,
            _ => Ended::Error,
        });
        if a.ended != Some(Ended::Finished) {
            a.detail = Some(format!(
                "{status}: {}",
                tail(
                    traj["info"]["exception_str"].as_str().unwrap_or_default(),
                    600
                )
            ));
        }
        let (mut calls, mut prompt, mut cached, mut completion, mut actions) = (0, 0, 0, 0, 0);
        for m in traj["messages"].as_array().into_iter().flatten() {
            let usage = &m["extra"]["response"]["usage"];
            if usage.is_object() {
                calls += 1;
                prompt += usage["prompt_tokens"].as_u64().unwrap_or(0);
                completion += usage["completion_tokens"].as_u64().unwrap_or(0);
                cached += usage["prompt_tokens_details"]["cached_tokens"]
                    .as_u64()
                    .unwrap_or(0);
            }
            actions += m["extra"]["actions"].as_array().map_or(0, Vec::len) as u64;
        }
        a.usage = (calls, prompt, cached, completion);
        a.tool_calls = actions;
        a.files_changed = changed_files(checkout).await;
        a
    }
}

/// The files changed in `checkout` against its HEAD (tracked and new, `git status`).
async fn changed_files(checkout: &Path) -> Vec<String> {
    let Ok(out) = sh(
        "git status --porcelain --untracked-files=all",
        checkout,
        &[],
        Duration::from_secs(60),
    )
    .await
    else {
        return Vec::new();
    };
    out.stdout
        .lines()
        .filter_map(|l| l.get(3..))
        .map(|p| p.rsplit(" -> ").next().unwrap_or(p).to_owned())
        .filter(|p| !p.starts_with(".trellis"))
        .collect()
}
