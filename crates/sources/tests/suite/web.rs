//! Web search against the loopback fake: SearXNG and Brave requests and parsing, the cache,
//! the rate limit, the network policy, documentation site filters.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use trellis_agents::retrieval::{Source, SourceRequest};
use trellis_index::strategy::{ContextSource, RetrievalScope};
use trellis_sources::{
    DocsConfig, DocsSource, Error, ManualClock, WebBackend, WebConfig, WebSearch, WebSource,
};
use trellis_tools::config::Action;

use super::fake;

pub fn searxng(url: &str) -> WebConfig {
    WebConfig {
        backend: Some(WebBackend::Searxng),
        base_url: Some(url.to_owned()),
        ..WebConfig::default()
    }
}

pub fn request(name: &str, queries: &[&str]) -> SourceRequest {
    SourceRequest {
        spec: ContextSource {
            source: name.into(),
            ..ContextSource::default()
        },
        scope: Arc::new(RetrievalScope::code()),
        queries: queries.iter().map(|q| (*q).to_owned()).collect(),
        limit: 10,
    }
}

#[tokio::test]
async fn searxng_is_asked_for_json_and_results_become_attributed_items() {
    let fake = fake::start(vec![], HashMap::new()).await;
    let web = WebSearch::new(
        &searxng(&fake.url),
        None,
        Action::Allow,
        Arc::new(ManualClock::default()),
    )
    .unwrap();
    let source = WebSource::new(Arc::new(web));
    let lists = source
        .search(
            request("web_search", &["jwt validation"]),
            CancellationToken::new(),
        )
        .await
        .unwrap();
    let seen = fake.seen();
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].path, "/search");
    assert_eq!(seen[0].query["q"], "jwt validation");
    assert_eq!(seen[0].query["format"], "json");
    let items = &lists[0];
    assert_eq!(items.len(), 3);
    assert_eq!(
        items[0].path,
        "https://owasp.org/www-project-cheat-sheets/jwt"
    );
    assert_eq!(items[0].section.as_deref(), Some("JWT Cheat Sheet"));
    assert_eq!(items[0].text, "JWT Cheat Sheet\nValidate & rotate keys");
    assert_eq!(items[0].source, "web_search");
    assert_eq!((items[0].start_line, items[0].kind.as_str()), (0, "web"));
}

#[tokio::test]
async fn brave_sends_the_key_from_the_named_variable() {
    let fake = fake::start(vec![], HashMap::new()).await;
    // A variable every test process has: the key is whatever it holds (no secret here,
    // and no unsafe `set_var`).
    let config = WebConfig {
        backend: Some(WebBackend::Brave),
        base_url: Some(fake.url.clone()),
        api_key_env: Some("PATH".into()),
        results: 5,
        ..WebConfig::default()
    };
    let web = WebSearch::new(
        &config,
        None,
        Action::Allow,
        Arc::new(ManualClock::default()),
    )
    .unwrap();
    let hits = web
        .query("jwt rfc", &CancellationToken::new())
        .await
        .unwrap();
    let seen = fake.seen();
    assert_eq!(seen[0].path, "/res/v1/web/search");
    assert_eq!(seen[0].query["q"], "jwt rfc");
    assert_eq!(seen[0].query["count"], "5");
    assert_eq!(
        seen[0].token.as_deref(),
        std::env::var("PATH").ok().as_deref()
    );
    assert_eq!(hits[0].url, "https://www.rfc-editor.org/rfc/rfc7519");
    assert_eq!(hits[0].snippet, "JWT is a compact claims representation");

    // Without the variable: a configuration error, and nothing is sent.
    let missing = WebConfig {
        api_key_env: Some("TRELLIS_TEST_NO_SUCH_BRAVE_KEY".into()),
        ..config
    };
    let web = WebSearch::new(
        &missing,
        None,
        Action::Allow,
        Arc::new(ManualClock::default()),
    )
    .unwrap();
    let err = web
        .query("other", &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(
        err.to_string().contains("TRELLIS_TEST_NO_SUCH_BRAVE_KEY"),
        "{err}"
    );
    assert_eq!(fake.count("/res"), 1);
}

#[tokio::test]
async fn answers_are_cached_across_restarts_until_the_ttl() {
    let fake = fake::start(vec![], HashMap::new()).await;
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::default());
    let config = WebConfig {
        cache_ttl_secs: 3600,
        ..searxng(&fake.url)
    };
    let cancel = CancellationToken::new();
    let web = WebSearch::new(&config, Some(dir.path()), Action::Allow, clock.clone()).unwrap();
    let first = web.query("jwt", &cancel).await.unwrap();
    assert_eq!(web.query("jwt", &cancel).await.unwrap(), first);
    assert_eq!(fake.count("/search"), 1, "a cache hit sends nothing");
    // A new process: the file cache answers.
    let again = WebSearch::new(&config, Some(dir.path()), Action::Allow, clock.clone()).unwrap();
    assert_eq!(again.query("jwt", &cancel).await.unwrap(), first);
    assert_eq!(fake.count("/search"), 1);
    // Past the TTL the backend is asked again.
    clock.advance(Duration::from_secs(3601));
    again.query("jwt", &cancel).await.unwrap();
    assert_eq!(fake.count("/search"), 2);
}

