//! Cold start of the CLI: the wall time, measured from this process around spawn → exit, of
//! `trellis --db <db> runs resume <run> --answer security_review=approve` on G1 runs paused at
//! `security_review` in a fresh store (one discarded warm-up invocation first, warm page
//! cache), versus the anchor's `cold_cli_sqlite_resume_G1` (python start + `import langgraph`
//! + compile G1 + SqliteSaver + resume). Also `trellis --help` as the process-start floor.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Instant;

use anyhow::{Context, ensure};
use trellis_graph::{Durability, demo};
use trellis_protocol::{RunId, RunStatus};
use trellis_store::{Store, StoreOptions, Synchronous};

use crate::harness::{Backend, Setup, g1_graph, remove_db};
use crate::results::Cold;
use crate::stats::{Stats, reps};
use crate::sys;

/// The command measured, with placeholders.
pub const COMMAND: &str = "trellis --db <db> runs resume <run> --answer security_review=approve";

/// Where the `trellis` binary is expected: `--cli`, else `$CARGO_TARGET_DIR/release/trellis`,
/// else `<repo>/target/release/trellis`.
pub fn locate_cli(explicit: Option<&Path>, repo: &Path) -> PathBuf {
    if let Some(p) = explicit {
        return p.to_owned();
    }
    target_dir(repo).join("release").join("trellis")
}

/// `$CARGO_TARGET_DIR` (relative to `repo` if relative), else `<repo>/target`.
pub fn target_dir(repo: &Path) -> PathBuf {
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| repo.join("target"), PathBuf::from);
    if target.is_relative() {
        repo.join(target)
    } else {
        target
    }
}

fn time(cmd: &mut Command) -> anyhow::Result<(f64, Output)> {
    let t0 = Instant::now();
    let out = cmd.output().context("spawning the CLI")?;
    Ok((t0.elapsed().as_secs_f64(), out))
}

fn failure(what: &str, out: &Output) -> String {
    let text = |b: &[u8]| {
        String::from_utf8_lossy(b)
            .trim()
            .chars()
            .take(400)
            .collect::<String>()
    };
    format!(
        "`{what}` exited with {}: {} {}",
        out.status,
        text(&out.stderr),
        text(&out.stdout)
    )
}

/// Measures the cold start; a missing or failing CLI is reported in `not_measured`.
pub fn run(
    scale: f64,
    dir: &Path,
    cli: &Path,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<Cold> {
    let load0 = sys::loadavg()[0];
    let mut cold = measure(scale, dir, cli, rt)?;
    cold.load = [load0, sys::loadavg()[0]];
    Ok(cold)
}

fn measure(
    scale: f64,
    dir: &Path,
    cli: &Path,
    rt: &tokio::runtime::Runtime,
) -> anyhow::Result<Cold> {
    let n = reps(20, scale);
    let mut cold = Cold {
        cli: Some(cli.display().to_string()),
        command: COMMAND.to_owned(),
        ..Cold::default()
    };
    if !cli.is_file() {
        cold.not_measured = Some(format!(
            "no CLI binary at {} (build it with `cargo build --release -p trellis`)",
            cli.display()
        ));
        return Ok(cold);
    }

    // Process-start floor.
    let (_, warm) = time(Command::new(cli).arg("--help"))?;
    if warm.status.success() {
        let mut xs = Vec::with_capacity(n);
        for _ in 0..n {
            xs.push(time(Command::new(cli).arg("--help"))?.0);
        }
        cold.help = Some(Stats::of(&xs, None));
    }

    // n + 1 paused runs in a fresh store; the store is closed before the CLI opens it.
    let db = dir.join("cold.db");
    remove_db(&db)?;
    let runs: Vec<RunId> = rt.block_on(async {
        let setup = Setup::new(
            Backend::Durable(Synchronous::Full),
            Durability::Async,
            dir,
            "cold",
        )?;
        let graph = g1_graph(0, Some("security_review"))?;
        let mut runs = Vec::with_capacity(n + 1);
        for _ in 0..=n {
            let out = setup
                .engine
                .run(graph.clone(), demo::feature_input())
                .await?;
            ensure!(
                out.status == RunStatus::WaitingInput,
                "run did not pause: {:?}",
                out.status
            );
            runs.push(out.run);
        }
        anyhow::Ok(runs)
    })?;

    let resume = |run: &RunId| {
        let mut c = Command::new(cli);
        c.arg("--db").arg(&db).args([
            "runs",
            "resume",
            run.as_str(),
            "--answer",
            "security_review=approve",
        ]);
        c
    };
    let (_, warm) = time(&mut resume(&runs[n]))?;
    if !warm.status.success() {
        cold.not_measured = Some(failure(COMMAND, &warm));
        return Ok(cold);
    }
    let mut xs = Vec::with_capacity(n);
    for run in &runs[..n] {
        let (dt, out) = time(&mut resume(run))?;
        if !out.status.success() {
            cold.not_measured = Some(failure(COMMAND, &out));
            return Ok(cold);
        }
        xs.push(dt);
    }
    // Every resumed run must have finished successfully.
    let store = Store::open(&db, StoreOptions::default())?;
    for run in &runs {
        let rec = store.get_run(run.as_str())?;
        if rec.summary.status != RunStatus::Succeeded {
            cold.not_measured = Some(format!(
                "run {run} is {} after `{COMMAND}`",
                rec.summary.status.as_str()
            ));
            return Ok(cold);
        }
    }
    let st = Stats::of(&xs, None);
    crate::progress(&format!(
        "cold {COMMAND}: wall median {:.2} ms p90 {:.2} ms (n={}); --help median {}",
        st.median_ms,
        st.p90_ms,
        st.n,
        cold.help
            .as_ref()
            .map_or("-".into(), |h| format!("{:.2} ms", h.median_ms))
    ));
    cold.resume = Some(st);
    Ok(cold)
}
