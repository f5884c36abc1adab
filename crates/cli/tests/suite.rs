mod agentrun;
mod common;
mod crash;
mod models;
mod review;
mod runs;
mod workflows;
mod workspace;
