//! The retrieval agent (seed 000 layer 1): upfront context per stage and adaptive
//! enrichment after a failure.
