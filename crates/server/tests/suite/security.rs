//! Token, Host and Origin refusals; the login cookie.

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use serde_json::json;

use super::common::*;

fn bare(method: &str, uri: &str) -> axum::http::request::Builder {
    Request::builder()
        .method(method)
        .uri(uri)
        .header(header::HOST, HOST)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_required_and_compared_whole() {
    let s = served();
    let app = &s.app;
    // Public: health, the web UI's page, the login route.
    let (status, _) = send(app, bare("GET", "/api/health").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = send(app, bare("GET", "/").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::OK);
    // Everything else needs the token.
    for (method, uri) in [
        ("GET", "/api/workflows"),
        ("GET", "/api/workspaces"),
        ("POST", "/api/workflows"),
        ("POST", "/ws/graph/prune/x"),
        ("GET", "/api/events"),
    ] {
        let (status, e) = send(app, bare(method, uri).body(Body::empty()).unwrap()).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{method} {uri}");
        assert_eq!(e["kind"], "unauthorized");
        assert!(!e.to_string().contains(TOKEN));
    }
    for wrong in [
        "Bearer 0123456789abcdef0123456789abcdeX",
        "Bearer 0123456789abcdef0123456789abcdef0",
        "Bearer ",
        &format!("Basic {TOKEN}"),
    ] {
        let req = bare("GET", "/api/workflows")
            .header(header::AUTHORIZATION, wrong)
            .body(Body::empty())
            .unwrap();
        let (status, _) = send(app, req).await;
        assert_eq!(status, StatusCode::UNAUTHORIZED, "{wrong}");
    }
    // The login URL sets an HttpOnly, SameSite=Strict cookie that then authenticates.
    let res = tower::ServiceExt::oneshot(
        app.clone(),
        bare("GET", &format!("/login?token={TOKEN}"))
            .body(Body::empty())
            .unwrap(),
    )
    .await
    .unwrap();
    assert!(res.status().is_redirection());
    let cookie = res.headers()[header::SET_COOKIE]
        .to_str()
        .unwrap()
        .to_owned();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    let pair = cookie.split(';').next().unwrap().to_owned();
    let req = bare("GET", "/api/workflows")
        .header(header::COOKIE, format!("theme=dark; {pair}"))
        .body(Body::empty())
        .unwrap();
    let (status, _) = send(app, req).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = send(
        app,
        bare("GET", "/login?token=nope")
            .body(Body::empty())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
    let req = bare("GET", "/api/workflows")
        .header(header::COOKIE, "trellis_token=nope")
        .body(Body::empty())
        .unwrap();
    let (status, _) = send(app, req).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn foreign_hosts_and_cross_origin_writes_are_refused() {
    let s = served();
    let app = &s.app;
    // DNS rebinding: the right token on a name the server is not served under.
    for host in ["evil.example:8420", "127.0.0.1:9999", "", "localhost"] {
        let mut req = request("GET", "/api/workflows", None);
        req.headers_mut()
            .insert(header::HOST, host.parse().unwrap());
        let (status, e) = send(app, req).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{host}: {e}");
    }
    // Cross-origin state changes are refused before anything runs; reads are not (the
    // browser keeps their answers from the foreign page).
    for origin in [
        "http://evil.example",
        "null",
        "http://127.0.0.1:8420.evil.example",
    ] {
        let mut req = request("POST", "/api/workflows", Some(json!({ "request": "x" })));
        req.headers_mut()
            .insert(header::ORIGIN, origin.parse().unwrap());
        let (status, e) = send(app, req).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{origin}: {e}");
    }
    let mut req = request("POST", "/api/workflows", Some(json!({})));
    req.headers_mut()
        .insert("sec-fetch-site", "cross-site".parse().unwrap());
    let (status, _) = send(app, req).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    // The server's own origin passes (the body is then checked: 400, not 403).
    let mut req = request("POST", "/api/workflows", Some(json!({})));
    req.headers_mut()
        .insert(header::ORIGIN, format!("http://{HOST}").parse().unwrap());
    let (status, _) = send(app, req).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    // A WebSocket upgrade from a foreign origin is refused even for a GET.
    let mut req = request("GET", "/api/events", None);
    let h = req.headers_mut();
    h.insert(header::ORIGIN, "http://evil.example".parse().unwrap());
    h.insert(header::UPGRADE, "websocket".parse().unwrap());
    h.insert(header::CONNECTION, "upgrade".parse().unwrap());
    let (status, _) = send(app, req).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[test]
fn non_loopback_binds_need_allow_remote() {
    let any: std::net::SocketAddr = "0.0.0.0:8420".parse().unwrap();
    let err = trellis_server::check_bind(any, false)
        .unwrap_err()
        .to_string();
    assert!(err.contains("--allow-remote"), "{err}");
    assert!(trellis_server::check_bind(any, true).is_ok());
    assert!(trellis_server::check_bind("127.0.0.1:0".parse().unwrap(), false).is_ok());
    assert!(trellis_server::check_bind("[::1]:0".parse().unwrap(), false).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_clients_are_cut_off() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let limits = trellis_server::Limits {
        header_timeout: std::time::Duration::from_millis(300),
        request_timeout: std::time::Duration::from_millis(1),
        ..trellis_server::Limits::default()
    };
    let (_s, addr) = listening(limits).await;
    // Headers that never end: the connection is closed.
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    tcp.write_all(b"GET /api/health HTTP/1.1\r\nHost: ")
        .await
        .unwrap();
    let mut buf = Vec::new();
    let read = tokio::time::timeout(
        std::time::Duration::from_secs(10),
        tcp.read_to_end(&mut buf),
    )
    .await
    .expect("the server kept a half-sent request open");
    assert!(read.is_ok());
    // A request over the time limit gets a 503 naming the limit.
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let body = r#"{"message": "Where is stock kept? Look at every module."}"#;
    let req = format!(
        "POST /api/channels/design/session HTTP/1.1\r\nHost: {addr}\r\nAuthorization: Bearer {TOKEN}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    tcp.write_all(req.as_bytes()).await.unwrap();
    let mut text = String::new();
    tcp.read_to_string(&mut text).await.unwrap();
    assert!(text.starts_with("HTTP/1.1 503"), "{text}");
    assert!(text.contains("\"kind\":\"timeout\""), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ui_page_is_public_and_client_routes_get_it_but_api_routes_do_not() {
    use http_body_util::BodyExt;
    let s = served();
    for uri in ["/", "/runs/0191abc", "/channels/design"] {
        let res = tower::ServiceExt::oneshot(
            s.app.clone(),
            bare("GET", uri).body(Body::empty()).unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(res.status(), StatusCode::OK, "{uri}");
        let html = String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec())
            .unwrap();
        if trellis_server::ui_embedded() {
            assert!(html.contains("<script"), "{uri}: {html}");
        } else {
            assert!(html.contains("built without the web UI"), "{uri}: {html}");
        }
    }
    // API paths never fall back to the page, and still need the token.
    let (status, e) = send(
        &s.app,
        bare("GET", "/api/nothing").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "{e}");
    let (status, e) = get(&s.app, "/api/nothing").await;
    assert_eq!(
        (status, e["error"].clone()),
        (StatusCode::NOT_FOUND, json!("no such route"))
    );
    let (status, _) = send(
        &s.app,
        bare("GET", "/assets/none.js").body(Body::empty()).unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
    let (status, _) = send(&s.app, bare("POST", "/runs/x").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bundles_are_sent_compressed_when_the_browser_accepts_it() {
    use http_body_util::BodyExt;
    use std::io::Read as _;
    if !trellis_server::ui_embedded() {
        eprintln!("this build has no web UI embedded (web/dist): nothing to compress");
        return;
    }
    let s = served();
    let fetch = |uri: String, accept: Option<&'static str>| {
        let app = s.app.clone();
        async move {
            let mut req = bare("GET", &uri);
            if let Some(a) = accept {
                req = req.header(header::ACCEPT_ENCODING, a);
            }
            let res = tower::ServiceExt::oneshot(app, req.body(Body::empty()).unwrap())
                .await
                .unwrap();
            assert_eq!(res.status(), StatusCode::OK, "{uri}");
            let coding = res
                .headers()
                .get(header::CONTENT_ENCODING)
                .map(|v| v.to_str().unwrap().to_owned());
            let vary = res
                .headers()
                .get(header::VARY)
                .map(|v| v.to_str().unwrap().to_owned());
            let body = res.into_body().collect().await.unwrap().to_bytes().to_vec();
            (coding, vary, body)
        }
    };
    let (_, _, page) = fetch("/".into(), None).await;
    let page = String::from_utf8(page).unwrap();
    let script = page
        .split('"')
        .find(|p| p.starts_with("/assets/") && p.ends_with(".js"))
        .unwrap_or_else(|| panic!("no script in the page: {page}"))
        .to_owned();

    let (coding, vary, plain) = fetch(script.clone(), None).await;
    assert_eq!(coding, None, "no Accept-Encoding: the file itself");
    assert_eq!(vary.as_deref(), Some("accept-encoding"));
    assert!(plain.len() > 10_000, "{}", plain.len());

    let (coding, _, gz) = fetch(script.clone(), Some("gzip, deflate")).await;
    assert_eq!(coding.as_deref(), Some("gzip"));
    let mut unpacked = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut unpacked)
        .unwrap();
    assert_eq!(unpacked, plain, "the gzip copy is the same file");
    assert!(
        gz.len() * 2 < plain.len(),
        "{} of {}",
        gz.len(),
        plain.len()
    );

    let (coding, _, br) = fetch(script.clone(), Some("gzip, deflate, br, zstd")).await;
    assert_eq!(coding.as_deref(), Some("br"), "Brotli is preferred");
    assert!(br.len() < gz.len(), "{} vs gzip {}", br.len(), gz.len());

    let (coding, _, _) = fetch(script, Some("br;q=0, gzip;q=0.5")).await;
    assert_eq!(coding.as_deref(), Some("gzip"), "q=0 refuses Brotli");

    let (coding, _, _) = fetch("/runs/x".into(), Some("identity")).await;
    assert_eq!(coding, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_need_the_token_and_count_a_finished_run() {
    use http_body_util::BodyExt;
    use tower::ServiceExt;

    let s = served();
    let (status, _) = send(&s.app, bare("GET", "/metrics").body(Body::empty()).unwrap()).await;
    assert_eq!(status, StatusCode::UNAUTHORIZED, "/metrics is not public");

    let run = start_run(&s.app, "Let's discuss the decision to keep stock in memory").await;
    finished(&s, &run).await;
    let mut text = String::new();
    for _ in 0..50 {
        let res = s
            .app
            .clone()
            .oneshot(request("GET", "/metrics", None))
            .await
            .unwrap();
        assert_eq!(res.status(), StatusCode::OK);
        assert!(
            res.headers()[header::CONTENT_TYPE]
                .to_str()
                .unwrap()
                .starts_with("text/plain; version=0.0.4")
        );
        text = String::from_utf8(res.into_body().collect().await.unwrap().to_bytes().to_vec())
            .unwrap();
        if text.contains("trellis_runs_total{outcome=\"succeeded\"} 1") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert!(
        text.contains("trellis_runs_total{outcome=\"succeeded\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("trellis_runs_active{status=\"running\"} 0"),
        "{text}"
    );
    assert!(
        text.lines()
            .any(|l| l.starts_with("trellis_model_calls_total{") && l.contains("outcome=\"ok\"")),
        "{text}"
    );
}
