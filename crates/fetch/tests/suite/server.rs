//! The loopback stub server of `trellis-test-http`, answering each request with the next
//! scripted reply.

pub use trellis_test_http::{Response, Server};

/// `200` with `body`.
pub fn ok(body: impl Into<Vec<u8>>) -> Response {
    Response::new(200, "application/octet-stream", body)
}

/// The file names in `dir`, sorted (what a fetch left behind).
pub fn names(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}
