//! `cve_database`: OSV advisories that affect the workspace's locked dependencies, from
//! dumps on disk and optionally the OSV API, ranked by how well they match the query.

mod api;
mod load;
mod lockfiles;
mod model;
mod version;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::future::BoxFuture;
use tokio_util::sync::CancellationToken;
use trellis_index::source::{PackedItem, Source, SourceError, SourceRequest};
use trellis_tools::config::Action;

pub use api::OSV_API_URL;
pub use lockfiles::Dependency;
pub use model::{Advisory, Affected, Event, Package, Range, Reference};
pub use version::Ecosystem;

use crate::config::AdvisoriesConfig;
use crate::error::{Error, Result};
use crate::{CVE_SOURCE, network_denied};
use api::OsvApi;

/// An advisory that affects a locked dependency.
#[derive(Clone, Debug)]
pub struct Finding {
    /// The advisory.
    pub advisory: Arc<Advisory>,
    /// The dependency it affects.
    pub dependency: Dependency,
    /// The lowest version above the locked one that fixes it, if known.
    pub fixed: Option<String>,
}

impl Finding {
    /// The advisory's page.
    pub fn url(&self) -> String {
        format!("https://osv.dev/vulnerability/{}", self.advisory.id)
    }

    /// The finding as a packed item: the advisory's URL is the path, `id package@version`
    /// the section.
    pub fn item(&self) -> PackedItem {
        let a = &self.advisory;
        let d = &self.dependency;
        let mut text = a.id.clone();
        if !a.aliases.is_empty() {
            text.push_str(&format!(" ({})", a.aliases.join(", ")));
        }
        text.push_str(&format!(
            " — {} {}@{} ({})\nFixed in: {}\n",
            d.ecosystem.osv_name(),
            d.name,
            d.version,
            d.file,
            self.fixed.as_deref().unwrap_or("no fixed version known")
        ));
        if let Some(s) = &a.summary {
            text.push_str(&format!("Summary: {s}\n"));
        }
        if let Some(details) = &a.details {
            let short: String = details.chars().take(600).collect();
            let more = if short.len() < details.len() {
                " …"
            } else {
                ""
            };
            text.push_str(&format!("Details: {}{more}\n", short.trim()));
        }
        for r in a.references.iter().take(3) {
            text.push_str(&format!("Reference: {}\n", r.url));
        }
        PackedItem {
            source: CVE_SOURCE.into(),
            path: self.url(),
            start_line: 0,
            end_line: 0,
            symbol: None,
            section: Some(format!("{} {}@{}", a.id, d.name, d.version)),
            kind: "advisory".into(),
            text,
            tokens: 0,
            score: 0.0,
            note: self
                .fixed
                .as_ref()
                .map(|f| format!("upgrade {} to {f}", d.name)),
        }
    }

    /// How well the finding matches `query`: an advisory id or alias named (100), the
    /// package named (20), the ecosystem named (3), words of the summary (2) and details (1).
    pub fn relevance(&self, query: &str) -> u32 {
        let q = query.to_ascii_lowercase();
        let words: HashSet<&str> = q
            .split(|c: char| {
                !(c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/' | '@'))
            })
            .map(|w| w.trim_matches(|c| c == '.' || c == '-'))
            .filter(|w| w.len() >= 3)
            .collect();
        let a = &self.advisory;
        let d = &self.dependency;
        let mut score = 0;
        if std::iter::once(&a.id)
            .chain(&a.aliases)
            .any(|id| words.contains(id.to_ascii_lowercase().as_str()))
        {
            score += 100;
        }
        let name = d.name.to_ascii_lowercase();
        if words.contains(name.as_str()) || (name.contains('/') && q.contains(&name)) {
            score += 20;
        }
        let eco_words: &[&str] = match d.ecosystem {
            Ecosystem::CratesIo => &["rust", "cargo", "crate", "crates"],
            Ecosystem::Npm => &["npm", "node", "javascript", "typescript"],
            Ecosystem::PyPI => &["python", "pypi", "pip", "poetry"],
            Ecosystem::Go => &["go", "golang"],
        };
        if eco_words
            .iter()
            .any(|w| q.split_whitespace().any(|x| x == *w))
        {
            score += 3;
        }
        let in_text = |t: &Option<String>| {
            let t = t.as_deref().unwrap_or("").to_ascii_lowercase();
            words.iter().filter(|w| t.contains(**w)).count() as u32
        };
        score + 2 * in_text(&a.summary) + in_text(&a.details)
    }
}

/// The findings ranked for `query`: most relevant first, then by advisory id. Every
/// finding is kept (a security stage wants them all), at most `limit`.
pub fn rank<'a>(findings: &'a [Finding], query: &str, limit: usize) -> Vec<&'a Finding> {
    let mut scored: Vec<(u32, &Finding)> =
        findings.iter().map(|f| (f.relevance(query), f)).collect();
    scored.sort_by(|a, b| {
        b.0.cmp(&a.0)
            .then_with(|| a.1.advisory.id.cmp(&b.1.advisory.id))
            .then_with(|| a.1.dependency.cmp(&b.1.dependency))
    });
    scored.into_iter().take(limit).map(|(_, f)| f).collect()
}

