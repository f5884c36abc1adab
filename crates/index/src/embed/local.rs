//! all-MiniLM-L6-v2 in-process on llama.cpp (the runtime of the embedded chat model): the
//! model converted once to GGUF ([`super::gguf`]), llama.cpp's WordPiece tokenizer reading
//! the model's own vocabulary, BERT encoder with mean pooling over each text's tokens, then L2
//! normalisation — the sentence-transformers pipeline of the model
//! (`Transformer → Pooling(mean) → Normalize`).
//!
//! Two engines run the forward pass ([`LocalEngine`]): the native encoder ([`trellis_encoder`],
//! the default) over the shipped f32 weights, or llama.cpp over the converted GGUF. Both read
//! the same word pieces, from llama.cpp's tokenizer over the GGUF's vocabulary.
//!
//! Worker threads own their engine state (a llama.cpp context cannot move between threads;
//! the native encoder's scratch buffers are per thread) for the embedder's lifetime; callers
//! tokenise on their own thread and queue token batches.

use std::num::NonZeroU32;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use llama_cpp_2::context::params::{LlamaContextParams, LlamaPoolingType};
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::token::LlamaToken;

use super::gguf::{self, WeightType};
use super::{Embedder, check_shape};
use crate::config::{EmbeddingConfig, LocalEngine};
use crate::error::{Error, Result};
use crate::vectors::normalize;
use trellis_encoder::{Encoder, Scratch};

/// Most tokens in one native-encoder batch: 32 texts of 256 word pieces (the defaults).
const NATIVE_BATCH_TOKENS: usize = 8192;

/// The weight type of the default model.
pub const DEFAULT_WEIGHTS: WeightType = WeightType::F32;

fn emb(e: impl std::fmt::Display) -> Error {
    Error::Embedding(e.to_string())
}

/// The process-wide llama.cpp backend, shared with the embedded chat model.
fn backend() -> Result<&'static LlamaBackend> {
    trellis_llm::embedded::backend().map_err(emb)
}

/// One batch for a worker: token sequences, answered with one pooled vector per sequence, in
/// order, tagged with the batch's index.
struct Task {
    index: usize,
    seqs: Vec<Vec<i32>>,
    reply: mpsc::Sender<(usize, Result<Vec<Vec<f32>>>)>,
}

/// The local embedding model on llama.cpp.
pub struct LocalEmbedder {
    model: Arc<LlamaModel>,
    tasks: mpsc::Sender<Task>,
    dim: usize,
    batch_size: usize,
    batch_tokens: usize,
    max_tokens: usize,
    weights: WeightType,
    engine: LocalEngine,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("dim", &self.dim)
            .field("weights", &self.weights)
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

impl LocalEmbedder {
    /// Loads the model from a directory with `config.json`, `tokenizer.json` and
    /// `model.safetensors` with the default weight type ([`DEFAULT_WEIGHTS`]), converting it
    /// to GGUF on first use.
    pub fn load(dir: &Path, config: &EmbeddingConfig) -> Result<Self> {
        Self::load_with(dir, config, DEFAULT_WEIGHTS)
    }

