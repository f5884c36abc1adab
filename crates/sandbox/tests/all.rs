//! trellis-sandbox's integration tests: escapes refused under both backends (and shown to
//! succeed without the sandbox, so the tests can fail), and normal work still passing.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    missing_docs,
    clippy::too_many_lines
)]

mod suite;
