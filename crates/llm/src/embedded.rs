//! The embedded default model: a GGUF run in-process by llama.cpp (`llama-cpp-2`).
//!
//! Generation runs on a blocking thread, one token at a time, checking the cancellation
//! token and the consumer between tokens. Structured output compiles the JSON Schema to a
//! llama.cpp grammar (llama.cpp's own `json_schema_to_grammar`, the converter its server
//! uses), so the answer always parses. Sampling is free-first: the sampler picks a token
//! from the full distribution and the grammar only checks that one token; only when the
//! grammar rejects it is the grammar applied to the whole vocabulary and the token
//! re-sampled (about 2× faster than constraining every step, identical greedy output).
//! The grammar sampler is advanced exactly once per token with `accept` (never through
//! `sample`, which would advance it a second time).
//!
//! Tools: the embedded model has no native tool calling; when tools are offered, its output
//! is constrained to `{"tool": NAME, "arguments": {…}}` or `{"answer": "…"}` and mapped to
//! a tool call or text.

use std::num::NonZeroU32;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::{LlamaChatMessage, LlamaChatTemplate, LlamaModel};
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;
use trellis_protocol::canonical::to_canonical_string;

use crate::download::Artifact;
use crate::provider::{
    ChatStream, EventSender, ModelProvider, ProviderInfo, ProviderKind, spawn_stream,
};
use crate::structured::schema_instruction;
use crate::tokens::TokenCount;
use crate::types::{ChatRequest, FinishReason, Message, Role, StreamEvent, Usage};
use crate::{Error, Result};

