//! `trellis-desktop`: the Trellis desktop client. An Iced window (software-rendered with
//! tiny-skia; wgpu behind the `wgpu` feature) that starts `trellis acp` and speaks ACP v1 to
//! it as a client: sessions, streamed answers, plans, tool calls, permissions, batched review
//! of a run's change set, the workspace's files with syntax highlighting.
//!
//! Layers: [`acp`] is the protocol client (no GUI, testable alone); [`app`] is the window's
//! state, update and view (testable with `iced_test`'s simulator); [`run()`] wires them.

pub mod acp;
pub mod app;
mod error;
mod run;

pub use error::{Error, Result};
pub use run::{Options, run};
