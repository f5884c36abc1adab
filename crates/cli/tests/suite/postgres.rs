//! `[store] url`: the binary keeps a workspace's records on a PostgreSQL server (a throwaway
//! cluster on loopback): a run recorded by one command is listed and shown by the next, the
//! password comes from the variable `password_env` names, and wrong settings are refused
//! naming the setting without ever printing the password.

use std::process::Command;

use serde_json::json;
use trellis_test_pg::{Cluster, PASSWORD};

use super::common::{args, json, ok, trellis};

/// `trellis` on `repo` with `[store] url = url` (and `password_env`, when given).
fn on(repo: &std::path::Path, url: &str, password_env: Option<&str>) -> Command {
    let mut c = trellis(repo);
    c.arg("-c").arg(format!("store.url=\"{url}\""));
    if let Some(var) = password_env {
        c.arg("-c").arg(format!("store.password_env=\"{var}\""));
    }
    c
}

fn fails(mut c: Command) -> String {
    let out = c.output().unwrap();
    assert!(!out.status.success(), "{c:?} succeeded");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn runs_are_recorded_on_the_server_and_read_back_by_the_next_command() {
    let cluster = Cluster::shared();
    let db = cluster.database();
    let dir = tempfile::tempdir().unwrap();
    let url = db.url();

    let text = ok(args(on(dir.path(), &url, None), &["demo", "feature"]));
    assert!(text.contains("succeeded at DONE after 9 steps"), "{text}");
    // Nothing was written beside the repository: the records are on the server.
    assert!(!dir.path().join(".trellis/trellis.db").exists());

    // The password from the environment, not the URL.
    let bare = url.replacen(&format!(":{PASSWORD}@"), "@", 1);
    assert_ne!(bare, url);
    let mut list = args(
        on(dir.path(), &bare, Some("TRELLIS_TEST_PG_PASSWORD")),
        &["runs", "list", "--json"],
    );
    list.env("TRELLIS_TEST_PG_PASSWORD", PASSWORD);
    let runs = json(list);
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
    assert_eq!(runs[0]["status"], json!("succeeded"));
    let id = runs[0]["id"].as_str().unwrap().to_owned();

    let show = json(args(
        on(dir.path(), &url, None),
        &["runs", "show", &id[..12], "--json"],
    ));
    assert_eq!(show["outcome"]["state"]["outcome"], json!("DONE"));
    assert_eq!(show["checkpoints"].as_array().map(Vec::len), Some(10));
    let count = db.psql("SELECT count(*) FROM runs");
    assert_eq!(count.trim(), "1");
}

#[test]
fn wrong_settings_are_refused_naming_the_setting_and_never_the_password() {
    let cluster = Cluster::shared();
    let db = cluster.database();
    let dir = tempfile::tempdir().unwrap();

    let wrong = db.url().replacen(PASSWORD, "not-the-password", 1);
    let err = fails(args(on(dir.path(), &wrong, None), &["runs", "list"]));
    assert!(err.contains("[store] url"), "{err}");
    assert!(!err.contains("not-the-password"), "{err}");

    let bare = db.url().replacen(&format!(":{PASSWORD}@"), "@", 1);
    let mut unset = args(
        on(dir.path(), &bare, Some("TRELLIS_NO_SUCH_VAR")),
        &["runs", "list"],
    );
    unset.env_remove("TRELLIS_NO_SUCH_VAR");
    let err = fails(unset);
    assert!(
        err.contains("password_env = \"TRELLIS_NO_SUCH_VAR\""),
        "{err}"
    );

    let free = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let unreachable = format!("postgres://trellis:{PASSWORD}@127.0.0.1:{free}/x");
    let err = fails(args(on(dir.path(), &unreachable, None), &["runs", "list"]));
    assert!(err.contains("[store] url"), "{err}");
    assert!(!err.contains(PASSWORD), "{err}");
    // Nothing was created in the repository by any of these.
    assert!(!dir.path().join(".trellis").exists());
}
