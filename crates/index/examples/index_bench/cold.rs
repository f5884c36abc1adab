//! The cold index runs: each into a fresh store, timed when searchable (the text pass) and
//! when complete, next to the parse floor, the extraction floor and universal-ctags.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use tempfile::TempDir;
use trellis_index::{Index, IndexConfig, Progress, UpdateOptions, UpdateStats};

use crate::ctags::{self, CtagsRun};
use crate::{Options, cpu_secs, floor, loadavg};

/// What the cold index is measured against.
pub struct Reference {
    /// The parse floor: read and parse every source file, nothing else (seconds; NaN with
    /// `--no-reference`).
    pub floor: f64,
    /// The extraction floor (read + parse + symbols and chunks, no writes): wall and CPU
    /// seconds.
    pub extraction: Option<(f64, f64)>,
    /// universal-ctags over every language it knows.
    pub ctags: Option<CtagsRun>,
}

impl Reference {
    /// Measures the extraction floor and runs ctags on the same tree (neither with
    /// `--no-reference`); `floor` is the parse floor measured before.
    pub fn measure(opts: &Options, config: &IndexConfig, floor: f64) -> anyhow::Result<Self> {
        let extraction = if opts.no_reference {
            None
        } else {
            Some(floor::extract_floor(&opts.corpus, config)?)
        };
        let ctags = if opts.no_reference {
            None
        } else {
            ctags::both(&opts.corpus)?
        };
        Ok(Self {
            floor,
            extraction,
            ctags,
        })
    }
}

/// The last complete cold index, kept for the measurements that follow.
pub struct ColdIndex {
    /// The store it lives in (deleted on drop).
    pub store: TempDir,
    /// The index.
    pub index: Index,
    /// What its update did.
    pub stats: UpdateStats,
    /// Wall seconds of every complete run.
    pub secs: Vec<f64>,
}

/// Runs the cold index (symbols + sections + BM25, no embeddings) `--cold-runs` times (once
/// with `--embed-only`), each into a fresh store, and prints each run's rows. `None` when no
/// run completed (`--searchable-only`).
pub fn runs(
    opts: &Options,
    config: &IndexConfig,
    reference: &Reference,
) -> anyhow::Result<Option<ColdIndex>> {
    // Shared by the runs: once `--searchable-only` stopped one, it stays set.
    let stop = AtomicBool::new(false);
    let mut secs = Vec::new();
    let mut kept = None;
    let cold_runs = if opts.embed_only {
        1
    } else {
        opts.cold_runs.max(1)
    };
    for run in 0..cold_runs {
        let Some(done) = one_run(opts, config, reference, &stop, run)? else {
            continue;
        };
        secs.push(done.secs);
        kept = Some((done.store, done.index, done.stats));
    }
    Ok(kept.map(|(store, index, stats)| ColdIndex {
        store,
        index,
        stats,
        secs,
    }))
}

/// One complete cold run.
struct Run {
    store: TempDir,
    index: Index,
    stats: UpdateStats,
    secs: f64,
}

/// One cold index into a fresh store, with its rows printed; `None` when `--searchable-only`
/// stopped it once searchable.
fn one_run(
    opts: &Options,
    config: &IndexConfig,
    reference: &Reference,
    stop: &AtomicBool,
    run: usize,
) -> anyhow::Result<Option<Run>> {
    let store = tempfile::tempdir()?;
    let mut index = Index::open_at(&opts.corpus, store.path(), config.clone())?;
    let load = loadavg();
    let cpu0 = cpu_secs();
    let t = Instant::now();
    let at_searchable = Mutex::new(None);
    let on_progress = |p: Progress| {
        if let Progress::Searchable { .. } = p {
            *at_searchable.lock().unwrap() = Some((t.elapsed().as_secs_f64(), cpu_secs() - cpu0));
            stop.store(opts.searchable_only, Ordering::Relaxed);
        }
    };
    let cold = index.update(&UpdateOptions {
        progress: Some(&on_progress),
        cancel: Some(stop),
        text_first: opts.text_first,
        ..UpdateOptions::default()
    });
    if opts.searchable_only
        && let Some((s_secs, s_cpu)) = at_searchable.lock().unwrap().take()
    {
        println!(
            "| cold index run {}: **searchable** (then stopped) | {} files | **{s_secs:.2} s** | CPU {s_cpu:.1} s | {load} |",
            run + 1,
            index.counts()?.files
        );
        return Ok(None);
    }
    let cold = cold?;
    index.close_writer()?;
    let rows = RunRows {
        run,
        load: &load,
        stats: &cold,
        secs: t.elapsed().as_secs_f64(),
        cpu: cpu_secs() - cpu0,
        reference,
    };
    let searchable = at_searchable.lock().unwrap().take();
    if let Some(s) = searchable {
        rows.searchable(s);
    }
    rows.complete();
    if let (Some(x), Some(s)) = (reference.extraction, searchable) {
        rows.lower_bound(x, s);
    }
    let secs = rows.secs;
    Ok(Some(Run {
        store,
        index,
        stats: cold,
        secs,
    }))
}

