mod load;
mod plan;
