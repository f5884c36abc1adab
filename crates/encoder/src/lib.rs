//! The native BERT encoder: all-MiniLM-L6-v2's forward pass written out in Rust over the
//! shipped f32 `model.safetensors`, the default local embedding engine.
//!
//! Why not llama.cpp: llama.cpp runs one text per batch (all tokens of a batch share one
//! attention matrix, so packing texts together only adds masked-out work), which keeps its
//! matrix products small. Here every linear layer runs once over the tokens of *all* texts of
//! a batch — no padding: the tokens are simply concatenated — and attention runs per text and
//! head, so the products are large (about 2,300 × 384 for 32 chunks) and attention wastes
//! nothing. Matrix products use the `gemm` project's f32 kernels (`gemm-f32`), which pick
//! AVX-512, AVX2 or NEON kernels at run time, so one portable binary uses the widest vectors
//! the CPU has; the element-wise kernels (layer norm, softmax, GELU) are compiled for the same
//! instruction sets and chosen at run time too.
//!
//! The pipeline is sentence-transformers' for this model: token + position + token-type
//! embeddings and layer norm; per layer, self-attention (12 heads, scaled dot product,
//! softmax), output projection, residual and layer norm, feed-forward with the exact (erf)
//! GELU, residual and layer norm; then the mean over each text's tokens (the caller applies
//! the final L2 normalisation).
//! Agreement with sentence-transformers is tested (trellis-index's `tests/suite/embedding.rs`)
//! and measured by trellis-index's `index_bench`.

use std::path::Path;

use multiversion::multiversion;

pub mod safetensors;

use safetensors::{BertConfig, SafeTensors};

/// Errors of loading the model or running it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A model file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The model files or the input are not what the encoder runs.
    #[error("native encoder: {0}")]
    Model(String),
}

/// The crate's result type.
pub type Result<T> = std::result::Result<T, Error>;

fn err(what: impl std::fmt::Display) -> Error {
    Error::Model(what.to_string())
}

/// Layer-norm scale and shift.
struct Norm {
    gamma: Vec<f32>,
    beta: Vec<f32>,
}

/// A linear layer `y = x·W + b`, `W` stored input-major (`[inputs][outputs]`).
struct Linear {
    weight: Vec<f32>,
    bias: Vec<f32>,
    inputs: usize,
    outputs: usize,
}

struct Layer {
    /// Query, key and value projections side by side (`[hidden][3 × hidden]`).
    qkv: Linear,
    attn_out: Linear,
    attn_norm: Norm,
    up: Linear,
    down: Linear,
    out_norm: Norm,
}

/// The loaded encoder (immutable; shared by the worker threads).
pub struct Encoder {
    hidden: usize,
    heads: usize,
    eps: f32,
    vocab: usize,
    max_positions: usize,
    word: Vec<f32>,
    position: Vec<f32>,
    /// Row 0 of the token-type table (every token is of type 0 for a single text).
    token_type: Vec<f32>,
    embed_norm: Norm,
    layers: Vec<Layer>,
}

/// Per-thread buffers, reused between batches.
#[derive(Default)]
pub struct Scratch {
    x: Vec<f32>,
    y: Vec<f32>,
    qkv: Vec<f32>,
    ctx: Vec<f32>,
    ff: Vec<f32>,
    scores: Vec<f32>,
}

impl std::fmt::Debug for Encoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Encoder")
            .field("hidden", &self.hidden)
            .field("heads", &self.heads)
            .field("layers", &self.layers.len())
            .finish_non_exhaustive()
    }
}

