//! The OSV API: `POST /v1/querybatch` for the advisory ids affecting each dependency, then
//! `GET /v1/vulns/{id}` for each advisory not fetched before in this process.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::lockfiles::Dependency;
use super::model::Advisory;
use crate::error::{Error, Result};

/// The public OSV API.
pub const OSV_API_URL: &str = "https://api.osv.dev";

/// Queries per `querybatch` request (the API's limit is 1000).
const BATCH: usize = 1000;

/// An OSV API client with the advisories it fetched.
#[derive(Debug)]
pub(crate) struct OsvApi {
    base: String,
    http: reqwest::Client,
    fetched: Mutex<HashMap<String, Advisory>>,
}

#[derive(Deserialize)]
struct BatchAnswer {
    #[serde(default)]
    results: Vec<BatchResult>,
}

#[derive(Deserialize)]
struct BatchResult {
    #[serde(default)]
    vulns: Vec<VulnRef>,
}

#[derive(Deserialize)]
struct VulnRef {
    id: String,
}

fn http_err(message: String) -> Error {
    Error::Http {
        backend: "osv api",
        message,
    }
}

impl OsvApi {
    pub(crate) fn new(base: Option<&str>, timeout: Duration) -> Result<Self> {
        let http = trellis_fetch::client(timeout, Some(timeout))
            .map_err(|e| Error::Config(e.to_string()))?;
        Ok(OsvApi {
            base: base.unwrap_or(OSV_API_URL).trim_end_matches('/').to_owned(),
            http,
            fetched: Mutex::new(HashMap::new()),
        })
    }

    /// The advisories affecting `deps`, as the API sees them.
    pub(crate) async fn advisories(
        &self,
        deps: &[Dependency],
        cancel: &CancellationToken,
    ) -> Result<Vec<Advisory>> {
        let mut ids = BTreeSet::new();
        for chunk in deps.chunks(BATCH) {
            let queries: Vec<serde_json::Value> = chunk
                .iter()
                .map(|d| {
                    json!({
                        "package": {"name": d.name, "ecosystem": d.ecosystem.osv_name()},
                        "version": d.version,
                    })
                })
                .collect();
            let body = serde_json::to_vec(&json!({ "queries": queries }))
                .map_err(|e| http_err(e.to_string()))?;
            let req = self
                .http
                .post(format!("{}/v1/querybatch", self.base))
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .body(body);
            let bytes = tokio::select! {
                r = crate::http::send("osv api", req) => r?,
                () = cancel.cancelled() => return Err(Error::Cancelled),
            };
            let answer: BatchAnswer = serde_json::from_slice(&bytes)
                .map_err(|e| http_err(format!("unexpected querybatch answer: {e}")))?;
            ids.extend(
                answer
                    .results
                    .into_iter()
                    .flat_map(|r| r.vulns)
                    .map(|v| v.id),
            );
        }
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            let known = self
                .fetched
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .get(&id)
                .cloned();
            if let Some(a) = known {
                out.push(a);
                continue;
            }
            let req = self.http.get(format!("{}/v1/vulns/{id}", self.base));
            let bytes = tokio::select! {
                r = crate::http::send("osv api", req) => r?,
                () = cancel.cancelled() => return Err(Error::Cancelled),
            };
            let a: Advisory = serde_json::from_slice(&bytes)
                .map_err(|e| http_err(format!("advisory {id}: {e}")))?;
            self.fetched
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .insert(id, a.clone());
            out.push(a);
        }
        Ok(out)
    }
}
