//! Driving the window from a real agent's events: each event goes through `App::update`
//! until one the test waits for; a failed request or a vanished agent fails the test.

use std::time::Duration;

use futures::StreamExt;
use futures::channel::mpsc::UnboundedReceiver;
use trellis_desktop::acp::Event;
use trellis_desktop::app::{App, Message};

/// Feeds `app` the agent's events until `stop` says one was the last (it is fed too).
pub fn pump(
    rt: &tokio::runtime::Runtime,
    app: &mut App,
    events: &mut UnboundedReceiver<Event>,
    stop: impl Fn(&Event) -> bool,
) {
    loop {
        let e = rt.block_on(async {
            tokio::time::timeout(Duration::from_secs(120), events.next())
                .await
                .expect("no event within 120 s")
                .expect("the event stream ended")
        });
        match &e {
            Event::Failed { message, .. } => panic!("a request failed: {message}"),
            Event::Disconnected(why) => panic!("the agent went away: {why}"),
            _ => {}
        }
        let done = stop(&e);
        let _ = app.update(Message::Acp(e));
        if done {
            return;
        }
    }
}

/// Waits for the connection, opens a session with `open`, sends `prompt` and feeds the window
/// until the agent asks for a permission.
pub fn until_permission(
    rt: &tokio::runtime::Runtime,
    app: &mut App,
    events: &mut UnboundedReceiver<Event>,
    open: impl FnOnce(&mut App),
    prompt: &str,
) {
    pump(rt, app, events, |e| matches!(e, Event::Connected(_)));
    open(app);
    pump(rt, app, events, |e| matches!(e, Event::SessionOpened(_)));
    let _ = app.update(Message::PromptChanged(prompt.into()));
    let _ = app.update(Message::Send);
    pump(rt, app, events, |e| matches!(e, Event::Permission(_)));
}
