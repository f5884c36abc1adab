//! The full-text side: a tantivy index of chunks (name, signature/doc, path, body) with the
//! code-aware tokenizer, BM25-scored over live documents only ([`live`]), so that an index
//! updated in place ranks exactly like a fresh index of the same tree.

mod live;

use std::path::Path;

use tantivy::collector::TopDocs;
use tantivy::query::{BooleanQuery, BoostQuery, ConstScoreQuery, Occur, Query, TermQuery};
use tantivy::schema::{
    FAST, Field, IndexRecordOption, STRING, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::{Index, IndexReader, IndexWriter, ReloadPolicy, TantivyDocument, Term};

use crate::chunk::{Category, Chunk, ChunkId};
use crate::error::{Error, Result};
use crate::tokenize::{CodeTokenizer, query_terms};

/// Indexing memory for the writer (shared by its threads).
const WRITER_HEAP_BYTES: usize = 256 * 1024 * 1024;
/// Indexing memory of the writer opened for a small update (one thread): every commit
/// restarts the writer's threads with fresh buffers, which costs more than a few files'
/// worth of indexing when the buffers are large.
const SMALL_WRITER_HEAP_BYTES: usize = 15_000_000; // tantivy's minimum per thread

#[derive(Clone, Copy, Debug)]
struct Fields {
    id: Field,
    path: Field,
    category: Field,
    path_text: Field,
    name: Field,
    head: Field,
    body: Field,
}

/// Per-field weights: a match in a symbol name says more than one in a body.
const BOOSTS: [(usize, f32); 4] = [(0, 1.2), (1, 2.5), (2, 1.5), (3, 1.0)];

/// The tantivy index of chunks.
pub struct Bm25 {
    index: Index,
    reader: IndexReader,
    fields: Fields,
    writer: Option<IndexWriter>,
    /// Whether the open writer is the small one.
    small: bool,
    /// Live token totals per segment (see [`live`]).
    tokens: live::TokenCache,
}

impl std::fmt::Debug for Bm25 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bm25").finish_non_exhaustive()
    }
}

fn schema() -> (Schema, Fields) {
    let mut b = Schema::builder();
    let text = TextOptions::default().set_indexing_options(
        TextFieldIndexing::default()
            .set_tokenizer(CodeTokenizer::NAME)
            .set_index_option(IndexRecordOption::WithFreqs),
    );
    let fields = Fields {
        // Read from the fast-field column only; not indexed (a term per chunk would fill the
        // term dictionary with a million unique, never-searched entries).
        id: b.add_i64_field("id", FAST),
        path: b.add_text_field("path", STRING),
        category: b.add_text_field("category", STRING),
        path_text: b.add_text_field("path_text", text.clone()),
        name: b.add_text_field("name", text.clone()),
        head: b.add_text_field("head", text.clone()),
        body: b.add_text_field("body", text),
    };
    (b.build(), fields)
}

impl Bm25 {
    /// Opens or creates the index in `dir`.
    pub fn open(dir: &Path) -> Result<Self> {
        std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
        let (schema, fields) = schema();
        let mmap = tantivy::directory::MmapDirectory::open(dir)
            .map_err(|e| Error::Tantivy(tantivy::TantivyError::from(e)))?;
        let index = Index::open_or_create(mmap, schema)?;
        index
            .tokenizers()
            .register(CodeTokenizer::NAME, CodeTokenizer::default());
        let reader = index
            .reader_builder()
            .reload_policy(ReloadPolicy::Manual)
            .try_into()?;
        Ok(Bm25 {
            index,
            reader,
            fields,
            writer: None,
            small: false,
            tokens: live::TokenCache::default(),
        })
    }

    /// Sizes the writer for the coming update: a small update (a few files) gets one thread
    /// and tantivy's minimum buffer; anything else the full writer. A small writer left
    /// open is replaced by a full one when a large update starts (a full one is kept).
    pub fn prepare(&mut self, small: bool) -> Result<()> {
        if self.writer.is_some() && self.small && !small {
            self.close_writer()?;
        }
        if self.writer.is_none() {
            let (threads, heap) = if small {
                (1, SMALL_WRITER_HEAP_BYTES)
            } else {
                let threads = std::thread::available_parallelism()
                    .map_or(1, |n| n.get())
                    .min(4);
                (threads, WRITER_HEAP_BYTES)
            };
            self.writer = Some(self.index.writer_with_num_threads(threads, heap)?);
            self.small = small;
        }
        Ok(())
    }

    fn writer(&mut self) -> Result<&mut IndexWriter> {
        if self.writer.is_none() {
            self.prepare(false)?;
        }
        match self.writer.as_mut() {
            Some(w) => Ok(w),
            None => Err(Error::Config("index writer unavailable".into())),
        }
    }

    /// Queues removal of every chunk of `path`.
    pub fn delete_path(&mut self, path: &str) -> Result<()> {
        let term = Term::from_field_text(self.fields.path, path);
        self.writer()?.delete_term(term);
        Ok(())
    }

