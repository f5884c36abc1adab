mod common;
mod crash;
mod models;
mod runs;