impl Encoder {
    /// Loads `config.json` and `model.safetensors` from `dir`.
    pub fn load(dir: &Path) -> Result<Self> {
        let cfg = BertConfig::read(&dir.join("config.json"))?;
        if !(cfg.hidden_act.is_empty() || cfg.hidden_act == "gelu") {
            return Err(err(format!(
                "{}: hidden_act {:?} is not supported (only \"gelu\")",
                dir.join("config.json").display(),
                cfg.hidden_act
            )));
        }
        let st = SafeTensors::read(&dir.join("model.safetensors"))?;
        let prefix = st.bert_prefix();
        let hidden = cfg.hidden_size as usize;
        let heads = cfg.num_attention_heads as usize;
        if heads == 0 || !hidden.is_multiple_of(heads) {
            return Err(err(format!(
                "{}: {hidden} hidden units do not split into {heads} heads",
                dir.join("config.json").display()
            )));
        }
        let tensor = |name: &str, shape: &[usize]| -> Result<Vec<f32>> {
            let (values, got) = st.f32(&format!("{prefix}{name}"))?;
            if got != shape {
                return Err(st.error(format!("{name}: shape {got:?}, expected {shape:?}")));
            }
            Ok(values)
        };
        let norm = |name: &str| -> Result<Norm> {
            Ok(Norm {
                gamma: tensor(&format!("{name}.weight"), &[hidden])?,
                beta: tensor(&format!("{name}.bias"), &[hidden])?,
            })
        };
        // PyTorch stores a linear layer's weight output-major (`[outputs][inputs]`).
        let linear = |names: &[String], inputs: usize, outputs: usize| -> Result<Linear> {
            let total = outputs * names.len();
            let mut weight = vec![0f32; inputs * total];
            let mut bias = Vec::with_capacity(total);
            for (part, name) in names.iter().enumerate() {
                let w = tensor(&format!("{name}.weight"), &[outputs, inputs])?;
                for (o, row) in w.chunks_exact(inputs).enumerate() {
                    for (i, v) in row.iter().enumerate() {
                        weight[i * total + part * outputs + o] = *v;
                    }
                }
                bias.extend(tensor(&format!("{name}.bias"), &[outputs])?);
            }
            Ok(Linear {
                weight,
                bias,
                inputs,
                outputs: total,
            })
        };
        let inter = cfg.intermediate_size as usize;
        let mut layers = Vec::with_capacity(cfg.num_hidden_layers as usize);
        for i in 0..cfg.num_hidden_layers {
            let l = format!("encoder.layer.{i}");
            let qkv: Vec<String> = ["query", "key", "value"]
                .iter()
                .map(|p| format!("{l}.attention.self.{p}"))
                .collect();
            layers.push(Layer {
                qkv: linear(&qkv, hidden, hidden)?,
                attn_out: linear(&[format!("{l}.attention.output.dense")], hidden, hidden)?,
                attn_norm: norm(&format!("{l}.attention.output.LayerNorm"))?,
                up: linear(&[format!("{l}.intermediate.dense")], hidden, inter)?,
                down: linear(&[format!("{l}.output.dense")], inter, hidden)?,
                out_norm: norm(&format!("{l}.output.LayerNorm"))?,
            });
        }
        let (word, shape) = st.f32(&format!("{prefix}embeddings.word_embeddings.weight"))?;
        if shape.len() != 2 || shape[1] != hidden {
            return Err(st.error(format!("word embeddings: shape {shape:?}")));
        }
        let max_positions = cfg.max_position_embeddings as usize;
        let types = cfg.type_vocab_size as usize;
        let mut token_type = tensor("embeddings.token_type_embeddings.weight", &[types, hidden])?;
        token_type.truncate(hidden);
        Ok(Encoder {
            hidden,
            heads,
            eps: cfg.layer_norm_eps,
            vocab: shape[0],
            max_positions,
            word,
            position: tensor(
                "embeddings.position_embeddings.weight",
                &[max_positions, hidden],
            )?,
            token_type,
            embed_norm: norm("embeddings.LayerNorm")?,
            layers,
        })
    }

    /// The embedding dimension.
    pub fn dim(&self) -> usize {
        self.hidden
    }

    /// The longest text (in word pieces, `[CLS]` and `[SEP]` included) the position table
    /// covers.
    pub fn max_positions(&self) -> usize {
        self.max_positions
    }

