//! Provider-neutral request, stream and response types.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Who said a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions.
    System,
    /// The user (or the agent loop on its behalf).
    User,
    /// The model.
    Assistant,
    /// A tool result answering an assistant tool call.
    Tool,
}

impl Role {
    /// The lowercase wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }
}

/// Reasoning the model emitted before answering (Anthropic thinking blocks, `reasoning_content`
/// of OpenAI-compatible servers). The signature must be sent back unchanged in later turns.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Thinking {
    /// The reasoning text.
    pub text: String,
    /// Anthropic's opaque signature of the block.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signature: Option<String>,
}

/// One message of a conversation.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// The author.
    pub role: Role,
    /// The text (may be empty for an assistant turn that only calls tools).
    pub content: String,
    /// Tool calls made by an assistant turn.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// For [`Role::Tool`]: the call this result answers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// For assistant turns: the reasoning that preceded them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
}

impl Message {
    fn new(role: Role, content: impl Into<String>) -> Self {
        Self {
            role,
            content: content.into(),
            tool_calls: Vec::new(),
            tool_call_id: None,
            thinking: None,
        }
    }

    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self::new(Role::System, content)
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self::new(Role::User, content)
    }

    /// An assistant message.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self::new(Role::Assistant, content)
    }

    /// A tool result.
    pub fn tool_result(call_id: impl Into<String>, content: impl Into<String>) -> Self {
        Self {
            tool_call_id: Some(call_id.into()),
            ..Self::new(Role::Tool, content)
        }
    }
}

/// A tool the model may call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The name the model uses.
    pub name: String,
    /// What it does.
    pub description: String,
    /// JSON Schema of the arguments object.
    pub parameters: Value,
}

/// A complete tool call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's call id (generated for providers without ids).
    pub id: String,
    /// The tool name.
    pub name: String,
    /// The arguments as sent by the model (JSON text; may be invalid JSON).
    pub arguments: String,
}

impl ToolCall {
    /// The arguments parsed as JSON (`{}` when empty).
    pub fn arguments_json(&self) -> Result<Value, serde_json::Error> {
        if self.arguments.trim().is_empty() {
            return Ok(Value::Object(serde_json::Map::new()));
        }
        serde_json::from_str(&self.arguments)
    }

    /// The arguments as a JSON object, for wire formats that carry them as one (Anthropic's
    /// `input`, Ollama's `arguments`): `{}` when they are empty, not JSON, or not an object.
    pub fn arguments_object(&self) -> Value {
        match self.arguments_json() {
            Ok(v @ Value::Object(_)) => v,
            _ => Value::Object(serde_json::Map::new()),
        }
    }
}

/// A request for a JSON answer matching a schema.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResponseFormat {
    /// A short identifier for the schema (OpenAI requires one).
    pub name: String,
    /// The JSON Schema.
    pub schema: Value,
}

/// One model call.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// The conversation, system messages included.
    pub messages: Vec<Message>,
    /// Tools the model may call.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tools: Vec<ToolSpec>,
    /// Maximum tokens to generate (the profile's default when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    /// Sampling temperature (the profile's default when `None`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature: Option<f32>,
    /// Ask for a JSON answer matching a schema.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_format: Option<ResponseFormat>,
    /// With `tools`: the schema an answer that calls no tool follows (an agent's final
    /// report). A provider that constrains output (the embedded model) makes the final
    /// answer that object, so the caller needs no second call to get it; the others leave
    /// it to the prompt's instructions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub final_format: Option<ResponseFormat>,
    /// With `tools`: whether the answer must be a tool call, and of which tools. Providers
    /// that can force it do (OpenAI `tool_choice: "required"` or a named function,
    /// Anthropic `{"type": "any"}` or a named tool unless thinking is on — both sending only
    /// the callable tools when [`ToolChoice::OneOf`] narrows them — and the embedded model's
    /// grammar without the final-answer alternative and the other tools); the others leave
    /// it to the model.
    #[serde(default, skip_serializing_if = "ToolChoice::is_auto")]
    pub tool_choice: ToolChoice,
    /// Token budget for thinking (Anthropic extended thinking); `None` disables it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_budget: Option<u32>,
    /// Stop sequences.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stop: Vec<String>,
    /// Sampling seed (the profile's when `None`): with a temperature above 0, requests
    /// that differ only in their seed draw different answers — the embedded model and
    /// OpenAI-compatible servers take it (OpenAI `seed`); Anthropic has none and ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u32>,
    /// Lowers a token's odds by how often the answer has already used it (OpenAI
    /// `frequency_penalty`, 0 = off): against a small greedy model repeating its sentences.
    /// The embedded model applies it over the last 256 tokens of the answer, OpenAI-wire
    /// servers get `frequency_penalty`; Anthropic has none and ignores it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub frequency_penalty: Option<f32>,
    /// A text answer's shape, as a llama.cpp GBNF grammar (root rule `root`): the embedded
    /// model can write nothing else when the request offers no tools and asks for no JSON
    /// (an edit-block answer whose SEARCH parts are lines it was shown,
    /// docs/workflows.md); the other providers leave the shape to the prompt's
    /// instructions and ignore it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grammar: Option<String>,
}

/// Whether a request with tools may be answered without calling one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ToolChoice {
    /// A tool call or a final answer, as the model decides.
    #[default]
    Auto,
    /// A tool call (one of the offered tools).
    Required,
    /// A call of one of these offered tools (the others stay offered, so a prompt that
    /// lists them is unchanged). Names not offered are ignored; when none is offered this
    /// is [`ToolChoice::Auto`].
    OneOf(Vec<String>),
}