    /// Like [`LocalEmbedder::load`] with the given weight type (of the llama.cpp engine's
    /// GGUF; the native engine always runs the shipped f32 weights).
    pub fn load_with(dir: &Path, config: &EmbeddingConfig, weights: WeightType) -> Result<Self> {
        let engine = config.engine;
        // The native engine reads only the vocabulary from the GGUF and runs the shipped f32
        // weights, so its GGUF is always the f32 one.
        let weights = match engine {
            LocalEngine::Native => WeightType::F32,
            LocalEngine::LlamaCpp => weights,
        };
        let path = gguf::ensure_gguf(dir, weights)?;
        let backend = backend()?;
        // The native engine needs only the vocabulary from the GGUF.
        let params = LlamaModelParams::default().with_vocab_only(engine == LocalEngine::Native);
        let model = Arc::new(
            LlamaModel::load_from_file(backend, &path, &params)
                .map_err(|e| Error::Embedding(format!("{}: {e}", path.display())))?,
        );
        let encoder = match engine {
            LocalEngine::Native => Some(Arc::new(Encoder::load(dir).map_err(emb)?)),
            LocalEngine::LlamaCpp => None,
        };
        let (dim, positions) = match &encoder {
            Some(e) => (e.dim(), e.max_positions()),
            None => (
                usize::try_from(model.n_embd()).map_err(emb)?,
                model.n_ctx_train() as usize,
            ),
        };
        let max_tokens = config.max_tokens.clamp(2, positions.max(2));
        let batch_size = config.batch_size.clamp(1, 256);
        // A llama.cpp batch holds at most one text's worth of tokens: a long text alone, short
        // ones together. All tokens of a batch share one masked attention matrix, so packing
        // more only adds attention work the mask discards (measured: 128 tokens per batch beat
        // 256, 512 and 1024 — docs/benchmarks.md). The native encoder attends per text, so
        // its batches are `batch_size` texts, capped at NATIVE_BATCH_TOKENS tokens so a worker's
        // buffers stay bounded (~150 MB) whatever `batch_size` is configured.
        let batch_tokens = match engine {
            LocalEngine::Native => NATIVE_BATCH_TOKENS.max(max_tokens),
            LocalEngine::LlamaCpp => max_tokens,
        };
        let threads = config.threads.unwrap_or_else(|| {
            std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
        });
        // One single-threaded worker per thread: ggml's threads synchronise by spinning at
        // every operation, which collapses when the cores are shared with other work;
        // independent workers on separate batches never wait for each other.
        let workers = threads.max(1);
        let shape = Shape {
            tokens: u32::try_from(max_tokens).map_err(emb)?,
            seqs: u32::try_from(batch_size).map_err(emb)?,
            threads: 1,
        };
        let (tx, rx) = mpsc::channel::<Task>();
        let rx = Arc::new(Mutex::new(rx));
        let (ready_tx, ready_rx) = mpsc::channel::<Result<()>>();
        for i in 0..workers {
            let model = Arc::clone(&model);
            let encoder = encoder.clone();
            let rx = Arc::clone(&rx);
            let ready = ready_tx.clone();
            std::thread::Builder::new()
                .name(format!("trellis-embed-{i}"))
                .spawn(move || match encoder {
                    Some(encoder) => native_worker(&encoder, &rx, &ready),
                    None => worker(&model, backend, shape, &rx, &ready),
                })
                .map_err(emb)?;
        }
        drop(ready_tx);
        for _ in 0..workers {
            ready_rx
                .recv()
                .map_err(|_| Error::Embedding("embedding worker exited while starting".into()))??;
        }
        Ok(LocalEmbedder {
            model,
            tasks: tx,
            dim,
            batch_size,
            batch_tokens,
            max_tokens,
            weights,
            engine,
        })
    }

    /// The word pieces of `text` as the model reads them: `[CLS] … [SEP]`, at most
    /// `max_tokens` (longer texts lose their end, keeping the closing `[SEP]`).
    pub fn token_ids(&self, text: &str) -> Vec<i32> {
        self.tokenize(text).iter().map(|t| t.0).collect()
    }

    fn tokenize(&self, text: &str) -> Vec<LlamaToken> {
        let vocab = self.model.vocab();
        let text = hf_compat(text);
        let mut tokens = vocab.tokenize(text.as_bytes(), true, true);
        if tokens.len() > self.max_tokens {
            tokens.truncate(self.max_tokens - 1);
            tokens.push(vocab.sep());
        }
        tokens
    }

    /// The weight type the model runs with (always f32 on the native engine).
    pub fn weights(&self) -> WeightType {
        self.weights
    }

