//! The Trellis runtime service: one object per workspace that every front-end — the CLI,
//! `trellis serve`, `trellis acp`, `trellis mcp` — drives Trellis through. Ops go in
//! ([`service::Service::submit`]), events come out (subscriptions); the service's queries
//! answer what front-ends show, and [`service::Service::drive`] follows a run to its end
//! through a front-end's way of asking a person. [`Records`] answers the queries that need
//! only the workspace's store — the service's own answer through it — so a command that only
//! reads (`trellis runs list | show | events | usage`) needs no service.
//!
//! The runs themselves are composed by `trellis-runtime` (the workspace's [`Runtime`], the
//! stage handlers, stage tools, task tree, merges); the service owns one [`Runtime`] and no
//! front-end sees it. The items re-exported here are the few a binary needs to open a
//! workspace and the runtime's building blocks that tests and benchmarks name.

pub mod records;
pub mod service;

pub use records::Records;

pub use trellis_runtime::{
    Error, InputMode, PlanOnly, Result, RunContext, RunOptions, Runtime, changed_files, code_intel,
    discover_workflows, gateway, instructions, mcp_config, merge, nodes, now_ms, planning,
    run_input, sessions, stage_tools, stages, starter, tasktree, testcmd, toolknow, tools_config,
};
