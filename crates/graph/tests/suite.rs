mod aggregation;
mod causes;
mod commands;
mod common;
mod interrupts;
mod replay;
mod replay_prop;
mod routing;
