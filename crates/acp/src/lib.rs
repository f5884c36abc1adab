//! `trellis acp`: Trellis as an [Agent Client Protocol](https://agentclientprotocol.com) v1
//! agent over stdio, for editors (Zed, JetBrains, neovim, Emacs).
//!
//! A thin adapter over the runtime service ([`trellis_core::service::Service`]), like
//! `trellis serve`: a prompt turn is a Trellis request — a `startRun` op in interrupt mode —
//! and the turn streams the run's planned stages as the ACP `plan`, its agents' text and
//! thinking as message and thought chunks, their tool calls (with diffs for edits) as
//! `tool_call` / `tool_call_update`, and turns approvals into `session/request_permission`.
//! `session/cancel` cancels the run and ends the turn with `stopReason: cancelled`.
//!
//! stdout carries the protocol only; logs go to stderr. See `docs/acp.md`.

mod config;
mod dispatch;
mod ext;
mod map;
mod mcp;
mod sessions;
mod turn;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::schema as acp;
use agent_client_protocol::{Agent, Client, ConnectTo, Stdio};
use tokio_util::sync::CancellationToken;
use trellis_core::service::Service;
use trellis_protocol::Op;
use trellis_protocol::records::ClientSession;

pub use config::{Autonomy, SessionConfig};
pub use ext::{METHODS as EXTENSION_METHODS, TrellisRequest};
pub use map::{StagePlan, session_updates, tool_kind, usage_update};
pub use turn::change::change_set_diffs;

/// What can go wrong running the agent.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The connection to the client failed (transport, a handler's fatal error).
    #[error("ACP connection: {0}")]
    Connection(#[from] agent_client_protocol::Error),
}

/// Opens the runtime service of a workspace (a git repository's root). Called at most once
/// per process, when a session first needs it (its first prompt, `session/load`,
/// `session/resume`, `session/list`) and no service was given: an idle session holds no
/// store, models or configuration (docs/acp.md, "Sessions").
pub type OpenService = Arc<dyn Fn(&Path) -> Result<Arc<Service>, String> + Send + Sync>;

/// Settings of the agent.
#[derive(Clone, Debug, Default)]
pub struct AcpOptions {
    /// Run every prompt with this workflow instead of asking the orchestrator.
    pub workflow: Option<String>,
}

/// What the client said it can do in `initialize`; nothing it did not advertise is called.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientCaps {
    /// `fs/read_text_file`.
    pub read_text_file: bool,
    /// `fs/write_text_file`.
    pub write_text_file: bool,
    /// `terminal/*`.
    pub terminal: bool,
    /// `_trellis/question` (in `_meta["trellis.dev/extensions"].methods`): a workflow's
    /// questions are asked.
    pub questions: bool,
    /// `_trellis/notification` (likewise): the client is told when a run of a session needs
    /// input, fails or finishes.
    pub notifications: bool,
}

/// One ACP session live in this process: a workspace directory and its turns. Its record
/// (and its turns' runs) are in the workspace store.
struct Session {
    /// The session's `cwd` (absolute, inside the workspace).
    cwd: PathBuf,
    /// Its title, once the first prompt gave it one.
    title: Option<String>,
    /// The prompt turn in progress, if any.
    turn: Option<CancellationToken>,
    /// Its settings (workflow, autonomy).
    config: SessionConfig,
    /// Whether its record is in the workspace store (a new session is stored when first used).
    recorded: bool,
    /// The client's MCP servers, handed to the workspace's hub when the session is stored.
    mcp_servers: Vec<acp::McpServer>,
}

impl Session {
    fn new(cwd: PathBuf, config: SessionConfig, recorded: bool) -> Self {
        Self {
            cwd,
            title: None,
            turn: None,
            config,
            recorded,
            mcp_servers: Vec::new(),
        }
    }
}

/// Records a session's settings with it (so a restarted agent has them).
async fn persist_config(
    service: &Arc<Service>,
    session: &acp::SessionId,
    config: &SessionConfig,
) -> Result<(), agent_client_protocol::Error> {
    let (svc, key) = (service.clone(), session.0.to_string());
    let found = tokio::task::spawn_blocking(move || svc.client_session(&key))
        .await
        .map_err(internal)?
        .map_err(internal)?;
    if let Some(mut record) = found {
        record.config = config.to_json();
        service
            .call(Op::RecordClientSession { session: record })
            .await
            .map_err(internal)?;
    }
    Ok(())
}

