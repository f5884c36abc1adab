//! Trellis agents (seed 000 layers 0 and 1, seed 001 prompt structure): the agent loop
//! (model ↔ tools), roles as data files, typed stage outputs parsed with the normaliser,
//! the orchestrator and the retrieval agent.

pub mod retrieval;
pub mod usage;
