//! `trellis acp` in process: the SDK's client side drives the agent over an in-memory
//! connection, with a service over `examples/inventory` whose models play a script.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    missing_docs,
    clippy::too_many_lines
)]

mod suite {
    mod changes;
    pub mod common;
    mod ext;
    mod feature;
    mod mcp;
    mod notify;
    mod permissions;
    mod sessions;
    mod turns;
}
