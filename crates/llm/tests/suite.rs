mod anthropic;
mod budget;
#[cfg(feature = "embedded")]
mod embedded;
mod mock;
mod normalise;
mod ollama;
mod openai;
mod recorded;
mod recorded_replay;
mod registry;
mod streams;
mod structured;
mod window;
