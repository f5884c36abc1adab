//! `trellis serve`: opens each workspace's service and hands them to `trellis-server`.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use trellis_core::service::{Dispatch, ServiceOptions};
use trellis_server::{AppState, Limits, Settings, TokenFile, Workspace};
use trellis_store::StoreOptions;

/// `trellis serve` options.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address to listen on; port 0 picks a free one (printed at start).
    #[arg(long, default_value = "127.0.0.1:8420", value_name = "ADDR:PORT")]
    pub bind: SocketAddr,
    /// Who may reach the server.
    #[command(flatten)]
    pub reach: Reach,
    /// Where the access token is kept (default `$XDG_CONFIG_HOME/trellis/serve-token`, or
    /// `~/.config/trellis/serve-token`).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Do not resume the runs a previous server left running (crash, kill, stop).
    #[arg(long)]
    pub no_resume: bool,
    /// Execute no runs here: runs started, answered or steered through this server are
    /// handed to `trellis worker` processes through the workspace's PostgreSQL store
    /// (`[store] url`; docs/deploy.md). Any number of such servers can share one database.
    #[arg(long)]
    pub workers: bool,
    /// Largest request body, in bytes.
    #[arg(long, default_value_t = 1 << 20, value_name = "BYTES")]
    pub max_body: usize,
}

/// Who may reach a local HTTP server (`trellis serve`, `trellis models serve`).
#[derive(Debug, Args)]
pub struct Reach {
    /// Accept a non-loopback address (clients still need the token; put TLS in front).
    #[arg(long)]
    pub allow_remote: bool,
    /// Another `Host` header value to accept (a name the server is reached by, with the
    /// port: `trellis.lan:8420`); repeatable.
    #[arg(long, value_name = "HOST:PORT")]
    pub allow_host: Vec<String>,
}

/// Runs the server until SIGINT or SIGTERM.
pub fn serve(
    args: &ServeArgs,
    repos: &[PathBuf],
    overrides: &[String],
    store_options: StoreOptions,
) -> anyhow::Result<ExitCode> {
    trellis_server::check_bind(args.bind, args.reach.allow_remote)?;
    let roots: Vec<PathBuf> = if repos.is_empty() {
        vec![PathBuf::from(".")]
    } else {
        repos.to_vec()
    };
    let mut canonical = Vec::new();
    for r in &roots {
        let root = trellis_tools::worktree::repo_root(r)
            .with_context(|| format!("--repo {}", r.display()))?;
        if canonical.contains(&root) {
            bail!("--repo {} is given twice", root.display());
        }
        canonical.push(root);
    }
    let token_path = match &args.token_file {
        Some(p) => p.clone(),
        None => TokenFile::default_path()?,
    };
    let token = TokenFile::load_or_create(&token_path)?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let ids = trellis_server::workspace_ids(&canonical);
        let mut workspaces = Vec::new();
        for (id, root) in ids.into_iter().zip(canonical) {
            let store = crate::workspace::open_store(&root, overrides, None, store_options, false)
                .with_context(|| format!("workspace {}", root.display()))?;
            let workers = args.workers || crate::workspace::runs_on_workers(&root, overrides)?;
            let options = ServiceOptions {
                dispatch: if workers {
                    Dispatch::Workers
                } else {
                    Dispatch::Here
                },
                ..ServiceOptions::default()
            };
            let service =
                crate::workspace::open_service_with(&root, overrides, &[], store, options)?;
            workspaces.push(Workspace { id, root, service });
        }
        let listener = tokio::net::TcpListener::bind(args.bind)
            .await
            .with_context(|| format!("cannot listen on {}", args.bind))?;
        let addr = listener.local_addr()?;
        let settings = Settings {
            token: token.token.clone(),
            allowed_hosts: trellis_server::served_hosts(addr, &args.reach.allow_host),
            limits: Limits {
                body_bytes: args.max_body,
                ..Limits::default()
            },
        };
        let names: Vec<String> = workspaces
            .iter()
            .map(|w| format!("{} ({})", w.id, w.root.display()))
            .collect();
        let state = AppState::new(workspaces, settings)?;
        for w in state.workspaces() {
            let config = crate::workspace::load_config(&w.root, overrides)?;
            state
                .metrics()
                .set_prices(crate::telemetry::prices(&config));
        }
        let base = format!("http://{addr}");
        crate::notify::serving(&base);
        let mut banner = vec![
            format!("listening on {base}"),
            format!("workspaces: {}", names.join(", ")),
        ];
        if token.created {
            banner.push(format!(
                "new access token saved to {} (shown once):\n  login: {base}/login?token={}",
                token.path.display(),
                token.token.expose()
            ));
        } else {
            banner.push(format!(
                "access token: in {} (login: {base}/login?token=<that token>)",
                token.path.display()
            ));
        }
        banner.push(format!(
            "API: curl -H \"Authorization: Bearer $(cat {})\" {base}/api/workflows",
            token.path.display()
        ));
        crate::display::announce(&banner);
        // Before accepting requests (they queue on the bound listener), so that a client
        // never sees a run of a dead server as live-but-stalled.
        if !args.no_resume && !args.workers {
            for (ws, run, result) in state.resume_interrupted().await {
                match result {
                    Ok(()) => crate::display::announce(&[format!("resumed run {run} ({ws})")]),
                    Err(e) => eprintln!("cannot resume run {run} ({ws}): {e}"),
                }
            }
        }
        trellis_server::serve(listener, state, shutdown_signal()).await?;
        crate::telemetry::flush().await;
        crate::notify::flush().await;
        if args.workers {
            eprintln!("stopped");
        } else {
            eprintln!("stopped; live runs are resumable (`trellis runs resume RUN`)");
        }
        Ok(ExitCode::SUCCESS)
    })
}

/// SIGINT or SIGTERM.
pub(crate) async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
