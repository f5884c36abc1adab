mod client;
mod filesystem;
mod git;
mod support;
