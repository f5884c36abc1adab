//! Desktop notifications on a private session bus (Debian's `dbus-daemon`, installed by
//! scripts/setup.d/77-notify.sh): with a notification server of the test's own owning
//! `org.freedesktop.Notifications` (every field the notifier sends), and with a real
//! notification daemon from Debian (`dunst` on an Xvfb display, read back through its
//! history with `dunstctl`).

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use trellis_notify::desktop::{BUS_ENV, PATH, SERVICE};
use trellis_protocol::{RunId, RunStatus};
use zbus::zvariant::OwnedValue;

use super::common::{Problems, asked, created, notifier, status};

/// A `dbus-daemon --session` of the test's own, stopped when dropped.
struct Bus {
    child: Child,
    address: String,
    _dir: tempdir::Dir,
}

mod tempdir {
    /// A directory removed when dropped.
    pub struct Dir(pub std::path::PathBuf);
    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

impl Bus {
    fn start() -> Bus {
        let dir = std::env::temp_dir().join(format!("trellis-notify-bus-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let mut child = Command::new("dbus-daemon")
            .args(["--session", "--nofork", "--print-address=1"])
            .arg(format!("--address=unix:path={}", dir.join("bus").display()))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("dbus-daemon (Debian package dbus-daemon; scripts/setup.d/77-notify.sh)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Bus {
            child,
            address: line.trim().to_owned(),
            _dir: tempdir::Dir(dir),
        }
    }
}

impl Drop for Bus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `Notify` call as the server received it.
#[derive(Debug, Clone)]
struct Shown {
    app: String,
    summary: String,
    body: String,
    urgency: Option<u8>,
}

struct Server {
    shown: Arc<Mutex<Vec<Shown>>>,
}

#[zbus::interface(name = "org.freedesktop.Notifications")]
impl Server {
    #[allow(clippy::too_many_arguments)]
    async fn notify(
        &self,
        app_name: String,
        _replaces_id: u32,
        _app_icon: String,
        summary: String,
        body: String,
        _actions: Vec<String>,
        hints: HashMap<String, OwnedValue>,
        _expire_timeout: i32,
    ) -> u32 {
        let urgency = hints.get("urgency").and_then(|v| u8::try_from(v).ok());
        let mut shown = self.shown.lock().unwrap();
        shown.push(Shown {
            app: app_name,
            summary,
            body,
            urgency,
        });
        shown.len() as u32
    }
}

#[tokio::test]
async fn a_run_that_needs_input_or_fails_shows_a_desktop_notification() {
    let bus = Bus::start();
    let shown = Arc::new(Mutex::new(Vec::new()));
    let _server = zbus::connection::Builder::address(bus.address.as_str())
        .unwrap()
        .name(SERVICE)
        .unwrap()
        .serve_at(
            PATH,
            Server {
                shown: shown.clone(),
            },
        )
        .unwrap()
        .build()
        .await
        .unwrap();

    let problems = Problems::default();
    let (tx, notifier) = notifier(
        serde_json::json!({"desktop": {"enabled": true, "events": ["input", "failed"]}}),
        &[(BUS_ENV, bus.address.as_str())],
        &problems,
    );
    notifier.set_base_url("http://127.0.0.1:8420".to_owned());
    let run = RunId::from_string("run-desktop-0001");
    tx.send(created(&run, "bugfix"));
    tx.send(asked(&run, 4, "triage", 1, "Which crate?"));
    tx.send(status(&run, 9, RunStatus::Succeeded, None));
    let other = RunId::from_string("run-desktop-0002");
    tx.send(status(&other, 3, RunStatus::Failed, Some("no model")));
    notifier.shutdown(Duration::from_secs(10)).await;

    let shown = shown.lock().unwrap().clone();
    assert_eq!(shown.len(), 2, "input and failed, not finished: {shown:?}");
    assert_eq!(shown[0].app, "Trellis");
    assert_eq!(
        shown[0].summary,
        "Trellis: bugfix run run-desktop-0001 needs input"
    );
    assert_eq!(
        shown[0].body,
        "triage asks: Which crate?\nhttp://127.0.0.1:8420/#/runs/run-desktop-0001"
    );
    assert_eq!(shown[0].urgency, Some(2));
    assert_eq!(shown[1].summary, "Trellis: run run-desktop-0002 failed");
    assert!(shown[1].body.starts_with("no model"), "{shown:?}");
    assert!(problems.lines().is_empty(), "{:?}", problems.lines());
}

#[tokio::test]
async fn without_a_session_bus_desktop_notifications_are_skipped_with_one_line() {
    let problems = Problems::default();
    let (tx, notifier) = notifier(
        serde_json::json!({"desktop": {"enabled": true}}),
        &[],
        &problems,
    );
    let run = RunId::from_string("run-no-bus");
    tx.send(status(&run, 2, RunStatus::Failed, None));
    tx.send(status(&run, 3, RunStatus::Succeeded, None));
    notifier.shutdown(Duration::from_secs(5)).await;
    let lines = problems.lines();
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains(BUS_ENV), "{lines:?}");
}

/// An X display of the test's own (`Xvfb -displayfd`), stopped when dropped.
struct Display {
    child: Child,
    name: String,
}

impl Display {
    fn start() -> Display {
        let mut child = Command::new("Xvfb")
            .args([
                "-displayfd",
                "1",
                "-screen",
                "0",
                "640x480x24",
                "-nolisten",
                "tcp",
            ])
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("Xvfb (Debian package xvfb; scripts/setup.d/77-notify.sh)");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        Display {
            child,
            name: format!(":{}", line.trim()),
        }
    }
}

impl Drop for Display {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `dunstctl ARGS` on `bus`: its stdout.
fn dunstctl(bus: &Bus, args: &[&str]) -> String {
    let out = Command::new("dunstctl")
        .args(args)
        .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
        .output()
        .expect("dunstctl (Debian package dunst; scripts/setup.d/77-notify.sh)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[tokio::test]
async fn a_real_notification_daemon_shows_what_the_run_needs() {
    let bus = Bus::start();
    let display = Display::start();
    let config = std::env::temp_dir().join(format!("trellis-dunstrc-{}", std::process::id()));
    std::fs::write(&config, "[global]\n").unwrap();
    let mut dunst = Command::new("dunst")
        .arg("-config")
        .arg(&config)
        .env("DBUS_SESSION_BUS_ADDRESS", &bus.address)
        .env("DISPLAY", &display.name)
        .env_remove("WAYLAND_DISPLAY")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("dunst (Debian package dunst; scripts/setup.d/77-notify.sh)");
    // dunst owns the name once it is up.
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !dunstctl(&bus, &["is-paused"]).trim().starts_with("false") {
        assert!(std::time::Instant::now() < deadline, "dunst did not start");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    let problems = Problems::default();
    let (tx, notifier) = notifier(
        serde_json::json!({"desktop": {"enabled": true}}),
        &[(BUS_ENV, bus.address.as_str())],
        &problems,
    );
    let run = RunId::from_string("run-dunst-0001");
    tx.send(created(&run, "bugfix"));
    tx.send(asked(&run, 4, "triage", 1, "Which crate?"));
    notifier.shutdown(Duration::from_secs(10)).await;

    // Shown notifications reach the history once closed.
    dunstctl(&bus, &["close-all"]);
    let history: serde_json::Value = serde_json::from_str(&dunstctl(&bus, &["history"])).unwrap();
    let _ = dunst.kill();
    let _ = dunst.wait();
    let _ = std::fs::remove_file(&config);
    let shown = history["data"][0].as_array().cloned().unwrap_or_default();
    assert_eq!(shown.len(), 1, "{history}");
    let field = |name: &str| {
        shown[0][name]["data"]
            .as_str()
            .unwrap_or_default()
            .to_owned()
    };
    assert_eq!(field("appname"), "Trellis");
    assert_eq!(
        field("summary"),
        "Trellis: bugfix run run-dunst-0001 needs input"
    );
    assert!(
        field("body").starts_with("triage asks: Which crate?"),
        "{history}"
    );
    assert!(problems.lines().is_empty(), "{:?}", problems.lines());
}
