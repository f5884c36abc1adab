//! `trellis mcp`: the workspace's code intelligence as an MCP server on stdio; `trellis mcp
//! --gateway`: the workspace's MCP servers behind the tool-schema budget, `search_tools`,
//! `execute_dag` and speculation; `trellis mcp list`: the MCP servers of `[mcp.servers]`,
//! each started as a run would start it, with its state, tools and last error.

use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use clap::{Args, Subcommand};
use trellis_mcp::{McpHub, ServerState};

use crate::workspace::load_config;

/// `trellis mcp`.
#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct McpArgs {
    /// Without a subcommand: serve the workspace's code intelligence (search, symbols,
    /// symbol_at, repo_map, ast_context_map, doc_sections) over MCP on stdin/stdout.
    #[command(subcommand)]
    pub command: Option<McpCommand>,
    /// Serve over Streamable HTTP at http://ADDR/mcp instead of stdio (loopback addresses
    /// only; clients send the access token as `Authorization: Bearer …`).
    #[arg(long, value_name = "127.0.0.1:PORT")]
    pub http: Option<std::net::SocketAddr>,
    /// With --http: where the access token is kept (default: `trellis serve`'s,
    /// `$XDG_CONFIG_HOME/trellis/serve-token`).
    #[arg(long, value_name = "PATH", requires = "http")]
    pub token_file: Option<std::path::PathBuf>,
    /// Serve the tools of the MCP servers in `[mcp.servers]` instead: the ones that fit
    /// `tools.gateway.budget_tokens`, plus `search_tools` and `execute_dag`; every call is
    /// learned into the tool knowledge graph and predicted safe calls run ahead.
    #[arg(long)]
    pub gateway: bool,
}

/// `trellis mcp` subcommands.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Start every configured MCP server and show its state, its tools and its last error
    /// (exit 1 when one failed).
    List {
        /// Print JSON.
        #[arg(long)]
        json: bool,
        /// List every tool (name, whether it is read-only, whether agents get it).
        #[arg(long)]
        tools: bool,
        /// Seconds to wait for servers that are still starting.
        #[arg(long, default_value_t = 60.0)]
        wait: f64,
    },
}

