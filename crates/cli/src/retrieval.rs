//! `trellis index`, `trellis search` and `trellis map`: the workspace index front-end.

mod sources;

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::bail;
use clap::{Args, ValueEnum};
use trellis_index::embed;
use trellis_index::{
    Index, IndexConfig, Progress, RepoMapRequest, RetrievalRequest, RetrievalScope, Scope,
    SearchConfig, SearchFilter, TestFiles, UpdateOptions, UpdateStats,
};

use crate::Commands;

/// `trellis index`.
#[derive(Debug, Args)]
pub struct IndexArgs {
    /// Keep running and re-index when files change (polls modification times).
    #[arg(long)]
    pub watch: bool,
    /// Poll interval for `--watch`, in milliseconds.
    #[arg(long, default_value_t = 1000, value_name = "MS")]
    pub interval: u64,
    /// Skip embeddings (BM25 and symbols only).
    #[arg(long)]
    pub no_embed: bool,
    /// Index documents only (no code parsing), as document workflows need.
    #[arg(long)]
    pub docs_only: bool,
    /// Print the summary as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Retrieval strategy presets for `trellis search`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum StrategyArg {
    /// Code: symbols (functions, classes) and other source files.
    Code,
    /// Documents: sections of docs, decision records and specifications.
    Docs,
}

/// `trellis search`.
#[derive(Debug, Args)]
pub struct SearchArgs {
    /// What to look for.
    pub query: String,
    /// Ask a retrieval source outside the index instead (`[sources]`): `web_search`,
    /// `doc_retrieval` (the documentation sites) or `cve_database` (OSV advisories affecting
    /// the workspace's lockfiles).
    #[arg(long, value_name = "NAME")]
    pub source: Option<String>,
    /// Which corpus and chunking to search.
    #[arg(long, value_enum, default_value_t = StrategyArg::Code)]
    pub strategy: StrategyArg,
    /// Token budget of the packed context.
    #[arg(long, default_value_t = 4000, value_name = "TOKENS")]
    pub budget: usize,
    /// Print the context pack as JSON.
    #[arg(long)]
    pub json: bool,
    /// BM25 only, even when embeddings exist.
    #[arg(long)]
    pub no_embed: bool,
    /// How many ranked chunks each source returns, before deduplication and the token budget
    /// (default: `index.search.limit`, 50).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub limit: Option<u32>,
    /// Test files: include, exclude or only them (default: `index.search.tests`, include).
    #[arg(long, value_enum, value_name = "WHICH")]
    pub tests: Option<TestsArg>,
    /// Also return generated and vendored files (`vendor/`, `third_party/`, `*.pb.go`, …).
    #[arg(long)]
    pub generated: bool,
    /// Also return non-code text files in code searches (stylesheets, translations,
    /// licences, certificates, data and configuration formats).
    #[arg(long)]
    pub non_code: bool,
    /// Only chunks in this language (repeatable): rust, python, javascript, typescript, tsx,
    /// go, java, c, cpp, markdown, rst, or text (files without a parser).
    #[arg(long = "lang", value_name = "LANG")]
    pub languages: Vec<String>,
    /// Only files whose path matches this glob, relative to the workspace root (repeatable).
    #[arg(long = "path", value_name = "GLOB")]
    pub paths: Vec<String>,
    /// Never files whose path matches this glob (repeatable; added to
    /// `index.search.exclude_paths`).
    #[arg(long = "exclude-path", value_name = "GLOB")]
    pub exclude_paths: Vec<String>,
}

/// `trellis search --tests`.
#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum TestsArg {
    /// Return tests like any other file.
    Include,
    /// Leave tests out.
    Exclude,
    /// Return only tests.
    Only,
}

impl SearchArgs {
    /// Applies the flags over the `index.search` settings.
    fn apply(&self, search: &mut SearchConfig) {
        if let Some(limit) = self.limit {
            search.limit = limit as usize;
        }
        if let Some(tests) = self.tests {
            search.tests = match tests {
                TestsArg::Include => TestFiles::Include,
                TestsArg::Exclude => TestFiles::Exclude,
                TestsArg::Only => TestFiles::Only,
            };
        }
        search.generated |= self.generated;
        search.non_code |= self.non_code;
        if !self.languages.is_empty() {
            search.languages = self.languages.clone();
        }
        if !self.paths.is_empty() {
            search.paths = self.paths.clone();
        }
        search
            .exclude_paths
            .extend(self.exclude_paths.iter().cloned());
    }
}