/// `agentCapabilities._meta`: the `_trellis/...` extension methods (docs/acp.md).
fn extensions_meta() -> serde_json::Map<String, serde_json::Value> {
    let mut meta = serde_json::Map::new();
    meta.insert(
        ext::META_KEY.into(),
        serde_json::json!({ "methods": ext::METHODS, "docs": "docs/acp.md#extension-methods" }),
    );
    meta
}

/// The slash commands a session offers.
fn commands() -> acp::SessionUpdate {
    acp::SessionUpdate::AvailableCommandsUpdate(acp::AvailableCommandsUpdate::new(vec![
        acp::AvailableCommand::new(
            "undo",
            "Undo the last change set applied to your files in this session (again: redo)",
        ),
    ]))
}

/// The Trellis ACP agent: sessions over one runtime service.
pub struct AcpAgent {
    open: Option<OpenService>,
    service: tokio::sync::Mutex<Option<Arc<Service>>>,
    /// The workspace (git root, canonical), fixed by the first session or the given service.
    root: Mutex<Option<PathBuf>>,
    /// The workflows sessions may choose (the service's catalog, or the same discovery
    /// before the service is open).
    workflows: std::sync::OnceLock<Vec<String>>,
    options: AcpOptions,
    client: Mutex<ClientCaps>,
    sessions: Mutex<HashMap<String, Session>>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// The root of the git repository holding `dir` (the nearest ancestor with a `.git`).
fn git_root(dir: &Path) -> Option<PathBuf> {
    dir.ancestors()
        .find(|d| d.join(".git").exists())
        .map(Path::to_path_buf)
}

fn invalid_params(message: impl Into<String>) -> agent_client_protocol::Error {
    agent_client_protocol::Error::invalid_params().data(serde_json::json!(message.into()))
}

/// An internal error with `e` as its data.
fn internal(e: impl std::fmt::Display) -> agent_client_protocol::Error {
    agent_client_protocol::Error::internal_error().data(e.to_string())
}

impl AcpAgent {
    /// An agent whose service is opened by `open` when a session first needs it (the git
    /// repository of the first session's `cwd`).
    pub fn new(open: OpenService, options: AcpOptions) -> Arc<Self> {
        Arc::new(Self {
            open: Some(open),
            service: tokio::sync::Mutex::new(None),
            root: Mutex::new(None),
            workflows: std::sync::OnceLock::new(),
            options,
            client: Mutex::new(ClientCaps::default()),
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// An agent for the workspace at `root` (a git repository's root), whose service is
    /// opened by `open` when a session first needs it: sessions must be inside it.
    pub fn for_workspace(root: PathBuf, open: OpenService, options: AcpOptions) -> Arc<Self> {
        let root = root.canonicalize().unwrap_or(root);
        let agent = Self::new(open, options);
        *lock(&agent.root) = Some(root);
        agent
    }

    /// An agent over a running service: sessions must be inside its workspace.
    pub fn with_service(service: Arc<Service>, options: AcpOptions) -> Arc<Self> {
        let root = service
            .root()
            .canonicalize()
            .unwrap_or_else(|_| service.root().to_path_buf());
        let workflows = std::sync::OnceLock::from(service.workflow_names());
        Arc::new(Self {
            open: None,
            service: tokio::sync::Mutex::new(Some(service)),
            root: Mutex::new(Some(root)),
            workflows,
            options,
            client: Mutex::new(ClientCaps::default()),
            sessions: Mutex::new(HashMap::new()),
        })
    }

    /// What the client advertised in `initialize`.
    pub fn client_caps(&self) -> ClientCaps {
        *lock(&self.client)
    }

    /// The service, once a session opened it (or the one given).
    pub async fn service(&self) -> Option<Arc<Service>> {
        self.service.lock().await.clone()
    }

    /// The workspace's service, opened now if no session has needed it yet.
    async fn open_service(&self) -> Result<Arc<Service>, agent_client_protocol::Error> {
        let mut service = self.service.lock().await;
        if let Some(s) = service.as_ref() {
            return Ok(s.clone());
        }
        let (Some(open), Some(root)) = (self.open.clone(), lock(&self.root).clone()) else {
            return Err(invalid_params(
                "no workspace is open: create or load a session first",
            ));
        };
        let opened = tokio::task::spawn_blocking(move || open(&root))
            .await
            .map_err(agent_client_protocol::Error::into_internal_error)?
            .map_err(|e| agent_client_protocol::Error::internal_error().data(e))?;
        tracing::info!(workspace = %opened.root().display(), "workspace opened");
        *service = Some(opened.clone());
        Ok(opened)
    }

    /// The service, with session `id` stored in it (a new session is stored, and its MCP
    /// servers handed to the hub, when it is first used).
    pub(crate) async fn live_service(
        &self,
        id: &acp::SessionId,
    ) -> Result<Arc<Service>, agent_client_protocol::Error> {
        let service = self.open_service().await?;
        let pending = {
            let sessions = lock(&self.sessions);
            match sessions.get(id.0.as_ref()) {
                Some(s) if !s.recorded => {
                    Some((s.cwd.clone(), s.config.clone(), s.mcp_servers.clone()))
                }
                Some(_) => None,
                None => return Err(acp::Error::session_not_found(id.clone()).into()),
            }
        };
        if let Some((cwd, config, servers)) = pending {
            mcp::attach(&service, &servers)?;
            let record = ClientSession {
                id: id.0.to_string(),
                client: sessions::CLIENT.into(),
                cwd: cwd.display().to_string(),
                title: None,
                config: config.to_json(),
                created_ms: 0,
                updated_ms: 0,
            };
            service
                .call(Op::RecordClientSession { session: record })
                .await
                .map_err(internal)?;
            if let Some(s) = lock(&self.sessions).get_mut(id.0.as_ref()) {
                s.recorded = true;
                s.mcp_servers.clear();
            }
        }
        Ok(service)
    }

    /// The names of the workflows a session may choose.
    fn workflows(&self) -> Vec<String> {
        let root = lock(&self.root).clone();
        self.workflows
            .get_or_init(|| trellis_core::service::workflow_names_in(root.as_deref()))
            .clone()
    }

    /// The ACP agent side of a connection, for [`ConnectTo::connect_to`] a transport (stdio,
    /// or the SDK's in-process client in tests). Each request goes to its handler (see the
    /// `on_*` methods: most run off the dispatch loop); `session/cancel` cancels the turn.
    pub fn connection(self: &Arc<Self>) -> impl ConnectTo<Client> + 'static {
        let [a, b, c, d, e, f, g, h, i, j, k] = std::array::from_fn(|_| self.clone());
        Agent
            .v1()
            .name("trellis")
            .on_receive_request(
                async move |req: acp::InitializeRequest, responder, _cx| {
                    responder.respond(a.initialize(&req))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req, responder, cx| b.on_new_session(req, responder, cx),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req, responder, cx| c.on_prompt(req, responder, cx),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req, responder, cx| d.on_load_session(req, responder, cx),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req, responder, cx| e.on_resume_session(req, responder, cx),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req, responder, cx| f.on_list_sessions(req, responder, cx),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req: acp::CloseSessionRequest, responder, _cx| {
                    responder.respond_with_result(g.close_session(&req))
                },
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req, responder, cx| h.on_set_config_option(req, responder, cx),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req, responder, cx| i.on_set_mode(req, responder, cx),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_request(
                async move |req, responder, cx| j.on_extension(req, responder, cx),
                agent_client_protocol::on_receive_request!(),
            )
            .on_receive_notification(
                async move |n: acp::CancelNotification, _cx| {
                    k.cancel(&n.session_id);
                    Ok(())
                },
                agent_client_protocol::on_receive_notification!(),
            )
    }

    /// Serves one client over this process's stdin and stdout until it disconnects.
    pub async fn serve_stdio(self: &Arc<Self>) -> Result<(), Error> {
        self.connection().connect_to(Stdio::new()).await?;
        Ok(())
    }

    fn initialize(&self, req: &acp::InitializeRequest) -> acp::InitializeResponse {
        let caps = &req.client_capabilities;
        let takes = |method: &str| {
            caps.meta
                .as_ref()
                .and_then(|m| m.get(ext::META_KEY))
                .and_then(|e| e["methods"].as_array())
                .is_some_and(|m| m.iter().any(|m| m == method))
        };
        *lock(&self.client) = ClientCaps {
            read_text_file: caps.fs.read_text_file,
            write_text_file: caps.fs.write_text_file,
            terminal: caps.terminal,
            questions: takes(trellis_protocol::acp::QUESTION_METHOD),
            notifications: takes(trellis_protocol::acp::NOTIFICATION_METHOD),
        };
        // Only what is implemented: sessions recorded in the workspace store (load, list,
        // resume, close); embedded text resources in prompts; the client's MCP servers over
        // stdio and HTTP (not SSE); no images or audio (defaults are "unsupported").
        let sessions = acp::SessionCapabilities::new()
            .list(acp::SessionListCapabilities::new())
            .resume(acp::SessionResumeCapabilities::new())
            .close(acp::SessionCloseCapabilities::new());
        acp::InitializeResponse::new(ProtocolVersion::V1)
            .agent_capabilities(
                acp::AgentCapabilities::new()
                    .load_session(true)
                    .prompt_capabilities(acp::PromptCapabilities::new().embedded_context(true))
                    .mcp_capabilities(acp::McpCapabilities::new().http(true))
                    .session_capabilities(sessions)
                    .meta(extensions_meta()),
            )
            .auth_methods(Vec::new())
            .agent_info(
                acp::Implementation::new("trellis", env!("CARGO_PKG_VERSION")).title("Trellis"),
            )
    }

    /// `cwd` made canonical, checked to be an absolute directory inside this agent's workspace
    /// (the first session's git repository fixes it).
    fn workspace_cwd(&self, cwd: &Path) -> Result<PathBuf, agent_client_protocol::Error> {
        if !cwd.is_absolute() {
            return Err(invalid_params(format!(
                "cwd must be an absolute path, not `{}`",
                cwd.display()
            )));
        }
        let cwd = cwd.canonicalize().map_err(|e| {
            invalid_params(format!("cwd `{}` is not a directory: {e}", cwd.display()))
        })?;
        let mut root = lock(&self.root);
        let root = match root.as_ref() {
            Some(r) => r.clone(),
            None => {
                let Some(found) = git_root(&cwd) else {
                    return Err(invalid_params(format!(
                        "cwd `{}` is not inside a git repository",
                        cwd.display()
                    )));
                };
                *root = Some(found.clone());
                found
            }
        };
        if !cwd.starts_with(&root) {
            return Err(invalid_params(format!(
                "cwd `{}` is outside this agent's workspace `{}` (one workspace per `trellis acp` process)",
                cwd.display(),
                root.display()
            )));
        }
        Ok(cwd)
    }

    async fn new_session(
        &self,
        req: acp::NewSessionRequest,
    ) -> Result<acp::NewSessionResponse, agent_client_protocol::Error> {
        // Nothing is opened or stored yet: the session is stored, and the workspace's service
        // opened, when it is first used (`live_service`).
        let cwd = self.workspace_cwd(&req.cwd)?;
        for server in &req.mcp_servers {
            mcp::server_config(server).map_err(invalid_params)?;
        }
        let id = trellis_protocol::SessionId::new().to_string();
        let config = SessionConfig {
            workflow: self.options.workflow.clone(),
            ..SessionConfig::default()
        };
        let response = acp::NewSessionResponse::new(id.clone())
            .modes(config.modes())
            .config_options(config.options(&self.workflows()));
        let mut session = Session::new(cwd, config, false);
        session.mcp_servers = req.mcp_servers;
        lock(&self.sessions).insert(id.clone(), session);
        tracing::info!(session = %id, "session created");
        Ok(response)
    }

    /// Sets a session's config option, records it, and returns the new settings with every
    /// option as the client should now show it.
    async fn set_config(
        &self,
        session: &acp::SessionId,
        id: &str,
        value: &str,
    ) -> Result<(SessionConfig, Vec<acp::SessionConfigOption>), agent_client_protocol::Error> {
        let flows = self.workflows();
        let (config, recorded) = {
            let mut sessions = lock(&self.sessions);
            let Some(s) = sessions.get_mut(session.0.as_ref()) else {
                return Err(acp::Error::session_not_found(session.clone()).into());
            };
            s.config.set(id, value, &flows).map_err(invalid_params)?;
            (s.config.clone(), s.recorded)
        };
        // A session not stored yet takes its settings along when it is.
        if recorded {
            let service = self.open_service().await?;
            persist_config(&service, session, &config).await?;
        }
        tracing::info!(session = %session, option = id, value, "config option set");
        let options = config.options(&flows);
        Ok((config, options))
    }

    /// Remembers an "always" answer to an approval in the session (and its record).
    pub(crate) async fn remember(
        &self,
        service: &Arc<Service>,
        session: &acp::SessionId,
        key: String,
        allow: bool,
    ) -> Result<(), agent_client_protocol::Error> {
        let config = {
            let mut sessions = lock(&self.sessions);
            let Some(s) = sessions.get_mut(session.0.as_ref()) else {
                return Ok(());
            };
            s.config.approvals.insert(key, allow);
            s.config.clone()
        };
        persist_config(service, session, &config).await
    }

    fn cancel(&self, session: &acp::SessionId) {
        if let Some(turn) = lock(&self.sessions)
            .get(session.0.as_ref())
            .and_then(|s| s.turn.as_ref())
        {
            tracing::info!(session = %session, "turn cancelled by the client");
            turn.cancel();
        }
    }
}
