//! `trellis mcp list`: the MCP servers of `[mcp.servers]`, each started as a run would start
//! it, with its state, tools and last error.

use std::path::Path;
use std::process::ExitCode;
use std::time::Duration;

use clap::Subcommand;
use trellis_mcp::{McpConfig, McpHub, ServerState};

use crate::models::load_config;

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

/// Runs a `mcp` subcommand.
pub async fn execute(
    cmd: McpCommand,
    repo: &Path,
    overrides: &[String],
) -> anyhow::Result<ExitCode> {
    let McpCommand::List { json, tools, wait } = cmd;
    let config = load_config(repo, overrides)?;
    let mcp: McpConfig = config.section_serde("mcp")?;
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
