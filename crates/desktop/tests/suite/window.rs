//! The real binary in a real window: `trellis-desktop` on Xvfb (installed by
//! `scripts/setup.d/66-xvfb.sh`) with a stand-in agent that answers `initialize` and stays;
//! a screenshot of the X screen (xwd) must show the window drawn, and is saved as
//! `$CARGO_TARGET_TMPDIR/desktop-xvfb.png`.

use std::io::Read;
use std::os::unix::fs::PermissionsExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Kills and reaps a child when dropped.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An agent that answers `initialize` (echoing the request id) and then idles.
const FAKE_AGENT: &str = r#"#!/bin/sh
read -r line
id=$(printf '%s' "$line" | sed 's/.*"id":\("[^"]*"\|[0-9]*\).*/\1/')
printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":1,"agentCapabilities":{},"authMethods":[],"agentInfo":{"name":"stand-in","title":"Stand-in agent","version":"1.0"}}}\n' "$id"
exec sleep 60
"#;

fn tool(name: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {name}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The screen as PPM (P6): width, height, RGB bytes.
fn grab(display: &str) -> Option<(usize, usize, Vec<u8>)> {
    let out = Command::new("sh")
        .args([
            "-c",
            &format!("xwd -root -silent -display {display} | xwdtopnm 2>/dev/null"),
        ])
        .output()
        .ok()?;
    let b = out.stdout;
    // "P6\n<w> <h>\n255\n" then the pixels.
    let mut fields = Vec::new();
    let mut at = 0;
    while fields.len() < 4 && at < b.len() {
        while at < b.len() && b[at].is_ascii_whitespace() {
            at += 1;
        }
        let start = at;
        while at < b.len() && !b[at].is_ascii_whitespace() {
            at += 1;
        }
        fields.push(String::from_utf8_lossy(&b[start..at]).into_owned());
    }
    if fields.first().map(String::as_str) != Some("P6") {
        return None;
    }
    let (w, h) = (fields[1].parse().ok()?, fields[2].parse().ok()?);
    Some((w, h, b[at + 1..].to_vec()))
}

/// How many colours the screen has (up to 1000), from every 7th pixel: the poll for the first
/// frame must be cheap, or it measures itself (counting all 1.2 million pixels of a blank
/// screen in this debug build took most of the 0.5–1.4 s once reported as the first frame).
fn colours(rgb: &[u8]) -> usize {
    let mut seen = std::collections::HashSet::new();
    for px in rgb.chunks_exact(3).step_by(7) {
        seen.insert([px[0], px[1], px[2]]);
        if seen.len() > 1000 {
            break;
        }
    }
    seen.len()
}

#[test]
fn the_binary_opens_its_window_on_xvfb() {
    for t in ["Xvfb", "xwd", "xwdtopnm", "pnmtopng"] {
        assert!(tool(t), "`{t}` is missing: run scripts/setup.d/66-xvfb.sh");
    }
    let dir = tempfile::tempdir().unwrap();
    let agent = dir.path().join("fake-trellis");
    std::fs::write(&agent, FAKE_AGENT).unwrap();
    std::fs::set_permissions(&agent, std::fs::Permissions::from_mode(0o755)).unwrap();
    std::fs::write(dir.path().join("README.md"), "# A workspace\n").unwrap();

    let display = format!(":{}", 90 + std::process::id() % 400);
    let _xvfb = Reaped(
        Command::new("Xvfb")
            .args([
                display.as_str(),
                "-screen",
                "0",
                "1400x860x24",
                "-nolisten",
                "tcp",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    // The server is up when xwd can read the screen.
    let up = Instant::now();
    while grab(&display).is_none() {
        assert!(
            up.elapsed() < Duration::from_secs(20),
            "Xvfb did not start on {display}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let blank = colours(&grab(&display).unwrap().2);

    let started = Instant::now();
    let mut app = Reaped(
        // `TRELLIS_DESKTOP_BIN` (a release build, to measure its first frame) or this build's.
        Command::new(
            std::env::var_os("TRELLIS_DESKTOP_BIN")
                .unwrap_or_else(|| env!("CARGO_BIN_EXE_trellis-desktop").into()),
        )
        .arg("--repo")
        .arg(dir.path())
        .arg("--agent")
        .arg(&agent)
        .env("DISPLAY", &display)
        .env_remove("WAYLAND_DISPLAY")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap(),
    );
    // Drawn: the screen has the window's many colours (text, buttons) instead of Xvfb's few.
    // Polled back to back: the frame came after the last grab that began without it and
    // before the first that shows it began (a grab takes tens of milliseconds).
    let mut drawn = None;
    let mut before = Duration::ZERO;
    while started.elapsed() < Duration::from_secs(60) {
        if let Some(status) = app.0.try_wait().unwrap() {
            let mut err = String::new();
            let _ = app.0.stderr.take().unwrap().read_to_string(&mut err);
            panic!("trellis-desktop exited ({status}): {err}");
        }
        let at = started.elapsed();
        if let Some((w, h, rgb)) = grab(&display)
            && colours(&rgb) > blank + 20
        {
            drawn = Some((w, h, at));
            break;
        }
        before = at;
        std::thread::sleep(Duration::from_millis(5));
    }
    let (w, h, first) = drawn.expect("the window was not drawn within 60 s");
    assert_eq!((w, h), (1400, 860));
    eprintln!(
        "first frame: drawn after {} ms and before {} ms (screen grabs begun then)",
        before.as_millis(),
        first.as_millis()
    );
    // Let the agent's answer arrive, then keep a screenshot.
    std::thread::sleep(Duration::from_millis(1500));
    let png = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("desktop-xvfb.png");
    let ok = Command::new("sh")
        .args([
            "-c",
            &format!(
                "xwd -root -silent -display {display} | xwdtopnm 2>/dev/null | pnmtopng > {}",
                png.display()
            ),
        ])
        .status()
        .unwrap();
    assert!(ok.success() && std::fs::metadata(&png).unwrap().len() > 10_000);
    assert!(
        app.0.try_wait().unwrap().is_none(),
        "the window is still open"
    );

    // Idle: no redraw loop. CPU time over 3 s, and the resident memory.
    let pid = app.0.id();
    let (cpu0, t0) = (cpu_ticks(pid), Instant::now());
    std::thread::sleep(Duration::from_secs(3));
    let ticks = cpu_ticks(pid) - cpu0;
    // Clock ticks are 100 per second on Linux.
    let busy = ticks as f64 / 100.0 / t0.elapsed().as_secs_f64() * 100.0;
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap()
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .map(str::to_owned)
        .unwrap_or_default();
    eprintln!("idle: {busy:.1} % CPU over 3 s; {rss}");
    assert!(busy < 10.0, "the idle window used {busy:.1} % CPU");
}

/// User + system CPU ticks of `pid` (`/proc/<pid>/stat` fields 14 and 15).
fn cpu_ticks(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // The fields after the command (which may hold spaces) in parentheses.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap()
}
