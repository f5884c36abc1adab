//! The embedded default model: a GGUF run in-process by llama.cpp (`llama-cpp-2`).
//!
//! Generation runs on the model's own thread (`worker`), one token at a time, checking
//! the cancellation token and the consumer between tokens; that thread keeps a few contexts
//! whose KV caches hold recent conversations, so a growing conversation decodes only what
//! is new (the reused count is reported as `cached_prompt_tokens`). Structured output compiles the JSON Schema to a
//! llama.cpp grammar (llama.cpp's own `json_schema_to_grammar`, the converter its server
//! uses), so the answer always parses. Sampling is free-first: the sampler picks a token
//! from the full distribution and the grammar only checks that one token; only when the
//! grammar rejects it is the grammar applied to the whole vocabulary and the token
//! re-sampled (about 2× faster than constraining every step, identical greedy output).
//! The grammar sampler is advanced exactly once per token with `accept` (never through
//! `sample`, which would advance it a second time).
//!
//! Tools and structured answers come in two formats (`tool_format` of the profile,
//! [`ToolFormat`]):
//! - `grammar` (the default): when tools are offered, the output is constrained to
//!   `{"tool": NAME, "arguments": {…}}` (name first) or the final answer — the request's
//!   `final_format` object when it has one, else `{"answer": "…"}` — and mapped to a tool
//!   call or text; past calls are written back in the same name-first form. A
//!   `response_format` answer is constrained by the schema's grammar.
//! - `native`: the model's own template ([`native`]): the tools' signatures in the system
//!   prompt as Qwen2.5's GGUF template writes them, free generation, `<tool_call>` blocks
//!   parsed into calls (an offered tool, object arguments); a final or structured answer is
//!   plain text that must parse as the JSON object.
//!
//! A request with its own grammar ([`ChatRequest::grammar`]) and no tools is held to it in
//! either format, sampled the same free-first way.
//!
//! Which the coder model follows more reliably is measured on the committed prompt set
//! (`fixtures/prompt-set`, `trellis-prompt-bench`; results in docs/models.md).

use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::token::LlamaToken;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_protocol::canonical::to_canonical_string;

pub use crate::config::ToolFormat;
use crate::download::Builtin;
use crate::provider::{ChatStream, ModelProvider, ProviderInfo, ProviderKind, spawn_stream};
use crate::structured::schema_instruction;
use crate::tokens::TokenCount;
use crate::types::{ChatRequest, Message, Role, ToolSpec};
use crate::{Error, Result};

pub mod native;
mod order;
mod sample;
mod worker;

#[cfg(test)]
use sample::TextOut;

/// Where the weights come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelSource {
    /// A built-in model, fetched into `cache_dir` on first use.
    Builtin {
        /// Which.
        model: Builtin,
        /// The model cache directory.
        cache_dir: PathBuf,
    },
    /// A GGUF file on disk.
    Path(PathBuf),
}

/// Runtime settings.
#[derive(Clone, Debug, PartialEq)]
pub struct EmbeddedSettings {
    /// Upper bound of the context (prompt + output) in tokens.
    pub context: u32,
    /// CPU threads for generation and prompt processing (default: the cores available to
    /// the process, at most 8).
    pub threads: u32,
    /// Default `max_tokens`.
    pub max_tokens: u32,
    /// Default temperature (0 = greedy).
    pub temperature: f32,
    /// Sampling seed.
    pub seed: u32,
    /// Keep generating past end-of-generation tokens until `max_tokens` (benchmarks only).
    pub ignore_eos: bool,
    /// How tool calls and structured answers are asked for.
    pub tool_format: ToolFormat,
}

impl Default for EmbeddedSettings {
    fn default() -> Self {
        Self {
            context: 4096,
            threads: default_threads(),
            max_tokens: 512,
            temperature: 0.0,
            seed: 42,
            ignore_eos: false,
            tool_format: ToolFormat::default(),
        }
    }
}

/// The cores available to the process, at most 8 (llama.cpp gains little past the
/// physical cores, and a small model's matrices are too small to share among many threads).
fn default_threads() -> u32 {
    std::thread::available_parallelism()
        .map_or(1, |n| u32::try_from(n.get()).unwrap_or(1))
        .clamp(1, 8)
}

struct Loaded {
    model: Arc<LlamaModel>,
    template: Option<LlamaChatTemplate>,
    /// The model's generation thread (see [`worker`]): one generation at a time, each
    /// reusing the cached prefix of its conversation.
    worker: std::sync::mpsc::Sender<worker::Work>,
}

