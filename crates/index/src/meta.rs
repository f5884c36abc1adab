//! The metadata database (`.trellis/index/meta.db`, SQLite): which file was indexed at which
//! content hash, the chunks with their attribution and text, per-file symbols, imports and
//! references, and which embedding row holds the embedding of which text.
//!
//! It is the source of truth for "this file is indexed": its row is written only after the
//! full-text index has committed the file's documents, so an interrupted run leaves files
//! either fully indexed or still marked stale, and the next run completes them.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use rusqlite::{Connection, OptionalExtension, params};

use crate::analyze::FileAnalysis;
use crate::chunk::{Category, Chunk, ChunkId, ChunkKind, Declaration};
use crate::error::{Error, Result};
use crate::symbols::{Import, Symbol};

/// Version 4: Python and JavaScript module-level names (`PATTERN = …`, `const TABLE = {…}`) are
/// symbols; the files are extracted again, and the embedding cache (keyed by the embedded
/// text) is kept.
/// Version 3: embeddings are keyed by the hash of exactly the text embedded
/// ([`Chunk::embedding_hash`]: path, qualified name, doc comment and text); version 2 keyed
/// them by the chunk text alone, so a moved or renamed chunk kept a stale vector.
/// Version 2: chunks are stored in insertion order (rowid) with a unique index on the chunk id;
/// version 1 kept them in a B-tree keyed by the (random) chunk id, which made every batch of a
/// cold index rewrite pages all over the table.
const SCHEMA_VERSION: &str = "4";

/// The tables holding what a re-index recreates (the embedding cache in `vectors` survives).
const DERIVED_TABLES: &str = "
             CREATE TABLE IF NOT EXISTS files(
                path TEXT PRIMARY KEY, hash INTEGER NOT NULL, size INTEGER NOT NULL,
                mtime_ns INTEGER NOT NULL, lang TEXT NOT NULL, symbols TEXT NOT NULL,
                imports TEXT NOT NULL, refs TEXT NOT NULL) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS chunks(
                id INTEGER NOT NULL, path TEXT NOT NULL, kind TEXT NOT NULL,
                category TEXT NOT NULL, lang TEXT NOT NULL, name TEXT NOT NULL,
                qualified_name TEXT NOT NULL, parent TEXT NOT NULL, signature TEXT NOT NULL,
                params TEXT NOT NULL, returns TEXT NOT NULL, doc TEXT NOT NULL,
                start_line INTEGER NOT NULL, end_line INTEGER NOT NULL, text TEXT NOT NULL,
                embed_hash INTEGER NOT NULL);
             CREATE UNIQUE INDEX IF NOT EXISTS chunks_id ON chunks(id);
             CREATE INDEX IF NOT EXISTS chunks_path ON chunks(path);
             CREATE INDEX IF NOT EXISTS chunks_embed_hash ON chunks(embed_hash);
             CREATE TABLE IF NOT EXISTS pending(path TEXT PRIMARY KEY) WITHOUT ROWID;
             CREATE TABLE IF NOT EXISTS unparsed(path TEXT PRIMARY KEY) WITHOUT ROWID;";

/// What the index knows about a file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileState {
    /// xxh3 of the content.
    pub hash: i64,
    /// Size in bytes when indexed.
    pub size: u64,
    /// Modification time when indexed (ns since the epoch).
    pub mtime_ns: i64,
}

/// A file's new content to record.
#[derive(Debug)]
pub struct FileRecord<'a> {
    /// Relative path.
    pub path: &'a str,
    /// State after indexing.
    pub state: FileState,
    /// The analysis.
    pub analysis: &'a FileAnalysis,
    /// Indexed as text windows only, its symbols still to extract (the first pass of a
    /// large update, see [`Meta::unparsed`]).
    pub unparsed: bool,
}

/// Per-file symbols, imports and references, as stored.
#[derive(Clone, Debug, Default)]
pub struct FileOutline {
    /// Relative path.
    pub path: String,
    /// Language name.
    pub lang: String,
    /// Definitions.
    pub symbols: Vec<Symbol>,
    /// Imports.
    pub imports: Vec<Import>,
    /// References by identifier.
    pub refs: HashMap<String, u32>,
}

/// Counts for summaries.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Indexed files.
    pub files: u64,
    /// Symbol chunks.
    pub symbols: u64,
    /// Document sections.
    pub sections: u64,
    /// All chunks.
    pub chunks: u64,
    /// Chunks with an embedding.
    pub embedded: u64,
}

