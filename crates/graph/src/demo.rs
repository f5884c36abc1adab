//! Built-in demonstration graphs, shared by the quick start, the benchmarks and the tests.
//!
//! - `feature`: the `feature_with_iterative_testing` workflow's loop with simulated stages —
//!   code_generation → test_generation → security_review → lint_and_format → DONE, where a
//!   failing stage goes through `adaptive_retrieval` (at most 2 enrichments) and back, at most
//!   `max_attempts` (3) times, then to ABORT. `test_generation` fails its first `fail_first` attempts
//!   (default 2), so a default run takes 9 node steps, like the LangGraph anchor's G1.
//! - `fanout`: an orchestrator spawns `n` workers (every 7th fails), a collector aggregates
//!   them with `policy` (`any_fails`, `all_fail`, `majority_fail`, or `{"quorum": k}`).
//! - `chain`: `n` nodes in a line, each incrementing a counter.
//! - `pipelines`: `pipelines` independent chains of `stages` nodes after a common start, some
//!   nodes slow (see [`pipelines`]): where free-running scheduling differs from lock-step.
//! - `crashtest`: fan-out with a failing child, a collector, a retry that re-runs only the
//!   failed child, and a review stage; every handler appends `node#attempt` to a log file so a
//!   test can prove which nodes ran in which process.
//! - `tickets`: free-running ticket pipelines (work → review → merge, some tickets after
//!   others' merges, one revision) and a collector; logs like `crashtest` and records the
//!   completion order in `order` (see [`tickets`]).
//!
//! Every graph accepts `sleep_us` (each handler sleeps that long, to simulate I/O, with
//! [`precise_sleep`]; `pipelines` takes `fast_us`/`slow_us` instead, `crashtest` and `tickets`
//! vary it per node) and `scheduling` (`"steps"`, or `"free"`: see
//! [`Scheduling`](crate::Scheduling); the default is `"steps"`, `"free"` for `tickets`).

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use trellis_protocol::{Interrupt, NodeId, TerminalKind};

use crate::{
    Error, FailurePolicy, Graph, GraphBuilder, NodeContext, NodeError, NodeHandler, NodeOutput,
    Reducer, Result,
};

/// Names of the built-in demo graphs.
pub const NAMES: [&str; 6] = [
    "feature",
    "fanout",
    "chain",
    "pipelines",
    "crashtest",
    "tickets",
];

/// The stages of the `feature` graph, in order.
pub const FEATURE_STAGES: [&str; 4] = [
    "code_generation",
    "test_generation",
    "security_review",
    "lint_and_format",
];

/// Builds demo graph `name` with `params` (a JSON object; missing keys take defaults).
pub fn build(name: &str, params: &Value) -> Result<Graph> {
    let p = Params(params);
    match name {
        "feature" => feature(
            p.u64("sleep_us", 0),
            p.u64("fail_first", 2) as u32,
            p.str("approval_stage"),
        ),
        "fanout" => fanout(
            p.u64("n", 10) as usize,
            policy(params.get("policy"))?,
            p.u64("sleep_us", 0),
        ),
        "chain" => chain(p.u64("n", 100) as usize, p.u64("sleep_us", 0)),
        "pipelines" => pipelines::build(
            p.u64("pipelines", 10) as usize,
            p.u64("stages", 3) as usize,
            p.u64("fast_us", 10_000),
            p.u64("slow_us", 100_000),
            pipelines::Layout::parse(params.get("layout").and_then(Value::as_str))?,
        ),
        "crashtest" => crashtest(p.u64("sleep_us", 2000), p.str("log")),
        "tickets" => tickets::build(
            p.u64("n", 6) as usize,
            p.u64("sleep_us", 2000),
            p.str("log"),
        ),
        other => Err(Error::InvalidGraph {
            graph: other.to_owned(),
            problems: format!(
                "unknown demo graph{}; known: {}",
                crate::nearest(other, NAMES.into_iter())
                    .map(|n| format!(" (did you mean `{n}`?)"))
                    .unwrap_or_default(),
                NAMES.join(", ")
            ),
        }),
    }
    .and_then(|mut g| {
        g.params = params.clone();
        if let Some(s) = params.get("scheduling") {
            g.scheduling = serde_json::from_value(s.clone()).map_err(|e| Error::InvalidGraph {
                graph: name.to_owned(),
                problems: format!("param `scheduling`: {e} (use steps or free)"),
            })?;
        }
        Ok(g)
    })
}

struct Params<'a>(&'a Value);

impl Params<'_> {
    fn u64(&self, key: &str, default: u64) -> u64 {
        self.0.get(key).and_then(Value::as_u64).unwrap_or(default)
    }

    fn str(&self, key: &str) -> Option<String> {
        self.0.get(key).and_then(Value::as_str).map(str::to_owned)
    }
}

fn policy(v: Option<&Value>) -> Result<FailurePolicy> {
    match v {
        None => Ok(FailurePolicy::MajorityFail),
        Some(v) => serde_json::from_value(v.clone()).map_err(|e| Error::InvalidGraph {
            graph: "fanout".into(),
            problems: format!(
                "param `policy`: {e} (use any_fails, all_fail, majority_fail or {{\"quorum\": k}})"
            ),
        }),
    }
}

