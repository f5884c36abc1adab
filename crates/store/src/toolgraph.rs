//! The tool knowledge graph's storage (docs/tools.md, "Tool knowledge graph"): tools (`tool_nodes`), the
//! dependencies learned between them (`tool_dependency`), the executions they were learned
//! from (`tool_executions`) and the outcomes of speculative executions (`speculations`),
//! behind [`ToolGraphStore`].
//!
//! The store only keeps counts; `trellis-toolgraph` computes the graph metrics. An edge's
//! `confidence` follows from its counts by a formula the caller passes with each execution
//! ([`NewToolExecution::confidence`]): it is applied to the stored counts inside the same
//! transaction that bumps them, so the column never disagrees with the counts, even when
//! several processes learn at once.

use rusqlite::{Connection, Row, params};
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::read::Reader;
use crate::schema::now_ms;
use crate::{Msg, Record, SqliteStore};

/// A tool's description to insert or refresh (its call counts and cached embedding stay).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolNodeUpsert {
    /// The tool's name as the model sees it.
    pub tool: String,
    /// The MCP server it comes from, if any.
    pub server: Option<String>,
    /// Its description.
    pub description: String,
}

/// A stored tool (without its embedding: see [`ToolGraphStore::tool_embeddings`]).
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolNodeRecord {
    /// The tool's name.
    pub tool: String,
    /// Its MCP server, if any.
    pub server: Option<String>,
    /// Its description (empty for a tool only seen in executions).
    pub description: String,
    /// Times it was called in recorded executions.
    pub calls: i64,
    /// Of those, the calls that succeeded.
    pub successes: i64,
    /// Last change, ms since the epoch.
    pub updated_ms: i64,
}

/// A tool's embedding, cached under the key of the embedder and text it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct CachedEmbedding {
    /// The tool.
    pub tool: String,
    /// The embedder's id and a hash of the embedded text, as the caller composes them.
    pub embedder: String,
    /// The vector.
    pub vector: Vec<f32>,
}

/// A learned dependency `from → to`.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolEdgeRecord {
    /// The tool called first (or whose output fed the other).
    pub from: String,
    /// The tool that followed it.
    pub to: String,
    /// Executions in which the pair was observed.
    pub observed_count: i64,
    /// Of those, the ones in which both calls succeeded.
    pub success_count: i64,
    /// The confidence computed from the counts when the edge was last observed.
    pub confidence: f64,
}

/// One call of a recorded execution.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallOutcome {
    /// The tool.
    pub tool: String,
    /// Whether the call succeeded.
    pub ok: bool,
}

/// A dependency observed in an execution.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EdgeObservation {
    /// The earlier tool.
    pub from: String,
    /// The later tool.
    pub to: String,
    /// Whether both calls succeeded.
    pub ok: bool,
}

/// An execution to record, with the edges it observed.
#[derive(Clone, Debug)]
pub struct NewToolExecution {
    /// What the execution was for (the intent, a task title).
    pub context: String,
    /// The calls, in execution order.
    pub calls: Vec<CallOutcome>,
    /// The dependencies observed, each once.
    pub edges: Vec<EdgeObservation>,
    /// An edge's confidence from its `(observed_count, success_count)`, applied to every
    /// observed edge after its counts were bumped.
    pub confidence: fn(i64, i64) -> f64,
}

impl NewToolExecution {
    /// The stored `tools` column: the calls' tools in order, as a JSON list (both backends).
    pub(crate) fn tools_json(&self) -> serde_json::Result<String> {
        let tools: Vec<&str> = self.calls.iter().map(|c| c.tool.as_str()).collect();
        serde_json::to_string(&tools)
    }

    /// The stored `success` flag: whether every call succeeded.
    pub(crate) fn success(&self) -> bool {
        self.calls.iter().all(|c| c.ok)
    }
}

