//! `web_search` and the documentation half of `doc_retrieval`: one configured web backend
//! (SearXNG or Brave), its answers cached with a TTL and its queries rate-limited, shared by
//! both sources.

mod backend;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use trellis_index::source::{PackedItem, Source, SourceError, SourceRequest};
use trellis_tools::config::Action;

pub use backend::{BRAVE_KEY_ENV, BRAVE_URL, Hit};

use crate::cache::Cache;
use crate::clock::Clock;
use crate::config::{DocsConfig, WebConfig};
use crate::error::{Error, Result};
use crate::limit::Limit;
use crate::{DOCS_SOURCE, WEB_SOURCE, network_denied};
use backend::{Backend, host};

/// The web backend with its cache and rate limit.
#[derive(Debug)]
pub struct WebSearch {
    backend: Backend,
    cache: Cache<Vec<Hit>>,
    limit: Limit,
    network: Action,
    timeout: Option<Duration>,
}

impl WebSearch {
    /// The backend of `config`, caching under `cache_dir` (memory only without), allowed
    /// to reach the network unless `network` is [`Action::Deny`].
    pub fn new(
        config: &WebConfig,
        cache_dir: Option<&Path>,
        network: Action,
        clock: Arc<dyn Clock>,
    ) -> Result<Self> {
        Ok(WebSearch {
            backend: Backend::new(config)?,
            cache: Cache::new(
                cache_dir.map(Path::to_path_buf),
                Duration::from_secs(config.cache_ttl_secs),
                clock.clone(),
            ),
            limit: Limit::new(
                config.rate_limit_per_minute,
                Duration::from_millis(config.rate_limit_wait_ms),
                clock,
            ),
            network,
            timeout: config.source_timeout_ms.map(Duration::from_millis),
        })
    }

    /// One query: from the cache when fresh, else from the backend (rate-limited).
    pub async fn query(&self, query: &str, cancel: &CancellationToken) -> Result<Vec<Hit>> {
        let key = self.backend.cache_key(query);
        if let Some(hits) = self.cache.get(&key) {
            return Ok(hits);
        }
        if network_denied(self.network) {
            return Err(Error::NetworkDenied);
        }
        self.limit.acquire(cancel).await?;
        let hits = tokio::select! {
            r = self.backend.search(query) => r?,
            () = cancel.cancelled() => return Err(Error::Cancelled),
        };
        self.cache.put(&key, &hits);
        Ok(hits)
    }

    /// Runs `queries` in order; stops at cancellation. A query refused or failed after
    /// others were answered leaves its list empty (and the rest unasked); when none was
    /// answered, the error is the source's.
    async fn run(
        &self,
        queries: Vec<String>,
        limit: usize,
        cancel: CancellationToken,
        source: &str,
        sites: &[String],
    ) -> Result<Vec<Vec<PackedItem>>> {
        let mut lists = Vec::with_capacity(queries.len());
        for q in &queries {
            if cancel.is_cancelled() {
                break;
            }
            let full = with_sites(q, sites);
            match self.query(&full, &cancel).await {
                Ok(hits) => lists.push(
                    hits.into_iter()
                        .filter(|h| sites.is_empty() || on_sites(&h.url, sites))
                        .take(limit.max(1))
                        .map(|h| item(source, h))
                        .collect(),
                ),
                Err(Error::Cancelled) => break,
                Err(e) if lists.is_empty() => return Err(e),
                Err(e) => {
                    tracing::warn!("{source}: query `{q}` not answered: {e}");
                    break;
                }
            }
        }
        Ok(lists)
    }

    fn unavailable(&self) -> Option<String> {
        network_denied(self.network).then(|| Error::NetworkDenied.to_string())
    }
}

/// `q` restricted to `sites` (`q (site:a OR site:b)`).
fn with_sites(q: &str, sites: &[String]) -> String {
    if sites.is_empty() {
        return q.to_owned();
    }
    let filters: Vec<String> = sites.iter().map(|s| format!("site:{s}")).collect();
    format!("{q} ({})", filters.join(" OR "))
}

/// Whether `url` is on one of `sites` (the host or a subdomain of it).
fn on_sites(url: &str, sites: &[String]) -> bool {
    let Some(h) = host(url) else {
        return false;
    };
    sites.iter().any(|s| {
        let s = s.trim_start_matches("www.").to_ascii_lowercase();
        h == s || h.ends_with(&format!(".{s}"))
    })
}

/// A hit as a packed item: the URL is its path (attribution), the title its section.
fn item(source: &str, h: Hit) -> PackedItem {
    let text = if h.snippet.is_empty() {
        h.title.clone()
    } else {
        format!("{}\n{}", h.title, h.snippet)
    };
    PackedItem {
        source: source.to_owned(),
        path: h.url,
        start_line: 0,
        end_line: 0,
        symbol: None,
        section: Some(h.title).filter(|t| !t.is_empty()),
        kind: "web".into(),
        text,
        tokens: 0,
        score: 0.0,
        note: None,
    }
}

