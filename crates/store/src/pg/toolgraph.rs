//! [`ToolGraphStore`] on PostgreSQL: `tool_nodes`, `tool_dependency`, `tool_executions` and
//! `speculations` (SQLite's are in `crate::toolgraph`, whose encodings both use).
//!
//! SQLite applies a list of tools or executions row by row inside its writer's transaction.
//! Here a list is a few statements over arrays (`unnest`), whatever its length, and ends in
//! the state SQLite's row-by-row application leaves:
//!
//! * the same tool twice in one list counts as SQLite counts it — calls and successes add
//!   up, the last description or embedding stays, and an edge's confidence is the last
//!   observing execution's formula applied to the final counts (what the row-by-row
//!   updates end with);
//! * every writer locks `tool_nodes` rows by tool name, then `tool_dependency` rows by
//!   `(from, to)` (its arrays sorted, their rows inserted in array order), so processes learning at once wait for each other instead of
//!   deadlocking, and the counts an edge's confidence is computed from stay locked until
//!   its transaction commits, so the column never disagrees with them.
//!
//! [`ToolGraphStore::tool_graph`] reads the nodes and edges in one repeatable-read
//! transaction: one snapshot, never half of a concurrent learning transaction.

use std::collections::BTreeMap;

use tokio_postgres::types::Type;
use tokio_postgres::{IsolationLevel, Row};

use super::PgStore;
use super::values::{Parsed, real};
use crate::error::{Error, Result};
use crate::schema::now_ms;
use crate::toolgraph::{vector_bytes, vector_of_bytes};
use crate::{
    CachedEmbedding, NewSpeculation, NewToolExecution, SpeculationOutcome, SpeculationRecord,
    ToolEdgeRecord, ToolGraphSnapshot, ToolGraphStore, ToolNodeRecord, ToolNodeUpsert,
};

impl ToolGraphStore for PgStore {
    fn upsert_tool_nodes(&self, nodes: Vec<ToolNodeUpsert>) -> Result<()> {
        let rows = NodeRows::of(nodes);
        self.write(async move |c| {
            // `force`: a tool the list itself changed on the way gets a new `updated_ms`
            // even when its last entry equals the stored row, as SQLite's row-by-row
            // upserts give it.
            c.execute_typed(
                "INSERT INTO tool_nodes (tool, server, description, calls, successes, updated_ms)
                 SELECT tool, server, description, 0, 0, $4
                 FROM unnest($1::text[], $2::text[], $3::text[]) WITH ORDINALITY
                      AS u(tool, server, description, n)
                 ORDER BY n
                 ON CONFLICT (tool) DO UPDATE SET server = excluded.server,
                    description = excluded.description, updated_ms = excluded.updated_ms
                 WHERE tool_nodes.server IS DISTINCT FROM excluded.server
                    OR tool_nodes.description IS DISTINCT FROM excluded.description
                    OR tool_nodes.tool = ANY($5::text[])",
                &[
                    (&rows.tools, Type::TEXT_ARRAY),
                    (&rows.servers, Type::TEXT_ARRAY),
                    (&rows.descriptions, Type::TEXT_ARRAY),
                    (&now_ms(), Type::INT8),
                    (&rows.force, Type::TEXT_ARRAY),
                ],
            )
            .await?;
            Ok(())
        })
    }