/// `trellis map`.
#[derive(Debug, Args)]
pub struct MapArgs {
    /// Files in play (personalise the ranking; repeatable).
    #[arg(long = "file", value_name = "PATH")]
    pub files: Vec<String>,
    /// Identifiers mentioned by the task (repeatable).
    #[arg(long = "mention", value_name = "IDENT")]
    pub mentions: Vec<String>,
    /// Token budget of the map.
    #[arg(long, default_value_t = 1024, value_name = "TOKENS")]
    pub budget: usize,
    /// Print JSON (ranks and text).
    #[arg(long)]
    pub json: bool,
    /// Print the AST context map (functions, classes, imports) as JSON instead.
    #[arg(long)]
    pub ast: bool,
}

/// Whether `command` is handled here (before the run store is opened).
pub fn handles(command: &Commands) -> bool {
    matches!(
        command,
        Commands::Index(_) | Commands::Search(_) | Commands::Map(_)
    )
}

/// Runs an index, search or map command.
pub fn execute(repo: &Path, overrides: &[String], command: Commands) -> anyhow::Result<ExitCode> {
    // Section `index` of the layered configuration (defaults when absent).
    let layered = crate::workspace::load_config(repo, overrides)?;
    let config: IndexConfig = layered.section_serde("index")?;
    match command {
        Commands::Search(args) if args.source.is_some() => sources::search(repo, &layered, &args),
        Commands::Index(args) => index(repo, config, &args),
        Commands::Search(args) => search(repo, config, &args),
        Commands::Map(args) => map(repo, config, &args),
        _ => Ok(ExitCode::FAILURE),
    }
}

fn report(p: Progress) {
    match p {
        Progress::Scanned { files, stale } => {
            eprintln!("scanned {files} files, {stale} new or modified");
        }
        Progress::TextIndexed { done, total } if total > 0 => {
            eprintln!("text-indexed {done}/{total} files");
        }
        Progress::TextIndexed { .. } => {}
        Progress::Searchable {
            unparsed,
            elapsed_ms,
        } => eprintln!(
            "searchable after {:.1} s (every file as text); extracting symbols of {unparsed} files",
            elapsed_ms as f64 / 1000.0
        ),
        Progress::Parsed { done, total } if total > 0 => {
            eprintln!("indexed {done}/{total} files");
        }
        Progress::Parsed { .. } => {}
        Progress::Embedded { done, total } => eprintln!("embedded {done}/{total} chunks"),
    }
}

fn summary(s: &UpdateStats, json: bool) -> anyhow::Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(s)?);
    } else {
        println!(
            "{} files ({} re-indexed, {} removed): {} symbols, {} sections, {} chunks, {} embedded — \
             {:.2} s (scan {:.2} s, parse+index {:.2} s, embed {:.2} s)",
            s.files,
            s.files_indexed,
            s.files_removed,
            s.symbols,
            s.sections,
            s.chunks,
            s.chunks_embedded,
            (s.scan_ms + s.index_ms + s.embed_ms) as f64 / 1000.0,
            s.scan_ms as f64 / 1000.0,
            s.index_ms as f64 / 1000.0,
            s.embed_ms as f64 / 1000.0,
        );
        if s.searchable_ms > 0 {
            println!(
                "searchable after {:.2} s (text pass), symbols complete after {:.2} s",
                s.searchable_ms as f64 / 1000.0,
                (s.scan_ms + s.index_ms) as f64 / 1000.0
            );
        }
    }
    Ok(())
}

fn index(repo: &Path, config: IndexConfig, args: &IndexArgs) -> anyhow::Result<ExitCode> {
    let embedder = if args.no_embed {
        None
    } else {
        embed::from_config(&config.embedding, true)?
    };
    let mut index = Index::open(repo, config)?;
    if let Some(e) = embedder {
        index.set_embedder(e);
    }
    let scope = if args.docs_only {
        Scope::Documents
    } else {
        Scope::All
    };
    let progress = |p: Progress| report(p);
    let stats = index.update(&UpdateOptions {
        scope,
        embed: !args.no_embed,
        progress: Some(&progress),
        ..UpdateOptions::default()
    })?;
    summary(&stats, args.json)?;
    if !args.watch {
        index.close_writer()?;
        return Ok(ExitCode::SUCCESS);
    }
    // Every update commits in batches, so stopping with Ctrl-C at any point is safe.
    eprintln!("watching for changes (Ctrl-C to stop)");
    loop {
        std::thread::sleep(Duration::from_millis(args.interval.max(50)));
        let stats = index.update(&UpdateOptions {
            scope,
            embed: !args.no_embed,
            ..UpdateOptions::default()
        })?;
        if stats.files_indexed + stats.files_removed > 0 {
            summary(&stats, args.json)?;
        }
    }
}

