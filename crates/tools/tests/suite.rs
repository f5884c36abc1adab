mod edit;
mod nodes;
mod review;
mod rollback;
mod safety;
mod shell;
mod support;
mod worktree;
