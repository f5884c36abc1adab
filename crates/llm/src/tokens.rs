//! Token counting for budgets.
//!
//! - The embedded model counts with its own tokenizer, over the exact prompt its chat
//!   template produces (exact).
//! - OpenAI models count with tiktoken (`o200k_base`/`cl100k_base` by model name) plus the
//!   per-message framing OpenAI documents (3 tokens a message, 3 for the reply). Other
//!   models behind OpenAI-compatible endpoints are counted with `o200k_base` as an
//!   approximation (marked inexact).
//! - Anthropic and anything else: an estimate of one token per 4 bytes of UTF-8, rounded up,
//!   plus 4 tokens per message — conservative for English and code.
//!
//! Tool definitions and the response schema are counted as their JSON text.

use serde::{Deserialize, Serialize};

use crate::types::{ChatRequest, ToolSpec};

/// A prompt token count.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenCount {
    /// Tokens.
    pub tokens: u64,
    /// Whether the model's own tokenizer produced it.
    pub exact: bool,
}

/// Every piece of text in `request` that reaches the model.
fn texts(request: &ChatRequest) -> impl Iterator<Item = String> + '_ {
    let messages = request.messages.iter().flat_map(|m| {
        let mut v = vec![m.content.clone()];
        for c in &m.tool_calls {
            v.push(c.name.clone());
            v.push(c.arguments.clone());
        }
        v
    });
    let tools = request.tools.iter().map(|t| {
        format!(
            "{} {} {}",
            t.name,
            t.description,
            trellis_protocol::canonical::to_canonical_string(&t.parameters).unwrap_or_default()
        )
    });
    let schema = request
        .response_format
        .iter()
        .map(|f| trellis_protocol::canonical::to_canonical_string(&f.schema).unwrap_or_default());
    messages.chain(tools).chain(schema)
}

/// A tool definition's cost in a prompt: the estimate of a request carrying only it (the
/// schema budget's unit, for agents and the MCP gateway).
pub fn estimate_tool(spec: &ToolSpec) -> usize {
    let request = ChatRequest {
        tools: vec![spec.clone()],
        ..ChatRequest::new(Vec::new())
    };
    usize::try_from(estimate_request(&request).tokens).unwrap_or(usize::MAX)
}

/// The documented estimate: ⌈bytes / 4⌉ + 4 per message.
pub fn estimate_request(request: &ChatRequest) -> TokenCount {
    let bytes: usize = texts(request).map(|t| t.len()).sum();
    TokenCount {
        tokens: (bytes as u64).div_ceil(4) + 4 * request.messages.len() as u64,
        exact: false,
    }
}

/// Estimate for a bare text.
pub fn estimate_text(text: &str) -> u64 {
    (text.len() as u64).div_ceil(4)
}

/// tiktoken count for an OpenAI-style model.
pub fn count_openai(model: &str, request: &ChatRequest) -> TokenCount {
    use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};
    let known = get_tokenizer(model);
    let exact = known.is_some();
    let bpe = tiktoken_rs::bpe_for_tokenizer(known.unwrap_or(Tokenizer::O200kBase));
    let Ok(bpe) = bpe else {
        return estimate_request(request);
    };
    let content: usize = texts(request)
        .map(|t| bpe.encode_with_special_tokens(&t).len())
        .sum();
    TokenCount {
        tokens: content as u64 + 3 * request.messages.len() as u64 + 3,
        exact,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::Message;

    #[test]
    fn tiktoken_counts_known_models_exactly() {
        let r = ChatRequest::new(vec![Message::user("hello world")]);
        let c = count_openai("gpt-4o", &r);
        // "hello world" is 2 tokens in o200k_base, + 3 framing + 3 reply.
        assert_eq!(
            c,
            TokenCount {
                tokens: 8,
                exact: true
            }
        );
        assert!(!count_openai("qwen3:8b", &r).exact);
        let e = estimate_request(&r);
        assert_eq!(e.tokens, 3 + 4);
    }
}
