//! Tool DAGs (docs/tools.md): a plan of tool invocations becomes a DAG whose edges are
//! the data dependencies detected from the tools' JSON Schemas and the references between
//! steps; it runs in topological layers, the independent calls of a layer at the same time,
//! each output wired into its dependents' arguments.
//!
//! - [`schema`] reads a tool's parameters and outputs (names, JSON types, required flags).
//! - [`build()`] detects the dependencies and computes the layers, refusing a cycle by
//!   naming it.
//! - [`Runner`] executes a DAG through the [`crate::Registry`], reporting [`DagEvent`]s;
//!   [`call_parallel`] runs a batch of independent calls (the agent loop's parallel tool
//!   calls).
//! - [`plan`] is the `execute_dag` and `replan_dag` tools (the agents' and the MCP
//!   gateway's): a plan's arguments in, its report out, paused and resumed through
//!   [`exec`]'s checkpoints.
//!
//! See `docs/tools.md` ("Tool DAGs") for the rules.

pub mod build;
pub mod exec;
pub mod plan;
pub mod refs;
pub mod run;
pub mod schema;

pub use build::{
    Binding, Catalog, Dag, DagEdge, DagError, DagNode, EdgeKind, Step, build, given_earlier,
};
pub use exec::{
    Checkpoints, Decision, Execution, MemoryCheckpoints, StepResult, StepStatus, StoreCheckpoints,
};
pub use plan::{
    EXECUTE_DAG, ExecuteDagInput, Outcome, PlanReport, REPLAN_DAG, ReplanDagInput,
    execute_dag_description, replan_dag_description,
};
pub use refs::StepOutput;
pub use run::{DagEvent, Deferring, ParallelCall, Progress, Runner, Stop, call_parallel};
