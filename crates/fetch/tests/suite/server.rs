//! The loopback stub server of `trellis-test-http`, answering each request with the next
//! scripted reply.

pub use trellis_test_http::{Response, Server};

/// `200` with `body`.
pub fn ok(body: impl Into<Vec<u8>>) -> Response {
    Response::new(200, "application/octet-stream", body)
}
