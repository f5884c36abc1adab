//! Retrieval sources outside the workspace index, as [`Source`]s for the retrieval agent
//! (`trellis_agents::RetrievalAgent::with_source`):
//!
//! - `web_search` ([`WebSource`]): a SearXNG instance or the Brave Search API, answers
//!   cached with a TTL (in memory and under `.trellis/cache/web/`), queries rate-limited
//!   (30 a minute by default);
//! - `doc_retrieval` ([`DocsSource`]): the workspace's own documents plus the same web
//!   backend restricted to documentation sites (`site:` filters: RFCs, OWASP, MDN, framework
//!   docs);
//! - `cve_database` ([`AdvisorySource`]): OSV advisories (dumps on disk, optionally the OSV
//!   API) matched against the workspace's lockfiles.
//!
//! Every item carries its attribution (the page's or advisory's URL as its path). A source
//! that is not configured is still returned ([`NotConfigured`]) so that a strategy naming it
//! reports which key to set; with `tools.policy.network = "deny"` nothing here reaches the
//! network (the sources say so through [`Source::unavailable`]). [`sources`] builds them
//! from the `[sources]` configuration.

mod cache;
mod clock;
mod config;
mod error;
mod http;
mod limit;
pub mod osv;
pub mod web;

use std::path::Path;
use std::sync::Arc;

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use trellis_index::source::{PackedItem, Source, SourceError, SourceRequest};
use trellis_tools::config::Action;

pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{
    AdvisoriesConfig, DEFAULT_DOC_SITES, DocsConfig, SourcesConfig, WebBackend, WebConfig,
};
pub use error::{Error, Result};
pub use osv::AdvisorySource;
pub use web::{DocsSource, WebSearch, WebSource};

/// The web search source's name in strategies.
pub const WEB_SOURCE: &str = "web_search";
/// The documentation source's name in strategies.
pub const DOCS_SOURCE: &str = "doc_retrieval";
/// The advisory source's name in strategies.
pub const CVE_SOURCE: &str = "cve_database";

/// The configuration section.
pub const SECTION: &str = "sources";

/// Why `web_search` is not searched without a backend.
pub const WEB_NOT_CONFIGURED: &str =
    "not configured: set sources.web.backend (\"searxng\" with sources.web.base_url, or \"brave\")";
/// Why `cve_database` is not searched without advisories.
pub const CVE_NOT_CONFIGURED: &str = "not configured: set sources.advisories.paths (OSV dumps: a directory, .zip or .tar.gz) or sources.advisories.api = true";

/// Whether the tools policy keeps sources off the network. `ask` counts as allowed:
/// configuring a backend is the user's consent, and retrieval has nobody to ask.
pub fn network_denied(network: Action) -> bool {
    network == Action::Deny
}

/// A source a strategy may name that is not configured: never searched, reported with the
/// key to set.
#[derive(Clone, Debug)]
pub struct NotConfigured {
    name: String,
    reason: String,
}

impl NotConfigured {
    /// Source `name`, unavailable for `reason`.
    pub fn new(name: &str, reason: impl Into<String>) -> Self {
        NotConfigured {
            name: name.to_owned(),
            reason: reason.into(),
        }
    }
}

impl Source for NotConfigured {
    fn name(&self) -> &str {
        &self.name
    }

    fn search(
        &self,
        request: SourceRequest,
        _cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Vec<Vec<PackedItem>>, SourceError>> {
        let n = request.queries.len();
        Box::pin(async move { Ok(vec![Vec::new(); n]) })
    }

    fn unavailable(&self) -> Option<String> {
        Some(self.reason.clone())
    }
}

/// The sources of `config` for the workspace at `repo`: `web_search` and `cve_database`
/// always (as [`NotConfigured`] when they are not), `doc_retrieval` when a web backend is
/// configured and `sources.docs.enabled` (it then searches `local_docs`, the index's own
/// `doc_retrieval`, too; without a backend the index alone serves that name).
pub fn sources(
    config: &SourcesConfig,
    repo: &Path,
    network: Action,
    local_docs: Option<Arc<dyn Source>>,
) -> Vec<Arc<dyn Source>> {
    let mut out: Vec<Arc<dyn Source>> = Vec::new();
    let cache_dir = repo.join(".trellis").join("cache").join("web");
    match config.web.backend {
        None => out.push(Arc::new(NotConfigured::new(WEB_SOURCE, WEB_NOT_CONFIGURED))),
        Some(_) => match WebSearch::new(
            &config.web,
            Some(&cache_dir),
            network,
            Arc::new(SystemClock),
        ) {
            Ok(web) => {
                let web = Arc::new(web);
                out.push(Arc::new(WebSource::new(web.clone())));
                if config.docs.enabled {
                    out.push(Arc::new(DocsSource::new(web, &config.docs, local_docs)));
                }
            }
            Err(e) => out.push(Arc::new(NotConfigured::new(
                WEB_SOURCE,
                format!("not configured: {e}"),
            ))),
        },
    }
    if config.advisories.paths.is_empty() && !config.advisories.api {
        out.push(Arc::new(NotConfigured::new(CVE_SOURCE, CVE_NOT_CONFIGURED)));
    } else {
        match AdvisorySource::new(repo, &config.advisories, network) {
            Ok(s) => out.push(Arc::new(s)),
            Err(e) => out.push(Arc::new(NotConfigured::new(
                CVE_SOURCE,
                format!("not configured: {e}"),
            ))),
        }
    }
    out
}
