mod agent;
mod client;
mod ui;
