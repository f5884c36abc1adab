mod agent_loop;
mod compress;
mod context;
mod context_wire;
mod retrieval;
mod retrieval_adaptive;
