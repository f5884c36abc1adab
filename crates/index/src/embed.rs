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

/// An [`Embedder`] that remembers the vectors of the texts it embedded (at most `capacity`;
/// when full, the oldest half is forgotten): for callers that embed the same texts again and
/// again, such as tool descriptions ranked before every model call.
pub struct CachedEmbedder {
    inner: std::sync::Arc<dyn Embedder>,
    capacity: usize,
    cache: std::sync::Mutex<Cache>,
}

/// The cached vectors by text, and the texts in the order they came.
type Cache = (
    std::collections::HashMap<String, Vec<f32>>,
    std::collections::VecDeque<String>,
);

impl CachedEmbedder {
    /// Caches `inner`'s vectors of up to `capacity` texts.
    pub fn new(inner: std::sync::Arc<dyn Embedder>, capacity: usize) -> Self {
        Self {
            inner,
            capacity: capacity.max(1),
            cache: std::sync::Mutex::default(),
        }
    }
}

impl Embedder for CachedEmbedder {
    fn id(&self) -> String {
        self.inner.id()
    }

    fn dim(&self) -> usize {
        self.inner.dim()
    }

    fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let mut out: Vec<Option<Vec<f32>>> = {
            let cache = self
                .cache
                .lock()
                .map_err(|_| Error::Embedding("the embedding cache is poisoned".into()))?;
            texts.iter().map(|t| cache.0.get(*t).cloned()).collect()
        };
        let missing: Vec<usize> = (0..texts.len()).filter(|i| out[*i].is_none()).collect();
        if missing.is_empty() {
            return Ok(out.into_iter().flatten().collect());
        }
        let inputs: Vec<&str> = missing.iter().map(|i| texts[*i]).collect();
        let fresh = self.inner.embed(&inputs)?;
        let mut cache = self
            .cache
            .lock()
            .map_err(|_| Error::Embedding("the embedding cache is poisoned".into()))?;
        for (i, v) in missing.into_iter().zip(fresh) {
            if cache.0.len() >= self.capacity {
                let forget = cache.1.len() / 2;
                for old in cache.1.drain(..forget.max(1)).collect::<Vec<_>>() {
                    cache.0.remove(&old);
                }
            }
            if cache.0.insert(texts[i].to_owned(), v.clone()).is_none() {
                cache.1.push_back(texts[i].to_owned());
            }
            out[i] = Some(v);
        }
        Ok(out.into_iter().flatten().collect())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::{CachedEmbedder, Embedder};

    /// Embeds a text as its length; counts the texts it was given.
    struct Lengths(AtomicUsize);

    impl Embedder for Lengths {
        fn id(&self) -> String {
            "lengths".into()
        }

        fn dim(&self) -> usize {
            1
        }

        fn embed(&self, texts: &[&str]) -> crate::error::Result<Vec<Vec<f32>>> {
            self.0.fetch_add(texts.len(), Ordering::SeqCst);
            Ok(texts.iter().map(|t| vec![t.len() as f32]).collect())
        }
    }

    #[test]
    fn cached_vectors_are_not_embedded_again_and_the_oldest_are_forgotten_when_full() {
        let inner = Arc::new(Lengths(AtomicUsize::new(0)));
        let cached = CachedEmbedder::new(inner.clone(), 4);
        assert_eq!(cached.embed(&["a", "bb"]).unwrap(), [vec![1.0], vec![2.0]]);
        assert_eq!(
            cached.embed(&["bb", "ccc", "a"]).unwrap(),
            [vec![2.0], vec![3.0], vec![1.0]]
        );
        assert_eq!(inner.0.load(Ordering::SeqCst), 3, "only ccc was new");
        // Full: the oldest half goes; what is asked again is embedded again.
        cached.embed(&["dddd", "eeeee"]).unwrap();
        cached.embed(&["a"]).unwrap();
        assert_eq!(inner.0.load(Ordering::SeqCst), 6);
        assert_eq!((cached.id(), cached.dim()), ("lengths".to_owned(), 1));
    }
}
