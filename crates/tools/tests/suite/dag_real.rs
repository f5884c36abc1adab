//! Dependency detection on real MCP servers' schemas: the tools/list answers of
//! `fixtures/mcp-catalogue/catalogue.json` (server-memory, mcp-server-time, mcp-server-git,
//! server-filesystem as published).

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Value, json};
use trellis_tools::ToolSpec;
use trellis_tools::dag::{self, Catalog, EdgeKind, Step};

/// The catalogue's tools as `<server>__<tool>`, with whether they are annotated read-only.
struct Real(BTreeMap<String, (ToolSpec, bool)>);

impl Real {
    fn load() -> Self {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../fixtures/mcp-catalogue/catalogue.json");
        let catalogue: Value =
            serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let mut tools = BTreeMap::new();
        for server in catalogue["servers"].as_array().unwrap() {
            let name = server["server"].as_str().unwrap();
            for t in server["tools"].as_array().unwrap() {
                let tool = format!("{name}__{}", t["name"].as_str().unwrap());
                let spec = ToolSpec {
                    name: tool.clone(),
                    description: t["description"].as_str().unwrap_or_default().into(),
                    input_schema: t["inputSchema"].clone(),
                    output_schema: t.get("outputSchema").cloned(),
                };
                let read_only = t["annotations"]["readOnlyHint"] == true;
                tools.insert(tool, (spec, read_only));
            }
        }
        Self(tools)
    }
}

impl Catalog for Real {
    fn spec(&self, tool: &str) -> Option<ToolSpec> {
        self.0.get(tool).map(|(s, _)| s.clone())
    }

    fn parallel_safe(&self, tool: &str) -> bool {
        self.0.get(tool).is_some_and(|(_, r)| *r)
    }
}

fn step(id: &str, tool: &str, args: Value) -> Step {
    Step {
        id: id.into(),
        tool: tool.into(),
        args,
        depends_on: Vec::new(),
    }
}

#[test]
fn the_catalogue_holds_the_servers_these_tests_read() {
    let real = Real::load();
    for tool in [
        "memory__search_nodes",
        "memory__open_nodes",
        "time__get_current_time",
        "time__convert_time",
        "git__git_status",
        "git__git_log",
        "filesystem__list_allowed_directories",
        "filesystem__list_directory",
    ] {
        assert!(
            real.spec(tool).is_some(),
            "{tool} missing from the catalogue"
        );
    }
    assert!(real.0.len() > 700);
}

#[test]
fn time_the_current_time_feeds_the_conversion_ambiguously() {
    // convert_time needs `time` (a string); get_current_time returns timezone, datetime and
    // day_of_week strings: a dependency, bound to one of them and marked ambiguous.
    let real = Real::load();
    let plan = [
        step("now", "time__get_current_time", json!({"timezone": "UTC"})),
        step(
            "tokyo",
            "time__convert_time",
            json!({"source_timezone": "UTC", "target_timezone": "Asia/Tokyo"}),
        ),
    ];
    let d = dag::build(&plan, &real).unwrap();
    assert_eq!(d.layers, vec![vec![0], vec![1]]);
    let b = &d.nodes[1].bindings[0];
    assert_eq!((b.param.as_str(), b.from.as_str()), ("time", "now"));
    assert!(b.ambiguous, "{b:?}");
    assert!(
        d.edges.iter().any(|e| e.kind == EdgeKind::Schema
            && e.data_path.as_deref() == Some("output.datetime → input.time")),
        "{:?}",
        d.edges
    );
}

#[test]
fn memory_search_results_feed_open_nodes() {
    let real = Real::load();
    let plan = [
        step(
            "find",
            "memory__search_nodes",
            json!({"query": "inventory"}),
        ),
        step("open", "memory__open_nodes", json!({})),
    ];
    let d = dag::build(&plan, &real).unwrap();
    assert_eq!(d.nodes[1].dependencies, vec!["find"]);
    let b = &d.nodes[1].bindings[0];
    assert_eq!(b.param, "names");
    // Two arrays come back (entities, relations): which one is meant is a guess.
    assert!(b.ambiguous);
}

#[test]
fn git_calls_on_one_repository_carry_the_path_and_run_together() {
    let real = Real::load();
    let plan = [
        step(
            "status",
            "git__git_status",
            json!({"repo_path": "/work/repo"}),
        ),
        step("log", "git__git_log", json!({})),
        step("diff", "git__git_diff_unstaged", json!({})),
    ];
    let d = dag::build(&plan, &real).unwrap();
    assert_eq!(d.layers, vec![vec![0, 1, 2]], "{:?}", d.edges);
    assert_eq!(d.nodes[1].args["repo_path"], "/work/repo");
    assert_eq!(d.nodes[2].carried, vec!["repo_path from log"]);
}

#[test]
fn filesystem_a_listing_step_waits_for_the_step_whose_text_it_needs() {
    let real = Real::load();
    let plan = [
        step("roots", "filesystem__list_allowed_directories", json!({})),
        step("list", "filesystem__list_directory", json!({})),
    ];
    let d = dag::build(&plan, &real).unwrap();
    assert_eq!(d.layers, vec![vec![0], vec![1]]);
    let b = &d.nodes[1].bindings[0];
    assert_eq!((b.param.as_str(), b.output.as_str()), ("path", "content"));
}