impl ToolChoice {
    /// Whether this is the default, [`ToolChoice::Auto`].
    pub fn is_auto(&self) -> bool {
        *self == Self::Auto
    }

    /// Whether a call is required of a request offering `tools` (never when none are, nor
    /// when none of [`ToolChoice::OneOf`]'s names is offered).
    pub fn requires_call(&self, tools: &[ToolSpec]) -> bool {
        match self {
            Self::Auto => false,
            Self::Required => !tools.is_empty(),
            Self::OneOf(names) => tools.iter().any(|t| names.contains(&t.name)),
        }
    }

    /// The tools of `tools` an answer may call: those [`ToolChoice::OneOf`] names (in
    /// `tools`' order), or all of them — also when it names none of them.
    pub fn callable<'a>(&self, tools: &'a [ToolSpec]) -> Vec<&'a ToolSpec> {
        if let Self::OneOf(names) = self
            && self.requires_call(tools)
        {
            return tools.iter().filter(|t| names.contains(&t.name)).collect();
        }
        tools.iter().collect()
    }
}

impl ChatRequest {
    /// A request with these messages and defaults for everything else.
    pub fn new(messages: Vec<Message>) -> Self {
        Self {
            messages,
            ..Self::default()
        }
    }
}

/// Why the model stopped.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// Natural end or a stop sequence.
    Stop,
    /// `max_tokens` reached.
    Length,
    /// The model called tools and waits for their results.
    ToolCalls,
    /// Filtered or refused.
    ContentFilter,
    /// The call was cancelled.
    Cancelled,
    /// Anything else the endpoint reported.
    Other(String),
}

/// Token usage of one call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt (input) tokens.
    pub prompt_tokens: u64,
    /// Generated (output) tokens, thinking included.
    pub completion_tokens: u64,
    /// Prompt tokens served from a provider-side cache, when reported.
    #[serde(default)]
    pub cached_prompt_tokens: u64,
}

impl Usage {
    /// Prompt plus completion tokens.
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }

    /// Adds another call's usage.
    pub fn add(&mut self, other: &Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cached_prompt_tokens += other.cached_prompt_tokens;
    }
}

/// One item of a response stream.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// Answer text.
    TextDelta {
        /// The new text.
        text: String,
    },
    /// Reasoning text.
    ThinkingDelta {
        /// The new text.
        text: String,
    },
    /// The signature closing a thinking block (Anthropic).
    ThinkingSignature {
        /// The signature.
        signature: String,
    },
    /// A piece of a tool call. The first delta of a call carries its id and name; later
    /// ones append to the arguments.
    ToolCallDelta {
        /// Position of the call in this response.
        index: usize,
        /// The call id (first delta).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        id: Option<String>,
        /// The tool name (first delta).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        name: Option<String>,
        /// Text appended to the JSON arguments.
        arguments: String,
    },
    /// Token usage (may arrive more than once; later values replace earlier ones).
    Usage {
        /// The usage so far.
        usage: Usage,
    },
    /// How far a call whose answer is not streamed yet has got: the prompt being read
    /// (`prompt_done` of `prompt_tokens`, counting a reused cached prefix as done) and the
    /// answer tokens generated but held back (a tool call is sent whole when it is complete).
    /// Local providers send it so that a long silent wait shows its progress; it carries no
    /// content and changes nothing in the response.
    Progress {
        /// Prompt tokens of the call.
        prompt_tokens: u64,
        /// Prompt tokens read so far.
        prompt_done: u64,
        /// Answer tokens generated so far and not yet sent.
        generated: u64,
    },
    /// The end of the response; always the last event of a successful stream.
    Finish {
        /// Why it ended.
        reason: FinishReason,
    },
}

/// A collected response.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The answer text.
    pub text: String,
    /// Reasoning, when the model emitted any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking: Option<Thinking>,
    /// Tool calls, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tool_calls: Vec<ToolCall>,
    /// Token usage.
    pub usage: Usage,
    /// Why the model stopped (`None` only while collecting).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finish: Option<FinishReason>,
}

impl Completion {
    /// Folds one stream event into the completion.
    pub fn push(&mut self, event: StreamEvent) {
        match event {
            StreamEvent::TextDelta { text } => self.text.push_str(&text),
            StreamEvent::ThinkingDelta { text } => {
                self.thinking.get_or_insert_with(Thinking::default).text += &text;
            }
            StreamEvent::ThinkingSignature { signature } => {
                self.thinking
                    .get_or_insert_with(Thinking::default)
                    .signature = Some(signature);
            }
            StreamEvent::ToolCallDelta {
                index,
                id,
                name,
                arguments,
            } => {
                while self.tool_calls.len() <= index {
                    let n = self.tool_calls.len();
                    self.tool_calls.push(ToolCall {
                        id: format!("call_{n}"),
                        name: String::new(),
                        arguments: String::new(),
                    });
                }
                let call = &mut self.tool_calls[index];
                if let Some(id) = id {
                    call.id = id;
                }
                if let Some(name) = name.filter(|n| !n.is_empty()) {
                    call.name = name;
                }
                call.arguments.push_str(&arguments);
            }
            StreamEvent::Usage { usage } => self.usage = usage,
            StreamEvent::Finish { reason } => self.finish = Some(reason),
            StreamEvent::Progress { .. } => {}
        }
    }

    /// The assistant message to append to the conversation.
    pub fn to_message(&self) -> Message {
        Message {
            role: Role::Assistant,
            content: self.text.clone(),
            tool_calls: self.tool_calls.clone(),
            tool_call_id: None,
            thinking: self.thinking.clone(),
        }
    }
}
