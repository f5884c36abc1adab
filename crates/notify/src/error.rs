//! What a notification channel can fail with. None of it reaches a run: a failure is
//! reported once (stderr in the CLI) with the setting to fix, and the run goes on.

/// A notification error.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A webhook's settings are wrong.
    #[error("{setting}: {message}")]
    Config {
        /// The setting (`notify.webhooks[0].url`).
        setting: String,
        /// What is wrong and what to do.
        message: String,
    },
    /// The HTTP client could not be built.
    #[error("notify: {0}")]
    Client(#[from] trellis_fetch::Error),
    /// A webhook could not be delivered after its attempts.
    #[error("{attempts} attempts failed, the last: {last}")]
    Undelivered {
        /// Attempts made.
        attempts: u32,
        /// The last attempt's failure (a status, a connection error).
        last: String,
    },
    /// The receiver refused the notification (a 4xx other than 408 and 429: not retried).
    #[error("refused with HTTP {0}")]
    Refused(u16),
    /// The session bus could not be reached or refused the call.
    #[error("session bus: {0}")]
    Bus(String),
}

impl From<zbus::Error> for Error {
    fn from(e: zbus::Error) -> Self {
        Error::Bus(e.to_string())
    }
}

/// A notification result.
pub type Result<T, E = Error> = std::result::Result<T, E>;