/// `web_search`: the query as asked.
#[derive(Debug, Clone)]
pub struct WebSource {
    web: Arc<WebSearch>,
}

impl WebSource {
    /// The source over `web`.
    pub fn new(web: Arc<WebSearch>) -> Self {
        WebSource { web }
    }
}

impl Source for WebSource {
    fn name(&self) -> &str {
        WEB_SOURCE
    }

    fn search(
        &self,
        request: SourceRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Vec<Vec<PackedItem>>, SourceError>> {
        let web = self.web.clone();
        Box::pin(async move {
            web.run(request.queries, request.limit, cancel, WEB_SOURCE, &[])
                .await
                .map_err(|e| Box::new(e) as SourceError)
        })
    }

    fn unavailable(&self) -> Option<String> {
        self.web.unavailable()
    }

    fn timeout(&self) -> Option<Duration> {
        self.web.timeout
    }
}

/// `doc_retrieval`: the workspace's own documents (the index's source, when given) and the
/// documentation sites (RFCs, OWASP, MDN, framework docs) through the web backend with
/// `site:` filters, one list per query with the two interleaved. A page also found by
/// `web_search` is fused with it (same URL).
#[derive(Clone)]
pub struct DocsSource {
    web: Arc<WebSearch>,
    sites: Arc<Vec<String>>,
    local: Option<Arc<dyn Source>>,
}

impl std::fmt::Debug for DocsSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DocsSource")
            .field("sites", &self.sites)
            .field("local", &self.local.as_ref().map(|l| l.name().to_owned()))
            .finish_non_exhaustive()
    }
}

impl DocsSource {
    /// Documentation search over `web` on `config.sites`, with the workspace's own
    /// documents from `local`.
    pub fn new(web: Arc<WebSearch>, config: &DocsConfig, local: Option<Arc<dyn Source>>) -> Self {
        DocsSource {
            web,
            sites: Arc::new(config.sites.clone()),
            local,
        }
    }
}

impl Source for DocsSource {
    fn name(&self) -> &str {
        DOCS_SOURCE
    }

    fn search(
        &self,
        request: SourceRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Vec<Vec<PackedItem>>, SourceError>> {
        let me = self.clone();
        Box::pin(async move {
            let n = request.queries.len();
            let web = async {
                if me.web.unavailable().is_some() {
                    return Err(Box::new(Error::NetworkDenied) as SourceError);
                }
                me.web
                    .run(
                        request.queries.clone(),
                        request.limit,
                        cancel.clone(),
                        DOCS_SOURCE,
                        &me.sites,
                    )
                    .await
                    .map_err(|e| Box::new(e) as SourceError)
            };
            let local = async {
                match &me.local {
                    Some(l) => l.search(request.clone(), cancel.clone()).await,
                    None => Ok(Vec::new()),
                }
            };
            let (web, local) = futures::join!(web, local);
            let web = match web {
                Ok(w) => w,
                Err(e) if me.local.is_none() => return Err(e),
                Err(e) => {
                    tracing::warn!("{DOCS_SOURCE}: documentation sites not searched: {e}");
                    Vec::new()
                }
            };
            let local = local?;
            Ok((0..n)
                .map(|i| {
                    interleave(
                        local.get(i).cloned().unwrap_or_default(),
                        web.get(i).cloned().unwrap_or_default(),
                    )
                })
                .collect())
        })
    }

    fn unavailable(&self) -> Option<String> {
        // With the workspace's documents there is always something to search.
        self.local
            .is_none()
            .then(|| self.web.unavailable())
            .flatten()
    }

    fn timeout(&self) -> Option<Duration> {
        self.web.timeout
    }
}

/// `a[0], b[0], a[1], b[1], …`.
fn interleave(a: Vec<PackedItem>, b: Vec<PackedItem>) -> Vec<PackedItem> {
    let mut out = Vec::with_capacity(a.len() + b.len());
    let (mut a, mut b) = (a.into_iter(), b.into_iter());
    loop {
        match (a.next(), b.next()) {
            (None, None) => return out,
            (x, y) => out.extend(x.into_iter().chain(y)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_filters_are_added_and_checked() {
        let sites = vec!["owasp.org".to_owned(), "rfc-editor.org".to_owned()];
        assert_eq!(
            with_sites("jwt", &sites),
            "jwt (site:owasp.org OR site:rfc-editor.org)"
        );
        assert!(on_sites("https://cheatsheetseries.owasp.org/x", &sites));
        assert!(on_sites("https://www.rfc-editor.org/rfc/rfc7519", &sites));
        assert!(!on_sites("https://evil-owasp.org/x", &sites));
        assert!(!on_sites("https://example.com/owasp.org", &sites));
    }
}
