//! `trellis-bench`: re-creates the LangGraph anchor benchmark's graphs on Trellis, runs the
//! anchor harness in the same invocation, and writes the table of ratios (docs/benchmarks.md).
//!
//! ```sh
//! cargo build --release -p trellis          # for the CLI cold start
//! cargo run --release -p trellis-bench -- --scale 0.3
//! cargo run --release -p trellis-bench -- --quick   # smoke test, < 1 min, no LangGraph
//! ```

/// The same allocator as the `trellis` binary, so the engine is measured as it ships.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod cold;
mod concurrent;
mod g1;
mod g2;
mod g3;
mod harness;
mod langgraph;
mod report;
mod results;
mod resume;
mod size;
mod stats;
mod sys;

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use anyhow::Context;
use clap::{Parser, ValueEnum};

use crate::results::Trellis;

/// Trellis vs LangGraph orchestration-overhead benchmark.
#[derive(Debug, Parser)]
#[command(name = "trellis-bench", version, about)]
struct Args {
    /// Multiplies every repetition count, on both sides (`max(3, int(base × scale))`).
    #[arg(long, default_value_t = 1.0)]
    scale: f64,
    /// The LangGraph anchor harness (run_all.sh and friends).
    #[arg(long, default_value = "../shared/bench/langgraph")]
    langgraph_dir: PathBuf,
    /// Do not run the LangGraph harness (use --langgraph-results for its numbers).
    #[arg(long)]
    skip_langgraph: bool,
    /// Read LangGraph results (*.json) from this directory instead of running the harness.
    #[arg(long, requires = "skip_langgraph")]
    langgraph_results: Option<PathBuf>,
    /// Where to write the markdown report (default docs/benchmarks.md; with --quick, a file
    /// in the work directory).
    #[arg(long)]
    out: Option<PathBuf>,
    /// Measure only these Trellis areas.
    #[arg(long, value_delimiter = ',')]
    only: Vec<AreaName>,
    /// Smoke test: scale 0.01, no LangGraph run, finishes in well under a minute.
    #[arg(long)]
    quick: bool,
    /// The `trellis` CLI binary for the cold-start case (default: target/release/trellis).
    #[arg(long)]
    cli: Option<PathBuf>,
    /// Scratch directory for databases and raw results (default
    /// `$CARGO_TARGET_DIR/trellis-bench/TIME`, else `target/trellis-bench/TIME`).
    #[arg(long)]
    work_dir: Option<PathBuf>,
    /// Internal: measure one throughput configuration and print it as JSON.
    #[arg(long, hide = true)]
    concurrent_child: Option<String>,
}

/// The Trellis areas.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum AreaName {
    G1,
    G2,
    G3,
    Concurrent,
    Size,
    Resume,
    Cold,
}

/// A progress line on stderr.
pub fn progress(line: &str) {
    let _ = writeln!(std::io::stderr(), "[trellis-bench] {line}");
}

