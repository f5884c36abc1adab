mod artifact;
mod blocking;
mod joined;
mod server;
