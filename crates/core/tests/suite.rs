mod common;
mod discussion;
mod feature;
