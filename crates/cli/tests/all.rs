//! End-to-end tests of the `trellis` binary (one test binary; modules in `suite/`).
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::print_stdout,
    clippy::print_stderr,
    clippy::type_complexity,
    missing_docs,
    // Tests are exempt from the workspace's function length limit.
    clippy::too_many_lines
)]
mod suite;
