//! The update pipeline: files are read, hashed and parsed in batches on the rayon pool while a
//! writer thread adds the previous batch to the full-text index, commits it and then records it
//! in the metadata database.
//!
//! Two batches are in flight at most (one being parsed, one being written), so memory stays
//! bounded by the batch size. The order of the writer's steps per batch is what makes an
//! interrupted update safe to resume: the batch's paths are journaled as pending, the
//! full-text index commits, and only then does the metadata say "indexed at this hash" (and
//! clear the journal). A crash anywhere leaves every file of the batch either recorded with
//! its committed documents, or stale/pending, to be rewritten (delete + add) by the next update.
//!
//! A large update runs the pipeline twice ([`Pass`]): first a text pass that does no
//! tree-sitter work (code files become text windows, recorded as unparsed), after which every
//! file is searchable; then a symbol pass over the unparsed files, which replaces each file's
//! windows with its symbols batch by batch.

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::time::Instant;

use rayon::prelude::*;

use crate::analyze::{FileAnalysis, analyze};
use crate::bm25::Bm25;
use crate::error::{Error, Result};
use crate::lang::Lang;
use crate::meta::{FileRecord, FileState, Meta};
use crate::scan::ScannedFile;
use crate::update::{Progress, UpdateOptions, UpdateStats};

/// What the pipeline does with a changed file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Pass {
    /// Code files are indexed as text windows and recorded as unparsed (no tree-sitter);
    /// other files are analysed completely (their analysis needs no parser).
    Text,
    /// Every file is analysed completely: symbols for code, sections for documents.
    Full,
}

/// Where batches are written.
pub(crate) struct Sink<'a> {
    /// The full-text index (its writer already prepared).
    pub bm25: &'a mut Bm25,
    /// The metadata database.
    pub meta: &'a mut Meta,
}

/// A file after reading: its content hash and, when the content changed, its analysis.
struct Processed {
    file: ScannedFile,
    hash: i64,
    analysis: Option<FileAnalysis>,
    /// Indexed as text windows only (see [`Pass::Text`]).
    unparsed: bool,
}

/// One parsed batch on its way to the writer.
struct Batch {
    processed: Vec<Processed>,
    removed: Vec<String>,
    /// Files of the update done once this batch is written.
    done: usize,
}

/// What the writer did.
#[derive(Default)]
struct Written {
    files_read: usize,
    files_indexed: usize,
    files_removed: usize,
    chunks_written: usize,
    fulltext_ms: u64,
    meta_ms: u64,
    /// Stopped by the cancel flag with batches left unwritten.
    cancelled: bool,
}

/// Runs the pipeline over `stale` (files whose size or mtime changed) and `removed` (paths to
/// forget). Returns whether anything was written (so cached vectors must be reloaded).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run(
    root: &Path,
    stale: &[ScannedFile],
    removed: Vec<String>,
    states: &HashMap<String, FileState>,
    batch_files: usize,
    pass: Pass,
    opts: &UpdateOptions<'_>,
    sink: Sink<'_>,
    stats: &mut UpdateStats,
) -> Result<bool> {
    let batches: Vec<&[ScannedFile]> = if stale.is_empty() {
        vec![&[]]
    } else {
        stale.chunks(batch_files).collect()
    };
    let total = stale.len();
    let progress = opts.progress;
    let (written, parse_ms, cancelled) = std::thread::scope(|scope| {
        // Capacity 1: the parser may run one batch ahead of the writer, no more.
        let (tx, rx) = mpsc::sync_channel::<Batch>(1);
        let writer = scope.spawn(move || -> Result<Written> {
            let mut w = Written::default();
            for batch in rx {
                // Stop at the batch boundary even when the parser has already run ahead.
                if opts.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                    w.cancelled = true;
                    break;
                }
                write_batch(
                    sink.bm25,
                    sink.meta,
                    batch.processed,
                    &batch.removed,
                    &mut w,
                )?;
                if let Some(p) = progress {
                    let (done, total) = (batch.done, total);
                    p(match pass {
                        Pass::Text => Progress::TextIndexed { done, total },
                        Pass::Full => Progress::Parsed { done, total },
                    });
                }
            }
            Ok(w)
        });
        let mut removed = Some(removed);
        let mut parse_ms = 0;
        let mut done = 0;
        let mut cancelled = false;
        for files in batches {
            if opts.cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                cancelled = true;
                break;
            }
            let tp = Instant::now();
            let processed: Vec<Processed> = files
                .par_iter()
                .map(|f| process_file(root, f, states.get(&f.path), pass))
                .collect();
            parse_ms += tp.elapsed().as_millis() as u64;
            done += files.len();
            let batch = Batch {
                processed,
                removed: removed.take().unwrap_or_default(),
                done,
            };
            if tx.send(batch).is_err() {
                // The writer stopped on an error; joining it below returns that error.
                break;
            }
        }
        drop(tx);
        let written = writer
            .join()
            .unwrap_or_else(|_| Err(Error::Config("index writer thread panicked".into())));
        (written, parse_ms, cancelled)
    });
    let w = written?;
    stats.parse_ms += parse_ms;
    stats.fulltext_ms += w.fulltext_ms;
    stats.meta_ms += w.meta_ms;
    stats.files_read += w.files_read;
    stats.files_indexed += w.files_indexed;
    stats.files_removed += w.files_removed;
    stats.chunks_written += w.chunks_written;
    if cancelled || w.cancelled {
        return Err(Error::Cancelled);
    }
    Ok(w.files_indexed > 0 || w.files_removed > 0)
}