/// What the lockfiles and dumps looked like when the findings were computed.
type Fingerprint = (Vec<lockfiles::Found>, Vec<(PathBuf, Option<SystemTime>)>);

#[derive(Debug)]
struct Inner {
    root: PathBuf,
    paths: Vec<PathBuf>,
    max_depth: usize,
    network: Action,
    api: Option<OsvApi>,
    timeout: Option<Duration>,
    loaded: tokio::sync::Mutex<Option<(Fingerprint, Arc<Vec<Finding>>)>>,
}

/// The `cve_database` source.
#[derive(Clone, Debug)]
pub struct AdvisorySource {
    inner: Arc<Inner>,
}

impl AdvisorySource {
    /// Advisories for the workspace at `root` as `config` says; the API is asked only when
    /// `network` is not [`Action::Deny`].
    pub fn new(root: &Path, config: &AdvisoriesConfig, network: Action) -> Result<Self> {
        let api = if config.api {
            Some(OsvApi::new(
                config.api_url.as_deref(),
                Duration::from_secs(config.timeout_secs.max(1)),
            )?)
        } else {
            None
        };
        Ok(AdvisorySource {
            inner: Arc::new(Inner {
                root: root.to_path_buf(),
                paths: config.paths.iter().map(|p| root.join(p)).collect(),
                max_depth: config.max_depth,
                network,
                api,
                timeout: Some(Duration::from_millis(
                    config.source_timeout_ms.unwrap_or(20_000),
                )),
                loaded: tokio::sync::Mutex::new(None),
            }),
        })
    }

    /// The advisories affecting the workspace's locked dependencies, recomputed when a
    /// lockfile or a dump changed. The work continues in the background when `cancel`
    /// fires, so the next call finds it done.
    pub async fn findings(&self, cancel: &CancellationToken) -> Result<Arc<Vec<Finding>>> {
        let inner = self.inner.clone();
        let task = tokio::spawn(async move { inner.refresh().await });
        tokio::select! {
            r = task => r.map_err(|e| Error::Config(format!("advisory loading failed: {e}")))?,
            () = cancel.cancelled() => Err(Error::Cancelled),
        }
    }
}

impl Inner {
    async fn refresh(self: Arc<Self>) -> Result<Arc<Vec<Finding>>> {
        let mut loaded = self.loaded.lock().await;
        let me = self.clone();
        let fingerprint = tokio::task::spawn_blocking(move || me.fingerprint())
            .await
            .map_err(|e| Error::Config(e.to_string()))?;
        if let Some((f, findings)) = loaded.as_ref()
            && *f == fingerprint
        {
            return Ok(findings.clone());
        }
        let me = self.clone();
        let lockfiles = fingerprint.0.clone();
        let (deps, mut advisories) = tokio::task::spawn_blocking(move || me.read_local(&lockfiles))
            .await
            .map_err(|e| Error::Config(e.to_string()))??;
        if let Some(api) = &self.api {
            if network_denied(self.network) {
                tracing::info!(
                    "{CVE_SOURCE}: OSV API not asked: network denied by tools.policy.network"
                );
            } else {
                let never = CancellationToken::new();
                advisories.extend(api.advisories(&deps, &never).await?);
            }
        }
        let findings = Arc::new(match_all(&deps, advisories));
        *loaded = Some((fingerprint, findings.clone()));
        Ok(findings)
    }

