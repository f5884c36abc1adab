//! The embedded web UI (`web/dist`, see `build.rs`): `/` and client-side routes answer
//! `index.html`, `/assets/…` the hashed bundles (cached for a year). A binary built without
//! the UI answers `/` with how to build it.

use axum::extract::Path;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

include!(concat!(env!("OUT_DIR"), "/web_assets.rs"));

/// Whether this binary carries the UI.
pub fn embedded() -> bool {
    !ASSETS.is_empty()
}

fn find(path: &str) -> Option<&'static [u8]> {
    ASSETS.iter().find(|(p, _)| *p == path).map(|(_, b)| *b)
}

fn content_type(path: &str) -> &'static str {
    match path.rsplit('.').next().unwrap_or_default() {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "text/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" | "map" => "application/json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "woff2" => "font/woff2",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

const NOT_BUILT: &str = "<!doctype html><html lang=en><meta charset=utf-8>\
<title>Trellis</title><main><h1>Trellis</h1>\
<p>This <code>trellis</code> binary was built without the web UI.</p>\
<p>Build it with <code>scripts/setup</code> (or <code>npm ci &amp;&amp; npm run build</code> in \
<code>web/</code>), then rebuild <code>trellis</code>. The API works without it: see \
<code>docs/api.md</code>.</p></main></html>";

/// `GET /` and client-side routes: the app's page.
pub(crate) async fn index() -> Response {
    match find("index.html") {
        Some(page) => (
            [
                (header::CONTENT_TYPE, "text/html; charset=utf-8"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            page,
        )
            .into_response(),
        None => Html(NOT_BUILT).into_response(),
    }
}

/// `GET /assets/{*path}`: a bundle, by its hashed name.
pub(crate) async fn asset(Path(path): Path<String>) -> Response {
    let full = format!("assets/{path}");
    match find(&full) {
        Some(bytes) => (
            [
                (header::CONTENT_TYPE, content_type(&full)),
                (header::CACHE_CONTROL, "public, max-age=31536000, immutable"),
            ],
            bytes,
        )
            .into_response(),
        None => (StatusCode::NOT_FOUND, "no such asset").into_response(),
    }
}

/// Other files at the top of `web/dist` (`favicon.svg`…).
pub(crate) fn top_level(path: &str) -> Option<Response> {
    let name = path.strip_prefix('/')?;
    if name.contains('/') || name.is_empty() {
        return None;
    }
    let bytes = find(name)?;
    Some(([(header::CONTENT_TYPE, content_type(name))], bytes).into_response())
}