/// The rows of one complete cold run.
struct RunRows<'a> {
    /// The run, from 0.
    run: usize,
    /// The load average before it.
    load: &'a str,
    /// What the update did.
    stats: &'a UpdateStats,
    /// Wall seconds until complete.
    secs: f64,
    /// CPU seconds (user + system) until complete.
    cpu: f64,
    /// The floors and ctags.
    reference: &'a Reference,
}

impl RunRows<'_> {
    /// The row of the moment it became searchable (text pass, no tree-sitter): wall and CPU
    /// seconds then.
    fn searchable(&self, (s_secs, s_cpu): (f64, f64)) {
        let (run, load, cold) = (self.run, self.load, self.stats);
        println!(
            "| cold index run {}: **searchable** (walk + read + hash + text windows of every file + BM25 commit; no tree-sitter) | {} files | **{s_secs:.2} s** | CPU {s_cpu:.1} s; text pass {:.2} s{} | {load} |",
            run + 1,
            cold.files,
            cold.text_pass_ms as f64 / 1000.0,
            self.reference
                .ctags
                .as_ref()
                .map(|c| format!("; **{:.2}× ctags -R**", s_secs / c.secs))
                .unwrap_or_default(),
        );
    }

    /// The row of the complete index: counts, time against the floor and ctags, phases.
    fn complete(&self) {
        let (run, load, cold, secs, cpu) = (self.run, self.load, self.stats, self.secs, self.cpu);
        println!(
            "| cold index run {}: **complete** (walk + read + hash + parse + symbols + sections + BM25 + metadata) | {} files, {} symbols, {} sections, {} chunks | **{secs:.2} s** | CPU {cpu:.1} s (user + system); **{:.2}× the parse floor, {}**; phases: text pass {:.2} s, symbol pass {:.2} s (of which, overlapping, read + parse + extract {:.2}, full-text {:.2}, metadata {:.2} s, summed over both passes); {:.2} s per 10k files | {load} |",
            run + 1,
            cold.files,
            cold.symbols,
            cold.sections,
            cold.chunks,
            secs / self.reference.floor,
            self.reference
                .ctags
                .as_ref()
                .map(|c| format!("{:.2}× ctags -R", secs / c.secs))
                .unwrap_or_else(|| "ctags not run".into()),
            cold.text_pass_ms as f64 / 1000.0,
            (cold.index_ms - cold.text_pass_ms) as f64 / 1000.0,
            cold.parse_ms as f64 / 1000.0,
            cold.fulltext_ms as f64 / 1000.0,
            cold.meta_ms as f64 / 1000.0,
            secs * 10_000.0 / cold.files as f64
        );
    }

    /// The lower bound under any complete index: the work no design can skip if it parses
    /// every file and gives BM25 every file's text once — the extraction floor plus this
    /// run's text pass, in sequence and at best overlapped on every core.
    fn lower_bound(&self, (x_secs, x_cpu): (f64, f64), (s_secs, s_cpu): (f64, f64)) {
        let floor_secs = self.reference.floor;
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
        let sum = x_secs + s_secs;
        let overlapped = (x_cpu + s_cpu) / cores;
        println!(
            "| lower bound: floor + extraction, then the text pass (BM25 of every file's text once, no symbol documents, no symbol rows) | {} files | {sum:.2} s in sequence; {overlapped:.2} s if both kept all {cores} cores busy | CPU {:.1} s; **{:.2}× the parse floor** ({:.2}× overlapped){} | {} |",
            self.stats.files,
            x_cpu + s_cpu,
            sum / floor_secs,
            overlapped / floor_secs,
            self.reference
                .ctags
                .as_ref()
                .map(|c| format!(
                    "; {:.2}× ctags -R ({:.2}× overlapped)",
                    sum / c.secs,
                    overlapped / c.secs
                ))
                .unwrap_or_default(),
            self.load,
        );
    }
}