    /// Embeds token sequences (each `[CLS] … [SEP]`), returning one mean-pooled vector per
    /// sequence, in order (not yet L2-normalised: the caller scales them to unit length, as it
    /// does for every engine's output).
    pub fn embed(&self, seqs: &[Vec<i32>], s: &mut Scratch) -> Result<Vec<Vec<f32>>> {
        let h = self.hidden;
        let tokens: usize = seqs.iter().map(Vec::len).sum();
        if seqs.iter().any(Vec::is_empty) {
            return Err(err("empty token sequence"));
        }
        s.x.resize(tokens * h, 0.0);
        let mut row = 0;
        for seq in seqs {
            if seq.len() > self.max_positions {
                return Err(err(format!(
                    "{} word pieces, more than the model's {} positions",
                    seq.len(),
                    self.max_positions
                )));
            }
            for (p, &id) in seq.iter().enumerate() {
                let id = usize::try_from(id)
                    .ok()
                    .filter(|&i| i < self.vocab)
                    .ok_or_else(|| err(format!("token id {id} outside the vocabulary")))?;
                let dst = &mut s.x[row * h..(row + 1) * h];
                let word = &self.word[id * h..(id + 1) * h];
                let pos = &self.position[p * h..(p + 1) * h];
                for (((d, w), p), t) in dst.iter_mut().zip(word).zip(pos).zip(&self.token_type) {
                    *d = w + p + t;
                }
                row += 1;
            }
        }
        layer_norm(&mut s.x, &self.embed_norm, self.eps);
        for layer in &self.layers {
            self.layer(layer, seqs, tokens, s)?;
        }
        let mut out = Vec::with_capacity(seqs.len());
        let mut row = 0;
        for seq in seqs {
            let mut v = vec![0f32; h];
            for r in row..row + seq.len() {
                for (a, x) in v.iter_mut().zip(&s.x[r * h..(r + 1) * h]) {
                    *a += x;
                }
            }
            let n = seq.len() as f32;
            v.iter_mut().for_each(|a| *a /= n);
            out.push(v);
            row += seq.len();
        }
        Ok(out)
    }

    fn layer(&self, l: &Layer, seqs: &[Vec<i32>], tokens: usize, s: &mut Scratch) -> Result<()> {
        let h = self.hidden;
        let d = h / self.heads;
        let w = 3 * h;
        l.qkv.forward(&s.x, tokens, &mut s.qkv, None)?;
        s.ctx.resize(tokens * h, 0.0);
        let scale = 1.0 / (d as f32).sqrt();
        let mut start = 0;
        for seq in seqs {
            let n = seq.len();
            s.scores.resize(n * n, 0.0);
            let base = start * w;
            for head in 0..self.heads {
                let q = base + head * d;
                // scores = Q·Kᵀ / √d (n × n): Kᵀ is K read with its strides swapped.
                matmul(
                    Dims { m: n, n, k: d },
                    Out {
                        data: &mut s.scores,
                        offset: 0,
                        rs: n,
                        accumulate: false,
                    },
                    View {
                        data: &s.qkv,
                        offset: q,
                        rs: w,
                        cs: 1,
                    },
                    View {
                        data: &s.qkv,
                        offset: q + h,
                        rs: 1,
                        cs: w,
                    },
                    scale,
                )?;
                softmax_rows(&mut s.scores, n);
                // context = softmax(scores)·V (n × d), written into this head's columns.
                matmul(
                    Dims { m: n, n: d, k: n },
                    Out {
                        data: &mut s.ctx,
                        offset: start * h + head * d,
                        rs: h,
                        accumulate: false,
                    },
                    View {
                        data: &s.scores,
                        offset: 0,
                        rs: n,
                        cs: 1,
                    },
                    View {
                        data: &s.qkv,
                        offset: q + 2 * h,
                        rs: w,
                        cs: 1,
                    },
                    1.0,
                )?;
            }
            start += n;
        }
        // x = norm(x + ctx·Wo + bo)
        l.attn_out.forward(&s.ctx, tokens, &mut s.y, Some(&s.x))?;
        layer_norm(&mut s.y, &l.attn_norm, self.eps);
        std::mem::swap(&mut s.x, &mut s.y);
        // x = norm(x + gelu(x·W1 + b1)·W2 + b2)
        l.up.forward(&s.x, tokens, &mut s.ff, None)?;
        gelu(&mut s.ff);
        l.down.forward(&s.ff, tokens, &mut s.y, Some(&s.x))?;
        layer_norm(&mut s.y, &l.out_norm, self.eps);
        std::mem::swap(&mut s.x, &mut s.y);
        Ok(())
    }
}

impl Linear {
    /// `out = x·W + b (+ residual)` for `rows` rows of `x`.
    fn forward(
        &self,
        x: &[f32],
        rows: usize,
        out: &mut Vec<f32>,
        residual: Option<&[f32]>,
    ) -> Result<()> {
        // Every element is overwritten below (bias, then the product), so old contents may stay.
        out.resize(rows * self.outputs, 0.0);
        for (r, dst) in out.chunks_exact_mut(self.outputs).enumerate() {
            dst.copy_from_slice(&self.bias);
            if let Some(res) = residual {
                let src = &res[r * self.outputs..(r + 1) * self.outputs];
                dst.iter_mut().zip(src).for_each(|(d, s)| *d += s);
            }
        }
        matmul(
            Dims {
                m: rows,
                n: self.outputs,
                k: self.inputs,
            },
            Out {
                data: out,
                offset: 0,
                rs: self.outputs,
                accumulate: true,
            },
            View {
                data: x,
                offset: 0,
                rs: self.inputs,
                cs: 1,
            },
            View {
                data: &self.weight,
                offset: 0,
                rs: self.outputs,
                cs: 1,
            },
            1.0,
        )
    }
}

