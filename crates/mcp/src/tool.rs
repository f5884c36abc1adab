//! An MCP server's tool as a Trellis tool: named `<server>__<tool>`, checked by the workspace
//! policy before it runs (its annotations pick the policy class), bounded by the server's
//! tool timeout, cancelled with the agent, and recorded like a built-in tool by the registry;
//! its progress notifications reach the call's [`ToolContext`].

use std::sync::Arc;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResult, CancelledNotificationParam,
    ClientRequest, RequestId, ServerResult, ToolAnnotations,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient};
use serde_json::Value;
use trellis_tools::config::Action;
use trellis_tools::tool::BoxFuture;
use trellis_tools::{Error as ToolError, Tool, ToolContext, ToolOutput, ToolProgress, ToolSpec};

use crate::server::Server;

/// Longest tool name model APIs accept (`^[a-zA-Z0-9_-]{1,64}$`).
const MAX_NAME: usize = 64;

/// The name agents call a server's tool by: `<server>__<tool>`, with characters model APIs
/// refuse replaced by `_`, shortened (with a hash of the full name) past 64 characters.
pub fn exposed_name(server: &str, tool: &str) -> String {
    let full = format!("{server}__{tool}");
    let clean: String = full
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if clean.len() <= MAX_NAME {
        return clean;
    }
    // FNV-1a: stable across builds and platforms.
    let hash = full.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{}_{:08x}", &clean[..MAX_NAME - 9], hash as u32)
}

/// A workflow stage's `mcp_tools` entry as an allow-list entry: `git.git_status`,
/// `git/git_status` and `git__git_status` name one tool, `git.*`, `git/*` and `git__*` all
/// of a server's. Other names (built-in tool names) are kept as they are.
pub fn allow_entry(entry: &str) -> String {
    let entry = entry.trim();
    for sep in ['.', '/'] {
        if let Some((server, tool)) = entry.split_once(sep) {
            if tool == "*" {
                return format!("{server}__*");
            }
            return exposed_name(server, tool);
        }
    }
    entry.to_owned()
}

pub(crate) struct McpTool {
    server: Arc<Server>,
    remote: String,
    spec: ToolSpec,
    annotations: Option<ToolAnnotations>,
}

impl McpTool {
    pub(crate) fn new(server: Arc<Server>, tool: &rmcp::model::Tool) -> Self {
        let name = exposed_name(&server.name, &tool.name);
        let mut description = tool
            .description
            .as_deref()
            .unwrap_or_default()
            .trim()
            .to_owned();
        if description.is_empty() {
            description = tool.title.clone().unwrap_or_default();
        }
        let description = format!("[MCP server {}] {description}", server.name);
        Self {
            remote: tool.name.to_string(),
            spec: ToolSpec {
                name,
                description,
                input_schema: Value::Object((*tool.input_schema).clone()),
                output_schema: tool
                    .output_schema
                    .as_ref()
                    .map(|s| Value::Object((**s).clone())),
            },
            annotations: tool.annotations.clone(),
            server,
        }
    }

    /// The policy action and the class named in an approval request.
    fn action(&self, ctx: &ToolContext) -> (Action, &'static str) {
        if let Some(a) = self.server.config.approval {
            return (a, "its server's `approval` setting");
        }
        let policy = &ctx.config().policy;
        let a = self.annotations.clone().unwrap_or_default();
        // The MCP defaults: not read-only, destructive, open world.
        if a.read_only_hint == Some(true) {
            (policy.read_only, "read-only")
        } else if a.destructive_hint != Some(false) {
            (policy.destructive, "may be destructive")
        } else if a.open_world_hint != Some(false) {
            (policy.network, "reaches outside the workspace")
        } else {
            (policy.writes_workspace, "changes things")
        }
    }

    async fn run(&self, ctx: &ToolContext, args: Value) -> Result<ToolOutput, ToolError> {
        let server = &self.server.name;
        let arguments = match args {
            Value::Object(map) => map,
            Value::Null => serde_json::Map::new(),
            other => {
                return Err(ToolError::InvalidArgs {
                    tool: self.spec.name.clone(),
                    message: format!("arguments must be a JSON object, not {other}"),
                });
            }
        };
        let (action, class) = self.action(ctx);
        ctx.gate(
            action,
            format!("MCP tool {} of server `{server}` ({class})", self.remote),
            None,
        )
        .await?;
        let peer = self
            .server
            .peer()
            .map_err(|e| ToolError::Failed(e.to_string()))?;
        let params = CallToolRequestParams::new(self.remote.clone()).with_arguments(arguments);
        let timeout = self.server.config.tool_timeout();
        // Dropping the call (cancel, timeout) sends notifications/cancelled to the server.
        let result = tokio::select! {
            biased;
            () = ctx.cancel.cancelled() => return Err(ToolError::Cancelled),
            r = tokio::time::timeout(timeout, self.call_reporting(ctx, &peer, params)) => match r {
                Ok(r) => r,
                Err(_) => return Err(ToolError::Failed(format!(
                    "MCP server `{server}` did not answer {} within {} s (tool_timeout_secs); the call was cancelled",
                    self.remote, self.server.config.tool_timeout_secs
                ))),
            },
        };
        let result = result.map_err(|e| {
            ToolError::Failed(format!(
                "MCP server `{server}` refused {}: {e}",
                self.remote
            ))
        })?;
        let text = render(&result);
        if result.is_error == Some(true) {
            return Err(ToolError::Failed(format!(
                "{} (MCP server `{server}`) failed: {text}",
                self.remote
            )));
        }
        Ok(ToolOutput {
            text,
            data: result.structured_content.filter(|v| !v.is_null()),
        })
    }
}

