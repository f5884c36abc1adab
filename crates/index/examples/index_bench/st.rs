//! Embedding throughput of the in-process model against sentence-transformers on the same
//! model directory, texts, batch size, sequence length and thread count, in interleaved
//! rounds (each Trellis engine, then sentence-transformers, per round; medians over the
//! rounds).

use std::io::{BufRead, BufReader, Lines, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use tempfile::TempDir;
use trellis_index::IndexConfig;
use trellis_index::config::EmbeddingConfig;
use trellis_index::embed::{Embedder, fetch};
use trellis_index::vectors::dot;

use super::{loadavg, row};

/// One Trellis engine under test: its label and the embedder.
pub struct Engine<'a> {
    /// How the rows name it, e.g. `native encoder`.
    pub label: String,
    /// The embedder.
    pub model: &'a dyn Embedder,
}

/// Runs the comparison and returns the first engine's embeddings of `texts`.
pub fn compare(
    args: &[String],
    engines: &[Engine<'_>],
    config: &IndexConfig,
    texts: &[String],
    rounds: usize,
) -> anyhow::Result<Vec<Vec<f32>>> {
    let emb = &config.embedding;
    let dir = fetch::ensure_model(&fetch::MINILM, emb.cache_dir.as_deref(), true)?;
    let threads = emb.threads.unwrap_or(1);
    let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
    sample_row(&dir, texts, &refs, emb, threads)?;
    let mut st = SentenceTransformers::start(args, &dir, texts, emb, threads)?;
    // Warm-up of our side too (allocations, the first matmul).
    for e in engines {
        e.model.embed(&refs[..refs.len().min(emb.batch_size)])?;
    }
    let timed = Timings::measure(engines, &refs, rounds, &mut st)?;
    throughput_rows(engines, &timed.ours, refs.len(), emb, threads);
    let first = timed.vecs.first().cloned().unwrap_or_default();
    let Some(ready) = st.finish()? else {
        return Ok(first);
    };
    let theirs_med = median(&timed.theirs);
    st_throughput_row(&ready, &timed.theirs, refs.len(), emb);
    let dim = engines.first().map_or(1, |e| e.model.dim());
    let st_vecs = read_vectors(&st.out_path, dim)?;
    ratio_rows(engines, &timed, &st_vecs, theirs_med);
    Ok(first)
}

/// Prints the row that describes the sample: chunks, size, word pieces and truncation.
fn sample_row(
    dir: &Path,
    texts: &[String],
    refs: &[&str],
    emb: &EmbeddingConfig,
    threads: usize,
) -> anyhow::Result<()> {
    let kb = texts.iter().map(String::len).sum::<usize>() / 1024;
    let (mean_tokens, truncated) = token_stats(dir, refs, emb.max_tokens)?;
    println!(
        "| embedding sample | {} chunks, {kb} KB, {mean_tokens:.0} word pieces per text after truncation, {truncated} of them truncated at {} | batch {}, {threads} threads | | {} |",
        refs.len(),
        emb.max_tokens,
        emb.batch_size,
        loadavg()
    );
    Ok(())
}

/// The sentence-transformers side: a Python process that embeds the same texts once per
/// `round` line on its stdin, answers with the seconds it took, and writes its vectors to
/// `out_path` when it quits.
struct SentenceTransformers {
    /// The process, when it could be spawned.
    child: Option<Child>,
    /// Its stdout, line by line.
    lines: Option<Lines<BufReader<ChildStdout>>>,
    /// Its `ready TORCH ST THREADS` line, when it started.
    ready: Option<String>,
    /// Where it writes its vectors.
    out_path: PathBuf,
    /// Holds the texts and the vectors until the comparison ends.
    _work: TempDir,
}

impl SentenceTransformers {
    /// Writes the texts, spawns the script (`--python`, `--st-script`) and waits for its
    /// `ready` line; prints a row when it cannot be run or does not start.
    fn start(
        args: &[String],
        dir: &Path,
        texts: &[String],
        emb: &EmbeddingConfig,
        threads: usize,
    ) -> anyhow::Result<Self> {
        let python = value(args, "--python").map_or_else(
            || {
                std::env::var_os("HOME")
                    .map(PathBuf::from)
                    .unwrap_or_default()
                    .join(".cache/trellis/bench-venv/bin/python")
            },
            PathBuf::from,
        );
        let script = value(args, "--st-script").map_or_else(
            || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/bench-embeddings.py"),
            PathBuf::from,
        );
        let work = tempfile::tempdir()?;
        let texts_path = work.path().join("texts.json");
        let out_path = work.path().join("st.f32");
        std::fs::write(&texts_path, serde_json::to_vec(texts)?)?;
        let child = Command::new(&python)
            .arg(&script)
            .arg("--model-dir")
            .arg(dir)
            .arg("--texts")
            .arg(&texts_path)
            .args(["--batch-size", &emb.batch_size.to_string()])
            .args(["--max-seq-length", &emb.max_tokens.to_string()])
            .args(["--threads", &threads.to_string()])
            .arg("--out")
            .arg(&out_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn();
        let mut child = match child {
            Ok(c) => Some(c),
            Err(e) => {
                println!(
                    "| sentence-transformers | not run: {} {}: {e} | | | |",
                    python.display(),
                    script.display()
                );
                None
            }
        };
        let mut lines = child
            .as_mut()
            .and_then(|c| c.stdout.take())
            .map(|o| BufReader::new(o).lines());
        let ready = lines
            .as_mut()
            .and_then(|l| l.next())
            .transpose()?
            .filter(|l| l.starts_with("ready "));
        if child.is_some() && ready.is_none() {
            println!("| sentence-transformers | failed to start (see stderr) | | | |");
        }
        Ok(Self {
            child,
            lines,
            ready,
            out_path,
            _work: work,
        })
    }

    /// One timed round of the script, with a pause either side; `None` when it is not running.
    fn round(&mut self) -> anyhow::Result<Option<Duration>> {
        let (Some(c), Some(l), Some(_)) = (
            self.child.as_mut(),
            self.lines.as_mut(),
            self.ready.as_ref(),
        ) else {
            return Ok(None);
        };
        std::thread::sleep(Duration::from_millis(500));
        let stdin = c.stdin.as_mut().expect("piped");
        writeln!(stdin, "round")?;
        stdin.flush()?;
        let secs: f64 = l
            .next()
            .transpose()?
            .ok_or_else(|| anyhow::anyhow!("sentence-transformers exited"))?
            .trim()
            .parse()?;
        std::thread::sleep(Duration::from_millis(500));
        Ok(Some(Duration::from_secs_f64(secs)))
    }

    /// Tells a started script to quit (so that it writes its vectors) and waits for it;
    /// returns its `ready` line, or `None` when it never started.
    fn finish(&mut self) -> anyhow::Result<Option<String>> {
        let (Some(mut c), Some(ready)) = (self.child.take(), self.ready.take()) else {
            return Ok(None);
        };
        if let Some(stdin) = c.stdin.as_mut() {
            writeln!(stdin, "quit")?;
        }
        drop(c.stdin.take());
        c.wait()?;
        Ok(Some(ready))
    }
}

/// The interleaved rounds: each engine's times and last vectors, and the script's times.
struct Timings {
    /// Per engine, the time of each round.
    ours: Vec<Vec<Duration>>,
    /// The script's time of each round.
    theirs: Vec<Duration>,
    /// Per engine, the vectors of the last round.
    vecs: Vec<Vec<Vec<f32>>>,
}

impl Timings {
    /// Runs `rounds` rounds (at least one): every engine, then the script.
    fn measure(
        engines: &[Engine<'_>],
        refs: &[&str],
        rounds: usize,
        st: &mut SentenceTransformers,
    ) -> anyhow::Result<Self> {
        let mut ours = vec![Vec::new(); engines.len()];
        let mut theirs = Vec::new();
        let mut vecs = vec![Vec::new(); engines.len()];
        for _ in 0..rounds.max(1) {
            for (i, e) in engines.iter().enumerate() {
                let t = Instant::now();
                vecs[i] = e.model.embed(refs)?;
                ours[i].push(t.elapsed());
            }
            if let Some(d) = st.round()? {
                theirs.push(d);
            }
        }
        Ok(Self { ours, theirs, vecs })
    }
}

/// Prints each engine's throughput row.
fn throughput_rows(
    engines: &[Engine<'_>],
    ours: &[Vec<Duration>],
    texts: usize,
    emb: &EmbeddingConfig,
    threads: usize,
) {
    let n = texts as f64;
    for (e, times) in engines.iter().zip(ours) {
        let med = median(times);
        row(
            &format!(
                "embedding throughput, Trellis ({}, {threads} single-threaded workers, all-MiniLM-L6-v2, CPU, ≤{} tokens, batches of ≤{} texts)",
                e.label, emb.max_tokens, emb.batch_size
            ),
            &format!("{texts} chunks × {} rounds", times.len()),
            &format!("{:.1} chunks/s", n / med),
            &format!("median {med:.2} s; rounds {}", list(times)),
        );
    }
}

/// Prints the script's throughput row, with the versions its `ready` line reports.
fn st_throughput_row(ready: &str, theirs: &[Duration], texts: usize, emb: &EmbeddingConfig) {
    let theirs_med = median(theirs);
    let mut parts = ready.split_whitespace().skip(1);
    let (torch, stv, st_threads) = (
        parts.next().unwrap_or("?"),
        parts.next().unwrap_or("?"),
        parts.next().unwrap_or("?"),
    );
    row(
        &format!(
            "embedding throughput, sentence-transformers {stv} (torch {torch}, CPU f32, batch {}, max_seq_length {}, {st_threads} threads)",
            emb.batch_size, emb.max_tokens
        ),
        &format!("same {texts} chunks × {} rounds", theirs.len()),
        &format!("{:.1} chunks/s", texts as f64 / theirs_med),
        &format!("median {theirs_med:.2} s; rounds {}", list(theirs)),
    );
}

/// The script's vectors: little-endian f32 rows of `dim` values.
fn read_vectors(path: &Path, dim: usize) -> anyhow::Result<Vec<Vec<f32>>> {
    let bytes = std::fs::read(path)?;
    Ok(bytes
        .chunks_exact(dim * 4)
        .map(|b| {
            b.chunks_exact(4)
                .map(|x| f32::from_le_bytes([x[0], x[1], x[2], x[3]]))
                .collect()
        })
        .collect())
}

/// Prints, per engine, the throughput ratio to the script and how closely the vectors agree.
fn ratio_rows(engines: &[Engine<'_>], timed: &Timings, st_vecs: &[Vec<f32>], theirs_med: f64) {
    for ((e, times), vs) in engines.iter().zip(&timed.ours).zip(&timed.vecs) {
        let mut min_cos = f32::MAX;
        let mut sum = 0.0;
        for (a, b) in vs.iter().zip(st_vecs) {
            let c = dot(a, b);
            min_cos = min_cos.min(c);
            sum += c;
        }
        row(
            &format!(
                "**throughput ratio Trellis ({}) ÷ sentence-transformers** (same run)",
                e.label
            ),
            &format!(
                "agreement: cosine(ours, theirs) min {min_cos:.5}, mean {:.5} over {} texts",
                sum / st_vecs.len().max(1) as f32,
                st_vecs.len()
            ),
            &format!("**{:.2}×**", theirs_med / median(times)),
            "",
        );
    }
}

pub fn value<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(String::as_str)
}

fn median(v: &[Duration]) -> f64 {
    let mut s: Vec<f64> = v.iter().map(Duration::as_secs_f64).collect();
    s.sort_by(f64::total_cmp);
    s.get(s.len() / 2).copied().unwrap_or(f64::NAN)
}

fn list(v: &[Duration]) -> String {
    v.iter()
        .map(|d| format!("{:.2}", d.as_secs_f64()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Mean word pieces per text after truncation at `max`, and how many texts were longer
/// (counted by the model's own tokenizer, up to the model's 512 positions).
fn token_stats(dir: &Path, texts: &[&str], max: usize) -> anyhow::Result<(f64, usize)> {
    let cfg = trellis_index::config::EmbeddingConfig {
        max_tokens: 512,
        threads: Some(1),
        ..Default::default()
    };
    let tok = trellis_index::embed::local::LocalEmbedder::load(dir, &cfg)?;
    let lens: Vec<usize> = texts.iter().map(|t| tok.token_ids(t).len()).collect();
    let kept: usize = lens.iter().map(|&l| l.min(max)).sum();
    Ok((
        kept as f64 / lens.len().max(1) as f64,
        lens.iter().filter(|&&l| l > max).count(),
    ))
}
