//! trellis-sandbox's integration tests: escapes refused under both backends (and shown to
//! succeed without the sandbox, so the tests can fail), and normal work still passing.

mod suite;
