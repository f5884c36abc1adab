//! The MCP gateway (`trellis mcp --gateway`, `docs/mcp.md`): the tools of the MCP
//! servers configured in the workspace's `[mcp.servers]` ([`McpHub`]), offered to an
//! external MCP client through
//!
//! 1. the **tool-schema budget**: a listing holds the hub tools that fit
//!    `tools.gateway.budget_tokens` (default `tools.budget.share` of a 128k window), ranked
//!    by [`ToolCatalog`] (BM25 over what the session has been about, the knowledge graph's
//!    PageRank as the prior, the same [`ToolCatalog::offer`] the agents use), plus the meta
//!    tools `search_tools` and `execute_dag`;
//! 2. **`search_tools`**: what it finds is offered from then on in the session, and the
//!    adapter tells the client the list changed;
//! 3. **`execute_dag`**: the agents' plan tool ([`trellis_tools::dag::plan`]) over the hub
//!    tools;
//! 4. **learning and speculation**: every call is learned into the workspace's tool
//!    knowledge graph as it happens ([`ToolKnowledge::learn_step`], `[tools.graph] learn`),
//!    and after a call the safe predictions at or above the threshold run ahead
//!    ([`trellis_tools::speculate`], shared with the agents); an identical later call is
//!    answered from the kept result.
//!
//! Policy: only the tools the `[mcp]` configuration offers (`enabled`, `enabled_tools`,
//! `disabled_tools`) are exposed, and none of a server whose `approval` is `deny`; a call
//! goes through the workspace policy like an agent's, except that `ask` is left to the
//! client (MCP clients confirm tool calls with their user themselves). Tool annotations
//! pass through.
//!
//! The rmcp adapter lives in `trellis-mcp-server` ([`GatewaySession`] per client session).

mod session;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use trellis_config::{Config, LoadOptions};
use trellis_mcp::{McpConfig, McpHub, ServerState, ServerStatus};
use trellis_store::Store;
use trellis_toolgraph::{SEARCH_TOOLS, ToolCatalog, ToolEntry};
use trellis_tools::config::Action;
use trellis_tools::dag::{
    EXECUTE_DAG, ExecuteDagInput, REPLAN_DAG, ReplanDagInput, execute_dag_description,
    replan_dag_description,
};
use trellis_tools::interaction::NonInteractive;
use trellis_tools::tool::schema_for;
use trellis_tools::{Registry, ToolEnv, ToolSource, ToolsConfig, Workspace};

pub use session::{CallAnswer, GatewaySession};

use crate::error::{Error, Result};
use crate::toolknow::ToolKnowledge;

/// What the gateway says when `[mcp.servers]` is empty.
pub const NO_SERVERS: &str = "no MCP servers are configured: the gateway serves the tools of \
     the servers in [mcp.servers]; add one to .trellis/config.toml, e.g.\n\n  \
     [mcp.servers.time]\n  command = \"uvx\"\n  args = [\"mcp-server-time\"]\n\n\
     (or -c mcp.servers.NAME.command=…; see docs/mcp.md)";

/// The allow-list key of the gateway's calls.
const ROLE: &str = "gateway";

/// A tool as the gateway lists it.
#[derive(Clone, Debug, PartialEq)]
pub struct GatewayTool {
    /// Its name (`<server>__<tool>`, or a meta tool's).
    pub name: String,
    /// Its description.
    pub description: String,
    /// Its input schema.
    pub input_schema: Value,
    /// Its output schema, if the server gave one.
    pub output_schema: Option<Value>,
    /// Its annotations (`readOnlyHint`, …) as the server sent them.
    pub annotations: Option<Value>,
}

impl GatewayTool {
    /// Its cost in a prompt, in tokens (the estimate the agents' budget uses).
    pub fn cost(&self) -> usize {
        trellis_llm::tokens::estimate_tool(&trellis_llm::ToolSpec {
            name: self.name.clone(),
            description: self.description.clone(),
            parameters: self.input_schema.clone(),
        })
    }

