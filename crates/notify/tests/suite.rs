mod common;
mod desktop;
mod detect;
mod webhook;
