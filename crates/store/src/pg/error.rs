//! The PostgreSQL backend's errors, and the redaction of `[store] url`.
//!
//! Every message names the setting, `[store] url`, with the URL as [`redact`] prints it: the
//! password replaced by `***` wherever a URL can carry one. Nothing here prints the URL as
//! given.

use tokio_postgres::error::SqlState;

/// Errors of the PostgreSQL backend; a store operation answers them as
/// [`crate::Error::Postgres`].
#[derive(Debug, thiserror::Error)]
pub enum PgError {
    /// `[store] url` is not a PostgreSQL URL tokio-postgres understands.
    #[error(
        "[store] url = \"{url}\" is not a usable PostgreSQL URL: {detail}; write it as \
         postgres://USER:PASSWORD@HOST:PORT/DATABASE"
    )]
    BadUrl {
        /// The setting, redacted.
        url: String,
        /// What is wrong with it.
        detail: String,
    },
    /// The server could not be reached, or did not accept the connection for a reason other
    /// than the credentials or the database name.
    #[error(
        "cannot connect to the PostgreSQL server of [store] url = \"{url}\": {detail}; check \
         that the server is running and that the host and port in the setting are right"
    )]
    Connect {
        /// The setting, redacted.
        url: String,
        /// What the client or the server said.
        detail: String,
    },
    /// The server refused the user or the password.
    #[error(
        "the PostgreSQL server refused the login of [store] url = \"{url}\": {detail}; check the \
         user name and password in the setting (and the server's pg_hba.conf)"
    )]
    Auth {
        /// The setting, redacted.
        url: String,
        /// What the server said.
        detail: String,
    },
    /// The database named by the URL does not exist.
    #[error(
        "the PostgreSQL server of [store] url = \"{url}\" has no database \"{database}\"; create \
         it (createdb {database}) or fix the database name in the setting"
    )]
    NoDatabase {
        /// The setting, redacted.
        url: String,
        /// The database's name.
        database: String,
    },
    /// The database was migrated by a newer trellis.
    #[error(
        "the PostgreSQL database of [store] url = \"{url}\" was migrated by a newer trellis \
         (schema version {found}, this binary knows up to {supported}); upgrade trellis, or \
         point the setting at another database"
    )]
    NewerSchema {
        /// The setting, redacted.
        url: String,
        /// The schema version recorded in the database.
        found: i64,
        /// The newest schema version this binary knows.
        supported: i64,
    },
    /// A schema migration failed (nothing of it was applied).
    #[error(
        "cannot migrate the PostgreSQL database of [store] url = \"{url}\" to schema version \
         {version} ({name}): {detail}; the database is unchanged — check that it is trellis's \
         own (an empty database, or one only trellis wrote) and report this"
    )]
    Migration {
        /// The setting, redacted.
        url: String,
        /// The migration's version.
        version: i64,
        /// The migration's name.
        name: &'static str,
        /// What the server said.
        detail: String,
    },
    /// A statement failed.
    #[error("PostgreSQL store [store] url = \"{url}\": {detail}")]
    Query {
        /// The setting, redacted.
        url: String,
        /// What the client or the server said.
        detail: String,
        /// The client's error, for its SQLSTATE code.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A write transaction failed to begin or to commit; nothing of it was written (every
    /// write it held fails with this).
    #[error(
        "PostgreSQL store [store] url = \"{url}\": the write transaction failed ({detail}); \
         nothing of it was written"
    )]
    Transaction {
        /// The setting, redacted.
        url: String,
        /// What the client or the server said.
        detail: String,
        /// The client's error, for its SQLSTATE code.
        #[source]
        source: tokio_postgres::Error,
    },
    /// A value exceeds what the store's layout can hold (the SQLite backend's
    /// [`crate::Error::Limit`]).
    #[error("PostgreSQL store [store] url = \"{url}\": {detail}")]
    Limit {
        /// The setting, redacted.
        url: String,
        /// What overflowed.
        detail: String,
    },
    /// A stored event blob could not be decoded (the SQLite backend's
    /// [`crate::Error::Corrupt`]).
    #[error(
        "PostgreSQL store [store] url = \"{url}\": the events of run {run} from seq \
         {first_seq} are corrupt ({detail}); restore the database from a backup or delete the run"
    )]
    Corrupt {
        /// The setting, redacted.
        url: String,
        /// The run.
        run: String,
        /// First seq of the damaged batch.
        first_seq: u64,
        /// What was wrong.
        detail: String,
    },
    /// The store's thread could not be started.
    #[error("cannot start the PostgreSQL store's thread for [store] url = \"{url}\": {source}")]
    Thread {
        /// The setting, redacted.
        url: String,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The store's thread has stopped, or a request ended without an answer (it panicked).
    #[error(
        "the PostgreSQL store of [store] url = \"{url}\" is closed (its thread stopped, or the \
         request ended without an answer)"
    )]
    Closed {
        /// The setting, redacted.
        url: String,
    },
}

impl PgError {
    pub(crate) fn query(url: &str, source: tokio_postgres::Error) -> Self {
        PgError::Query {
            url: url.to_owned(),
            detail: describe(&source),
            source,
        }
    }

