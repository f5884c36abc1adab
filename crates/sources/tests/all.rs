//! Integration tests of trellis-sources.

mod suite;
