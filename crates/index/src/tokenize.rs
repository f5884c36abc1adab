//! Code-aware tokenisation for BM25: identifiers are kept whole (lower-cased) and also split
//! at `snake_case` underscores and `camelCase`/`PascalCase` boundaries; everything that is
//! not a letter, digit or underscore separates tokens, so paths split into components.

use tantivy::tokenizer::{Token, TokenStream, Tokenizer};

/// Identifiers longer than this are not indexed (hashes, base64 blobs).
const MAX_TOKEN_BYTES: usize = 64;

/// Whether `c` continues a word (letters, digits, underscore).
fn is_word_char(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The character at byte `i` of `text` (which must be a character boundary) and its length.
fn char_at(text: &str, i: usize) -> Option<(char, usize)> {
    text.get(i..)
        .and_then(|t| t.chars().next())
        .map(|c| (c, c.len_utf8()))
}

/// Calls `emit(token, from, to, position)` for every token of `text`: each word lower-cased,
/// then its parts when it has more than one. Parts share the word's position.
///
/// This runs for every field of every chunk when indexing, so ASCII (nearly all source code)
/// takes a byte-level path that allocates nothing per token; other text goes through `char`s
/// with the same rules.
pub fn for_each_token(text: &str, mut emit: impl FnMut(&str, usize, usize, usize)) {
    let bytes = text.as_bytes();
    let mut position = 0;
    let mut lower = String::new();
    let mut parts: Vec<(usize, usize)> = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        // Skip separators.
        let b = bytes[i];
        if b < 0x80 {
            if !(b.is_ascii_alphanumeric() || b == b'_') {
                i += 1;
                continue;
            }
        } else {
            match char_at(text, i) {
                Some((c, n)) if !is_word_char(c) => {
                    i += n;
                    continue;
                }
                Some(_) => {}
                None => break,
            }
        }
        // A word: [s, i).
        let s = i;
        let mut ascii = true;
        while i < bytes.len() {
            let b = bytes[i];
            if b < 0x80 {
                if b.is_ascii_alphanumeric() || b == b'_' {
                    i += 1;
                } else {
                    break;
                }
            } else {
                match char_at(text, i) {
                    Some((c, n)) if is_word_char(c) => {
                        ascii = false;
                        i += n;
                    }
                    _ => break,
                }
            }
        }
        let word = &text[s..i];
        let trimmed = word.trim_matches('_');
        if trimmed.is_empty() || word.len() > MAX_TOKEN_BYTES {
            continue;
        }
        lowercase_into(&mut lower, trimmed, ascii);
        emit(&lower, s, i, position);
        parts.clear();
        if ascii {
            split_parts_ascii(trimmed.as_bytes(), &mut parts);
        } else {
            split_parts(trimmed, &mut parts);
        }
        if parts.len() > 1 {
            for &(a, b) in &parts {
                lowercase_into(&mut lower, &trimmed[a..b], ascii);
                emit(&lower, s, i, position);
            }
        }
        position += 1;
    }
}

/// Replaces `out` with `s` lower-cased (byte-wise when the caller knows `s` is ASCII).
fn lowercase_into(out: &mut String, s: &str, ascii: bool) {
    out.clear();
    if ascii {
        out.extend(s.bytes().map(|b| char::from(b.to_ascii_lowercase())));
    } else {
        out.extend(s.chars().flat_map(char::to_lowercase));
    }
}

/// The parts of an ASCII identifier as byte ranges: split at underscores, between a lower-case
/// letter or digit and an upper-case letter (`fooBar`), and before the last capital of a run
/// followed by a lower-case letter (`HTTPRequest`).
fn split_parts_ascii(word: &[u8], parts: &mut Vec<(usize, usize)>) {
    let mut piece_start = 0;
    for end in word
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'_')
        .map(|(k, _)| k)
        .chain(std::iter::once(word.len()))
    {
        if end > piece_start {
            let mut s = piece_start;
            for k in piece_start + 1..end {
                let (prev, c) = (word[k - 1], word[k]);
                let next_lower = k + 1 < end && word[k + 1].is_ascii_lowercase();
                let boundary = (prev.is_ascii_lowercase() || prev.is_ascii_digit())
                    && c.is_ascii_uppercase()
                    || prev.is_ascii_uppercase() && c.is_ascii_uppercase() && next_lower;
                if boundary {
                    parts.push((s, k));
                    s = k;
                }
            }
            parts.push((s, end));
        }
        piece_start = end + 1;
    }
}