/// An embedding as the `embedding` column stores it: its floats, little-endian (both
/// backends).
pub(crate) fn vector_bytes(vector: &[f32]) -> Vec<u8> {
    vector.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// An embedding of its stored bytes (a trailing partial float is dropped).
pub(crate) fn vector_of_bytes(blob: &[u8]) -> Vec<f32> {
    blob.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// What a speculative execution turned out to be.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpeculationOutcome {
    /// Its results were used.
    Used,
    /// It ran but its results were not used.
    Wasted,
    /// It failed.
    Failed,
}

impl SpeculationOutcome {
    /// The stored name.
    pub fn as_str(self) -> &'static str {
        match self {
            SpeculationOutcome::Used => "used",
            SpeculationOutcome::Wasted => "wasted",
            SpeculationOutcome::Failed => "failed",
        }
    }

    /// The outcome of its stored name (both backends).
    pub(crate) fn parse(s: &str) -> Option<Self> {
        match s {
            "used" => Some(SpeculationOutcome::Used),
            "wasted" => Some(SpeculationOutcome::Wasted),
            "failed" => Some(SpeculationOutcome::Failed),
            _ => None,
        }
    }
}

/// A speculative execution's outcome to record.
#[derive(Clone, Debug, PartialEq)]
pub struct NewSpeculation {
    /// What it was for.
    pub context: String,
    /// The tools it ran.
    pub tools: Vec<String>,
    /// The suggestion's confidence.
    pub confidence: f64,
    /// What became of it.
    pub outcome: SpeculationOutcome,
}

/// A stored speculation outcome.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpeculationRecord {
    /// Its id (increasing in recording order).
    pub id: i64,
    /// What it was for.
    pub context: String,
    /// The tools it ran.
    pub tools: Vec<String>,
    /// The suggestion's confidence.
    pub confidence: f64,
    /// What became of it.
    pub outcome: SpeculationOutcome,
    /// When it was recorded, ms since the epoch.
    pub created_ms: i64,
}

/// Everything the in-memory graph is built from.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ToolGraphSnapshot {
    /// Every tool, by name.
    pub nodes: Vec<ToolNodeRecord>,
    /// Every learned dependency, by `(from, to)`.
    pub edges: Vec<ToolEdgeRecord>,
}

pub(crate) fn upsert_nodes(conn: &Connection, nodes: &[ToolNodeUpsert]) -> rusqlite::Result<i64> {
    let now = now_ms();
    let mut st = conn.prepare_cached(
        "INSERT INTO tool_nodes (tool, server, description, calls, successes, updated_ms)
         VALUES (?1, ?2, ?3, 0, 0, ?4)
         ON CONFLICT (tool) DO UPDATE SET server = excluded.server,
            description = excluded.description, updated_ms = excluded.updated_ms
         WHERE server IS NOT excluded.server OR description IS NOT excluded.description",
    )?;
    for n in nodes {
        st.execute(params![n.tool, n.server, n.description, now])?;
    }
    Ok(0)
}

pub(crate) fn set_embeddings(
    conn: &Connection,
    cached: &[CachedEmbedding],
) -> rusqlite::Result<i64> {
    let now = now_ms();
    let mut st = conn.prepare_cached(
        "INSERT INTO tool_nodes (tool, description, embedding, embedder, calls, successes,
                                 updated_ms)
         VALUES (?1, '', ?2, ?3, 0, 0, ?4)
         ON CONFLICT (tool) DO UPDATE SET embedding = excluded.embedding,
            embedder = excluded.embedder",
    )?;
    for c in cached {
        st.execute(params![c.tool, vector_bytes(&c.vector), c.embedder, now])?;
    }
    Ok(0)
}