/// The embedded llama.cpp provider. Cheap to clone; clones share the loaded model.
#[derive(Clone)]
pub struct EmbeddedProvider {
    inner: Arc<Inner>,
}

struct Inner {
    info: ProviderInfo,
    source: ModelSource,
    settings: EmbeddedSettings,
    loaded: tokio::sync::OnceCell<Arc<Loaded>>,
}

/// The process-wide llama.cpp backend, initialised on first use. Everything in Trellis that
/// runs llama.cpp (this chat model and trellis-index's embedding model) takes it from here, so
/// it is initialised exactly once.
pub fn backend() -> Result<&'static LlamaBackend> {
    static BACKEND: OnceLock<std::result::Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            llama_cpp_2::send_logs_to_tracing(
                llama_cpp_2::LogOptions::default().with_logs_enabled(false),
            );
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| Error::Embedded(format!("cannot initialise llama.cpp: {e}")))
}

fn embedded(e: impl std::fmt::Display) -> Error {
    Error::Embedded(e.to_string())
}

impl EmbeddedProvider {
    /// A provider for `source`; nothing is loaded until the first call (or
    /// [`ModelProvider::prepare`]).
    pub fn new(profile: &str, source: ModelSource, settings: EmbeddedSettings) -> Self {
        let model = match &source {
            ModelSource::Builtin { model, .. } => model.file().to_string(),
            ModelSource::Path(p) => p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            ),
        };
        Self {
            inner: Arc::new(Inner {
                info: ProviderInfo {
                    profile: profile.to_string(),
                    kind: ProviderKind::Embedded,
                    model,
                    // Only a grammar holds the answer to the schema.
                    native_structured_output: settings.tool_format == ToolFormat::Grammar,
                    context_window: Some(settings.context),
                },
                source,
                settings,
                loaded: tokio::sync::OnceCell::new(),
            }),
        }
    }

    /// The settings in use.
    pub fn settings(&self) -> &EmbeddedSettings {
        &self.inner.settings
    }
}

impl Inner {
    async fn load(&self) -> Result<Arc<Loaded>> {
        self.loaded
            .get_or_try_init(|| async {
                let path = match &self.source {
                    ModelSource::Builtin { model, cache_dir } => {
                        model.ensure(cache_dir, true).await?
                    }
                    ModelSource::Path(p) => p.clone(),
                };
                if !path.is_file() {
                    return Err(Error::Embedded(format!(
                        "model file {} does not exist (set models.profiles.<name>.path)",
                        path.display()
                    )));
                }
                tokio::task::spawn_blocking(move || -> Result<Arc<Loaded>> {
                    let backend = backend()?;
                    let model =
                        LlamaModel::load_from_file(backend, &path, &LlamaModelParams::default())
                            .map_err(|e| embedded(format!("loading {}: {e}", path.display())))?;
                    let template = model.chat_template(None).ok();
                    let model = Arc::new(model);
                    let worker = worker::spawn(Arc::clone(&model))?;
                    Ok(Arc::new(Loaded {
                        model,
                        template,
                        worker,
                    }))
                })
                .await
                .map_err(embedded)?
            })
            .await
            .cloned()
    }
}

/// What the model is asked to produce.
enum Output {
    Text,
    /// A JSON value constrained by this grammar.
    Json(String),
    /// A tool call or an answer, constrained by this grammar.
    Tools(String),
    /// Text constrained by the request's own grammar ([`ChatRequest::grammar`]).
    Grammar(String),
    /// Free text whose `<tool_call>` blocks naming one of these tools become calls.
    Native(Vec<String>),
}

struct Job {
    prompt: String,
    output: Output,
    max_tokens: u32,
    temperature: f32,
    seed: u32,
    frequency_penalty: f32,
    stop: Vec<String>,
}

impl ModelProvider for EmbeddedProvider {
    fn info(&self) -> &ProviderInfo {
        &self.inner.info
    }

