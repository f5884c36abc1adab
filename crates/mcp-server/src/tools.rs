//! The server's tools, by what answers them.

pub mod index;
pub mod lsp;
