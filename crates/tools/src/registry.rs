//! The tool registry: tools by name, per-role allow lists, and the one entry point that
//! runs a call, turns every failure into an error *result*, and records the call.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;

use serde::Serialize;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use trellis_store::ToolCallRecord;

use crate::context::{ProgressFn, ToolContext, ToolEnv};
use crate::error::Error;
use crate::record::{ToolCallSink, now_ms, summarize};
use crate::tool::{Tool, ToolSpec};

/// Tools that only look: every role may use them.
pub const READ_TOOLS: &[&str] = &[
    "read_file",
    "list_directory",
    "glob_search",
    "grep",
    "git_status",
    "git_diff",
    "git_log",
    "take_note",
    "ask_questions",
];

/// Tools that change the workspace.
pub const WRITE_TOOLS: &[&str] = &[
    "write_file",
    "edit_file",
    "multi_edit",
    "apply_patch",
    "shell",
];

/// The language-server tools (definition, references and signature of a symbol, asked of
/// the workspace's language servers; trellis-runtime's code intelligence implements them),
/// by the names a workflow's `lsp_integration.tools` lists.
pub const LSP_TOOLS: [&str; 3] = ["find_definition", "get_references", "get_signature"];

/// The result of a call, as the model sees it.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResult {
    /// The tool called.
    pub tool: String,
    /// The text for the model (the error message when `is_error`).
    pub content: String,
    /// The structured result, if any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub data: Option<Value>,
    /// Whether the call failed.
    pub is_error: bool,
    /// Whether the call was cancelled (the agent should stop, not retry).
    pub cancelled: bool,
}

/// Tools that come and go while a run goes on (an MCP server's, listed when it is ready and
/// again when it says its list changed): the registry asks it at every lookup.
pub trait ToolSource: Send + Sync {
    /// The tools available now.
    fn tools(&self) -> Vec<Arc<dyn Tool>>;
    /// The tool called `name`, if available now.
    fn get(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools().into_iter().find(|t| t.spec().name == name)
    }
}

/// Tools by name, with per-role allow lists. An allow-list entry ending in `*` allows every
/// tool whose name starts with what precedes it (`github__*`).
#[derive(Clone, Default)]
pub struct Registry {
    tools: BTreeMap<String, Arc<dyn Tool>>,
    sources: Vec<Arc<dyn ToolSource>>,
    /// Shared until changed, so that a run's registry made from a prepared one is cheap.
    roles: Arc<BTreeMap<String, BTreeSet<String>>>,
    sink: Option<Arc<dyn ToolCallSink>>,
    /// The user's `before_tool` / `after_tool` hooks.
    hooks: Option<Arc<crate::hooks::Hooks>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("tools", &self.tools.keys().collect::<Vec<_>>())
            .field("roles", &self.roles)
            .finish_non_exhaustive()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every built-in tool, with the default roles ([`Registry::default_roles`]) and the
    /// role overrides of `roles` (from [`crate::ToolsConfig::roles`]).
    pub fn builtin(roles: &BTreeMap<String, Vec<String>>) -> Self {
        let mut r = Self::new();
        for tool in crate::builtin::all() {
            r.register(tool);
        }
        for (role, tools) in Self::default_roles() {
            r.allow(&role, tools.iter().map(String::as_str));
        }
        for (role, tools) in roles {
            Arc::make_mut(&mut r.roles).remove(role);
            r.allow(role, tools.iter().map(String::as_str));
        }
        r
    }

    /// The built-in roles: `implementor` (everything), `researcher`, `planner` and
    /// `reviewer` (the read tools).
    pub fn default_roles() -> BTreeMap<String, Vec<String>> {
        let read: Vec<String> = READ_TOOLS.iter().map(|s| (*s).to_owned()).collect();
        let all: Vec<String> = READ_TOOLS
            .iter()
            .chain(WRITE_TOOLS)
            .map(|s| (*s).to_owned())
            .collect();
        BTreeMap::from([
            ("implementor".to_owned(), all),
            ("researcher".to_owned(), read.clone()),
            ("planner".to_owned(), read.clone()),
            ("reviewer".to_owned(), read),
        ])
    }

    /// Adds (or replaces) a tool.
    pub fn register(&mut self, tool: Arc<dyn Tool>) {
        self.tools.insert(tool.spec().name.clone(), tool);
    }

