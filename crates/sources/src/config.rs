//! The `sources` section of the configuration.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `[sources]`: the retrieval sources outside the workspace index.
#[derive(Clone, Debug, Default, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct SourcesConfig {
    /// `[sources.web]`: the web search backend behind `web_search` and the documentation
    /// half of `doc_retrieval`.
    pub web: WebConfig,
    /// `[sources.docs]`: documentation search (`doc_retrieval`) over the web backend.
    pub docs: DocsConfig,
    /// `[sources.advisories]`: OSV advisories (`cve_database`).
    pub advisories: AdvisoriesConfig,
}

/// Which web search API answers `web_search`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WebBackend {
    /// A SearXNG instance's JSON API (`/search?q=…&format=json`; JSON must be enabled in its
    /// `settings.yml`, `search.formats`).
    Searxng,
    /// The Brave Search API (`/res/v1/web/search`, key in `X-Subscription-Token`).
    Brave,
}

/// `[sources.web]`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct WebConfig {
    /// The backend; unset: `web_search` is reported as not configured.
    pub backend: Option<WebBackend>,
    /// The instance's base URL (required for SearXNG; Brave: `https://api.search.brave.com`).
    pub base_url: Option<String>,
    /// The environment variable holding the API key (Brave; default `BRAVE_API_KEY`).
    pub api_key_env: Option<String>,
    /// Results kept per query (default 8).
    pub results: usize,
    /// Seconds one HTTP request may take (default 4).
    pub timeout_secs: u64,
    /// Seconds a cached answer stays fresh (default one day); 0: no cache.
    pub cache_ttl_secs: u64,
    /// Queries sent to the backend per minute at most, cache hits not counted (default 30).
    pub rate_limit_per_minute: u32,
    /// How long a query may wait for the rate limit before it is refused (milliseconds,
    /// default 0: refused at once with the time to wait).
    pub rate_limit_wait_ms: u64,
    /// The time the `web_search` source gets for all its queries (milliseconds; default: the
    /// agent's `source_timeout_ms`).
    pub source_timeout_ms: Option<u64>,
}

impl Default for WebConfig {
    fn default() -> Self {
        WebConfig {
            backend: None,
            base_url: None,
            api_key_env: None,
            results: 8,
            timeout_secs: 4,
            cache_ttl_secs: 86_400,
            rate_limit_per_minute: 30,
            rate_limit_wait_ms: 0,
            source_timeout_ms: None,
        }
    }
}

/// `[sources.docs]`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct DocsConfig {
    /// Search the documentation sites for `doc_retrieval` when a web backend is configured
    /// (default true); the workspace's own documents are searched either way.
    pub enabled: bool,
    /// Sites searched (`site:` filters, and results from other hosts are dropped).
    pub sites: Vec<String>,
}

/// Documentation sites searched by default: RFCs, OWASP, MDN and common framework docs.
pub const DEFAULT_DOC_SITES: &[&str] = &[
    "rfc-editor.org",
    "datatracker.ietf.org",
    "owasp.org",
    "developer.mozilla.org",
    "docs.rs",
    "doc.rust-lang.org",
    "docs.python.org",
    "go.dev",
    "nodejs.org",
];

impl Default for DocsConfig {
    fn default() -> Self {
        DocsConfig {
            enabled: true,
            sites: DEFAULT_DOC_SITES.iter().map(|s| (*s).to_owned()).collect(),
        }
    }
}

/// `[sources.advisories]`.
#[derive(Clone, Debug, PartialEq, Deserialize, Serialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct AdvisoriesConfig {
    /// OSV advisories on disk: directories of `.json` files, or `.zip` / `.tar` / `.tar.gz`
    /// archives (e.g. `https://osv-vulnerabilities.storage.googleapis.com/<ecosystem>/all.zip`);
    /// relative paths are relative to the workspace.
    pub paths: Vec<PathBuf>,
    /// Also ask the OSV API (`POST /v1/querybatch`) about the workspace's dependencies
    /// (default false; never when `tools.policy.network = "deny"`).
    pub api: bool,
    /// The OSV API's base URL (default `https://api.osv.dev`).
    pub api_url: Option<String>,
    /// Seconds one API request may take (default 10).
    pub timeout_secs: u64,
    /// Directory levels below the workspace root searched for lockfiles (default 4).
    pub max_depth: usize,
    /// The time the `cve_database` source gets for all its queries (milliseconds; default:
    /// 20000, loading a large dump the first time takes a while).
    pub source_timeout_ms: Option<u64>,
}

impl Default for AdvisoriesConfig {
    fn default() -> Self {
        AdvisoriesConfig {
            paths: Vec::new(),
            api: false,
            api_url: None,
            timeout_secs: 10,
            max_depth: 4,
            source_timeout_ms: None,
        }
    }
}
