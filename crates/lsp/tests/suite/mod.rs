mod python;
mod rust;
mod typescript;