    fn set_tool_embeddings(&self, cached: Vec<CachedEmbedding>) -> Result<()> {
        // By tool, the last entry of each.
        let last: BTreeMap<String, (String, Vec<u8>)> = cached
            .into_iter()
            .map(|c| (c.tool, (c.embedder, vector_bytes(&c.vector))))
            .collect();
        let mut tools = Vec::with_capacity(last.len());
        let mut embedders = Vec::with_capacity(last.len());
        let mut blobs = Vec::with_capacity(last.len());
        for (tool, (embedder, blob)) in last {
            tools.push(tool);
            embedders.push(embedder);
            blobs.push(blob);
        }
        self.write(async move |c| {
            c.execute_typed(
                "INSERT INTO tool_nodes (tool, description, embedding, embedder, calls,
                                         successes, updated_ms)
                 SELECT tool, '', embedding, embedder, 0, 0, $4
                 FROM unnest($1::text[], $2::bytea[], $3::text[]) WITH ORDINALITY
                      AS u(tool, embedding, embedder, n)
                 ORDER BY n
                 ON CONFLICT (tool) DO UPDATE SET embedding = excluded.embedding,
                    embedder = excluded.embedder",
                &[
                    (&tools, Type::TEXT_ARRAY),
                    (&blobs, Type::BYTEA_ARRAY),
                    (&embedders, Type::TEXT_ARRAY),
                    (&now_ms(), Type::INT8),
                ],
            )
            .await?;
            Ok(())
        })
    }

    fn tool_embeddings(&self) -> Result<Vec<CachedEmbedding>> {
        self.read(async |c| {
            let rows = c
                .query_typed(
                    "SELECT tool, embedder, embedding FROM tool_nodes
                     WHERE embedder IS NOT NULL AND embedding IS NOT NULL ORDER BY tool",
                    &[],
                )
                .await?;
            let embedding = |r: &Row| -> Result<CachedEmbedding, tokio_postgres::Error> {
                Ok(CachedEmbedding {
                    tool: r.try_get(0)?,
                    embedder: r.try_get(1)?,
                    vector: vector_of_bytes(r.try_get(2)?),
                })
            };
            Ok(rows.iter().map(embedding).collect::<Result<_, _>>()?)
        })
    }

    fn record_tool_executions(&self, executions: Vec<NewToolExecution>) -> Result<i64> {
        let learned = Learned::of(&executions)?;
        self.write(async move |c| {
            if learned.contexts.is_empty() {
                return Ok(0);
            }
            let tx = c.transaction().await?;
            let last = learned.record(&tx).await?;
            tx.commit().await?;
            Ok(last)
        })
    }

    fn tool_graph(&self) -> Result<ToolGraphSnapshot> {
        self.read(async |c| {
            let tx = c
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .await?;
            let nodes = tx
                .query_typed(
                    "SELECT tool, server, description, calls, successes, updated_ms
                     FROM tool_nodes ORDER BY tool",
                    &[],
                )
                .await?;
            let edges = tx
                .query_typed(
                    "SELECT from_tool, to_tool, observed_count, success_count, confidence
                     FROM tool_dependency ORDER BY from_tool, to_tool",
                    &[],
                )
                .await?;
            tx.commit().await?;
            Ok(ToolGraphSnapshot {
                nodes: nodes.iter().map(node_row).collect::<Result<_, _>>()?,
                edges: edges.iter().map(edge_row).collect::<Result<_, _>>()?,
            })
        })
    }

    fn record_speculation(&self, s: NewSpeculation) -> Result<i64> {
        let tools = serde_json::to_string(&s.tools).map_err(|source| Error::Encode {
            what: "a speculation's tools",
            source,
        })?;
        self.write(async move |c| {
            let row = c
                .query_typed_one(
                    "INSERT INTO speculations (context, tools, confidence, outcome, created_ms)
                     VALUES ($1, $2, $3, $4, $5) RETURNING id",
                    &[
                        (&s.context, Type::TEXT),
                        (&tools, Type::TEXT),
                        (&real(s.confidence), Type::FLOAT8),
                        (&s.outcome.as_str(), Type::TEXT),
                        (&now_ms(), Type::INT8),
                    ],
                )
                .await?;
            Ok(row.try_get(0)?)
        })
    }

    fn speculations(&self, n: usize) -> Result<Vec<SpeculationRecord>> {
        let limit = i64::try_from(n).unwrap_or(i64::MAX);
        self.read(async move |c| {
            let rows = c
                .query_typed(
                    "SELECT id, context, tools, confidence, outcome, created_ms
                     FROM speculations ORDER BY id DESC LIMIT $1",
                    &[(&limit, Type::INT8)],
                )
                .await?;
            let mut out: Vec<SpeculationRecord> =
                rows.iter().map(speculation_row).collect::<Result<_, _>>()?;
            out.reverse();
            Ok(out)
        })
    }
}

/// [`ToolGraphStore::upsert_tool_nodes`]'s list as columns: each tool once, by name, with
/// its last entry; `force` lists the tools whose entries differ from one another.
struct NodeRows {
    tools: Vec<String>,
    servers: Vec<Option<String>>,
    descriptions: Vec<String>,
    force: Vec<String>,
}

