//! The generation thread of a loaded model and its pool of llama.cpp contexts.
//!
//! An agent's conversation grows by a few messages per call; decoding its whole prompt again
//! on every call would cost the prefix's prompt processing each time (minutes of CPU over a
//! stage on two cores). So each loaded model keeps a few contexts ("slots") alive, each
//! remembering the tokens its KV cache holds; a request takes the slot whose tokens share the
//! longest prefix with its prompt, drops the cache past that prefix and decodes only the rest.
//! Interleaved agents (a stage's coder and the orchestrator, say) keep their own slots.
//!
//! A llama.cpp context borrows its model and is not `Send`, so the slots live on one thread
//! that owns them for the model's lifetime; requests reach it over a channel and are served
//! one at a time (the machine's cores are all given to one generation anyway).

use std::num::NonZeroU32;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender};

use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::token::LlamaToken;
use tokio_util::sync::CancellationToken;

use super::sample::{Sampler, TextOut};
use super::{EmbeddedSettings, Job, Output, backend, embedded, tokenize};
use crate::provider::EventSender;
use crate::types::{FinishReason, StreamEvent, Usage};
use crate::{Error, Result};

/// Contexts kept per loaded model. Each holds a KV cache of the whole window (for the coder
/// model at 16k tokens about 470 MB), so three cost ~1.4 GB — enough for the agents of a
/// stage and the orchestrator to keep their prefixes without evicting one another.
const SLOTS: usize = 3;

/// A cached prefix shorter than this is not worth a slot: a new conversation takes a free or
/// the least recently used slot instead of truncating another's cache.
const MIN_REUSE: usize = 64;

/// While an answer is held back (a tool call is sent whole), a progress event goes out
/// every this many generated tokens (a few seconds on two cores).
const HELD_PROGRESS: u32 = 16;

/// A model caught in a loop (`decision_decision_decision…`, the same line again and again)
/// writes until `max_tokens`: when the last this many generated tokens repeat with a period
/// of at most [`LOOP_PERIOD`] tokens, generation stops as if cut by `max_tokens`.
const LOOP_SPAN: usize = 96;

/// See [`LOOP_SPAN`].
const LOOP_PERIOD: usize = 32;

/// Whether the end of `tokens` is a loop: each of its last [`LOOP_SPAN`] tokens equals the
/// token a period of at most [`LOOP_PERIOD`] before it.
fn looping<T: PartialEq>(tokens: &[T]) -> bool {
    let n = tokens.len();
    (1..=LOOP_PERIOD)
        .filter(|p| n >= LOOP_SPAN + p)
        .any(|p| (n - LOOP_SPAN..n).all(|i| tokens[i] == tokens[i - p]))
}

/// One request for the generation thread.
pub(super) struct Work {
    pub job: Job,
    pub settings: EmbeddedSettings,
    pub cancel: CancellationToken,
    pub tx: EventSender,
    pub done: tokio::sync::oneshot::Sender<Result<()>>,
}

/// Starts the generation thread of `model`; it ends when every sender is dropped.
pub(super) fn spawn(model: Arc<LlamaModel>) -> Result<Sender<Work>> {
    let (tx, rx) = std::sync::mpsc::channel::<Work>();
    std::thread::Builder::new()
        .name("trellis-llama".into())
        .spawn(move || serve(&model, &rx))
        .map_err(embedded)?;
    Ok(tx)
}

fn serve(model: &LlamaModel, rx: &Receiver<Work>) {
    let mut pool = Pool {
        slots: Vec::new(),
        clock: 0,
    };
    while let Ok(work) = rx.recv() {
        let result = if work.cancel.is_cancelled() {
            Err(Error::Cancelled)
        } else {
            generate(
                model,
                &mut pool,
                &work.job,
                &work.settings,
                &work.cancel,
                &work.tx,
            )
        };
        let _ = work.done.send(result);
    }
}

