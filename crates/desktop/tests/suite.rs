mod agent;
mod client;
mod real;
mod ui;
mod window;