/// Lanes of the reductions below: independent partial results the compiler keeps in one
/// vector register (a single running float would be one long dependency chain, which it may
/// not reorder).
const LANES: usize = 16;

/// `Σ f(x)` over `v`.
#[inline(always)]
fn sum_of(v: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; LANES];
    let mut chunks = v.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            *a += f(x);
        }
    }
    chunks.remainder().iter().map(|&x| f(x)).sum::<f32>() + acc.iter().sum::<f32>()
}

#[inline(always)]
fn max(v: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; LANES];
    let mut chunks = v.chunks_exact(LANES);
    for c in &mut chunks {
        for (a, &x) in acc.iter_mut().zip(c) {
            if x > *a {
                *a = x;
            }
        }
    }
    chunks
        .remainder()
        .iter()
        .chain(&acc)
        .fold(f32::NEG_INFINITY, |m, &x| if x > m { x } else { m })
}

/// Matrix sizes: `m × k` times `k × n`.
#[derive(Clone, Copy)]
struct Dims {
    m: usize,
    n: usize,
    k: usize,
}

/// A strided read-only matrix inside a slice: element `(i, j)` is at `offset + i·rs + j·cs`.
struct View<'a> {
    data: &'a [f32],
    offset: usize,
    rs: usize,
    cs: usize,
}

/// The destination: row-major with row stride `rs`, columns contiguous.
struct Out<'a> {
    data: &'a mut [f32],
    offset: usize,
    rs: usize,
    /// Add to what is there instead of overwriting it.
    accumulate: bool,
}

/// The index one past the last element a `rows × cols` strided matrix touches.
fn extent(offset: usize, rows: usize, cols: usize, rs: usize, cs: usize) -> usize {
    if rows == 0 || cols == 0 {
        offset
    } else {
        offset + (rows - 1) * rs + (cols - 1) * cs + 1
    }
}

/// `out (+)= scale · lhs · rhs`, bounds-checked, single-threaded (the embedder runs one
/// batch per worker thread).
fn matmul(dims: Dims, out: Out<'_>, lhs: View<'_>, rhs: View<'_>, scale: f32) -> Result<()> {
    let Dims { m, n, k } = dims;
    if m == 0 || n == 0 {
        return Ok(());
    }
    let fits = extent(out.offset, m, n, out.rs, 1) <= out.data.len()
        && extent(lhs.offset, m, k, lhs.rs, lhs.cs) <= lhs.data.len()
        && extent(rhs.offset, k, n, rhs.rs, rhs.cs) <= rhs.data.len();
    if !fits {
        return Err(err(format!("matrix product {m}×{k}·{k}×{n} out of bounds")));
    }
    let stride = |v: usize| isize::try_from(v).map_err(err);
    let (out_rs, lhs_rs, lhs_cs, rhs_rs, rhs_cs) = (
        stride(out.rs)?,
        stride(lhs.rs)?,
        stride(lhs.cs)?,
        stride(rhs.rs)?,
        stride(rhs.cs)?,
    );
    let dst = out.data[out.offset..].as_mut_ptr();
    let a = lhs.data[lhs.offset..].as_ptr();
    let b = rhs.data[rhs.offset..].as_ptr();
    let gemm = gemm_f32::gemm::f32::get_gemm_fn();
    // The kernels prefer a column-oriented destination, so a row-major product is computed
    // as its transpose, `outᵀ = rhsᵀ · lhsᵀ` (what the `gemm` facade does).
    let transpose = 1 < out_rs;
    // (rows, columns, dst column and row strides, left factor and its column and row strides,
    // right factor and its strides), as the kernel takes them.
    let (rows, cols, dst_cs, dst_rs, left, left_cs, left_rs, right, right_cs, right_rs) =
        if transpose {
            (n, m, out_rs, 1, b, rhs_rs, rhs_cs, a, lhs_rs, lhs_cs)
        } else {
            (m, n, 1, out_rs, a, lhs_cs, lhs_rs, b, rhs_cs, rhs_rs)
        };
    // SAFETY: `fits` checked that every element the product reads (`lhs`, `rhs`) or writes
    // (`out`) lies inside its slice, and all strides are positive; the output slice is
    // borrowed mutably, so it aliases neither input; the kernel reads `dst` only when
    // `accumulate` (read_dst) is set, and then it is initialised memory.
    #[allow(unsafe_code)]
    unsafe {
        gemm(
            rows,
            cols,
            k,
            dst,
            dst_cs,
            dst_rs,
            out.accumulate,
            left,
            left_cs,
            left_rs,
            right,
            right_cs,
            right_rs,
            1.0,
            scale,
            false,
            false,
            false,
            gemm_common::Parallelism::None,
        );
    }
    Ok(())
}

