//! Serving over Streamable HTTP, loopback only, with a bearer token and Host/Origin checks.

use std::sync::Arc;

use rmcp::ServerHandler;

use crate::{CodeServer, Error};

/// Decides whether a bearer token is the right one (constant time, by the caller's token).
pub type Authorize = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// Serves `server` over Streamable HTTP at `/mcp` on `listener` (a loopback address) until
/// `shutdown`: every request needs `Authorization: Bearer <token>` (`authorize`), a `Host`
/// naming this loopback port, and, when it has an `Origin`, this server's own origin
/// (DNS-rebinding and cross-site requests are refused).
pub async fn serve_http(
    server: CodeServer,
    listener: tokio::net::TcpListener,
    authorize: Authorize,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<(), Error> {
    serve_http_with(move || server.clone(), listener, authorize, shutdown).await
}

/// [`serve_http`] for any handler: `session` makes the handler of each new MCP session.
pub async fn serve_http_with<S, F>(
    session: F,
    listener: tokio::net::TcpListener,
    authorize: Authorize,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<(), Error>
where
    S: ServerHandler + Send + 'static,
    F: Fn() -> S + Send + Sync + 'static,
{
    use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    let port = listener
        .local_addr()
        .map_err(|e| Error::Mcp(e.to_string()))?
        .port();
    let hosts = [
        format!("127.0.0.1:{port}"),
        format!("localhost:{port}"),
        format!("[::1]:{port}"),
    ];
    let origins = [
        format!("http://127.0.0.1:{port}"),
        format!("http://localhost:{port}"),
        format!("http://[::1]:{port}"),
    ];
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(hosts)
        .with_allowed_origins(origins)
        .with_cancellation_token(shutdown.child_token());
    let service: StreamableHttpService<S, LocalSessionManager> = StreamableHttpService::new(
        move || Ok(session()),
        Arc::new(LocalSessionManager::default()),
        config,
    );
    let router =
        axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn(
                move |req: axum::extract::Request, next: axum::middleware::Next| {
                    let authorize = authorize.clone();
                    async move {
                        let given = req
                            .headers()
                            .get(axum::http::header::AUTHORIZATION)
                            .and_then(|v| v.to_str().ok())
                            .and_then(|v| v.strip_prefix("Bearer "))
                            .unwrap_or_default();
                        if given.is_empty() || !authorize(given) {
                            return axum::response::IntoResponse::into_response((
                                axum::http::StatusCode::UNAUTHORIZED,
                                [(axum::http::header::WWW_AUTHENTICATE, "Bearer")],
                                "a bearer token is needed: the one in trellis's serve-token file",
                            ));
                        }
                        next.run(req).await
                    }
                },
            ));
    axum::serve(listener, router)
        .with_graceful_shutdown(async move { shutdown.cancelled().await })
        .await
        .map_err(|e| Error::Mcp(e.to_string()))
}
