mod aggregation;
mod commands;
mod common;
mod interrupts;
mod replay;
mod replay_prop;
mod routing;
