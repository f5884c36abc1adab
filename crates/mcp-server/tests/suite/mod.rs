mod gateway;
mod http;
mod lsp;
mod tools;
