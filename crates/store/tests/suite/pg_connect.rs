//! A `[store] url` that cannot work is refused with a message naming the setting, without
//! its password: a wrong URL, a wrong password, a missing database, a port nothing listens
//! on.

use std::net::TcpListener;
use std::time::{Duration, Instant};

use trellis_store::Error;
use trellis_store::pg::PgError;
use trellis_test_pg::{PASSWORD, USER};

use super::pg_support::{cluster, connect_error};

/// A password no test cluster has, to look for in messages.
const SECRET: &str = "hunter2-do-not-print";

/// Checks the message of `err`: names the setting, shows `***` where the password was, and
/// never the password.
fn check_message(err: &Error, wants: &[&str]) -> String {
    let msg = err.to_string();
    assert!(msg.contains("[store] url"), "{msg}");
    for want in wants {
        assert!(msg.contains(want), "{want}: {msg}");
    }
    assert!(!msg.contains(SECRET) && !msg.contains(PASSWORD), "{msg}");
    msg
}

#[test]
fn a_wrong_password_is_refused_without_printing_it() {
    let cluster = cluster();
    let db = cluster.database();
    let url = db.url().replace(PASSWORD, SECRET);
    let err = connect_error(&url);
    assert!(
        matches!(&err, Error::Postgres(PgError::Auth { .. })),
        "{err:?}"
    );
    check_message(
        &err,
        &[
            "password authentication failed",
            "check the user name and password",
            &format!(
                "postgres://{USER}:***@127.0.0.1:{}/{}",
                cluster.port(),
                db.name()
            ),
        ],
    );
    assert!(!format!("{err:?}").contains(SECRET));
}

#[test]
fn a_url_that_is_not_postgres_is_refused_before_connecting() {
    for (url, wants) in [
        (
            format!("mysql://{USER}:{SECRET}@127.0.0.1/trellis"),
            &["mysql://…", "postgres://"][..],
        ),
        (
            format!("host=127.0.0.1 user={USER} password={SECRET}"),
            &["must start with postgres://"][..],
        ),
        (
            format!("postgres://{USER}:{SECRET}@127.0.0.1:notaport/trellis"),
            &["invalid value for option `port`", "postgres://trellis:***@"][..],
        ),
        (
            format!("postgres://{USER}:{SECRET}@/trellis"),
            &[
                "host and hostaddr are missing",
                "postgres://trellis:***@/trellis",
            ][..],
        ),
        (
            format!("postgres://{USER}:{SECRET}@127.0.0.1/trellis?sslmode=require"),
            &["TLS"][..],
        ),
        (
            format!("postgres://{USER}:{SECRET}@127.0.0.1/trellis?colour=blue"),
            &["unknown option `colour`"][..],
        ),
    ] {
        let err = connect_error(&url);
        assert!(
            matches!(&err, Error::Postgres(PgError::BadUrl { .. })),
            "{url}: {err:?}"
        );
        check_message(&err, wants);
    }
}

#[test]
fn a_port_nothing_listens_on_is_unreachable() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let started = Instant::now();
    let err = connect_error(&format!(
        "postgres://{USER}:{SECRET}@127.0.0.1:{port}/trellis"
    ));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert!(
        matches!(&err, Error::Postgres(PgError::Connect { .. })),
        "{err:?}"
    );
    assert!(err.is_retryable());
    check_message(
        &err,
        &[
            "cannot connect",
            "Connection refused",
            "check that the server is running",
            &format!("127.0.0.1:{port}"),
        ],
    );
}

#[test]
fn a_missing_database_is_named() {
    let cluster = cluster();
    let err = connect_error(&cluster.url("no_such_db"));
    assert!(
        matches!(&err, Error::Postgres(PgError::NoDatabase { database, .. }) if database == "no_such_db"),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    check_message(&err, &["no database \"no_such_db\"", "createdb no_such_db"]);
}
