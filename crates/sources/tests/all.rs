//! Integration tests of trellis-sources.
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
