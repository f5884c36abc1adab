mod hooks;
mod kinds;
mod load;
mod plan;
mod routing;
mod tasktree;
