mod chrome;
mod fixture;
mod live;
mod metrics;
mod otlp;
mod spans;
