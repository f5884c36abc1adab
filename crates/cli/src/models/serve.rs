//! `trellis models serve`: loads a profile's model and hands it to `trellis-llm-server`.

use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use clap::Args;
use trellis_llm::ModelRegistry;
use trellis_llm_server::{AppState, Limits, ServedModel, Settings, TokenFile};

/// `trellis models serve` options.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The profile to serve (see `trellis models list`).
    #[arg(long, default_value = "local")]
    pub profile: String,
    /// Address to listen on: loopback unless --allow-remote.
    #[arg(long, default_value = "127.0.0.1")]
    pub host: IpAddr,
    /// Port; 0 picks a free one (printed at start).
    #[arg(long, default_value_t = 8421)]
    pub port: u16,
    /// Who may reach the server (as for `trellis serve`).
    #[command(flatten)]
    pub reach: crate::serve::Reach,
    /// Where the access token is kept (default `$XDG_CONFIG_HOME/trellis/models-token`, or
    /// `~/.config/trellis/models-token`).
    #[arg(long, value_name = "PATH")]
    pub token_file: Option<PathBuf>,
    /// Requests the model generates for at once; the others wait in one queue, first come
    /// first served.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub parallel: usize,
    /// Requests that may wait; one more is answered 503 (clients retry).
    #[arg(long, default_value_t = 64, value_name = "N")]
    pub queue: usize,
}

/// Serves until SIGINT or SIGTERM; a line per request on stderr.
pub async fn serve(args: &ServeArgs, registry: &ModelRegistry) -> anyhow::Result<ExitCode> {
    let addr = SocketAddr::new(args.host, args.port);
    trellis_llm_server::check_bind(addr, args.reach.allow_remote)?;
    let token_path = match &args.token_file {
        Some(p) => p.clone(),
        None => TokenFile::config_path("models-token")?,
    };
    let token = TokenFile::load_or_create(&token_path)?;
    let provider = registry.provider(&args.profile)?;
    let info = provider.info().clone();
    eprintln!("loading profile `{}` ({})…", args.profile, info.model);
    let started = Instant::now();
    provider
        .prepare()
        .await
        .with_context(|| format!("loading profile `{}`", args.profile))?;
    eprintln!("loaded in {:.1} s", started.elapsed().as_secs_f64());
    // A remote profile's window is asked of its server now, so that `/v1/models` tells
    // clients the real one (the provider's info holds it from here on).
    let window = provider.context_window().await;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener.local_addr()?;
    let settings = Settings {
        token: token.token.clone(),
        allowed_hosts: trellis_llm_server::served_hosts(bound, &args.reach.allow_host),
        limits: Limits {
            parallel: args.parallel.max(1),
            queue: args.queue,
            ..Limits::default()
        },
        log: Some(Arc::new(|record| eprintln!("{record}"))),
    };
    let model = ServedModel::new(provider);
    let base = format!("http://{bound}/v1");
    let window = window.map_or_else(String::new, |w| format!(", context {} tokens", w.tokens));
    let mut banner = vec![format!(
        "serving `{}` ({}{window}) at {base}",
        model.id, info.model
    )];
    if token.created {
        banner.push(format!(
            "new access token saved to {} (shown once): {}",
            token.path.display(),
            token.token.expose()
        ));
    } else {
        banner.push(format!("access token: in {}", token.path.display()));
    }
    banner.push(format!(
        "try: curl -H \"Authorization: Bearer $(cat {})\" {base}/models",
        token.path.display()
    ));
    banner.push(format!(
        "OpenAI clients: base URL {base}, API key: the token, model `{}`",
        model.id
    ));
    crate::display::announce(&banner);
    let state = AppState::new(model, settings);
    trellis_llm_server::serve(listener, state, crate::serve::shutdown_signal()).await?;
    eprintln!("stopped");
    Ok(ExitCode::SUCCESS)
}