pub mod pipelines;
pub mod tickets;
mod timer;

pub use timer::sleep as precise_sleep;

/// Simulated I/O of `sleep_us` microseconds (a precise sleep: see [`precise_sleep`]).
async fn pause(sleep_us: u64) {
    if sleep_us > 0 {
        precise_sleep(Duration::from_micros(sleep_us)).await;
    }
}

/// The input of the `feature` graph.
pub fn feature_input() -> Value {
    json!({ "messages": [{ "role": "user", "content": "Implement feature X with tests" }] })
}

fn enrich_key(stage: &str) -> String {
    format!("enrichment_attempts:{stage}")
}

fn feature(sleep_us: u64, fail_first: u32, approval: Option<String>) -> Result<Graph> {
    let mut b = GraphBuilder::new("feature")
        .channel("current_stage", Reducer::Replace)
        .channel("stage_results", Reducer::Merge)
        .channel("retrieval_context", Reducer::Merge)
        .channel("messages", Reducer::Append)
        .channel("outcome", Reducer::Replace)
        .entry(FEATURE_STAGES[0]);
    for (i, stage) in FEATURE_STAGES.iter().enumerate() {
        let name = (*stage).to_owned();
        let fails = if *stage == "test_generation" {
            fail_first
        } else {
            0
        };
        let ask = approval.as_deref() == Some(*stage);
        let handler = move |ctx: NodeContext| {
            let name = name.clone();
            async move {
                pause(sleep_us).await;
                if ask && !ctx.resume.as_ref().is_some_and(|r| r.answer.is_approval()) {
                    return Ok(NodeOutput::interrupt(Interrupt::approval(format!(
                        "approve {name}?"
                    ))));
                }
                let failure = ctx.attempt <= fails;
                let used_context = ctx.state.get_in("retrieval_context", &name).is_some();
                let result = json!({
                    "failure": failure,
                    "attempt": ctx.attempt,
                    "summary": format!("{name} attempt {} {}", ctx.attempt, if failure { "FAILED" } else { "ok" }),
                    "used_context": used_context,
                });
                let out = if failure {
                    NodeOutput::failure("simulated failure")
                } else {
                    NodeOutput::success()
                };
                Ok(out
                    .result(result.clone())
                    .write("current_stage", json!(name))
                    .write("stage_results", json!({ name.clone(): result }))
                    .write("messages", json!([{ "role": "assistant", "stage": name, "content": format!("{name} #{}", ctx.attempt) }])))
            }
        };
        let next = FEATURE_STAGES.get(i + 1).copied().unwrap_or("DONE");
        let me = (*stage).to_owned();
        b = b
            .node_with(*stage, handler, |o| o.max_attempts(3, "ABORT"))
            .conditional_edge(
                *stage,
                [next, "adaptive_retrieval", *stage],
                move |r: &crate::RouteContext<'_>| {
                    Ok(vec![NodeId::from(if !r.failed {
                        next
                    } else if r.counter(&enrich_key(&me)) < 2 {
                        "adaptive_retrieval"
                    } else {
                        me.as_str()
                    })])
                },
            );
    }
    let retrieval = move |ctx: NodeContext| async move {
        pause(sleep_us).await;
        let stage = ctx
            .state
            .get("current_stage")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned();
        let round = ctx.counter(&enrich_key(&stage)) + 1;
        let docs: Vec<String> = (0..3).map(|i| format!("doc-{stage}-{round}-{i}")).collect();
        Ok::<_, NodeError>(
            NodeOutput::success()
                .count(enrich_key(&stage), 1)
                .write("retrieval_context", json!({ stage.clone(): { "round": round, "docs": docs } }))
                .write("messages", json!([{ "role": "tool", "stage": "adaptive_retrieval", "content": format!("enrich {stage} #{round}") }])),
        )
    };
    b = b.node("adaptive_retrieval", retrieval).conditional_edge(
        "adaptive_retrieval",
        FEATURE_STAGES,
        |r: &crate::RouteContext<'_>| {
            let stage = r
                .state
                .get("current_stage")
                .and_then(Value::as_str)
                .unwrap_or_default();
            Ok(vec![NodeId::from(stage)])
        },
    );
    for (name, kind) in [
        ("DONE", TerminalKind::Success),
        ("ABORT", TerminalKind::Failure),
    ] {
        let h: Arc<dyn NodeHandler> = Arc::new(move |_ctx: NodeContext| async move {
            pause(sleep_us).await;
            Ok::<_, NodeError>(
                NodeOutput::success()
                    .write("outcome", json!(name))
                    .write("messages", json!([{ "role": "system", "content": name }])),
            )
        });
        b = b.terminal(name, kind, Some(h));
    }
    b.build()
}

