//! The retrieval agent with these sources: the strategy of `feature_with_iterative_testing`
//! names `web_search`, `doc_retrieval` and `cve_database` (in `security_review`); the
//! security stage gets the advisories with their attribution, unconfigured sources are
//! reported as such, and a denied network keeps the web backend unasked.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use trellis_agents::StagePack;
use trellis_agents::retrieval::{RetrievalAgent, RetrievalOptions, strategy_of};
use trellis_config::Config;
use trellis_index::IndexConfig;
use trellis_sources::{SourcesConfig, WebBackend};
use trellis_test_support::scripted::ScriptedProvider;
use trellis_tools::config::Action;
use trellis_workflow::{BUILTINS, Decision, Decisions, Plan, assemble, load_str};

use super::fake;
use super::osv::{osv_dir, workspace};

const TASK: &str = "Add JWT login to the web service";

fn plan() -> Plan {
    let (file, text) = BUILTINS
        .iter()
        .find(|(f, _)| f.starts_with("feature_with_iterative_testing"))
        .unwrap();
    let wf = load_str(file, text, None).unwrap();
    let mut d = Decisions::default();
    d.set("security_review", Decision::Include, None);
    assemble(&wf, &d, TASK).unwrap()
}

async fn run_packs(
    root: &Path,
    config: &SourcesConfig,
    network: Action,
) -> BTreeMap<String, StagePack> {
    std::fs::write(
        root.join("README.md"),
        "# Web service\n\nLogin uses sessions today.\n",
    )
    .unwrap();
    let plan = plan();
    let strategy = strategy_of(&plan).unwrap();
    let stages: Vec<_> = plan.planned.iter().map(|p| p.context.clone()).collect();
    // No scripted answers: every stage uses the deterministic queries.
    let provider = ScriptedProvider::new([]);
    let agent = RetrievalAgent::new(
        root,
        IndexConfig::default(),
        None,
        Arc::new(provider),
        RetrievalOptions::default(),
    );
    let local = agent.index_source("doc_retrieval");
    assert!(local.is_some());
    let agent = trellis_sources::sources(config, root, network, local)
        .into_iter()
        .fold(agent, RetrievalAgent::with_source);
    agent
        .prepare(&strategy, None, CancellationToken::new())
        .await
        .unwrap();
    agent
        .upfront(TASK, &strategy, &stages, CancellationToken::new())
        .await
        .unwrap()
}

fn skipped<'a>(pack: &'a StagePack, name: &str) -> Option<&'a str> {
    pack.sources
        .iter()
        .find(|s| s.name == name)?
        .skipped
        .as_deref()
}

#[tokio::test]
async fn the_security_stage_gets_advisories_and_unconfigured_sources_say_which_key() {
    let ws = workspace();
    let config = SourcesConfig {
        advisories: trellis_sources::AdvisoriesConfig {
            paths: vec![osv_dir()],
            ..Default::default()
        },
        ..SourcesConfig::default()
    };
    let packs = run_packs(ws.path(), &config, Action::Allow).await;
    let security = &packs["security_review"];
    let advisories: Vec<_> = security
        .items
        .iter()
        .filter(|i| i.source == "cve_database")
        .collect();
    assert_eq!(advisories.len(), 5, "{:#?}", security.sources);
    assert!(
        advisories
            .iter()
            .all(|i| i.path.starts_with("https://osv.dev/vulnerability/"))
    );
    let rendered = security.render();
    assert!(
        rendered.contains("### https://osv.dev/vulnerability/RUSTSEC-2020-0071 (RUSTSEC-2020-0071 time@0.2.22) — cve_database"),
        "{rendered}"
    );
    // Only the security stage searches the CVE source (trigger_stages).
    let code = &packs["code_generation"];
    assert!(!code.items.iter().any(|i| i.source == "cve_database"));
    // web_search is named by the strategy but not configured: reported with the key, not
    // an error; doc_retrieval is the index's alone.
    let why = skipped(code, "web_search").unwrap();
    assert!(
        why.starts_with("not configured: set sources.web.backend"),
        "{why}"
    );
    assert!(
        code.sources.iter().all(|s| s.error.is_none()),
        "{:?}",
        code.sources
    );
    assert!(
        code.notes
            .iter()
            .any(|n| n.contains("source `web_search` not searched: not configured"))
    );
    assert!(
        code.render()
            .contains("Unavailable sources: web_search (not configured: set sources.web.backend")
    );
    assert!(skipped(code, "doc_retrieval").is_none());
}

