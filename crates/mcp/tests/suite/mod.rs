mod client;
mod filesystem;
mod git;
mod sandbox;
mod support;
