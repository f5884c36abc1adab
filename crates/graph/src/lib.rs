//! The Trellis graph engine.
//!
//! One engine runs every workflow. A [`Graph`] is a set of nodes (async handlers), edges
//! (unconditional, binary success/failure, or decided by a deterministic [`Router`]), an
//! entry point and terminal nodes, plus named state channels merged by [`Reducer`]s.
//!
//! By default execution proceeds in steps: every READY activation of a step runs concurrently
//! (up to the graph's concurrency limit); when all have finished, their writes are merged in
//! node declaration order — never in completion order — so state is deterministic; then
//! routing creates the next step's activations. A graph may choose free-running scheduling
//! ([`Scheduling::Free`]): successors start as soon as their predecessor completes, each batch
//! of completions being a step of its own in the log. Node activations follow a checked state
//! machine ([`NodeState`](trellis_protocol::NodeState), drawn in `docs/engine.md`); every
//! change is an [`Event`](trellis_protocol::Event) recorded in a [`Journal`] before it is
//! published.
//!
//! It knows nothing about models, tools or git.

pub mod demo;
mod engine;
mod error;
mod handler;
pub mod journal;
mod outcome;
mod policy;
mod spec;
mod state;

pub use engine::{Engine, EngineConfig, RunCommands, RunHandle, RunStopper};
pub use error::{Error, Result};
pub use handler::{
    Aggregate, Attempts, ChildResult, Mailbox, NodeContext, NodeError, NodeHandler, NodeOutput,
    Resume, RouteContext,
};
pub use journal::{
    Batch, Commit, Durability, Journal, JournalError, MemoryJournal, NullJournal, RunSummary,
};
pub use outcome::{NodeView, RunOutcome, wire};
pub use policy::FailurePolicy;
pub use spec::{
    Continuation, DEFAULT_CONCURRENCY, DEFAULT_MAX_STEPS, Edge, Graph, GraphBuilder, Next, NodeDef,
    NodeKind, NodeOptions, Router, Scheduling, nearest,
};
pub use state::{ReduceFn, Reducer, State};