/// Writes one batch: journal, full-text add + commit, then metadata.
fn write_batch(
    bm25: &mut Bm25,
    meta: &mut Meta,
    processed: Vec<Processed>,
    removed: &[String],
    w: &mut Written,
) -> Result<()> {
    let tf = Instant::now();
    let journal: Vec<&str> = processed
        .iter()
        .filter(|p| p.analysis.is_some())
        .map(|p| p.file.path.as_str())
        .chain(removed.iter().map(String::as_str))
        .collect();
    if !journal.is_empty() {
        meta.mark_pending(&journal)?;
    }
    for p in removed {
        bm25.delete_path(p)?;
    }
    let mut records = Vec::new();
    let mut touched = Vec::new();
    for p in &processed {
        let state = FileState {
            hash: p.hash,
            size: p.file.size,
            mtime_ns: p.file.mtime_ns,
        };
        match &p.analysis {
            Some(a) => {
                bm25.delete_path(&p.file.path)?;
                for c in &a.chunks {
                    bm25.add(c)?;
                }
                w.chunks_written += a.chunks.len();
                records.push(FileRecord {
                    path: &p.file.path,
                    state,
                    analysis: a,
                    unparsed: p.unparsed,
                });
            }
            None => touched.push((p.file.path.clone(), state)),
        }
    }
    // Full-text first, then metadata: a crash in between leaves the metadata saying
    // "stale", and the next run rewrites the file's documents (delete + add).
    if !records.is_empty() || !removed.is_empty() {
        bm25.commit()?;
    }
    w.fulltext_ms += tf.elapsed().as_millis() as u64;
    let tm = Instant::now();
    meta.apply(&records, removed, &touched)?;
    w.meta_ms += tm.elapsed().as_millis() as u64;
    w.files_read += processed.len();
    w.files_indexed += records.len();
    w.files_removed += removed.len();
    Ok(())
}

fn process_file(root: &Path, f: &ScannedFile, old: Option<&FileState>, pass: Pass) -> Processed {
    let bytes = std::fs::read(root.join(&f.path)).unwrap_or_default();
    let hash = xxhash_rust::xxh3::xxh3_64(&bytes) as i64;
    if old.is_some_and(|o| o.hash == hash) {
        return Processed {
            file: f.clone(),
            hash,
            analysis: None,
            unparsed: false,
        };
    }
    let head = &bytes[..bytes.len().min(8192)];
    let mut unparsed = false;
    let analysis = match std::str::from_utf8(&bytes) {
        Ok(text) if !head.contains(&0) => {
            unparsed = pass == Pass::Text && Lang::detect(&f.path).is_code();
            analyze(&f.path, text, !unparsed)
        }
        // Binary or not UTF-8: remembered (so it is not re-read) but not indexed.
        _ => FileAnalysis::default(),
    };
    Processed {
        file: f.clone(),
        hash,
        analysis: Some(analysis),
        unparsed,
    }
}
