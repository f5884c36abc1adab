mod anthropic;
mod budget;
#[cfg(feature = "embedded")]
mod embedded;
mod mock;
mod normalise;
mod openai;
mod registry;
mod structured;