impl McpTool {
    /// `tools/call` (what `Peer::call_tool` sends), passing the server's progress reports
    /// for it to `ctx` while it runs; dropped before its answer, it sends
    /// `notifications/cancelled`.
    async fn call_reporting(
        &self,
        ctx: &ToolContext,
        peer: &Peer<RoleClient>,
        params: CallToolRequestParams,
    ) -> Result<CallToolResult, ServiceError> {
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = peer
            .send_request_with_option(request, PeerRequestOptions::no_options())
            .await?;
        let mut abandoned = CancelOnDrop {
            peer: peer.clone(),
            id: Some(handle.id.clone()),
        };
        // A report the server sends before this subscription exists is lost: the server
        // has to read the request and work a while first, so only a first report sent
        // at once could be.
        let mut reports = self
            .server
            .progress
            .subscribe(handle.progress_token.clone());
        let response = handle.await_response();
        tokio::pin!(response);
        let mut last = f64::NEG_INFINITY;
        let answer = loop {
            tokio::select! {
                biased;
                r = &mut response => break r,
                Some(p) = reports.recv() => {
                    if p.progress > last {
                        last = p.progress;
                        ctx.report_progress(ToolProgress {
                            progress: p.progress,
                            total: p.total,
                            message: p.message,
                        });
                    }
                }
            }
        };
        abandoned.id = None;
        match answer? {
            ServerResult::CallToolResult(result) => Ok(result),
            _ => Err(ServiceError::UnexpectedResponse),
        }
    }
}

/// Tells the server a request is abandoned (`notifications/cancelled`) unless disarmed.
struct CancelOnDrop {
    peer: Peer<RoleClient>,
    id: Option<RequestId>,
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        let Some(id) = self.id.take() else { return };
        let Ok(rt) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let peer = self.peer.clone();
        rt.spawn(async move {
            let why = "request abandoned by the caller".to_owned();
            let _ = peer
                .notify_cancelled(CancelledNotificationParam::new(Some(id), Some(why)))
                .await;
        });
    }
}

impl Tool for McpTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    /// Read-only when the server says so (`readOnlyHint`) and does not also call it
    /// destructive; the workspace policy still decides whether a call may run.
    fn read_only(&self) -> bool {
        self.annotations
            .as_ref()
            .is_some_and(|a| a.read_only_hint == Some(true) && a.destructive_hint != Some(true))
    }

    fn call<'a>(
        &'a self,
        ctx: &'a ToolContext,
        args: Value,
    ) -> BoxFuture<'a, trellis_tools::Result<ToolOutput>> {
        Box::pin(self.run(ctx, args))
    }
}

/// A result's content as text for the model: text blocks as they are, other blocks named.
fn render(result: &CallToolResult) -> String {
    let mut parts = Vec::new();
    for block in &result.content {
        let v = serde_json::to_value(block).unwrap_or(Value::Null);
        let kind = v.get("type").and_then(Value::as_str).unwrap_or_default();
        let s = |k: &str| v.get(k).and_then(Value::as_str).unwrap_or_default();
        parts.push(match kind {
            "text" => s("text").to_owned(),
            "image" | "audio" => format!(
                "[{kind} {}, {} bytes]",
                s("mimeType"),
                s("data").len() / 4 * 3
            ),
            "resource" => {
                let r = v.get("resource").cloned().unwrap_or(Value::Null);
                match r.get("text").and_then(Value::as_str) {
                    Some(t) => t.to_owned(),
                    None => format!(
                        "[resource {}]",
                        r.get("uri").and_then(Value::as_str).unwrap_or_default()
                    ),
                }
            }
            "resource_link" => format!("[resource link {} {}]", s("uri"), s("name")),
            other => format!("[{other} content]"),
        });
    }
    if parts.is_empty()
        && let Some(data) = &result.structured_content
    {
        // Keys sorted: the text does not depend on serde_json's map order in this build.
        return trellis_protocol::canonical::to_canonical_string(data).unwrap_or_default();
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn structured_results_reach_the_model_with_sorted_keys() {
        let mut data = serde_json::Map::new();
        data.insert("zeta".into(), Value::from(1));
        data.insert("alpha".into(), Value::from(2));
        let mut result = CallToolResult::structured(Value::Object(data));
        result.content.clear();
        assert_eq!(render(&result), r#"{"alpha":2,"zeta":1}"#);
    }

    #[test]
    fn names_are_what_model_apis_accept() {
        assert_eq!(exposed_name("git", "git_status"), "git__git_status");
        assert_eq!(exposed_name("fs", "read.file v2"), "fs__read_file_v2");
        let long = exposed_name("server", &"x".repeat(100));
        assert_eq!(long.len(), 64);
        assert_ne!(long, exposed_name("server", &"x".repeat(101)));
    }

    #[test]
    fn stage_entries_become_allow_list_entries() {
        assert_eq!(allow_entry("git.*"), "git__*");
        assert_eq!(allow_entry("git/*"), "git__*");
        assert_eq!(allow_entry("git.git_status"), "git__git_status");
        assert_eq!(allow_entry("git__git_log"), "git__git_log");
        assert_eq!(allow_entry("lsp_get_signature"), "lsp_get_signature");
    }
}
