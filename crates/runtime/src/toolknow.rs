//! The tool knowledge graph of the workspace (`docs/tools.md`, "Tool knowledge graph"): every
//! agent activation's tool calls, in order and with their outcomes, are an execution it
//! learns from (`tool_dependency` in the workspace store: co-occurrence, order, success).
//!
//! The graph is loaded from the store on first use and kept in memory; learning never fails
//! a run (a store error is logged). `[tools.graph] learn = false` turns it off.
//!
//! It is also the agents' [`ToolAdvisor`]: which tools usually follow the calls made so far,
//! and the speculation threshold, adapted from the stored outcomes of earlier speculations.

use std::sync::{Arc, Mutex};

use trellis_protocol::{SessionEvent, ToolStatus};
use trellis_store::Store;
use trellis_store::{
    CallOutcome, EdgeObservation, NewSpeculation, NewToolExecution, SpeculationOutcome as Stored,
};
use trellis_toolgraph::{
    ExecutedCall, Execution, Mode, Suggestion, Thresholds, ToolCatalog, ToolEntry, ToolGraph,
};
use trellis_tools::{AdviceMode, SpeculationOutcome, Suggested, ToolAdvisor, ToolSpec};

/// The workspace's tool knowledge graph.
pub struct ToolKnowledge {
    store: Arc<Store>,
    graph: Mutex<Option<ToolGraph>>,
    thresholds: Mutex<Option<Thresholds>>,
    learn: bool,
    /// What speculations' outcomes are stored under (`agent`, `gateway`).
    speculator: String,
}

impl std::fmt::Debug for ToolKnowledge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ToolKnowledge")
            .field("learn", &self.learn)
            .finish_non_exhaustive()
    }
}

impl ToolKnowledge {
    /// The graph of `store`'s workspace; `learn` says whether executions are recorded.
    pub fn new(store: Arc<Store>, learn: bool) -> Self {
        Self {
            store,
            graph: Mutex::new(None),
            thresholds: Mutex::new(None),
            learn,
            speculator: "agent".into(),
        }
    }

    /// The same, storing speculations' outcomes under `context` (`gateway`) instead of
    /// `agent`.
    pub fn speculating_for(mut self, context: &str) -> Self {
        self.speculator = context.to_owned();
        self
    }

    /// Learns one call as it happens (the MCP gateway, whose session has no end to wait
    /// for): `call` counts as a call of its tool, and, when `after` is the call before it in
    /// the same session and `new_pair` says that pair was not observed in the session yet,
    /// as an observation of the edge `after → call` (a pair counts once per session, as it
    /// counts once per agent activation).
    pub fn learn_step(
        &self,
        context: &str,
        after: Option<&ExecutedCall>,
        call: &ExecutedCall,
        new_pair: bool,
    ) {
        if !self.learn {
            return;
        }
        let edges = after
            .filter(|a| new_pair && a.tool != call.tool)
            .map(|a| EdgeObservation {
                from: a.tool.clone(),
                to: call.tool.clone(),
                ok: a.ok && call.ok,
            })
            .into_iter()
            .collect();
        let record = NewToolExecution {
            context: context.to_owned(),
            calls: vec![CallOutcome {
                tool: call.tool.clone(),
                ok: call.ok,
            }],
            edges,
            confidence: trellis_toolgraph::edge_confidence,
        };
        let store = &self.store;
        let stored = self.with_graph(|g| {
            store.record_tool_execution(record.clone())?;
            g.apply(&record);
            Ok::<_, trellis_store::Error>(())
        });
        if let Some(Err(e)) = stored {
            tracing::warn!(error = %e, "the tool knowledge graph could not learn a call");
        }
    }

    /// Runs `f` on the graph, loading it first if needed; `None` when it cannot be loaded.
    fn with_graph<T>(&self, f: impl FnOnce(&mut ToolGraph) -> T) -> Option<T> {
        let mut slot = self.graph.lock().ok()?;
        if slot.is_none() {
            match ToolGraph::load(&*self.store) {
                Ok(g) => *slot = Some(g),
                Err(e) => {
                    tracing::warn!(error = %e, "the tool knowledge graph could not be loaded");
                    return None;
                }
            }
        }
        slot.as_mut().map(f)
    }

    /// Runs `f` on the thresholds, loading them from the stored outcomes first if needed.
    fn with_thresholds<T>(&self, f: impl FnOnce(&mut Thresholds) -> T) -> Option<T> {
        let mut slot = self.thresholds.lock().ok()?;
        if slot.is_none() {
            *slot = Some(Thresholds::load(&*self.store).unwrap_or_else(|e| {
                tracing::warn!(error = %e, "stored speculation outcomes could not be read");
                Thresholds::new()
            }));
        }
        slot.as_mut().map(f)
    }

    /// The speculation threshold and the acceptance and waste it adapts to (targets: > 95%
    /// used, < 10% wasted; `docs/tools.md`, "Outcomes and the adaptive threshold").
    pub fn thresholds(&self) -> Option<trellis_protocol::records::SpeculationReport> {
        self.with_thresholds(|t| t.report())
    }