/// `exp(x)` for `x ≤ 0`-ish arguments of softmax and GELU, branch-free so it vectorises:
/// `x = n·ln2 + r` with `|r| ≤ ln2/2`, `exp(r)` by its degree-7 Taylor polynomial (relative
/// error < 1e-8, below f32 rounding), `2ⁿ` from the exponent bits.
#[inline(always)]
fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split so that n·LN2_HI is exact for |n| < 2^11 (Cody–Waite).
    const LN2_HI: f32 = 0.693_145_75;
    const LN2_LO: f32 = 1.428_606_8e-6;
    let x = x.clamp(-87.0, 88.0);
    let n = (x * LOG2E + 0.5).floor();
    let r = (x - n * LN2_HI) - n * LN2_LO;
    // Adding 1.5·2²³ puts the integer n in the low mantissa bits (a bit cast, not a
    // float-to-int conversion, so the loop stays vectorised).
    let n_bits = (n + 12_582_912.0).to_bits().wrapping_sub(0x4B40_0000);
    let p = 1.0
        + r * (1.0
            + r * (0.5
                + r * (1.0 / 6.0
                    + r * (1.0 / 24.0 + r * (1.0 / 120.0 + r * (1.0 / 720.0 + r / 5040.0))))));
    // n ∈ [-126, 127] after the clamp, so the biased exponent n + 127 is a normal one.
    p * f32::from_bits(n_bits.wrapping_add(127) << 23)
}

/// `erf(x)` (Abramowitz & Stegun 7.1.26, absolute error < 1.5e-7), branch-free.
#[inline(always)]
fn erf(x: f32) -> f32 {
    let a = x.abs();
    let t = 1.0 / (1.0 + 0.327_591_1 * a);
    let poly = t
        * (0.254_829_6
            + t * (-0.284_496_74 + t * (1.421_413_7 + t * (-1.453_152 + t * 1.061_405_4))));
    let y = 1.0 - poly * exp(-a * a);
    y.copysign(x)
}

/// The exact GELU, `x·Φ(x) = x/2·(1 + erf(x/√2))`, in place.
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512cd+avx512dq+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn gelu(v: &mut [f32]) {
    for x in v.iter_mut() {
        *x = 0.5 * *x * (1.0 + erf(*x * std::f32::consts::FRAC_1_SQRT_2));
    }
}

/// Softmax of each row of an `n`-column matrix, in place.
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512cd+avx512dq+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn softmax_rows(m: &mut [f32], n: usize) {
    for row in m.chunks_exact_mut(n) {
        let top = max(row);
        row.iter_mut().for_each(|x| *x = exp(*x - top));
        let inv = 1.0 / sum_of(row, |x| x);
        row.iter_mut().for_each(|x| *x *= inv);
    }
}

