//! The notifications a backend sends of what other processes commit
//! ([`crate::Backend::watch`]): their text, written and read in one place.

/// One notification of [`crate::Backend::watch`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Notice<'a> {
    /// An append committed to stream `key` ([`trellis_protocol::StreamId`]'s text:
    /// `run:<id>`, `session:<id>`, `workspace`) up to `seq`.
    Appended {
        /// The stream's key.
        key: &'a str,
        /// The last seq appended.
        seq: u64,
    },
    /// A run was marked runnable ([`crate::LeaseStore::set_runnable`]).
    Runnable,
    /// A command was queued for this run.
    Queued(&'a str),
    /// Notifications may have been missed: re-read what you follow.
    Missed,
}

impl<'a> Notice<'a> {
    /// The text a backend sends for this notice.
    pub fn text(&self) -> String {
        match self {
            Notice::Appended { key, seq } => format!("{key} {seq}"),
            Notice::Runnable => "runnable".to_owned(),
            Notice::Queued(run) => format!("inbox:{run}"),
            Notice::Missed => "*".to_owned(),
        }
    }

    /// Reads a notification's text; `None` for one this binary does not know.
    pub fn parse(text: &'a str) -> Option<Self> {
        match text {
            "*" => Some(Notice::Missed),
            "runnable" => Some(Notice::Runnable),
            _ => match text.strip_prefix("inbox:") {
                Some(run) => Some(Notice::Queued(run)),
                None => {
                    let (key, seq) = text.rsplit_once(' ')?;
                    Some(Notice::Appended {
                        key,
                        seq: seq.parse().ok()?,
                    })
                }
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Notice;

    #[test]
    fn notices_read_back_what_they_write() {
        for n in [
            Notice::Appended {
                key: "session:run-1:analysis",
                seq: 42,
            },
            Notice::Runnable,
            Notice::Queued("run-1"),
            Notice::Missed,
        ] {
            assert_eq!(Notice::parse(&n.text()), Some(n));
        }
        assert_eq!(Notice::parse("workspace x"), None);
    }
}