/// A context and the tokens its KV cache holds (positions `0..tokens.len()`).
struct Slot<'m> {
    ctx: LlamaContext<'m>,
    tokens: Vec<LlamaToken>,
    n_ctx: u32,
    used: u64,
}

struct Pool<'m> {
    slots: Vec<Slot<'m>>,
    clock: u64,
}

impl<'m> Pool<'m> {
    /// The slot for `prompt` in a window of `n_ctx` tokens, and how many of its cached tokens
    /// are a prefix of `prompt`.
    fn take(
        &mut self,
        model: &'m LlamaModel,
        prompt: &[LlamaToken],
        n_ctx: u32,
        threads: i32,
    ) -> Result<(&mut Slot<'m>, usize)> {
        self.clock += 1;
        let best = self
            .slots
            .iter()
            .enumerate()
            .filter(|(_, s)| s.n_ctx == n_ctx)
            .map(|(i, s)| (i, common_prefix(&s.tokens, prompt)))
            .max_by_key(|&(i, n)| (n, self.slots[i].used));
        let index = match best {
            Some((i, n)) if n >= MIN_REUSE => i,
            _ if self.slots.len() < SLOTS => {
                let n_batch = n_ctx.min(512);
                let params = LlamaContextParams::default()
                    .with_n_ctx(NonZeroU32::new(n_ctx))
                    .with_n_batch(n_batch)
                    .with_n_ubatch(n_batch)
                    .with_n_threads(threads)
                    .with_n_threads_batch(threads);
                let ctx = model.new_context(backend()?, params).map_err(embedded)?;
                self.slots.push(Slot {
                    ctx,
                    tokens: Vec::new(),
                    n_ctx,
                    used: 0,
                });
                self.slots.len() - 1
            }
            _ => {
                // Every slot is taken by another conversation: evict the least recently used
                // one (a slot of another window size first, as it can never be reused).
                let lru = self
                    .slots
                    .iter()
                    .enumerate()
                    .min_by_key(|(_, s)| (s.n_ctx == n_ctx, s.used))
                    .map_or(0, |(i, _)| i);
                if self.slots[lru].n_ctx != n_ctx {
                    self.slots.swap_remove(lru);
                    return self.take(model, prompt, n_ctx, threads);
                }
                lru
            }
        };
        let clock = self.clock;
        let slot = &mut self.slots[index];
        slot.used = clock;
        let reused = common_prefix(&slot.tokens, prompt);
        Ok((slot, reused))
    }
}

fn common_prefix(a: &[LlamaToken], b: &[LlamaToken]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn send(tx: &EventSender, event: StreamEvent) -> Result<()> {
    // The consumer dropped the stream: stop generating.
    tx.blocking_send(Ok(event)).map_err(|_| Error::Cancelled)
}

fn generate<'m>(
    model: &'m LlamaModel,
    pool: &mut Pool<'m>,
    job: &Job,
    settings: &EmbeddedSettings,
    cancel: &CancellationToken,
    tx: &EventSender,
) -> Result<()> {
    let tokens = tokenize(model, &job.prompt)?;
    let n_prompt = u32::try_from(tokens.len()).map_err(embedded)?;
    let limit = settings.context.min(model.n_ctx_train().max(256));
    if n_prompt + 1 >= limit {
        return Err(embedded(format!(
            "the prompt has {n_prompt} tokens; the context holds {limit}"
        )));
    }
    let threads = i32::try_from(settings.threads.max(1)).unwrap_or(1);
    let (slot, cached) = pool.take(model, &tokens, limit, threads)?;
    let result = run(model, slot, &tokens, cached, job, settings, cancel, tx);
    if result.is_err() {
        // A failed or cancelled decode may leave the cache between states: start afresh.
        slot.ctx.clear_kv_cache();
        slot.tokens.clear();
    }
    result
}

