//! Wiring: the tokio runtime the ACP client lives on, the agent process, the window.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use iced::Task;

use crate::acp::{self, AgentCommand, Transport};
use crate::app::{App, Message};
use crate::error::{Error, Result};

/// How to start the window.
#[derive(Clone, Debug)]
pub struct Options {
    /// How to start the agent.
    pub agent: AgentCommand,
    /// The workspace (the sessions' `cwd`).
    pub root: PathBuf,
    /// Start a session at once.
    pub new_session: bool,
}

/// Starts the agent on `rt` and turns its events into messages.
fn start(
    rt: &tokio::runtime::Handle,
    agent: &AgentCommand,
    root: &std::path::Path,
) -> (acp::Handle, Task<Message>) {
    let _guard = rt.enter();
    match Transport::spawn(agent) {
        Ok(t) => {
            let t = t.serve_files(root.to_owned());
            let (handle, events) = acp::connect(rt, t);
            (handle, Task::run(events, Message::Acp))
        }
        Err(e) => {
            let (handle, _) = acp::Handle::detached();
            let why = e.to_string();
            (
                handle,
                Task::done(Message::Acp(acp::Event::Disconnected(why))),
            )
        }
    }
}

/// Opens the window; returns when it is closed.
pub fn run(options: Options) -> Result<()> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .thread_name("trellis-desktop-acp")
        .build()
        .map_err(Error::Runtime)?;
    let handle = rt.handle().clone();
    let boot_state = Arc::new(Mutex::new(Some(options)));
    let boot = move || {
        let Some(options) = boot_state.lock().ok().and_then(|mut o| o.take()) else {
            // iced boots once; a second call gets an idle window.
            let (h, _) = acp::Handle::detached();
            return (App::new(h, PathBuf::from(".")), Task::none());
        };
        let (h, events) = start(&handle, &options.agent, &options.root);
        let (rt2, agent, root) = (handle.clone(), options.agent.clone(), options.root.clone());
        let mut app = App::new(h, options.root.clone())
            .with_connector(Box::new(move || start(&rt2, &agent, &root)));
        let first = if options.new_session {
            app.update(Message::NewSession)
        } else {
            Task::none()
        };
        (app, Task::batch([events, first]))
    };
    iced::application(boot, App::update, App::view)
        .title(App::title)
        .theme(App::theme)
        .subscription(App::subscription)
        .scale_factor(|app: &App| app.scale)
        .window_size((1400.0, 860.0))
        .run()
        .map_err(|e| Error::Window(e.to_string()))?;
    drop(rt);
    Ok(())
}
