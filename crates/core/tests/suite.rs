mod common;
mod discussion;
mod feature;
mod llama_shared;
mod lsp;
mod service;
mod service_bench;
mod stage_tools;
