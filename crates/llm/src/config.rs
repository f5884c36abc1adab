//! The `[models]`, `[roles]` and `[budgets]` configuration sections (file types: every
//! field optional, unknown keys rejected by `trellis-config`).

use std::collections::BTreeMap;
use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::budget::{Budget, Limit, Price};
use crate::structured::StructuredMode;

/// `[models]`: named profiles and the default.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ModelsSection {
    /// The profile used when a role has none (default: `local`).
    pub default: Option<String>,
    /// Where built-in model weights are cached (default: `~/.cache/trellis/models`).
    pub cache_dir: Option<PathBuf>,
    /// Profiles by name. `local` and `tiny` are built in; a profile of the same name
    /// overrides their fields one by one.
    pub profiles: BTreeMap<String, ProfileConfig>,
}

/// Which provider a profile uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ProviderName {
    /// In-process llama.cpp.
    Embedded,
    /// OpenAI-compatible chat completions.
    Openai,
    /// Anthropic Messages.
    Anthropic,
    /// Ollama's native chat API (which takes the context window with each request).
    Ollama,
}

/// How the embedded model is asked for tool calls and structured answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolFormat {
    /// Output constrained by a llama.cpp grammar: a tool call is `{"tool": NAME,
    /// "arguments": {…}}`, a structured answer the JSON Schema's object; always parses.
    #[default]
    Grammar,
    /// The model's own format, free generation: tools in the system prompt as Qwen2.5's chat
    /// template writes them, calls read from `<tool_call>` blocks; a structured answer is
    /// plain text that must parse.
    Native,
}

impl ToolFormat {
    /// The configuration value.
    pub fn as_str(self) -> &'static str {
        match self {
            ToolFormat::Grammar => "grammar",
            ToolFormat::Native => "native",
        }
    }
}

/// One model profile (`[models.profiles.NAME]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ProfileConfig {
    /// `embedded`, `openai`, `anthropic` or `ollama`.
    pub provider: Option<ProviderName>,
    /// The model: the identifier the endpoint expects, or for `embedded` a built-in model
    /// name (`smollm2-135m-instruct`, `tinycoder-random`).
    pub model: Option<String>,
    /// `embedded` only: a GGUF file to load instead of a built-in model.
    pub path: Option<PathBuf>,
    /// Endpoint base URL including the version segment (`http://localhost:8080/v1`); for
    /// `ollama` the server's address (`http://localhost:11434`, the default; a trailing `/v1`
    /// or `/api` is dropped).
    pub base_url: Option<String>,
    /// The environment variable holding the API key (never the key itself).
    pub api_key_env: Option<String>,
    /// Extra HTTP headers.
    pub headers: BTreeMap<String, String>,
    /// Default maximum tokens to generate.
    pub max_tokens: Option<u32>,
    /// Default temperature.
    pub temperature: Option<f32>,
    /// `embedded`: context size in tokens. Remote: the server's context window; unset, it is
    /// asked of the server (llama-server, Ollama, a `/models` list) or taken from the table
    /// of OpenAI and Anthropic models, else 4096 with a warning; a smaller window reported
    /// by the server wins over this value. `ollama`: the window each request sets
    /// (`options.num_ctx`), at most the model's trained length; unset, the one Ollama would
    /// use (the loaded model's, the Modelfile's `num_ctx`, else 4096).
    pub context: Option<u32>,
    /// `embedded`: CPU threads.
    pub threads: Option<u32>,
    /// `embedded`: sampling seed.
    pub seed: Option<u32>,
    /// Remote: how structured output is requested (`native`, `json_object`, `prompt`, `tool`).
    pub structured_output: Option<StructuredMode>,
    /// `embedded`: how tools and structured answers are asked for (`grammar`, `native`).
    pub tool_format: Option<ToolFormat>,
    /// Remote: seconds without data before a call fails (default 120).
    pub timeout_secs: Option<u64>,
    /// Remote: retries on 429/5xx/timeouts (default 4).
    pub max_retries: Option<u32>,
    /// Prices, for cost budgets.
    pub price: Option<Price>,
    /// A note shown by `trellis models list`.
    pub description: Option<String>,
}

impl ProfileConfig {
    /// `self` with every unset field taken from `base`.
    pub fn over(self, base: &ProfileConfig) -> ProfileConfig {
        let mut headers = base.headers.clone();
        headers.extend(self.headers);
        ProfileConfig {
            provider: self.provider.or(base.provider),
            model: self.model.or_else(|| base.model.clone()),
            path: self.path.or_else(|| base.path.clone()),
            base_url: self.base_url.or_else(|| base.base_url.clone()),
            api_key_env: self.api_key_env.or_else(|| base.api_key_env.clone()),
            headers,
            max_tokens: self.max_tokens.or(base.max_tokens),
            temperature: self.temperature.or(base.temperature),
            context: self.context.or(base.context),
            threads: self.threads.or(base.threads),
            seed: self.seed.or(base.seed),
            structured_output: self.structured_output.or(base.structured_output),
            tool_format: self.tool_format.or(base.tool_format),
            timeout_secs: self.timeout_secs.or(base.timeout_secs),
            max_retries: self.max_retries.or(base.max_retries),
            price: self.price.or(base.price),
            description: self.description.or_else(|| base.description.clone()),
        }
    }
}

/// `[roles]`: which profile each agent role uses (unset roles use `default`, then
/// `models.default`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct RolesSection {
    /// Picks the workflow and stages.
    pub orchestrator: Option<String>,
    /// The retrieval agent.
    pub retrieval: Option<String>,
    /// Planning, assessment and reasoning.
    pub planner: Option<String>,
    /// Code generation.
    pub coder: Option<String>,
    /// Writing and running tests.
    pub tester: Option<String>,
    /// Review.
    pub reviewer: Option<String>,
    /// Summaries and compression.
    pub summariser: Option<String>,
    /// Channel discussions about the codebase (`trellis chat`).
    pub discussion: Option<String>,
    /// Any other role.
    pub default: Option<String>,
}

/// The role names, in display order.
pub const ROLES: &[&str] = &[
    "orchestrator",
    "retrieval",
    "planner",
    "coder",
    "tester",
    "reviewer",
    "summariser",
    "discussion",
    "default",
];

impl RolesSection {
    /// The profile assigned to `role` in this section, if any.
    pub fn get(&self, role: &str) -> Option<&str> {
        match role {
            "orchestrator" => self.orchestrator.as_deref(),
            "retrieval" => self.retrieval.as_deref(),
            "planner" => self.planner.as_deref(),
            "coder" => self.coder.as_deref(),
            "tester" => self.tester.as_deref(),
            "reviewer" => self.reviewer.as_deref(),
            "summariser" => self.summariser.as_deref(),
            "discussion" => self.discussion.as_deref(),
            "default" => self.default.as_deref(),
            _ => None,
        }
    }
}

/// `[budgets]`: hard limits per run, stage and agent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct BudgetsSection {
    /// The whole run.
    pub run: Limit,
    /// Per stage name.
    pub stages: BTreeMap<String, Limit>,
    /// Per agent name.
    pub agents: BTreeMap<String, Limit>,
}

impl From<BudgetsSection> for Budget {
    fn from(s: BudgetsSection) -> Self {
        Budget {
            run: s.run,
            stages: s.stages,
            agents: s.agents,
        }
    }
}
