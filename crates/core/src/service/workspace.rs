//! What a front-end may know of the workspace a service serves: its root, its workflows, the
//! context window of an agent role's model, and the MCP servers a client brings along.

use std::path::Path;

pub use trellis_mcp::ServerConfig as McpServerConfig;

use super::{OpError, Service};

impl Service {
    /// The repository's top-level directory.
    pub fn root(&self) -> &Path {
        self.runtime.repo()
    }

    /// The names of the workflows a run can use.
    pub fn workflow_names(&self) -> Vec<String> {
        names(self.runtime.catalog())
    }

    /// The context window of the model agent role `role` uses (its profile's `context`); the
    /// default profile's without a role; `None` when the profile does not say.
    pub fn context_window(&self, role: Option<&str>) -> Option<u64> {
        let rt = &self.runtime;
        let models = &rt.models();
        let profile = match role.and_then(|r| rt.roles().get(r).ok()) {
            Some(spec) => models.profile_for_role(&spec.model_role),
            None => models.default_profile(),
        };
        models
            .profile(profile)
            .and_then(|p| p.context)
            .map(u64::from)
    }

    /// The name of the model profile agent role `role` uses (`orchestrator`, `coder`, …).
    pub fn profile_for_role(&self, role: &str) -> String {
        self.runtime.models().profile_for_role(role).to_string()
    }

    /// The names of the MCP servers the workspace's hub holds (configured ones and those
    /// clients brought).
    pub fn mcp_servers(&self) -> Vec<String> {
        self.runtime.mcp().names()
    }

    /// Adds an MCP server a client brought (started at once; one already there by that name
    /// is kept). An invalid description is the caller's error.
    pub fn attach_mcp_server(&self, name: &str, config: McpServerConfig) -> Result<(), OpError> {
        self.runtime
            .mcp()
            .add(name, config)
            .map_err(|e| OpError::new(e.to_string()))
    }
}

/// The names of the workflows of `repo` (built-in and `.trellis/workflows`), read without
/// opening a service.
pub fn workflow_names_in(repo: Option<&Path>) -> Vec<String> {
    names(&trellis_runtime::discover_workflows(repo, &[]))
}

fn names(catalog: &trellis_workflow::Catalog) -> Vec<String> {
    catalog
        .entries()
        .iter()
        .map(|e| e.workflow.metadata.name.clone())
        .collect()
}
