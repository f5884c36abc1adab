//! One client's session of the gateway: what it has been offered, its calls (learned as
//! they happen), and the calls run ahead of it.

use std::collections::{BTreeSet, HashSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;
use trellis_protocol::ToolStatus;
use trellis_toolgraph::{ExecutedCall, SEARCH_TOOLS};
use trellis_tools::dag::{EXECUTE_DAG, REPLAN_DAG, Runner, StepStatus, plan};
use trellis_tools::speculate::{self, Ahead, Speculated};

use super::{Gateway, GatewayTool, ROLE};

/// What a session's call returned.
#[derive(Clone, Debug, PartialEq)]
pub struct CallAnswer {
    /// The text for the client.
    pub text: String,
    /// The structured result, if any.
    pub data: Option<Value>,
    /// The call failed.
    pub is_error: bool,
    /// The session's tool list changed (`search_tools` found tools not listed yet).
    pub list_changed: bool,
}

impl CallAnswer {
    fn text(text: String, is_error: bool) -> Self {
        Self {
            text,
            data: None,
            is_error,
            list_changed: false,
        }
    }
}

#[derive(Default)]
struct State {
    /// The tools listed to the client so far (listings and what `search_tools` found).
    listed: BTreeSet<String>,
    /// Whether the session has been listed its tools.
    has_listing: bool,
    /// Tools `search_tools` found.
    discovered: Vec<String>,
    /// What the session is about: its searches and the tools it called (ranking query).
    intent: Vec<String>,
    /// Its calls (tool, arguments), oldest first: what speculation predicts from and
    /// carries arguments from.
    history: Vec<speculate::Done>,
    /// The last call and the pairs of consecutive calls seen (learning).
    last: Option<ExecutedCall>,
    pairs: HashSet<(String, String)>,
    /// Results run ahead, and the calls running ahead now.
    ready: Vec<Speculated>,
    running: Vec<(String, Value)>,
}

/// A client session. Speculative results nobody asked for are reported wasted when it is
/// dropped.
pub struct GatewaySession {
    gateway: Arc<Gateway>,
    state: Arc<Mutex<State>>,
    /// Bumped whenever calls running ahead finish.
    ahead: watch::Sender<u64>,
    cancel: CancellationToken,
}

impl std::fmt::Debug for GatewaySession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewaySession").finish_non_exhaustive()
    }
}

