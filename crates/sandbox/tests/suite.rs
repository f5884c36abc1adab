mod escape;
mod fixture;
mod pids;
mod work;