/// Runs `trellis mcp`.
pub async fn execute(args: McpArgs, repo: &Path, overrides: &[String]) -> anyhow::Result<ExitCode> {
    let Some(McpCommand::List { json, tools, wait }) = args.command else {
        return serve(repo, overrides, &args).await;
    };
    let config = load_config(repo, overrides)?;
    let mcp = trellis_core::mcp_config(&config)?;
    let repo = trellis_tools::worktree::repo_root(repo).unwrap_or_else(|_| repo.to_path_buf());
    let hub = McpHub::new(&repo, &mcp)?;
    if hub.is_empty() {
        if json {
            println!("[]");
        } else {
            println!(
                "no MCP servers configured (add [mcp.servers.NAME] to .trellis/config.toml; see docs/mcp.md)"
            );
        }
        return Ok(ExitCode::SUCCESS);
    }
    hub.start();
    let all = hub
        .settled(Duration::try_from_secs_f64(wait).unwrap_or(Duration::from_secs(60)))
        .await;
    hub.stop(Duration::from_secs(5)).await;
    let failed = all.iter().any(|s| s.state == ServerState::Failed);
    if json {
        println!("{}", serde_json::to_string_pretty(&all)?);
    } else {
        for s in &all {
            let offered = s.tools.iter().filter(|t| t.offered).count();
            let mut line = format!("{:<16} {:<9} {}", s.name, s.state.to_string(), s.transport);
            if s.state == ServerState::Ready {
                line.push_str(&format!(
                    "\n{:<16} {offered} of {} tools offered{}{}",
                    "",
                    s.tools.len(),
                    s.server_info
                        .as_deref()
                        .map(|i| format!(" · {i}"))
                        .unwrap_or_default(),
                    s.protocol
                        .as_deref()
                        .map(|p| format!(" · protocol {p}"))
                        .unwrap_or_default()
                ));
            }
            if s.restarts > 0 {
                line.push_str(&format!(" · {} restarts", s.restarts));
            }
            println!("{line}");
            if let Some(e) = &s.last_error {
                for l in e.lines() {
                    println!("{:<16}   {l}", "");
                }
            }
            if tools {
                for t in &s.tools {
                    println!(
                        "{:<16}   {}{}{}",
                        "",
                        t.name,
                        if t.read_only { " (read-only)" } else { "" },
                        if t.offered { "" } else { " (not offered)" }
                    );
                }
            }
        }
    }
    Ok(if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

/// Serves the MCP gateway of `repo` on stdio until the client disconnects, or over HTTP
/// until SIGINT/SIGTERM (server states and logs go to stderr).
pub async fn gateway(
    args: &McpArgs,
    repo: &Path,
    overrides: &[String],
    store: impl FnOnce() -> anyhow::Result<Arc<trellis_store::Store>>,
) -> anyhow::Result<ExitCode> {
    // Before the store is created: a workspace without servers gets nothing.
    let mcp = trellis_core::mcp_config(&load_config(repo, overrides)?)?;
    if mcp.servers.is_empty() {
        anyhow::bail!(trellis_core::gateway::NO_SERVERS);
    }
    let gateway = trellis_core::gateway::Gateway::open(repo, overrides, store()?)?;
    let gateway = Arc::new(gateway);
    gateway.start().await;
    for line in gateway.status_lines() {
        eprintln!("trellis mcp --gateway: {line}");
    }
    let served = match args.http {
        None => trellis_mcp_server::serve_gateway_stdio(&gateway)
            .await
            .map_err(anyhow::Error::from),
        Some(addr) => {
            let g = gateway.clone();
            serve_http(addr, args, move |listener, authorize, stop| {
                trellis_mcp_server::serve_gateway_http(g, listener, authorize, stop)
            })
            .await
        }
    };
    gateway.stop(Duration::from_secs(5)).await;
    served?;
    Ok(ExitCode::SUCCESS)
}

/// Serves the code intelligence of `repo` on stdio until the client disconnects (only MCP
/// goes to stdout; progress and logs go to stderr), or over HTTP until SIGINT/SIGTERM.
async fn serve(repo: &Path, overrides: &[String], args: &McpArgs) -> anyhow::Result<ExitCode> {
    let root = trellis_tools::worktree::repo_root(repo).unwrap_or_else(|_| repo.to_path_buf());
    let layered = load_config(repo, overrides)?;
    let config: trellis_index::IndexConfig = layered.section_serde("index")?;
    let lsp: trellis_lsp::LspConfig = layered.section_serde("lsp")?;
    let Some(addr) = args.http else {
        eprintln!("trellis mcp: serving {} on stdio", root.display());
        let server = trellis_mcp_server::CodeServer::open(&root, config, &lsp)?;
        trellis_mcp_server::serve_stdio(server).await?;
        return Ok(ExitCode::SUCCESS);
    };
    serve_http(addr, args, move |listener, authorize, stop| async move {
        let server = trellis_mcp_server::CodeServer::open(&root, config, &lsp)?;
        trellis_mcp_server::serve_http(server, listener, authorize, stop).await
    })
    .await?;
    Ok(ExitCode::SUCCESS)
}

/// `--http ADDR`: binds the loopback address, loads (or creates) the token, prints the
/// address, and runs `serve` until SIGINT/SIGTERM.
async fn serve_http<F, Fut>(
    addr: std::net::SocketAddr,
    args: &McpArgs,
    serve: F,
) -> anyhow::Result<()>
where
    F: FnOnce(
        tokio::net::TcpListener,
        trellis_mcp_server::Authorize,
        tokio_util::sync::CancellationToken,
    ) -> Fut,
    Fut: std::future::Future<Output = Result<(), trellis_mcp_server::Error>>,
{
    if !addr.ip().is_loopback() {
        anyhow::bail!(
            "--http {addr}: trellis mcp listens on loopback addresses only (127.0.0.1, ::1)"
        );
    }
    let token_path = match &args.token_file {
        Some(p) => p.clone(),
        None => trellis_server::TokenFile::default_path()?,
    };
    let token = trellis_server::TokenFile::load_or_create(&token_path)?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| anyhow::anyhow!("--http {addr}: {e}"))?;
    let bound = listener.local_addr()?;
    println!("listening on http://{bound}/mcp");
    if token.created {
        eprintln!(
            "new access token saved to {} (shown once): {}",
            token.path.display(),
            token.token.expose()
        );
    } else {
        eprintln!(
            "access token: in {} (send it as Authorization: Bearer <token>)",
            token.path.display()
        );
    }
    let stop = tokio_util::sync::CancellationToken::new();
    let on_signal = stop.clone();
    tokio::spawn(async move {
        let mut term =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).ok();
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            () = async { match term.as_mut() { Some(t) => { t.recv().await; } None => std::future::pending().await } } => {}
        }
        on_signal.cancel();
    });
    let secret = token.token;
    serve(
        listener,
        Arc::new(move |given: &str| secret.matches(given)),
        stop,
    )
    .await?;
    Ok(())
}
