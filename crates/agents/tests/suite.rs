mod agent_loop;
mod retrieval;
mod retrieval_adaptive;
