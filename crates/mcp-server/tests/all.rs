//! Integration tests of `trellis-mcp-server`: an MCP client (rmcp) in the same process over
//! an in-memory pipe, against the example repository's index.
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
