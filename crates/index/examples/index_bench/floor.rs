//! The floors the cold index is compared with, measured in the same run: reading and
//! parsing every source file (the parse floor), the same plus symbol and chunk extraction
//! (the extraction floor), and where the parse time goes (`--parse-report`).

use std::path::Path;
use std::time::Instant;

use trellis_index::IndexConfig;
use trellis_index::lang::Lang;
use trellis_index::scan::{Excludes, ScannedFile, scan};

use crate::{cpu_secs, loadavg};

/// The walked files with a grammar.
fn source_files(corpus: &Path, config: &IndexConfig) -> anyhow::Result<Vec<ScannedFile>> {
    Ok(scan(corpus, &Excludes::new(config)?)?
        .into_iter()
        .filter(|f| Lang::detect(&f.path).is_code())
        .collect())
}

/// One floor measurement: `work(path, text)` for every source file, in parallel like the
/// index, its two counts summed.
struct Floor {
    files: usize,
    counts: (usize, usize),
    secs: f64,
    cpu: f64,
    load: String,
}

fn floor_over_sources(
    corpus: &Path,
    config: &IndexConfig,
    work: impl Fn(&str, &str) -> (usize, usize) + Sync,
) -> anyhow::Result<Floor> {
    use rayon::prelude::*;
    let files = source_files(corpus, config)?;
    let load = loadavg();
    let cpu0 = cpu_secs();
    let t = Instant::now();
    let counts = files
        .par_iter()
        .map(|f| {
            let text = std::fs::read_to_string(corpus.join(&f.path)).unwrap_or_default();
            work(&f.path, &text)
        })
        .reduce(|| (0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    Ok(Floor {
        files: files.len(),
        counts,
        secs: t.elapsed().as_secs_f64(),
        cpu: cpu_secs() - cpu0,
        load,
    })
}

impl Floor {
    /// Prints the measurement's row: `what`, then `size` after the file count, then the
    /// time, the CPU and `extra`.
    fn print(&self, what: &str, size: &str, extra: &str) {
        let Floor {
            files,
            secs,
            cpu,
            load,
            ..
        } = self;
        println!(
            "| {what} | {files} source files, {size} | {secs:.2} s | CPU {cpu:.1} s{extra} | {load} |"
        );
    }
}

/// Reads and parses every source file with a grammar, and prints the time: the floor under
/// the cold index's read + parse phase.
pub fn parse_floor(corpus: &Path, config: &IndexConfig) -> anyhow::Result<f64> {
    let f = floor_over_sources(corpus, config, |path, text| {
        let nodes = trellis_index::symbols::parse_tree(Lang::detect(path), text)
            .map_or(0, |t| t.root_node().descendant_count());
        (text.len(), nodes)
    })?;
    let (bytes, nodes) = f.counts;
    f.print(
        "floor: read + tree-sitter parse only (no extraction, no writes)",
        &format!("{:.0} MB, {nodes} syntax nodes", bytes as f64 / 1e6),
        &format!(
            "; {:.1} MB/s per CPU-second",
            bytes as f64 / 1e6 / f.cpu.max(0.001)
        ),
    );
    Ok(f.secs)
}

/// Reads, parses and analyses every source file (symbols, references, imports and chunks:
/// everything the index derives from a file before writing it), and prints the time: the
/// floor under the complete index's work before any write. Returns (wall, CPU) seconds.
pub fn extract_floor(corpus: &Path, config: &IndexConfig) -> anyhow::Result<(f64, f64)> {
    let f = floor_over_sources(corpus, config, |path, text| {
        let a = trellis_index::analyze::analyze(path, text, true);
        (a.symbols.len(), a.chunks.len())
    })?;
    let (symbols, chunks) = f.counts;
    f.print(
        "floor + extraction: read + parse + symbols, references, imports and chunks (no writes)",
        &format!("{symbols} symbols, {chunks} chunks"),
        "",
    );
    Ok((f.secs, f.cpu))
}

/// Where the parse floor goes: per language, with and without syntax errors, and the slowest
/// files (`--parse-report`; single file timings, so run it on a quiet machine).
pub fn parse_report(corpus: &Path, config: &IndexConfig) -> anyhow::Result<()> {
    use rayon::prelude::*;
    let files = source_files(corpus, config)?;
    let timed: Vec<(String, &'static str, bool, usize, f64)> = files
        .par_iter()
        .map(|f| {
            let text = std::fs::read_to_string(corpus.join(&f.path)).unwrap_or_default();
            let lang = Lang::detect(&f.path);
            let t = Instant::now();
            let tree = trellis_index::symbols::parse_tree(lang, &text);
            let secs = t.elapsed().as_secs_f64();
            let error = tree.is_some_and(|t| t.root_node().has_error());
            (f.path.clone(), lang.as_str(), error, text.len(), secs)
        })
        .collect();
    let mut by = std::collections::BTreeMap::<(&str, bool), (usize, usize, f64)>::new();
    for (_, lang, error, bytes, secs) in &timed {
        let e = by.entry((lang, *error)).or_default();
        e.0 += 1;
        e.1 += bytes;
        e.2 += secs;
    }
    println!();
    println!("| language | syntax errors | files | MB | parse s | MB/s |");
    println!("|---|---|---|---|---|---|");
    for ((lang, error), (n, bytes, secs)) in &by {
        println!(
            "| {lang} | {error} | {n} | {:.1} | {secs:.2} | {:.1} |",
            *bytes as f64 / 1e6,
            *bytes as f64 / 1e6 / secs.max(1e-9)
        );
    }
    let mut slow = timed;
    slow.sort_by(|a, b| b.4.total_cmp(&a.4));
    println!();
    println!("| slowest files | language | errors | KB | s | MB/s |");
    println!("|---|---|---|---|---|---|");
    for (path, lang, error, bytes, secs) in slow.iter().take(25) {
        println!(
            "| {path} | {lang} | {error} | {} | {secs:.3} | {:.1} |",
            bytes / 1000,
            *bytes as f64 / 1e6 / secs.max(1e-9)
        );
    }
    Ok(())
}