    fn prepare(&self) -> futures::future::BoxFuture<'_, Result<()>> {
        Box::pin(async move { self.inner.load().await.map(|_| ()) })
    }

    fn count_tokens(&self, request: &ChatRequest) -> Result<TokenCount> {
        let Some(loaded) = self.inner.loaded.get() else {
            return Ok(crate::tokens::estimate_request(request));
        };
        let job = build_job(loaded, request, &self.inner.settings)?;
        let tokens = tokenize(&loaded.model, &job.prompt)?;
        Ok(TokenCount {
            tokens: tokens.len() as u64,
            exact: true,
        })
    }

    fn stream(&self, request: ChatRequest, cancel: CancellationToken) -> ChatStream {
        let inner = Arc::clone(&self.inner);
        spawn_stream(&self.inner.info.profile, move |tx| async move {
            let loaded = inner.load().await?;
            let job = build_job(&loaded, &request, &inner.settings)?;
            let (done, finished) = tokio::sync::oneshot::channel();
            let stopped = || embedded("the model's generation thread stopped");
            loaded
                .worker
                .send(worker::Work {
                    job,
                    settings: inner.settings.clone(),
                    cancel,
                    tx,
                    done,
                })
                .map_err(|_| stopped())?;
            finished.await.map_err(|_| stopped())?
        })
    }
}

fn tokenize(model: &LlamaModel, prompt: &str) -> Result<Vec<LlamaToken>> {
    // The chat template writes the special tokens itself; parse them, add BOS only if the
    // vocabulary wants it (the tokenizer decides).
    Ok(model.vocab().tokenize(prompt.as_bytes(), true, true))
}

fn grammar_for(schema: &Value) -> Result<String> {
    // The grammar fixes the order of an object's keys: the schema's, so sort it.
    grammar_of(&to_canonical_string(schema).map_err(embedded)?)
}

/// The grammar of a JSON Schema given as text (keys in the order written).
fn grammar_of(schema: &str) -> Result<String> {
    llama_cpp_2::json_schema_to_grammar(schema)
        .map_err(|e| embedded(format!("cannot compile the JSON Schema to a grammar: {e}")))
}

/// The union schema for tool use, as JSON text: a call of one tool, or the final answer —
/// the request's `final_format` when it has one (a report the caller parses as it is, so no
/// second call is needed to get it), else `{"answer": "…"}`; only a call when the request
/// requires one ([`ToolChoice::Required`](crate::ToolChoice)), and only a call of the tools
/// [`ToolChoice::OneOf`](crate::ToolChoice) names when it narrows them — with the same
/// instruction.
///
/// The text is written by hand because llama.cpp's converter keeps an object's keys in the
/// order the schema lists them, and the grammar makes the model write them in that order: a
/// tool call must name the tool before its arguments (sorted keys would put `arguments`
/// first, making the model choose the arguments' shape before the tool), and the arguments in
/// their writing order ([`order`]: required ones first, as listed). Everything else is
/// canonical (sorted) so the grammar is the same for the same request.
fn tools_schema(request: &ChatRequest) -> Result<(String, String)> {
    let canonical = |v: &Value| to_canonical_string(v).map_err(embedded);
    let mut alternatives = Vec::with_capacity(request.tools.len() + 1);
    // A choice among some tools narrows the grammar only; the instruction lists them all.
    for t in request.tool_choice.callable(&request.tools) {
        alternatives.push(format!(
            "{{\"type\":\"object\",\"properties\":{{\"tool\":{{\"const\":{}}},\"arguments\":{}}},\
             \"required\":[\"tool\",\"arguments\"]}}",
            canonical(&Value::String(t.name.clone()))?,
            serde_json::to_string(&order::schema(&t.parameters)).map_err(embedded)?
        ));
    }
    // The instruction is the same whether or not a call is required (the grammar alone
    // enforces it): it sits in the system prompt, so changing it would make the next call
    // re-read everything after it instead of reusing the cached prefix.
    let mut instruction =
        String::from("You can call one tool by replying {\"tool\": NAME, \"arguments\": {...}}");
    let required = request.tool_choice.requires_call(&request.tools);
    match &request.final_format {
        Some(format) => {
            if !required {
                alternatives.push(canonical(&format.schema)?);
            }
            instruction.push_str(
                ", or, when you are done, reply with your final answer: the JSON object \
                 described under OUTPUT FORMAT.",
            );
        }
        None => {
            if !required {
                alternatives.push(canonical(&json!({
                    "type": "object",
                    "properties": {"answer": {"type": "string"}},
                    "required": ["answer"],
                }))?);
            }
            instruction.push_str(", or reply directly with {\"answer\": \"...\"}.");
        }
    }
    instruction.push_str(" Tools:");
    // A description the system prompt already carries (an agent's TOOLS AVAILABLE) is not
    // written twice: the name and the arguments' schema are enough here.
    let system: Vec<&str> = request
        .messages
        .iter()
        .filter(|m| m.role == Role::System)
        .map(|m| m.content.as_str())
        .collect();
    for t in &request.tools {
        let described =
            !t.description.is_empty() && system.iter().any(|s| s.contains(t.description.as_str()));
        instruction.push_str(&format!("\n- {}: ", t.name));
        if !described {
            instruction.push_str(&t.description);
            instruction.push(' ');
        }
        instruction.push_str(&format!(
            "Arguments schema: {}",
            serde_json::to_string(&order::schema(&t.parameters)).unwrap_or_default()
        ));
    }
    Ok((
        format!("{{\"anyOf\":[{}]}}", alternatives.join(",")),
        instruction,
    ))
}

