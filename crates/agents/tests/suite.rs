mod retrieval;
mod retrieval_adaptive;
