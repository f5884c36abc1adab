//! The Trellis graph engine.
//!
//! It runs nodes and routes on their outcomes; it knows nothing about models, tools or git.
pub mod journal;

pub use journal::{Batch, Commit, Durability, Journal, JournalError, MemoryJournal, NullJournal, RunSummary};