/// Layer norm of each row (the norm's width) in place.
#[multiversion(targets(
    "x86_64+avx512f+avx512bw+avx512cd+avx512dq+avx512vl+avx2+fma",
    "x86_64+avx2+fma",
    "aarch64+neon"
))]
fn layer_norm(m: &mut [f32], norm: &Norm, eps: f32) {
    let h = norm.gamma.len();
    for row in m.chunks_exact_mut(h) {
        let mean = sum_of(row, |x| x) / h as f32;
        let var = sum_of(row, |x| (x - mean) * (x - mean)) / h as f32;
        let inv = 1.0 / (var + eps).sqrt();
        for ((x, g), b) in row.iter_mut().zip(&norm.gamma).zip(&norm.beta) {
            *x = (*x - mean) * inv * g + b;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Dims, Out, View, erf, exp, matmul};

    /// `out (+)= scale · lhs · rhs` by the definition, for strided views.
    #[allow(clippy::too_many_arguments)]
    fn naive(
        m: usize,
        n: usize,
        k: usize,
        out: &mut [f32],
        rs: usize,
        acc: bool,
        l: &View<'_>,
        r: &View<'_>,
        scale: f32,
    ) {
        for i in 0..m {
            for j in 0..n {
                let mut s = 0.0;
                for p in 0..k {
                    s += l.data[l.offset + i * l.rs + p * l.cs]
                        * r.data[r.offset + p * r.rs + j * r.cs];
                }
                let o = &mut out[i * rs + j];
                *o = if acc { *o + scale * s } else { scale * s };
            }
        }
    }

    #[test]
    fn matmul_matches_the_definition_for_strided_and_transposed_views() {
        let data: Vec<f32> = (0..4000)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) / 25.0)
            .collect();
        // (m, n, k, out row stride, lhs (offset, rs, cs), rhs (offset, rs, cs), accumulate)
        let cases = [
            (5, 7, 3, 7, (0, 3, 1), (100, 7, 1), false),
            (5, 7, 3, 9, (10, 1, 5), (200, 1, 3), true),
            (6, 1, 4, 1, (0, 4, 1), (300, 1, 1), false),
            (1, 8, 16, 8, (50, 16, 1), (400, 8, 1), true),
            (9, 9, 32, 12, (0, 96, 1), (32, 1, 96), false),
        ];
        for (m, n, k, rs, (lo, lrs, lcs), (ro, rrs, rcs), acc) in cases {
            let l = View {
                data: &data,
                offset: lo,
                rs: lrs,
                cs: lcs,
            };
            let r = View {
                data: &data,
                offset: ro,
                rs: rrs,
                cs: rcs,
            };
            let mut want = vec![0.5f32; m * rs];
            let mut got = want.clone();
            naive(m, n, k, &mut want, rs, acc, &l, &r, 0.25);
            let out = Out {
                data: &mut got,
                offset: 0,
                rs,
                accumulate: acc,
            };
            matmul(Dims { m, n, k }, out, l, r, 0.25).unwrap();
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() < 1e-4, "{m}×{k}·{k}×{n} rs {rs}: {a} vs {b}");
            }
        }
        // Out of bounds is an error, not a read past the slice.
        let mut small = vec![0f32; 4];
        let out = Out {
            data: &mut small,
            offset: 0,
            rs: 2,
            accumulate: false,
        };
        let l = View {
            data: &data[..4],
            offset: 0,
            rs: 2,
            cs: 1,
        };
        let r = View {
            data: &data[..3],
            offset: 0,
            rs: 2,
            cs: 1,
        };
        assert!(matmul(Dims { m: 2, n: 2, k: 2 }, out, l, r, 1.0).is_err());
    }

    #[test]
    fn damaged_model_files_are_named_with_the_fix() {
        let dir = std::env::temp_dir().join(format!("trellis-encoder-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("model.safetensors");
        // A header length far past the end of the file.
        std::fs::write(&path, 1_000_000u64.to_le_bytes()).unwrap();
        let e = crate::safetensors::SafeTensors::read(&path)
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains(&path.display().to_string()), "{e}");
        assert!(
            e.contains("header truncated") && e.contains("delete"),
            "{e}"
        );
        // An absurd length must not overflow.
        std::fs::write(&path, u64::MAX.to_le_bytes()).unwrap();
        assert!(crate::safetensors::SafeTensors::read(&path).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn exp_matches_std_to_float_rounding() {
        let mut worst = 0f32;
        let mut x = -87.0f32;
        while x < 88.0 {
            let rel = ((exp(x) - x.exp()) / x.exp()).abs();
            worst = worst.max(rel);
            x += 0.0137;
        }
        assert!(worst < 4e-7, "worst relative error {worst}");
        assert_eq!(exp(0.0), 1.0);
    }

    #[test]
    fn erf_matches_reference_values() {
        // erf at a few points (to 9 digits, from its series).
        for (x, want) in [
            (0.0f32, 0.0f64),
            (0.1, 0.112_462_916),
            (0.5, 0.520_499_878),
            (1.0, 0.842_700_793),
            (-1.0, -0.842_700_793),
            (2.0, 0.995_322_265),
            (3.5, 0.999_999_257),
            (-6.0, -1.0),
        ] {
            assert!(
                (f64::from(erf(x)) - want).abs() < 3e-7,
                "erf({x}) = {} not {want}",
                erf(x)
            );
        }
    }
}
