mod common;
mod crash;
mod runs;