    /// Learns from one activation's calls (`context`: what they were for, e.g.
    /// `feature/implement`). Nothing happens for fewer than one call or when learning is off.
    pub fn learn(&self, context: &str, calls: Vec<ExecutedCall>) {
        if !self.learn || calls.is_empty() {
            return;
        }
        let execution = Execution {
            context: context.to_owned(),
            calls,
            data_edges: Vec::new(),
        };
        let store = &*self.store;
        if let Some(Err(e)) = self.with_graph(|g| g.record_execution(store, &execution)) {
            tracing::warn!(error = %e, "the tool knowledge graph could not learn an execution");
        }
    }
}

/// A suggestion as the agent loop sees it, its explanation on one line.
fn advice(s: Suggestion) -> Suggested {
    let e = &s.explanation;
    let mut why = Vec::new();
    if !e.direct_dependencies.is_empty() {
        why.push(format!(
            "learned order {}",
            e.direct_dependencies.join(", ")
        ));
    }
    if !e.transitive_dependencies.is_empty() {
        why.push(format!("chains {}", e.transitive_dependencies.join(", ")));
    }
    if !e.page_rank_scores.is_empty() {
        let ranks: Vec<String> = e
            .page_rank_scores
            .iter()
            .map(|(t, r)| format!("{t} {r:.3}"))
            .collect();
        why.push(format!("PageRank {}", ranks.join(", ")));
    }
    Suggested {
        tools: s.tools,
        edges: s.edges,
        confidence: s.confidence,
        mode: match s.mode {
            Mode::Explicit => AdviceMode::Explicit,
            Mode::Suggestion => AdviceMode::Suggestion,
            Mode::Speculative => AdviceMode::Speculative,
        },
        explanation: why.join("; "),
    }
}

impl ToolAdvisor for ToolKnowledge {
    fn suggest(&self, intent: &str, tools: &[ToolSpec]) -> Option<Suggested> {
        let thresholds = self.with_thresholds(|t| t.clone())?;
        let entries = tools
            .iter()
            .map(|t| ToolEntry::of(&t.name, &t.description, &t.input_schema))
            .collect();
        let suggestion = self.with_graph(|g| {
            let mut catalog = ToolCatalog::new(entries);
            catalog.set_graph_prior(g)?;
            trellis_toolgraph::suggest_dag_with(intent, &catalog, g, &thresholds)
        })?;
        match suggestion {
            Ok(s) => s.map(advice),
            Err(e) => {
                tracing::warn!(error = %e, "the tool knowledge graph could not suggest a workflow");
                None
            }
        }
    }

    fn predict_next(&self, completed: &[String]) -> Vec<(String, f64)> {
        self.with_graph(|g| g.predict_next(completed))
            .unwrap_or_default()
    }

    fn importance(&self) -> std::collections::BTreeMap<String, f64> {
        self.with_graph(|g| {
            if g.node_count() == 0 {
                return Ok(Default::default());
            }
            g.pagerank()
        })
        .and_then(|r| {
            r.map_err(|e| tracing::warn!(error = %e, "the tool knowledge graph's PageRank is unavailable"))
                .ok()
        })
        .unwrap_or_default()
    }

    fn threshold(&self) -> f64 {
        self.with_thresholds(|t| t.speculate())
            .unwrap_or(trellis_toolgraph::START)
    }

    fn speculated(&self, tool: &str, confidence: f64, outcome: SpeculationOutcome) {
        let speculation = NewSpeculation {
            context: self.speculator.clone(),
            tools: vec![tool.to_owned()],
            confidence,
            outcome: match outcome {
                SpeculationOutcome::Used => Stored::Used,
                SpeculationOutcome::Wasted => Stored::Wasted,
                SpeculationOutcome::Failed => Stored::Failed,
            },
        };
        let store = &*self.store;
        if let Some(Err(e)) = self.with_thresholds(|t| t.record_speculation(store, speculation)) {
            tracing::warn!(error = %e, "a speculation's outcome could not be stored");
        }
    }
}

/// Collects an activation's tool calls from its session events (a tee in front of its
/// sink), to be learned when it ends.
#[derive(Clone, Debug, Default)]
pub struct CallLog(Arc<Mutex<Vec<ExecutedCall>>>);

impl CallLog {
    /// Notes `event` if it completes a tool call (interrupted and cancelled calls are not
    /// outcomes and are left out, and so are the agent loop's own meta-tools: `execute_dag`,
    /// `search_tools`, `read_tool_output`).
    pub fn note(&self, event: &SessionEvent) {
        let SessionEvent::ToolCompleted { name, status, .. } = event else {
            return;
        };
        if [
            trellis_agents::EXECUTE_DAG,
            trellis_agents::REPLAN_DAG,
            trellis_agents::SEARCH_TOOLS,
            trellis_agents::context::READ_TOOL_OUTPUT,
        ]
        .contains(&name.as_str())
        {
            return;
        }
        let ok = match status {
            ToolStatus::Ok => true,
            ToolStatus::Error | ToolStatus::Denied => false,
            _ => return,
        };
        if let Ok(mut calls) = self.0.lock() {
            calls.push(ExecutedCall::new(name.clone(), ok));
        }
    }

    /// The calls noted so far, emptying the log.
    pub fn take(&self) -> Vec<ExecutedCall> {
        self.0
            .lock()
            .map(|mut c| std::mem::take(&mut *c))
            .unwrap_or_default()
    }
}