fn build_job(loaded: &Loaded, request: &ChatRequest, settings: &EmbeddedSettings) -> Result<Job> {
    let mut messages = request.messages.clone();
    let native = settings.tool_format == ToolFormat::Native;
    let (output, pairs) = if let Some(format) = &request.response_format {
        crate::openai::add_instruction(&mut messages, &schema_instruction(&format.schema));
        let output = if native {
            Output::Text
        } else {
            Output::Json(grammar_for(&format.schema)?)
        };
        (output, grammar_pairs(&messages, &request.tools)?)
    } else if let Some(grammar) = request
        .grammar
        .as_ref()
        .filter(|_| request.tools.is_empty())
    {
        let pairs = if native {
            native::pairs(&messages, &request.tools)
        } else {
            grammar_pairs(&messages, &request.tools)?
        };
        (Output::Grammar(grammar.clone()), pairs)
    } else if native {
        let output = if request.tools.is_empty() {
            Output::Text
        } else {
            Output::Native(request.tools.iter().map(|t| t.name.clone()).collect())
        };
        (output, native::pairs(&messages, &request.tools))
    } else if !request.tools.is_empty() {
        let (schema, instruction) = tools_schema(request)?;
        crate::openai::add_instruction(&mut messages, &instruction);
        (
            Output::Tools(grammar_of(&schema)?),
            grammar_pairs(&messages, &request.tools)?,
        )
    } else {
        (Output::Text, grammar_pairs(&messages, &request.tools)?)
    };
    Ok(Job {
        prompt: render(loaded, &pairs)?,
        output,
        max_tokens: request.max_tokens.unwrap_or(settings.max_tokens),
        temperature: request.temperature.unwrap_or(settings.temperature),
        seed: request.seed.unwrap_or(settings.seed),
        frequency_penalty: request.frequency_penalty.unwrap_or(0.0),
        stop: request.stop.clone(),
    })
}

/// The role/content pairs of `messages` in the grammar format: a past call written as the
/// grammar makes the model write it (`{"tool": NAME, "arguments": {…}}`, name first; several
/// as an array), a tool result as a user turn.
fn grammar_pairs(messages: &[Message], tools: &[ToolSpec]) -> Result<Vec<(&'static str, String)>> {
    let canonical = |v: &Value| to_canonical_string(v).map_err(embedded);
    // Arguments as the grammar has the model write them (so the cached prefix holds too).
    let arguments = |name: &str, args: &Value| -> Result<String> {
        match tools.iter().find(|t| t.name == name) {
            Some(t) => {
                serde_json::to_string(&order::arguments(args, &t.parameters)).map_err(embedded)
            }
            None => canonical(args),
        }
    };
    messages
        .iter()
        .map(|m| {
            Ok(match m.role {
                Role::Tool => (
                    "user",
                    format!(
                        "Result of tool call {}:\n{}",
                        m.tool_call_id.as_deref().unwrap_or("?"),
                        m.content
                    ),
                ),
                Role::Assistant if !m.tool_calls.is_empty() => {
                    let calls = m
                        .tool_calls
                        .iter()
                        .map(|c| {
                            Ok(format!(
                                "{{\"tool\":{},\"arguments\":{}}}",
                                canonical(&Value::String(c.name.clone()))?,
                                arguments(&c.name, &c.arguments_json().unwrap_or(Value::Null))?
                            ))
                        })
                        .collect::<Result<Vec<String>>>()?;
                    let text = match calls.as_slice() {
                        [one] => one.clone(),
                        many => format!("[{}]", many.join(",")),
                    };
                    ("assistant", text)
                }
                role => (role.as_str(), m.content.clone()),
            })
        })
        .collect()
}

