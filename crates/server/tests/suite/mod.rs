mod common;
mod fuzz;
mod routes;
mod security;
mod ws;