impl NodeRows {
    fn of(nodes: Vec<ToolNodeUpsert>) -> Self {
        let mut last: BTreeMap<String, (Option<String>, String, bool)> = BTreeMap::new();
        for n in nodes {
            let entry = last
                .entry(n.tool)
                .or_insert_with(|| (n.server.clone(), n.description.clone(), false));
            entry.2 |= entry.0 != n.server || entry.1 != n.description;
            (entry.0, entry.1) = (n.server, n.description);
        }
        let mut rows = NodeRows {
            tools: Vec::with_capacity(last.len()),
            servers: Vec::with_capacity(last.len()),
            descriptions: Vec::with_capacity(last.len()),
            force: Vec::new(),
        };
        for (tool, (server, description, force)) in last {
            if force {
                rows.force.push(tool.clone());
            }
            rows.tools.push(tool);
            rows.servers.push(server);
            rows.descriptions.push(description);
        }
        rows
    }
}

/// What a list of executions adds, as the columns of [`Learned::record`]'s statements.
struct Learned {
    /// The executions' rows, in order.
    contexts: Vec<String>,
    tools: Vec<String>,
    successes: Vec<bool>,
    /// Per tool, by name: calls and successful calls.
    nodes: BTreeMap<String, (i64, i64)>,
    /// Per edge, by `(from, to)`: observations, successful ones, and the formula of the
    /// last execution that observed it.
    edges: BTreeMap<(String, String), EdgeCounts>,
}

/// An edge's observations and successful ones in a list of executions, and the formula of
/// the last execution that observed it.
type EdgeCounts = (i64, i64, fn(i64, i64) -> f64);

impl Learned {
    fn of(executions: &[NewToolExecution]) -> Result<Self> {
        let mut learned = Learned {
            contexts: Vec::with_capacity(executions.len()),
            tools: Vec::with_capacity(executions.len()),
            successes: Vec::with_capacity(executions.len()),
            nodes: BTreeMap::new(),
            edges: BTreeMap::new(),
        };
        for e in executions {
            learned.contexts.push(e.context.clone());
            learned
                .tools
                .push(e.tools_json().map_err(|source| Error::Encode {
                    what: "an execution's tools",
                    source,
                })?);
            learned.successes.push(e.success());
            for c in &e.calls {
                let node = learned.nodes.entry(c.tool.clone()).or_default();
                *node = (node.0 + 1, node.1 + i64::from(c.ok));
            }
            for o in &e.edges {
                let edge = learned
                    .edges
                    .entry((o.from.clone(), o.to.clone()))
                    .or_insert((0, 0, e.confidence));
                *edge = (edge.0 + 1, edge.1 + i64::from(o.ok), e.confidence);
            }
        }
        Ok(learned)
    }

