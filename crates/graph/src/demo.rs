//! Demonstration graphs.
