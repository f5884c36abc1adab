mod dag;
mod edit;
mod nodes;
mod review;
mod safety;
mod shell;
mod support;
mod worktree;
