mod python;
mod rust;
