use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use trellis_core::{InputMode, RunOptions, Runtime};
use trellis_store::{Store, StoreOptions};
use trellis_test_support::scripted::{ScriptedProvider, Turn};
use trellis_test_support::{TempWorkspace, git};

/// A copy of `examples/inventory` as a fresh git repository, with `config` as its
/// `.trellis/config.toml`.
pub fn inventory(config: &str) -> TempWorkspace {
    let ws = TempWorkspace::new("core-e2e").unwrap();
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/inventory");
    copy_dir(&src, ws.path());
    init_repo(ws.path(), config);
    ws
}

pub fn init_repo(dir: &Path, config: &str) {
    git(dir, &["init", "-q"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "initial"]);
    std::fs::create_dir_all(dir.join(".trellis")).unwrap();
    std::fs::write(dir.join(".trellis/config.toml"), config).unwrap();
}

pub fn copy_dir(src: &Path, dst: &Path) {
    for e in std::fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            std::fs::create_dir_all(&to).unwrap();
            copy_dir(&e.path(), &to);
        } else {
            std::fs::copy(e.path(), &to).unwrap();
        }
    }
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
        events: None,
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
