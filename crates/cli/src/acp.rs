//! `trellis acp`: parse and dispatch to `trellis-acp` (an ACP v1 agent over stdio).

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use trellis_acp::{AcpAgent, AcpOptions, OpenService};
use trellis_store::StoreOptions;

/// `trellis acp` arguments.
#[derive(Debug, clap::Args)]
pub struct AcpArgs {
    /// Run every prompt with this workflow instead of asking the orchestrator.
    #[arg(long)]
    pub workflow: Option<String>,
}

/// Serves the Agent Client Protocol on stdin/stdout until the client disconnects. With
/// `--repo DIR` the workspace is DIR; otherwise the git repository of the first session's
/// `cwd`. stdout carries the protocol only; logs go to stderr.
pub fn acp(
    args: &AcpArgs,
    repo: Option<PathBuf>,
    overrides: &[String],
    db: Option<PathBuf>,
    store_options: StoreOptions,
) -> anyhow::Result<ExitCode> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let overrides = overrides.to_vec();
    let open: OpenService = Arc::new(move |root| {
        let store =
            crate::workspace::open_store(root, &overrides, db.as_deref(), store_options, false)
                .map_err(|e| format!("{e:#}"))?;
        crate::workspace::open_service(root, &overrides, &[], store).map_err(|e| format!("{e:#}"))
    });
    let options = AcpOptions {
        workflow: args.workflow.clone(),
    };
    rt.block_on(async {
        let agent = match repo {
            Some(repo) => {
                AcpAgent::for_workspace(trellis_tools::worktree::repo_root(&repo)?, open, options)
            }
            None => AcpAgent::new(open, options),
        };
        let served = agent.serve_stdio().await;
        if let Some(service) = agent.service().await {
            service.shutdown().await;
        }
        served?;
        Ok(ExitCode::SUCCESS)
    })
}
