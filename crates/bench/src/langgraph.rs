//! The LangGraph side: runs the anchor harness (`run_all.sh`) in this invocation and reads the
//! JSON files it writes (`g1.json`, `g2.json`, `g3.json`, `resume.json`, `cold.json`,
//! `sqlite_floor.json`, `async_*.json`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, bail};
use serde_json::Value;

use crate::sys;

/// The anchor's results, as read from its JSON files.
#[derive(Debug, Default)]
pub struct LangGraph {
    /// Where the JSON files were read from.
    pub dir: PathBuf,
    /// Whether the harness ran in this invocation (false: `--skip-langgraph`).
    pub ran_now: bool,
    /// Wall time of `run_all.sh`, seconds.
    pub elapsed_s: Option<f64>,
    /// Load averages around `run_all.sh`.
    pub load: Option<[f64; 2]>,
    /// Parsed files by stem.
    files: BTreeMap<String, Value>,
}

/// Runs `run_all.sh` from `harness` with `LG_BENCH_RESULTS=results` and `LG_BENCH_SCALE=scale`;
/// its output goes to this process's stderr (and to `results/run_all.log`).
pub fn run(harness: &Path, results: &Path, scale: f64) -> anyhow::Result<LangGraph> {
    let script = harness.join("run_all.sh");
    if !script.is_file() {
        bail!("{} not found (pass --langgraph-dir)", script.display());
    }
    std::fs::create_dir_all(results).with_context(|| format!("creating {}", results.display()))?;
    crate::progress(&format!(
        "running LG_BENCH_RESULTS={} LG_BENCH_SCALE={scale} bash {}",
        results.display(),
        script.display()
    ));
    let load0 = sys::loadavg()[0];
    let t0 = Instant::now();
    let status = Command::new("bash")
        .arg(&script)
        .env("LG_BENCH_RESULTS", results)
        .env("LG_BENCH_SCALE", format!("{scale}"))
        .stdout(std::process::Stdio::from(std::io::stderr()))
        .status()
        .with_context(|| format!("running {}", script.display()))?;
    if !status.success() {
        bail!(
            "{} failed with {status}; see {}/run_all.log",
            script.display(),
            results.display()
        );
    }
    let mut lg = load(results)?;
    lg.ran_now = true;
    lg.elapsed_s = Some(t0.elapsed().as_secs_f64());
    lg.load = Some([load0, sys::loadavg()[0]]);
    Ok(lg)
}

/// Reads every `*.json` file of `dir`.
pub fn load(dir: &Path) -> anyhow::Result<LangGraph> {
    let mut files = BTreeMap::new();
    for entry in std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if path.extension().is_some_and(|e| e == "json") {
            let text = std::fs::read_to_string(&path)
                .with_context(|| format!("reading {}", path.display()))?;
            let value: Value = serde_json::from_str(&text)
                .with_context(|| format!("parsing {}", path.display()))?;
            let stem = path
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            files.insert(stem, value);
        }
    }
    if files.is_empty() {
        bail!("no LangGraph result files (*.json) in {}", dir.display());
    }
    Ok(LangGraph {
        dir: dir.to_owned(),
        files,
        ..LangGraph::default()
    })
}

impl LangGraph {
    /// The value at `path` (object keys) in file `file`.
    pub fn value(&self, file: &str, path: &[&str]) -> Option<&Value> {
        path.iter()
            .try_fold(self.files.get(file)?, |v, k| v.get(*k))
    }

    /// A number at `path` in `file`.
    pub fn num(&self, file: &str, path: &[&str]) -> Option<f64> {
        self.value(file, path).and_then(Value::as_f64)
    }

    /// Median and p90 (ms) of the stats object at `path` in `file`.
    pub fn median_p90(&self, file: &str, path: &[&str]) -> Option<(f64, f64)> {
        let s = self.value(file, path)?;
        Some((s.get("median_ms")?.as_f64()?, s.get("p90_ms")?.as_f64()?))
    }

    /// The versions recorded by the harness (from the first file that has them).
    pub fn versions(&self) -> Option<&Value> {
        ["g1", "g2", "g3", "resume", "cold"]
            .iter()
            .find_map(|f| self.value(f, &["versions"]))
    }

    /// Load averages (1 min) recorded in `file`.
    pub fn load_of(&self, file: &str) -> Option<(f64, f64)> {
        let first = |k: &str| {
            self.value(file, &[k])
                .and_then(|v| v.get(0))
                .and_then(Value::as_f64)
        };
        Some((first("load_start")?, first("load_end")?))
    }

    /// Stems of the files read.
    pub fn stems(&self) -> impl Iterator<Item = &str> {
        self.files.keys().map(String::as_str)
    }
}