/// Whether `repo` has an index; says how to make one if not. `search` and `map` only read:
/// they never create `.trellis/index`.
fn indexed(repo: &Path) -> bool {
    let root = repo.canonicalize().unwrap_or_else(|_| repo.to_owned());
    let there = trellis_index::index_dir(&root).join("meta.db").exists();
    if !there {
        eprintln!(
            "{} is not indexed yet; run `trellis index` there first",
            root.display()
        );
    }
    there
}

fn search(repo: &Path, mut config: IndexConfig, args: &SearchArgs) -> anyhow::Result<ExitCode> {
    if args.query.trim().is_empty() {
        bail!(
            "the search query is empty; say what to look for, e.g. `trellis search \"retry backoff\"`"
        );
    }
    args.apply(&mut config.search);
    if config.search.limit == 0 {
        bail!("index.search.limit is 0; set it to at least 1 (or pass --limit N)");
    }
    // Bad globs or languages are reported before anything is opened.
    SearchFilter::new(&config.search)?;
    if !indexed(repo) {
        return Ok(ExitCode::FAILURE);
    }
    let mut index = Index::open(repo, config)?;
    if index.counts()?.files == 0 {
        eprintln!("the workspace is not indexed yet; run `trellis index` first");
        return Ok(ExitCode::FAILURE);
    }
    if !args.no_embed
        && index.has_embeddings()?
        && let Some(e) = embed::from_config(&index.config().embedding, true)?
    {
        index.set_embedder(e);
    }
    let scope = match args.strategy {
        StrategyArg::Code => RetrievalScope::code(),
        StrategyArg::Docs => RetrievalScope::docs(),
    };
    let pack = index.retrieve(&RetrievalRequest {
        query: args.query.clone(),
        scope: &scope,
        stage: None,
        budget_tokens: Some(args.budget),
        candidates: None,
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&pack)?);
        return Ok(ExitCode::SUCCESS);
    }
    for item in &pack.items {
        let a = &item.attribution;
        let what = a
            .symbol
            .as_deref()
            .or(a.section.as_deref())
            .unwrap_or(item.kind.as_str());
        println!(
            "── {}:{}-{}  {}  [{}, score {:.3}{}]",
            a.path,
            a.start_line,
            a.end_line,
            what,
            item.kind.as_str(),
            item.score,
            item.cosine
                .map(|c| format!(", cosine {c:.3}"))
                .unwrap_or_default()
        );
        println!("{}\n", item.text);
    }
    let q = &pack.query;
    if q.long {
        eprintln!(
            "long query ({} words): identifiers [{}]; paths [{}]; files [{}]; {} stack frames; {} error lines",
            q.words,
            q.identifiers.join(", "),
            q.paths.join(", "),
            q.files.join(", "),
            q.frames.len(),
            q.errors.len()
        );
    }
    if let Some(r) = &pack.rerank {
        match &r.error {
            Some(e) => eprintln!("rerank: {e}"),
            None => eprintln!(
                "reranked {} candidates with {} in {} ms",
                r.documents, r.endpoint, r.elapsed_ms
            ),
        }
    }
    let d = pack.dropped;
    eprintln!(
        "{} items, {}/{} tokens; dropped: {} duplicate, {} overlapping, {} near-duplicate, \
         {} stale, {} over budget",
        pack.items.len(),
        pack.used_tokens,
        pack.budget_tokens,
        d.duplicates,
        d.overlapping,
        d.near_duplicates,
        d.ungrounded,
        d.over_budget
    );
    Ok(ExitCode::SUCCESS)
}

fn map(repo: &Path, config: IndexConfig, args: &MapArgs) -> anyhow::Result<ExitCode> {
    if !indexed(repo) {
        return Ok(ExitCode::FAILURE);
    }
    let index = Index::open(repo, config)?;
    if args.ast {
        let map = index.ast_context_map(&args.files)?;
        println!("{}", serde_json::to_string_pretty(&map)?);
        return Ok(ExitCode::SUCCESS);
    }
    let map = index.repo_map(&RepoMapRequest {
        files_in_play: args.files.clone(),
        mentioned: args.mentions.clone(),
        budget_tokens: args.budget,
    })?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&map)?);
    } else {
        print!("{}", map.text);
    }
    Ok(ExitCode::SUCCESS)
}