    /// Lets `role` use the named tools (in addition to what it had).
    pub fn allow<'a>(&mut self, role: &str, tools: impl IntoIterator<Item = &'a str>) {
        Arc::make_mut(&mut self.roles)
            .entry(role.to_owned())
            .or_default()
            .extend(tools.into_iter().map(str::to_owned));
    }

    /// Adds tools that are looked up at each call ([`ToolSource`]); a registered tool of
    /// the same name wins.
    pub fn with_source(mut self, source: Arc<dyn ToolSource>) -> Self {
        self.sources.push(source);
        self
    }

    /// The tool called `name`: a registered one, else the first source's that has it.
    fn tool(&self, name: &str) -> Option<Arc<dyn Tool>> {
        self.tools
            .get(name)
            .cloned()
            .or_else(|| self.sources.iter().find_map(|s| s.get(name)))
    }

    /// Gives `scope` (an allow-list key of its own, e.g. one agent of one stage) the tools
    /// `base` may use plus `extra`.
    pub fn derive<'a>(
        &mut self,
        scope: &str,
        base: &str,
        extra: impl IntoIterator<Item = &'a str>,
    ) {
        let mut tools = self.roles.get(base).cloned().unwrap_or_default();
        tools.extend(extra.into_iter().map(str::to_owned));
        Arc::make_mut(&mut self.roles).insert(scope.to_owned(), tools);
    }

    /// Whether `key` is an allow-list key (a role or a scope).
    pub fn has_role(&self, key: &str) -> bool {
        self.roles.contains_key(key)
    }

    /// The allow-list keys (roles and scopes).
    pub fn roles(&self) -> Vec<String> {
        self.roles.keys().cloned().collect()
    }

    /// Records every call into `sink`.
    pub fn with_sink(mut self, sink: Arc<dyn ToolCallSink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// Runs the user's `before_tool` and `after_tool` hooks around every call.
    pub fn with_hooks(mut self, hooks: Arc<crate::hooks::Hooks>) -> Self {
        self.hooks = Some(hooks);
        self
    }

    /// The hooks run around every call ([`Registry::with_hooks`]), if any.
    pub fn hooks(&self) -> Option<&Arc<crate::hooks::Hooks>> {
        self.hooks.as_ref()
    }

    /// Every tool's spec (registered ones, then the sources' current ones).
    pub fn specs(&self) -> Vec<ToolSpec> {
        let mut seen = BTreeSet::new();
        self.tools
            .values()
            .cloned()
            .chain(self.sources.iter().flat_map(|s| s.tools()))
            .filter(|t| seen.insert(t.spec().name.clone()))
            .map(|t| t.spec().clone())
            .collect()
    }

    /// The specs of the tools `role` may use (none for an unknown role), in name order.
    /// Only those specs are cloned (an agent activation asks several times; cloning every
    /// tool's JSON schema each time was a fifth of `trellis serve`'s CPU on the G1 benchmark).
    pub fn specs_for(&self, role: &str) -> Vec<ToolSpec> {
        let Some(allowed) = self.roles.get(role) else {
            return Vec::new();
        };
        if allowed.is_empty() {
            return Vec::new();
        }
        let sourced: Vec<Arc<dyn Tool>> = self.sources.iter().flat_map(|s| s.tools()).collect();
        let mut seen = BTreeSet::new();
        // A name seen before is shadowed (a registered tool wins over a source's).
        let mut specs: Vec<ToolSpec> = self
            .tools
            .values()
            .chain(&sourced)
            .map(|t| t.spec())
            .filter(|s| seen.insert(s.name.as_str()) && allow_listed(allowed, &s.name))
            .cloned()
            .collect();
        specs.sort_by(|a, b| a.name.cmp(&b.name));
        specs
    }

    /// Whether `tool` comes from a [`ToolSource`] (an MCP server's), not a registered one.
    pub fn sourced(&self, tool: &str) -> bool {
        !self.tools.contains_key(tool) && self.sources.iter().any(|s| s.get(tool).is_some())
    }

    /// Whether `tool` exists and only reads ([`Tool::read_only`]).
    pub fn read_only(&self, tool: &str) -> bool {
        self.tool(tool).is_some_and(|t| t.read_only())
    }

    /// Whether `role` may call `tool`.
    pub fn allows(&self, role: &str, tool: &str) -> bool {
        self.roles.get(role).is_some_and(|r| allow_listed(r, tool))
    }

    /// Runs one call for `role`. Never fails: unknown tools, refused roles, bad arguments,
    /// denials and tool errors all come back as a result with `is_error` set, so the agent
    /// loop hands them to the model. Every call is recorded in the sink.
    pub async fn call(
        &self,
        env: &ToolEnv,
        role: &str,
        tool: &str,
        args: Value,
        cancel: CancellationToken,
    ) -> ToolResult {
        self.call_with_progress(env, role, tool, args, cancel, None)
            .await
    }

    /// [`Registry::call`], with the tool's progress reports (if it makes any) sent to
    /// `progress` while it runs.
    pub async fn call_with_progress(
        &self,
        env: &ToolEnv,
        role: &str,
        tool: &str,
        args: Value,
        cancel: CancellationToken,
        progress: Option<ProgressFn>,
    ) -> ToolResult {
        let started_at = now_ms();
        let clock = Instant::now();
        let ctx = ToolContext::new(env.clone(), tool, args.clone(), cancel)
            .with_progress(progress)
            .with_role(role);
        let outcome = match self.tool(tool) {
            None => Err(Error::UnknownTool(tool.to_owned())),
            Some(_) if !self.allows(role, tool) => Err(Error::NotAllowed {
                tool: tool.to_owned(),
                role: role.to_owned(),
            }),
            Some(t) => match self.hook_denial(env, tool, &args).await {
                Some(denial) => Err(Error::Denied(denial)),
                None => t.call(&ctx, args.clone()).await,
            },
        };
        let result = match outcome {
            Ok(out) => ToolResult {
                tool: tool.to_owned(),
                content: out.text,
                data: out.data,
                is_error: false,
                cancelled: false,
            },
            Err(e) => ToolResult {
                tool: tool.to_owned(),
                cancelled: e.is_cancelled(),
                content: e.to_string(),
                data: None,
                is_error: true,
            },
        };
        let result = self.after_hooks(env, &args, result).await;
        if let Some(sink) = &self.sink {
            sink.record(ToolCallRecord {
                id: 0,
                run_id: env.run.clone(),
                node_id: env.node.clone(),
                tool: tool.to_owned(),
                args: args.to_string(),
                decision: ctx.decision().as_str().to_owned(),
                is_error: result.is_error,
                summary: summarize(&result.content, 200),
                duration_ms: i64::try_from(clock.elapsed().as_millis()).unwrap_or(i64::MAX),
                started_at,
            });
        }
        result
    }
}

