mod kinds;
mod load;
mod plan;
mod tasktree;
