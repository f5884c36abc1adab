//! The one HTTP client.

use std::sync::OnceLock;
use std::time::Duration;

use crate::{Error, Result};

/// Builds a client with a connect timeout and an optional per-read timeout. The ring crypto
/// provider is installed as the process default the first time (rustls needs exactly one; a
/// provider installed earlier by the host wins).
pub fn client(
    connect_timeout: Duration,
    read_timeout: Option<Duration>,
) -> Result<reqwest::Client> {
    static PROVIDER: OnceLock<()> = OnceLock::new();
    PROVIDER.get_or_init(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
    let mut builder = reqwest::Client::builder()
        .connect_timeout(connect_timeout)
        .user_agent(concat!("trellis/", env!("CARGO_PKG_VERSION")));
    if let Some(t) = read_timeout {
        builder = builder.read_timeout(t);
    }
    builder
        .build()
        .map_err(|e| Error::Client(crate::error::error_chain(&e)))
}
