//! `trellis tools graph`: the workspace's tool knowledge graph — what the agents' tool calls
//! taught it — as a summary, Graphviz DOT or JSON.

use std::fmt::Write as _;
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use trellis_core::Records;
use trellis_protocol::records::{SpeculationReport, ToolGraphView};

/// `trellis tools` subcommands.
#[derive(Debug, Subcommand)]
pub enum ToolsCommand {
    /// Print the tool knowledge graph learned from the agents' tool calls: the tools by
    /// PageRank, the strongest learned dependencies and the communities (`--format dot` or
    /// `json` to export it).
    Graph {
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// Tools and dependencies shown by the text format.
        #[arg(long, default_value_t = 20)]
        top: usize,
    },
}

/// How `trellis tools graph` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// A summary for people.
    Text,
    /// Graphviz DOT (`| dot -Tsvg > tools.svg`).
    Dot,
    /// JSON: nodes with PageRank, community and call counts; edges with observed count and
    /// confidence.
    Json,
}

/// Runs `trellis tools …` on the workspace's records.
pub fn execute(cmd: ToolsCommand, records: &Records) -> anyhow::Result<ExitCode> {
    let ToolsCommand::Graph { format, top } = cmd;
    let graph = records.tool_graph()?;
    match format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&graph)?),
        Format::Dot => print!("{}", dot(&graph)),
        Format::Text => print!("{}{}", summary(&graph, top)?, outcomes(&graph.speculation)),
    }
    Ok(ExitCode::SUCCESS)
}

/// The speculation threshold and the outcomes it adapts to.
fn outcomes(r: &SpeculationReport) -> String {
    if r.samples == 0 {
        return format!(
            "\nSpeculation: threshold {:.2}, no speculation recorded yet\n",
            r.threshold
        );
    }
    format!(
        "\nSpeculation: threshold {:.2}; last {} outcomes {:.0}% used, {:.0}% wasted \
         (targets: > 95% used, < 10% wasted)\n",
        r.threshold,
        r.samples,
        r.acceptance * 100.0,
        r.waste * 100.0
    )
}

/// The text summary: counts, the top tools by PageRank, the strongest dependencies, the
/// communities.
fn summary(graph: &ToolGraphView, top: usize) -> anyhow::Result<String> {
    let mut out = String::new();
    if graph.nodes.is_empty() {
        writeln!(
            out,
            "The tool knowledge graph is empty: it learns from the agents' tool calls \
             (`trellis run`; [tools.graph] learn = true)."
        )?;
        return Ok(out);
    }
    writeln!(
        out,
        "{} tools, {} learned dependencies",
        graph.nodes.len(),
        graph.edges.len()
    )?;
    let mut nodes = graph.nodes.clone();
    nodes.sort_by(|a, b| b.pagerank.total_cmp(&a.pagerank).then(a.tool.cmp(&b.tool)));
    let width = nodes.iter().map(|n| n.tool.len()).max().unwrap_or(4).max(4);
    writeln!(out, "\nTools by PageRank:")?;
    for n in nodes.iter().take(top) {
        writeln!(
            out,
            "  {:<width$}  {:.3}  {} calls ({} ok)  community {}",
            n.tool, n.pagerank, n.calls, n.successes, n.community
        )?;
    }
    let mut edges = graph.edges.clone();
    edges.sort_by(|a, b| {
        b.confidence
            .total_cmp(&a.confidence)
            .then(b.observed_count.cmp(&a.observed_count))
            .then((&a.from, &a.to).cmp(&(&b.from, &b.to)))
    });
    if !edges.is_empty() {
        writeln!(out, "\nStrongest dependencies:")?;
        for e in edges.iter().take(top) {
            writeln!(
                out,
                "  {} → {}  observed {}, confidence {:.2}",
                e.from, e.to, e.observed_count, e.confidence
            )?;
        }
    }
    let communities = graph.communities();
    if communities.len() > 1 {
        writeln!(out, "\nCommunities:")?;
        for (i, members) in communities.iter().enumerate() {
            writeln!(out, "  {}: {}", i + 1, members.join(", "))?;
        }
    }
    Ok(out)
}

/// The graph in Graphviz DOT: nodes labelled with PageRank and community, edges with
/// observed count and confidence (pen width growing with confidence).
fn dot(graph: &ToolGraphView) -> String {
    let mut out = String::from("digraph tools {\n  rankdir=LR;\n  node [shape=box];\n");
    for n in &graph.nodes {
        // Writing to a String cannot fail.
        let _ = writeln!(
            out,
            "  {} [label=\"{}\\npagerank {:.4}\\ncommunity {}\", group={}];",
            quote(&n.tool),
            escape(&n.tool),
            n.pagerank,
            n.community,
            n.community
        );
    }
    for e in &graph.edges {
        let _ = writeln!(
            out,
            "  {} -> {} [label=\"{} × {:.2}\", penwidth={:.2}];",
            quote(&e.from),
            quote(&e.to),
            e.observed_count,
            e.confidence,
            0.5 + 2.5 * e.confidence.clamp(0.0, 1.0)
        );
    }
    out.push_str("}\n");
    out
}

/// `s` as a DOT quoted id.
fn quote(s: &str) -> String {
    format!("\"{}\"", escape(s))
}

/// `s` escaped for the inside of a DOT string.
fn escape(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use trellis_protocol::records::{ToolEdge, ToolNode};

    use super::*;

    fn node(tool: &str, community: usize) -> ToolNode {
        ToolNode {
            tool: tool.into(),
            pagerank: 0.25,
            community,
            calls: 3,
            successes: 2,
        }
    }

    #[test]
    fn dot_labels_nodes_and_edges_and_escapes_names() {
        let graph = ToolGraphView {
            nodes: vec![node("read_file", 0), node("say \"hi\"", 1)],
            edges: vec![ToolEdge {
                from: "read_file".into(),
                to: "say \"hi\"".into(),
                observed_count: 15,
                confidence: 0.8,
            }],
            speculation: SpeculationReport::default(),
        };
        let dot = dot(&graph);
        assert!(dot.starts_with("digraph tools {\n"), "{dot}");
        assert!(
            dot.contains(
                "  \"read_file\" [label=\"read_file\\npagerank 0.2500\\ncommunity 0\", group=0];"
            ),
            "{dot}"
        );
        assert!(
            dot.contains(
                "  \"read_file\" -> \"say \\\"hi\\\"\" [label=\"15 × 0.80\", penwidth=2.50];"
            ),
            "{dot}"
        );
        assert!(dot.ends_with("}\n"));
        let text = summary(&graph, 20).unwrap();
        assert!(
            text.contains("Communities:\n  1: read_file\n  2: say \"hi\"\n"),
            "{text}"
        );
    }
}
