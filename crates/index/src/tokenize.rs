//! Code-aware tokenisation for BM25: identifiers are kept whole (lower-cased) and also split
//! at `snake_case` underscores and `camelCase`/`PascalCase` boundaries; everything that is
//! not a letter, digit or underscore separates tokens, so paths split into components.

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};

/// Identifiers longer than this are not indexed (hashes, base64 blobs).
const MAX_TOKEN_BYTES: usize = 64;

/// Calls `emit(token, from, to, position)` for every token of `text`: each word lower-cased,
/// then its parts when it has more than one. Parts share the word's position.
pub fn for_each_token(text: &str, mut emit: impl FnMut(&str, usize, usize, usize)) {
    let mut position = 0;
    let mut lower = String::new();
    let mut start = None;
    let mut iter = text.char_indices().peekable();
    while let Some((i, c)) = iter.next() {
        let word_char = c.is_alphanumeric() || c == '_';
        if word_char && start.is_none() {
            start = Some(i);
        }
        let at_end = iter
            .peek()
            .is_none_or(|(_, n)| !(n.is_alphanumeric() || *n == '_'));
        if let (Some(s), true) = (start, word_char && at_end) {
            let e = i + c.len_utf8();
            let word = &text[s..e];
            let trimmed = word.trim_matches('_');
            if !trimmed.is_empty() && word.len() <= MAX_TOKEN_BYTES {
                lower.clear();
                lower.extend(trimmed.chars().flat_map(char::to_lowercase));
                emit(&lower, s, e, position);
                split_parts(trimmed, |p| {
                    lower.clear();
                    lower.extend(p.chars().flat_map(char::to_lowercase));
                    emit(&lower, s, e, position);
                });
                position += 1;
            }
            start = None;
        }
    }
}

/// Calls `f` with each part of an identifier when it has more than one part.
fn split_parts(word: &str, mut f: impl FnMut(&str)) {
    let mut parts: Vec<&str> = Vec::new();
    for piece in word.split('_').filter(|p| !p.is_empty()) {
        let chars: Vec<(usize, char)> = piece.char_indices().collect();
        let mut s = 0;
        for k in 1..chars.len() {
            let (bi, c) = chars[k];
            let prev = chars[k - 1].1;
            let next_lower = chars.get(k + 1).is_some_and(|(_, n)| n.is_lowercase());
            // fooBar | FOOBar (before the last capital of a run followed by lower case)
            let boundary = (prev.is_lowercase() || prev.is_ascii_digit()) && c.is_uppercase()
                || prev.is_uppercase() && c.is_uppercase() && next_lower;
            if boundary {
                parts.push(&piece[s..bi]);
                s = bi;
            }
        }
        parts.push(&piece[s..]);
    }
    if parts.len() > 1 {
        for p in parts {
            f(p);
        }
    }
}

/// Words too common in questions to help ranking; dropped from queries only.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "does", "for", "from", "how",
    "i", "in", "is", "it", "of", "on", "or", "should", "that", "the", "this", "to", "was", "what",
    "when", "where", "which", "why", "with", "we", "you", "not", "but", "if", "into", "there",
    "when", "will", "would",
];

/// The distinct query terms of `query`, stopwords removed (unless nothing else is left).
pub fn query_terms(query: &str) -> Vec<String> {
    let mut all: Vec<String> = Vec::new();
    for_each_token(query, |t, _, _, _| {
        if !all.iter().any(|x| x == t) {
            all.push(t.to_string());
        }
    });
    let kept: Vec<String> = all
        .iter()
        .filter(|t| !STOPWORDS.contains(&t.as_str()))
        .cloned()
        .collect();
    if kept.is_empty() { all } else { kept }
}

/// The tantivy tokenizer (registered as [`CodeTokenizer::NAME`]).
#[derive(Clone, Debug, Default)]
pub struct CodeTokenizer {
    tokens: Vec<Token>,
}

impl CodeTokenizer {
    /// The name under which the index registers this tokenizer.
    pub const NAME: &'static str = "trellis_code";
}

/// A token stream over a precomputed token list.
#[derive(Debug)]
pub struct CodeTokenStream<'a> {
    tokens: &'a mut Vec<Token>,
    index: usize,
}

impl Tokenizer for CodeTokenizer {
    type TokenStream<'a> = CodeTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> CodeTokenStream<'a> {
        self.tokens.clear();
        let tokens = &mut self.tokens;
        for_each_token(text, |t, from, to, position| {
            tokens.push(Token {
                offset_from: from,
                offset_to: to,
                position,
                text: t.to_string(),
                position_length: 1,
            });
        });
        CodeTokenStream {
            tokens: &mut self.tokens,
            index: 0,
        }
    }
}

impl TokenStream for CodeTokenStream<'_> {
    fn advance(&mut self) -> bool {
        self.index += 1;
        self.index <= self.tokens.len()
    }

    fn token(&self) -> &Token {
        &self.tokens[self.index - 1]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.index - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(s: &str) -> Vec<String> {
        let mut v = Vec::new();
        for_each_token(s, |t, _, _, _| v.push(t.to_string()));
        v
    }

    #[test]
    fn splits_identifiers_and_keeps_originals() {
        assert_eq!(
            tokens("parseHTTPRequest"),
            ["parsehttprequest", "parse", "http", "request"]
        );
        assert_eq!(
            tokens("max_token_bytes"),
            ["max_token_bytes", "max", "token", "bytes"]
        );
        assert_eq!(
            tokens("XMLHttpRequest2"),
            ["xmlhttprequest2", "xml", "http", "request2"]
        );
        assert_eq!(tokens("plain"), ["plain"]);
        assert_eq!(tokens("__init__"), ["init"]);
    }

    #[test]
    fn paths_split_into_components() {
        assert_eq!(
            tokens("crates/index/src/lib.rs"),
            ["crates", "index", "src", "lib", "rs"]
        );
    }

    #[test]
    fn query_terms_drop_stopwords_and_duplicates() {
        assert_eq!(
            query_terms("how does the tokenizer split the camelCase"),
            ["tokenizer", "split", "camelcase", "camel", "case"]
        );
        assert_eq!(query_terms("the"), ["the"]);
    }

    #[test]
    fn tantivy_stream_yields_all_tokens() {
        let mut t = CodeTokenizer::default();
        let mut s = t.token_stream("fooBar baz");
        let mut seen = Vec::new();
        while s.advance() {
            seen.push((s.token().text.clone(), s.token().position));
        }
        assert_eq!(
            seen,
            [
                ("foobar".to_string(), 0),
                ("foo".to_string(), 0),
                ("bar".to_string(), 0),
                ("baz".to_string(), 1)
            ]
        );
    }
}
