//! End-to-end tests of the `trellis` binary (one test binary; modules in `suite/`).
mod suite;
