//! Integration tests of `trellis-llm-server`: the routes in process (`Router::oneshot`),
//! cancellation and the queue on a loopback port, Trellis's own OpenAI client against it,
//! and the two real clients (the `openai` packages from PyPI and npm).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    missing_docs,
    // Tests are exempt from the workspace's function length limit.
    clippy::too_many_lines
)]

mod suite;