    fn entry(&self) -> ToolEntry {
        ToolEntry::of(&self.name, &self.description, &self.input_schema)
    }
}

/// The gateway of one workspace: its hub, its tools' configuration and its knowledge graph.
/// Sessions ([`Gateway::session`]) share it.
pub struct Gateway {
    hub: McpHub,
    mcp: McpConfig,
    registry: Arc<Registry>,
    env: ToolEnv,
    config: Arc<ToolsConfig>,
    knowledge: Option<Arc<ToolKnowledge>>,
    /// Ranks tools by meaning too (the index's embedder; vectors cached in `store`).
    embedder: Option<Arc<dyn trellis_index::Embedder>>,
    store: Option<Arc<Store>>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway")
            .field("hub", &self.hub)
            .finish_non_exhaustive()
    }
}

impl Gateway {
    /// The gateway of the workspace at `repo` with its layered configuration (`overrides`
    /// as with `-c key=value`), learning into `store`.
    pub fn open(repo: &Path, overrides: &[String], store: Arc<Store>) -> Result<Self> {
        let root = trellis_tools::worktree::repo_root(repo).unwrap_or_else(|_| repo.to_path_buf());
        let config = Config::load(&LoadOptions::discover(&root, overrides.to_vec()))?;
        let tools = crate::tools_config(&config)?;
        let mcp = crate::mcp_config(&config)?;
        let index: trellis_index::IndexConfig = config.section_serde("index")?;
        let mut gateway = Self::new(&root, tools, mcp, Some(store))?;
        // The index's embedder ranks the tools by meaning with BM25 (`index.embedding`).
        match trellis_index::embed::from_config(&index.embedding, true) {
            Ok(e) => gateway.embedder = e.map(Arc::from),
            Err(e) => tracing::warn!(error = %e, "tool embeddings unavailable; lexical ranking"),
        }
        Ok(gateway)
    }

    /// The gateway of the workspace at `root` with these sections; without a store nothing
    /// is learned and nothing speculated. Fails when no MCP server is configured.
    pub fn new(
        root: &Path,
        tools: ToolsConfig,
        mcp: McpConfig,
        store: Option<Arc<Store>>,
    ) -> Result<Self> {
        if mcp.servers.is_empty() {
            return Err(Error::Gateway(NO_SERVERS.into()));
        }
        let hub = McpHub::new(root, &mcp)?;
        let mut registry = Registry::new().with_source(Arc::new(hub.clone()));
        for (name, server) in &mcp.servers {
            if server.approval != Some(Action::Deny) {
                registry.allow(ROLE, [format!("{name}__*").as_str()]);
            }
        }
        let config = Arc::new(tools);
        let knowledge = store.clone().map(|s| {
            Arc::new(ToolKnowledge::new(s, config.graph.learn).speculating_for("gateway"))
        });
        let mut env = ToolEnv::new(
            Workspace::new(root, &config.secrets)?,
            config.clone(),
            // `ask` is the client's to ask: MCP clients confirm calls with their user.
            Arc::new(NonInteractive { approve: true }),
        );
        env.advisor = knowledge
            .clone()
            .map(|k| k as Arc<dyn trellis_tools::ToolAdvisor>);
        if let Some(store) = &store {
            env.checkpoints = Arc::new(trellis_tools::dag::StoreCheckpoints(store.clone()));
        }
        Ok(Self {
            hub,
            mcp,
            registry: Arc::new(registry),
            env,
            config,
            knowledge,
            embedder: None,
            store,
        })
    }

    /// Ranks tools with `embedder` too (hybrid with BM25; vectors cached in the store).
    pub fn with_embedder(mut self, embedder: Arc<dyn trellis_index::Embedder>) -> Self {
        self.embedder = Some(embedder);
        self
    }

    /// Starts the servers and waits for them at most `mcp.startup_wait_secs` (a server
    /// ready later is listed from then on; one that failed shows in
    /// [`Gateway::status_lines`] with its reason, and the gateway serves the others).
    pub async fn start(&self) -> Vec<ServerStatus> {
        self.hub.ready_for_run().await;
        self.hub.status()
    }