#[tokio::test]
async fn the_31st_query_in_a_minute_is_refused_with_the_wait() {
    let fake = fake::start(vec![], HashMap::new()).await;
    let clock = Arc::new(ManualClock::default());
    let config = WebConfig {
        cache_ttl_secs: 0,
        ..searxng(&fake.url)
    };
    assert_eq!(
        config.rate_limit_per_minute, 30,
        "30 a minute is the default limit"
    );
    let web = WebSearch::new(&config, None, Action::Allow, clock.clone()).unwrap();
    let cancel = CancellationToken::new();
    for i in 0..30 {
        web.query(&format!("q{i}"), &cancel).await.unwrap();
    }
    let err = web.query("q30", &cancel).await.unwrap_err();
    assert!(
        matches!(err, Error::RateLimited { per_minute: 30, .. }),
        "{err}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("rate limit of 30 queries/minute") && msg.contains("next query allowed in"),
        "{msg}"
    );
    assert_eq!(fake.count("/search"), 30);
    // One query's worth of time later (60 s / 30), one more is allowed.
    clock.advance(Duration::from_secs(2));
    web.query("q31", &cancel).await.unwrap();
    assert!(web.query("q32", &cancel).await.is_err());
    assert_eq!(fake.count("/search"), 31);
}

#[tokio::test]
async fn network_deny_sends_nothing() {
    let fake = fake::start(vec![], HashMap::new()).await;
    let web = Arc::new(
        WebSearch::new(
            &searxng(&fake.url),
            None,
            Action::Deny,
            Arc::new(ManualClock::default()),
        )
        .unwrap(),
    );
    let source = WebSource::new(web.clone());
    assert_eq!(
        source.unavailable().as_deref(),
        Some("network denied by tools.policy.network")
    );
    let err = web
        .query("jwt", &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NetworkDenied));
    let docs = DocsSource::new(web, &DocsConfig::default(), None);
    assert!(docs.unavailable().is_some());
    assert!(
        docs.search(request("doc_retrieval", &["jwt"]), CancellationToken::new())
            .await
            .is_err()
    );
    assert!(fake.seen().is_empty(), "{:?}", fake.seen());
}

#[tokio::test]
async fn documentation_search_adds_site_filters_and_keeps_only_those_sites() {
    let fake = fake::start(vec![], HashMap::new()).await;
    let web = Arc::new(
        WebSearch::new(
            &searxng(&fake.url),
            None,
            Action::Allow,
            Arc::new(ManualClock::default()),
        )
        .unwrap(),
    );
    let docs = DocsSource::new(
        web,
        &DocsConfig {
            enabled: true,
            sites: vec!["owasp.org".into(), "developer.mozilla.org".into()],
        },
        None,
    );
    let lists = docs
        .search(request("doc_retrieval", &["jwt"]), CancellationToken::new())
        .await
        .unwrap();
    let seen = fake.seen();
    assert_eq!(
        seen[0].query["q"],
        "jwt (site:owasp.org OR site:developer.mozilla.org)"
    );
    let urls: Vec<&str> = lists[0].iter().map(|i| i.path.as_str()).collect();
    assert_eq!(
        urls,
        [
            "https://owasp.org/www-project-cheat-sheets/jwt",
            "https://developer.mozilla.org/en-US/docs/Web/HTTP"
        ],
        "example.com is not a documentation site"
    );
    assert!(lists[0].iter().all(|i| i.source == "doc_retrieval"));
}
