//! The records of a harness run: one JSON line per task and agent in `results.jsonl`,
//! appended as each task finishes (a killed run loses at most the task in progress), and the
//! summary table.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::score::Verdict;
use crate::{Error, Result};

/// Why an agent's attempt at a task ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    /// The agent finished on its own.
    Finished,
    /// The wall-time limit stopped it.
    WallTime,
    /// The model-call limit stopped it.
    Calls,
    /// It failed (the message says how).
    Error,
}

/// One agent's attempt at one task.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// The task.
    pub instance_id: String,
    /// The agent (`trellis`, `mini-swe-agent`).
    pub agent: String,
    /// Whether the hidden tests passed.
    pub resolved: bool,
    /// Why the attempt ended.
    pub ended: Ended,
    /// The agent's wall time (setup and scoring not included).
    pub seconds: f64,
    /// Model requests made.
    pub model_calls: u64,
    /// Prompt tokens (cached ones included).
    pub prompt_tokens: u64,
    /// Prompt tokens the model reused from its cache.
    pub cached_tokens: u64,
    /// Generated tokens.
    pub completion_tokens: u64,
    /// Tool calls (Trellis) or commands run (mini-swe-agent).
    pub tool_calls: u64,
    /// Files the change touched.
    pub files_changed: Vec<String>,
    /// The Trellis run (`trellis runs show RUN` explains it), in the task's checkout.
    pub run_id: Option<String>,
    /// The task's checkout (kept for inspection).
    pub checkout: String,
    /// What went wrong or what stopped it.
    pub detail: Option<String>,
    /// The hidden tests' outcome.
    pub verdict: Verdict,
}

/// The records already in `path` (none when it does not exist). A torn last line (the
/// process killed mid-write) is ignored; any other bad line is an error naming it.
pub fn load(path: &Path) -> Result<Vec<Record>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => {
            return Err(Error::Io {
                what: format!("reading {}", path.display()),
                source: e,
            });
        }
    };
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut records = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        match serde_json::from_str::<Record>(line) {
            Ok(r) => records.push(r),
            Err(_) if i + 1 == lines.len() && !text.ends_with('\n') => {}
            Err(e) => {
                return Err(Error::Failed(format!(
                    "{}: line {}: not a result record: {e} (move the file away to start over)",
                    path.display(),
                    i + 1
                )));
            }
        }
    }
    Ok(records)
}

/// Appends `record` as one line (with its newline, flushed).
pub fn append(path: &Path, record: &Record) -> Result<()> {
    let io = |e| Error::Io {
        what: format!("appending to {}", path.display()),
        source: e,
    };
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(io)?;
    let mut line = serde_json::to_string(record).map_err(|e| Error::Failed(e.to_string()))?;
    line.push('\n');
    file.write_all(line.as_bytes()).map_err(io)?;
    file.sync_data().map_err(io)
}

/// Wilson score interval (95 %) of `k` successes in `n`, as fractions.
pub fn wilson(k: u64, n: u64) -> (f64, f64) {
    if n == 0 {
        return (0.0, 1.0);
    }
    let (k, n) = (k as f64, n as f64);
    let z = 1.96_f64;
    let p = k / n;
    let denom = 1.0 + z * z / n;
    let centre = (p + z * z / (2.0 * n)) / denom;
    let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt() / denom;
    ((centre - half).max(0.0), (centre + half).min(1.0))
}

