mod common;
mod fuzz;
mod openapi;
mod routes;
mod security;
mod serve_bench;
mod ws;
