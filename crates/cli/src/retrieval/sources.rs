//! `trellis search --source NAME`: one retrieval source outside the index (`[sources]`:
//! web search, documentation sites, OSV advisories), as the retrieval agent would ask it.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::bail;
use tokio_util::sync::CancellationToken;
use trellis_agents::retrieval::SourceRequest;
use trellis_config::Config;
use trellis_index::strategy::{ContextSource, RetrievalScope};
use trellis_sources::SourcesConfig;
use trellis_tools::ToolsConfig;

use super::SearchArgs;

/// Runs `args.query` against source `args.source`.
pub fn search(repo: &Path, config: &Config, args: &SearchArgs) -> anyhow::Result<ExitCode> {
    let name = args.source.clone().unwrap_or_default();
    if args.query.trim().is_empty() {
        bail!("the search query is empty; say what to look for");
    }
    let sources: SourcesConfig = config.section(trellis_sources::SECTION)?;
    let tools: ToolsConfig = config.section_serde("tools")?;
    let all = trellis_sources::sources(&sources, repo, tools.policy.network, None);
    let Some(source) = all.into_iter().find(|s| s.name() == name) else {
        bail!(
            "no source `{name}` outside the index: use {}, {} or {} (doc_retrieval needs sources.web.backend)",
            trellis_sources::WEB_SOURCE,
            trellis_sources::DOCS_SOURCE,
            trellis_sources::CVE_SOURCE
        );
    };
    if let Some(why) = source.unavailable() {
        eprintln!("{name}: {why}");
        return Ok(ExitCode::FAILURE);
    }
    let request = SourceRequest {
        spec: ContextSource {
            source: name.clone(),
            ..ContextSource::default()
        },
        scope: Arc::new(RetrievalScope::code()),
        queries: vec![args.query.clone()],
        limit: args.limit.map_or(20, |n| n as usize),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let lists = rt
        .block_on(source.search(request, CancellationToken::new()))
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let items = lists.into_iter().next().unwrap_or_default();
    if args.json {
        println!("{}", serde_json::to_string_pretty(&items)?);
        return Ok(ExitCode::SUCCESS);
    }
    for item in &items {
        let what = item.section.as_deref().unwrap_or(item.kind.as_str());
        println!("── {}  {what}  [{}]", item.path, item.kind);
        if let Some(note) = &item.note {
            println!("({note})");
        }
        println!("{}\n", item.text);
    }
    eprintln!("{} items from {name}", items.len());
    Ok(ExitCode::SUCCESS)
}
