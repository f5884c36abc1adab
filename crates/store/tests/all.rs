//! Integration tests of the store (one binary; modules in `suite/`).

// Helpers outside `#[test]` functions panic on setup failures too.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::too_many_lines)]

mod suite {
    // First: the `both!` macro the domain modules use.
    #[macro_use]
    mod backends;
    // Then `two!` and the run journal's test helpers.
    #[macro_use]
    mod run_support;
    mod artifacts;
    mod atomicity;
    mod claims;
    mod client_sessions;
    mod dag_checkpoints;
    mod domains;
    mod fixtures;
    mod group_commit;
    mod inbox;
    mod journal;
    mod migrations;
    #[cfg(feature = "postgres")]
    mod pg_connect;
    #[cfg(feature = "postgres")]
    mod pg_crud;
    #[cfg(feature = "postgres")]
    mod pg_exec;
    #[cfg(feature = "postgres")]
    mod pg_leases;
    #[cfg(feature = "postgres")]
    mod pg_notify;
    #[cfg(feature = "postgres")]
    mod pg_runs;
    #[cfg(feature = "postgres")]
    mod pg_schema;
    #[cfg(feature = "postgres")]
    mod pg_streams;
    #[cfg(feature = "postgres")]
    mod pg_support;
    mod review;
    mod roundtrip;
    mod runs;
    mod sessions;
    mod size;
    mod stream_prop;
    mod stream_speed;
    mod streams;
    mod toolgraph;
    mod usage;
}