/// Where the weights come from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelSource {
    /// A built-in model, fetched into `cache_dir` on first use.
    Builtin {
        /// Which.
        model: Artifact,
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
    model: LlamaModel,
    template: Option<LlamaChatTemplate>,
    /// llama.cpp may mutate the model while creating a context; one generation at a time.
    busy: Mutex<()>,
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
            ModelSource::Builtin { model, .. } => model
                .members
                .first()
                .map_or(model.name, |m| m.file)
                .to_string(),
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
                    native_structured_output: true,
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
                    Ok(Arc::new(Loaded {
                        model,
                        template,
                        busy: Mutex::new(()),
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
}

struct Job {
    prompt: String,
    output: Output,
    max_tokens: u32,
    temperature: f32,
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
            let settings = inner.settings.clone();
            tokio::task::spawn_blocking(move || generate(&loaded, &job, &settings, &cancel, &tx))
                .await
                .map_err(embedded)?
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
    let text = to_canonical_string(schema).map_err(embedded)?;
    llama_cpp_2::json_schema_to_grammar(&text)
        .map_err(|e| embedded(format!("cannot compile the JSON Schema to a grammar: {e}")))
}

/// The union schema for tool use: a call of one tool, or a plain answer.
fn tools_schema(request: &ChatRequest) -> (Value, String) {
    let mut alternatives: Vec<Value> = request
        .tools
        .iter()
        .map(|t| {
            json!({
                "type": "object",
                "properties": {"tool": {"const": t.name}, "arguments": t.parameters},
                "required": ["tool", "arguments"],
            })
        })
        .collect();
    alternatives.push(json!({
        "type": "object",
        "properties": {"answer": {"type": "string"}},
        "required": ["answer"],
    }));
    let mut instruction = String::from(
        "You can call one tool by replying {\"tool\": NAME, \"arguments\": {...}}, or reply \
         directly with {\"answer\": \"...\"}. Tools:",
    );
    for t in &request.tools {
        instruction.push_str(&format!(
            "\n- {}: {} Arguments schema: {}",
            t.name,
            t.description,
            to_canonical_string(&t.parameters).unwrap_or_default()
        ));
    }
    (json!({"anyOf": alternatives}), instruction)
}

fn build_job(loaded: &Loaded, request: &ChatRequest, settings: &EmbeddedSettings) -> Result<Job> {
    let mut messages = request.messages.clone();
    let output = if let Some(format) = &request.response_format {
        crate::openai::add_instruction(&mut messages, &schema_instruction(&format.schema));
        Output::Json(grammar_for(&format.schema)?)
    } else if !request.tools.is_empty() {
        let (schema, instruction) = tools_schema(request);
        crate::openai::add_instruction(&mut messages, &instruction);
        Output::Tools(grammar_for(&schema)?)
    } else {
        Output::Text
    };
    Ok(Job {
        prompt: render(loaded, &messages)?,
        output,
        max_tokens: request.max_tokens.unwrap_or(settings.max_tokens),
        temperature: request.temperature.unwrap_or(settings.temperature),
        stop: request.stop.clone(),
    })
}

/// Applies the model's chat template (ChatML when the GGUF has none).
fn render(loaded: &Loaded, messages: &[Message]) -> Result<String> {
    let pairs: Vec<(&'static str, String)> = messages
        .iter()
        .map(|m| match m.role {
            Role::Tool => (
                "user",
                format!(
                    "Result of tool call {}:\n{}",
                    m.tool_call_id.as_deref().unwrap_or("?"),
                    m.content
                ),
            ),
            Role::Assistant if !m.tool_calls.is_empty() => {
                let calls: Vec<Value> = m
                    .tool_calls
                    .iter()
                    .map(|c| {
                        json!({"tool": c.name, "arguments": c.arguments_json().unwrap_or(Value::Null)})
                    })
                    .collect();
                let text = match calls.as_slice() {
                    [one] => to_canonical_string(one),
                    many => to_canonical_string(many),
                }
                .unwrap_or_default();
                ("assistant", text)
            }
            role => (role.as_str(), m.content.clone()),
        })
        .collect();
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
    for (role, content) in &pairs {
        prompt.push_str(&format!("<|im_start|>{role}\n{content}<|im_end|>\n"));
    }
    prompt.push_str("<|im_start|>assistant\n");
    Ok(prompt)
}

/// Free-first sampling with an optional grammar check (see the module docs).
struct Sampler {
    free: LlamaSampler,
    grammar: Option<LlamaSampler>,
    resample: Option<LlamaSampler>,
}

impl Sampler {
    fn new(model: &LlamaModel, job: &Job, seed: u32) -> Result<Self> {
        let greedy = job.temperature <= 0.0;
        let free = if greedy {
            LlamaSampler::greedy()
        } else {
            LlamaSampler::chain_simple([
                LlamaSampler::temp(job.temperature),
                LlamaSampler::dist(seed),
            ])
        };
        let grammar = match &job.output {
            Output::Text => None,
            Output::Json(g) | Output::Tools(g) => Some(
                LlamaSampler::grammar(model, g, "root")
                    .map_err(|e| embedded(format!("invalid grammar: {e}")))?,
            ),
        };
        let resample = (!greedy).then(|| {
            LlamaSampler::chain_simple([
                LlamaSampler::temp(job.temperature),
                LlamaSampler::dist(seed.wrapping_add(1)),
            ])
        });
        Ok(Self {
            free,
            grammar,
            resample,
        })
    }

    fn next(
        &mut self,
        ctx: &llama_cpp_2::context::LlamaContext<'_>,
        idx: i32,
    ) -> Result<LlamaToken> {
        let candidate = self.free.sample(ctx, idx);
        let Some(grammar) = &mut self.grammar else {
            return Ok(candidate);
        };
        let logit = usize::try_from(candidate.0)
            .ok()
            .and_then(|i| ctx.get_logits_ith(idx).get(i).copied())
            .unwrap_or(0.0);
        let mut one =
            LlamaTokenDataArray::new(vec![LlamaTokenData::new(candidate, logit, 0.0)], false);
        grammar.apply(&mut one);
        let allowed = one.data.first().is_some_and(|d| d.logit().is_finite());
        let token = if allowed {
            candidate
        } else {
            let mut all = ctx.token_data_array_ith(idx);
            grammar.apply(&mut all);
            match &mut self.resample {
                None => all.sample_token_greedy(),
                Some(chain) => {
                    all.apply_sampler(chain);
                    all.selected_token()
                        .ok_or_else(|| embedded("the grammar admits no token"))?
                }
            }
        };
        grammar
            .try_accept(token)
            .map_err(|e| embedded(format!("grammar rejected a token: {e}")))?;
        Ok(token)
    }
}

/// Holds back text that could be the start of a stop sequence.
struct TextOut {
    utf8: Vec<u8>,
    pending: String,
    stops: Vec<String>,
    hold: usize,
}

impl TextOut {
    fn new(stops: Vec<String>) -> Self {
        let hold = stops
            .iter()
            .map(|s| s.chars().count())
            .max()
            .unwrap_or(1)
            .saturating_sub(1);
        Self {
            utf8: Vec::new(),
            pending: String::new(),
            stops,
            hold,
        }
    }

    /// Adds token bytes; returns text safe to emit and whether a stop sequence was hit.
    fn push(&mut self, bytes: &[u8]) -> (String, bool) {
        self.utf8.extend_from_slice(bytes);
        let valid = match std::str::from_utf8(&self.utf8) {
            Ok(s) => s.len(),
            Err(e) => e.valid_up_to(),
        };
        let rest = self.utf8.split_off(valid);
        self.pending
            .push_str(&String::from_utf8_lossy(&std::mem::replace(
                &mut self.utf8,
                rest,
            )));
        if let Some(i) = self
            .stops
            .iter()
            .filter_map(|s| self.pending.find(s.as_str()))
            .min()
        {
            let out = self.pending[..i].to_string();
            self.pending.clear();
            return (out, true);
        }
        let chars = self.pending.chars().count();
        if chars <= self.hold {
            return (String::new(), false);
        }
        let cut = self
            .pending
            .char_indices()
            .nth(chars - self.hold)
            .map_or(self.pending.len(), |(i, _)| i);
        let rest = self.pending.split_off(cut);
        (std::mem::replace(&mut self.pending, rest), false)
    }

    fn finish(&mut self) -> String {
        let mut s = std::mem::take(&mut self.pending);
        s.push_str(&String::from_utf8_lossy(&std::mem::take(&mut self.utf8)));
        s
    }
}

fn send(tx: &EventSender, event: StreamEvent) -> Result<()> {
    // The consumer dropped the stream: stop generating.
    tx.blocking_send(Ok(event)).map_err(|_| Error::Cancelled)
}

fn generate(
    loaded: &Loaded,
    job: &Job,
    settings: &EmbeddedSettings,
    cancel: &CancellationToken,
    tx: &EventSender,
) -> Result<()> {
    let _busy = loaded
        .busy
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let model = &loaded.model;
    let vocab = model.vocab();
    let tokens = tokenize(model, &job.prompt)?;
    let n_prompt = u32::try_from(tokens.len()).map_err(embedded)?;
    let limit = settings.context.min(model.n_ctx_train().max(256));
    if n_prompt + 1 >= limit {
        return Err(embedded(format!(
            "the prompt has {n_prompt} tokens; the context holds {limit}"
        )));
    }
    let max_tokens = job.max_tokens.min(limit - n_prompt);
    // Size the context to the request: allocating the whole window for a short call costs
    // more than the call.
    let n_ctx = (n_prompt + max_tokens)
        .div_ceil(256)
        .saturating_mul(256)
        .min(limit);
    let n_batch = n_ctx.min(512);
    let threads = i32::try_from(settings.threads.max(1)).unwrap_or(1);
    let params = LlamaContextParams::default()
        .with_n_ctx(NonZeroU32::new(n_ctx))
        .with_n_batch(n_batch)
        .with_n_ubatch(n_batch)
        .with_n_threads(threads)
        .with_n_threads_batch(threads);
    let mut ctx = model.new_context(backend()?, params).map_err(embedded)?;
    let mut batch = LlamaBatch::new(n_batch as usize, 1);
    let last = tokens.len().saturating_sub(1);
    for (c, chunk) in tokens.chunks(n_batch as usize).enumerate() {
        if cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        batch.clear();
        for (j, t) in chunk.iter().enumerate() {
            let pos = c * n_batch as usize + j;
            let pos_i32 = i32::try_from(pos).map_err(embedded)?;
            batch
                .add(*t, pos_i32, &[0], pos == last)
                .map_err(embedded)?;
        }
        ctx.decode(&mut batch).map_err(embedded)?;
    }
    let mut logits_idx = batch.n_tokens() - 1;
    let mut sampler = Sampler::new(model, job, settings.seed)?;
    let buffered = matches!(job.output, Output::Tools(_));
    let mut out = TextOut::new(job.stop.clone());
    let mut collected = String::new();
    let mut pos = i32::try_from(n_prompt).map_err(embedded)?;
    let mut generated = 0u32;
    let mut piece = Vec::with_capacity(32);
    let reason = loop {
        if cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        if generated >= max_tokens {
            break FinishReason::Length;
        }
        let token = sampler.next(&ctx, logits_idx)?;
        if vocab.is_eog(token) && !settings.ignore_eos {
            break FinishReason::Stop;
        }
        generated += 1;
        piece.clear();
        vocab.token_to_piece_into(token, &mut piece, false, None);
        let (text, stopped) = out.push(&piece);
        if !text.is_empty() {
            if buffered {
                collected.push_str(&text);
            } else {
                send(tx, StreamEvent::TextDelta { text })?;
            }
        }
        if stopped {
            break FinishReason::Stop;
        }
        batch.clear();
        batch.add(token, pos, &[0], true).map_err(embedded)?;
        pos += 1;
        ctx.decode(&mut batch).map_err(embedded)?;
        logits_idx = 0;
    };
    let rest = out.finish();
    let mut reason = reason;
    if buffered {
        collected.push_str(&rest);
        reason = emit_tool_answer(tx, &collected, reason)?;
    } else if !rest.is_empty() {
        send(tx, StreamEvent::TextDelta { text: rest })?;
    }
    send(
        tx,
        StreamEvent::Usage {
            usage: Usage {
                prompt_tokens: u64::from(n_prompt),
                completion_tokens: u64::from(generated),
                cached_prompt_tokens: 0,
            },
        },
    )?;
    send(tx, StreamEvent::Finish { reason })
}

/// Maps a tools-mode answer to a tool call or text.
fn emit_tool_answer(tx: &EventSender, text: &str, reason: FinishReason) -> Result<FinishReason> {
    // A reply cut by `max_tokens` is closed by the normaliser so the partial answer survives.
    let parsed: Option<Value> = serde_json::from_str(text).ok().or_else(|| {
        let options = crate::normalise::NormaliseOptions { max_repairs: 4 };
        crate::normalise::normalise_value(text, &json!({"type": "object"}), options)
            .ok()
            .map(|n| n.value)
    });
    if let Some(v) = &parsed
        && let Some(name) = v.get("tool").and_then(Value::as_str)
    {
        let arguments = v.get("arguments").cloned().unwrap_or(json!({}));
        send(
            tx,
            StreamEvent::ToolCallDelta {
                index: 0,
                id: Some("call_0".into()),
                name: Some(name.to_string()),
                arguments: arguments.to_string(),
            },
        )?;
        return Ok(if reason == FinishReason::Length {
            reason
        } else {
            FinishReason::ToolCalls
        });
    }
    let answer = parsed
        .as_ref()
        .and_then(|v| v.get("answer"))
        .and_then(Value::as_str)
        .map_or_else(|| text.to_string(), str::to_string);
    send(tx, StreamEvent::TextDelta { text: answer })?;
    Ok(reason)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::types::ToolSpec;

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
    fn grammars_and_tool_prompts_take_keys_sorted_whatever_the_map_order() {
        // The grammar fixes the order the model writes keys in: sorted, not insertion order.
        let grammar = grammar_for(&unsorted_schema()).unwrap();
        assert!(before(&grammar, "alpha-kv", "zeta-kv"), "{grammar}");

        let request = ChatRequest {
            tools: vec![ToolSpec {
                name: "t".into(),
                description: "d".into(),
                parameters: unsorted_schema(),
            }],
            ..ChatRequest::default()
        };
        let (schema, instruction) = tools_schema(&request);
        assert!(
            before(&instruction, "\"alpha\"", "\"zeta\""),
            "{instruction}"
        );
        assert!(
            before(&instruction, "\"properties\"", "\"type\""),
            "{instruction}"
        );
        let grammar = grammar_for(&schema).unwrap();
        assert!(before(&grammar, "alpha-kv", "zeta-kv"), "{grammar}");
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
