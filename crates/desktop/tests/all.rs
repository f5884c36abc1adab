//! trellis-desktop's integration tests: the ACP client layer and the window (iced_test's
//! simulator, tiny-skia) against a scripted ACP agent, and a real child process.

#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod suite;
