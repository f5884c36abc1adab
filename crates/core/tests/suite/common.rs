use std::path::{Path, PathBuf};

use std::sync::Arc;

use serde_json::{Value, json};
use trellis_core::{InputMode, RunOptions, Runtime};
use trellis_store::{Store, StoreOptions};
use trellis_test_support::TempWorkspace;
use trellis_test_support::scripted::{ScriptedProvider, Turn};

/// A copy of `examples/inventory` as a fresh git repository with `config`.
pub fn inventory(config: &str) -> TempWorkspace {
    trellis_test_support::example_repo("inventory", config).unwrap()
}

/// BM25 only (no embedding model), the unittest runner.
pub const CONFIG: &str = r#"
[index.embedding]
backend = "none"

[agents]
test_command = "python3 -B -m unittest -q"
"#;

/// A runtime over `repo` whose every model role plays `script`.
pub fn runtime(repo: &Path, script: &ScriptedProvider) -> Arc<Runtime> {
    let store = Arc::new(Store::open_workspace(repo, StoreOptions::default()).unwrap());
    let rt = Runtime::open(repo, &[], &[], store).unwrap();
    rt.models.install("local", Arc::new(script.clone()));
    Arc::new(rt)
}

pub fn options(input: InputMode) -> RunOptions {
    RunOptions {
        input,
        ..RunOptions::default()
    }
}

pub fn queries() -> Turn {
    Turn::Json(json!({ "queries": ["Inventory commit stock", "reserve release"] }))
}

pub fn report(failure: bool, output: &str) -> Turn {
    Turn::Json(json!({ "failure": failure, "output": output, "files_changed": [], "findings": [] }))
}

pub fn tool(name: &str, arguments: Value) -> Turn {
    Turn::ToolCall {
        name: name.into(),
        arguments,
    }
}

/// `node#attempt` of every activation, in journal order.
pub fn activations(store: &Store, run: &trellis_protocol::RunId) -> Vec<String> {
    store
        .events(run, 1, None)
        .unwrap()
        .into_iter()
        .filter_map(|e| match e.kind {
            trellis_protocol::EventKind::NodeTransition {
                node,
                attempt,
                to: trellis_protocol::NodeState::Running,
                ..
            } => Some(format!("{node}#{attempt}")),
            _ => None,
        })
        .collect()
}

pub fn path_of(ws: &TempWorkspace) -> PathBuf {
    ws.path().canonicalize().unwrap()
}
