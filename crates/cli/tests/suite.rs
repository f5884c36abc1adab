mod common;
mod crash;
mod review;
mod runs;
mod workflows;
