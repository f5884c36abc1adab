//! The vector side: embeddings in a flat little-endian `f32` file (`vectors.f32`, one row per
//! distinct chunk text, append-only) and an in-memory matrix searched by brute force: a scan
//! of an 8-bit copy of the rows (a quarter of the memory traffic of `f32`; the scan is bound
//! by memory bandwidth) picks candidates, which are then rescored exactly in `f32`.

use std::collections::HashMap;
use std::fs::OpenOptions;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use rayon::prelude::*;

use crate::chunk::{Category, ChunkId};
use crate::error::{Error, Result};

/// The append-only vector file.
#[derive(Debug, Clone)]
pub struct VectorFile {
    path: PathBuf,
    dim: usize,
}

impl VectorFile {
    /// A vector file of `dim`-dimensional rows at `path` (created on first append).
    pub fn new(path: &Path, dim: usize) -> Self {
        VectorFile {
            path: path.to_path_buf(),
            dim,
        }
    }

    /// Rows currently stored (complete rows only).
    pub fn rows(&self) -> Result<u64> {
        match std::fs::metadata(&self.path) {
            Ok(m) => Ok(m.len() / (self.dim as u64 * 4)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(0),
            Err(e) => Err(Error::io(&self.path, e)),
        }
    }

    /// Appends rows and syncs them to disk; returns the row number of the first.
    pub fn append(&self, vectors: &[Vec<f32>]) -> Result<u64> {
        let first = self.rows()?;
        let mut f = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.path)
            .map_err(|e| Error::io(&self.path, e))?;
        // Drop a torn partial row left by a crash so rows stay aligned.
        let len = f.metadata().map_err(|e| Error::io(&self.path, e))?.len();
        let aligned = first * self.dim as u64 * 4;
        if len != aligned {
            f.set_len(aligned).map_err(|e| Error::io(&self.path, e))?;
        }
        let mut buf = Vec::with_capacity(vectors.len() * self.dim * 4);
        for v in vectors {
            if v.len() != self.dim {
                return Err(Error::Embedding(format!(
                    "vector of dimension {} in an index of dimension {}",
                    v.len(),
                    self.dim
                )));
            }
            for x in v {
                buf.extend_from_slice(&x.to_le_bytes());
            }
        }
        f.write_all(&buf).map_err(|e| Error::io(&self.path, e))?;
        f.sync_data().map_err(|e| Error::io(&self.path, e))?;
        Ok(first)
    }

    /// Reads the whole file.
    pub fn read_all(&self) -> Result<Vec<f32>> {
        let mut bytes = Vec::new();
        match std::fs::File::open(&self.path) {
            Ok(mut f) => {
                f.read_to_end(&mut bytes)
                    .map_err(|e| Error::io(&self.path, e))?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io(&self.path, e)),
        }
        let rows = bytes.len() / (self.dim * 4);
        let mut out = Vec::with_capacity(rows * self.dim);
        for c in bytes[..rows * self.dim * 4].chunks_exact(4) {
            out.push(f32::from_le_bytes([c[0], c[1], c[2], c[3]]));
        }
        Ok(out)
    }

    /// Deletes the file (after a model change).
    pub fn reset(&self) -> Result<()> {
        match std::fs::remove_file(&self.path) {
            Ok(()) => Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
            Err(e) => Err(Error::io(&self.path, e)),
        }
    }
}

/// Searchable matrix of the embeddings of live chunks.
#[derive(Debug, Clone, Default)]
pub struct VectorIndex {
    dim: usize,
    data: Vec<f32>,
    /// `data` quantised per row: `data[i] ≈ q8[i] * scales[row]`.
    q8: Vec<i8>,
    scales: Vec<f32>,
    ids: Vec<ChunkId>,
    categories: Vec<Category>,
    pos: HashMap<ChunkId, usize>,
}

impl VectorIndex {
    /// Builds the matrix from the stored rows and the (chunk, row, category) list.
    pub fn build(dim: usize, rows: &[f32], live: &[(ChunkId, u64, Category)]) -> Self {
        let mut data = Vec::with_capacity(live.len() * dim);
        let mut ids = Vec::with_capacity(live.len());
        let mut categories = Vec::with_capacity(live.len());
        for (id, row, cat) in live {
            let s = *row as usize * dim;
            if let Some(v) = rows.get(s..s + dim) {
                data.extend_from_slice(v);
                ids.push(*id);
                categories.push(*cat);
            }
        }
        let pos = ids.iter().enumerate().map(|(i, id)| (*id, i)).collect();
        let mut q8 = vec![0i8; data.len()];
        let mut scales = Vec::with_capacity(ids.len());
        if dim > 0 {
            for (row, q) in data.chunks_exact(dim).zip(q8.chunks_exact_mut(dim)) {
                scales.push(quantize(row, q));
            }
        }
        VectorIndex {
            dim,
            data,
            q8,
            scales,
            ids,
            categories,
            pos,
        }
    }

    /// The dimension.
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// Number of vectors.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether there are no vectors.
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// The vector of a chunk, if present.
    pub fn get(&self, id: ChunkId) -> Option<&[f32]> {
        let i = *self.pos.get(&id)?;
        self.data.get(i * self.dim..(i + 1) * self.dim)
    }