impl Registry {
    fn hook_scope<'a>(env: &'a ToolEnv, tool: &'a str) -> crate::hooks::HookScope<'a> {
        crate::hooks::HookScope {
            run: env.run.as_ref(),
            node: env.node.as_deref(),
            workflow: env.workflow.as_deref(),
            tool: Some(tool),
            cwd: env.workspace.root(),
        }
    }

    /// Why the `before_tool` hooks deny the call, if one does.
    async fn hook_denial(&self, env: &ToolEnv, tool: &str, args: &Value) -> Option<String> {
        let hooks = self.hooks.as_ref()?;
        if !hooks.any(crate::hooks::HookEvent::BeforeTool) {
            return None;
        }
        let payload = serde_json::json!({ "tool": tool, "arguments": args, "node": env.node });
        let objections = hooks
            .run(
                crate::hooks::HookEvent::BeforeTool,
                Self::hook_scope(env, tool),
                payload,
                true,
            )
            .await;
        objections
            .into_iter()
            .next()
            .map(|o| format!("a before_tool hook refused the call: {o}"))
    }

    /// `result` with what the `after_tool` hooks objected added for the agent.
    async fn after_hooks(&self, env: &ToolEnv, args: &Value, mut result: ToolResult) -> ToolResult {
        let Some(hooks) = &self.hooks else {
            return result;
        };
        if result.cancelled || !hooks.any(crate::hooks::HookEvent::AfterTool) {
            return result;
        }
        let payload = serde_json::json!({
            "tool": result.tool,
            "arguments": args,
            "node": env.node,
            "isError": result.is_error,
            "output": result.content.chars().take(4000).collect::<String>(),
        });
        let tool = result.tool.clone();
        for o in hooks
            .run(
                crate::hooks::HookEvent::AfterTool,
                Self::hook_scope(env, &tool),
                payload,
                false,
            )
            .await
        {
            result.content.push_str(&format!("\n[after_tool hook {o}]"));
        }
        result
    }
}

impl crate::dag::Catalog for Registry {
    fn spec(&self, tool: &str) -> Option<ToolSpec> {
        self.tool(tool).map(|t| t.spec().clone())
    }

    fn parallel_safe(&self, tool: &str) -> bool {
        self.read_only(tool)
    }
}

/// Whether an allow list names `tool`, exactly or by a `prefix*` entry.
fn allow_listed(allowed: &BTreeSet<String>, tool: &str) -> bool {
    allowed.contains(tool)
        || allowed
            .iter()
            .filter_map(|a| a.strip_suffix('*'))
            .any(|prefix| tool.starts_with(prefix))
}
