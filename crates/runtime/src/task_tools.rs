//! The agent tools beyond the built-ins: `rag_search` (the index's hybrid search, for
//! the intent, milestone, expander, researcher and planner agents) and `write_todos` (an
//! agent's own checklist for multi-step work).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use trellis_index::{Index, IndexConfig, SearchMode, SearchRequest};
use trellis_tools::tool::typed;
use trellis_tools::{Error as ToolError, Tool, ToolContext, TypedTool};

/// Results `rag_search` returns unless asked for fewer (at most this many).
const MAX_RESULTS: usize = 10;
/// Characters of each result's text shown.
const SNIPPET_CHARS: usize = 800;

/// The tools, over the repository's index.
pub fn tools(repo: PathBuf, index: IndexConfig) -> Vec<Arc<dyn Tool>> {
    vec![
        typed(RagSearch { repo, index }),
        typed(WriteTodos::default()),
    ]
}

/// `rag_search` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct RagArgs {
    /// What to look for, in words or identifiers.
    pub query: String,
    /// How many results (1-10, default 5).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// One result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RagHit {
    /// File path.
    pub path: String,
    /// First and last line.
    pub lines: (u32, u32),
    /// The symbol, if the chunk is one.
    pub name: String,
    /// The beginning of its text.
    pub text: String,
}

/// `rag_search` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct RagOut {
    /// The hits, best first.
    pub hits: Vec<RagHit>,
}

struct RagSearch {
    repo: PathBuf,
    index: IndexConfig,
}

impl TypedTool for RagSearch {
    type Input = RagArgs;
    type Output = RagOut;

    fn name(&self) -> &'static str {
        "rag_search"
    }

    fn description(&self) -> &'static str {
        "Search the repository's index (full-text and, when configured, semantic search) for \
         code and documents about `query`; returns the best matching functions, classes, \
         sections and files with their paths and line ranges."
    }

    async fn run(&self, _ctx: &ToolContext, input: RagArgs) -> trellis_tools::Result<RagOut> {
        let (repo, config) = (self.repo.clone(), self.index.clone());
        let req = SearchRequest {
            query: input.query,
            categories: Vec::new(),
            limit: input.limit.unwrap_or(5).clamp(1, MAX_RESULTS),
            mode: SearchMode::Hybrid,
        };
        let hits = tokio::task::spawn_blocking(move || {
            let index = Index::open(&repo, config).map_err(|e| e.to_string())?;
            index.search(&req).map_err(|e| e.to_string())
        })
        .await
        .map_err(|e| ToolError::Failed(e.to_string()))?
        .map_err(|e| ToolError::Failed(format!("the index cannot be searched: {e}")))?;
        Ok(RagOut {
            hits: hits
                .into_iter()
                .map(|h| RagHit {
                    path: h.chunk.path,
                    lines: (h.chunk.decl.start_line, h.chunk.decl.end_line),
                    name: h.chunk.decl.qualified_name,
                    text: h.chunk.text.chars().take(SNIPPET_CHARS).collect(),
                })
                .collect(),
        })
    }

    fn render(&self, out: &RagOut) -> String {
        if out.hits.is_empty() {
            return "nothing found".into();
        }
        let mut s = String::new();
        for h in &out.hits {
            s.push_str(&format!("## {}:{}-{}", h.path, h.lines.0, h.lines.1));
            if !h.name.is_empty() {
                s.push_str(&format!(" ({})", h.name));
            }
            s.push_str(&format!("\n{}\n", h.text));
        }
        s
    }
}

/// One todo.
#[derive(Clone, Debug, Deserialize, Serialize, JsonSchema)]
pub struct Todo {
    /// What to do.
    pub content: String,
    /// `pending`, `in_progress` or `done`.
    #[serde(default = "pending")]
    pub status: String,
}

fn pending() -> String {
    "pending".into()
}

/// `write_todos` arguments.
#[derive(Debug, Deserialize, JsonSchema)]
pub struct TodoArgs {
    /// The whole list, as it is now (it replaces the previous one).
    pub todos: Vec<Todo>,
}

/// `write_todos` result.
#[derive(Debug, Serialize, JsonSchema)]
pub struct TodoOut {
    /// The list.
    pub todos: Vec<Todo>,
}

/// The lists, per agent node.
#[derive(Default)]
struct WriteTodos {
    lists: Mutex<HashMap<String, Vec<Todo>>>,
}

impl TypedTool for WriteTodos {
    type Input = TodoArgs;
    type Output = TodoOut;

    fn name(&self) -> &'static str {
        "write_todos"
    }

    fn description(&self) -> &'static str {
        "Keep your checklist for multi-step work: send the whole list each time, every item \
         with `content` and `status` (`pending`, `in_progress`, `done`)."
    }

    async fn run(&self, ctx: &ToolContext, input: TodoArgs) -> trellis_tools::Result<TodoOut> {
        for t in &input.todos {
            if !matches!(t.status.as_str(), "pending" | "in_progress" | "done") {
                return Err(ToolError::InvalidArgs {
                    tool: "write_todos".into(),
                    message: format!(
                        "status `{}` of `{}`: use pending, in_progress or done",
                        t.status, t.content
                    ),
                });
            }
        }
        let node = ctx.env.node.clone().unwrap_or_default();
        let mut lists = self.lists.lock().unwrap_or_else(|p| p.into_inner());
        lists.insert(node, input.todos.clone());
        Ok(TodoOut { todos: input.todos })
    }

    fn render(&self, out: &TodoOut) -> String {
        out.todos
            .iter()
            .map(|t| {
                let mark = match t.status.as_str() {
                    "done" => "[x]",
                    "in_progress" => "[~]",
                    _ => "[ ]",
                };
                format!("{mark} {}\n", t.content)
            })
            .collect()
    }
}