/// Records the executions; returns the last one's id.
pub(crate) fn record_executions(
    conn: &Connection,
    executions: &[NewToolExecution],
) -> rusqlite::Result<i64> {
    let now = now_ms();
    let mut last = 0;
    let mut exec = conn.prepare_cached(
        "INSERT INTO tool_executions (context, tools, success, created_ms)
         VALUES (?1, ?2, ?3, ?4)",
    )?;
    let mut node = conn.prepare_cached(
        "INSERT INTO tool_nodes (tool, description, calls, successes, updated_ms)
         VALUES (?1, '', 1, ?2, ?3)
         ON CONFLICT (tool) DO UPDATE SET calls = calls + 1,
            successes = successes + excluded.successes, updated_ms = excluded.updated_ms",
    )?;
    let mut edge = conn.prepare_cached(
        "INSERT INTO tool_dependency (from_tool, to_tool, observed_count, confidence,
                                      success_count)
         VALUES (?1, ?2, 1, 0, ?3)
         ON CONFLICT (from_tool, to_tool) DO UPDATE SET
            observed_count = observed_count + 1,
            success_count = success_count + excluded.success_count
         RETURNING observed_count, success_count",
    )?;
    let mut confidence = conn.prepare_cached(
        "UPDATE tool_dependency SET confidence = ?3 WHERE from_tool = ?1 AND to_tool = ?2",
    )?;
    for e in executions {
        let tools = e
            .tools_json()
            .map_err(|err| rusqlite::Error::ToSqlConversionFailure(Box::new(err)))?;
        exec.execute(params![e.context, tools, e.success(), now])?;
        last = conn.last_insert_rowid();
        for c in &e.calls {
            node.execute(params![c.tool, i64::from(c.ok), now])?;
        }
        for o in &e.edges {
            let (observed, successes): (i64, i64) = edge
                .query_row(params![o.from, o.to, i64::from(o.ok)], |r| {
                    Ok((r.get(0)?, r.get(1)?))
                })?;
            confidence.execute(params![o.from, o.to, (e.confidence)(observed, successes)])?;
        }
    }
    Ok(last)
}

pub(crate) fn insert_speculation(conn: &Connection, s: &NewSpeculation) -> rusqlite::Result<i64> {
    let tools = serde_json::to_string(&s.tools)
        .map_err(|err| rusqlite::Error::ToSqlConversionFailure(Box::new(err)))?;
    conn.prepare_cached(
        "INSERT INTO speculations (context, tools, confidence, outcome, created_ms)
         VALUES (?1, ?2, ?3, ?4, ?5)",
    )?
    .execute(params![
        s.context,
        tools,
        s.confidence,
        s.outcome.as_str(),
        now_ms()
    ])?;
    Ok(conn.last_insert_rowid())
}

fn node_row(r: &Row<'_>) -> rusqlite::Result<ToolNodeRecord> {
    Ok(ToolNodeRecord {
        tool: r.get(0)?,
        server: r.get(1)?,
        description: r.get(2)?,
        calls: r.get(3)?,
        successes: r.get(4)?,
        updated_ms: r.get(5)?,
    })
}

fn edge_row(r: &Row<'_>) -> rusqlite::Result<ToolEdgeRecord> {
    Ok(ToolEdgeRecord {
        from: r.get(0)?,
        to: r.get(1)?,
        observed_count: r.get(2)?,
        success_count: r.get(3)?,
        confidence: r.get(4)?,
    })
}

fn damaged(what: &str) -> rusqlite::Error {
    rusqlite::Error::InvalidColumnType(0, what.to_owned(), rusqlite::types::Type::Text)
}

fn speculation_row(r: &Row<'_>) -> rusqlite::Result<SpeculationRecord> {
    let tools: String = r.get(2)?;
    let outcome: String = r.get(4)?;
    Ok(SpeculationRecord {
        id: r.get(0)?,
        context: r.get(1)?,
        tools: serde_json::from_str(&tools).map_err(|_| damaged("speculations.tools"))?,
        confidence: r.get(3)?,
        outcome: SpeculationOutcome::parse(&outcome)
            .ok_or_else(|| damaged("speculations.outcome"))?,
        created_ms: r.get(5)?,
    })
}

impl Reader {
    fn tool_graph(&self) -> Result<ToolGraphSnapshot> {
        self.with(|c| {
            // One read transaction: the nodes and the edges of one snapshot, not of two
            // commits of a learning process (rolled back when dropped; it wrote nothing).
            let c = c.unchecked_transaction().map_err(self.sqlite())?;
            let nodes = c
                .prepare_cached(
                    "SELECT tool, server, description, calls, successes, updated_ms
                     FROM tool_nodes ORDER BY tool",
                )
                .and_then(|mut st| st.query_map([], node_row)?.collect())
                .map_err(self.sqlite())?;
            let edges = c
                .prepare_cached(
                    "SELECT from_tool, to_tool, observed_count, success_count, confidence
                     FROM tool_dependency ORDER BY from_tool, to_tool",
                )
                .and_then(|mut st| st.query_map([], edge_row)?.collect())
                .map_err(self.sqlite())?;
            Ok(ToolGraphSnapshot { nodes, edges })
        })
    }

