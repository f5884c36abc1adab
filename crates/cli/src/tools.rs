//! `trellis tools graph`: the workspace's tool knowledge graph — what the agents' tool calls
//! taught it — as a summary, Graphviz DOT or JSON.

use std::fmt::Write as _;
use std::process::ExitCode;

use clap::{Subcommand, ValueEnum};
use trellis_core::Records;
use trellis_toolgraph::{ThresholdReport, ToolGraph};

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
    if format == Format::Json {
        println!("{}", serde_json::to_string_pretty(&records.tool_graph()?)?);
        return Ok(ExitCode::SUCCESS);
    }
    let (graph, speculation) = records.tool_knowledge()?;
    if format == Format::Dot {
        print!("{}", graph.to_dot()?);
    } else {
        print!("{}{}", summary(&graph, top)?, outcomes(&speculation));
    }
    Ok(ExitCode::SUCCESS)
}

/// The text summary: counts, the top tools by PageRank, the strongest dependencies, the
/// communities.
/// The speculation threshold and the outcomes it adapts to.
fn outcomes(r: &ThresholdReport) -> String {
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

fn summary(graph: &ToolGraph, top: usize) -> anyhow::Result<String> {
    let mut out = String::new();
    if graph.node_count() == 0 {
        writeln!(
            out,
            "The tool knowledge graph is empty: it learns from the agents' tool calls \
             (`trellis run`; [tools.graph] learn = true)."
        )?;
        return Ok(out);
    }
    let export = graph.export()?;
    writeln!(
        out,
        "{} tools, {} learned dependencies",
        graph.node_count(),
        graph.edge_count()
    )?;
    let mut nodes = export.nodes.clone();
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
    let mut edges = export.edges.clone();
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
    let communities = graph.communities()?;
    if communities.len() > 1 {
        writeln!(out, "\nCommunities:")?;
        for (i, members) in communities.iter().enumerate() {
            writeln!(out, "  {}: {}", i + 1, members.join(", "))?;
        }
    }
    Ok(out)
}
