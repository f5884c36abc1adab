//! `trellis mcp --gateway`: the workspace's MCP servers behind the tool-schema budget,
//! `search_tools`, `execute_dag`, learning and speculation (`trellis_core::gateway`), as an
//! MCP server. This is the rmcp adapter only: one [`GatewaySession`] per client session.

use std::sync::Arc;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, Implementation,
    JsonObject, ListToolsResult, PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
    ToolAnnotations,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData as McpError, RoleServer, ServerHandler};
use serde_json::Value;
use trellis_core::gateway::{Gateway, GatewaySession, GatewayTool};
use trellis_protocol::canonical::canonical;

use crate::Error;

/// One client session of the gateway.
#[derive(Clone)]
pub struct GatewayServer {
    session: Arc<GatewaySession>,
}

impl std::fmt::Debug for GatewayServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GatewayServer").finish_non_exhaustive()
    }
}

impl GatewayServer {
    /// A new session of `gateway`.
    pub fn new(gateway: &Arc<Gateway>) -> Self {
        Self {
            session: Arc::new(gateway.session()),
        }
    }
}

/// The MCP tool of a gateway tool (annotations as the server sent them; schemas with their
/// keys sorted, so what the client sees does not depend on serde_json's map order, and
/// limited to standard JSON Schema: [`crate::schema`]).
fn tool(t: GatewayTool) -> Tool {
    let object = |v: Value| match canonical(v) {
        Value::Object(m) => m,
        _ => JsonObject::new(),
    };
    let mut out = Tool::new(t.name, t.description, Arc::new(object(t.input_schema)));
    if let Some(schema) = t.output_schema {
        out = out.with_raw_output_schema(Arc::new(object(schema)));
    }
    if let Some(a) = t
        .annotations
        .and_then(|a| serde_json::from_value::<ToolAnnotations>(a).ok())
    {
        out = out.with_annotations(a);
    }
    crate::schema::standard_tool(out)
}

impl ServerHandler for GatewayServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
        .with_server_info(Implementation::new(
            "trellis-gateway",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(
            "The tools of this workspace's MCP servers (named <server>__<tool>). Only the ones \
             most useful so far are listed, to keep the prompt small: call `search_tools` with \
             what you want to do to find others (they are listed from then on). `execute_dag` \
             runs a plan of several calls in one go, the independent ones at the same time.",
        )
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, McpError> {
        let tools = self.session.list_tools().into_iter().map(tool).collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, McpError> {
        let args = Value::Object(request.arguments.unwrap_or_default());
        let answer = self
            .session
            .call(&request.name, args)
            .await
            .map_err(|e| McpError::invalid_params(e, None))?;
        if answer.list_changed
            && let Err(e) = context.peer.notify_tool_list_changed().await
        {
            tracing::warn!("could not tell the client its tool list changed: {e}");
        }
        let mut result = if answer.is_error {
            CallToolResult::error(vec![ContentBlock::text(answer.text)])
        } else {
            CallToolResult::success(vec![ContentBlock::text(answer.text)])
        };
        result.structured_content = answer.data.map(canonical);
        Ok(CallToolResponse::Complete(result))
    }
}

/// Serves a session of `gateway` on stdin/stdout until the client closes the connection.
pub async fn serve_gateway_stdio(gateway: &Arc<Gateway>) -> Result<(), Error> {
    crate::serve_stdio(GatewayServer::new(gateway)).await
}

/// Serves `gateway` over Streamable HTTP (as [`crate::serve_http`]), a session per client.
pub async fn serve_gateway_http(
    gateway: Arc<Gateway>,
    listener: tokio::net::TcpListener,
    authorize: crate::Authorize,
    shutdown: tokio_util::sync::CancellationToken,
) -> Result<(), Error> {
    crate::http::serve_http_with(
        move || GatewayServer::new(&gateway),
        listener,
        authorize,
        shutdown,
    )
    .await
}
