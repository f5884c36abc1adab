mod edit;
mod review;
mod safety;
mod shell;
mod support;
mod worktree;