    /// The engine running the forward pass.
    pub fn engine(&self) -> LocalEngine {
        self.engine
    }
}

/// HF's `WordPiece` reads a word of more than this many characters as `[UNK]`.
const MAX_WORD_CHARS: usize = 100;

/// Rewrites `text` where llama.cpp's WordPiece would read it differently from the model's
/// `tokenizer.json` (HF `BertNormalizer` + `BertPreTokenizer` + `WordPiece`): control
/// characters other than tab and newlines are removed (llama.cpp treats vertical tab and form
/// feed as spaces), Hangul syllables are decomposed into their jamo (the NFD that
/// llama.cpp's normaliser skips), and words longer than 100 characters become `[UNK]`
/// (llama.cpp splits them into pieces). Word boundaries: whitespace, ASCII punctuation and symbols, general and
/// CJK punctuation, CJK ideographs — as the pre-tokenizer splits; rare non-ASCII punctuation
/// outside those blocks is not recognised. Returns `text` itself when nothing changes.
fn hf_compat(text: &str) -> std::borrow::Cow<'_, str> {
    let control = |c: char| c.is_control() && !matches!(c, '\t' | '\n' | '\r');
    let boundary = |c: char| {
        c.is_whitespace()
            || c.is_ascii_punctuation()
            || matches!(c as u32, 0x2000..=0x206F | 0x3000..=0x303F | 0x3400..=0x4DBF
                | 0x4E00..=0x9FFF | 0xF900..=0xFAFF | 0x20000..=0x2FA1F)
    };
    let mut run = 0;
    let needed = text.chars().any(|c| {
        if control(c) || is_hangul_syllable(c) {
            return true;
        }
        run = if boundary(c) { 0 } else { run + 1 };
        run > MAX_WORD_CHARS
    });
    if !needed {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut word = String::new();
    let flush = |word: &mut String, out: &mut String| {
        if word.chars().count() > MAX_WORD_CHARS {
            out.push_str(" [UNK] ");
        } else {
            out.push_str(word);
        }
        word.clear();
    };
    for c in text.chars().filter(|&c| !control(c)) {
        if is_hangul_syllable(c) {
            word.extend(hangul_jamo(c));
        } else if boundary(c) {
            flush(&mut word, &mut out);
            out.push(c);
        } else {
            word.push(c);
        }
    }
    flush(&mut word, &mut out);
    std::borrow::Cow::Owned(out)
}

fn is_hangul_syllable(c: char) -> bool {
    (0xAC00..=0xD7A3).contains(&(c as u32))
}

/// The canonical decomposition of a Hangul syllable (Unicode §3.12): leading consonant, vowel
/// and, if any, trailing consonant.
fn hangul_jamo(c: char) -> impl Iterator<Item = char> {
    let s = c as u32 - 0xAC00;
    let l = char::from_u32(0x1100 + s / 588);
    let v = char::from_u32(0x1161 + (s % 588) / 28);
    let t = match s % 28 {
        0 => None,
        t => char::from_u32(0x11A7 + t),
    };
    [l, v, t].into_iter().flatten()
}

/// A worker context's size: tokens per batch, texts per batch, threads.
#[derive(Clone, Copy)]
struct Shape {
    tokens: u32,
    seqs: u32,
    threads: i32,
}

/// Runs batches on the native encoder until the embedder is dropped.
fn native_worker(
    encoder: &Encoder,
    tasks: &Mutex<mpsc::Receiver<Task>>,
    ready: &mpsc::Sender<Result<()>>,
) {
    let _ = ready.send(Ok(()));
    let mut scratch = Scratch::default();
    loop {
        // The lock is held only while waiting for the next task.
        let task = match tasks.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(task) = task else { return };
        let result = encoder
            .embed(&task.seqs, &mut scratch)
            .map_err(emb)
            .map(|mut vs| {
                vs.iter_mut().for_each(|v| normalize(v));
                vs
            });
        let _ = task.reply.send((task.index, result));
    }
}

/// Owns one llama.cpp context; runs batches until the embedder is dropped.
fn worker(
    model: &LlamaModel,
    backend: &LlamaBackend,
    shape: Shape,
    tasks: &Mutex<mpsc::Receiver<Task>>,
    ready: &mpsc::Sender<Result<()>>,
) {
    let params = LlamaContextParams::default()
        .with_embeddings(true)
        .with_pooling_type(LlamaPoolingType::Mean)
        .with_n_ctx(NonZeroU32::new(shape.tokens))
        .with_n_batch(shape.tokens)
        .with_n_ubatch(shape.tokens)
        .with_n_seq_max(shape.seqs)
        .with_n_threads(shape.threads)
        .with_n_threads_batch(shape.threads);
    let mut ctx = match model.new_context(backend, params) {
        Ok(c) => {
            let _ = ready.send(Ok(()));
            c
        }
        Err(e) => {
            let _ = ready.send(Err(Error::Embedding(format!(
                "cannot create the embedding context: {e}"
            ))));
            return;
        }
    };
    let mut batch = LlamaBatch::new(
        shape.tokens as usize,
        i32::try_from(shape.seqs).unwrap_or(1),
    );
    loop {
        // The lock is held only while waiting for the next task.
        let task = match tasks.lock() {
            Ok(rx) => rx.recv(),
            Err(_) => return,
        };
        let Ok(task) = task else { return };
        let result = (|| {
            batch.clear();
            for (s, tokens) in task.seqs.iter().enumerate() {
                let s = i32::try_from(s).map_err(emb)?;
                for (p, t) in tokens.iter().enumerate() {
                    let p = i32::try_from(p).map_err(emb)?;
                    batch.add(LlamaToken(*t), p, &[s], true).map_err(emb)?;
                }
            }
            ctx.decode(&mut batch).map_err(emb)?;
            (0..task.seqs.len())
                .map(|s| {
                    let s = i32::try_from(s).map_err(emb)?;
                    let mut v = ctx.embeddings_seq_ith(s).map_err(emb)?.to_vec();
                    normalize(&mut v);
                    Ok(v)
                })
                .collect::<Result<Vec<_>>>()
        })();
        let _ = task.reply.send((task.index, result));
    }
}

impl Embedder for LocalEmbedder {
    fn id(&self) -> String {
        format!("local:all-MiniLM-L6-v2:{}:{}", self.dim, self.max_tokens)
    }

