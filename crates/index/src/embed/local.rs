//! all-MiniLM-L6-v2 in-process: candle's BERT on the CPU, the model's own WordPiece tokenizer,
//! mean pooling over the attention mask and L2 normalisation — the sentence-transformers
//! pipeline of the model (`Transformer → Pooling(mean) → Normalize`).

use std::path::Path;

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use candle_transformers::models::bert::{BertModel, Config};
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::{Embedder, check_shape};
use crate::config::EmbeddingConfig;
use crate::error::{Error, Result};
use crate::vectors::normalize;

/// The local embedding model.
pub struct LocalEmbedder {
    model: BertModel,
    tokenizer: Tokenizer,
    device: Device,
    dim: usize,
    batch_size: usize,
    max_tokens: usize,
    /// A dedicated pool when `embedding.threads` is set (candle's matrix products run on the
    /// current rayon pool); `None` uses the global one (all cores).
    pool: Option<rayon::ThreadPool>,
}

impl std::fmt::Debug for LocalEmbedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalEmbedder")
            .field("dim", &self.dim)
            .finish_non_exhaustive()
    }
}

fn emb(e: impl std::fmt::Display) -> Error {
    Error::Embedding(e.to_string())
}

impl LocalEmbedder {
    /// Loads the model from a directory with `config.json`, `tokenizer.json` and
    /// `model.safetensors`.
    pub fn load(dir: &Path, config: &EmbeddingConfig) -> Result<Self> {
        let cfg_path = dir.join("config.json");
        let cfg_text = std::fs::read_to_string(&cfg_path).map_err(|e| Error::io(&cfg_path, e))?;
        let cfg: Config = serde_json::from_str(&cfg_text)
            .map_err(|e| Error::Embedding(format!("{}: {e}", cfg_path.display())))?;
        // Never more than the model's position embeddings.
        let max_tokens = config
            .max_tokens
            .clamp(2, cfg.max_position_embeddings.max(2));
        let mut tokenizer = Tokenizer::from_file(dir.join("tokenizer.json")).map_err(emb)?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: max_tokens,
                ..TruncationParams::default()
            }))
            .map_err(emb)?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        let device = Device::Cpu;
        let weights = std::fs::read(dir.join("model.safetensors"))
            .map_err(|e| Error::io(dir.join("model.safetensors"), e))?;
        let vb =
            VarBuilder::from_buffered_safetensors(weights, DType::F32, &device).map_err(emb)?;
        let model = BertModel::load(vb, &cfg).map_err(emb)?;
        Ok(LocalEmbedder {
            model,
            tokenizer,
            device,
            dim: cfg.hidden_size,
            batch_size: config.batch_size.max(1),
            max_tokens,
            pool: match config.threads {
                Some(n) => Some(
                    rayon::ThreadPoolBuilder::new()
                        .num_threads(n.max(1))
                        .build()
                        .map_err(emb)?,
                ),
                None => None,
            },
        })
    }

    fn embed_batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let enc = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(emb)?;
        let len = enc.first().map_or(0, |e| e.get_ids().len());
        let n = enc.len();
        let mut ids = Vec::with_capacity(n * len);
        let mut mask = Vec::with_capacity(n * len);
        for e in &enc {
            ids.extend_from_slice(e.get_ids());
            mask.extend_from_slice(e.get_attention_mask());
        }
        let ids = Tensor::from_vec(ids, (n, len), &self.device).map_err(emb)?;
        let mask = Tensor::from_vec(mask, (n, len), &self.device).map_err(emb)?;
        let types = ids.zeros_like().map_err(emb)?;
        let hidden = self.model.forward(&ids, &types, Some(&mask)).map_err(emb)?;
        // Mean over real tokens.
        let m = mask
            .to_dtype(DType::F32)
            .map_err(emb)?
            .unsqueeze(2)
            .map_err(emb)?;
        let summed = hidden.broadcast_mul(&m).map_err(emb)?.sum(1).map_err(emb)?;
        let counts = m.sum(1).map_err(emb)?.clamp(1e-9, f32::MAX).map_err(emb)?;
        let pooled = summed.broadcast_div(&counts).map_err(emb)?;
        let mut out: Vec<Vec<f32>> = pooled.to_vec2().map_err(emb)?;
        for v in &mut out {
            normalize(v);
        }
        Ok(out)
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
        match &self.pool {
            Some(pool) => pool.install(|| self.embed_sorted(texts)),
            None => self.embed_sorted(texts),
        }
    }
}

impl LocalEmbedder {
    fn embed_sorted(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        // Batch texts of similar length together so little compute goes to padding.
        let mut order: Vec<usize> = (0..texts.len()).collect();
        order.sort_by_key(|&i| texts[i].len());
        let mut out: Vec<Vec<f32>> = vec![Vec::new(); texts.len()];
        for group in order.chunks(self.batch_size) {
            let batch: Vec<&str> = group.iter().map(|&i| texts[i]).collect();
            let vecs = self.embed_batch(&batch)?;
            check_shape(&vecs, batch.len(), "local model")?;
            for (&i, v) in group.iter().zip(vecs) {
                out[i] = v;
            }
        }
        Ok(out)
    }
}
