//! universal-ctags on the same tree in the same run: the reference for the cold index
//! (`ctags -R`, every language it knows, and restricted to the languages Trellis parses).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use crate::{loadavg, row};

/// The languages with a tree-sitter grammar in Trellis, as ctags names them (plus Markdown,
/// whose sections Trellis also extracts).
const PARSED_LANGUAGES: &str = "Rust,C,C++,Python,JavaScript,TypeScript,Go,Java,Markdown";

/// One ctags run: its wall seconds.
pub struct CtagsRun {
    pub secs: f64,
}

/// CPU seconds (user + system) of this process's waited-for children (Linux; 0 elsewhere).
fn children_cpu_secs() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let rest = stat.rsplit(')').next().unwrap_or("");
    let f: Vec<&str> = rest.split_whitespace().collect();
    // cutime and cstime: the 16th and 17th fields, the 14th and 15th after the name.
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(13) + ticks(14)) / 100.0
}

/// Runs `ctags -R -f TMP [extra] CORPUS` and prints its row; `None` when ctags is missing.
pub fn run(corpus: &Path, label: &str, extra: &[&str]) -> anyhow::Result<Option<CtagsRun>> {
    let out = tempfile::NamedTempFile::new()?;
    let load = loadavg();
    let cpu0 = children_cpu_secs();
    let t = Instant::now();
    let status = Command::new("ctags")
        .arg("-R")
        .arg("-f")
        .arg(out.path())
        .args(extra)
        .arg(corpus)
        .stderr(std::process::Stdio::null())
        .status();
    let secs = t.elapsed().as_secs_f64();
    let cpu = children_cpu_secs() - cpu0;
    match status {
        Ok(s) if s.success() => {}
        Ok(s) => {
            row(label, "", &format!("not run ({s})"), "");
            return Ok(None);
        }
        Err(e) => {
            row(label, "", &format!("not run ({e})"), "");
            return Ok(None);
        }
    }
    let text = std::fs::read(out.path())?;
    let tags = text
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty() && !l.starts_with(b"!_"))
        .count();
    println!(
        "| {label} | {tags} tags, {:.0} MB tags file | {secs:.2} s | CPU {cpu:.1} s (one process) | {load} |",
        text.len() as f64 / 1e6
    );
    Ok(Some(CtagsRun { secs }))
}

/// Both ctags rows: every language ctags knows (its default) and Trellis's languages only.
pub fn both(corpus: &Path) -> anyhow::Result<Option<CtagsRun>> {
    let all = run(
        corpus,
        "universal-ctags `ctags -R` (default: all languages)",
        &[],
    )?;
    let langs = format!("--languages={PARSED_LANGUAGES}");
    run(
        corpus,
        &format!("universal-ctags `ctags -R {langs}`"),
        &[langs.as_str()],
    )?;
    Ok(all)
}