#[allow(clippy::too_many_arguments)]
fn run(
    model: &LlamaModel,
    slot: &mut Slot<'_>,
    tokens: &[LlamaToken],
    cached: usize,
    job: &Job,
    settings: &EmbeddedSettings,
    cancel: &CancellationToken,
    tx: &EventSender,
) -> Result<()> {
    let vocab = model.vocab();
    let n_prompt = tokens.len();
    // At least the prompt's last token is decoded again: its logits start the answer.
    let keep = cached.min(n_prompt.saturating_sub(1));
    let keep_u32 = u32::try_from(keep).map_err(embedded)?;
    slot.ctx
        .clear_kv_cache_seq(Some(0), Some(keep_u32), None)
        .map_err(embedded)?;
    slot.tokens.truncate(keep);
    let n_batch = slot.ctx.n_batch() as usize;
    let mut batch = LlamaBatch::new(n_batch, 1);
    let last = n_prompt.saturating_sub(1);
    let progress = |prompt_done: usize, generated: u32| {
        send(
            tx,
            StreamEvent::Progress {
                prompt_tokens: n_prompt as u64,
                prompt_done: prompt_done as u64,
                generated: u64::from(generated),
            },
        )
    };
    // Reading a long prompt takes minutes on a few cores: say how far it has got.
    let reading = n_prompt - keep > n_batch;
    if reading {
        progress(keep, 0)?;
    }
    for (c, chunk) in tokens[keep..].chunks(n_batch).enumerate() {
        if cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        batch.clear();
        for (j, t) in chunk.iter().enumerate() {
            let pos = keep + c * n_batch + j;
            let pos_i32 = i32::try_from(pos).map_err(embedded)?;
            batch
                .add(*t, pos_i32, &[0], pos == last)
                .map_err(embedded)?;
        }
        slot.ctx.decode(&mut batch).map_err(embedded)?;
        slot.tokens.extend_from_slice(chunk);
        if reading {
            progress(slot.tokens.len(), 0)?;
        }
    }
    let n_prompt_u32 = u32::try_from(n_prompt).map_err(embedded)?;
    let max_tokens = job.max_tokens.min(slot.n_ctx - n_prompt_u32);
    let mut logits_idx = batch.n_tokens() - 1;
    let mut sampler = Sampler::new(model, job, job.seed)?;
    let buffered = matches!(job.output, Output::Tools(_) | Output::Native(_));
    let mut out = TextOut::new(job.stop.clone());
    let mut collected = String::new();
    let mut pos = i32::try_from(n_prompt).map_err(embedded)?;
    let mut generated = 0u32;
    let mut answer = Vec::with_capacity(max_tokens as usize);
    let mut piece = Vec::with_capacity(32);
    let reason = loop {
        if cancel.is_cancelled() {
            return Err(Error::Cancelled);
        }
        if generated >= max_tokens {
            break FinishReason::Length;
        }
        let token = sampler.next(&slot.ctx, logits_idx)?;
        if vocab.is_eog(token) && !settings.ignore_eos {
            break FinishReason::Stop;
        }
        generated += 1;
        answer.push(token);
        if looping(&answer) {
            break FinishReason::Length;
        }
        piece.clear();
        vocab.token_to_piece_into(token, &mut piece, false, None);
        let (text, stopped) = out.push(&piece);
        if buffered && generated.is_multiple_of(HELD_PROGRESS) {
            progress(n_prompt, generated)?;
        }
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
        slot.ctx.decode(&mut batch).map_err(embedded)?;
        slot.tokens.push(token);
        logits_idx = 0;
    };
    let rest = out.finish();
    let mut reason = reason;
    if buffered {
        collected.push_str(&rest);
        reason = match &job.output {
            Output::Native(tools) => emit_native_answer(tx, &collected, tools, reason)?,
            _ => emit_tool_answer(tx, &collected, reason)?,
        };
    } else if !rest.is_empty() {
        send(tx, StreamEvent::TextDelta { text: rest })?;
    }
    send(
        tx,
        StreamEvent::Usage {
            usage: Usage {
                prompt_tokens: n_prompt as u64,
                completion_tokens: u64::from(generated),
                cached_prompt_tokens: keep as u64,
            },
        },
    )?;
    send(tx, StreamEvent::Finish { reason })
}

