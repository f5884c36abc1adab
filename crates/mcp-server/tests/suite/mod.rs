mod http;
mod lsp;
mod tools;