    /// Inserts the executions, bumps the nodes' and edges' counts and sets the edges'
    /// confidence, in `tx`; answers the last execution's id.
    async fn record(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
    ) -> Result<i64, tokio_postgres::Error> {
        let now = now_ms();
        let last: Option<i64> = tx
            .query_typed_one(
                "WITH added AS (
                    INSERT INTO tool_executions (context, tools, success, created_ms)
                    SELECT context, tools, success, $4
                    FROM unnest($1::text[], $2::text[], $3::bool[]) WITH ORDINALITY
                         AS u(context, tools, success, n)
                    ORDER BY n
                    RETURNING id)
                 SELECT max(id) FROM added",
                &[
                    (&self.contexts, Type::TEXT_ARRAY),
                    (&self.tools, Type::TEXT_ARRAY),
                    (&self.successes, Type::BOOL_ARRAY),
                    (&now, Type::INT8),
                ],
            )
            .await?
            .try_get(0)?;
        let (tools, (calls, successes)): (Vec<&str>, (Vec<i64>, Vec<i64>)) = self
            .nodes
            .iter()
            .map(|(t, (n, ok))| (t.as_str(), (*n, *ok)))
            .unzip();
        tx.execute_typed(
            "INSERT INTO tool_nodes (tool, description, calls, successes, updated_ms)
             SELECT tool, '', calls, successes, $4
             FROM unnest($1::text[], $2::int8[], $3::int8[]) WITH ORDINALITY
                  AS u(tool, calls, successes, n)
             ORDER BY n
             ON CONFLICT (tool) DO UPDATE SET calls = tool_nodes.calls + excluded.calls,
                successes = tool_nodes.successes + excluded.successes,
                updated_ms = excluded.updated_ms",
            &[
                (&tools, Type::TEXT_ARRAY),
                (&calls, Type::INT8_ARRAY),
                (&successes, Type::INT8_ARRAY),
                (&now, Type::INT8),
            ],
        )
        .await?;
        self.record_edges(tx).await?;
        Ok(last.unwrap_or(0))
    }

    /// Bumps the edges' counts, then sets each one's confidence from the counts it now has.
    async fn record_edges(
        &self,
        tx: &tokio_postgres::Transaction<'_>,
    ) -> Result<(), tokio_postgres::Error> {
        if self.edges.is_empty() {
            return Ok(());
        }
        let mut from = Vec::with_capacity(self.edges.len());
        let mut to = Vec::with_capacity(self.edges.len());
        let mut observed = Vec::with_capacity(self.edges.len());
        let mut succeeded = Vec::with_capacity(self.edges.len());
        for ((f, t), (n, ok, _)) in &self.edges {
            from.push(f.as_str());
            to.push(t.as_str());
            observed.push(*n);
            succeeded.push(*ok);
        }
        let counts = tx
            .query_typed(
                "INSERT INTO tool_dependency (from_tool, to_tool, observed_count, confidence,
                                              success_count)
                 SELECT from_tool, to_tool, observed, 0, succeeded
                 FROM unnest($1::text[], $2::text[], $3::int8[], $4::int8[]) WITH ORDINALITY
                      AS u(from_tool, to_tool, observed, succeeded, n)
                 ORDER BY n
                 ON CONFLICT (from_tool, to_tool) DO UPDATE SET
                    observed_count = tool_dependency.observed_count + excluded.observed_count,
                    success_count = tool_dependency.success_count + excluded.success_count
                 RETURNING from_tool, to_tool, observed_count, success_count",
                &[
                    (&from, Type::TEXT_ARRAY),
                    (&to, Type::TEXT_ARRAY),
                    (&observed, Type::INT8_ARRAY),
                    (&succeeded, Type::INT8_ARRAY),
                ],
            )
            .await?;
        let (mut from, mut to, mut confidence) = (Vec::new(), Vec::new(), Vec::new());
        for r in &counts {
            let (f, t): (String, String) = (r.try_get(0)?, r.try_get(1)?);
            let (n, ok): (i64, i64) = (r.try_get(2)?, r.try_get(3)?);
            let formula = self.edges.get(&(f.clone(), t.clone())).map(|e| e.2);
            confidence.push(formula.and_then(|formula| real(formula(n, ok))));
            from.push(f);
            to.push(t);
        }
        tx.execute_typed(
            "UPDATE tool_dependency d SET confidence = u.confidence
             FROM unnest($1::text[], $2::text[], $3::float8[]) AS u(from_tool, to_tool, confidence)
             WHERE d.from_tool = u.from_tool AND d.to_tool = u.to_tool",
            &[
                (&from, Type::TEXT_ARRAY),
                (&to, Type::TEXT_ARRAY),
                (&confidence, Type::FLOAT8_ARRAY),
            ],
        )
        .await?;
        Ok(())
    }
}

fn node_row(r: &Row) -> Result<ToolNodeRecord, tokio_postgres::Error> {
    Ok(ToolNodeRecord {
        tool: r.try_get(0)?,
        server: r.try_get(1)?,
        description: r.try_get(2)?,
        calls: r.try_get(3)?,
        successes: r.try_get(4)?,
        updated_ms: r.try_get(5)?,
    })
}

fn edge_row(r: &Row) -> Result<ToolEdgeRecord, tokio_postgres::Error> {
    Ok(ToolEdgeRecord {
        from: r.try_get(0)?,
        to: r.try_get(1)?,
        observed_count: r.try_get(2)?,
        success_count: r.try_get(3)?,
        confidence: r.try_get(4)?,
    })
}

fn speculation_row(r: &Row) -> Result<SpeculationRecord, tokio_postgres::Error> {
    Ok(SpeculationRecord {
        id: r.try_get(0)?,
        context: r.try_get(1)?,
        tools: r.try_get::<_, Parsed<Vec<String>>>(2)?.0,
        confidence: r.try_get(3)?,
        outcome: r.try_get::<_, Parsed<SpeculationOutcome>>(4)?.0,
        created_ms: r.try_get(5)?,
    })
}