    fn fingerprint(&self) -> Fingerprint {
        let dumps = self
            .paths
            .iter()
            .map(|p| {
                let mtime = std::fs::metadata(p).ok().and_then(|m| m.modified().ok());
                (p.clone(), mtime)
            })
            .collect();
        (lockfiles::find(&self.root, self.max_depth), dumps)
    }

    fn read_local(&self, files: &[lockfiles::Found]) -> Result<(Vec<Dependency>, Vec<Advisory>)> {
        let deps = lockfiles::read(&self.root, files);
        let wanted: load::Wanted = deps
            .iter()
            .map(|d| (d.ecosystem, d.ecosystem.normalize_name(&d.name)))
            .collect();
        let mut advisories = Vec::new();
        for p in &self.paths {
            let (found, bad) = load::load(p, &wanted)?;
            if bad > 0 {
                tracing::warn!("{}: {bad} files are not OSV advisories", p.display());
            }
            advisories.extend(found);
        }
        Ok((deps, advisories))
    }
}

/// Every (advisory, dependency) pair where the advisory affects the locked version; an
/// advisory known from several places (dump and API) counts once.
fn match_all(deps: &[Dependency], advisories: Vec<Advisory>) -> Vec<Finding> {
    let mut by_id: HashMap<String, Arc<Advisory>> = HashMap::new();
    for a in advisories {
        by_id.entry(a.id.clone()).or_insert_with(|| Arc::new(a));
    }
    let mut by_package: HashMap<(Ecosystem, String), Vec<Arc<Advisory>>> = HashMap::new();
    for a in by_id.values() {
        let packages: HashSet<(Ecosystem, String)> = a.packages().collect();
        for p in packages {
            by_package.entry(p).or_default().push(a.clone());
        }
    }
    let mut out = Vec::new();
    for d in deps {
        let key = (d.ecosystem, d.ecosystem.normalize_name(&d.name));
        for a in by_package.get(&key).into_iter().flatten() {
            if let Some(hit) = a.affects(d) {
                out.push(Finding {
                    advisory: a.clone(),
                    dependency: d.clone(),
                    fixed: hit.fixed,
                });
            }
        }
    }
    out.sort_by(|a, b| {
        a.advisory
            .id
            .cmp(&b.advisory.id)
            .then_with(|| a.dependency.cmp(&b.dependency))
    });
    out
}

impl Source for AdvisorySource {
    fn name(&self) -> &str {
        CVE_SOURCE
    }

    fn search(
        &self,
        request: SourceRequest,
        cancel: CancellationToken,
    ) -> BoxFuture<'static, Result<Vec<Vec<PackedItem>>, SourceError>> {
        let me = self.clone();
        Box::pin(async move {
            let findings = me
                .findings(&cancel)
                .await
                .map_err(|e| Box::new(e) as SourceError)?;
            Ok(request
                .queries
                .iter()
                .map(|q| {
                    rank(&findings, q, request.limit.max(1))
                        .into_iter()
                        .map(Finding::item)
                        .collect()
                })
                .collect())
        })
    }

    fn unavailable(&self) -> Option<String> {
        if self.inner.paths.is_empty() && self.inner.api.is_none() {
            return Some(crate::CVE_NOT_CONFIGURED.to_owned());
        }
        if self.inner.paths.is_empty() && network_denied(self.inner.network) {
            return Some(format!(
                "{} (the OSV API is the only advisory source; set sources.advisories.paths for offline dumps)",
                Error::NetworkDenied
            ));
        }
        None
    }

    fn timeout(&self) -> Option<Duration> {
        self.inner.timeout
    }
}
