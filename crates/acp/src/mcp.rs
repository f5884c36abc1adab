//! The client's MCP servers (`mcpServers` of `session/new`, `session/load`,
//! `session/resume`): handed to the workspace's MCP hub, whose tools every agent role of this
//! process's runs then gets (stdio and Streamable HTTP; SSE is not supported).

use agent_client_protocol::v1::schema as acp;
use trellis_core::service::McpServerConfig as ServerConfig;
use trellis_core::service::Service;

use crate::invalid_params;

/// A server name the hub accepts: letters, digits, `-`, `_`, never `__` (it separates
/// server and tool in tool names).
fn hub_name(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        let c = if c.is_ascii_alphanumeric() || c == '-' {
            c
        } else {
            '_'
        };
        if !(c == '_' && out.ends_with('_')) {
            out.push(c);
        }
    }
    let out = out.trim_matches('_').to_owned();
    if out.is_empty() { "editor".into() } else { out }
}

/// The hub's configuration of an ACP server description: its name and settings. Every
/// agent role gets its tools; the policy follows the tools' annotations.
pub fn server_config(server: &acp::McpServer) -> Result<(String, ServerConfig), String> {
    let (name, config) = match server {
        acp::McpServer::Stdio(s) => (
            &s.name,
            ServerConfig {
                command: Some(s.command.display().to_string()),
                args: s.args.clone(),
                env: s
                    .env
                    .iter()
                    .map(|v| (v.name.clone(), v.value.clone()))
                    .collect(),
                ..ServerConfig::default()
            },
        ),
        acp::McpServer::Http(h) => (
            &h.name,
            ServerConfig {
                url: Some(h.url.clone()),
                headers: h
                    .headers
                    .iter()
                    .map(|v| (v.name.clone(), v.value.clone()))
                    .collect(),
                ..ServerConfig::default()
            },
        ),
        acp::McpServer::Sse(s) => {
            return Err(format!(
                "MCP server `{}`: the SSE transport is not supported (stdio or HTTP)",
                s.name
            ));
        }
        _ => return Err("an MCP server transport this agent does not know".into()),
    };
    Ok((
        hub_name(name),
        ServerConfig {
            roles: vec!["*".into()],
            ..config
        },
    ))
}

/// Adds the client's servers to the workspace's hub (started at once; one already there by
/// that name is kept). An invalid description is the client's error.
pub fn attach(
    service: &Service,
    servers: &[acp::McpServer],
) -> Result<(), agent_client_protocol::Error> {
    for s in servers {
        let (name, config) = server_config(s).map_err(invalid_params)?;
        service
            .attach_mcp_server(&name, config)
            .map_err(|e| invalid_params(e.message))?;
        tracing::info!(server = %name, "MCP server from the client added");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use serde_json::json;

    #[test]
    fn acp_descriptions_become_hub_servers() {
        let stdio: acp::McpServer = serde_json::from_value(json!({
            "name": "My files.v2", "command": "/usr/bin/node", "args": ["s.js"],
            "env": [{"name": "K", "value": "v"}]
        }))
        .unwrap();
        let (name, c) = server_config(&stdio).unwrap();
        assert_eq!(name, "My_files_v2");
        assert_eq!(c.command.as_deref(), Some("/usr/bin/node"));
        assert_eq!(c.args, ["s.js"]);
        assert_eq!(c.env["K"], "v");
        assert_eq!(c.roles, ["*"]);
        c.validate(&name).unwrap();
        let http: acp::McpServer = serde_json::from_value(json!({
            "type": "http", "name": "api__x", "url": "http://127.0.0.1:1/mcp",
            "headers": [{"name": "X-Key", "value": "k"}]
        }))
        .unwrap();
        let (name, c) = server_config(&http).unwrap();
        assert_eq!(name, "api_x");
        assert_eq!(c.url.as_deref(), Some("http://127.0.0.1:1/mcp"));
        assert_eq!(c.headers["X-Key"], "k");
        c.validate(&name).unwrap();
        let sse: acp::McpServer = serde_json::from_value(json!({
            "type": "sse", "name": "s", "url": "http://127.0.0.1:1/sse", "headers": []
        }))
        .unwrap();
        assert!(server_config(&sse).is_err());
        assert_eq!(hub_name("__"), "editor");
    }
}
