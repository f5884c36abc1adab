//! Lexical search over tool texts: a tokeniser that splits identifiers (`read_file`,
//! `readFile`, `json-parse`) and Okapi BM25 over the handful of fields a tool has.
//!
//! trellis-index's BM25 is a tantivy index of code chunks on disk; a catalog of a few
//! hundred tools is searched in memory, rebuilt whenever the tool list changes, so a small
//! inverted index is used instead.

use std::collections::HashMap;

/// BM25's term-frequency saturation.
const K1: f64 = 1.2;
/// BM25's length normalisation.
const B: f64 = 0.75;

/// Words too common to say anything about a tool.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "for", "from", "in", "into", "is", "it",
    "its", "of", "on", "or", "that", "the", "then", "this", "to", "with", "all", "any", "me", "my",
    "please", "some",
];

/// The terms of `text`, lower-cased: each word (letters and digits), split further at
/// `camelCase` boundaries, with a plural `s` dropped; stopwords left out.
pub(crate) fn terms(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split(|c: char| !c.is_alphanumeric()) {
        if word.is_empty() {
            continue;
        }
        let mut start = 0;
        let chars: Vec<(usize, char)> = word.char_indices().collect();
        for k in 1..chars.len() {
            let (i, c) = chars[k];
            let prev = chars[k - 1].1;
            let next_lower = chars.get(k + 1).is_some_and(|(_, n)| n.is_lowercase());
            // `readFile` → read|File; `JSONParser` → JSON|Parser; `v2Api` → v2|Api.
            let boundary = c.is_uppercase() && (prev.is_lowercase() || prev.is_ascii_digit())
                || c.is_uppercase() && prev.is_uppercase() && next_lower;
            if boundary {
                push_term(&mut out, &word[start..i]);
                start = i;
            }
        }
        push_term(&mut out, &word[start..]);
    }
    out
}

fn push_term(out: &mut Vec<String>, part: &str) {
    let mut t = part.to_lowercase();
    if t.len() > 3 && t.ends_with('s') && !t.ends_with("ss") {
        t.pop();
    }
    if !t.is_empty() && !STOPWORDS.contains(&t.as_str()) {
        out.push(t);
    }
}

/// An in-memory BM25 index of documents given as term lists.
#[derive(Clone, Debug, Default)]
pub(crate) struct Bm25 {
    /// term → (document, term frequency)
    postings: HashMap<String, Vec<(usize, u32)>>,
    lengths: Vec<f64>,
    average: f64,
}

impl Bm25 {
    /// Indexes `docs` (document `i` is `docs[i]`).
    pub(crate) fn new(docs: &[Vec<String>]) -> Self {
        let mut postings: HashMap<String, Vec<(usize, u32)>> = HashMap::new();
        for (d, terms) in docs.iter().enumerate() {
            let mut tf: HashMap<&str, u32> = HashMap::new();
            for t in terms {
                *tf.entry(t.as_str()).or_insert(0) += 1;
            }
            for (t, f) in tf {
                postings.entry(t.to_owned()).or_default().push((d, f));
            }
        }
        let lengths: Vec<f64> = docs.iter().map(|d| d.len() as f64).collect();
        let average = if lengths.is_empty() {
            0.0
        } else {
            lengths.iter().sum::<f64>() / lengths.len() as f64
        };
        Self {
            postings,
            lengths,
            average,
        }
    }

    /// Whether document `doc` contains `term`.
    pub(crate) fn contains(&self, term: &str, doc: usize) -> bool {
        // Postings are pushed in document order.
        self.postings
            .get(term)
            .is_some_and(|p| p.binary_search_by_key(&doc, |(d, _)| *d).is_ok())
    }

    /// Whether any document contains `term`.
    pub(crate) fn known(&self, term: &str) -> bool {
        self.postings.contains_key(term)
    }

    /// Each document's BM25 score for the query terms (0 for no match).
    pub(crate) fn score(&self, query: &[String]) -> Vec<f64> {
        let n = self.lengths.len();
        let mut scores = vec![0.0; n];
        let mut distinct: Vec<&String> = query.iter().collect();
        distinct.sort();
        distinct.dedup();
        for t in distinct {
            let Some(post) = self.postings.get(t) else {
                continue;
            };
            let df = post.len() as f64;
            let idf = ((n as f64 - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(d, f) in post {
                let f = f64::from(f);
                let norm = if self.average > 0.0 {
                    1.0 - B + B * self.lengths[d] / self.average
                } else {
                    1.0
                };
                scores[d] += idf * f * (K1 + 1.0) / (f + K1 * norm);
            }
        }
        scores
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identifiers_split_and_plurals_fold() {
        assert_eq!(terms("readFile"), ["read", "file"]);
        assert_eq!(terms("read_file"), ["read", "file"]);
        assert_eq!(terms("JSONParser v2Api"), ["json", "parser", "v2", "api"]);
        assert_eq!(terms("Read all the files"), ["read", "file"]);
        assert_eq!(terms("class access"), ["class", "access"]);
    }

    #[test]
    fn rarer_terms_weigh_more() {
        let docs: Vec<Vec<String>> = ["read file", "write file", "parse json"]
            .iter()
            .map(|d| terms(d))
            .collect();
        let bm = Bm25::new(&docs);
        let s = bm.score(&terms("read file"));
        assert!(s[0] > s[1] && s[1] > 0.0 && s[2] == 0.0);
        assert!(bm.contains("json", 2) && !bm.contains("json", 1) && !bm.known("xml"));
    }
}
