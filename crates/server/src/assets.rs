//! The embedded web UI (`web/dist`, see `build.rs`): `/` and client-side routes answer
//! `index.html`, `/assets/…` the hashed bundles (cached for a year), each as the Brotli or
//! gzip copy made at build time when the request accepts one. A binary built without the UI
//! answers `/` with how to build it.

use axum::extract::Path;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{Html, IntoResponse, Response};

include!(concat!(env!("OUT_DIR"), "/web_assets.rs"));

/// Whether this binary carries the UI.
pub fn embedded() -> bool {
    !ASSETS.is_empty()
}

fn find(path: &str) -> Option<&'static [u8]> {
    ASSETS.iter().find(|(p, _)| *p == path).map(|(_, b)| *b)
}

/// The encodings a request accepts, from `Accept-Encoding` (`br;q=0` refuses one).
fn accepts(headers: &HeaderMap, coding: &str) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|item| {
            let mut parts = item.split(';').map(str::trim);
            let name = parts.next().unwrap_or_default();
            let q_zero = parts.any(|p| {
                p.strip_prefix("q=")
                    .and_then(|q| q.parse::<f32>().ok())
                    .is_some_and(|q| q <= 0.0)
            });
            name.eq_ignore_ascii_case(coding) && !q_zero
        })
}

/// A file of the build as the client can best take it: the Brotli or gzip copy that
/// `web/scripts/compress.mjs` made next to it, else the file itself.
fn respond(path: &str, headers: &HeaderMap, cache: &'static str) -> Option<Response> {
    let plain = find(path)?;
    let mut out = HeaderMap::new();
    out.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(path)),
    );
    out.insert(header::CACHE_CONTROL, HeaderValue::from_static(cache));
    let mut body = plain;
    for (coding, ext) in [("br", "br"), ("gzip", "gz")] {
        let Some(packed) = find(&format!("{path}.{ext}")) else {
            continue;
        };
        // A cache must not give the compressed copy to a client that cannot read it.
        out.insert(header::VARY, HeaderValue::from_static("accept-encoding"));
        if accepts(headers, coding) {
            out.insert(header::CONTENT_ENCODING, HeaderValue::from_static(coding));
            body = packed;
            break;
        }
    }
    Some((out, body).into_response())
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
pub(crate) async fn index(headers: HeaderMap) -> Response {
    respond("index.html", &headers, "no-cache").unwrap_or_else(|| Html(NOT_BUILT).into_response())
}

/// `GET /assets/{*path}`: a bundle, by its hashed name.
pub(crate) async fn asset(Path(path): Path<String>, headers: HeaderMap) -> Response {
    respond(
        &format!("assets/{path}"),
        &headers,
        "public, max-age=31536000, immutable",
    )
    .unwrap_or_else(|| (StatusCode::NOT_FOUND, "no such asset").into_response())
}

/// Other files at the top of `web/dist` (`favicon.svg`…).
pub(crate) fn top_level(path: &str, headers: &HeaderMap) -> Option<Response> {
    let name = path.strip_prefix('/')?;
    if name.contains('/') || name.is_empty() {
        return None;
    }
    respond(name, headers, "no-cache")
}
