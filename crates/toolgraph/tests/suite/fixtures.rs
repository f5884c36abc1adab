//! A catalog of tools, stores in temp dirs, and executions to learn from.

use serde_json::json;
use tempfile::TempDir;
use trellis_store::{SqliteStore, StoreOptions};
use trellis_toolgraph::{ExecutedCall, Execution, ToolCatalog, ToolEntry, ToolGraph};

/// A fresh store; keep the `TempDir` alive as long as the store.
pub fn store() -> (TempDir, SqliteStore) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open_workspace(dir.path(), StoreOptions::default()).unwrap();
    (dir, store)
}

fn entry(name: &str, description: &str, props: &[(&str, &str)]) -> ToolEntry {
    let properties: serde_json::Map<String, serde_json::Value> = props
        .iter()
        .map(|(p, d)| {
            (
                (*p).to_owned(),
                json!({ "type": "string", "description": d }),
            )
        })
        .collect();
    ToolEntry {
        name: name.into(),
        server: None,
        description: description.into(),
        input_schema: json!({ "type": "object", "properties": properties }),
    }
}

/// Ten tools of a coding agent.
pub fn entries() -> Vec<ToolEntry> {
    vec![
        entry(
            "read_file",
            "Read the contents of a file from disk",
            &[("path", "Path of the file")],
        ),
        entry(
            "parse_json",
            "Parse JSON text into a structured value",
            &[("text", "The JSON document")],
        ),
        entry(
            "create_issue",
            "Create an issue in the GitHub repository",
            &[("title", "Issue title"), ("body", "Issue body")],
        ),
        entry(
            "write_file",
            "Write text to a file, replacing it",
            &[("path", "Path"), ("content", "New content")],
        ),
        entry(
            "list_dir",
            "List the entries of a directory",
            &[("path", "Directory")],
        ),
        entry(
            "delete_file",
            "Delete a file from disk",
            &[("path", "Path")],
        ),
        entry(
            "send_email",
            "Send an email message",
            &[
                ("to", "Recipient"),
                ("subject", "Subject line"),
                ("body", "Message"),
            ],
        ),
        entry(
            "search_tools",
            "Search the available tools by what they do",
            &[("query", "What the tool should do")],
        ),
        entry(
            "run_tests",
            "Run the project's test suite",
            &[("filter", "Test filter")],
        ),
        entry(
            "fetch_url",
            "Fetch a web page over HTTP",
            &[("url", "Address")],
        ),
    ]
}

pub fn catalog() -> ToolCatalog {
    ToolCatalog::new(entries())
}

/// An execution of `tools` in order, each succeeding unless named in `failing`, with data
/// flowing from each call to the next.
pub fn run(tools: &[&str], failing: &[&str]) -> Execution {
    Execution {
        context: tools.join(" then "),
        calls: tools
            .iter()
            .map(|t| ExecutedCall::new(*t, !failing.contains(t)))
            .collect(),
        data_edges: (1..tools.len()).map(|i| (i - 1, i)).collect(),
    }
}

pub const PATTERN: [&str; 3] = ["read_file", "parse_json", "create_issue"];

/// Learns `execution` `times` times.
pub fn learn(graph: &mut ToolGraph, store: &SqliteStore, execution: &Execution, times: usize) {
    for _ in 0..times {
        graph.record_execution(store, execution).unwrap();
    }
}
