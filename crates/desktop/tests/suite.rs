mod agent;
mod binary;
mod client;
mod real;
mod ui;
mod window;
