mod common;
mod feature;
