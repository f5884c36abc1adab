//! Sampling and stop sequences of the embedded model's generation.

use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::LlamaToken;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;

use super::{Job, Output, embedded};
use crate::Result;

/// The answer's last tokens a frequency penalty counts.
const PENALTY_LAST_N: i32 = 256;

/// Free-first sampling with an optional grammar check (see the module docs).
pub(super) struct Sampler {
    free: LlamaSampler,
    grammar: Option<LlamaSampler>,
    resample: Option<LlamaSampler>,
}

impl Sampler {
    pub(super) fn new(model: &LlamaModel, job: &Job, seed: u32) -> Result<Self> {
        let greedy = job.temperature <= 0.0;
        let mut chain = Vec::new();
        if job.frequency_penalty.is_finite() && job.frequency_penalty != 0.0 {
            chain.push(LlamaSampler::penalties(
                model.n_vocab(),
                PENALTY_LAST_N,
                1.0,
                job.frequency_penalty,
                0.0,
            ));
        }
        if greedy {
            chain.push(LlamaSampler::greedy());
        } else {
            chain.push(LlamaSampler::temp(job.temperature));
            chain.push(LlamaSampler::dist(seed));
        }
        let free = LlamaSampler::chain_simple(chain);
        let grammar = match &job.output {
            Output::Text | Output::Native(_) => None,
            Output::Json(g) | Output::Tools(g) | Output::Grammar(g) => Some(
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

    pub(super) fn next(
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
pub(super) struct TextOut {
    utf8: Vec<u8>,
    pending: String,
    stops: Vec<String>,
    hold: usize,
}

impl TextOut {
    pub(super) fn new(stops: Vec<String>) -> Self {
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
    pub(super) fn push(&mut self, bytes: &[u8]) -> (String, bool) {
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

    pub(super) fn finish(&mut self) -> String {
        let mut s = std::mem::take(&mut self.pending);
        s.push_str(&String::from_utf8_lossy(&std::mem::take(&mut self.utf8)));
        s
    }
}
