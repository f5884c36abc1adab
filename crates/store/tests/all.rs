//! Integration tests of the store (one binary; modules in `suite/`).

mod suite {
    mod atomicity;
    mod claims;
    mod fixtures;
    mod group_commit;
    mod inbox;
    mod migrations;
    mod roundtrip;
    mod runs;
    mod size;
}
