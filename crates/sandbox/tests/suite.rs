mod escape;
mod fixture;
mod work;