fn fanout(n: usize, policy: FailurePolicy, sleep_us: u64) -> Result<Graph> {
    let orchestrator = move |_ctx: NodeContext| async move {
        pause(sleep_us).await;
        let mut out = NodeOutput::success();
        for i in 0..n {
            out = out.spawn(format!("w{i}"), "worker", json!(i));
        }
        Ok::<_, NodeError>(out)
    };
    let worker = move |ctx: NodeContext| async move {
        pause(sleep_us).await;
        let i = ctx.input.as_u64().unwrap_or(0);
        let failure = i.is_multiple_of(7);
        let out = if failure {
            NodeOutput::failure("every 7th worker fails")
        } else {
            NodeOutput::success()
        };
        Ok::<_, NodeError>(out.write(
            "results",
            json!([{ "idx": i, "failure": failure, "value": i * i }]),
        ))
    };
    let collector: Arc<dyn NodeHandler> = Arc::new(move |ctx: NodeContext| async move {
        pause(sleep_us).await;
        let Some((_, agg)) = ctx.children else {
            return Err(NodeError::new("collector got no children"));
        };
        Ok(NodeOutput::success()
            .write("failed", json!(agg.failed))
            .write("n_failed", json!(agg.failures)))
    });
    GraphBuilder::new("fanout")
        .channel("results", Reducer::Append)
        .channel("failed", Reducer::Replace)
        .channel("n_failed", Reducer::Replace)
        .concurrency(n.max(1))
        .node("orchestrator", orchestrator)
        .template("worker", worker)
        .collector("collector", "orchestrator", policy, Some(collector))
        .terminal("DONE", TerminalKind::Success, None)
        .edge("collector", "DONE")
        .entry("orchestrator")
        .build()
}

fn chain(n: usize, sleep_us: u64) -> Result<Graph> {
    let inc = move |ctx: NodeContext| async move {
        pause(sleep_us).await;
        let c = ctx
            .state
            .get("counter")
            .and_then(Value::as_i64)
            .unwrap_or(0);
        Ok::<_, NodeError>(NodeOutput::success().write("counter", json!(c + 1)))
    };
    let names: Vec<String> = (0..n.max(1)).map(|i| format!("n{i:03}")).collect();
    let mut b = GraphBuilder::new("chain")
        .channel("counter", Reducer::Replace)
        .max_steps(n as u64 + 10);
    for name in &names {
        b = b.node(name.as_str(), inc);
    }
    for w in names.windows(2) {
        b = b.edge(w[0].as_str(), w[1].as_str());
    }
    b.entry(names[0].as_str()).build()
}

fn log_line(path: &Option<String>, ctx: &NodeContext) -> std::result::Result<(), NodeError> {
    let Some(path) = path else { return Ok(()) };
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| NodeError::new(format!("open {path}: {e}")))?;
    writeln!(f, "{}#{} {}", ctx.node, ctx.attempt, std::process::id())
        .map_err(|e| NodeError::new(format!("write {path}: {e}")))
}

fn crashtest(sleep_us: u64, log: Option<String>) -> Result<Graph> {
    // Sleeps vary per node so a kill lands in many different places.
    let jitter = move |ctx: &NodeContext| {
        let h = ctx
            .node
            .as_str()
            .bytes()
            .fold(7u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
        sleep_us / 2 + h % sleep_us.max(1)
    };
    let (l1, l2, l3) = (log.clone(), log.clone(), log);
    let plan = move |ctx: NodeContext| {
        let log = l1.clone();
        async move {
            pause(jitter(&ctx)).await;
            log_line(&log, &ctx)?;
            let mut out =
                NodeOutput::success().write("trace", json!(format!("plan#{}", ctx.attempt)));
            for k in 0..4u64 {
                out = out.spawn(format!("t{k}"), "work", json!(k));
            }
            Ok(out)
        }
    };
    let work = move |ctx: NodeContext| {
        let log = l2.clone();
        async move {
            pause(jitter(&ctx)).await;
            log_line(&log, &ctx)?;
            let k = ctx.input.as_u64().unwrap_or(0);
            let out = if k == 1 && ctx.attempt == 1 {
                NodeOutput::failure("flaky first attempt")
            } else {
                NodeOutput::success()
            };
            Ok(out
                .write("trace", json!(format!("{}#{}", ctx.node, ctx.attempt)))
                .write("sum", json!(k * 10 + u64::from(ctx.attempt)))
                .write("results", json!({ ctx.node.to_string(): ctx.attempt }))
                .count("work_runs", 1))
        }
    };
    let review = move |ctx: NodeContext| {
        let log = l3.clone();
        async move {
            pause(jitter(&ctx)).await;
            log_line(&log, &ctx)?;
            Ok(NodeOutput::success().write("trace", json!("review")))
        }
    };
    GraphBuilder::new("crashtest")
        .channel("trace", Reducer::Append)
        .channel("sum", Reducer::Sum)
        .channel("results", Reducer::Merge)
        .node_with("plan", plan, |o| o.max_attempts(3, "ABORT"))
        .template("work", work)
        .collector("gather", "plan", FailurePolicy::AnyFails, None)
        .outcome_edge("gather", "review", "plan")
        .node("review", review)
        .edge("review", "DONE")
        .terminal("DONE", TerminalKind::Success, None)
        .terminal("ABORT", TerminalKind::Failure, None)
        .entry("plan")
        .build()
}
