mod common;
mod fuzz;
mod openapi;
mod routes;
mod security;
mod ws;
