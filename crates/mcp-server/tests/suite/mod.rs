mod http;
mod tools;