    fn tool_embeddings(&self) -> Result<Vec<CachedEmbedding>> {
        self.with(|c| {
            c.prepare_cached(
                "SELECT tool, embedder, embedding FROM tool_nodes
                 WHERE embedder IS NOT NULL AND embedding IS NOT NULL ORDER BY tool",
            )
            .and_then(|mut st| {
                st.query_map([], |r| {
                    let blob: Vec<u8> = r.get(2)?;
                    Ok(CachedEmbedding {
                        tool: r.get(0)?,
                        embedder: r.get(1)?,
                        vector: vector_of_bytes(&blob),
                    })
                })?
                .collect()
            })
            .map_err(self.sqlite())
        })
    }

    fn speculations(&self, last: usize) -> Result<Vec<SpeculationRecord>> {
        let limit = i64::try_from(last).unwrap_or(i64::MAX);
        self.with(|c| {
            let mut rows: Vec<SpeculationRecord> = c
                .prepare_cached(
                    "SELECT id, context, tools, confidence, outcome, created_ms
                     FROM speculations ORDER BY id DESC LIMIT ?1",
                )
                .and_then(|mut st| st.query_map([limit], speculation_row)?.collect())
                .map_err(self.sqlite())?;
            rows.reverse();
            Ok(rows)
        })
    }
}

/// The tool knowledge graph's counts: tools and their cached embeddings, the dependencies
/// learned from executions, and speculative executions' outcomes.
pub trait ToolGraphStore: Send + Sync {
    /// Inserts tools or refreshes their server and description (keeping their call counts
    /// and cached embeddings).
    fn upsert_tool_nodes(&self, nodes: Vec<ToolNodeUpsert>) -> Result<()>;

    /// Caches tools' embeddings, each under its embedder key (the embedder's id and what
    /// was embedded, so a changed model or text is never mistaken for the cached one).
    fn set_tool_embeddings(&self, cached: Vec<CachedEmbedding>) -> Result<()>;

    /// Every cached tool embedding, by tool name.
    fn tool_embeddings(&self) -> Result<Vec<CachedEmbedding>>;

    /// Records an execution: its row, its tools' call counts and its observed dependencies
    /// (counts and confidence), in one transaction. Returns the execution's id.
    fn record_tool_execution(&self, execution: NewToolExecution) -> Result<i64> {
        self.record_tool_executions(vec![execution])
    }

    /// Records many executions in one transaction (as
    /// [`ToolGraphStore::record_tool_execution`]); returns the last one's id (0 for none).
    fn record_tool_executions(&self, executions: Vec<NewToolExecution>) -> Result<i64>;

    /// Every tool and learned dependency.
    fn tool_graph(&self) -> Result<ToolGraphSnapshot>;

    /// Records a speculative execution's outcome; returns its id.
    fn record_speculation(&self, speculation: NewSpeculation) -> Result<i64>;

    /// The last `n` speculation outcomes, oldest first.
    fn speculations(&self, n: usize) -> Result<Vec<SpeculationRecord>>;
}

impl ToolGraphStore for SqliteStore {
    fn upsert_tool_nodes(&self, nodes: Vec<ToolNodeUpsert>) -> Result<()> {
        self.request(|reply| Msg::Record(Record::ToolNodes(nodes), reply))?
            .map(drop)
    }

    fn set_tool_embeddings(&self, cached: Vec<CachedEmbedding>) -> Result<()> {
        self.request(|reply| Msg::Record(Record::ToolEmbeddings(cached), reply))?
            .map(drop)
    }

    fn tool_embeddings(&self) -> Result<Vec<CachedEmbedding>> {
        self.reader.tool_embeddings()
    }

    fn record_tool_executions(&self, executions: Vec<NewToolExecution>) -> Result<i64> {
        self.request(|reply| Msg::Record(Record::ToolExecutions(executions), reply))?
    }

    fn tool_graph(&self) -> Result<ToolGraphSnapshot> {
        self.reader.tool_graph()
    }

    fn record_speculation(&self, speculation: NewSpeculation) -> Result<i64> {
        self.request(|reply| Msg::Record(Record::Speculation(speculation), reply))?
    }

    fn speculations(&self, n: usize) -> Result<Vec<SpeculationRecord>> {
        self.reader.speculations(n)
    }
}
