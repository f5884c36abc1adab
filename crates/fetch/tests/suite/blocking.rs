//! The blocking bridge: requests from synchronous code, also inside a tokio runtime.

use std::time::Duration;

use trellis_fetch::{Blocking, client};

use super::server::{Server, ok};

async fn get(client: reqwest::Client, url: String) -> (u16, String) {
    let r = client.get(&url).send().await.unwrap();
    let status = r.status().as_u16();
    (status, r.text().await.unwrap())
}

#[test]
fn runs_requests_for_synchronous_callers() {
    let server = Server::scripted(vec![ok("one"), ok("two")]);
    let blocking = Blocking::new().unwrap();
    let c = client(Duration::from_secs(5), None).unwrap();
    for want in ["one", "two"] {
        let got = blocking
            .run(get(c.clone(), format!("{}/x", server.url())))
            .unwrap();
        assert_eq!(got, (200, want.to_owned()));
    }
}

/// reqwest's own blocking client panics here (in debug builds): a synchronous embedder
/// called from an agent's async task must not.
#[tokio::test]
async fn works_inside_an_async_runtime_and_drops_there() {
    let server = Server::scripted(vec![ok("inside")]);
    let blocking = Blocking::new().unwrap();
    let c = client(Duration::from_secs(5), None).unwrap();
    let got = blocking.run(get(c, format!("{}/y", server.url()))).unwrap();
    assert_eq!(got.1, "inside");
    drop(blocking);
}
