mod clients;
mod common;
mod loopback;
mod routes;
mod trellis_client;