/// The summary table (Markdown) of `records`, one row per agent, plus the per-task table.
pub fn summary(records: &[Record]) -> String {
    let mut by_agent: BTreeMap<&str, Vec<&Record>> = BTreeMap::new();
    for r in records {
        by_agent.entry(r.agent.as_str()).or_default().push(r);
    }
    let mut s = String::from(
        "| agent | tasks | resolved | 95 % interval | tokens per resolved task | median minutes | median calls | ended by limit | errors |\n\
         |---|---|---|---|---|---|---|---|---|\n",
    );
    for (agent, rs) in &by_agent {
        let n = rs.len() as u64;
        let k = rs.iter().filter(|r| r.resolved).count() as u64;
        let (lo, hi) = wilson(k, n);
        let tokens: u64 = rs
            .iter()
            .map(|r| r.prompt_tokens + r.completion_tokens)
            .sum();
        let per = if k == 0 {
            "–".to_owned()
        } else {
            format!("{:.0}", tokens as f64 / k as f64)
        };
        let mut minutes: Vec<f64> = rs.iter().map(|r| r.seconds / 60.0).collect();
        let mut calls: Vec<f64> = rs.iter().map(|r| r.model_calls as f64).collect();
        let limits = rs
            .iter()
            .filter(|r| matches!(r.ended, Ended::WallTime | Ended::Calls))
            .count();
        let errors = rs.iter().filter(|r| r.ended == Ended::Error).count();
        s.push_str(&format!(
            "| {agent} | {n} | {k} ({:.0} %) | {:.0}–{:.0} % | {per} | {:.1} | {:.0} | {limits} | {errors} |\n",
            100.0 * k as f64 / n as f64,
            100.0 * lo,
            100.0 * hi,
            median(&mut minutes),
            median(&mut calls),
        ));
    }
    s.push_str("\n| task | agent | resolved | ended | minutes | calls | tokens | files |\n|---|---|---|---|---|---|---|---|\n");
    let mut sorted: Vec<&Record> = records.iter().collect();
    sorted.sort_by(|a, b| (&a.instance_id, &a.agent).cmp(&(&b.instance_id, &b.agent)));
    for r in sorted {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {:.1} | {} | {} | {} |\n",
            r.instance_id,
            r.agent,
            if r.resolved { "yes" } else { "no" },
            serde_json::to_value(r.ended)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            r.seconds / 60.0,
            r.model_calls,
            r.prompt_tokens + r.completion_tokens,
            r.files_changed.join(", "),
        ));
    }
    s
}

fn median(v: &mut [f64]) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, resolved: bool) -> Record {
        Record {
            instance_id: id.into(),
            agent: "trellis".into(),
            resolved,
            ended: Ended::Finished,
            seconds: 60.0,
            model_calls: 3,
            prompt_tokens: 1000,
            cached_tokens: 500,
            completion_tokens: 100,
            tool_calls: 2,
            files_changed: vec!["a.py".into()],
            run_id: Some("r".into()),
            checkout: "/tmp/x".into(),
            detail: None,
            verdict: Verdict::default(),
        }
    }

    #[test]
    fn records_resume_and_a_torn_last_line_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("results.jsonl");
        assert!(load(&path).unwrap().is_empty());
        append(&path, &record("a", true)).unwrap();
        append(&path, &record("b", false)).unwrap();
        let mut text = std::fs::read_to_string(&path).unwrap();
        text.push_str("{\"instance_id\": \"c\", \"ag");
        std::fs::write(&path, &text).unwrap();
        let got = load(&path).unwrap();
        assert_eq!(got.len(), 2);
        assert_eq!(got[1], record("b", false));
        // A bad line in the middle is an error naming it.
        std::fs::write(&path, format!("x\n{text}\n")).unwrap();
        assert!(load(&path).unwrap_err().to_string().contains("line 1"));
    }

    #[test]
    fn wilson_interval_and_summary() {
        let (lo, hi) = wilson(5, 20);
        assert!(
            (lo - 0.112).abs() < 0.002 && (hi - 0.469).abs() < 0.002,
            "{lo} {hi}"
        );
        assert_eq!(wilson(0, 0), (0.0, 1.0));
        let s = summary(&[record("a", true), record("b", false)]);
        assert!(
            s.contains("| trellis | 2 | 1 (50 %) | 9–91 % | 2200 | 1.0 | 3 | 0 | 0 |"),
            "{s}"
        );
    }
}
