mod agent;
mod binary;
mod client;
mod drive;
mod real;
mod ui;
mod window;
