//! JSON over HTTP for the endpoint clients (embeddings, reranking): one POST from
//! synchronous code, with the key as a bearer token and errors as readable messages.

use std::time::Duration;

use trellis_fetch::Blocking;

/// Posts `body` as JSON to `url` and returns the response text of a 2xx answer; otherwise
/// a message saying what happened (`HTTP 401: …`, a timeout, a refused connection).
pub(crate) fn post_json(
    client: &reqwest::Client,
    runtime: &Blocking,
    url: &str,
    api_key: Option<&str>,
    body: &serde_json::Value,
    timeout: Duration,
) -> Result<String, String> {
    let body = serde_json::to_vec(body).map_err(|e| e.to_string())?;
    let mut req = client
        .post(url)
        .timeout(timeout)
        .header("Content-Type", "application/json")
        .body(body);
    if let Some(k) = api_key {
        req = req.bearer_auth(k);
    }
    let (status, text) = runtime
        .run(async move {
            let resp = req.send().await?;
            let status = resp.status().as_u16();
            Ok::<_, reqwest::Error>((status, resp.text().await?))
        })
        .map_err(|e| e.to_string())?
        .map_err(|e| {
            if e.is_timeout() {
                format!("no answer within {} ms", timeout.as_millis())
            } else {
                trellis_fetch::error_chain(&e)
            }
        })?;
    if status >= 400 {
        let snippet: String = text.chars().take(300).collect();
        return Err(format!("HTTP {status}: {snippet}"));
    }
    Ok(text)
}

/// The value of the environment variable `var` (named by `field` of the configuration),
/// or an error naming both; never the value itself.
pub(crate) fn api_key(field: &str, var: Option<&str>) -> crate::Result<Option<String>> {
    match var {
        Some(var) => std::env::var(var).map(Some).map_err(|_| {
            crate::Error::Config(format!(
                "{field} names `{var}`, which is not set in the environment"
            ))
        }),
        None => Ok(None),
    }
}
