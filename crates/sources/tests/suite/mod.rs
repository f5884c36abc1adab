mod agent;
mod fake;
mod osv;
mod web;
