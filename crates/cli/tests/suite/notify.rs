//! `[notify]` webhooks from a real `trellis run` (the loopback OpenAI mock): the run's end
//! POSTed to a loopback receiver, and a webhook nobody listens on told once on stderr while
//! the run finishes as usual.

use serde_json::json;

use super::common::*;
use super::mock::*;

/// The mock's configuration with `[notify]` webhooks.
fn notifying_config(url: &str, webhooks: &str) -> String {
    format!("{}\n[notify]\n{webhooks}\n", mock_config(url))
}

fn reading_agent() -> (Wire, Seen) {
    serve(scripted_agent(vec![(
        "call_1",
        "read_file",
        json!({ "path": "inventory.py" }),
    )]))
}

#[test]
fn a_finished_run_is_posted_to_the_webhook() {
    let receiver =
        trellis_test_http::Server::concurrent(|_| trellis_test_http::Response::json("{}"));
    let (url, _seen) = reading_agent();
    let hook = format!(
        "[[notify.webhooks]]\nurl = \"{}/trellis\"\nevents = [\"finished\", \"failed\"]\n",
        receiver.url()
    );
    let ws =
        trellis_test_support::example_repo("inventory", &notifying_config(&url, &hook)).unwrap();
    let out = discuss(
        &ws,
        "Let's discuss the decision to keep stock in memory",
        &["--no-input", "--no-review"],
    );
    let run = run_id(&out);
    let posts = receiver.requests();
    assert_eq!(posts.len(), 1, "one notification, the run's end: {posts:?}");
    let body = posts[0].json();
    assert_eq!(posts[0].target, "/trellis");
    assert_eq!(posts[0].header("x-trellis-event"), Some("finished"));
    assert_eq!(body["event"], "finished", "{body}");
    assert_eq!(body["outcome"], "succeeded", "{body}");
    assert_eq!(body["workflow"], "architecture_discussion", "{body}");
    assert!(
        run.starts_with(body["run"].as_str().unwrap_or("-"))
            || body["run"].as_str().unwrap_or("-").starts_with(&run),
        "{body} vs {run}"
    );
    assert!(
        body["timestamp"].as_str().is_some_and(|t| t.ends_with('Z')),
        "{body}"
    );
    assert!(posts[0].header("x-trellis-signature-256").is_none());
}

#[test]
fn an_unreachable_webhook_is_told_once_and_the_run_finishes() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (url, _seen) = reading_agent();
    let hook = format!(
        "[[notify.webhooks]]\nurl = \"http://127.0.0.1:{port}/hook\"\nattempts = 2\nbackoff_ms = 50\n"
    );
    let ws =
        trellis_test_support::example_repo("inventory", &notifying_config(&url, &hook)).unwrap();
    let out = args(
        isolated(ws.path()),
        &[
            "run",
            "Let's discuss the decision to keep stock in memory",
            "--workflow",
            "architecture_discussion",
            "--no-input",
            "--no-review",
        ],
    )
    .output()
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the run finishes: {stderr}");
    let told: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("notify.webhooks[0]"))
        .collect();
    assert_eq!(told.len(), 1, "told once: {stderr}");
    assert!(told[0].contains("2 attempts failed"), "{stderr}");
}

#[test]
fn trellis_serve_links_its_notifications_to_the_run_in_the_web_ui() {
    use std::time::Instant;

    use super::serve::{PATIENCE, Server, read_token};

    let receiver =
        trellis_test_http::Server::concurrent(|_| trellis_test_http::Response::json("{}"));
    let (url, _seen) = reading_agent();
    let hook = format!(
        "[[notify.webhooks]]\nurl = \"{}/trellis\"\nevents = [\"finished\"]\n",
        receiver.url()
    );
    let ws =
        trellis_test_support::example_repo("inventory", &notifying_config(&url, &hook)).unwrap();
    let home = tempfile::tempdir().unwrap();
    let token_file = home.path().join("cfg/serve-token");
    let server = Server::start(ws.path(), home.path(), &token_file, &[]);
    let run = server.start_discussion(&read_token(&token_file));
    let deadline = Instant::now() + PATIENCE;
    while receiver.requests().is_empty() {
        assert!(
            Instant::now() < deadline,
            "no notification; stderr:\n{}",
            server.stderr_text()
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let body = receiver.requests()[0].json();
    assert_eq!(body["run"], run.as_str(), "{body}");
    assert_eq!(
        body["url"],
        format!("http://127.0.0.1:{}/#/runs/{run}", server.port),
        "{body}"
    );
}
