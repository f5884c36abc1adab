//! trellis-desktop's integration tests: the ACP client layer and the window (iced_test's
//! simulator, tiny-skia) against a scripted ACP agent and against the real agent in process,
//! child processes, and the real binary in a window on Xvfb.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    clippy::too_many_lines
)]

mod suite;
