mod agent_loop;
mod budget;
mod compress;
mod context;
mod context_wire;
mod parallel;
mod retrieval;
mod retrieval_adaptive;