#[tokio::test]
async fn web_sources_serve_the_strategy_and_a_denied_network_sends_nothing() {
    let fake = fake::start(vec![], HashMap::new()).await;
    let ws = workspace();
    let mut config = SourcesConfig::default();
    config.web.backend = Some(WebBackend::Searxng);
    config.web.base_url = Some(fake.url.clone());
    let packs = run_packs(ws.path(), &config, Action::Allow).await;
    let code = &packs["code_generation"];
    assert!(
        code.items
            .iter()
            .any(|i| i.source == "web_search" && i.path == "https://example.com/blog/jwt"),
        "{:#?}",
        code.items
    );
    assert!(
        code.items
            .iter()
            .any(|i| i.path.starts_with("https://owasp.org/"))
    );
    assert!(fake.count("/search") > 0);
    let why = skipped(code, "cve_database")
        .or_else(|| skipped(&packs["security_review"], "cve_database"))
        .unwrap();
    assert!(why.contains("sources.advisories.paths"), "{why}");

    let quiet = fake::start(vec![], HashMap::new()).await;
    config.web.base_url = Some(quiet.url.clone());
    let ws = workspace();
    let denied = run_packs(ws.path(), &config, Action::Deny).await;
    let code = &denied["code_generation"];
    assert_eq!(
        skipped(code, "web_search"),
        Some("network denied by tools.policy.network")
    );
    assert!(!code.items.iter().any(|i| i.path.starts_with("http")));
    assert!(quiet.seen().is_empty(), "{:?}", quiet.seen());
}

#[test]
fn the_sources_section_is_checked_by_the_configuration() {
    let text = "[sources.web]\nbackend = \"brave\"\napi_key_env = \"BRAVE_API_KEY\"\nrate_limit_per_minute = 10\n\n[sources.docs]\nsites = [\"owasp.org\"]\n\n[sources.advisories]\npaths = [\"osv/all.zip\"]\napi = true\n";
    let config = Config::from_toml(Path::new("config.toml"), text).unwrap();
    let s: SourcesConfig = config.section(trellis_sources::SECTION).unwrap();
    assert_eq!(s.web.backend, Some(WebBackend::Brave));
    assert_eq!(s.web.rate_limit_per_minute, 10);
    assert_eq!(s.docs.sites, ["owasp.org"]);
    assert!(s.advisories.api);
    let bad = Config::from_toml(
        Path::new("config.toml"),
        "[sources.web]\nbackedn = \"brave\"\n",
    )
    .unwrap();
    let err = bad
        .section::<SourcesConfig>(trellis_sources::SECTION)
        .unwrap_err()
        .to_string();
    assert!(err.contains("did you mean `sources.web.backend`"), "{err}");
}

/// A source that answers after a long time, with a timeout of its own.
struct Slow;

impl trellis_agents::retrieval::Source for Slow {
    fn name(&self) -> &str {
        "web_search"
    }

    fn search(
        &self,
        request: trellis_agents::retrieval::SourceRequest,
        cancel: CancellationToken,
    ) -> futures::future::BoxFuture<
        'static,
        Result<Vec<Vec<trellis_agents::PackedItem>>, trellis_agents::retrieval::SourceError>,
    > {
        Box::pin(async move {
            tokio::select! {
                () = tokio::time::sleep(std::time::Duration::from_secs(30)) => {}
                () = cancel.cancelled() => {}
            }
            Ok(vec![Vec::new(); request.queries.len()])
        })
    }

    fn timeout(&self) -> Option<std::time::Duration> {
        Some(std::time::Duration::from_millis(200))
    }
}

#[tokio::test]
async fn a_source_with_its_own_timeout_is_cut_at_it() {
    let ws = workspace();
    let plan = plan();
    let strategy = strategy_of(&plan).unwrap();
    let stages: Vec<_> = plan.planned.iter().map(|p| p.context.clone()).collect();
    let agent = RetrievalAgent::new(
        ws.path(),
        IndexConfig::default(),
        None,
        Arc::new(ScriptedProvider::new([])),
        RetrievalOptions::default(),
    )
    .with_source(Arc::new(Slow));
    agent
        .prepare(&strategy, None, CancellationToken::new())
        .await
        .unwrap();
    let t = std::time::Instant::now();
    let packs = agent
        .upfront(TASK, &strategy, &stages, CancellationToken::new())
        .await
        .unwrap();
    // The agent's own source timeout is 5 s; the source's 200 ms applies.
    assert!(
        t.elapsed() < std::time::Duration::from_secs(4),
        "{:?}",
        t.elapsed()
    );
    let web = packs["code_generation"]
        .sources
        .iter()
        .find(|s| s.name == "web_search")
        .unwrap();
    assert!(web.timed_out, "{web:?}");
    assert_eq!(web.error.as_deref(), Some("no answer within 200 ms"));
}
