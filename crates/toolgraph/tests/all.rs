//! Integration tests of the tool graph (one binary; modules in `suite/`).

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod suite {
    mod fixtures;
    mod learning;
    mod metrics;
    mod search;
    mod suggest;
    mod thresholds;
}
