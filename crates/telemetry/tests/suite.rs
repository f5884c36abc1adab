mod chrome;
mod fixture;
#[cfg(feature = "grpc")]
mod grpc;
mod live;
mod metrics;
mod otlp;
mod spans;
