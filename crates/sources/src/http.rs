//! Sending a request and reading its answer, for every backend here.

use crate::error::{Error, Result};

/// The body of a successful answer; a transport error or a non-2xx status (with the start
/// of its body) is an [`Error::Http`] of `backend`.
pub(crate) async fn send(backend: &'static str, req: reqwest::RequestBuilder) -> Result<Vec<u8>> {
    let err = |message: String| Error::Http { backend, message };
    let resp = req
        .send()
        .await
        .map_err(|e| err(trellis_fetch::error_chain(&e)))?;
    let status = resp.status();
    let body = resp
        .bytes()
        .await
        .map_err(|e| err(trellis_fetch::error_chain(&e)))?;
    if !status.is_success() {
        let text = String::from_utf8_lossy(&body);
        return Err(err(format!(
            "HTTP {status}: {}",
            text.chars().take(200).collect::<String>()
        )));
    }
    Ok(body.to_vec())
}
