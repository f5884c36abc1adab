//! The throwaway cluster starts on loopback, makes databases, refuses a wrong password
//! and is gone once dropped.

// Helpers outside `#[test]` functions panic on setup failures too.
#![allow(clippy::unwrap_used)]
use std::process::Command;

use trellis_test_pg::{Cluster, Durability, PASSWORD};

fn psql_tcp(url: &str, sql: &str) -> std::process::Output {
    Command::new(trellis_test_pg::bindir().join("psql"))
        .args(["-X", "-A", "-t", "-d", url, "-c", sql])
        .output()
        .unwrap()
}

#[test]
fn a_cluster_serves_databases_on_loopback_and_stops_when_dropped() {
    let cluster = Cluster::start(Durability::Fast);
    let port = cluster.port();
    let db = cluster.database();
    let out = psql_tcp(&db.url(), "SELECT current_database(), inet_server_addr()");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{}|127.0.0.1", db.name())
    );
    let listen = cluster.psql("postgres", "SHOW listen_addresses");
    assert_eq!(listen.trim(), "127.0.0.1");

    // A wrong password is refused.
    let wrong = db.url().replace(PASSWORD, "nope");
    let out = psql_tcp(&wrong, "SELECT 1");
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("password authentication failed"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    let name = db.name().to_owned();
    drop(db);
    let left = cluster.psql(
        "postgres",
        &format!("SELECT count(*) FROM pg_database WHERE datname = '{name}'"),
    );
    assert_eq!(left.trim(), "0");

    drop(cluster);
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err());
}