    fn dim(&self) -> usize {
        self.dim
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let mut tokens: Vec<Vec<i32>> = texts.iter().map(|t| self.token_ids(t)).collect();
        // Texts of similar length share a batch: on llama.cpp little compute then goes to
        // cross-text attention that the mask discards.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| tokens[i].len());
        let mut batches: Vec<Vec<Vec<i32>>> = Vec::new();
        let mut groups: Vec<Vec<usize>> = Vec::new();
        let mut used = usize::MAX;
        for i in order {
            let n = tokens[i].len();
            let full = groups
                .last()
                .is_none_or(|g| g.len() >= self.batch_size || used + n > self.batch_tokens);
            if full {
                groups.push(Vec::new());
                batches.push(Vec::new());
                used = 0;
            }
            used += n;
            if let (Some(g), Some(b)) = (groups.last_mut(), batches.last_mut()) {
                g.push(i);
                b.push(std::mem::take(&mut tokens[i]));
            }
        }
        let (reply, answers) = mpsc::channel();
        let n = batches.len();
        // Longest batches first, so the workers finish together.
        for (index, seqs) in batches.into_iter().enumerate().rev() {
            self.tasks
                .send(Task {
                    index,
                    seqs,
                    reply: reply.clone(),
                })
                .map_err(|_| Error::Embedding("embedding worker stopped".into()))?;
        }
        drop(reply);
        let mut done: Vec<Vec<Vec<f32>>> = vec![Vec::new(); n];
        for _ in 0..n {
            let (index, result) = answers
                .recv()
                .map_err(|_| Error::Embedding("embedding worker stopped".into()))?;
            done[index] = result?;
        }
        let vecs: Vec<Vec<f32>> = done.into_iter().flatten().collect();
        check_shape(&vecs, texts.len(), "local model")?;
        let mut out = vec![Vec::new(); texts.len()];
        for (i, v) in groups.into_iter().flatten().zip(vecs) {
            out[i] = v;
        }
        Ok(out)
    }
}
