mod kinds;
mod load;
mod plan;
