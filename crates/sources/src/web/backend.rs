//! The web search APIs: SearXNG's JSON API and the Brave Search API.

use std::sync::LazyLock;
use std::time::Duration;

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::config::{WebBackend, WebConfig};
use crate::error::{Error, Result};

/// Brave Search's API endpoint.
pub const BRAVE_URL: &str = "https://api.search.brave.com";

/// The default environment variable of the Brave key.
pub const BRAVE_KEY_ENV: &str = "BRAVE_API_KEY";

/// One search result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hit {
    /// The page.
    pub url: String,
    /// Its title.
    pub title: String,
    /// The snippet the engine returned (tags removed).
    pub snippet: String,
}

/// A configured backend.
#[derive(Clone, Debug)]
pub(crate) struct Backend {
    kind: WebBackend,
    base_url: String,
    key_env: Option<String>,
    results: usize,
    http: reqwest::Client,
}

impl Backend {
    pub(crate) fn new(config: &WebConfig) -> Result<Self> {
        let kind = config
            .backend
            .ok_or_else(|| Error::Config("sources.web.backend is not set".into()))?;
        let base_url = match (kind, &config.base_url) {
            (_, Some(u)) => u.trim_end_matches('/').to_owned(),
            (WebBackend::Brave, None) => BRAVE_URL.to_owned(),
            (WebBackend::Searxng, None) => {
                return Err(Error::Config(
                    "sources.web.base_url must name the SearXNG instance".into(),
                ));
            }
        };
        let key_env = match kind {
            WebBackend::Brave => Some(
                config
                    .api_key_env
                    .clone()
                    .unwrap_or_else(|| BRAVE_KEY_ENV.to_owned()),
            ),
            WebBackend::Searxng => config.api_key_env.clone(),
        };
        let timeout = Duration::from_secs(config.timeout_secs.max(1));
        let http = trellis_fetch::client(timeout, Some(timeout))
            .map_err(|e| Error::Config(e.to_string()))?;
        Ok(Backend {
            kind,
            base_url,
            key_env,
            results: config.results.max(1),
            http,
        })
    }

    pub(crate) fn name(&self) -> &'static str {
        match self.kind {
            WebBackend::Searxng => "searxng",
            WebBackend::Brave => "brave",
        }
    }

    /// What identifies an answer in the cache.
    pub(crate) fn cache_key(&self, query: &str) -> String {
        format!(
            "{}\n{}\n{}\n{query}",
            self.name(),
            self.base_url,
            self.results
        )
    }

    /// Runs one query.
    pub(crate) async fn search(&self, query: &str) -> Result<Vec<Hit>> {
        let http_err = |message: String| Error::Http {
            backend: self.name(),
            message,
        };
        let (url, key) = match self.kind {
            WebBackend::Searxng => (
                reqwest::Url::parse_with_params(
                    &format!("{}/search", self.base_url),
                    &[("q", query), ("format", "json")],
                ),
                None,
            ),
            WebBackend::Brave => {
                let env = self.key_env.as_deref().unwrap_or(BRAVE_KEY_ENV);
                let key = std::env::var(env)
                    .ok()
                    .filter(|k| !k.trim().is_empty())
                    .ok_or_else(|| {
                        Error::Config(format!(
                            "the Brave API key is not set (environment variable `{env}`, sources.web.api_key_env)"
                        ))
                    })?;
                (
                    reqwest::Url::parse_with_params(
                        &format!("{}/res/v1/web/search", self.base_url),
                        &[("q", query), ("count", &self.results.min(20).to_string())],
                    ),
                    Some(key),
                )
            }
        };
        let url = url.map_err(|e| Error::Config(format!("sources.web.base_url: {e}")))?;
        let mut req = self
            .http
            .get(url)
            .header(reqwest::header::ACCEPT, "application/json");
        if let Some(key) = key {
            req = req.header("X-Subscription-Token", key);
        } else if let Some(key) = self
            .key_env
            .as_deref()
            .and_then(|env| std::env::var(env).ok())
        {
            req = req.bearer_auth(key);
        }
        let body = crate::http::send(self.name(), req).await?;
        let hits = match self.kind {
            WebBackend::Searxng => parse_searxng(&body),
            WebBackend::Brave => parse_brave(&body),
        }
        .map_err(|e| http_err(format!("unexpected answer: {e}")))?;
        Ok(hits.into_iter().take(self.results).collect())
    }
}

#[derive(Deserialize)]
struct SearxngAnswer {
    #[serde(default)]
    results: Vec<SearxngResult>,
}

#[derive(Deserialize)]
struct SearxngResult {
    url: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    content: String,
}

fn parse_searxng(body: &[u8]) -> serde_json::Result<Vec<Hit>> {
    let a: SearxngAnswer = serde_json::from_slice(body)?;
    Ok(a.results
        .into_iter()
        .map(|r| Hit {
            url: r.url,
            title: plain(&r.title),
            snippet: plain(&r.content),
        })
        .collect())
}

#[derive(Deserialize)]
struct BraveAnswer {
    #[serde(default)]
    web: Option<BraveWeb>,
}

#[derive(Deserialize)]
struct BraveWeb {
    #[serde(default)]
    results: Vec<BraveResult>,
}

#[derive(Deserialize)]
struct BraveResult {
    url: String,
    #[serde(default)]
    title: String,
    #[serde(default)]
    description: String,
}

fn parse_brave(body: &[u8]) -> serde_json::Result<Vec<Hit>> {
    let a: BraveAnswer = serde_json::from_slice(body)?;
    Ok(a.web
        .map(|w| w.results)
        .unwrap_or_default()
        .into_iter()
        .map(|r| Hit {
            url: r.url,
            title: plain(&r.title),
            snippet: plain(&r.description),
        })
        .collect())
}

static TAG: LazyLock<Option<Regex>> = LazyLock::new(|| Regex::new(r"<[^>]{0,200}>").ok());

/// A snippet without the highlighting tags engines put in (`<strong>`) and with the common
/// entities decoded.
fn plain(s: &str) -> String {
    let s = match TAG.as_ref() {
        Some(re) => re.replace_all(s, "").into_owned(),
        None => s.to_owned(),
    };
    s.replace("&quot;", "\"")
        .replace("&#39;", "'")
        .replace("&#x27;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
        .trim()
        .to_owned()
}

/// The host of `url`, without `www.`.
pub(crate) fn host(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url).ok()?;
    let h = u.host_str()?.to_ascii_lowercase();
    Some(h.strip_prefix("www.").map(str::to_owned).unwrap_or(h))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippets_lose_tags_and_entities() {
        assert_eq!(
            plain("Use <strong>JWT</strong> &amp; <em>rotate</em> keys"),
            "Use JWT & rotate keys"
        );
    }

    #[test]
    fn hosts_drop_www() {
        assert_eq!(
            host("https://www.rfc-editor.org/rfc/rfc7519").as_deref(),
            Some("rfc-editor.org")
        );
        assert_eq!(host("not a url"), None);
    }
}
