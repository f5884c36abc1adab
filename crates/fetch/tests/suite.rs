mod artifact;
mod blocking;
mod server;
