//! The model's shipped files as read by the GGUF converter and the native encoder:
//! `config.json` (the BERT shape) and `model.safetensors` (an 8-byte header length, a JSON
//! header naming each tensor's dtype, shape and byte range, then the raw little-endian data).

use std::collections::BTreeMap;
use std::path::Path;

use serde::Deserialize;

use crate::{Error, Result};

/// The parts of `config.json` the conversion and the encoder need.
#[derive(Clone, Debug, Deserialize)]
pub struct BertConfig {
    /// Width of every token's hidden state.
    pub hidden_size: u32,
    /// Width of the feed-forward layer.
    pub intermediate_size: u32,
    /// Attention heads per layer.
    pub num_attention_heads: u32,
    /// Encoder layers.
    pub num_hidden_layers: u32,
    /// Rows of the position table: the longest input in word pieces.
    pub max_position_embeddings: u32,
    #[serde(default = "default_eps")]
    /// Layer norm's epsilon.
    pub layer_norm_eps: f32,
    #[serde(default = "default_types")]
    /// Rows of the token-type table.
    pub type_vocab_size: u32,
    /// The feed-forward activation (`gelu`, the exact erf form, for this model).
    #[serde(default)]
    pub hidden_act: String,
}

impl BertConfig {
    /// Reads `config.json`.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
        serde_json::from_slice(&bytes).map_err(|e| Error::Model(format!("{}: {e}", path.display())))
    }
}

fn default_eps() -> f32 {
    1e-12
}

fn default_types() -> u32 {
    2
}

/// A safetensors file held in memory.
pub struct SafeTensors {
    path: std::path::PathBuf,
    bytes: Vec<u8>,
    data_start: usize,
    /// Name → (dtype, shape, begin, end), the byte range relative to the data start.
    pub tensors: BTreeMap<String, (String, Vec<usize>, usize, usize)>,
}

#[derive(Deserialize)]
struct StEntry {
    dtype: String,
    shape: Vec<usize>,
    data_offsets: (usize, usize),
}

/// An error about the file at `path`, with the fix (the model cache re-fetches a removed
/// model directory).
fn bad(path: &Path, what: impl std::fmt::Display) -> Error {
    Error::Model(format!(
        "{}: {what} (a damaged download? delete {} and the model is fetched again)",
        path.display(),
        path.parent().unwrap_or(path).display()
    ))
}

impl SafeTensors {
    /// Reads the whole file and its header.
    pub fn read(path: &Path) -> Result<Self> {
        let bytes = std::fs::read(path).map_err(|e| Error::Io {
            path: path.to_path_buf(),
            source: e,
        })?;
        let n = bytes
            .get(..8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_le_bytes)
            .ok_or_else(|| bad(path, "safetensors file too short"))?;
        let data_start = usize::try_from(n)
            .ok()
            .and_then(|n| n.checked_add(8))
            .filter(|&end| end <= bytes.len())
            .ok_or_else(|| bad(path, "safetensors header truncated"))?;
        let raw: BTreeMap<String, serde_json::Value> =
            serde_json::from_slice(&bytes[8..data_start]).map_err(|e| bad(path, e))?;
        let mut tensors = BTreeMap::new();
        for (name, v) in raw {
            if name == "__metadata__" {
                continue;
            }
            let e: StEntry = serde_json::from_value(v).map_err(|e| bad(path, e))?;
            tensors.insert(name, (e.dtype, e.shape, e.data_offsets.0, e.data_offsets.1));
        }
        Ok(SafeTensors {
            path: path.to_path_buf(),
            bytes,
            data_start,
            tensors,
        })
    }

    /// The prefix of the BERT tensor names: some exports name every tensor `bert.…`.
    pub fn bert_prefix(&self) -> &'static str {
        if self
            .tensors
            .contains_key("bert.embeddings.word_embeddings.weight")
        {
            "bert."
        } else {
            ""
        }
    }

    /// An error about this file (naming it, with the fix).
    pub fn error(&self, what: impl std::fmt::Display) -> Error {
        bad(&self.path, what)
    }

    /// The tensor `name` as f32 values with its PyTorch shape.
    pub fn f32(&self, name: &str) -> Result<(Vec<f32>, Vec<usize>)> {
        let (dtype, shape, b, e) = self
            .tensors
            .get(name)
            .ok_or_else(|| self.error(format!("tensor {name} missing")))?;
        if dtype != "F32" {
            return Err(self.error(format!("{name}: dtype {dtype}, expected F32")));
        }
        let data = self
            .data_start
            .checked_add(*b)
            .zip(self.data_start.checked_add(*e))
            .and_then(|(b, e)| self.bytes.get(b..e))
            .ok_or_else(|| self.error(format!("{name}: data out of range")))?;
        let values: Vec<f32> = data
            .chunks_exact(4)
            .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        if values.len() != shape.iter().product::<usize>() {
            return Err(self.error(format!("{name}: size does not match its shape")));
        }
        Ok((values, shape.clone()))
    }
}