/// The Trellis checkout this binary was built from.
fn repo_root() -> PathBuf {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    crate_dir
        .ancestors()
        .nth(2)
        .map_or_else(|| crate_dir.to_owned(), Path::to_owned)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let repo = repo_root();
    let stamp = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let work = args.work_dir.clone().unwrap_or_else(|| {
        cold::target_dir(&repo)
            .join("trellis-bench")
            .join(stamp.to_string())
    });
    if let Some(spec) = &args.concurrent_child {
        return concurrent::child(spec, &work.join("db"));
    }
    let scale = if args.quick { 0.01 } else { args.scale };
    let db_dir = work.join("db");
    std::fs::create_dir_all(&db_dir).with_context(|| format!("creating {}", db_dir.display()))?;
    let wants = |a: AreaName| args.only.is_empty() || args.only.contains(&a);

    let started = sys::utc_now();
    let load_start = sys::loadavg();
    let machine = sys::Machine::detect(&repo);
    progress(&format!(
        "scale {scale}, work dir {}, {} CPUs ({}), load {:?}",
        work.display(),
        machine.nproc,
        machine.cpu_model,
        load_start
    ));

    // Trellis first, then the anchor: never both at once.
    let t0 = Instant::now();
    let trellis_load0 = sys::loadavg()[0];
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let mut t = Trellis::default();
    if wants(AreaName::G1) {
        t.g1 = Some(rt.block_on(g1::run(scale, &db_dir))?);
    }
    if wants(AreaName::G2) {
        t.g2 = Some(rt.block_on(g2::run(scale, &db_dir))?);
    }
    if wants(AreaName::G3) {
        t.g3 = Some(rt.block_on(g3::run(scale, &db_dir))?);
    }
    if wants(AreaName::Concurrent) {
        t.concurrent = Some(concurrent::run(scale, &work)?);
    }
    if wants(AreaName::Size) {
        t.size = Some(rt.block_on(size::run(scale, &db_dir))?);
    }
    if wants(AreaName::Resume) {
        t.resume = Some(rt.block_on(resume::run(scale, &db_dir))?);
    }
    if wants(AreaName::Cold) {
        let cli = cold::locate_cli(args.cli.as_deref(), &repo);
        let c = cold::run(scale, &db_dir, &cli, &rt)?;
        if let Some(why) = &c.not_measured {
            progress(&format!("cold start not measured: {why}"));
        }
        t.cold = Some(c);
    }
    drop(rt);
    let trellis_elapsed_s = t0.elapsed().as_secs_f64();
    let trellis_load = [trellis_load0, sys::loadavg()[0]];
    std::fs::write(work.join("trellis.json"), serde_json::to_string_pretty(&t)?)?;

    let lg = if args.skip_langgraph || args.quick {
        match &args.langgraph_results {
            Some(dir) => Some(langgraph::load(dir)?),
            None => None,
        }
    } else {
        Some(langgraph::run(
            &args.langgraph_dir,
            &work.join("langgraph"),
            scale,
        )?)
    };
    if let Some(lg) = &lg {
        progress(&format!(
            "LangGraph results from {}: {}",
            lg.dir.display(),
            lg.stems().collect::<Vec<_>>().join(", ")
        ));
    }

    let meta = report::Meta {
        command: command_line(),
        started,
        finished: sys::utc_now(),
        scale,
        quick: args.quick,
        machine,
        load: [load_start, sys::loadavg()],
        trellis_load,
        trellis_elapsed_s,
        work_dir: work.display().to_string(),
    };
    let mut doc = report::render(&meta, &t, lg.as_ref());
    let out = match (&args.out, args.quick) {
        (Some(p), _) => p.clone(),
        (None, true) => work.join("benchmarks-quick.md"),
        (None, false) => repo.join("docs").join("benchmarks.md"),
    };
    // Sections written by the other benchmark commands (models, retrieval) follow the marker
    // and are kept as they are.
    if let Ok(old) = std::fs::read_to_string(&out)
        && let Some(at) = old.find(report::OTHER_SECTIONS_MARKER)
    {
        doc.push_str(&old[at..]);
    } else {
        doc.push_str(report::OTHER_SECTIONS_MARKER);
        doc.push('\n');
    }
    std::fs::write(&out, doc).with_context(|| format!("writing {}", out.display()))?;
    // Scratch databases are not needed once measured.
    let _ = std::fs::remove_dir_all(&db_dir);
    progress(&format!(
        "wrote {} (raw results: {})",
        out.display(),
        work.join("trellis.json").display()
    ));
    Ok(())
}

/// The invocation as a `cargo run` command line (how the doc says to reproduce it).
fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).map(|a| shell_quote(&a)).collect();
    let mut s = "cargo run --release -p trellis-bench --".to_owned();
    for a in args {
        s.push(' ');
        s.push_str(&a);
    }
    s
}

fn shell_quote(a: &str) -> String {
    if !a.is_empty()
        && a.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=,:".contains(c))
    {
        a.to_owned()
    } else {
        format!("'{}'", a.replace('\'', "'\\''"))
    }
}