    /// One line per server for the log: its state, tools and last error.
    pub fn status_lines(&self) -> Vec<String> {
        self.hub
            .status()
            .iter()
            .map(|s| {
                let offered = s.tools.iter().filter(|t| t.offered).count();
                let mut line = format!("{}: {} ({})", s.name, s.state, s.transport);
                if s.state == ServerState::Ready {
                    line.push_str(&format!(", {offered} tools"));
                }
                if let Some(e) = &s.last_error {
                    line.push_str(&format!(": {}", e.lines().next().unwrap_or_default()));
                }
                line
            })
            .collect()
    }

    /// Stops the servers (waiting at most `timeout`).
    pub async fn stop(&self, timeout: Duration) {
        self.hub.stop(timeout).await;
    }

    /// A new client session.
    pub fn session(self: &Arc<Self>) -> GatewaySession {
        GatewaySession::new(self.clone())
    }

    /// The budget of a listing in tokens (`None`: every tool is listed).
    pub fn budget(&self) -> Option<usize> {
        self.config.gateway.budget(&self.config.budget)
    }

    /// The hub tools the configuration lets through, by name.
    fn exposed(&self) -> Vec<GatewayTool> {
        let mut out = Vec::new();
        for server in self.hub.status() {
            let denied = self
                .mcp
                .servers
                .get(&server.name)
                .is_some_and(|s| s.approval == Some(Action::Deny));
            if denied || server.state != ServerState::Ready {
                continue;
            }
            for info in server.tools.iter().filter(|t| t.offered) {
                let Some(tool) = self.hub.get(&info.name) else {
                    continue;
                };
                let spec = tool.spec();
                out.push(GatewayTool {
                    name: spec.name.clone(),
                    description: spec.description.clone(),
                    input_schema: spec.input_schema.clone(),
                    output_schema: spec.output_schema.clone(),
                    annotations: info.annotations.clone(),
                });
            }
        }
        out.sort_by(|a, b| a.name.cmp(&b.name));
        out
    }

    /// Whether `tool` is an exposed hub tool.
    fn exposes(&self, tool: &str) -> bool {
        self.registry.allows(ROLE, tool) && self.hub.get(tool).is_some()
    }

    /// The meta tools: `search_tools`, and `execute_dag` unless `tools.dag.execute_dag` is
    /// off.
    fn meta(&self) -> Vec<GatewayTool> {
        let mut out = vec![GatewayTool {
            name: SEARCH_TOOLS.into(),
            description: trellis_toolgraph::SEARCH_TOOLS_DESCRIPTION.into(),
            input_schema: trellis_toolgraph::search_tools_schema(),
            output_schema: None,
            annotations: Some(json!({"readOnlyHint": true, "openWorldHint": false})),
        }];
        if self.config.dag.execute_dag {
            out.push(GatewayTool {
                name: EXECUTE_DAG.into(),
                description: execute_dag_description(self.config.dag.max_steps),
                input_schema: schema_for::<ExecuteDagInput>(),
                output_schema: None,
                annotations: None,
            });
            out.push(GatewayTool {
                name: REPLAN_DAG.into(),
                description: replan_dag_description(),
                input_schema: schema_for::<ReplanDagInput>(),
                output_schema: None,
                annotations: None,
            });
        }
        out
    }

    /// A catalog of `tools`, with the knowledge graph's PageRank as its prior.
    fn catalog(&self, tools: &[GatewayTool]) -> ToolCatalog {
        let ranks = self
            .knowledge
            .as_ref()
            .map(|k| trellis_tools::ToolAdvisor::importance(k.as_ref()))
            .unwrap_or_default();
        ToolCatalog::hybrid(
            tools.iter().map(GatewayTool::entry).collect(),
            self.embedder.clone(),
            self.store
                .as_deref()
                .map(|s| s as &dyn trellis_store::ToolGraphStore),
            &ranks,
        )
    }
}
