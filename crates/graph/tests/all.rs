//! Integration tests of the graph engine (one binary; modules in `suite/`).
mod suite;
