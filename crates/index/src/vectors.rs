//! The vector side: embeddings in a flat little-endian `f32` file (`vectors.f32`, one row per
//! distinct chunk text, append-only) and an in-memory matrix searched by brute-force dot
//! products, which at 100k × 384 takes a few milliseconds on one core.

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
        VectorIndex {
            dim,
            data,
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
    /// empty), as (chunk, cosine) in decreasing order.
    pub fn search(&self, query: &[f32], categories: &[Category], k: usize) -> Vec<(ChunkId, f32)> {
        if query.len() != self.dim || self.is_empty() || k == 0 {
            return Vec::new();
        }
        let dim = self.dim;
        let score_block = |(bi, block): (usize, &[f32])| {
            let base = bi * 4096;
            let mut local: Vec<(f32, usize)> = Vec::new();
            for (j, row) in block.chunks_exact(dim).enumerate() {
                let i = base + j;
                if !categories.is_empty() && !categories.contains(&self.categories[i]) {
                    continue;
                }
                local.push((dot(row, query), i));
            }
            top_k(&mut local, k);
            local
        };
        let mut all: Vec<(f32, usize)> = if self.len() > 8192 {
            self.data
                .par_chunks(4096 * dim)
                .enumerate()
                .map(score_block)
                .flatten()
                .collect()
        } else {
            self.data
                .chunks(4096 * dim)
                .enumerate()
                .flat_map(score_block)
                .collect()
        };
        top_k(&mut all, k);
        all.into_iter().map(|(s, i)| (self.ids[i], s)).collect()
    }
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
