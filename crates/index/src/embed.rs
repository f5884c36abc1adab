//! Dense embeddings: the [`Embedder`] seam, the in-process all-MiniLM-L6-v2 model (feature
//! `embed`), and any OpenAI-compatible `/v1/embeddings` endpoint.

#[cfg(feature = "embed")]
pub mod fetch;
#[cfg(feature = "embed")]
pub mod gguf;
#[cfg(feature = "embed")]
pub mod local;
pub mod remote;

use crate::config::{EmbeddingBackend, EmbeddingConfig};
use crate::error::{Error, Result};

/// Computes unit-length embeddings for texts.
pub trait Embedder: Send + Sync {
    /// A stable identity of the model (backend, model name, dimension); the index re-embeds
    /// everything when it changes.
    fn id(&self) -> String;
    /// The embedding dimension.
    fn dim(&self) -> usize;
    /// Embeds `texts`, returning one L2-normalised vector per text, in order.
    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>>;
}

/// Creates the configured embedder; `Ok(None)` when embeddings are disabled. The local model
/// is fetched into the cache on first use (progress on stderr when `progress` is set).
pub fn from_config(config: &EmbeddingConfig, progress: bool) -> Result<Option<Box<dyn Embedder>>> {
    match config.backend {
        EmbeddingBackend::None => Ok(None),
        EmbeddingBackend::Openai => Ok(Some(Box::new(remote::RemoteEmbedder::new(config)?))),
        EmbeddingBackend::Local => local_embedder(config, progress),
    }
}

#[cfg(feature = "embed")]
fn local_embedder(config: &EmbeddingConfig, progress: bool) -> Result<Option<Box<dyn Embedder>>> {
    let dir = fetch::ensure_model(&fetch::MINILM, config.cache_dir.as_deref(), progress)?;
    Ok(Some(Box::new(local::LocalEmbedder::load(&dir, config)?)))
}

#[cfg(not(feature = "embed"))]
fn local_embedder(_: &EmbeddingConfig, _: bool) -> Result<Option<Box<dyn Embedder>>> {
    Err(Error::Config(
        "embedding.backend = \"local\" needs trellis-index built with the `embed` feature; \
         set embedding.backend to \"openai\" or \"none\""
            .into(),
    ))
}

/// Checks an embedding response has one vector per input, all of the same dimension.
pub(crate) fn check_shape(vectors: &[Vec<f32>], inputs: usize, what: &str) -> Result<()> {
    if vectors.len() != inputs {
        return Err(Error::Embedding(format!(
            "{what} returned {} vectors for {inputs} inputs",
            vectors.len()
        )));
    }
    if let Some(d) = vectors.first().map(Vec::len)
        && (d == 0 || vectors.iter().any(|v| v.len() != d))
    {
        return Err(Error::Embedding(format!(
            "{what} returned vectors of mixed dimension"
        )));
    }
    Ok(())
}
