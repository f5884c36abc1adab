//! BM25 statistics of the live documents only.
//!
//! tantivy's own statistics count deleted documents until a merge purges them (and a merge
//! estimates the token totals of a segment with deletes from its quantised field norms), so
//! an index updated in place would rank differently from a fresh index of the same tree. These
//! statistics depend only on the set of live documents, never on how they are laid out in
//! segments or what was deleted:
//!
//! - the document count is the number of live documents;
//! - a term's document frequency counts live documents only (a segment with deletes scans the
//!   term's postings against its alive set);
//! - a field's token total is the sum of the live documents' field norms as tantivy stores
//!   them (the quantised lengths the scorer itself uses), for every segment alike.
//!
//! The token totals cost one pass over a segment's documents; they are cached per segment and
//! delete count, so a search only pays for segments that changed since the last one.

use std::collections::HashMap;
use std::sync::Mutex;

use tantivy::fieldnorm::FieldNormReader;
use tantivy::index::SegmentId;
use tantivy::query::Bm25StatisticsProvider;
use tantivy::schema::{Field, IndexRecordOption};
use tantivy::{DocSet, Searcher, SegmentReader, TERMINATED, Term};

/// The text fields whose token totals are tracked.
pub(super) type TextFields = [Field; 4];

/// Per segment (id, deleted documents): the live token total of each text field.
#[derive(Debug, Default)]
pub(super) struct TokenCache {
    segments: Mutex<HashMap<(SegmentId, u32), [u64; 4]>>,
}

impl TokenCache {
    /// Statistics for one search with `searcher` (token totals computed now, from the cache
    /// where possible; entries of segments no longer searched are dropped).
    pub(super) fn stats<'a>(
        &self,
        searcher: &'a Searcher,
        fields: TextFields,
    ) -> tantivy::Result<LiveStats<'a>> {
        let mut totals = [0u64; 4];
        let mut cache = self
            .segments
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut current = Vec::with_capacity(searcher.segment_readers().len());
        for seg in searcher.segment_readers() {
            let key = (seg.segment_id(), seg.num_deleted_docs());
            current.push(key);
            let seg_totals = match cache.get(&key) {
                Some(t) => *t,
                None => {
                    let t = segment_tokens(seg, &fields)?;
                    cache.insert(key, t);
                    t
                }
            };
            for (total, t) in totals.iter_mut().zip(seg_totals) {
                *total += t;
            }
        }
        cache.retain(|k, _| current.contains(k));
        Ok(LiveStats {
            searcher,
            fields,
            tokens: totals,
        })
    }
}

/// The sum of live documents' field norms per text field of one segment.
fn segment_tokens(seg: &SegmentReader, fields: &TextFields) -> tantivy::Result<[u64; 4]> {
    let norms: Vec<Option<FieldNormReader>> = fields
        .iter()
        .map(|f| seg.fieldnorms_readers().get_field(*f))
        .collect::<tantivy::Result<_>>()?;
    let mut histograms = [[0u64; 256]; 4];
    for doc in seg.doc_ids_alive() {
        for (h, n) in histograms.iter_mut().zip(&norms) {
            if let Some(n) = n {
                h[n.fieldnorm_id(doc) as usize] += 1;
            }
        }
    }
    let mut out = [0u64; 4];
    for (o, h) in out.iter_mut().zip(&histograms) {
        *o = h
            .iter()
            .enumerate()
            .map(|(id, count)| count * u64::from(FieldNormReader::id_to_fieldnorm(id as u8)))
            .sum();
    }
    Ok(out)
}

/// [`Bm25StatisticsProvider`] over live documents (see the module docs).
pub(super) struct LiveStats<'a> {
    searcher: &'a Searcher,
    fields: TextFields,
    tokens: [u64; 4],
}

impl Bm25StatisticsProvider for LiveStats<'_> {
    fn total_num_tokens(&self, field: Field) -> tantivy::Result<u64> {
        match self.fields.iter().position(|f| *f == field) {
            Some(i) => Ok(self.tokens[i]),
            // Not a scored text field (the category filter is boosted to zero).
            None => Bm25StatisticsProvider::total_num_tokens(self.searcher, field),
        }
    }

    fn total_num_docs(&self) -> tantivy::Result<u64> {
        Ok(self.searcher.num_docs())
    }

    fn doc_freq(&self, term: &Term) -> tantivy::Result<u64> {
        let mut total = 0u64;
        for seg in self.searcher.segment_readers() {
            let inverted = seg.inverted_index(term.field())?;
            let Some(alive) = seg.alive_bitset() else {
                total += u64::from(inverted.doc_freq(term)?);
                continue;
            };
            let Some(mut postings) = inverted.read_postings(term, IndexRecordOption::Basic)? else {
                continue;
            };
            let mut doc = postings.doc();
            while doc != TERMINATED {
                if alive.is_alive(doc) {
                    total += 1;
                }
                doc = postings.advance();
            }
        }
        Ok(total)
    }
}
