//! The attribute names and values Trellis's spans use: the OpenTelemetry GenAI semantic
//! conventions as of semantic conventions 1.44.0 (the last release that carries them
//! before they moved to their own GenAI conventions repository; status Development), plus
//! Trellis's own `trellis.*` attributes.
//!
//! The conventions change between releases (`gen_ai.system` became `gen_ai.provider.name`,
//! the prompt and completion events became `gen_ai.input.messages` / `gen_ai.output.messages`)
//! and the Rust semantic-conventions crate deprecated its `gen_ai` constants, so Trellis keeps
//! its own, in one module named after the release they follow: moving to a newer release is a
//! new module and the `semconv` alias in `lib.rs` pointed at it.

/// The schema URL of the release these names follow (a resource's or scope's `schemaUrl`).
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.44.0";

/// `gen_ai.operation.name`: what a span does (values in [`op`]).
pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
/// `gen_ai.request.model`: the model asked for.
pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
/// `gen_ai.usage.input_tokens`: prompt tokens of a model call.
pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// `gen_ai.usage.output_tokens`: generated tokens of a model call.
pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// `gen_ai.usage.cache_read.input_tokens`: prompt tokens served from a provider's cache.
pub const GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: &str = "gen_ai.usage.cache_read.input_tokens";
/// `gen_ai.agent.id`: the agent's session id.
pub const GEN_AI_AGENT_ID: &str = "gen_ai.agent.id";
/// `gen_ai.agent.name`: the agent's role.
pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
/// `gen_ai.conversation.id`: the session a model or tool call belongs to.
pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// `gen_ai.workflow.name`: the workflow a run follows.
pub const GEN_AI_WORKFLOW_NAME: &str = "gen_ai.workflow.name";
/// `gen_ai.tool.name`.
pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
/// `gen_ai.tool.call.id`.
pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// `gen_ai.tool.type`: `function` (a built-in tool), `extension` (an MCP server's),
/// `datastore` (retrieval).
pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
/// `gen_ai.input.messages` (content: only with `capture_content`).
pub const GEN_AI_INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// `gen_ai.output.messages` (content: only with `capture_content`).
pub const GEN_AI_OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// `gen_ai.tool.call.arguments` (content: only with `capture_content`).
pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
/// `gen_ai.tool.call.result` (content: only with `capture_content`).
pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
/// `error.type`: why a span failed (a short class, not the message).
pub const ERROR_TYPE: &str = "error.type";
/// `service.name` (a resource attribute).
pub const SERVICE_NAME: &str = "service.name";
/// `service.version` (a resource attribute).
pub const SERVICE_VERSION: &str = "service.version";

/// Values of [`GEN_AI_OPERATION_NAME`].
pub mod op {
    /// A run of a workflow.
    pub const INVOKE_WORKFLOW: &str = "invoke_workflow";
    /// An agent's activation.
    pub const INVOKE_AGENT: &str = "invoke_agent";
    /// A model call (a turn).
    pub const CHAT: &str = "chat";
    /// A tool call.
    pub const EXECUTE_TOOL: &str = "execute_tool";
}

/// Values of [`GEN_AI_TOOL_TYPE`].
pub mod tool_type {
    /// A tool run by the agent's own process.
    pub const FUNCTION: &str = "function";
    /// A tool of an external system (an MCP server's).
    pub const EXTENSION: &str = "extension";
    /// A tool that reads a data store (retrieval, search).
    pub const DATASTORE: &str = "datastore";
}

/// Trellis's own attributes (`trellis.*`).
pub mod trellis {
    /// The run id.
    pub const RUN_ID: &str = "trellis.run.id";
    /// The graph a run started with (`planning` for a workflow run that plans first).
    pub const RUN_GRAPH: &str = "trellis.run.graph";
    /// How a run ended (`succeeded`, `failed`, `cancelled`, or `waitingInput` when it paused).
    pub const RUN_STATUS: &str = "trellis.run.status";
    /// A node (stage) id.
    pub const NODE_ID: &str = "trellis.node.id";
    /// A node's activation number.
    pub const NODE_ATTEMPT: &str = "trellis.node.attempt";
    /// The state an activation ended in.
    pub const NODE_STATE: &str = "trellis.node.state";
    /// The template a spawned node runs.
    pub const NODE_TEMPLATE: &str = "trellis.node.template";
    /// The node that spawned a node.
    pub const NODE_PARENT: &str = "trellis.node.parent";
    /// A session id.
    pub const SESSION_ID: &str = "trellis.session.id";
    /// A turn number within its session.
    pub const TURN: &str = "trellis.turn";
    /// The model profile a call used.
    pub const MODEL_PROFILE: &str = "trellis.model.profile";
    /// The cost of a model call in US dollars.
    pub const COST_USD: &str = "trellis.usage.cost_usd";
    /// How a tool call ended (`ok`, `error`, `denied`, `interrupted`, `cancelled`).
    pub const TOOL_STATUS: &str = "trellis.tool.status";
    /// Set on a span whose end was not recorded (the run was still going, or its process
    /// stopped): it ends at the last event seen.
    pub const UNFINISHED: &str = "trellis.span.unfinished";
}