/// The metadata database.
#[derive(Debug)]
pub struct Meta {
    conn: Connection,
}

impl Meta {
    /// Opens or creates the database at `path`. The flag is true when the database was
    /// migrated from an older format: its files and chunks were dropped (to be re-indexed;
    /// the full-text index must be recreated with them); from formats 1 and 2 so was the
    /// embedding cache, whose keys (the chunk text alone) do not say which text was embedded.
    pub fn open(path: &Path) -> Result<(Self, bool)> {
        let conn = Connection::open(path)?;
        conn.execute_batch(
            "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA temp_store=MEMORY;
             PRAGMA cache_size=-131072;
             CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);",
        )?;
        let version: Option<String> = conn
            .query_row("SELECT value FROM meta WHERE key='schema'", [], |r| {
                r.get(0)
            })
            .optional()?;
        let migrated = match version.as_deref() {
            None => false,
            Some(SCHEMA_VERSION) => false,
            // Versions 1 and 2 differ in derived tables and in the embedding cache's key:
            // drop them all (the vector file is reset when the model id is missing).
            Some(old @ ("1" | "2")) => {
                tracing::info!(
                    db = %path.display(),
                    "index format {old} -> {SCHEMA_VERSION}: re-indexing and re-embedding"
                );
                conn.execute_batch(
                    "DROP TABLE IF EXISTS chunks; DROP TABLE IF EXISTS files;
                     DROP TABLE IF EXISTS pending; DROP TABLE IF EXISTS unparsed;
                     DROP TABLE IF EXISTS vectors;
                     DELETE FROM meta WHERE key IN ('embedding_model', 'embedding_dim');",
                )?;
                true
            }
            // Version 3 differs in what is extracted: the derived tables go, the embedding
            // cache stays (its keys are exactly the texts embedded; unchanged chunks hit it).
            Some(old @ "3") => {
                tracing::info!(
                    db = %path.display(),
                    "index format {old} -> {SCHEMA_VERSION}: re-indexing (embeddings kept)"
                );
                conn.execute_batch(
                    "DROP TABLE IF EXISTS chunks; DROP TABLE IF EXISTS files;
                     DROP TABLE IF EXISTS pending; DROP TABLE IF EXISTS unparsed;",
                )?;
                true
            }
            Some(_) => return Err(Error::Incompatible(path.to_path_buf())),
        };
        conn.execute_batch(DERIVED_TABLES)?;
        conn.execute_batch(
            "CREATE TABLE IF NOT EXISTS vectors(
                embed_hash INTEGER PRIMARY KEY, row INTEGER NOT NULL);",
        )?;
        conn.execute(
            "INSERT INTO meta(key, value) VALUES('schema', ?1)
             ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            [SCHEMA_VERSION],
        )?;
        Ok((Meta { conn }, migrated))
    }

    /// Reads a value from the key-value table.
    pub fn get(&self, key: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row("SELECT value FROM meta WHERE key=?1", [key], |r| r.get(0))
            .optional()?)
    }

    /// Writes a value to the key-value table.
    pub fn set(&self, key: &str, value: &str) -> Result<()> {
        self.conn.execute(
            "INSERT INTO meta(key, value) VALUES(?1, ?2)
             ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            params![key, value],
        )?;
        Ok(())
    }

    /// Every indexed file and its state.
    pub fn file_states(&self) -> Result<HashMap<String, FileState>> {
        let mut stmt = self
            .conn
            .prepare("SELECT path, hash, size, mtime_ns FROM files")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                FileState {
                    hash: r.get(1)?,
                    size: r.get::<_, i64>(2)? as u64,
                    mtime_ns: r.get(3)?,
                },
            ))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The state of one file.
    pub fn file_state(&self, path: &str) -> Result<Option<FileState>> {
        Ok(self
            .conn
            .query_row(
                "SELECT hash, size, mtime_ns FROM files WHERE path=?1",
                [path],
                |r| {
                    Ok(FileState {
                        hash: r.get(0)?,
                        size: r.get::<_, i64>(1)? as u64,
                        mtime_ns: r.get(2)?,
                    })
                },
            )
            .optional()?)
    }

    /// Journals the paths of a batch before its full-text commit; [`Meta::apply`] clears the
    /// journal. Paths still journaled at the next start were interrupted mid-batch.
    pub fn mark_pending(&mut self, paths: &[&str]) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut ins = tx.prepare_cached("INSERT OR IGNORE INTO pending(path) VALUES(?1)")?;
            for p in paths {
                ins.execute([p])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Paths of an interrupted batch.
    pub fn pending(&self) -> Result<Vec<String>> {
        let mut stmt = self.conn.prepare("SELECT path FROM pending")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Files recorded by the text pass whose symbols (and sections) are still to be extracted:
    /// searchable as text windows, complete once a later pass records them parsed.
    pub fn unparsed(&self) -> Result<HashSet<String>> {
        let mut stmt = self.conn.prepare("SELECT path FROM unparsed")?;
        let rows = stmt.query_map([], |r| r.get(0))?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Records new file contents and removals in one transaction.
    pub fn apply(
        &mut self,
        records: &[FileRecord<'_>],
        removed: &[String],
        touched: &[(String, FileState)],
    ) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut del_chunks = tx.prepare_cached("DELETE FROM chunks WHERE path=?1")?;
            let mut del_file = tx.prepare_cached("DELETE FROM files WHERE path=?1")?;
            let mut ins_file = tx.prepare_cached(
                "INSERT OR REPLACE INTO files(path, hash, size, mtime_ns, lang, symbols, imports, refs)
                 VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?;
            let mut ins_chunk = tx.prepare_cached(
                "INSERT INTO chunks(id, path, kind, category, lang, name, qualified_name,
                   parent, signature, params, returns, doc, start_line, end_line, text, embed_hash)
                 VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)",
            )?;
            let mut touch =
                tx.prepare_cached("UPDATE files SET size=?2, mtime_ns=?3 WHERE path=?1")?;
            let mut mark_unparsed =
                tx.prepare_cached("INSERT OR IGNORE INTO unparsed(path) VALUES(?1)")?;
            let mut parsed = tx.prepare_cached("DELETE FROM unparsed WHERE path=?1")?;
            for path in removed {
                del_chunks.execute([path])?;
                del_file.execute([path])?;
                parsed.execute([path])?;
            }
            for rec in records {
                del_chunks.execute([rec.path])?;
                if rec.unparsed {
                    mark_unparsed.execute([rec.path])?;
                } else {
                    parsed.execute([rec.path])?;
                }
                let a = rec.analysis;
                let lang = crate::lang::Lang::detect(rec.path).as_str();
                let json = |v: serde_json::Result<String>| v.unwrap_or_default();
                ins_file.execute(params![
                    rec.path,
                    rec.state.hash,
                    rec.state.size as i64,
                    rec.state.mtime_ns,
                    lang,
                    json(serde_json::to_string(&a.symbols)),
                    json(serde_json::to_string(&a.imports)),
                    json(serde_json::to_string(&a.refs)),
                ])?;
            }
            // Rows are appended in file order (the table is keyed by insertion order, so a
            // batch writes fresh pages at its end). A file's old rows were deleted above, so
            // ids can only repeat within this batch (two chunks with the same identity): the
            // last one wins, as a re-insert would.
            let mut last: HashMap<ChunkId, usize> = HashMap::new();
            let chunks: Vec<&Chunk> = records.iter().flat_map(|r| &r.analysis.chunks).collect();
            for (i, c) in chunks.iter().enumerate() {
                last.insert(c.id, i);
            }
            for (i, c) in chunks.iter().enumerate() {
                if last.get(&c.id) != Some(&i) {
                    continue;
                }
                ins_chunk.execute(params![
                    c.id.0,
                    c.path,
                    c.decl.kind.as_str(),
                    c.category.as_str(),
                    c.lang,
                    c.decl.name,
                    c.decl.qualified_name,
                    c.decl.parent,
                    c.decl.signature,
                    c.decl.params,
                    c.decl.returns,
                    c.decl.doc,
                    c.decl.start_line,
                    c.decl.end_line,
                    c.text,
                    c.embedding_hash(),
                ])?;
            }
            for (path, st) in touched {
                touch.execute(params![path, st.size as i64, st.mtime_ns])?;
            }
            let mut unpend = tx.prepare_cached("DELETE FROM pending WHERE path=?1")?;
            for p in records
                .iter()
                .map(|r| r.path)
                .chain(removed.iter().map(String::as_str))
                .chain(touched.iter().map(|t| t.0.as_str()))
            {
                unpend.execute([p])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Loads chunks by id, in the order given (missing ids are skipped).
    pub fn chunks(&self, ids: &[ChunkId]) -> Result<Vec<Chunk>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, path, kind, category, lang, name, qualified_name, parent, signature, params,
                    returns, doc, start_line, end_line, text FROM chunks WHERE id=?1",
        )?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            if let Some(c) = stmt.query_row([id.0], row_to_chunk).optional()? {
                out.push(c);
            }
        }
        Ok(out)
    }

    /// Chunks of one file, in line order.
    pub fn chunks_of(&self, path: &str) -> Result<Vec<Chunk>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, path, kind, category, lang, name, qualified_name, parent, signature, params,
                    returns, doc, start_line, end_line, text FROM chunks WHERE path=?1
             ORDER BY start_line",
        )?;
        let rows = stmt.query_map([path], row_to_chunk)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Chunks whose name is `name` (or, when `exact` is false, contains it, ignoring ASCII
    /// case), of `kinds` when given, under `path_prefix` when given: exact names first, then
    /// by path and line; at most `limit`.
    pub fn find_chunks(
        &self,
        name: &str,
        exact: bool,
        kinds: &[&str],
        path_prefix: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Chunk>> {
        let pattern = format!(
            "%{}%",
            name.replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        let prefix = path_prefix.map(|p| {
            format!(
                "{}%",
                p.replace('\\', "\\\\")
                    .replace('%', "\\%")
                    .replace('_', "\\_")
            )
        });
        let kinds_json = serde_json::to_string(kinds).unwrap_or_else(|_| "[]".into());
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, path, kind, category, lang, name, qualified_name, parent, signature, params,
                    returns, doc, start_line, end_line, text FROM chunks
             WHERE (CASE WHEN ?2 THEN name = ?1 OR qualified_name = ?1
                         ELSE name LIKE ?3 ESCAPE '\\' OR qualified_name LIKE ?3 ESCAPE '\\' END)
               AND (json_array_length(?4) = 0 OR kind IN (SELECT value FROM json_each(?4)))
               AND (?5 IS NULL OR path LIKE ?5 ESCAPE '\\')
             ORDER BY (name = ?1) DESC, path, start_line
             LIMIT ?6",
        )?;
        let rows = stmt.query_map(
            rusqlite::params![
                name,
                exact,
                pattern,
                kinds_json,
                prefix,
                i64::try_from(limit).unwrap_or(i64::MAX)
            ],
            row_to_chunk,
        )?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Every stored file outline (symbols, imports, references), for the repo map.
    pub fn outlines(&self) -> Result<Vec<FileOutline>> {
        let mut stmt = self
            .conn
            .prepare("SELECT path, lang, symbols, imports, refs FROM files ORDER BY path")?;
        let rows = stmt.query_map([], |r| {
            Ok((
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
                r.get::<_, String>(2)?,
                r.get::<_, String>(3)?,
                r.get::<_, String>(4)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (path, lang, s, i, r) = row?;
            out.push(FileOutline {
                path,
                lang,
                symbols: serde_json::from_str(&s).unwrap_or_default(),
                imports: serde_json::from_str(&i).unwrap_or_default(),
                refs: serde_json::from_str(&r).unwrap_or_default(),
            });
        }
        Ok(out)
    }

    /// Up to `n` chunk ids spread over the table.
    pub fn sample_ids(&self, n: usize) -> Result<Vec<ChunkId>> {
        let total: i64 = self
            .conn
            .query_row("SELECT count(*) FROM chunks", [], |r| r.get(0))?;
        let step = (total as usize / n.max(1)).max(1) as i64;
        let mut stmt = self.conn.prepare(
            "SELECT id FROM (SELECT id, row_number() OVER (ORDER BY id) AS k FROM chunks)
             WHERE k % ?1 = 0 LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![step, n.min(i64::MAX as usize) as i64], |r| {
            Ok(ChunkId(r.get(0)?))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The first indexed file of a language.
    pub fn first_path_with_lang(&self, lang: &str) -> Result<Option<String>> {
        Ok(self
            .conn
            .query_row(
                "SELECT path FROM files WHERE lang=?1 AND symbols != '[]' ORDER BY path LIMIT 1",
                [lang],
                |r| r.get(0),
            )
            .optional()?)
    }

    /// SQLite's `data_version` of this connection: it changes when another connection (another
    /// handle, another process) commits to the database, not with this one's own commits.
    pub fn data_version(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("PRAGMA data_version", [], |r| r.get(0))?)
    }

    /// Summary counts.
    pub fn counts(&self) -> Result<Counts> {
        let one = |sql: &str| -> Result<u64> {
            Ok(self.conn.query_row(sql, [], |r| r.get::<_, i64>(0))? as u64)
        };
        Ok(Counts {
            files: one("SELECT count(*) FROM files")?,
            symbols: one(
                "SELECT count(*) FROM chunks WHERE kind NOT IN ('file', 'section', 'text')",
            )?,
            sections: one("SELECT count(*) FROM chunks WHERE kind='section'")?,
            chunks: one("SELECT count(*) FROM chunks")?,
            embedded: one(
                "SELECT count(*) FROM chunks c JOIN vectors v ON v.embed_hash=c.embed_hash",
            )?,
        })
    }

    /// Up to `limit` chunks (one per distinct embedded text) that have no embedding yet.
    pub fn unembedded(&self, limit: usize) -> Result<Vec<Chunk>> {
        let mut stmt = self.conn.prepare_cached(
            "SELECT id, path, kind, category, lang, name, qualified_name, parent, signature, params,
                    returns, doc, start_line, end_line, text FROM chunks
             WHERE embed_hash NOT IN (SELECT embed_hash FROM vectors)
             GROUP BY embed_hash LIMIT ?1",
        )?;
        let rows = stmt.query_map([limit as i64], row_to_chunk)?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// Count of distinct embedded texts without an embedding.
    pub fn unembedded_count(&self) -> Result<u64> {
        Ok(self.conn.query_row(
            "SELECT count(DISTINCT embed_hash) FROM chunks
             WHERE embed_hash NOT IN (SELECT embed_hash FROM vectors)",
            [],
            |r| r.get::<_, i64>(0),
        )? as u64)
    }

    /// Records that the embeddings of these embedding hashes ([`Chunk::embedding_hash`]) are
    /// at these rows.
    pub fn add_vectors(&mut self, rows: &[(i64, u64)]) -> Result<()> {
        let tx = self.conn.transaction()?;
        {
            let mut ins = tx
                .prepare_cached("INSERT OR REPLACE INTO vectors(embed_hash, row) VALUES(?1, ?2)")?;
            for (h, row) in rows {
                ins.execute(params![h, *row as i64])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    /// Forgets every embedding (after a model change).
    pub fn clear_vectors(&self) -> Result<()> {
        self.conn.execute("DELETE FROM vectors", [])?;
        Ok(())
    }

    /// For every chunk with an embedding: (chunk id, embedding row, category).
    pub fn live_vectors(&self) -> Result<Vec<(ChunkId, u64, Category)>> {
        let mut stmt = self.conn.prepare(
            "SELECT c.id, v.row, c.category FROM chunks c
             JOIN vectors v ON v.embed_hash=c.embed_hash ORDER BY v.row",
        )?;
        let rows = stmt.query_map([], |r| {
            let cat: String = r.get(2)?;
            Ok((
                ChunkId(r.get(0)?),
                r.get::<_, i64>(1)? as u64,
                Category::parse(&cat).unwrap_or(Category::Other),
            ))
        })?;
        Ok(rows.collect::<Result<_, _>>()?)
    }

    /// The embedding row of an embedding hash ([`Chunk::embedding_hash`]).
    pub fn vector_row(&self, embed_hash: i64) -> Result<Option<u64>> {
        Ok(self
            .conn
            .query_row(
                "SELECT row FROM vectors WHERE embed_hash=?1",
                [embed_hash],
                |r| r.get::<_, i64>(0),
            )
            .optional()?
            .map(|r| r as u64))
    }
}

fn row_to_chunk(r: &rusqlite::Row<'_>) -> rusqlite::Result<Chunk> {
    let kind: String = r.get(2)?;
    let category: String = r.get(3)?;
    Ok(Chunk {
        id: ChunkId(r.get(0)?),
        path: r.get(1)?,
        category: Category::parse(&category).unwrap_or(Category::Other),
        lang: r.get(4)?,
        decl: Declaration {
            kind: ChunkKind::parse(&kind).unwrap_or(ChunkKind::Text),
            name: r.get(5)?,
            qualified_name: r.get(6)?,
            parent: r.get(7)?,
            signature: r.get(8)?,
            params: r.get(9)?,
            returns: r.get(10)?,
            doc: r.get(11)?,
            start_line: r.get(12)?,
            end_line: r.get(13)?,
        },
        text: r.get(14)?,
    })
}
