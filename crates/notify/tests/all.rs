//! Integration tests of trellis-notify (one binary; modules in `suite/`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod suite;
