//! Messages that reach a running agent ([`Inbox`]), and how they enter its conversation.

use trellis_protocol::Message;

/// Where messages sent to a running agent wait until its next model call. The agent drains it,
/// without waiting, before every model call of its loop.
///
/// Implemented for the graph's [`Mailbox`](trellis_graph::Mailbox) (what a node handler
/// passes: `ctx.mailbox`) and for a Tokio unbounded channel's receiver (channel sessions,
/// tests).
pub trait Inbox: Send + Sync {
    /// The next queued message, if one is queued (never waits).
    fn try_recv(&mut self) -> Option<Message>;
}

impl Inbox for trellis_graph::Mailbox {
    fn try_recv(&mut self) -> Option<Message> {
        trellis_graph::Mailbox::try_recv(self)
    }
}

impl Inbox for tokio::sync::mpsc::UnboundedReceiver<Message> {
    fn try_recv(&mut self) -> Option<Message> {
        tokio::sync::mpsc::UnboundedReceiver::try_recv(self).ok()
    }
}

/// Every message queued in `inbox`, as the lines [`received_text`] shows (`sender: text`).
pub(super) fn drain(inbox: &mut Option<Box<dyn Inbox>>) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(inbox) = inbox {
        while let Some(m) = inbox.try_recv() {
            lines.push(match &m.from {
                Some(from) if !from.trim().is_empty() => format!("{from}: {}", m.text),
                _ => m.text,
            });
        }
    }
    lines
}

/// What follows "Message" or "Messages" at the start of a [`received_text`].
const RECEIVED: &str = " from the user while you were working:\n";

/// The user message that delivers `lines` to the model (also what a recorded
/// `MessagesReceived` becomes when a conversation is rebuilt).
pub(super) fn received_text(lines: &[String]) -> String {
    format!(
        "{}{RECEIVED}{}",
        if lines.len() == 1 {
            "Message"
        } else {
            "Messages"
        },
        lines.join("\n")
    )
}

/// Whether `text` is a [`received_text`]: messages that reached the agent while it worked.
pub(crate) fn is_received(text: &str) -> bool {
    ["Message", "Messages"].iter().any(|w| {
        text.strip_prefix(w)
            .is_some_and(|t| t.starts_with(RECEIVED))
    })
}