impl GatewaySession {
    pub(super) fn new(gateway: Arc<Gateway>) -> Self {
        Self {
            gateway,
            state: Arc::default(),
            ahead: watch::channel(0).0,
            cancel: CancellationToken::new(),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    /// The tools to list now, by name: the meta tools, what the session was listed before
    /// and what `search_tools` found, and the hub tools that fit what that leaves of the
    /// budget (all of them when it is off).
    pub fn list_tools(&self) -> Vec<GatewayTool> {
        let g = &self.gateway;
        let exposed = g.exposed();
        let meta = g.meta();
        let mut st = self.state();
        // What the session was listed once stays listed (its client may hold on to it).
        let (found, rest): (Vec<GatewayTool>, Vec<GatewayTool>) = exposed
            .into_iter()
            .partition(|t| st.listed.contains(&t.name) || st.discovered.contains(&t.name));
        let chosen: Vec<String> = match g.budget() {
            None => rest.iter().map(|t| t.name.clone()).collect(),
            Some(budget) => {
                let fixed: usize = meta.iter().chain(&found).map(GatewayTool::cost).sum();
                let cost = |e: &trellis_toolgraph::ToolEntry| {
                    rest.iter()
                        .find(|t| t.name == e.name)
                        .map_or(usize::MAX, GatewayTool::cost)
                };
                g.catalog(&rest)
                    .offer(&st.intent.join("\n"), budget, fixed, 0, &cost, true)
                    .map(|o| o.chosen)
                    .unwrap_or_else(|e| {
                        tracing::warn!(error = %e, "tool selection failed; listing no hub tool");
                        Vec::new()
                    })
            }
        };
        let mut tools = meta;
        tools.extend(found);
        tools.extend(rest.into_iter().filter(|t| chosen.contains(&t.name)));
        st.listed.extend(tools.iter().map(|t| t.name.clone()));
        st.has_listing = true;
        tools.sort_by(|a, b| a.name.cmp(&b.name));
        tools
    }

    /// Answers a `tools/call`: the meta tools, or a listed hub tool (from a result run
    /// ahead when there is one for exactly this call). `Err` names a tool the gateway does
    /// not expose.
    pub async fn call(&self, tool: &str, args: Value) -> Result<CallAnswer, String> {
        let g = self.gateway.clone();
        if tool == SEARCH_TOOLS {
            return Ok(self.search_tools(&args));
        }
        if (tool == EXECUTE_DAG || tool == REPLAN_DAG) && g.config.dag.execute_dag {
            return Ok(self.execute_dag(tool, &args).await);
        }
        if !g.exposes(tool) {
            return Err(format!(
                "unknown tool `{tool}`: the gateway serves its servers' tools as listed by \
                 tools/list, `{SEARCH_TOOLS}` and `{EXECUTE_DAG}`"
            ));
        }
        if !self.state().has_listing {
            self.list_tools();
        }
        if !self.state().listed.contains(tool) {
            return Ok(CallAnswer::text(
                format!(
                    "`{tool}` is not offered in this session yet: find it with `{SEARCH_TOOLS}` \
                     (then it is listed and can be called)"
                ),
                true,
            ));
        }
        self.wait_ahead(tool, &args).await;
        let kept = {
            let mut st = self.state();
            speculate::take(g.env.advisor.as_deref(), &mut st.ready, tool, &args)
        };
        let answer = match kept {
            Some(s) => CallAnswer {
                text: s.content,
                data: s.data,
                is_error: false,
                list_changed: false,
            },
            None => {
                let r = g
                    .registry
                    .call(&g.env, ROLE, tool, args.clone(), self.cancel.child_token())
                    .await;
                CallAnswer {
                    text: r.content,
                    data: r.data,
                    is_error: r.is_error,
                    list_changed: false,
                }
            }
        };
        let data = answer.data.clone().filter(|_| !answer.is_error);
        self.learn(tool, args, data, !answer.is_error);
        self.run_ahead();
        Ok(answer)
    }

    fn search_tools(&self, args: &Value) -> CallAnswer {
        let g = &self.gateway;
        let exposed = g.exposed();
        let found = g
            .catalog(&exposed)
            .search_tools(args, g.config.budget.search_results);
        let mut st = self.state();
        if let Some(q) = args.get("query").and_then(Value::as_str) {
            st.intent.push(q.to_owned());
        }
        let mut changed = false;
        for name in found.tools {
            if !st.discovered.contains(&name) {
                st.discovered.push(name.clone());
            }
            changed |= st.listed.insert(name);
        }
        CallAnswer {
            list_changed: changed,
            ..CallAnswer::text(found.text, found.is_error)
        }
    }

    /// Runs an `execute_dag` or `replan_dag` call: a plan that pauses for the client's
    /// decision keeps a checkpoint in the workspace store (the id is in the report).
    async fn execute_dag(&self, tool: &str, args: &Value) -> CallAnswer {
        let g = self.gateway.clone();
        let runner = Runner {
            registry: &g.registry,
            env: &g.env,
            role: ROLE,
            cancel: self.cancel.child_token(),
            events: None,
        };
        let checkpoints = g.env.checkpoints.as_ref();
        let max = g.config.dag.max_steps;
        let report = if tool == REPLAN_DAG {
            plan::replan(&runner, checkpoints, args, max, false).await
        } else {
            plan::start(&runner, checkpoints, plan_id(), args, max, false).await
        }
        .report();
        for step in report.steps {
            let ok = match step.status {
                StepStatus::Ok => true,
                StepStatus::Error => false,
                _ => continue,
            };
            if let Some(args) = step.args {
                self.learn(&step.tool, args, step.data.filter(|_| ok), ok);
            }
        }
        self.run_ahead();
        CallAnswer::text(report.text, report.status != ToolStatus::Ok)
    }

    /// Learns a call (and remembers its arguments and structured result for speculation).
    fn learn(&self, tool: &str, args: Value, data: Option<Value>, ok: bool) {
        let call = ExecutedCall::new(tool, ok);
        let (after, new_pair) = {
            let mut st = self.state();
            st.history.push(speculate::Done {
                tool: tool.to_owned(),
                args,
                data,
            });
            st.intent.push(tool.to_owned());
            let after = st.last.replace(call.clone());
            let new_pair = after
                .as_ref()
                .is_some_and(|a| st.pairs.insert((a.tool.clone(), tool.to_owned())));
            (after, new_pair)
        };
        if let Some(k) = &self.gateway.knowledge {
            k.learn_step("gateway", after.as_ref(), &call, new_pair);
        }
    }

    /// Starts the safe predictions after the session's calls (in the background).
    fn run_ahead(&self) {
        let g = self.gateway.clone();
        let Some(advisor) = g.env.advisor.clone() else {
            return;
        };
        let planned = {
            let st = self.state();
            let skip: Vec<(&str, &Value)> = st
                .ready
                .iter()
                .map(|s| (s.tool.as_str(), &s.args))
                .chain(st.running.iter().map(|(t, a)| (t.as_str(), a)))
                .collect();
            let ahead = Ahead {
                registry: &g.registry,
                role: ROLE,
                advisor: advisor.as_ref(),
                config: &g.config.speculation,
            };
            ahead.plan(&st.history, &skip)
        };
        if planned.is_empty() {
            return;
        }
        lock(&self.state)
            .running
            .extend(planned.iter().map(|p| (p.tool.clone(), p.args.clone())));
        let state = self.state.clone();
        let done = self.ahead.clone();
        let cancel = self.cancel.child_token();
        tokio::spawn(async move {
            let ahead = Ahead {
                registry: &g.registry,
                role: ROLE,
                advisor: advisor.as_ref(),
                config: &g.config.speculation,
            };
            let results = ahead.run(&g.env, &planned, cancel).await;
            let mut st = lock(&state);
            st.running
                .retain(|(t, a)| !planned.iter().any(|p| &p.tool == t && &p.args == a));
            for note in ahead.keep(planned, results, &mut st.ready) {
                tracing::debug!("gateway: {note}");
            }
            drop(st);
            done.send_modify(|n| *n += 1);
        });
    }

    /// Waits (at most `tools.speculation.max_ms` and a second) while exactly this call is
    /// running ahead.
    async fn wait_ahead(&self, tool: &str, args: &Value) {
        let running = |st: &State| st.running.iter().any(|(t, a)| t == tool && a == args);
        let mut rx = self.ahead.subscribe();
        let limit =
            Duration::from_millis(self.gateway.config.speculation.max_ms) + Duration::from_secs(1);
        let wait = async {
            while running(&self.state()) {
                if rx.changed().await.is_err() {
                    break;
                }
            }
        };
        let _ = tokio::time::timeout(limit, wait).await;
    }
}

impl Drop for GatewaySession {
    fn drop(&mut self) {
        self.cancel.cancel();
        let advisor = self.gateway.env.advisor.clone();
        speculate::waste(advisor.as_deref(), &mut lock(&self.state).ready, &[]);
    }
}

/// The state, even if a panic poisoned it.
fn lock(state: &Mutex<State>) -> MutexGuard<'_, State> {
    state
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A new id for a plan run through the gateway (unique across sessions and restarts).
fn plan_id() -> String {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros());
    format!("gateway-{started:x}-{n}")
}