/// Maps a natively generated answer to its well-formed `<tool_call>`s, or, when it has none,
/// to its text as written (a final answer; malformed calls reach the caller as text).
fn emit_native_answer(
    tx: &EventSender,
    text: &str,
    tools: &[String],
    reason: FinishReason,
) -> Result<FinishReason> {
    let names: Vec<&str> = tools.iter().map(String::as_str).collect();
    let answer = super::native::parse(text, &names);
    for why in &answer.rejected {
        tracing::debug!("a malformed native tool call was dropped: {why}");
    }
    if answer.calls.is_empty() {
        send(
            tx,
            StreamEvent::TextDelta {
                text: text.to_string(),
            },
        )?;
        return Ok(reason);
    }
    if !answer.text.is_empty() {
        send(tx, StreamEvent::TextDelta { text: answer.text })?;
    }
    for (i, call) in answer.calls.into_iter().enumerate() {
        send(
            tx,
            StreamEvent::ToolCallDelta {
                index: i,
                id: Some(format!("call_{i}")),
                name: Some(call.name),
                arguments: call.arguments.to_string(),
            },
        )?;
    }
    Ok(if reason == FinishReason::Length {
        reason
    } else {
        FinishReason::ToolCalls
    })
}

/// Maps a tools-mode answer to a tool call or text.
fn emit_tool_answer(tx: &EventSender, text: &str, reason: FinishReason) -> Result<FinishReason> {
    // A reply cut by `max_tokens` is closed by the normaliser so the partial answer survives.
    let parsed: Option<serde_json::Value> = serde_json::from_str(text).ok().or_else(|| {
        let options = crate::normalise::NormaliseOptions { max_repairs: 4 };
        crate::normalise::normalise_value(text, &serde_json::json!({"type": "object"}), options)
            .ok()
            .map(|n| n.value)
    });
    if let Some(v) = &parsed
        && let Some(name) = v.get("tool").and_then(serde_json::Value::as_str)
    {
        let arguments = v.get("arguments").cloned().unwrap_or(serde_json::json!({}));
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
        .and_then(serde_json::Value::as_str)
        .map_or_else(|| text.to_string(), str::to_string);
    send(tx, StreamEvent::TextDelta { text: answer })?;
    Ok(reason)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_loop_is_a_short_period_over_the_whole_span() {
        // `decision_` as two tokens, again and again.
        let mut t: Vec<u32> = (0..20).collect();
        t.extend([7, 8].iter().cycle().take(LOOP_SPAN + 2));
        assert!(!looping(&t[..t.len() - 1]), "one token short of the span");
        assert!(looping(&t));
        // A repeated line of 30 tokens.
        let line: Vec<u32> = (100..130).collect();
        let lines: Vec<u32> = line.iter().copied().cycle().take(LOOP_SPAN + 30).collect();
        assert!(looping(&lines));
    }

    #[test]
    fn varied_text_and_long_periods_are_not_loops() {
        let t: Vec<u32> = (0..500).collect();
        assert!(!looping(&t));
        // A period longer than LOOP_PERIOD (a repeated block of 40 tokens) is left alone.
        let block: Vec<u32> = (0..40).collect();
        let blocks: Vec<u32> = block.iter().copied().cycle().take(400).collect();
        assert!(!looping(&blocks));
        // One change inside the span breaks it.
        let mut t: Vec<u32> = [7, 8]
            .iter()
            .copied()
            .cycle()
            .take(LOOP_SPAN + 10)
            .collect();
        let mid = t.len() - LOOP_SPAN / 2;
        t[mid] = 9;
        assert!(!looping(&t));
    }
}