/// [`split_parts_ascii`] for identifiers with non-ASCII letters.
fn split_parts(word: &str, parts: &mut Vec<(usize, usize)>) {
    let mut offset = 0;
    for piece in word.split('_') {
        let base = offset;
        offset += piece.len() + 1;
        if piece.is_empty() {
            continue;
        }
        let chars: Vec<(usize, char)> = piece.char_indices().collect();
        let mut s = 0;
        for k in 1..chars.len() {
            let (bi, c) = chars[k];
            let prev = chars[k - 1].1;
            let next_lower = chars.get(k + 1).is_some_and(|(_, n)| n.is_lowercase());
            let boundary = (prev.is_lowercase() || prev.is_ascii_digit()) && c.is_uppercase()
                || prev.is_uppercase() && c.is_uppercase() && next_lower;
            if boundary {
                parts.push((base + s, base + bi));
                s = bi;
            }
        }
        parts.push((base + s, base + piece.len()));
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

/// The tantivy tokenizer (registered as [`CodeTokenizer::NAME`]). It keeps its token buffer
/// (and each token's string) between calls, so indexing allocates only when a text has more
/// tokens, or longer ones, than any before it.
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
    len: usize,
    index: usize,
}

impl Tokenizer for CodeTokenizer {
    type TokenStream<'a> = CodeTokenStream<'a>;

    fn token_stream<'a>(&'a mut self, text: &'a str) -> CodeTokenStream<'a> {
        let tokens = &mut self.tokens;
        let mut len = 0;
        for_each_token(text, |t, from, to, position| {
            if let Some(tok) = tokens.get_mut(len) {
                tok.text.clear();
                tok.text.push_str(t);
                tok.offset_from = from;
                tok.offset_to = to;
                tok.position = position;
                tok.position_length = 1;
            } else {
                tokens.push(Token {
                    offset_from: from,
                    offset_to: to,
                    position,
                    text: t.to_string(),
                    position_length: 1,
                });
            }
            len += 1;
        });
        CodeTokenStream {
            tokens: &mut self.tokens,
            len,
            index: 0,
        }
    }
}

impl TokenStream for CodeTokenStream<'_> {
    fn advance(&mut self) -> bool {
        if self.index < self.len {
            self.index += 1;
            true
        } else {
            false
        }
    }

    fn token(&self) -> &Token {
        &self.tokens[self.index.saturating_sub(1)]
    }

    fn token_mut(&mut self) -> &mut Token {
        &mut self.tokens[self.index.saturating_sub(1)]
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
    fn ascii_and_unicode_splitting_agree() {
        // The byte-level splitter must match the char-level one on every ASCII identifier;
        // a fixed pseudo-random sweep over the characters that matter.
        let alphabet = b"aZ_9bQxY";
        let mut state = 0x2545_f491_u64;
        for _ in 0..20_000 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let len = 1 + (state % 12) as usize;
            let word: String = (0..len)
                .map(|k| char::from(alphabet[((state >> (k * 3)) % 8) as usize]))
                .collect();
            let (mut a, mut b) = (Vec::new(), Vec::new());
            split_parts_ascii(word.as_bytes(), &mut a);
            split_parts(&word, &mut b);
            assert_eq!(a, b, "{word}");
        }
    }

    #[test]
    fn non_ascii_words() {
        assert_eq!(
            tokens("größeBerechnen café_Über x"),
            [
                "größeberechnen",
                "größe",
                "berechnen",
                "café_über",
                "café",
                "über",
                "x"
            ]
        );
        assert_eq!(tokens("ÉtatMachine"), ["étatmachine", "état", "machine"]);
        // Separators that are not ASCII.
        assert_eq!(tokens("a→b — c"), ["a", "b", "c"]);
    }

    #[test]
    fn tokenizer_reuses_buffers_without_leaking_old_tokens() {
        let mut t = CodeTokenizer::default();
        let mut s = t.token_stream("alpha beta gamma delta");
        let mut n = 0;
        while s.advance() {
            n += 1;
        }
        assert_eq!(n, 4);
        let mut s = t.token_stream("x");
        let mut seen = Vec::new();
        while s.advance() {
            seen.push(s.token().text.clone());
        }
        assert_eq!(seen, ["x"]);
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