    /// A write transaction that failed to begin or commit.
    pub(crate) fn transaction(url: &str, source: tokio_postgres::Error) -> Self {
        PgError::Transaction {
            url: url.to_owned(),
            detail: describe(&source),
            source,
        }
    }

    /// Classifies a failed connection attempt to the database `database`.
    pub(crate) fn connect(url: &str, database: &str, e: &tokio_postgres::Error) -> Self {
        let url = url.to_owned();
        let detail = describe(e);
        match e.code() {
            Some(c) if *c == SqlState::INVALID_CATALOG_NAME => PgError::NoDatabase {
                url,
                database: database.to_owned(),
            },
            Some(c)
                if *c == SqlState::INVALID_PASSWORD
                    || *c == SqlState::INVALID_AUTHORIZATION_SPECIFICATION =>
            {
                PgError::Auth { url, detail }
            }
            Some(_) => PgError::Connect { url, detail },
            // The client's own complaints: `authentication error` (the server asked for a
            // password the URL lacks), `invalid configuration` (no user, no host).
            None if e.to_string().starts_with("authentication") => PgError::Auth { url, detail },
            None if e.to_string().starts_with("invalid configuration") => {
                PgError::BadUrl { url, detail }
            }
            None => PgError::Connect { url, detail },
        }
    }

    /// Whether retrying later may succeed: the server was unreachable or cut the connection,
    /// or a transaction lost a serialization conflict, a deadlock or a lock wait.
    pub fn is_retryable(&self) -> bool {
        match self {
            PgError::Connect { .. } => true,
            PgError::Query { source, .. } | PgError::Transaction { source, .. } => {
                source.is_closed()
                    || source.code().is_some_and(|c| {
                        *c == SqlState::T_R_SERIALIZATION_FAILURE
                            || *c == SqlState::T_R_DEADLOCK_DETECTED
                            || *c == SqlState::LOCK_NOT_AVAILABLE
                            || *c == SqlState::ADMIN_SHUTDOWN
                            || c.code().starts_with("08")
                    })
            }
            _ => false,
        }
    }
}

/// A client error as one line: the server's message (with its detail and hint) for database
/// errors, else the client's message and its causes (`error connecting to server: Connection
/// refused (os error 111)`).
pub(crate) fn describe(e: &tokio_postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut s = format!("{}: {}", db.severity(), db.message());
        if let Some(detail) = db.detail() {
            s.push_str(&format!(" ({detail})"));
        }
        if let Some(hint) = db.hint() {
            s.push_str(&format!("; hint: {hint}"));
        }
        return s;
    }
    let mut s = e.to_string();
    let mut cause = std::error::Error::source(e);
    while let Some(c) = cause {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cause = c.source();
    }
    s
}

/// `url` with its secrets replaced by `***`: the password of a `postgres://` or
/// `postgresql://` URL's user info and the value of a `password` parameter. Of anything
/// else only the scheme is kept (`mysql://…`), since it may be a `key=value` string
/// carrying a password.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = ["postgres://", "postgresql://"]
        .iter()
        .find_map(|p| url.strip_prefix(p).map(|rest| (*p, rest)))
    else {
        return match url.split_once("://") {
            Some((scheme, _)) if !scheme.contains(['=', ' ', '@']) => format!("{scheme}://…"),
            _ => "…".to_owned(),
        };
    };
    let mut out = String::from(scheme);
    // tokio-postgres ends the user info at the first `@`; a password with an unencoded `@`
    // would then leak its tail, so everything up to the last `@` is hidden but the user.
    let rest = match rest.rsplit_once('@') {
        Some((creds, host)) => {
            if creds.contains([':', '/', '?']) {
                let user = creds.split([':', '/', '?']).next().unwrap_or_default();
                out.push_str(&format!("{user}:***@"));
            } else {
                out.push_str(&format!("{creds}@"));
            }
            host
        }
        None => rest,
    };
    let Some((path, params)) = rest.split_once('?') else {
        out.push_str(rest);
        return out;
    };
    out.push_str(path);
    out.push('?');
    let params: Vec<String> = params
        .split('&')
        .map(|p| match p.split_once('=') {
            Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
            _ => p.to_owned(),
        })
        .collect();
    out.push_str(&params.join("&"));
    out
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn passwords_are_redacted() {
        for (url, want) in [
            (
                "postgres://trellis:s3cret@db:5432/trellis",
                "postgres://trellis:***@db:5432/trellis",
            ),
            (
                "postgresql://u:p%40ss@h/d?sslmode=disable&password=x",
                "postgresql://u:***@h/d?sslmode=disable&password=***",
            ),
            ("postgres://u@h/d", "postgres://u@h/d"),
            ("postgres://h/d?password=x", "postgres://h/d?password=***"),
            ("postgres://:pw@h", "postgres://:***@h"),
            ("postgres://u:p@ss@h/d", "postgres://u:***@h/d"),
            ("postgres://h/d?password=x@y/d", "postgres://h:***@y/d"),
            ("mysql://u:pw@h/d", "mysql://…"),
            ("host=h password=pw", "…"),
            ("user=a://b password=pw", "…"),
        ] {
            assert_eq!(redact(url), want, "{url}");
        }
    }
}