    /// The `k` most similar chunks to the (normalised) `query` among `categories` (all when
    /// empty), as (chunk, cosine) in decreasing order. The 8-bit scan keeps the best
    /// `4k + 64` candidates, rescored with the exact `f32` dot product.
    pub fn search(&self, query: &[f32], categories: &[Category], k: usize) -> Vec<(ChunkId, f32)> {
        if query.len() != self.dim || self.is_empty() || k == 0 {
            return Vec::new();
        }
        let dim = self.dim;
        let mut qq = vec![0i8; dim];
        // The query's scale multiplies every score alike, so the ranking ignores it.
        quantize(query, &mut qq);
        let keep = k.saturating_mul(4).saturating_add(64);
        const BLOCK: usize = 8192;
        let score_block = |(bi, block): (usize, &[i8])| {
            let base = bi * BLOCK;
            let mut local: Vec<(f32, usize)> = Vec::new();
            for (j, row) in block.chunks_exact(dim).enumerate() {
                let i = base + j;
                if !categories.is_empty() && !categories.contains(&self.categories[i]) {
                    continue;
                }
                local.push((dot_i8(row, &qq) as f32 * self.scales[i], i));
            }
            top_k(&mut local, keep);
            local
        };
        let mut candidates: Vec<(f32, usize)> = if self.len() > 2 * BLOCK {
            self.q8
                .par_chunks(BLOCK * dim)
                .enumerate()
                .map(score_block)
                .flatten()
                .collect()
        } else {
            self.q8
                .chunks(BLOCK * dim)
                .enumerate()
                .flat_map(score_block)
                .collect()
        };
        top_k(&mut candidates, keep);
        let mut exact: Vec<(f32, usize)> = candidates
            .into_iter()
            .map(|(_, i)| (dot(&self.data[i * dim..(i + 1) * dim], query), i))
            .collect();
        top_k(&mut exact, k);
        exact.into_iter().map(|(s, i)| (self.ids[i], s)).collect()
    }
}

/// Quantises `v` to 8 bits with one scale (`max |x| / 127`) into `out`; returns the scale.
fn quantize(v: &[f32], out: &mut [i8]) -> f32 {
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if max == 0.0 || !max.is_finite() {
        out.fill(0);
        return 0.0;
    }
    let scale = max / 127.0;
    for (o, x) in out.iter_mut().zip(v) {
        *o = (x / scale).round().clamp(-127.0, 127.0) as i8;
    }
    scale
}

/// Integer dot product of two 8-bit rows, written so the compiler vectorises it.
fn dot_i8(a: &[i8], b: &[i8]) -> i32 {
    let mut acc = [0i32; 16];
    let ca = a.chunks_exact(16);
    let cb = b.chunks_exact(16);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..16 {
            acc[i] += i32::from(x[i]) * i32::from(y[i]);
        }
    }
    let mut s: i32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += i32::from(*x) * i32::from(*y);
    }
    s
}

fn top_k(v: &mut Vec<(f32, usize)>, k: usize) {
    if v.len() > k {
        v.select_nth_unstable_by(k - 1, |a, b| b.0.total_cmp(&a.0));
        v.truncate(k);
    }
    v.sort_by(|a, b| b.0.total_cmp(&a.0));
}

/// Dot product (cosine for normalised vectors), written so the compiler vectorises it.
pub fn dot(a: &[f32], b: &[f32]) -> f32 {
    let mut acc = [0f32; 8];
    let ca = a.chunks_exact(8);
    let cb = b.chunks_exact(8);
    let (ra, rb) = (ca.remainder(), cb.remainder());
    for (x, y) in ca.zip(cb) {
        for i in 0..8 {
            acc[i] += x[i] * y[i];
        }
    }
    let mut s: f32 = acc.iter().sum();
    for (x, y) in ra.iter().zip(rb) {
        s += x * y;
    }
    s
}

/// Scales `v` to unit length (no-op for the zero vector).
pub fn normalize(v: &mut [f32]) {
    let n = dot(v, v).sqrt();
    if n > 0.0 {
        for x in v {
            *x /= n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Deterministic pseudo-random unit vectors.
    fn rows(n: usize, dim: usize, seed: u64) -> Vec<f32> {
        let mut x = seed;
        let mut out = Vec::with_capacity(n * dim);
        for _ in 0..n {
            let mut v: Vec<f32> = (0..dim)
                .map(|_| {
                    x = x
                        .wrapping_mul(6364136223846793005)
                        .wrapping_add(1442695040888963407);
                    ((x >> 33) as f32 / (1u64 << 31) as f32) - 0.5
                })
                .collect();
            normalize(&mut v);
            out.extend(v);
        }
        out
    }

    #[test]
    fn quantised_scan_returns_the_exact_top_k() {
        let (n, dim) = (20_000, 384);
        let data = rows(n, dim, 7);
        let live: Vec<(ChunkId, u64, Category)> = (0..n)
            .map(|i| {
                let cat = if i % 3 == 0 {
                    Category::Doc
                } else {
                    Category::Code
                };
                (ChunkId(i as i64), i as u64, cat)
            })
            .collect();
        let vi = VectorIndex::build(dim, &data, &live);
        for q in 0..20 {
            let query = rows(1, dim, 1000 + q);
            for cats in [vec![], vec![Category::Doc]] {
                let got = vi.search(&query, &cats, 10);
                let mut exact: Vec<(f32, usize)> = (0..n)
                    .filter(|i| cats.is_empty() || live[*i].2 == cats[0])
                    .map(|i| (dot(&data[i * dim..(i + 1) * dim], &query), i))
                    .collect();
                top_k(&mut exact, 10);
                let want: Vec<(ChunkId, f32)> = exact
                    .iter()
                    .map(|(s, i)| (ChunkId(*i as i64), *s))
                    .collect();
                assert_eq!(got, want, "query {q}, categories {cats:?}");
            }
        }
    }
}