    /// Queues a chunk for indexing.
    pub fn add(&mut self, c: &Chunk) -> Result<()> {
        let f = self.fields;
        let mut doc = TantivyDocument::default();
        doc.add_i64(f.id, c.id.0);
        doc.add_text(f.path, &c.path);
        doc.add_text(f.category, c.category.as_str());
        doc.add_text(f.path_text, &c.path);
        let d = &c.decl;
        let mut name = String::with_capacity(d.name.len() + d.qualified_name.len() + 1);
        name.push_str(&d.name);
        if d.qualified_name != d.name {
            name.push(' ');
            name.push_str(&d.qualified_name);
        }
        doc.add_text(f.name, &name);
        let mut head = String::with_capacity(d.signature.len() + d.doc.len() + d.parent.len() + 2);
        head.push_str(&d.signature);
        head.push('\n');
        head.push_str(&d.doc);
        head.push('\n');
        head.push_str(&d.parent);
        doc.add_text(f.head, &head);
        doc.add_text(f.body, &c.text);
        self.writer()?.add_document(doc)?;
        Ok(())
    }

    /// Commits queued changes and makes them visible to searches.
    pub fn commit(&mut self) -> Result<()> {
        if let Some(w) = self.writer.as_mut() {
            w.commit()?;
            self.reader.reload()?;
        }
        Ok(())
    }

    /// Releases the writer (its lock and memory) after committing.
    pub fn close_writer(&mut self) -> Result<()> {
        self.commit()?;
        if let Some(w) = self.writer.take() {
            w.wait_merging_threads()?;
        }
        Ok(())
    }

    /// The best `limit` chunks for `query`, restricted to `categories` when not empty, as
    /// (chunk id, BM25 score) in decreasing score order.
    pub fn search(
        &self,
        query: &str,
        categories: &[Category],
        limit: usize,
    ) -> Result<Vec<(ChunkId, f32)>> {
        let terms = query_terms(query);
        if terms.is_empty() || limit == 0 {
            return Ok(Vec::new());
        }
        let f = self.fields;
        let text_fields = [f.path_text, f.name, f.head, f.body];
        let mut should: Vec<(Occur, Box<dyn Query>)> = Vec::new();
        for t in &terms {
            for (i, boost) in BOOSTS {
                let q = TermQuery::new(
                    Term::from_field_text(text_fields[i], t),
                    IndexRecordOption::WithFreqs,
                );
                should.push((Occur::Should, Box::new(BoostQuery::new(Box::new(q), boost))));
            }
        }
        let mut q: Box<dyn Query> = Box::new(BooleanQuery::new(should));
        if !categories.is_empty() {
            // Term queries, not a `TermSetQuery`: that builds an FST of the terms per segment
            // for every search, and the FST builder's table (zeroed on creation) was about a
            // fifth of a `trellis serve` discussion run's CPU. Unscored either way (a constant
            // 0: no statistics are read for the category terms).
            let filter = BooleanQuery::new(
                categories
                    .iter()
                    .map(|c| {
                        let term = Term::from_field_text(f.category, c.as_str());
                        let q: Box<dyn Query> =
                            Box::new(TermQuery::new(term, IndexRecordOption::Basic));
                        (Occur::Should, q)
                    })
                    .collect(),
            );
            q = Box::new(BooleanQuery::new(vec![
                (Occur::Must, q),
                (
                    Occur::Must,
                    Box::new(ConstScoreQuery::new(Box::new(filter), 0.0)),
                ),
            ]));
        }
        let searcher = self.reader.searcher();
        let stats = self.tokens.stats(&searcher, text_fields)?;
        // A few more than asked, so that near-equal scores at the cut are chosen by chunk id.
        let top = searcher.search_with_statistics_provider(
            &q,
            &TopDocs::with_limit(limit.saturating_add(TIE_MARGIN)).order_by_score(),
            &stats,
        )?;
        let mut out = Vec::with_capacity(top.len());
        let mut columns: Vec<Option<tantivy::columnar::Column<i64>>> =
            vec![None; searcher.segment_readers().len()];
        for (score, addr) in top {
            let seg = addr.segment_ord as usize;
            if columns[seg].is_none() {
                columns[seg] = Some(
                    searcher
                        .segment_reader(addr.segment_ord)
                        .fast_fields()
                        .i64("id")?,
                );
            }
            if let Some(id) = columns[seg].as_ref().and_then(|c| c.first(addr.doc_id)) {
                out.push((ChunkId(id), stable_score(score)));
            }
        }
        // Equal scores in chunk-id order, not in the (update-history dependent) segment order.
        out.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        out.truncate(limit);
        Ok(out)
    }
}

/// Extra hits fetched beyond the limit (see [`stable_score`]).
const TIE_MARGIN: usize = 16;

/// `score` rounded to 12 significant bits. tantivy sums a document's clause scores in an order
/// that depends on the segment layout, so the same document can score a last bit apart in an
/// updated and a fresh index; rounding makes such scores equal, and equal scores are ordered by
/// chunk id. (Two scores a bit apart that straddle a rounding boundary still differ: about
/// one near-tie in 2,000.)
fn stable_score(score: f32) -> f32 {
    const DROP: u32 = 11;
    let bits = score.to_bits();
    f32::from_bits(bits.wrapping_add(1 << (DROP - 1)) & !((1 << DROP) - 1))
}