/// Applies the model's chat template (ChatML when the GGUF has none) to role/content pairs.
fn render(loaded: &Loaded, pairs: &[(&'static str, String)]) -> Result<String> {
    if let Some(template) = &loaded.template {
        let chat: Vec<LlamaChatMessage> = pairs
            .iter()
            .map(|(r, c)| LlamaChatMessage::new((*r).to_string(), c.clone()))
            .collect::<std::result::Result<_, _>>()
            .map_err(embedded)?;
        if let Ok(prompt) = loaded.model.apply_chat_template(template, &chat, true) {
            return Ok(prompt);
        }
    }
    let mut prompt = String::new();
    for (role, content) in pairs {
        prompt.push_str(&format!("<|im_start|>{role}\n{content}<|im_end|>\n"));
    }
    prompt.push_str("<|im_start|>assistant\n");
    Ok(prompt)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    /// A schema of two required properties inserted `zeta` first (not sorted).
    fn unsorted_schema() -> Value {
        let mut props = serde_json::Map::new();
        props.insert("zeta".into(), json!({"type": "string"}));
        props.insert("alpha".into(), json!({"type": "integer"}));
        let mut schema = serde_json::Map::new();
        schema.insert("type".into(), json!("object"));
        schema.insert("properties".into(), Value::Object(props));
        schema.insert("required".into(), json!(["zeta", "alpha"]));
        Value::Object(schema)
    }

    fn before(text: &str, a: &str, b: &str) -> bool {
        match (text.find(a), text.find(b)) {
            (Some(i), Some(j)) => i < j,
            _ => panic!("`{a}` or `{b}` missing from {text}"),
        }
    }

    #[test]
    fn grammars_and_tool_prompts_take_keys_in_a_fixed_order_whatever_the_map_order() {
        // The grammar fixes the order the model writes keys in: sorted, not insertion order.
        let grammar = grammar_for(&unsorted_schema()).unwrap();
        assert!(before(&grammar, "alpha-kv", "zeta-kv"), "{grammar}");
        // A tool's arguments: required ones first, as listed (`zeta`, `alpha`).

        let request = ChatRequest {
            tools: vec![ToolSpec {
                name: "t".into(),
                description: "d".into(),
                parameters: unsorted_schema(),
            }],
            ..ChatRequest::default()
        };
        let (schema, instruction) = tools_schema(&request).unwrap();
        assert!(
            before(&instruction, "\"zeta\"", "\"alpha\""),
            "{instruction}"
        );
        assert!(
            before(&instruction, "\"properties\"", "\"type\""),
            "{instruction}"
        );
        let grammar = grammar_of(&schema).unwrap();
        assert!(before(&grammar, "zeta-kv", "alpha-kv"), "{grammar}");
        // A call names its tool before its arguments.
        assert!(before(&grammar, "tool-kv", "arguments-kv"), "{grammar}");
        assert!(grammar.contains("answer-kv"), "{grammar}");
    }

    #[test]
    fn a_final_format_is_the_answer_a_tool_request_may_give() {
        let request = ChatRequest {
            tools: vec![ToolSpec {
                name: "read_file".into(),
                description: "Reads a file.".into(),
                parameters: json!({"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]}),
            }],
            final_format: Some(crate::types::ResponseFormat {
                name: "report".into(),
                schema: unsorted_schema(),
            }),
            ..ChatRequest::default()
        };
        let (schema, instruction) = tools_schema(&request).unwrap();
        assert!(instruction.contains("OUTPUT FORMAT"), "{instruction}");
        let grammar = grammar_of(&schema).unwrap();
        // The report's keys are alternatives of the root; no `answer` wrapper.
        assert!(
            grammar.contains("zeta-kv") && grammar.contains("path-kv"),
            "{grammar}"
        );
        assert!(!grammar.contains("answer-kv"), "{grammar}");

        // Required: only the call remains in the grammar; the instruction is unchanged (the
        // cached prompt prefix stays valid when the next call is free).
        let required = ChatRequest {
            tool_choice: crate::types::ToolChoice::Required,
            ..request
        };
        let (schema, required_instruction) = tools_schema(&required).unwrap();
        assert_eq!(required_instruction, instruction);
        let grammar = grammar_of(&schema).unwrap();
        assert!(
            grammar.contains("path-kv") && !grammar.contains("zeta-kv"),
            "{grammar}"
        );

        // One of some tools: only their calls remain; the instruction still lists all.
        let mut edit = required.tools[0].clone();
        edit.name = "edit_file".into();
        edit.parameters = json!({"type": "object", "properties": {"old": {"type": "string"}},
            "required": ["old"]});
        let mut narrowed = ChatRequest {
            tool_choice: crate::types::ToolChoice::OneOf(vec!["edit_file".into()]),
            ..required
        };
        narrowed.tools.push(edit);
        let (_, all_instruction) = tools_schema(&ChatRequest {
            tool_choice: crate::types::ToolChoice::Auto,
            ..narrowed.clone()
        })
        .unwrap();
        let (schema, narrowed_instruction) = tools_schema(&narrowed).unwrap();
        assert_eq!(narrowed_instruction, all_instruction);
        assert!(
            narrowed_instruction.contains("- read_file: "),
            "{narrowed_instruction}"
        );
        let grammar = grammar_of(&schema).unwrap();
        assert!(
            grammar.contains("old-kv")
                && !grammar.contains("path-kv")
                && !grammar.contains("zeta-kv"),
            "{grammar}"
        );
    }

    #[test]
    fn a_description_the_system_prompt_carries_is_not_repeated() {
        let tool = |name: &str, description: &str| ToolSpec {
            name: name.into(),
            description: description.into(),
            parameters: json!({"type": "object", "properties": {"path": {"type": "string"}}}),
        };
        let request = ChatRequest {
            tools: vec![
                tool("read_file", "Reads a file."),
                tool("grep", "Searches files."),
            ],
            ..ChatRequest::new(vec![
                Message::system("## TOOLS AVAILABLE\n- read_file: Reads a file."),
                Message::user("go"),
            ])
        };
        let (_, instruction) = tools_schema(&request).unwrap();
        assert_eq!(
            instruction.matches("Reads a file.").count(),
            0,
            "{instruction}"
        );
        assert!(
            instruction.contains("- read_file: Arguments schema: {"),
            "{instruction}"
        );
        assert!(
            instruction.contains("- grep: Searches files. Arguments schema: {"),
            "{instruction}"
        );
    }

    #[test]
    fn past_calls_are_written_back_name_first_as_the_grammar_has_them() {
        use crate::types::ToolCall;
        let call = |name: &str| ToolCall {
            id: "c".into(),
            name: name.into(),
            arguments: "{\"zeta\":1,\"alpha\":2}".into(),
        };
        let one = Message {
            tool_calls: vec![call("read_file")],
            ..Message::assistant("")
        };
        let two = Message {
            tool_calls: vec![call("grep"), call("read_file")],
            ..Message::assistant("")
        };
        let pairs = grammar_pairs(&[one, two, Message::tool_result("c", "ok")], &[]).unwrap();
        assert_eq!(
            pairs[0],
            (
                "assistant",
                "{\"tool\":\"read_file\",\"arguments\":{\"alpha\":2,\"zeta\":1}}".to_string()
            )
        );
        assert!(
            pairs[1].1.starts_with("[{\"tool\":\"grep\",\"arguments\""),
            "{:?}",
            pairs[1]
        );
        assert_eq!(pairs[2], ("user", "Result of tool call c:\nok".to_string()));
        // A call of a known tool: its arguments in the order its grammar has them written.
        let tool = ToolSpec {
            name: "read_file".into(),
            description: String::new(),
            parameters: unsorted_schema(),
        };
        let pairs = grammar_pairs(&[pairs_one()], &[tool]).unwrap();
        assert_eq!(
            pairs[0].1,
            "{\"tool\":\"read_file\",\"arguments\":{\"zeta\":1,\"alpha\":2}}"
        );
    }

    fn pairs_one() -> Message {
        Message {
            tool_calls: vec![crate::types::ToolCall {
                id: "c".into(),
                name: "read_file".into(),
                arguments: "{\"alpha\":2,\"zeta\":1}".into(),
            }],
            ..Message::assistant("")
        }
    }

    #[test]
    fn text_out_holds_back_stop_prefixes_and_splits_utf8() {
        let mut t = TextOut::new(vec!["END".into()]);
        assert_eq!(t.push(b"hello E"), ("hello".into(), false));
        assert_eq!(t.push(b"N"), (" ".into(), false));
        assert_eq!(t.push(b"D tail"), (String::new(), true));
        let mut t = TextOut::new(Vec::new());
        let e = "é".as_bytes();
        assert_eq!(t.push(&e[..1]), (String::new(), false));
        assert_eq!(t.push(&e[1..]), ("é".into(), false));
        assert_eq!(t.finish(), "");
    }
}
