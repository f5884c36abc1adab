//! The orchestrator's choice as the terminal shows it: the workflow, who chose it and why,
//! the stages that run or are skipped, and the stage graph (`trellis run`, `--plan-only`).

use trellis_agents::{DecidedBy, Orchestration};
use trellis_workflow::Plan;

/// Prints the orchestrator's decisions and the plan.
pub fn print_choice(o: &Orchestration, plan: &Plan) {
    let by = |b: DecidedBy| match b {
        DecidedBy::Model => "chosen by the orchestrator",
        DecidedBy::User => "chosen on the command line",
        DecidedBy::Default => "chosen by the selection prior (the model's answer was unusable)",
        DecidedBy::Patterns => {
            "chosen by the selection patterns (the model's choice matched none of them)"
        }
    };
    println!("workflow: {} ({})", o.workflow, by(o.workflow_by));
    println!("project: {}", o.project.describe());
    if !o.reasoning.trim().is_empty() {
        println!("reasoning: {}", o.reasoning.trim());
    }
    for n in &o.notes {
        println!("note: {n}");
    }
    println!("stages:");
    for p in &plan.planned {
        let agents: Vec<&str> = p.context.agents.iter().map(|a| a.agent.as_str()).collect();
        println!(
            "  run  {:<32} {:<28} {}",
            p.context.stage_name,
            agents.join(", "),
            p.reason
        );
    }
    for s in &plan.skipped {
        println!("  skip {:<32} {:<28} {}", s.stage_name, "", s.reason);
    }
    print_graph(plan);
}

/// The stage graph: where each stage goes on success and on failure.
fn print_graph(plan: &Plan) {
    println!("graph:");
    if plan.has_upfront_retrieval() {
        println!("  upfront_retrieval → {}", plan.entry);
    }
    for r in &plan.routing {
        if !plan.is_planned(&r.stage) {
            continue;
        }
        let failure = plan.failure_path(r);
        println!("  {} ✓→ {}   ✗→ {failure}", r.stage, r.next_on_success);
    }
}
